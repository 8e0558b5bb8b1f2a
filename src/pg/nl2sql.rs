//! SQL functions: `nl2sql(question [, schemas])`, `nl2sql_explain(question [, schemas])`,
//! `turboinfer_info()`, `turboinfer_bench()`.
//!
//! None of them executes the generated SQL. They run with the caller's rights (SECURITY
//! INVOKER): the schema shown to the model is what the caller may read.

use super::backend::{self, LoadError, Loaded};
use super::encoding::{for_message, Jsonb, Text, TextArray, TextOut};
use super::{catalog, gucs, slots, sparse, validate};
use crate::model::ModelError;
use crate::nl2sql::model_path::{ModelPathError, MODELS_DIR};
use crate::nl2sql::{
    Engine, Nl2SqlError, Options, Outcome, PrefixCache, SchemaInfo, Table, TableKind,
    MAX_QUESTION_CHARS,
};
use crate::runtime::Runtime;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use serde_json::json;
use std::time::Instant;

/// Raises an ERROR with SQLSTATE `code`, `message`, optional detail and hint (made safe for the
/// database encoding: `encoding::for_message`). Never returns.
pub(super) fn raise(
    code: PgSqlErrorCode,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
) -> ! {
    let mut r = ErrorReport::new(code, for_message(message), "nl2sql");
    if let Some(d) = detail {
        r = r.set_detail(for_message(d));
    }
    if let Some(h) = hint {
        r = r.set_hint(for_message(h));
    }
    r.report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// The HINT of a missing or unset model: the fetch command and how to choose another model.
fn fetch_hint() -> String {
    let set = "or set turboinfer.model to an installed model (as a superuser: SET, or ALTER SYSTEM/DATABASE/ROLE ... SET)";
    if gucs::model_setting().trim().is_empty() {
        format!("RESET turboinfer.model to use the default model ({}), {set}. Install models with: turboinfer-fetch-model [NAME] (as root).", gucs::DEFAULT_MODEL)
    } else if gucs::model_is_default() {
        format!("Install the default model with: turboinfer-fetch-model (as root; make fetch-model in a source tree), {set}.")
    } else {
        format!("Install models with: turboinfer-fetch-model NAME (as root; --list shows the names), {set}.")
    }
}

/// Reports a model loading failure.
pub(super) fn raise_load(e: LoadError) -> ! {
    let fetch = fetch_hint();
    match e {
        LoadError::Path(ModelPathError::NotConfigured) => raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "turboinfer: no model is configured".into(),
            Some("turboinfer.model is empty.".into()),
            Some(fetch),
        ),
        LoadError::Path(ModelPathError::Missing(p)) => raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
            format!("turboinfer: model file \"{p}\" not found"),
            Some(format!(
                "turboinfer.model = '{}'{} resolves inside {MODELS_DIR}.",
                gucs::model_setting(),
                if gucs::model_is_default() { " (the default)" } else { "" }
            )),
            Some(fetch),
        ),
        LoadError::Path(other) => raise(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("turboinfer: {other}"), None, Some(fetch)),
        LoadError::Engine(p, e) => raise(
            PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
            format!("turboinfer: cannot load model \"{}\"", p.display()),
            Some(e.to_string()),
            Some("The file is not a usable GGUF model (truncated, corrupt or unsupported); fetch it again with make fetch-model.".into()),
        ),
        LoadError::Runtime(m) => raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("turboinfer: cannot start worker threads: {m}"), None, None),
        LoadError::Limit(e) => raise_limit(e),
    }
}

/// Reports a resource setting above its ceiling: SQLSTATE 42501 (insufficient_privilege), as
/// for a superuser-only setting: the value is valid, the role may not use it.
pub(super) fn raise_limit(e: gucs::LimitExceeded) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        e.message(),
        Some(e.detail()),
        Some(e.hint()),
    )
}

/// The HINT of an out-of-memory ERROR.
const OOM_HINT: &str =
    "Lower turboinfer.context_tokens (the KV cache grows with it), or give the server more memory.";

/// Reports an engine failure.
fn raise_engine(e: Nl2SqlError) -> ! {
    match e {
        Nl2SqlError::EmptyQuestion => raise(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "nl2sql: the question is empty".into(), None, Some("Ask a question about the data, e.g. nl2sql('how many users?').".into())),
        Nl2SqlError::QuestionTooLong { chars, max } => raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("nl2sql: the question is too long ({chars} characters, limit {max})"),
            None,
            Some("Ask a shorter question.".into()),
        ),
        Nl2SqlError::NoTables => raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            "nl2sql: no tables or views are visible".into(),
            Some("Only tables and views in the search path (or the given schemas) that the current role may SELECT from are shown to the model.".into()),
            Some("Check search_path, pass schemas explicitly (nl2sql(question, ARRAY['myschema'])) or GRANT SELECT.".into()),
        ),
        Nl2SqlError::ContextTooSmall { needed, available } => raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("nl2sql: the context is too small ({needed} tokens needed, {available} available)"),
            None,
            Some("Raise turboinfer.context_tokens or lower turboinfer.max_new_tokens.".into()),
        ),
        Nl2SqlError::InvalidSql { sql, message } => raise(
            PgSqlErrorCode::ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION,
            "nl2sql: the model did not produce a valid query".into(),
            Some(format!("SQL: {sql}\nreason: {message}")),
            Some("Rephrase the question, or use a larger model (turboinfer.model).".into()),
        ),
        Nl2SqlError::Cancelled => raise(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, "nl2sql: cancelled".into(), None, None),
        Nl2SqlError::UnsupportedModel(m) => raise(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, format!("turboinfer: {m}"), None, None),
        Nl2SqlError::OutOfMemory { what, bytes, plan } => raise(
            PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
            format!("turboinfer: out of memory allocating the {what} ({bytes} bytes)"),
            Some(format!(
                "turboinfer.context_tokens gives {} KV cache positions: this call needs about {} MiB ({} bytes of KV cache, {} bytes of scratch) besides the mapped model.",
                plan.positions,
                plan.total_bytes().div_ceil(1 << 20),
                plan.kv_cache_bytes,
                plan.scratch_bytes
            )),
            Some(OOM_HINT.into()),
        ),
        Nl2SqlError::Model(ModelError::OutOfMemory { what, bytes }) => {
            raise(PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, format!("turboinfer: out of memory allocating the {what} ({bytes} bytes)"), None, Some(OOM_HINT.into()))
        }
        Nl2SqlError::Model(ModelError::FileChanged { path }) => raise(
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("turboinfer: the model file {} changed while this call was reading it", path.display()),
            Some("It was overwritten or truncated in place; the answer was discarded and the next call loads the file again.".into()),
            Some("Replace a model (or its .kx16 pack) by rename: copy the new file next to it under a temporary name, then mv it over the old name.".into()),
        ),
        Nl2SqlError::Model(ModelError::ContextFull { needed, capacity }) => raise(
            PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            format!("nl2sql: the context is full ({needed} positions needed, {capacity} available)"),
            None,
            Some("Raise turboinfer.context_tokens.".into()),
        ),
        other => raise(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("turboinfer: {other}"), None, None),
    }
}

/// Engine options from the settings; raises the ERROR of a setting above its ceiling.
fn options() -> Options {
    gucs::check_limits().unwrap_or_else(|e| raise_limit(e));
    Options {
        max_new_tokens: usize::try_from(gucs::MAX_NEW_TOKENS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_MAX_NEW_TOKENS),
        context_tokens: usize::try_from(gucs::CONTEXT_TOKENS.get()).unwrap_or(4096),
        speculation: gucs::SPECULATION.get(),
        vocab_pruning: gucs::VOCAB_PRUNING.get(),
        schema_constraints: gucs::SCHEMA_CONSTRAINTS.get(),
        repair_rounds: usize::try_from(gucs::REPAIR_ROUNDS.get())
            .unwrap_or(crate::nl2sql::DEFAULT_REPAIR_ROUNDS),
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

/// Milliseconds since `t`.
fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
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

/// Runs the engine with interrupt checks on the backend thread and the parser as validator.
fn generate(
    engine: &Engine,
    rt: &Runtime,
    cache: &mut PrefixCache,
    schema: &SchemaInfo,
    question: &str,
    opts: &Options,
) -> Result<Outcome, Nl2SqlError> {
    engine.run(
        rt,
        cache,
        schema,
        question,
        opts,
        &mut |_| {
            // Cancel / statement_timeout / termination: raises an ERROR (unwinds) when pending.
            pgrx::check_for_interrupts!();
            true
        },
        &mut |sql| validate::validate(sql),
    )
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
    /// Time spent waiting for an inference slot.
    slot_wait_ms: f64,
    model_path: String,
    sparse: SparseUse,
    /// The model's packed weights status (`kx16 (N matrices)` | `none` | `ignored: <reason>`).
    packed: String,
}

/// The shared body of nl2sql() and nl2sql_explain(); `sparsity` overrides the setting.
fn answer(question: &str, schemas: Option<Vec<String>>, sparsity: Option<f64>) -> Answer {
    // Reject a blank question before loading anything.
    if let Err(e) = Engine::clean_question(question) {
        raise_engine(e);
    }
    let opts = options();
    let (load_ms, reloaded) = backend::with_backend(|b| match b.model_and_runtime() {
        Ok((l, reloaded, _)) => (if reloaded { l.load_ms } else { 0.0 }, reloaded),
        Err(e) => raise_load(e),
    });
    let t1 = Instant::now();
    let schema = catalog::read_schema(schemas);
    let schema_ms = ms(t1);
    let target = sparse::target(sparsity);
    // The model work waits for an inference slot (turboinfer.max_concurrent); the catalog was read
    // before, without one.
    let t2 = Instant::now();
    let slot = slots::acquire();
    let wait_ms = ms(t2);
    let result = backend::with_backend(|b| {
        let out = {
            let (loaded, _, rt) = b.model_and_runtime().unwrap_or_else(|e| raise_load(e));
            let active = sparse::prepare(loaded, target, gucs::SPARSE_SELECTOR.get().engine())
                .unwrap_or_else(|f| sparse::raise_failure(f, target));
            notice_context_cap(loaded, &opts);
            let Loaded { engine, cache, path, .. } = loaded;
            cache.set_file_dir(gucs::kv_file_dir());
            let r = generate(engine, rt, cache, &schema, question, &opts);
            log_cache_events(cache);
            let used =
                active.map(|a| (sparse::shown_path(&a.path), a.level, a.selector, a.summary()));
            (r, path.display().to_string(), used, packed_status(engine.model()))
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
        (Ok(outcome), model_path, active, packed) => Answer {
            outcome,
            load_ms,
            reloaded,
            schema_ms,
            slot_wait_ms: wait_ms,
            model_path,
            sparse: SparseUse { source, active },
            packed,
        },
        (Err(e), ..) => raise_engine(e),
    }
}

/// `nl2sql(question)`: a SQL query answering `question` over the tables the caller can see in
/// the current search path. Never executes it.
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker)]
fn nl2sql(question: Text) -> TextOut {
    accepted(answer(&question.0, None, None))
}

/// The accepted SQL of an answer (in the database encoding), or the InvalidSql ERROR.
fn accepted(a: Answer) -> TextOut {
    TextOut(a.outcome.into_result().unwrap_or_else(|e| raise_engine(e)).sql, "the generated SQL")
}

/// `nl2sql(question, schemas)`: as `nl2sql(question)` over the given schemas (the first one is
/// written unqualified).
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker, name = "nl2sql")]
fn nl2sql_schemas(question: Text, schemas: TextArray) -> TextOut {
    accepted(answer(&question.0, Some(schemas.0), None))
}

/// The explain report of an answer.
fn explain_json(question: &str, a: &Answer) -> serde_json::Value {
    let o = &a.outcome;
    json!({
        "sql": o.sql,
        "valid": o.error.is_none(),
        "error": o.error,
        "question": question,
        "model": a.model_path,
        "model_default": gucs::model_is_default(),
        "fingerprint": o.fingerprint.hex(),
        "prompt_tokens": o.prompt_tokens,
        "prefix_tokens": o.prefix_tokens,
        "prefill_tokens": o.prefill_tokens,
        "tables_shown": o.shown,
        "tables_dropped": o.dropped,
        "cache": o.prefix_source.name(),
        "model_loaded": a.reloaded,
        "generated_tokens": o.generated_tokens,
        "prompt": o.prompt,
        "speculation": o.speculation,
        "forward_passes": o.forward_passes,
        "draft_tokens": o.draft_tokens,
        "accepted_tokens": o.accepted_tokens,
        "acceptance_rate": o.acceptance_rate(),
        "vocab_pruning": o.active_vocab.is_some(),
        "active_vocab": o.active_vocab,
        "schema_constraints": o.schema_constraints,
        "constrained_tokens": o.constrained_tokens,
        "memory": {
            "context_positions": o.memory.positions,
            "kv_cache_bytes": o.memory.kv_cache_bytes,
            "scratch_bytes": o.memory.scratch_bytes,
            "total_bytes": o.memory.total_bytes(),
        },
        "repair_rounds": o.attempts.len().saturating_sub(1),
        "attempts": o.attempts.iter().map(|t| json!({
            "raw": t.raw, "sql": t.sql, "generated_tokens": t.generated_tokens,
            "stop": t.stop.name(), "error": t.error, "sqlstate": t.sqlstate,
            "feedback": if t.feedback.is_empty() { None } else { Some(&t.feedback) },
            "forward_passes": t.spec.forward_passes, "draft_tokens": t.spec.draft_tokens,
            "accepted_tokens": t.spec.accepted_tokens,
        })).collect::<Vec<_>>(),
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
        },
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

/// `nl2sql_explain(question, schemas DEFAULT NULL, sparsity DEFAULT NULL)`: the answer plus how
/// it was produced (prompt size, fingerprint, tables shown/dropped, cache hit, tokens, sparse FFN,
/// per-phase timings) as jsonb. `schemas` NULL: the search path; `sparsity` NULL: the
/// `turboinfer.sparsity` setting (0 = dense for this call). A NULL question gives NULL.
#[pg_extern(volatile, parallel_unsafe, security_invoker, name = "nl2sql_explain")]
fn nl2sql_explain_sparse(
    question: Option<Text>,
    schemas: default!(Option<TextArray>, "NULL"),
    sparsity: default!(Option<f64>, "NULL"),
) -> Option<Jsonb> {
    let question = question?.0;
    let a = answer(&question, schemas.map(|s| s.0), sparsity);
    Some(Jsonb(explain_json(&question, &a)))
}

/// The C symbol of the former `nl2sql_explain(question)` (no SQL of its own): a database whose
/// extension was created by an earlier build of this version still points at it, and keeps working
/// until the extension is re-created.
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker, sql = false)]
fn nl2sql_explain(question: Text) -> Jsonb {
    Jsonb(explain_json(&question.0, &answer(&question.0, None, None)))
}

/// The C symbol of the former `nl2sql_explain(question, schemas)` (see [`nl2sql_explain`]).
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker, sql = false)]
fn nl2sql_explain_schemas(question: Text, schemas: TextArray) -> Jsonb {
    let a = answer(&question.0, Some(schemas.0), None);
    Jsonb(explain_json(&question.0, &a))
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
                    "threads": threads,
                    "cache": {
                        "hits": stats.hits,
                        "misses": stats.misses,
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
            "sidecar": sparse::shown_path(&path),
            "levels": sc.spec().levels.iter().map(|&x| sparse::round_level(x)).collect::<Vec<_>>(),
            "rank": sc.spec().rank,
            "bytes": sc.len_bytes(),
            "attached": !l.engine.ffn_tag().is_empty(),
        }),
        Err(sparse::Failure::Missing { .. }) => json!({ "sparsity": setting, "sidecar": null }),
        Err(sparse::Failure::Open { path, error }) => {
            json!({ "sparsity": setting, "sidecar": sparse::shown_path(&path), "error": sparse::shown_error(&path, &error) })
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

/// `turboinfer_cache_clear()`: deletes every schema-prefix cache file and forgets this backend's
/// in-memory prefix; returns the number of files deleted. Superuser only. Other backends keep
/// their in-memory prefix until their schema fingerprint changes.
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
    gucs::kv_file_dir().map_or(0, |d| d.clear().files as i64)
}

/// The model's packed weights status (`kx16 (N matrices)` | `none` | `ignored: <reason>`), the
/// pack's directory left out for roles that are not superusers (as for sparse sidecars).
fn packed_status(model: &crate::model::Model) -> String {
    let status = model.pack_status();
    let s = status.to_string();
    match status {
        crate::model::PackStatus::Ignored { path, .. } => {
            s.replace(&path.display().to_string(), &sparse::shown_path(path))
        }
        _ => s,
    }
}

/// The widest SIMD feature set this CPU offers (what the kernels can dispatch to).
fn kernel_tier() -> String {
    let f = crate::cpu::cpu_features().list();
    let has = |n: &str| f.iter().any(|(name, on)| *name == n && *on);
    ["avx512vnni", "avx512bw", "avx512f", "avx2", "i8mm", "dotprod", "neon"]
        .into_iter()
        .find(|n| has(n))
        .unwrap_or("scalar")
        .to_string()
}

/// The built-in benchmark schema (the fixtures' two tables).
fn bench_schema() -> SchemaInfo {
    let mut users = Table::new("bench", "users", TableKind::Table)
        .column("id", "integer", false)
        .column("name", "text", false)
        .column("email", "text", true)
        .column("country", "text", true)
        .column("created_at", "timestamp without time zone", true);
    users.primary_key = vec!["id".into()];
    let mut orders = Table::new("bench", "orders", TableKind::Table)
        .column("id", "integer", false)
        .column("user_id", "integer", true)
        .column("amount", "numeric(10,2)", true)
        .column("status", "text", true)
        .column("ordered_at", "timestamp without time zone", true);
    orders.primary_key = vec!["id".into()];
    orders.foreign_keys.push(crate::nl2sql::ForeignKey {
        columns: vec!["user_id".into()],
        ref_schema: "bench".into(),
        ref_table: "users".into(),
        ref_columns: vec!["id".into()],
    });
    SchemaInfo::new(vec![users, orders], Some("bench"))
}

/// `turboinfer_bench()`: measured figures on this server with the configured model: load time,
/// prefill and decode speed, cold (prefix computed) and warm (prefix reused) nl2sql latency on a
/// built-in two-table schema, the backend's resident memory, and whether packed weights were used.
#[pg_extern(volatile, parallel_unsafe, security_invoker)]
fn turboinfer_bench(
) -> TableIterator<'static, (name!(metric, String), name!(value, f64), name!(unit, String))> {
    let question = "How many users are there?";
    let schema = bench_schema();
    let opts = options();
    let _slot = slots::acquire();
    let rows = backend::with_backend(|b| {
        let t = Instant::now();
        let (loaded, reloaded, rt) = b.model_and_runtime().unwrap_or_else(|e| raise_load(e));
        let load_ms = if reloaded { loaded.load_ms } else { ms(t) };
        let target = gucs::SPARSITY.get();
        sparse::prepare(loaded, target, gucs::SPARSE_SELECTOR.get().engine())
            .unwrap_or_else(|f| sparse::raise_failure(f, target));
        let threads = rt.n_threads() as f64;
        let mut cache = PrefixCache::new();
        let t1 = Instant::now();
        // Timing only: an answer the parser rejects (a small model) still measures the engine.
        let cold = generate(&loaded.engine, rt, &mut cache, &schema, question, &opts)
            .unwrap_or_else(|e| raise_engine(e));
        let cold_ms = ms(t1);
        let t2 = Instant::now();
        let warm = generate(&loaded.engine, rt, &mut cache, &schema, question, &opts)
            .unwrap_or_else(|e| raise_engine(e));
        let warm_ms = ms(t2);
        let rate = |n: usize, ms: f64| if ms > 0.0 { n as f64 * 1000.0 / ms } else { 0.0 };
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
            (
                "prefill".into(),
                rate(cold.prefill_tokens, cold.timings.prefill_ms),
                "tokens/s".into(),
            ),
            (
                "decode".into(),
                rate(cold.generated_tokens, cold.timings.decode_ms),
                "tokens/s".into(),
            ),
            ("nl2sql_cold".into(), cold_ms, "ms".into()),
            ("nl2sql_warm".into(), warm_ms, "ms".into()),
            ("warm_prefill_tokens".into(), warm.prefill_tokens as f64, "tokens".into()),
            ("generated_tokens".into(), warm.generated_tokens as f64, "tokens".into()),
            (
                "backend_rss".into(),
                backend::rss_bytes().unwrap_or(0) as f64 / (1024.0 * 1024.0),
                "MiB".into(),
            ),
        ]
    });
    TableIterator::new(rows)
}
