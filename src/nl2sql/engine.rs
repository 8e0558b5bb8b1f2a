//! The nl2sql engine: plan the prompt (render, trim, fingerprint), reuse or compute the schema
//! prefix's KV state, prefill the question, then run the answering stages (`stages/`: generate
//! until the statement ends, validate through the caller's validator, repair with the
//! validator's message and catalog facts when it fails, weigh candidate branches).

use super::conversation::{Conversation, Dropped, FollowUp, Turn};
use super::decode::{DecodeLimits, Decoded, SpecStats, Start};
use super::draft::{focus_tokens, Drafter};
use super::error::Nl2SqlError;
use super::examples;
use super::forward::{Forward, PREFILL_CHUNK};
use super::held::Held;
use super::hooks::Hooks;
use super::ident::sanitize_question;
use super::link::{self, LinkReport, LinkSlot, Linking};
use super::memory_plan::MemoryPlan;
use super::options::Options;
use super::outcome::{Outcome, PhaseTimings, PromptSummary, Speculation, TokenCounts};
use super::prefix_cache::{
    common_len, load_prefix_file, store_prefix_file, PrefixCache, PrefixSource,
};
use super::progress::Progress;
use super::prompt::{self, Segments};
use super::refusal;
use super::render::{self, Renderer};
use super::repair::Rejection;
use super::schema::SchemaInfo;
use super::seq::{RemoteSeq, Seq};
use super::shaping::Shaping;
use super::stages::{self, Answer, CallState, REPAIR_RESERVE_TOKENS};
use super::trim;
use crate::generate::fingerprint::Fingerprint;
use crate::generate::kv_file::{self, KvFileKey};
use crate::gguf::GgufFile;
use crate::model::{FfnHook, Model, ModelError};
use crate::platform::clock::ms_since;
use crate::platform::runtime::Runtime;
#[cfg(feature = "sparse")]
use crate::sparse::{self, CalibOptions, CalibReport, LayerData, SidecarSpec, SparseError};
use crate::tokenizer::Tokenizer;
use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Longest question accepted, in characters: a question is a sentence or two; anything longer is
/// more likely a pasted document that would crowd the schema out of the context.
pub const MAX_QUESTION_CHARS: usize = 2000;

/// The prompt of one call.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fingerprint: Fingerprint,
    /// System turn + schema, up to the question.
    pub prefix: Segments,
    pub prefix_ids: Vec<u32>,
    /// The question part: the chosen examples as earlier turns, the question, the start of the
    /// assistant turn (`prompt::question_with_examples`).
    pub question: Segments,
    /// Its tokens.
    pub question_ids: Vec<u32>,
    /// The tokens of the question part without examples (`prompt::question`), when it has some:
    /// what the refusal check reads (`stages::question::prefill`).
    pub plain_question_ids: Option<Vec<u32>>,
    /// How many earlier turns of a conversation (the newest) the question part shows after the
    /// examples (`conversation.rs`): 0 for a question asked alone.
    pub earlier: usize,
    /// The examples in the question part (`SchemaInfo::examples`), in prompt order: their ids
    /// and similarity to the question.
    pub examples: Vec<(i64, f64)>,
    /// Qualified names (`schema.table`) of the tables in the prompt, in prompt order.
    pub shown: Vec<String>,
    /// Qualified names of the tables left out for lack of room.
    pub dropped: Vec<String>,
    /// How the shown tables were chosen when not all fit (`None`: all are shown).
    pub linking: Option<LinkReport>,
}

impl Plan {
    /// The whole prompt text (prefix and question part).
    pub fn text(&self) -> String {
        self.prefix.text() + &self.question.text()
    }

    /// What an outcome reports of this prompt.
    fn into_summary(self) -> PromptSummary {
        PromptSummary {
            text: self.text(),
            fingerprint: self.fingerprint,
            shown: self.shown,
            dropped: self.dropped,
            examples: self.examples,
            linking: self.linking,
        }
    }
}

/// A model + tokenizer ready to answer questions.
pub struct Engine {
    model: Model,
    tok: Tokenizer,
    /// Identifies the exact model file (part of every fingerprint).
    identity: String,
    /// Identity of the FFN hook attached to the model ("" = dense): part of every prefix
    /// fingerprint and cache file key, so sparse and dense KV states never mix.
    ffn_tag: String,
    /// The refusal margin measured for this model (`refusal::calibrated_margin`), if any.
    refusal_calibration: Option<f32>,
    /// When the check's turn may be skipped for this model (`refusal::calibrated_skip`).
    refusal_skip: Option<refusal::Skip>,
    /// `max_piece_bytes`, computed on first use.
    max_piece: OnceLock<usize>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("identity", &self.identity)
            .field("ffn_tag", &self.ffn_tag)
            .field("model", &self.model)
            .finish()
    }
}

impl Engine {
    /// Opens the GGUF file at `path` once (one shared mapping for weights and vocabulary) and
    /// attaches its packed weights file when there is a valid one (`Model::attach_default_pack`;
    /// a bad one is reported in `model().pack_status()`, never an error).
    pub fn load(path: &Path, identity: &str) -> Result<Engine, Nl2SqlError> {
        let file = Arc::new(GgufFile::open(path).map_err(crate::model::ModelError::from)?);
        let tok = Tokenizer::from_gguf(&file)?;
        let mut model = Model::from_gguf(file)?;
        model.attach_default_pack();
        Engine::new(model, tok, identity)
    }

    /// An engine over an already loaded model; fails unless the vocabulary has ChatML markers.
    pub fn new(model: Model, tok: Tokenizer, identity: &str) -> Result<Engine, Nl2SqlError> {
        prompt::check_chat_template(&tok)?;
        let cfg = model.config();
        let name = model.file().get_str("general.name").unwrap_or("");
        let refusal_calibration =
            refusal::calibrated_margin(cfg.arch.name(), cfg.n_layers, cfg.dim, name);
        let refusal_skip = refusal::calibrated_skip(cfg.arch.name(), cfg.n_layers, cfg.dim, name);
        Ok(Engine {
            model,
            tok,
            identity: identity.to_string(),
            ffn_tag: String::new(),
            refusal_calibration,
            refusal_skip,
            max_piece: OnceLock::new(),
        })
    }

    /// Bytes of the vocabulary's longest token (at least 1): a text of B bytes is at least
    /// B / this many tokens.
    fn max_piece_bytes(&self) -> usize {
        *self.max_piece.get_or_init(|| {
            (0..self.tok.vocab_size() as u32)
                .map(|t| self.tok.piece(t).len())
                .max()
                .unwrap_or(1)
                .max(1)
        })
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The tokenizer.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tok
    }

    /// Sets the refusal margin and skip rule `auto` uses, in place of the ones measured for the
    /// loaded model (`refusal::calibrated_margin`, `refusal::calibrated_skip`): for a model
    /// measured elsewhere, and for tests of either path on a small model.
    pub fn set_refusal_calibration(&mut self, margin: Option<f32>, skip: Option<refusal::Skip>) {
        (self.refusal_calibration, self.refusal_skip) = (margin, skip);
    }

    /// The model identity string given at load.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Attaches (or with `None` detaches) an FFN hook (e.g. `sparse::load_for`) to the model.
    /// `tag` must identify everything about the hook that changes the forward pass (sidecar
    /// content, level, configuration): it enters every prefix fingerprint and cache file key, so
    /// a prefix computed with one hook is never served to a call with another. `""` = dense.
    pub fn set_ffn_hook(&mut self, hook: Option<Arc<dyn FfnHook>>, tag: &str) {
        assert_eq!(
            hook.is_none(),
            tag.is_empty(),
            "a hook needs a tag (cache keys) and only a hook has one"
        );
        self.model.set_ffn_hook(hook);
        self.ffn_tag = tag.to_string();
    }

    /// Sets the bytes of weights the model may keep resident (`None`: no limit); a model that
    /// reads more per pass streams its weights (`Model::set_weight_budget`). Answers never change.
    pub fn set_weight_budget(&mut self, bytes: Option<usize>) {
        self.model.set_weight_budget(bytes);
    }

    /// The tag of the attached FFN hook ("" when dense).
    pub fn ffn_tag(&self) -> &str {
        &self.ffn_tag
    }

    /// Calibrates a sparse-FFN sidecar on this engine's model (see [`sparse::calibrate_with`]);
    /// the attached hook, if any, is put back afterwards (also when `cancel` unwinds).
    #[cfg(feature = "sparse")]
    pub fn calibrate_sparse(
        &mut self,
        rt: &Runtime,
        texts: &[String],
        opts: &CalibOptions,
        cancel: &dyn Fn(sparse::CalibProgress) -> bool,
    ) -> Result<(SidecarSpec, Vec<LayerData>, CalibReport), SparseError> {
        sparse::calibrate_with(&mut self.model, &self.tok, rt, texts, opts, cancel)
    }

    /// The identity prefixes are fingerprinted with: the model file's, plus the FFN hook's tag
    /// when one is attached (dense fingerprints stay what they were before hooks existed).
    fn prefix_identity(&self) -> std::borrow::Cow<'_, str> {
        if self.ffn_tag.is_empty() {
            std::borrow::Cow::Borrowed(&self.identity)
        } else {
            std::borrow::Cow::Owned(format!("{}|ffn={}", self.identity, self.ffn_tag))
        }
    }

    /// What a cache file must hold to serve as `plan`'s prefix with this model, its options, its
    /// FFN hook and this build's arithmetic (`kernels::numerics_id`: version, numerics revision,
    /// kernel tier).
    pub fn kv_file_key<'a>(&self, plan: &'a Plan) -> KvFileKey<'a> {
        let numerics = format!("{:?} {}", self.model.options(), crate::kernels::numerics_id());
        let model_hash = kv_file::model_hash(&self.prefix_identity(), &numerics);
        KvFileKey { fingerprint: plan.fingerprint, model_hash, prefix_ids: &plan.prefix_ids }
    }

    /// KV positions a cache gets under `opts` (the model's training context bounds it).
    pub fn context_capacity(&self, opts: &Options) -> usize {
        opts.context_tokens.clamp(1, self.model.config().context_length)
    }

    /// The memory a call under `opts` needs beyond the mapped model, with `threads` workers:
    /// the KV cache for [`Engine::context_capacity`] positions and the largest forward pass (a
    /// prompt's last chunk of [`PREFILL_CHUNK`] tokens with the first draft, every draft row
    /// with its logits).
    pub fn memory_plan(&self, opts: &Options, threads: usize) -> MemoryPlan {
        let positions = self.context_capacity(opts);
        let m = &self.model;
        let verify = crate::nl2sql::draft::MAX_DRAFT + 1;
        let scratch = m.scratch_bytes(PREFILL_CHUNK + verify - 1, verify, positions, threads);
        // Each sampled candidate holds its own cache (`stages/samples.rs`), at most as long.
        let caches = 1 + opts.samples;
        MemoryPlan {
            positions,
            kv_cache_bytes: m.kv_cache_bytes(positions).saturating_mul(caches),
            scratch_bytes: scratch,
        }
    }

    /// The newest of `turns` whose earlier-turn prompt text ([`prompt::earlier_turn`]) fits in
    /// `max_tokens`, oldest first.
    fn turns_within<'t>(
        &self,
        turns: &'t [Turn],
        max_tokens: usize,
    ) -> Result<&'t [Turn], Nl2SqlError> {
        let mut total = 0;
        let mut first = turns.len();
        for (i, t) in turns.iter().enumerate().rev() {
            total += prompt::earlier_turn(&t.question, &t.answer).encode(&self.tok)?.len();
            if total > max_tokens {
                break;
            }
            first = i;
        }
        Ok(&turns[first..])
    }

    /// Checks and cleans `question` (one line, not blank, not too long).
    pub fn clean_question(question: &str) -> Result<String, Nl2SqlError> {
        let q = sanitize_question(question);
        if q.is_empty() {
            return Err(Nl2SqlError::EmptyQuestion);
        }
        let chars = q.chars().count();
        if chars > MAX_QUESTION_CHARS {
            return Err(Nl2SqlError::QuestionTooLong { chars, max: MAX_QUESTION_CHARS });
        }
        Ok(q)
    }

    /// Builds the prompt for `question` (already cleaned) over `schema`: renders every table,
    /// trims to the context budget if needed, tokenizes and fingerprints the prefix.
    /// Tables are chosen by the question's words when they do not all fit (`trim.rs`).
    pub fn plan(
        &self,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
    ) -> Result<Plan, Nl2SqlError> {
        self.plan_normalized(&normalized(schema), question, opts, None, None)
    }

    /// [`Engine::plan`] with `link` choosing the tables by meaning when they do not all fit
    /// (what an nl2sql call with that slot would show), on `rt`'s threads; `progress` may
    /// cancel. Runs no forward pass.
    pub fn plan_linked(
        &self,
        rt: &Runtime,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        link: Option<LinkSlot<'_>>,
        progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Plan, Nl2SqlError> {
        let question = Engine::clean_question(question)?;
        let mut link = link;
        let linking = link.as_mut().map(|slot| Linking { rt, slot, progress });
        self.plan_normalized(&normalized(schema), &question, opts, linking, None)
    }

    /// [`Engine::plan`] over a schema already normalized ([`SchemaInfo::normalize`]); with
    /// `link`, tables that do not all fit are chosen by meaning (`link.rs`); with `conv`, the
    /// question follows its earlier turns (the newest within `opts.follow_up_tokens`), and the
    /// examples and tables are chosen by its first question.
    pub(super) fn plan_normalized(
        &self,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        link: Option<Linking<'_, '_>>,
        conv: Option<Conversation<'_>>,
    ) -> Result<Plan, Nl2SqlError> {
        if schema.tables.is_empty() {
            return Err(Nl2SqlError::NoTables);
        }
        let capacity = self.context_capacity(opts);
        // Stored questions are one line like asked ones (a direct INSERT may hold anything).
        let turn = |e: &examples::Example| {
            (sanitize_question(&e.question), examples::statement(&e.sql).to_string())
        };
        // What the examples and (when not all fit) the tables are chosen by: a conversation's
        // first question, so that its turns share their prompt's beginning.
        let chosen_by = conv.map_or(question, |c| c.first_question);
        let earlier = match conv {
            Some(c) => self.turns_within(c.turns, opts.follow_up_tokens)?,
            None => &[],
        };
        let chosen = examples::choose(chosen_by, &schema.examples, opts.examples, |e| {
            let (q, sql) = turn(e);
            prompt::example_turn(&q, &sql).encode(&self.tok).map(|ids| ids.len())
        })?;
        let owned: Vec<(String, String)> =
            chosen.iter().map(|&(i, _)| turn(&schema.examples[i])).collect();
        let pairs: Vec<(&str, &str)> =
            owned.iter().map(|(q, s)| (q.as_str(), s.as_str())).collect();
        let turns: Vec<(&str, &str)> =
            earlier.iter().map(|t| (t.question.as_str(), t.answer.as_str())).collect();
        let question_part = prompt::question_in_conversation(question, &pairs, &turns);
        let question_ids = question_part.encode(&self.tok)?;
        let plain_question_ids = match pairs.is_empty() {
            true => None,
            false => Some(prompt::question(question).encode(&self.tok)?),
        };
        let fixed = prompt::prefix_with_notes("").encode(&self.tok)?.len();
        let reserve = answer_reserve(opts.max_new_tokens, capacity);
        // Each table's block, rendered when first needed: thousands of tables are never all
        // rendered (only those the budget visits).
        let mut blocks = Blocks::new(schema, &self.tok);
        let overhead = fixed + question_ids.len() + reserve;

        // The whole schema, when it can fit: a text of B bytes is at least B / (longest token)
        // tokens, so a schema of thousands of tables is never tokenized whole, nor rendered
        // whole when a lower bound of its bytes already rules it out.
        let can_fit = |bytes: usize| bytes / self.max_piece_bytes() <= capacity;
        // Then the same with the tables rendered without lazy statistics (they only add notes):
        // none are read for a schema that cannot fit, every table's in one go for one that can.
        let fits_bare = |blocks: &Blocks| {
            can_fit(schema.tables.iter().map(render::min_bytes).sum())
                && can_fit(blocks.bare_bytes())
        };
        let all_ids = match fits_bare(&blocks) {
            true => {
                let all: Vec<usize> = (0..schema.tables.len()).collect();
                schema.prefetch_stats(&all);
                let text = blocks.concat(&home_first(schema, all));
                match can_fit(text.len()) {
                    true => {
                        let all_prefix = prompt::prefix_with_notes(&text);
                        let ids = all_prefix.encode(&self.tok)?;
                        Some((all_prefix, ids))
                            .filter(|(_, ids)| ids.len() + question_ids.len() + reserve <= capacity)
                    }
                    false => None,
                }
            }
            false => None,
        };
        let mut linking = None;
        let (shown, prefix, prefix_ids) = match all_ids {
            Some((all_prefix, all_ids)) => {
                (home_first(schema, (0..schema.tables.len()).collect()), all_prefix, all_ids)
            }
            None => {
                let mut budget = capacity.saturating_sub(overhead);
                if opts.schema_tokens > 0 {
                    budget = budget.min(opts.schema_tokens);
                }
                let (order, report) = link::order(schema, chosen_by, link)?;
                linking = Some(report);
                // Token counts of the tables visited only (tokenizing thousands costs seconds).
                let n = schema.tables.len();
                let home = |i: usize| is_home(schema, i);
                // The walk visits the home tables first, then the others in order.
                let (at_home, away): (Vec<usize>, Vec<usize>) =
                    order.iter().partition(|&&i| home(i));
                blocks.visit_in(&[at_home, away].concat());
                loop {
                    let mut sel = trim::select_home_first(
                        &order,
                        n,
                        home,
                        &mut |i| blocks.tokens(i),
                        budget,
                    )?;
                    if sel.shown.is_empty() && opts.schema_tokens > 0 {
                        // A small setting still shows the first table that fits the context.
                        let room = capacity.saturating_sub(overhead);
                        sel = trim::select_counted(&order, n, &mut |i| blocks.tokens(i), room)?;
                    }
                    if sel.shown.is_empty() {
                        let smallest = (0..n)
                            .map(|i| blocks.tokens(i))
                            .try_fold(usize::MAX, |m, c| c.map(|c| m.min(c)))?;
                        return Err(Nl2SqlError::ContextTooSmall {
                            needed: overhead + smallest,
                            available: capacity,
                        });
                    }
                    sel.shown = home_first(schema, sel.shown);
                    let text = blocks.concat(&sel.shown);
                    let prefix = prompt::prefix_with_notes(&text);
                    let ids = prefix.encode(&self.tok)?;
                    let total = ids.len() + question_ids.len() + reserve;
                    if total <= capacity {
                        break (sel.shown, prefix, ids);
                    }
                    // Tokens merged differently across table boundaries: shrink and pick again.
                    budget = budget.saturating_sub(total - capacity);
                }
            }
        };
        let dropped = (0..schema.tables.len())
            .filter(|i| !shown.contains(i))
            .map(|i| schema.tables[i].qualified_name())
            .collect();
        if let Some(r) = linking.as_mut().filter(|r| !r.similarity.is_empty()) {
            r.similarity = shown.iter().map(|&i| r.similarity[i]).collect();
        }
        let fingerprint = Fingerprint::of(&self.prefix_identity(), &prefix.canonical());
        Ok(Plan {
            fingerprint,
            prefix,
            prefix_ids,
            question: question_part,
            question_ids,
            plain_question_ids,
            earlier: earlier.len(),
            examples: chosen.iter().map(|&(i, score)| (schema.examples[i].id, score)).collect(),
            shown: shown.iter().map(|&i| schema.tables[i].qualified_name()).collect(),
            dropped,
            linking,
        })
    }

    /// Answers `question` over `schema`: one generation, validated with `validate` (which returns
    /// why a statement is not acceptable), and at most `opts.repair_rounds` repair rounds, each
    /// showing the rejected SQL, the server's error and the catalog facts of
    /// [`repair::feedback`](super::repair::feedback).
    /// A statement that is still rejected is reported in [`Outcome::error`]
    /// ([`Outcome::into_result`] turns that into [`Nl2SqlError::InvalidSql`]).
    /// `on_progress` runs before every forward pass; returning `false` cancels the call.
    ///
    /// The KV cache is allocated first, fallibly: when the memory cannot be had the call fails
    /// with [`Nl2SqlError::OutOfMemory`] before any work; a later forward-pass buffer that cannot
    /// be had fails the same way (never an abort).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        on_progress: &mut dyn FnMut(Progress) -> bool,
        validate: &mut dyn FnMut(&str) -> Result<(), Rejection>,
    ) -> Result<Outcome, Nl2SqlError> {
        let hooks = Hooks { validate, execute: None, progress: on_progress, link: None };
        self.run_with(rt, cache, schema, question, opts, hooks)
    }

    /// [`Engine::run_with`] for a question asked alone.
    pub fn run_with(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        hooks: Hooks<'_>,
    ) -> Result<Outcome, Nl2SqlError> {
        self.run_turn(rt, cache, schema, question, None, opts, hooks)
    }

    /// [`Engine::run`] with the caller's hooks in one: the validator, the progress report and,
    /// for candidate answers (`opts.candidates` > 1), an executor: `hooks.execute` runs a
    /// validated statement (read-only, the caller's business) and returns a digest of its rows,
    /// equal for equal results, or `None` when it could not run; the candidates whose results
    /// agree most are preferred (see `candidates.rs`).
    ///
    /// The pipeline: the KV buffers, the prompt's plan, the prefix's KV state, the question's
    /// prefill, then the stages (`stages/`) in order over the call's shared `CallState`.
    ///
    /// With `conv`, the question is a follow-up of its earlier turns (`conversation.rs`): they
    /// are in the prompt, the cache rows the previous call left of them are kept, and the
    /// refusal check does not run (it judges a question alone, and a follow-up such as "by
    /// region?" is not one; after earlier exchanges its verdicts are not calibrated). When the
    /// prompt's schema prefix is not the one the turns were asked over, they are dropped and
    /// the question is asked alone (checked as usual); `Outcome::follow_up` says which.
    #[allow(clippy::too_many_arguments)]
    pub fn run_turn(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        question: &str,
        conv: Option<Conversation<'_>>,
        opts: &Options,
        hooks: Hooks<'_>,
    ) -> Result<Outcome, Nl2SqlError> {
        let memory = self.memory_plan(opts, rt.n_threads());
        // Every error of the call passes here once: an allocation that failed is reported with
        // the plan it was part of.
        let with_plan = |e| match e {
            Nl2SqlError::Model(ModelError::OutOfMemory { what, bytes }) => {
                Nl2SqlError::OutOfMemory { what, bytes, plan: memory }
            }
            e => e,
        };
        let pipeline = || -> Result<Outcome, Nl2SqlError> {
            let t0 = Instant::now();
            let question = Engine::clean_question(question)?;
            let capacity = memory.positions;
            // The KV buffers first, so that a context too large for the memory fails before any
            // work.
            self.ready_kv(cache, capacity)?;
            // Normalized once per call: the plan and the tables it shows share it.
            let schema = normalized(schema);
            let mut hooks = hooks;
            let linking = hooks.link.as_mut().map(|slot| Linking {
                rt,
                slot,
                progress: &mut *hooks.progress,
            });
            let mut follow_up = FollowUp { asked: conv.is_some(), ..FollowUp::default() };
            let mut plan = self.plan_normalized(&schema, &question, opts, linking, conv)?;
            if conv.is_some_and(|c| c.fingerprint != plan.fingerprint) {
                // Another schema (or model) than the turns were asked over: the question alone.
                follow_up.dropped = Some(Dropped::SchemaChanged);
                let linking = hooks.link.as_mut().map(|slot| Linking {
                    rt,
                    slot,
                    progress: &mut *hooks.progress,
                });
                plan = self.plan_normalized(&schema, &question, opts, linking, None)?;
            }
            follow_up.used = plan.earlier;
            // The tables the prompt shows (repair constraints and facts).
            let shown = shown_tables(&schema, &plan.shown);
            let mut timings = PhaseTimings { prompt_ms: ms_since(t0), ..Default::default() };
            let (n_prefix, n_question) = (plan.prefix_ids.len(), plan.question_ids.len());
            let t1 = Instant::now();
            let (prefix_source, reused, kept) =
                self.load_prefix(rt, cache, &plan, &mut timings, hooks.progress)?;
            follow_up.reused_tokens = kept;
            let computed = n_prefix - reused;
            timings.prefill_ms += ms_since(t1) - timings.cache_file_ms;
            let kv = cache.kv.as_mut().expect("allocated above");
            // Stage 0: the question, checked first when refusals are on (`stages/question.rs`).
            // A follow-up is not checked (see above).
            let check = opts
                .refusal
                .threshold(self.refusal_calibration)
                .filter(|_| plan.earlier == 0)
                .map(|threshold| stages::question::Check {
                    threshold,
                    shown: &shown,
                    question: &question,
                    // Only with the measured margin (`auto`): `on` checks every question.
                    skip: self.refusal_skip.filter(|_| opts.refusal == refusal::RefusalMode::Auto),
                });
            let speculate = opts.speculation && self.batch_invariant();
            // The question's last tokens wait for the first draft (speculation on); sampled
            // candidates start from the question's logits: then none is left pending.
            let pending = speculate && opts.samples == 0;
            let (start, refusal, prefilled) = stages::question::prefill(
                &self.forward(rt),
                kv,
                &plan.question_ids[kept..],
                plan.plain_question_ids.as_deref(),
                check,
                pending,
                &mut timings,
                hooks.progress,
            )?;
            let question_end = kv.len() + start.pending_len();
            let keep_rows = opts.keep_rows && self.batch_invariant();
            let focus = match speculate {
                true => self.ready_drafter(
                    rt,
                    &mut cache.drafter,
                    &shown,
                    &question,
                    &plan,
                    &mut timings,
                )?,
                false => Vec::new(),
            };
            let drafter = cache.drafter.as_ref().filter(|_| speculate);
            let mut call = CallState {
                forward: self.forward(rt),
                opts,
                shown: &shown,
                kv,
                question_end,
                context: plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect(),
                held: Held::new(question_end, keep_rows),
                drafter: drafter.map(|d| (d, focus.as_slice())),
                shaping: Shaping::plain(),
                question_logits: match (&start, opts.samples > 0) {
                    (Start::Logits(l), true) => l.clone(),
                    _ => Vec::new(),
                },
                next: start,
                hooks,
                timings,
                spec: SpecStats::default(),
                tokens: TokenCounts {
                    prompt: n_prefix + n_question,
                    prefix: n_prefix,
                    prefill: computed + prefilled,
                    reused,
                    generated: 0,
                },
            };
            // The stages, in order (`stages/mod.rs`); none for a refused question.
            let mut answer = Answer::new(opts.repair_tokens);
            if !refusal.is_some_and(|v| v.refused()) {
                stages::repair_loop::run(&mut call, &mut answer)?;
                stages::branches::run(&mut call, &mut answer)?;
            }
            // What the cache holds after the prefix, for the next call's follow-up (rows are
            // kept only when they are bitwise what a prefill computes).
            let after_question = call.held.tokens(call.kv.len()).filter(|_| keep_rows);
            let tail = after_question.map(|t| {
                let mut tail = plan.question_ids[..question_end - n_prefix].to_vec();
                tail.extend_from_slice(t);
                tail
            });
            cache.tail = tail.unwrap_or_default();
            let answer_logprob = super::verdict::answer_logprob(&answer);
            Ok(Outcome {
                follow_up,
                shaping: call.shaping.summary(),
                prompt: plan.into_summary(),
                sql: answer.sql,
                error: answer.error,
                prefix_source,
                tokens: call.tokens,
                attempts: answer.attempts,
                speculation: Speculation { on: speculate, stats: call.spec },
                candidates: answer.candidates,
                repair_budget: answer.budget,
                timings: call.timings,
                memory,
                refusal,
                answer_logprob,
            })
        };
        pipeline().map_err(with_plan)
    }

    /// Makes `slot` hold the drafter of `plan`'s schema prefix (the drafter lives next to the
    /// prefix it was built for; building it counts as prompt time) and returns the question's
    /// focus tokens. Called only when speculation is on: it verifies drafts in batches, exact
    /// only if a batch equals the same tokens one by one, which a sparse FFN hook that keeps
    /// batches dense breaks.
    fn ready_drafter(
        &self,
        rt: &Runtime,
        slot: &mut Option<Drafter>,
        shown: &SchemaInfo,
        question: &str,
        plan: &Plan,
        timings: &mut PhaseTimings,
    ) -> Result<Vec<u32>, Nl2SqlError> {
        if slot.as_ref().is_none_or(|d| d.fingerprint() != Some(plan.fingerprint)) {
            let t = Instant::now();
            let previous = slot.take();
            let d =
                Drafter::for_schema_after(&self.tok, shown, plan.fingerprint, previous, Some(rt))?;
            *slot = Some(d);
            timings.prompt_ms += ms_since(t);
        }
        Ok(focus_tokens(&self.tok, shown, question, &plan.question_ids)?)
    }

    /// Greedy continuation of `prompt` (any text, no chat template): prefills it into `kv`
    /// (emptied first), then generates up to `max_new` tokens, stopping only at an
    /// end-of-generation token or a full cache. With `speculation`, prompt-lookup drafts are
    /// verified in batches; the tokens are the same either way.
    pub fn complete(
        &self,
        rt: &Runtime,
        kv: &mut Seq,
        prompt: &[u32],
        max_new: usize,
        speculation: bool,
    ) -> Result<Decoded, Nl2SqlError> {
        kv.clear();
        let forward = self.forward(rt);
        let speculate = speculation && self.batch_invariant();
        let start = forward.prefill_start(kv, prompt, speculate, &mut |_| true)?;
        let drafter = Drafter::lookup_only();
        let limits = DecodeLimits { max_new, stop_at_statement: false, seed: "", backtrack: 0 };
        forward.decode(
            kv,
            start,
            prompt,
            speculate.then_some((&drafter, &[][..])),
            limits,
            &Shaping::plain(),
            None,
            &mut |_| true,
        )
    }

    /// True when the forward pass gives a batch bitwise the results of its tokens one at a time
    /// (always without an FFN hook; see `FfnHook::batch_invariant`).
    fn batch_invariant(&self) -> bool {
        self.model.ffn_hook().is_none_or(|h| h.batch_invariant())
    }

    /// The forward passes of this engine's model on `rt`.
    fn forward<'a>(&'a self, rt: &'a Runtime) -> Forward<'a> {
        Forward { model: &self.model, tok: &self.tok, rt }
    }
}

/// `schema` normalized ([`SchemaInfo::normalize`]): borrowed when it already is (a schema from
/// the catalog is), else the one copy a call makes.
pub(super) fn normalized(schema: &SchemaInfo) -> Cow<'_, SchemaInfo> {
    if schema.is_normalized() {
        return Cow::Borrowed(schema);
    }
    let mut s = schema.clone();
    s.normalize();
    Cow::Owned(s)
}

/// Tables whose lazy statistics (`SchemaInfo::lazy_stats`) are read together: the one a plan
/// renders and those after it in the order it visits them, so a walk over a big schema costs one
/// catalog query per this many tables, not one per table. As many as the walk's tail of misses
/// (`trim::MAX_MISSES`), the most it visits past the last table that fits.
const STATS_BATCH: usize = trim::MAX_MISSES;

/// The tables' blocks of a plan (`Renderer::table`) and their token counts, each computed when
/// first asked for.
struct Blocks<'a> {
    schema: &'a SchemaInfo,
    renderer: Renderer<'a>,
    tok: &'a Tokenizer,
    /// [table] the rendered block.
    text: Vec<Option<String>>,
    /// [table] the block's tokens on its own.
    tokens: Vec<Option<usize>>,
    /// The order the tables will be visited in ([`Blocks::visit_in`]), and [table] its place
    /// there: whose statistics to read along with a table's.
    order: Vec<usize>,
    place: Vec<usize>,
}

impl<'a> Blocks<'a> {
    fn new(schema: &'a SchemaInfo, tok: &'a Tokenizer) -> Blocks<'a> {
        let n = schema.tables.len();
        Blocks {
            schema,
            renderer: Renderer::new(schema),
            tok,
            text: vec![None; n],
            tokens: vec![None; n],
            order: Vec::new(),
            place: Vec::new(),
        }
    }

    /// Bytes of every table's block rendered without lazy statistics (not kept): a lower
    /// bound of their text with them.
    fn bare_bytes(&self) -> usize {
        self.schema.tables.iter().map(|t| self.renderer.table(t).len()).sum()
    }

    /// The tables will mostly be asked for in `order`.
    fn visit_in(&mut self, order: &[usize]) {
        self.place = vec![usize::MAX; self.text.len()];
        for (p, &i) in order.iter().enumerate() {
            self.place[i] = p;
        }
        self.order = order.to_vec();
    }

    /// Table `i`'s block (its statistics read first, with those of the next tables in the
    /// visiting order not rendered yet).
    fn text(&mut self, i: usize) -> &str {
        if self.text[i].is_none() {
            let mut batch = vec![i];
            if let Some(&p) = self.place.get(i).filter(|&&p| p != usize::MAX) {
                let next = self.order[p + 1..].iter().filter(|&&j| self.text[j].is_none());
                batch.extend(next.take(STATS_BATCH - 1));
            }
            self.schema.prefetch_stats(&batch);
            let t = self.schema.table_with_stats(i);
            self.text[i] = Some(self.renderer.table(&t));
        }
        self.text[i].as_deref().expect("rendered above")
    }

    /// The tokens of table `i`'s block.
    fn tokens(&mut self, i: usize) -> Result<usize, Nl2SqlError> {
        if let Some(n) = self.tokens[i] {
            return Ok(n);
        }
        let n = self.tok.encode(self.text(i), false)?.len();
        self.tokens[i] = Some(n);
        Ok(n)
    }

    /// The blocks of tables `indices`, in that order.
    fn concat(&mut self, indices: &[usize]) -> String {
        indices.iter().map(|&i| self.text(i).to_string()).collect()
    }
}

/// The order tables are shown in: those of the default schema (the search path's first, named
/// unqualified) first, then the others, each group in `schema`'s (normalized) order. The home
/// schema's tables are the ones an unqualified query names, and putting them first makes the
/// prompts of a big schema begin alike from one question to the next (the tables chosen from
/// elsewhere vary), so the next call keeps that beginning's keys and values
/// ([`PrefixCache`]'s partial reuse).
fn home_first(schema: &SchemaInfo, mut indices: Vec<usize>) -> Vec<usize> {
    indices.sort_by_key(|&i| (!is_home(schema, i), i));
    indices
}

/// Whether table `i` lives in the default schema (shown unqualified).
fn is_home(schema: &SchemaInfo, i: usize) -> bool {
    schema.default_schema.as_deref() == Some(schema.tables[i].schema.as_str())
}

/// The tables of the normalized `schema` shown in the prompt (`shown`: qualified names), with
/// their statistics. The chosen examples are in the plan's question part; the stages need only
/// tables.
fn shown_tables(schema: &SchemaInfo, shown: &[String]) -> SchemaInfo {
    let indices: Vec<usize> = (0..schema.tables.len())
        .filter(|&i| shown.contains(&schema.tables[i].qualified_name()))
        .collect();
    schema.subset_with_stats(&indices)
}

impl Engine {
    /// KV buffers of `capacity` positions in `cache`: the ones it has when they have that size;
    /// else the old ones are dropped before new ones are asked for (both would not fit where one
    /// barely does).
    pub(super) fn ready_kv(
        &self,
        cache: &mut PrefixCache,
        capacity: usize,
    ) -> Result<(), Nl2SqlError> {
        let fits = match (&cache.kv, &cache.transport) {
            (Some(Seq::Local(kv)), None) => kv.capacity() == capacity,
            (Some(Seq::Remote(r)), Some(t)) => r.uses(t) && cache.capacity() == capacity,
            _ => false,
        };
        if !fits {
            cache.kv = None;
            cache.prefix = None;
            cache.kv = Some(match cache.transport.clone() {
                Some(t) => Seq::Remote(RemoteSeq::new(t, capacity)),
                None => Seq::Local(self.model.try_new_cache(capacity)?),
            });
        }
        Ok(())
    }

    /// Makes `cache.kv` (allocated) hold the prefix of `plan`, from the first place that has
    /// it: memory (the previous call's prefix), else a cache file, else computed by a prefill
    /// (then stored to a cache file) after the tokens it shares with the previous call's prefix,
    /// which are kept. Returns where it came from, how many positions of the prefix were kept
    /// and, for a follow-up (`plan.earlier` > 0) whose prefix is in memory, how many of its
    /// question part's leading tokens kept the rows the previous call left after the prefix
    /// (its earlier turns: `PrefixCache::tail`; at most all but the last token).
    /// Cache-file time goes to `timings.cache_file_ms`.
    pub(super) fn load_prefix(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        plan: &Plan,
        timings: &mut PhaseTimings,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<(PrefixSource, usize, usize), Nl2SqlError> {
        let n_prefix = plan.prefix_ids.len();
        // What the previous call left after the prefix; valid for this call only (a call that
        // fails leaves none).
        let tail = std::mem::take(&mut cache.tail);
        let in_memory = cache.prefix == Some((plan.fingerprint, n_prefix))
            && cache.kv.as_ref().is_some_and(|kv| kv.len() >= n_prefix);
        if in_memory {
            cache.stats.hits += 1;
            let kv = cache.kv.as_mut().expect("allocated by the caller");
            let kept = match plan.earlier > 0 && kv.len() == n_prefix + tail.len() {
                true => common_len(&tail, &plan.question_ids)
                    .min(plan.question_ids.len().saturating_sub(1)),
                false => 0,
            };
            kv.truncate(n_prefix + kept);
            return Ok((PrefixSource::Memory, n_prefix, kept));
        }
        let identity = self.prefix_identity();
        // At most all but the last token: a prefix equal to the held one is a memory hit above
        // (this keeps the kept part strictly shorter, so something is always computed).
        let mut kept =
            cache.shared_with(&plan.prefix_ids, &identity).min(n_prefix.saturating_sub(1));
        cache.prefix = None; // only a completed prefill or a validated file makes it valid again
        let key = self.kv_file_key(plan);
        let tf = Instant::now();
        let kv = cache.kv.as_mut().expect("allocated by the caller");
        // Cache files hold this process's caches; a batch server shares prefixes by itself.
        // Loading clears the buffers, so a file is tried only when there is one.
        let from_file = match (cache.files.as_ref(), kv.local_mut()) {
            (Some(f), Some(local)) if f.has(&key, local.dtype()) => {
                kept = 0;
                load_prefix_file(f, &key, local, &mut cache.stats, &mut cache.events)
            }
            _ => false,
        };
        timings.cache_file_ms += ms_since(tf);
        let source = if from_file {
            PrefixSource::File
        } else {
            cache.stats.misses += 1;
            if kept > 0 {
                cache.stats.partial += 1;
            }
            kv.truncate(kept);
            let mut schema_progress = |p| {
                on_progress(match p {
                    Progress::Prefill { done, total } => Progress::SchemaPrefill { done, total },
                    p => p,
                })
            };
            self.forward(rt).prefill(kv, &plan.prefix_ids[kept..], &mut schema_progress)?;
            let tf = Instant::now();
            if let (Some(f), Some(kv)) = (cache.files.as_ref(), kv.local()) {
                store_prefix_file(f, &key, kv, &mut cache.stats, &mut cache.events);
            }
            timings.cache_file_ms += ms_since(tf);
            match kept {
                0 => PrefixSource::Computed,
                _ => PrefixSource::Partial,
            }
        };
        cache.prefix = Some((plan.fingerprint, n_prefix));
        cache.held = (plan.prefix_ids.clone(), identity.into_owned());
        Ok((source, if from_file { n_prefix } else { kept }, 0))
    }
}

/// Positions kept free after the prompt: room for an answer and a repair round (repair turn +
/// second answer). An answer budget above a quarter of the context is not reserved in full (it
/// would leave no room for the schema): such answers end at `context_full` instead.
fn answer_reserve(max_new_tokens: usize, capacity: usize) -> usize {
    // The repair turn's share is capped at an eighth of the context, so a small context still
    // has room for a schema (a longer repair turn than fits is simply not run).
    2 * max_new_tokens.min(capacity / 4) + REPAIR_RESERVE_TOKENS.min(capacity / 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_capped_by_the_context() {
        assert_eq!(answer_reserve(128, 8192), 2 * 128 + REPAIR_RESERVE_TOKENS);
        assert_eq!(answer_reserve(4096, 8192), 2 * 2048 + REPAIR_RESERVE_TOKENS);
        assert_eq!(answer_reserve(128, 512), 2 * 128 + 64, "an eighth of a small context");
    }

    #[test]
    fn questions_are_checked() {
        assert!(matches!(Engine::clean_question(" \n\t"), Err(Nl2SqlError::EmptyQuestion)));
        assert_eq!(Engine::clean_question(" how many\nusers? ").unwrap(), "how many users?");
        let long = "x".repeat(MAX_QUESTION_CHARS + 1);
        assert!(
            matches!(Engine::clean_question(&long), Err(Nl2SqlError::QuestionTooLong { chars, max }) if chars == MAX_QUESTION_CHARS + 1 && max == MAX_QUESTION_CHARS)
        );
        assert!(Engine::clean_question(&"x".repeat(MAX_QUESTION_CHARS)).is_ok());
    }
}
