//! SQL functions: `nl2sql(question [, schemas])`, `nl2sql_explain(question [, schemas,
//! sparsity])`, `turboinfer_info()`, `turboinfer_bench()`.
//!
//! None of them executes the generated SQL (`nl2sql_run()`, in run.rs, does). They run with the
//! caller's rights (SECURITY INVOKER): the schema shown to the model is what the caller may read.

use super::backend::{self, sparse, LoadError, Loaded};
use super::encoding::{Jsonb, Text, TextArray, TextOut};
use super::errors::{raise, report, shown_error, shown_path, SparseFailure};
use super::{
    catalog, catalog_cache, conversation, examples, gucs, progress, slots, track, validate,
    verdict, worker,
};
use crate::model::ModelError;
use crate::nl2sql::{
    Conversation, Engine, ExecuteFn, Hooks, Nl2SqlError, Options, Outcome, PrefixCache, SchemaInfo,
    MAX_QUESTION_CHARS,
};
use crate::platform::runtime::Runtime;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use serde_json::json;
use std::time::Instant;
// Milliseconds since an instant.
use crate::platform::clock::ms_since as ms;

/// The effective sparsity of a call: the argument when given (checked), else the setting.
pub fn target(arg: Option<f64>) -> f64 {
    match arg {
        None => gucs::SPARSITY.get(),
        Some(s) if (0.0..=gucs::MAX_SPARSITY).contains(&s) => s,
        Some(s) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("turboinfer: sparsity {s} is out of range"),
            None,
            Some(format!(
                "Use 0 (off) up to {}, a level calibrated in the model's sidecar.",
                gucs::MAX_SPARSITY
            )),
        ),
    }
}

/// Engine options from the settings; raises the ERROR of a setting above its ceiling.
pub(super) fn options() -> Options {
    gucs::check_limits().unwrap_or_else(|e| report(e));
    Options {
        max_new_tokens: usize::try_from(gucs::MAX_NEW_TOKENS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_MAX_NEW_TOKENS),
        context_tokens: gucs::context_tokens(),
        speculation: gucs::SPECULATION.get(),
        repair_rounds: usize::try_from(gucs::REPAIR_ROUNDS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_REPAIR_ROUNDS),
        repair_tokens: usize::try_from(gucs::REPAIR_TOKENS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_REPAIR_TOKENS),
        refusal: gucs::REFUSAL.get().mode(),
        candidates: usize::try_from(gucs::CANDIDATES.get())
            .unwrap_or(crate::nl2sql::DEFAULT_CANDIDATES),
        samples: usize::try_from(gucs::SAMPLES.get()).unwrap_or(crate::nl2sql::DEFAULT_SAMPLES),
        examples: usize::try_from(gucs::EXAMPLES.get()).unwrap_or(crate::nl2sql::DEFAULT_EXAMPLES),
        schema_tokens: usize::try_from(gucs::SCHEMA_TOKENS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_SCHEMA_TOKENS),
        follow_up_tokens: usize::try_from(gucs::FOLLOW_UP_TOKENS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_FOLLOW_UP_TOKENS),
        ..Options::default()
    }
}

/// A NOTICE when `turboinfer.context_tokens` exceeds the loaded model's training context (the
/// engine caps the KV cache there), once per value and model load.
fn notice_context_cap(loaded: &mut Loaded, opts: &Options) {
    let trained = loaded.engine.model().config().context_length;
    if opts.context_tokens > trained && loaded.context_capped != Some(opts.context_tokens) {
        loaded.context_capped = Some(opts.context_tokens);
        let name =
            loaded.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        pgrx::notice!("turboinfer: turboinfer.context_tokens = {} is capped at {trained} positions, the training context of model {name}", opts.context_tokens);
    }
}

/// Logs the cache file events of `cache`: damage and I/O trouble as WARNING, the rest at DEBUG1.
fn log_cache_events(cache: &mut PrefixCache) {
    for ev in cache.take_events() {
        if ev.warning {
            pgrx::warning!("turboinfer: {}", ev.message);
        } else {
            pgrx::debug1!("turboinfer: {}", ev.message);
        }
    }
}

/// Runs the engine with interrupt checks on the backend thread and the parser as validator;
/// with `conv`, the question is a follow-up of its turns.
fn generate(
    engine: &Engine,
    rt: &Runtime,
    cache: &mut PrefixCache,
    schema: &SchemaInfo,
    question: &str,
    conv: Option<Conversation<'_>>,
    opts: &Options,
) -> Result<Outcome, Nl2SqlError> {
    let mut progress = progress::Reporter::new();
    let mut execute = |sql: &str| super::candidates::result_digest(sql);
    let encoder = gucs::schema_encoder();
    super::embed::with_linker(|linker| {
        let link = encoder.as_deref().map(|encoder| super::embed::slot(linker, encoder));
        let hooks = Hooks {
            validate: &mut |sql| {
                let facts = validate::validate_and_review(sql, schema)?;
                if gucs::RESULT_CHECK.get() {
                    super::result_check::review(sql, &facts, schema)?;
                }
                Ok(())
            },
            execute: gucs::CANDIDATE_EXECUTION.get().then_some(&mut execute as &mut ExecuteFn),
            progress: &mut |p| {
                // Cancel / statement_timeout / termination: raises an ERROR (unwinds) when pending.
                pgrx::check_for_interrupts!();
                progress.on(p);
                true
            },
            link,
        };
        let r = engine.run_turn(rt, cache, schema, question, conv, opts, hooks);
        progress.finish();
        r
    })
}

/// The sparse FFN of one answer: the level asked for and, when on, what it did.
struct SparseUse {
    /// `setting` (turboinfer.sparsity) or `argument` (the explain argument).
    source: &'static str,
    /// Sidecar path and counters when sparse.
    active: Option<(String, f32, crate::sparse::Selector, crate::sparse::Summary)>,
}

/// Everything one answer reports.
struct Answer {
    outcome: Outcome,
    load_ms: f64,
    reloaded: bool,
    schema_ms: f64,
    /// How the schema was read (`catalog_cache`).
    schema_cache: catalog_cache::Use,
    /// Time spent waiting for an inference slot.
    slot_wait_ms: f64,
    model_path: String,
    sparse: SparseUse,
    /// The model's packed weights status (`kx16 (N matrices)` | `none` | `ignored: <reason>`).
    packed: String,
    /// Asked as a follow-up: the earlier turns it was given (the prompt shows the newest
    /// `outcome.follow_up.used`), or why there were none.
    follow_up: Option<Result<Vec<crate::nl2sql::Turn>, &'static str>>,
    /// A client-carried conversation (`Follow::Carried`) after this call: what the token
    /// returned with the answer holds.
    carried: Option<conversation::History>,
}

/// The conversation a call follows.
pub(super) enum Follow {
    /// None: an answered question starts the session's conversation again.
    Fresh,
    /// The session's (`follow_up => true`).
    Session,
    /// The client's (`nl2sql_converse`): its token, or none to start one. The session's
    /// conversation is neither read nor changed.
    Carried(Option<String>),
}

/// What a forward pass reads and how (`turboinfer_info()`'s `weights`): the bytes of one pass,
/// the read-ahead depth, the budget (`turboinfer.weight_budget_mb`) and whether passes stream.
fn weights_json(m: &crate::model::Model) -> serde_json::Value {
    let (advised, stages, pass_bytes) = m.readahead_progress();
    json!({
        "pass_bytes": pass_bytes,
        "stages": stages,
        "stages_advised": advised,
        "readahead_stages": m.readahead(),
        "budget_bytes": m.weight_budget(),
        "streamed": m.streams_weights(),
    })
}

/// The shared body of nl2sql() and nl2sql_explain(); `sparsity` overrides the setting. Every
/// call, answered or raising an ERROR, is counted in turboinfer_stat and logged at
/// turboinfer.log_queries here (`track`).
/// `follow` says which conversation the question follows (`conversation.rs`).
fn answer(
    question: &str,
    schemas: Option<Vec<String>>,
    sparsity: Option<f64>,
    follow: Follow,
) -> Answer {
    track::track(question, || answer_untracked(question, schemas, sparsity, follow), |a| &a.outcome)
}

/// The session's conversation when `follow_up`, else none.
fn session(follow_up: bool) -> Follow {
    if follow_up {
        Follow::Session
    } else {
        Follow::Fresh
    }
}

/// [`answer`] without the bookkeeping.
fn answer_untracked(
    question: &str,
    schemas: Option<Vec<String>>,
    sparsity: Option<f64>,
    follow: Follow,
) -> Answer {
    // Reject a blank question and a malformed token before loading anything.
    if let Err(e) = Engine::clean_question(question) {
        report(e);
    }
    let token = match &follow {
        Follow::Carried(Some(t)) => Some(conversation::decode(t).unwrap_or_else(|e| {
            raise(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("nl2sql_converse: {e}"),
                None,
                Some("Pass the conversation value returned with the previous answer unchanged, or NULL to start a new conversation.".into()),
            )
        })),
        _ => None,
    };
    let opts = options();
    // A model to (re)load loads on a worker while the catalog is read here (the two timings
    // overlap then).
    let read = || {
        let t = Instant::now();
        (catalog::read_schema_keyed(schemas), ms(t))
    };
    let (load_ms, ((mut schema, schema_cache, key), read_ms)) =
        backend::load_beside(read).unwrap_or_else(|e| report(e));
    let reloaded = load_ms.is_some();
    let load_ms = load_ms.unwrap_or(0.0);
    let t1 = Instant::now();
    if opts.examples > 0 {
        let shown = examples::visible(&schema);
        // The cached schema is shared: copied only when there are examples to add to it.
        if !shown.is_empty() || !schema.examples.is_empty() {
            std::rc::Rc::make_mut(&mut schema).examples = shown;
        }
    }
    let schema_ms = read_ms + ms(t1);
    let target = target(sparsity);
    // The model work waits for an inference slot (turboinfer.max_concurrent); the catalog was read
    // before, without one.
    // With the batch worker serving this call, its passes are batched with the other callers'
    // and no inference slot is taken (the worker bounds the work); otherwise the call computes
    // here, after waiting for a slot.
    let remote = backend::with_backend(|b| {
        let (loaded, _, _) = b.model_and_runtime().unwrap_or_else(|e| report(e));
        // The sparse FFN hook is set by `prepare` below; a call that wants one computes here.
        let capacity = loaded.engine.context_capacity(&opts);
        let t = (target == 0.0).then(|| worker::client::transport(&loaded.engine, capacity));
        t.flatten()
    });
    let t2 = Instant::now();
    let slot = if remote.is_none() { Some(slots::acquire()) } else { None };
    let wait_ms = ms(t2);
    let result = backend::with_backend(|b| {
        let out = {
            let (loaded, _, rt) = b.model_and_runtime().unwrap_or_else(|e| report(e));
            let active = sparse::prepare(loaded, target, gucs::SPARSE_SELECTOR.get().engine())
                .unwrap_or_else(|failure| report(SparseFailure { failure, target }));
            notice_context_cap(loaded, &opts);
            let Loaded { engine, cache, path, .. } = loaded;
            cache.set_file_dir(gucs::kv_file_dir());
            cache.set_transport(remote.filter(|_| engine.model().ffn_hook().is_none()));
            let model = path.display().to_string();
            let history = match (&follow, token) {
                (Follow::Session, _) => Some(conversation::for_follow_up(&key, &model)),
                (Follow::Carried(_), Some(c)) => {
                    Some(conversation::follow_carried(c, &key, &model))
                }
                _ => None,
            };
            if let Some(Err(why)) = &history {
                pgrx::notice!(
                    "turboinfer: nothing to follow up ({why}): the question is answered on its own"
                );
            }
            let conv = history.as_ref().and_then(|h| h.as_ref().ok()).map(|h| h.conversation());
            let r = generate(engine, rt, cache, &schema, question, conv, &opts);
            let mut carried = None;
            if let Ok(outcome) = &r {
                let cleaned = Engine::clean_question(question).unwrap_or_default();
                let continued = conv.is_some();
                if let Follow::Carried(_) = follow {
                    let previous = history.as_ref().and_then(|h| h.as_ref().ok()).cloned();
                    carried =
                        conversation::carried_after(previous, &cleaned, outcome, &key, &model);
                } else {
                    conversation::record(&cleaned, outcome, &key, &model, continued);
                }
                if let Some(d) = outcome.follow_up.dropped.filter(|_| continued) {
                    pgrx::notice!("turboinfer: the earlier questions were dropped ({}): the question is answered on its own", d.reason());
                }
            }
            let history = history.map(|h| h.map(|h| h.turns().to_vec()));
            log_cache_events(cache);
            let used = active.map(|a| (shown_path(&a.path), a.level, a.selector, a.summary()));
            (r, model, used, packed_status(engine.model()), history, carried)
        };
        if matches!(out.0, Err(Nl2SqlError::Model(ModelError::FileChanged { .. }))) {
            // The mapping holds garbage (zero pages over a truncated part, or a rewritten file):
            // drop it; the next call maps the file afresh.
            b.loaded = None;
        }
        out
    });
    drop(slot);
    let source = if sparsity.is_some() { "argument" } else { "setting" };
    match result {
        (Ok(outcome), model_path, active, packed, follow_up, carried) => Answer {
            outcome,
            load_ms,
            reloaded,
            schema_ms,
            schema_cache,
            slot_wait_ms: wait_ms,
            model_path,
            sparse: SparseUse { source, active },
            packed,
            follow_up,
            carried,
        },
        (Err(e), ..) => report(e),
    }
}

/// `nl2sql(question, follow_up DEFAULT false)`: a SQL query answering `question` over the
/// tables the caller can see in the current search path; with `follow_up`, in the context of
/// the session's earlier questions (`conversation.rs`). Never executes it.
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker)]
fn nl2sql(question: Text, follow_up: default!(bool, false)) -> TextOut {
    accepted(&question.0, answer(&question.0, None, None, session(follow_up)))
}

/// `nl2sql_converse(question, previous DEFAULT NULL)`: a SQL query answering `question` as
/// `nl2sql(question)` does, in the context of the conversation the client carries: `previous`
/// is the `conversation` value returned with the previous answer (NULL starts a new
/// conversation). One row: the SQL, the conversation to pass with the next follow-up, and the
/// `follow_up` object of `nl2sql_explain`. The server keeps nothing between calls, so clients
/// sharing backends through a pooler never see each other's turns (`conversation.rs`). A NULL
/// question gives no rows.
#[pg_extern(volatile, parallel_unsafe, security_invoker)]
fn nl2sql_converse(
    question: Option<Text>,
    previous: default!(Option<Text>, "NULL"),
) -> TableIterator<
    'static,
    (name!(sql, TextOut), name!(conversation, String), name!(follow_up, Jsonb)),
> {
    let Some(Text(question)) = question else { return TableIterator::new(Vec::new()) };
    let a = answer(&question, None, None, Follow::Carried(previous.map(|p| p.0)));
    let follow_up = follow_up_json(&a);
    let token = a.carried.as_ref().map(conversation::to_token).unwrap_or_default();
    TableIterator::once((accepted(&question, a), token, Jsonb(follow_up)))
}

/// The accepted SQL of an answer to `question` (in the database encoding), or the InvalidSql
/// ERROR; an unsure answer raises what `turboinfer.unsure` asks (`verdict.rs`).
fn accepted(question: &str, a: Answer) -> TextOut {
    let o = a.outcome.into_result().unwrap_or_else(|e| report(e));
    verdict::raise("nl2sql", question, &o, None);
    TextOut(o.sql, "the generated SQL")
}

/// The accepted answer to `question` over the search path, exactly as `nl2sql(question)`
/// produces it (or raises its ERROR), its verdict not yet reported: for `nl2sql_run()` (run.rs),
/// which reports it once it knows the rows.
pub(super) fn accepted_outcome(question: &str, follow_up: bool) -> Outcome {
    answer(question, None, None, session(follow_up))
        .outcome
        .into_result()
        .unwrap_or_else(|e| report(e))
}

/// `nl2sql(question, schemas)`: as `nl2sql(question)` over the given schemas (the first one is
/// written unqualified).
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker, name = "nl2sql")]
fn nl2sql_schemas(question: Text, schemas: TextArray) -> TextOut {
    accepted(&question.0, answer(&question.0, Some(schemas.0), None, Follow::Fresh))
}

/// The explain report of an answer.
fn explain_json(question: &str, a: &Answer) -> serde_json::Value {
    let o = &a.outcome;
    json!({
        "sql": if o.refused() { None } else { Some(&o.sql) },
        "valid": o.error.is_none() && !o.refused(),
        "error": o.error,
        "refused": o.refused(),
        "refusal": o.refusal.filter(|v| v.refused()).map(|v| v.reason(o.prompt.shown.len())),
        "answer_logprob": o.answer_logprob,
        "verdict": (o.error.is_none() && !o.refused())
            .then(|| verdict::json(&verdict::of(question, o, None))),
        "refusal_check": o.refusal.map(|v| json!({
            "margin": v.margin, "matched_words": v.matched, "bar": v.bar(),
            "opening_logprob": v.opening, "skipped": v.margin.is_none(),
        })),
        "question": question,
        "model": a.model_path,
        "model_default": gucs::model_is_default(),
        "fingerprint": o.prompt.fingerprint.hex(),
        "prompt_tokens": o.tokens.prompt,
        "prefix_tokens": o.tokens.prefix,
        "prefill_tokens": o.tokens.prefill,
        "prefix_reused_tokens": o.tokens.reused,
        "schema_cache": a.schema_cache.name(),
        "tables_shown": o.prompt.shown,
        "tables_dropped": o.prompt.dropped,
        "linking": o.prompt.linking.as_ref().map(|l| json!({
            "by": if l.encoder.is_some() { "meaning" } else { "words" },
            "encoder": l.encoder,
            "fallback": l.fallback,
            "tables_embedded": l.embedded,
            "ms": (l.ms * 10.0).round() / 10.0,
            "similarity": l.similarity.iter().map(|s| (*s as f64 * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
        })),
        "examples": o.prompt.examples.iter().map(|&(id, similarity)| json!({
            "id": id, "similarity": (similarity * 1000.0).round() / 1000.0,
        })).collect::<Vec<_>>(),
        "cache": o.prefix_source.name(),
        "model_loaded": a.reloaded,
        "generated_tokens": o.tokens.generated,
        "prompt": o.prompt.text,
        "speculation": o.speculation.on,
        "forward_passes": o.speculation.stats.forward_passes,
        "draft_tokens": o.speculation.stats.draft_tokens,
        "accepted_tokens": o.speculation.stats.accepted_tokens,
        "acceptance_rate": o.acceptance_rate(),
        "constrained_tokens": o.shaping.constrained_tokens,
        "memory": {
            "context_positions": o.memory.positions,
            "kv_cache_bytes": o.memory.kv_cache_bytes,
            "scratch_bytes": o.memory.scratch_bytes,
            "total_bytes": o.memory.total_bytes(),
        },
        "repair_rounds": o.attempts.len().saturating_sub(1),
        "repair_budget": {
            "tokens": o.repair_budget.tokens,
            "decoded": o.repair_budget.decoded,
            "reached": o.repair_budget.reached,
        },
        "candidates": o.candidates.weighed.iter().enumerate().map(|(i, c)| json!({
            "sql": c.sql, "branch_at": c.branch, "sample": c.sample, "mean_logprob": c.mean_logprob,
            "error": c.error, "doubted": c.doubted, "executed": c.digest.is_some(), "chosen": o.candidates.chosen == Some(i),
        })).collect::<Vec<_>>(),
        "attempts": o.attempts.iter().map(|t| json!({
            "raw": t.raw, "sql": t.sql, "generated_tokens": t.generated_tokens,
            "stop": t.stop.name(), "error": t.error, "advisory": t.advisory, "rewritten": t.rewritten, "sqlstate": t.sqlstate,
            "feedback": if t.feedback.is_empty() { None } else { Some(&t.feedback) },
            "forward_passes": t.spec.forward_passes, "draft_tokens": t.spec.draft_tokens,
            "accepted_tokens": t.spec.accepted_tokens,
        })).collect::<Vec<_>>(),
        "follow_up": follow_up_json(a),
        "sparsity": sparse_json(&a.sparse),
        "packed": a.packed,
        "timings_ms": {
            "load": a.load_ms,
            "schema": a.schema_ms,
            "slot_wait": a.slot_wait_ms,
            "prompt": o.timings.prompt_ms,
            "prefill": o.timings.prefill_ms,
            "decode": o.timings.decode_ms,
            "validate": o.timings.validate_ms,
            "cache_file": o.timings.cache_file_ms,
            "execute": o.timings.execute_ms,
            "refusal": o.timings.refusal_ms,
        },
    })
}

/// The explain report's `follow_up` object: whether the question was asked as a follow-up, the
/// earlier turns its prompt shows (question and SQL, oldest first), why there were none, and the
/// prompt tokens whose cache rows the previous call left (not prefilled again).
fn follow_up_json(a: &Answer) -> serde_json::Value {
    let f = a.outcome.follow_up;
    let (turns, dropped) = match &a.follow_up {
        None => (&[][..], None),
        Some(Err(why)) => (&[][..], Some(*why)),
        Some(Ok(turns)) => (&turns[turns.len() - f.used.min(turns.len())..], None),
    };
    json!({
        "asked": a.follow_up.is_some(),
        "turns": turns.iter().map(|t| json!({ "question": t.question, "sql": t.sql })).collect::<Vec<_>>(),
        "dropped": dropped.or(f.dropped.map(|d| d.reason())),
        "reused_tokens": f.reused_tokens,
    })
}

/// The explain report's `sparsity` object: the level, where it came from and, when sparse, the
/// sidecar and this call's counters (tokens through the sparse FFN, neurons computed / neurons,
/// dense fallbacks / token-layers, time in the sparse FFN).
fn sparse_json(s: &SparseUse) -> serde_json::Value {
    match &s.active {
        None => json!({ "level": 0.0, "source": s.source }),
        Some((sidecar, level, selector, m)) => json!({
            "level": sparse::round_level(*level),
            "source": s.source,
            "selector": match selector { crate::sparse::Selector::Predictor => "predictor", crate::sparse::Selector::Gate => "gate" },
            "sidecar": sidecar,
            "tokens": m.tokens,
            "predicted_active_ratio": m.predicted_active_ratio,
            "fallback_rate": m.fallback_rate,
            "ffn_ms": m.ffn_ms,
        }),
    }
}

/// `nl2sql_explain(question, schemas DEFAULT NULL, sparsity DEFAULT NULL, follow_up DEFAULT
/// false)`: the answer plus how it was produced (prompt size, fingerprint, tables shown/dropped,
/// cache hit, tokens, sparse FFN, the earlier turns of a follow-up, per-phase timings) as jsonb.
/// `schemas` NULL: the search path; `sparsity` NULL: the `turboinfer.sparsity` setting (0 =
/// dense for this call); `follow_up` NULL: false. A NULL question gives NULL.
#[pg_extern(volatile, parallel_unsafe, security_invoker, name = "nl2sql_explain")]
fn nl2sql_explain_sparse(
    question: Option<Text>,
    schemas: default!(Option<TextArray>, "NULL"),
    sparsity: default!(Option<f64>, "NULL"),
    follow_up: default!(Option<bool>, false),
) -> Option<Jsonb> {
    let question = question?.0;
    let a = answer(&question, schemas.map(|s| s.0), sparsity, session(follow_up.unwrap_or(false)));
    Some(Jsonb(explain_json(&question, &a)))
}

/// `turboinfer_info()`: the configured model (loading it if needed), its shape and quantization
/// types, the kernel tier, mapped bytes, threads and cache statistics, as jsonb.
#[pg_extern(volatile, parallel_unsafe, security_invoker)]
fn turboinfer_info() -> Jsonb {
    let setting = gucs::model_setting();
    let info = backend::with_backend(|b| {
        let threads = b.runtime().map(|r| r.n_threads()).ok();
        match b.model() {
            Ok((l, _)) => {
                let sparse = sparse_info(l);
                let cfg = l.engine.model().config();
                let file = l.engine.model().file();
                let mut quant: std::collections::BTreeMap<String, usize> = Default::default();
                for t in file.tensors() {
                    *quant.entry(t.ty.to_string()).or_default() += 1;
                }
                let stats = l.cache.stats();
                json!({
                    "model_setting": setting,
                    "model_default": gucs::model_is_default(),
                    "model_path": l.path.display().to_string(),
                    "loaded": true,
                    "arch": cfg.arch.name(),
                    "n_layers": cfg.n_layers,
                    "dim": cfg.dim,
                    "n_heads": cfg.n_heads,
                    "n_kv_heads": cfg.n_kv_heads,
                    "vocab_size": cfg.vocab_size,
                    "context_length": cfg.context_length,
                    "tensor_types": quant,
                    "mapped_bytes": file.len(),
                    "load_ms": l.load_ms,
                    "kernel_tier": kernel_tier(),
                    "packed": packed_status(l.engine.model()),
                    "packed_matrices": l.engine.model().packed_matrices(),
                    "packed_bytes": l.engine.model().packed_bytes(),
                    "weights": weights_json(l.engine.model()),
                    "threads": threads,
                    "cache": {
                        "hits": stats.hits,
                        "misses": stats.misses,
                        "partial": stats.partial,
                        "file_hits": stats.file_hits,
                        "file_writes": stats.file_writes,
                        "file_errors": stats.file_errors,
                        "capacity_tokens": l.cache.capacity(),
                        "prefix_fingerprint": l.cache.fingerprint().map(|f| f.hex()),
                    },
                    "sparse": sparse,
                    "rss_bytes": backend::rss_bytes(),
                    "max_question_chars": MAX_QUESTION_CHARS,
                    "cache_files": cache_files_json(),
                    "slots": slots::info(),
                    "batch_worker": worker::info(),
                    "background_prepare": super::prepare_locks::info(),
                })
            }
            Err(e) => json!({
                "model_setting": setting,
                "model_default": gucs::model_is_default(),
                "loaded": false,
                "error": match e {
                    LoadError::Path(p) => p.to_string(),
                    LoadError::Engine(_, e) => e.to_string(),
                    LoadError::Runtime(m) => m,
                    LoadError::Limit(l) => l.message(),
                },
                "kernel_tier": kernel_tier(),
                "threads": threads,
                "cache_files": cache_files_json(),
                "slots": slots::info(),
                "batch_worker": worker::info(),
                "background_prepare": super::prepare_locks::info(),
            }),
        }
    });
    Jsonb(info)
}

/// The sparse FFN state of the loaded model: the setting, the sidecar nl2sql() would use (path
/// for superusers), its levels, or why there is none.
fn sparse_info(l: &mut Loaded) -> serde_json::Value {
    let setting = gucs::SPARSITY.get();
    match sparse::sidecar(l) {
        Ok((path, sc)) => json!({
            "sparsity": setting,
            "sidecar": shown_path(&path),
            "levels": sc.spec().levels.iter().map(|&x| sparse::round_level(x)).collect::<Vec<_>>(),
            "rank": sc.spec().rank,
            "bytes": sc.len_bytes(),
            "attached": !l.engine.ffn_tag().is_empty(),
        }),
        Err(sparse::Failure::Missing { .. }) => json!({ "sparsity": setting, "sidecar": null }),
        Err(sparse::Failure::Open { path, error }) => {
            json!({ "sparsity": setting, "sidecar": shown_path(&path), "error": shown_error(&path, &error) })
        }
        Err(sparse::Failure::Uncalibrated { .. }) => {
            unreachable!("sidecar() does not check levels")
        }
    }
}

/// The cache file directory's settings and content: `{dir, max_bytes, files, bytes}` (the
/// directory is only shown to superusers), or `{enabled: false}`.
fn cache_files_json() -> serde_json::Value {
    match gucs::kv_file_dir() {
        None => json!({ "enabled": false }),
        Some(d) => {
            let st = d.stats();
            // SAFETY: superuser() only reads the current user's catalog entry.
            let su = unsafe { pg_sys::superuser() };
            json!({
                "enabled": true,
                "dir": if su { Some(d.dir().display().to_string()) } else { None },
                "max_bytes": d.max_bytes(),
                "files": st.files,
                "bytes": st.bytes,
            })
        }
    }
}

/// `turboinfer_cache_clear()`: deletes every schema-prefix cache file and table embeddings file
/// and forgets this backend's in-memory prefix, embeddings and schema cache; returns the number of files
/// deleted. Superuser only. Other backends keep what they hold in memory (a prefix until their
/// schema fingerprint changes).
#[pg_extern(volatile, parallel_unsafe)]
fn turboinfer_cache_clear() -> i64 {
    // SAFETY: superuser() only reads the current user's catalog entry.
    if !unsafe { pg_sys::superuser() } {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "turboinfer: permission denied to clear the cache".into(),
            None,
            Some("Only superusers may call turboinfer_cache_clear().".into()),
        );
    }
    backend::with_backend(|b| {
        if let Some(l) = b.loaded.as_mut() {
            l.cache.invalidate();
        }
    });
    super::embed::with_linker(|l| *l = None);
    catalog_cache::clear();
    gucs::kv_file_dir().map_or(0, |d| {
        (d.clear().files as usize + crate::nl2sql::link_store::clear(d.dir())) as i64
    })
}

/// The model's packed weights status (`kx16 (N matrices)` | `none` | `ignored: <reason>`), the
/// pack's directory left out for roles that are not superusers (as for sparse sidecars).
fn packed_status(model: &crate::model::Model) -> String {
    let status = model.pack_status();
    let s = status.to_string();
    match status {
        crate::model::PackStatus::Ignored { path, .. } => {
            s.replace(&path.display().to_string(), &shown_path(path))
        }
        _ => s,
    }
}

/// The kernel tier the dispatcher chose for this process (`TURBOINFER_KERNELS` or the best the
/// CPU supports), or why none could be chosen.
fn kernel_tier() -> String {
    match crate::kernels::try_kernels() {
        Ok(k) => k.name().to_string(),
        Err(e) => format!("none ({}: {e})", crate::kernels::OVERRIDE_ENV),
    }
}

/// `turboinfer_bench()`: measured figures on this server with the configured model: load time,
/// prefill and decode speed, cold (prefix computed) and warm (prefix reused) nl2sql latency on a
/// built-in two-table schema, the backend's resident memory, and whether packed weights were used.
#[pg_extern(volatile, parallel_unsafe, security_invoker)]
fn turboinfer_bench(
) -> TableIterator<'static, (name!(metric, String), name!(value, f64), name!(unit, String))> {
    let opts = options();
    let _slot = slots::acquire();
    let rows = backend::with_backend(|b| {
        let t = Instant::now();
        let (loaded, reloaded, rt) = b.model_and_runtime().unwrap_or_else(|e| report(e));
        let load_ms = if reloaded { loaded.load_ms } else { ms(t) };
        let target = gucs::SPARSITY.get();
        sparse::prepare(loaded, target, gucs::SPARSE_SELECTOR.get().engine())
            .unwrap_or_else(|failure| report(SparseFailure { failure, target }));
        let threads = rt.n_threads() as f64;
        let run = crate::nl2sql::bench::bench(
            &loaded.engine,
            rt,
            &opts,
            &mut |_| {
                // Cancel / statement_timeout / termination: raises an ERROR (unwinds) when pending.
                pgrx::check_for_interrupts!();
                true
            },
            &mut |sql| validate::validate(sql).map(drop),
        )
        .unwrap_or_else(|e| report(e));
        let model = loaded.engine.model();
        vec![
            ("threads".to_string(), threads, "threads".to_string()),
            (
                "packed_matrices".into(),
                model.packed_matrices() as f64,
                format!("matrices (packed: {})", packed_status(model)),
            ),
            (
                "model_load".into(),
                load_ms,
                if reloaded { "ms (cold load)" } else { "ms (already loaded)" }.into(),
            ),
            ("prefill".into(), run.prefill_tok_s(), "tokens/s".into()),
            ("decode".into(), run.decode_tok_s(), "tokens/s".into()),
            ("nl2sql_cold".into(), run.cold_ms, "ms".into()),
            ("nl2sql_warm".into(), run.warm_ms, "ms".into()),
            ("warm_prefill_tokens".into(), run.warm.tokens.prefill as f64, "tokens".into()),
            ("generated_tokens".into(), run.warm.tokens.generated as f64, "tokens".into()),
            (
                "backend_rss".into(),
                backend::rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0),
                "MiB".into(),
            ),
        ]
    });
    TableIterator::new(rows)
}
