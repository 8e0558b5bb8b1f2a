//! The nl2sql engine: a model and its tokenizer ready to answer questions, and the way in,
//! [`Engine::answer`]: the pipeline of one call as its stages in order (`stages/`: open, plan,
//! prefix, question, drafter, repair_loop, branches, follow_up), each over the call's state.

use super::api::hooks::Hooks;
use super::api::outcome::{Outcome, PhaseTimings};
use super::base::error::Nl2SqlError;
use super::base::memory_plan::MemoryPlan;
use super::base::options::Options;
use super::base::progress::Progress;
use super::check::refusal;
use super::check::rejection::Rejection;
use super::decode::draft::Drafter;
use super::decode::passes::{Forward, PREFILL_CHUNK};
use super::decode::prefix_cache::{PrefixCache, PrefixSource};
use super::decode::seq::Seq;
use super::decode::shaping::Shaping;
use super::decode::sql_decode::{DecodeLimits, Decoded};
use super::plan::conversation::Conversation;
use super::plan::link::{LinkSlot, Linking};
use super::plan::planner::{self, normalized, Plan, Planner};
use super::plan::prompt;
use super::schema::tables::SchemaInfo;
use super::stages::{self, Call, CallState, EngineParts};
use crate::generate::kv_file::KvFileKey;
use crate::gguf::GgufFile;
use crate::model::{FfnHook, Model, ModelError};
use crate::platform::runtime::Runtime;
#[cfg(feature = "sparse")]
use crate::sparse::{self, CalibOptions, CalibReport, LayerData, SidecarSpec, SparseError};
use crate::tokenizer::Tokenizer;
use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, OnceLock};

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
    /// The identity prefixes are fingerprinted with: the model file's, plus the FFN hook's tag
    /// when one is attached (dense fingerprints stay what they were before hooks existed).
    fn prefix_identity(&self) -> Cow<'_, str> {
        if self.ffn_tag.is_empty() {
            Cow::Borrowed(&self.identity)
        } else {
            Cow::Owned(format!("{}|ffn={}", self.identity, self.ffn_tag))
        }
    }

    /// What a cache file must hold to serve as `plan`'s prefix with this model, its options, its
    /// FFN hook and this build's arithmetic (`kernels::numerics_id`: version, numerics revision,
    /// kernel tier).
    pub fn kv_file_key<'a>(&self, plan: &'a Plan) -> KvFileKey<'a> {
        stages::prefix::file_key(&self.model, &self.prefix_identity(), plan)
    }

    /// KV positions a cache gets under `opts` (the model's training context bounds it).
    pub fn context_capacity(&self, opts: &Options) -> usize {
        self.planner().capacity(opts)
    }

    /// The memory a call under `opts` needs beyond the mapped model, with `threads` workers:
    /// the KV cache for [`Engine::context_capacity`] positions and the largest forward pass (a
    /// prompt's last chunk of [`PREFILL_CHUNK`] tokens with the first draft, every draft row
    /// with its logits).
    pub fn memory_plan(&self, opts: &Options, threads: usize) -> MemoryPlan {
        let positions = self.context_capacity(opts);
        let m = &self.model;
        let verify = crate::nl2sql::decode::draft::MAX_DRAFT + 1;
        let scratch = m.scratch_bytes(PREFILL_CHUNK + verify - 1, verify, positions, threads);
        // Each sampled candidate holds its own cache (`stages/samples.rs`), at most as long.
        let caches = 1 + opts.samples;
        MemoryPlan {
            positions,
            kv_cache_bytes: m.kv_cache_bytes(positions).saturating_mul(caches),
            scratch_bytes: scratch,
        }
    }

    /// Checks and cleans `question` (one line, not blank, not too long).
    pub fn clean_question(question: &str) -> Result<String, Nl2SqlError> {
        planner::clean_question(question)
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
        self.planner().plan(&normalized(schema), question, opts, None, None)
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
        let question = planner::clean_question(question)?;
        let mut link = link;
        let linking = link.as_mut().map(|slot| Linking { rt, slot, progress });
        self.planner().plan(&normalized(schema), &question, opts, linking, None)
    }

    /// [`Planner::plan`] of this engine (a schema already normalized).
    pub(super) fn plan_normalized(
        &self,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        link: Option<Linking<'_, '_>>,
        conv: Option<Conversation<'_>>,
    ) -> Result<Plan, Nl2SqlError> {
        self.planner().plan(schema, question, opts, link, conv)
    }

    /// Answers one question (`call.question`, a follow-up of `call.conv` when given) over
    /// `call.schema`: the pipeline, the stages of `stages/` in order over the call's state
    /// (docs/nl2sql.md, "The pipeline in the code", lists the same stages; `make lint` checks).
    /// Every answer is validated with `call.hooks.validate` and repaired at most
    /// `opts.repair_rounds` times; a statement still rejected is reported in
    /// [`Outcome::error`] ([`Outcome::into_result`] turns that into [`Nl2SqlError::InvalidSql`]).
    /// `hooks.progress` runs before every forward pass; returning `false` cancels the call.
    ///
    /// The KV cache is allocated first, fallibly: when the memory cannot be had the call fails
    /// with [`Nl2SqlError::OutOfMemory`] before any work; a later forward-pass buffer that cannot
    /// be had fails the same way (never an abort).
    pub fn answer(&self, call: Call<'_, '_>) -> Result<Outcome, Nl2SqlError> {
        let memory = self.memory_plan(call.opts, call.rt.n_threads());
        let mut s = CallState::new(self.parts(call.rt), call, memory);
        let run = |s: &mut CallState<'_, '_>| -> Result<(), Nl2SqlError> {
            stages::open::run(s)?;
            stages::plan::run(s)?;
            stages::prefix::run(s)?;
            stages::question::run(s)?;
            stages::drafter::run(s)?;
            stages::repair_loop::run(s)?;
            stages::branches::run(s)?;
            stages::follow_up::run(s)
        };
        match run(&mut s) {
            Ok(()) => Ok(s.into_outcome()),
            // An allocation that failed is reported with the plan it was part of.
            Err(Nl2SqlError::Model(ModelError::OutOfMemory { what, bytes })) => {
                Err(Nl2SqlError::OutOfMemory { what, bytes, plan: memory })
            }
            Err(e) => Err(e),
        }
    }

    /// [`Engine::answer`] of `question` asked alone, validated with `validate`, without an
    /// executor or a table linker.
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

    /// [`Engine::answer`] of `question` asked alone, with the caller's hooks: the validator,
    /// the progress report and, for candidate answers (`opts.candidates` > 1), an executor:
    /// `hooks.execute` runs a validated statement (read-only, the caller's business) and returns
    /// a digest of its rows, equal for equal results, or `None` when it could not run; the
    /// candidates whose results agree most are preferred (see `candidates.rs`).
    pub fn run_with(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        hooks: Hooks<'_>,
    ) -> Result<Outcome, Nl2SqlError> {
        self.answer(Call { rt, cache, schema, question, conv: None, opts, hooks })
    }

    /// [`Engine::answer`] with its inputs as arguments. With `conv`, the question is a
    /// follow-up of its earlier turns (`conversation.rs`): they are in the prompt, the cache rows
    /// the previous call left of them are kept, and the refusal check does not run. When the
    /// prompt's schema prefix is not the one the turns were asked over, they are dropped and the
    /// question is asked alone (checked as usual); `Outcome::follow_up` says which.
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
        self.answer(Call { rt, cache, schema, question, conv, opts, hooks })
    }

    /// What this engine lends a call on `rt` (`stages::EngineParts`).
    fn parts<'a>(&'a self, rt: &'a Runtime) -> EngineParts<'a> {
        EngineParts {
            forward: self.forward(rt),
            planner: self.planner(),
            refusal_margin: self.refusal_calibration,
            refusal_skip: self.refusal_skip,
            batch_invariant: self.batch_invariant(),
        }
    }

    /// The prompt planner of this engine's tokenizer, identity and context.
    fn planner(&self) -> Planner<'_> {
        Planner {
            tok: &self.tok,
            identity: self.prefix_identity(),
            context_length: self.model.config().context_length,
            max_piece: &self.max_piece,
        }
    }

    /// KV buffers of `capacity` positions in `cache` ([`stages::open::ready_kv`]).
    pub(super) fn ready_kv(
        &self,
        cache: &mut PrefixCache,
        capacity: usize,
    ) -> Result<(), Nl2SqlError> {
        stages::open::ready_kv(&self.model, cache, capacity)
    }

    /// Makes `cache.kv` (allocated) hold the prefix of `plan` ([`stages::prefix::load`]).
    pub(super) fn load_prefix(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        plan: &Plan,
        timings: &mut PhaseTimings,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<(PrefixSource, usize, usize), Nl2SqlError> {
        let identity = self.prefix_identity();
        stages::prefix::load(&self.forward(rt), &identity, cache, plan, timings, on_progress)
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
