//! The nl2sql engine: plan the prompt (render, trim, fingerprint), reuse or compute the schema
//! prefix's KV state, generate until the statement ends, clean the answer, validate it through
//! the caller's validator, and repair with the validator's message and catalog facts when it fails.

use super::candidates::{self, Candidate, TokenScore};
use super::constrain::Constrainer;
use super::decode::{self, Choice, DecodeLimits, Decoded, SpecStats, StopReason};
use super::draft::{focus_tokens, Drafter};
use super::error::Nl2SqlError;
use super::held::Held;
use super::ident::sanitize_question;
use super::memory_plan::MemoryPlan;
use super::progress::Progress;
use super::prompt::{self, Segments};
use super::render::Renderer;
use super::repair::{self, cap_chars, Rejection};
use super::schema::SchemaInfo;
use super::sqltext::extract_sql;
use super::trim;
use super::vocab::{ActiveVocab, VocabBase};
use crate::clock::ms_since;
use crate::generate::fingerprint::Fingerprint;
use crate::generate::kv_file::{self, KvFileDir, KvFileError, KvFileKey};
use crate::gguf::GgufFile;
use crate::model::{FfnHook, KvCache, Logits, Model, ModelError};
use crate::runtime::Runtime;
use crate::sampler::argmax;
#[cfg(feature = "sparse")]
use crate::sparse::{self, CalibOptions, CalibReport, LayerData, SidecarSpec, SparseError};
use crate::tokenizer::Tokenizer;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Longest question accepted, in characters: a question is a sentence or two; anything longer is
/// more likely a pasted document that would crowd the schema out of the context.
pub const MAX_QUESTION_CHARS: usize = 2000;

/// Prompt tokens per forward pass while prefilling: large enough that each weight row is reused
/// across many tokens, small enough that a cancel request is seen between chunks.
pub const PREFILL_CHUNK: usize = 64;

/// Tokens kept free for the repair turn's instruction, the server's message (capped at
/// [`MAX_ERROR_CHARS`]) and the catalog facts (capped at [`repair::MAX_FEEDBACK_CHARS`]), at most
/// roughly one token per 3 characters of SQL-ish English.
const REPAIR_RESERVE_TOKENS: usize = 160 + repair::MAX_FEEDBACK_CHARS / 3;

/// Longest parser message fed back to the model.
const MAX_ERROR_CHARS: usize = 300;

/// Default answer budget: long enough for a CTE with a window function written the way the
/// models format SQL (one clause per line, indented: 150-300 tokens); on the sql-eval
/// development set 256 cut 2 of 104 answers. Only answers that need it use it.
pub const DEFAULT_MAX_NEW_TOKENS: usize = 384;
/// Default repair rounds after a rejected answer.
pub const DEFAULT_REPAIR_ROUNDS: usize = 2;
/// Default candidate answers (see [`Options::candidates`]): the first answer and 3 branches. On
/// the sql-eval development set, branches decoded only for answers still rejected after repair
/// turned 3 of 8 failures into valid SQL (2 of them right): 51 → 53 of 104 correct, at no cost
/// to the answers accepted first (docs/nl2sql-accuracy.md).
pub const DEFAULT_CANDIDATES: usize = 4;
/// Back-outs of dead ends per constrained decode (see [`decode::decode`]): each costs one
/// forward pass, and a repair answer meets a handful (a banned word, an invented function name
/// half written); the cap bounds a decode that keeps meeting them.
const MAX_BACKTRACKS: usize = 32;
/// Most statements the engine rewrites itself in one call (`repair::requalified`,
/// `repair::joined`, a doubt's `fix`): each fixes one column reference, one missing table or the
/// divisions, and a statement rarely has more wrong ones than this.
const MAX_REWRITES: usize = 3;

/// Runs a validated candidate read-only and returns a digest of its rows (equal results, equal
/// digests), or `None` when it could not run (see [`Engine::run_with`]).
pub type ExecuteFn<'a> = dyn FnMut(&str) -> Option<u64> + 'a;

/// Settings of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Most tokens generated per attempt.
    pub max_new_tokens: usize,
    /// KV cache size (clamped to the model's training context): prompt + answer + repair.
    pub context_tokens: usize,
    /// Speculative decoding (template + prompt-lookup drafts verified in one batched pass);
    /// the answer is the same, the number of forward passes is not.
    pub speculation: bool,
    /// Compute logits only for the active vocabulary (`vocab.rs`); may change an answer when the
    /// full-vocabulary argmax lies outside the set.
    pub vocab_pruning: bool,
    /// Keep table and column names inside the visible schema (`constrain.rs`).
    pub schema_constraints: bool,
    /// Most repair rounds after a rejected answer (each: the server's error and catalog facts
    /// as a new turn, then a fresh answer).
    pub repair_rounds: usize,
    /// Candidate answers (`candidates.rs`): 1 = the greedy line only; n > 1 adds up to n - 1
    /// branches off the first answer, decoded when the caller executes candidates or when the
    /// greedy line ends rejected.
    pub candidates: usize,
    /// Keep the cache rows a repair turn or a branch shares with what the cache holds after
    /// the question (`held.rs`): exact (the same answers), fewer prompt tokens; off only to
    /// compare.
    pub keep_rows: bool,
}

impl Default for Options {
    /// 384 new tokens (a CTE with a window function is 150+), 4096 positions, greedy decoding
    /// with speculation (exact: the same answer in fewer forward passes), two repair rounds, 4
    /// candidates; pruning and constraints off (see docs/nl2sql-accuracy.md for why).
    fn default() -> Self {
        Options {
            max_new_tokens: DEFAULT_MAX_NEW_TOKENS,
            context_tokens: 4096,
            speculation: true,
            vocab_pruning: false,
            schema_constraints: false,
            repair_rounds: DEFAULT_REPAIR_ROUNDS,
            candidates: DEFAULT_CANDIDATES,
            keep_rows: true,
        }
    }
}

/// One generation + validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The model's raw answer text.
    pub raw: String,
    /// The extracted statement (no `;`).
    pub sql: String,
    pub generated_tokens: usize,
    /// The generated token ids.
    pub ids: Vec<u32>,
    pub stop: StopReason,
    /// The validator's message when it rejected `sql`, or its doubt (see `advisory`).
    pub error: Option<String>,
    /// `error` is a doubt (`doubt.rs`): `sql` is valid and runs, but looks wrong.
    pub advisory: bool,
    /// Not decoded: the previous attempt's statement rewritten by the engine (a column put on the
    /// wrong table requalified, `repair::requalified`; a table used but not read joined,
    /// `repair::joined`; integer divisions made exact, a doubt's `fix`), and how.
    pub rewritten: Option<String>,
    /// The SQLSTATE of the rejection, when the server raised it.
    pub sqlstate: Option<String>,
    /// The catalog facts given to the next repair round ("" when none).
    pub feedback: String,
    /// Forward passes, proposed and accepted draft tokens of this attempt's decode.
    pub spec: SpecStats,
}

/// Milliseconds spent per phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseTimings {
    /// Rendering, trimming, tokenizing, fingerprinting.
    pub prompt_ms: f64,
    /// Forward passes over prompt tokens (schema prefix on a miss, question, repair turn).
    pub prefill_ms: f64,
    /// Token-by-token generation.
    pub decode_ms: f64,
    /// The caller's validator.
    pub validate_ms: f64,
    /// Reading (on a memory miss) or writing (after computing) the prefix's cache file.
    pub cache_file_ms: f64,
    /// The caller's executor, running candidate answers (see [`Engine::run_with`]).
    pub execute_ms: f64,
}

/// The prompt of one call.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fingerprint: Fingerprint,
    /// System turn + schema, up to the question.
    pub prefix: Segments,
    pub prefix_ids: Vec<u32>,
    /// Question + start of the assistant turn.
    pub question_ids: Vec<u32>,
    /// Qualified names (`schema.table`) of the tables in the prompt, in prompt order.
    pub shown: Vec<String>,
    /// Qualified names of the tables left out for lack of room.
    pub dropped: Vec<String>,
}

impl Plan {
    /// The whole prompt text (prefix and question part).
    pub fn text(&self, question: &str) -> String {
        self.prefix.text() + &prompt::question(question).text()
    }
}

/// The result of a call that ran the model.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The last attempt's statement (no `;`); validated unless `error` is set.
    pub sql: String,
    /// The validator's message when even the repaired statement was rejected.
    pub error: Option<String>,
    pub fingerprint: Fingerprint,
    /// Prompt tokens (prefix + question).
    pub prompt_tokens: usize,
    pub prefix_tokens: usize,
    pub shown: Vec<String>,
    pub dropped: Vec<String>,
    /// Where the prefix's KV state came from.
    pub prefix_source: PrefixSource,
    /// Prompt tokens actually run through the model in this call.
    pub prefill_tokens: usize,
    /// Tokens generated over all attempts.
    pub generated_tokens: usize,
    /// The first answer and one per repair round.
    pub attempts: Vec<Attempt>,
    pub timings: PhaseTimings,
    /// The first attempt's whole prompt text ([`Plan::text`]), for running the same prompt elsewhere.
    pub prompt: String,
    /// Whether speculative decoding was on.
    pub speculation: bool,
    /// Decode forward passes over all attempts (equals `generated_tokens` minus the attempts'
    /// first tokens, which come from the prompt's logits, without speculation).
    pub forward_passes: usize,
    /// Draft tokens proposed over all attempts.
    pub draft_tokens: usize,
    /// Draft tokens accepted over all attempts.
    pub accepted_tokens: usize,
    /// Size of the active vocabulary when pruning was on.
    pub active_vocab: Option<usize>,
    /// Whether identifiers were constrained to the schema.
    pub schema_constraints: bool,
    /// Tokens where the schema constraint replaced the model's first choice.
    pub constrained_tokens: usize,
    /// The memory the call needed beyond the mapped model.
    pub memory: MemoryPlan,
    /// The candidates weighed when branches were decoded (the greedy line first), else empty.
    pub candidates: Vec<Candidate>,
    /// The index in `candidates` of the answer returned, when one was chosen.
    pub chosen: Option<usize>,
}

impl Outcome {
    /// Whether the schema prefix's KV state was reused (from memory or from a cache file).
    pub fn cache_hit(&self) -> bool {
        self.prefix_source != PrefixSource::Computed
    }

    /// Accepted / proposed draft tokens (0 when nothing was proposed).
    pub fn acceptance_rate(&self) -> f64 {
        SpecStats {
            forward_passes: self.forward_passes,
            draft_tokens: self.draft_tokens,
            accepted_tokens: self.accepted_tokens,
        }
        .acceptance_rate()
    }

    /// `Ok` when the statement was accepted, else [`Nl2SqlError::InvalidSql`].
    pub fn into_result(self) -> Result<Outcome, Nl2SqlError> {
        match self.error {
            None => Ok(self),
            Some(message) => Err(Nl2SqlError::InvalidSql { sql: self.sql, message }),
        }
    }
}

/// Counters of the prefix cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Prefix found in memory.
    pub hits: u64,
    /// Prefix computed by the model.
    pub misses: u64,
    /// Prefix loaded from a cache file.
    pub file_hits: u64,
    /// Cache files written.
    pub file_writes: u64,
    /// Cache files refused (corrupt or mismatched) or not written (I/O error, too large).
    pub file_errors: u64,
}

/// Where the prefix's KV state of a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixSource {
    /// Already in this cache's memory.
    Memory,
    /// Loaded from a cache file (another or an earlier backend computed it).
    File,
    /// Computed by the model.
    Computed,
}

impl PrefixSource {
    /// The name `nl2sql_explain` reports: `hit`, `file` or `miss`.
    pub fn name(self) -> &'static str {
        match self {
            PrefixSource::Memory => "hit",
            PrefixSource::File => "file",
            PrefixSource::Computed => "miss",
        }
    }
}

/// Something about the cache file worth logging (the engine does not log by itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEvent {
    /// Damage or I/O trouble (an operator should hear of it) rather than routine news.
    pub warning: bool,
    pub message: String,
}

/// The reusable KV state of one backend/session: the cache buffers and which prefix they hold.
#[derive(Debug, Default)]
pub struct PrefixCache {
    kv: Option<KvCache>,
    /// Fingerprint and token count of the prefix at the start of `kv`, when it is complete.
    prefix: Option<(Fingerprint, usize)>,
    stats: CacheStats,
    /// Directory of cache files shared with other processes (`None`: memory only).
    files: Option<KvFileDir>,
    /// Cache file events not yet taken by the caller.
    events: Vec<CacheEvent>,
    /// The speculative drafter of the last schema prefix (built once per fingerprint).
    drafter: Option<Drafter>,
}

impl PrefixCache {
    /// An empty cache (buffers are allocated on first use).
    pub fn new() -> PrefixCache {
        PrefixCache::default()
    }

    /// Hit/miss counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Fingerprint of the cached prefix, if one is complete.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.prefix.map(|p| p.0)
    }

    /// Positions the KV buffers can hold (0 before first use).
    pub fn capacity(&self) -> usize {
        self.kv.as_ref().map_or(0, KvCache::capacity)
    }

    /// Forgets the cached prefix (keeps the buffers).
    pub fn invalidate(&mut self) {
        self.prefix = None;
    }

    /// Uses cache files in `files` from the next call on (`None`: memory only).
    pub fn set_file_dir(&mut self, files: Option<KvFileDir>) {
        self.files = files;
    }

    /// Takes the cache file events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<CacheEvent> {
        std::mem::take(&mut self.events)
    }

    /// The drafter kept for the last schema prefix, if one was built.
    pub fn drafter(&self) -> Option<&Drafter> {
        self.drafter.as_ref()
    }
}

/// Fills `kv` with the prefix of `key` from its cache file, if there is a valid one; records
/// why not otherwise (a missing file is not news).
fn load_prefix_file(
    files: &KvFileDir,
    key: &KvFileKey,
    kv: &mut KvCache,
    stats: &mut CacheStats,
    events: &mut Vec<CacheEvent>,
) -> bool {
    match files.load(key, kv) {
        Ok(path) => {
            stats.file_hits += 1;
            events.push(CacheEvent {
                warning: false,
                message: format!(
                    "schema prefix of {} tokens loaded from {}",
                    key.prefix_ids.len(),
                    path.display()
                ),
            });
            true
        }
        Err(KvFileError::Missing) => false,
        Err(e) => {
            stats.file_errors += 1;
            events.push(CacheEvent { warning: e.is_warning(), message: e.to_string() });
            false
        }
    }
}

/// Writes the prefix of `key` (at the start of `kv`) to its cache file, recording the outcome.
fn store_prefix_file(
    files: &KvFileDir,
    key: &KvFileKey,
    kv: &KvCache,
    stats: &mut CacheStats,
    events: &mut Vec<CacheEvent>,
) {
    match files.store(key, kv) {
        Ok(s) => {
            stats.file_writes += 1;
            let evicted = if s.evicted > 0 {
                format!(", evicted {} older file(s)", s.evicted)
            } else {
                String::new()
            };
            events.push(CacheEvent {
                warning: false,
                message: format!(
                    "schema prefix written to {} ({} bytes{evicted})",
                    s.path.display(),
                    s.bytes
                ),
            });
        }
        Err(e) => {
            stats.file_errors += 1;
            events.push(CacheEvent {
                warning: e.is_warning(),
                message: format!("schema prefix not cached: {e}"),
            });
        }
    }
}

/// A model + tokenizer ready to answer questions.
pub struct Engine {
    model: Model,
    tok: Tokenizer,
    /// Identifies the exact model file (part of every fingerprint).
    identity: String,
    /// The schema-independent part of active vocabularies, built on first use.
    vocab_base: OnceLock<VocabBase>,
    /// Identity of the FFN hook attached to the model ("" = dense): part of every prefix
    /// fingerprint and cache file key, so sparse and dense KV states never mix.
    ffn_tag: String,
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
        Ok(Engine {
            model,
            tok,
            identity: identity.to_string(),
            vocab_base: OnceLock::new(),
            ffn_tag: String::new(),
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
    /// prefill chunk of [`PREFILL_CHUNK`] tokens, or a verified draft with every row's logits).
    pub fn memory_plan(&self, opts: &Options, threads: usize) -> MemoryPlan {
        let positions = self.context_capacity(opts);
        let m = &self.model;
        let verify = crate::nl2sql::draft::MAX_DRAFT + 1;
        let scratch = m
            .scratch_bytes(PREFILL_CHUNK, 1, positions, threads)
            .max(m.scratch_bytes(verify, verify, positions, threads));
        MemoryPlan {
            positions,
            kv_cache_bytes: m.kv_cache_bytes(positions),
            scratch_bytes: scratch,
        }
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
    pub fn plan(
        &self,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
    ) -> Result<Plan, Nl2SqlError> {
        self.plan_normalized(&normalized(schema), question, opts)
    }

    /// [`Engine::plan`] over a schema already normalized ([`SchemaInfo::normalize`]).
    fn plan_normalized(
        &self,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
    ) -> Result<Plan, Nl2SqlError> {
        if schema.tables.is_empty() {
            return Err(Nl2SqlError::NoTables);
        }
        let capacity = self.context_capacity(opts);
        let question_ids = prompt::question(question).encode(&self.tok)?;
        let fixed = prompt::prefix_with_notes("").encode(&self.tok)?.len();
        let reserve = answer_reserve(opts.max_new_tokens, capacity);
        let renderer = Renderer::new(schema);
        let blocks: Vec<String> = schema.tables.iter().map(|t| renderer.table(t)).collect();
        let overhead = fixed + question_ids.len() + reserve;

        let all: String = blocks.concat();
        let all_prefix = prompt::prefix_with_notes(&all);
        let all_ids = all_prefix.encode(&self.tok)?;
        let (shown, prefix, prefix_ids) =
            if all_ids.len() + question_ids.len() + reserve <= capacity {
                ((0..schema.tables.len()).collect::<Vec<_>>(), all_prefix, all_ids)
            } else {
                let table_tokens: Vec<usize> = blocks
                    .iter()
                    .map(|b| self.tok.encode(b, false).map(|v| v.len()))
                    .collect::<Result<_, _>>()?;
                let smallest = table_tokens.iter().copied().min().unwrap_or(0);
                let mut budget = capacity.saturating_sub(overhead);
                loop {
                    let sel = trim::select(schema, question, &table_tokens, budget);
                    if sel.shown.is_empty() {
                        return Err(Nl2SqlError::ContextTooSmall {
                            needed: overhead + smallest,
                            available: capacity,
                        });
                    }
                    let text: String = sel.shown.iter().map(|&i| blocks[i].as_str()).collect();
                    let prefix = prompt::prefix_with_notes(&text);
                    let ids = prefix.encode(&self.tok)?;
                    let total = ids.len() + question_ids.len() + reserve;
                    if total <= capacity {
                        break (sel.shown, prefix, ids);
                    }
                    // Tokens merged differently across table boundaries: shrink and pick again.
                    budget = budget.saturating_sub(total - capacity);
                }
            };
        let dropped = (0..schema.tables.len())
            .filter(|i| !shown.contains(i))
            .map(|i| schema.tables[i].qualified_name())
            .collect();
        let fingerprint = Fingerprint::of(&self.prefix_identity(), &prefix.canonical());
        Ok(Plan {
            fingerprint,
            prefix,
            prefix_ids,
            question_ids,
            shown: shown.iter().map(|&i| schema.tables[i].qualified_name()).collect(),
            dropped,
        })
    }

    /// Answers `question` over `schema`: one generation, validated with `validate` (which returns
    /// why a statement is not acceptable), and at most `opts.repair_rounds` repair rounds, each
    /// showing the rejected SQL, the server's error and the catalog facts of [`repair::feedback`].
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
        self.run_with(rt, cache, schema, question, opts, on_progress, validate, None)
    }

    /// [`Engine::run`] with an executor for candidate answers (`opts.candidates` > 1): `execute`
    /// runs a validated statement (read-only, the caller's business) and returns a digest of its
    /// rows, equal for equal results, or `None` when it could not run; the candidates whose
    /// results agree most are preferred (see `candidates.rs`).
    #[allow(clippy::too_many_arguments)]
    pub fn run_with(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        on_progress: &mut dyn FnMut(Progress) -> bool,
        validate: &mut dyn FnMut(&str) -> Result<(), Rejection>,
        mut execute: Option<&mut ExecuteFn>,
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
        let mut answer = || -> Result<Outcome, Nl2SqlError> {
            let t0 = Instant::now();
            let question = Engine::clean_question(question)?;
            let capacity = memory.positions;
            // The KV buffers first, so that a context too large for the memory fails before any
            // work: reuse them when they have the right size; drop the old ones before asking for
            // new ones (both would not fit where one barely does).
            if cache.kv.as_ref().is_none_or(|kv| kv.capacity() != capacity) {
                cache.kv = None;
                cache.prefix = None;
                cache.kv = Some(self.model.try_new_cache(capacity)?);
            }
            // Normalized once per call: the plan and the tables it shows share it.
            let schema = normalized(schema);
            let plan = self.plan_normalized(&schema, &question, opts)?;
            // The tables the prompt shows (constraints, repair facts).
            let shown = shown_tables(&schema, &plan.shown);
            let mut shaping = self.shaping(&shown, &plan, &question, opts)?;
            let mut timings = PhaseTimings { prompt_ms: ms_since(t0), ..Default::default() };
            let n_prefix = plan.prefix_ids.len();
            let t1 = Instant::now();
            let prefix_source = self.load_prefix(rt, cache, &plan, &mut timings, on_progress)?;
            let mut prefill_tokens =
                if prefix_source == PrefixSource::Computed { n_prefix } else { 0 };
            let kv = cache.kv.as_mut().expect("allocated above");
            let mut logits = self.prefill(rt, kv, &plan.question_ids, on_progress)?;
            prefill_tokens += plan.question_ids.len();
            timings.prefill_ms += ms_since(t1) - timings.cache_file_ms;
            let n_question_end = kv.len();

            // Speculation verifies drafts in batches; it is exact only if a batch equals the same
            // tokens one by one, which a sparse FFN hook that keeps batches dense breaks: then off.
            let speculate = opts.speculation && self.batch_invariant();
            // The drafter lives next to the prefix it was built for.
            if speculate
                && cache.drafter.as_ref().is_none_or(|d| d.fingerprint() != Some(plan.fingerprint))
            {
                let t = Instant::now();
                cache.drafter = Some(Drafter::for_schema(&self.tok, &shown, plan.fingerprint)?);
                timings.prompt_ms += ms_since(t);
            }
            let focus = match (&cache.drafter, speculate) {
                (Some(_), true) => focus_tokens(&self.tok, &shown, &question, &plan.question_ids)?,
                _ => Vec::new(),
            };
            let drafter = if speculate {
                cache.drafter.as_ref().map(|d| (d, focus.as_slice()))
            } else {
                None
            };
            let mut context: Vec<u32> =
                plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect();
            // What the cache holds after the question, for the turns that start the same way.
            let mut held = Held::new(n_question_end, opts.keep_rows && self.batch_invariant());

            let mut attempts = Vec::with_capacity(1 + opts.repair_rounds);
            // Rejected statements and the byte span of their located error, for the repair bans.
            let mut bans: Vec<(String, (usize, usize))> = Vec::new();
            let mut generated_tokens = 0;
            let mut spec = SpecStats::default();
            // Token scores of the first answer (where branches start) and of the last (its
            // likelihood), kept when candidates are wanted.
            let want_scores = opts.candidates > 1;
            let mut first_scores: Vec<TokenScore> = Vec::new();
            let mut last_scores: Vec<TokenScore>;
            // The next attempt when the engine rewrote the last statement itself (no decode).
            let mut rewrite: Option<(String, String, StopReason)> = None;
            let (sql, error) = loop {
                let t2 = Instant::now();
                let seed = if attempts.is_empty() { "" } else { prompt::REPAIR_SEED };
                // A constrained decode backs out of the dead ends its constraint can reach.
                let backtrack = if shaping.constrainer.is_some() { MAX_BACKTRACKS } else { 0 };
                let limits = DecodeLimits {
                    max_new: opts.max_new_tokens,
                    stop_at_statement: true,
                    seed,
                    backtrack,
                };
                let mut scores = Vec::new();
                let recorder = want_scores.then_some(&mut scores);
                let (Decoded { ids, text: raw, stop, stats }, rewritten) = match rewrite.take() {
                    Some((sql, note, stop)) => {
                        let none = Decoded {
                            ids: Vec::new(),
                            text: sql,
                            stop,
                            stats: SpecStats::default(),
                        };
                        (none, Some(note))
                    }
                    None => (
                        self.decode(
                            rt,
                            kv,
                            std::mem::take(&mut logits),
                            &context,
                            drafter,
                            limits,
                            &shaping,
                            recorder,
                            on_progress,
                        )?,
                        None,
                    ),
                };
                // The decode fed every token it kept but its last (`speculate::decode`).
                held.fed(&ids[..ids.len().saturating_sub(1)], kv.len());
                if attempts.is_empty() {
                    first_scores.clone_from(&scores);
                }
                last_scores = scores;
                let n = ids.len();
                timings.decode_ms += ms_since(t2);
                generated_tokens += n;
                spec.add(stats);
                let sql = extract_sql(&raw).sql;
                let t3 = Instant::now();
                let verdict = check(&sql, &stop, opts, validate);
                timings.validate_ms += ms_since(t3);
                let rejection = verdict.err();
                let advisory = rejection.as_ref().is_some_and(|r| r.advisory);
                let rejection_span = rejection.as_ref().and_then(|r| repair::error_span(r, &sql));
                let error = rejection.as_ref().map(|r| cap_chars(&r.message, MAX_ERROR_CHARS));
                let feedback = match &rejection {
                    Some(r) => repair::feedback(r, &sql, &shown),
                    None => String::new(),
                };
                attempts.push(Attempt {
                    raw,
                    sql: sql.clone(),
                    generated_tokens: n,
                    ids,
                    stop: stop.clone(),
                    error: error.clone(),
                    advisory,
                    rewritten,
                    sqlstate: rejection.as_ref().and_then(|r| r.sqlstate.clone()),
                    feedback: feedback.clone(),
                    spec: stats,
                });
                // A repair that repeats an earlier rejected statement will not do better next round.
                let repeated = attempts.iter().filter(|a| a.sql == sql).count() > 1;
                // A doubt is worth one repair round per call, no more; it is granted even when
                // the rejections before it used the rounds up (unless repairs are off). The
                // engine's own rewrites are not model rounds: they do not count.
                let doubted_again = advisory && attempts.iter().filter(|a| a.advisory).count() > 1;
                let rewrites = attempts.iter().filter(|a| a.rewritten.is_some()).count();
                let rounds =
                    opts.repair_rounds + rewrites + usize::from(advisory && opts.repair_rounds > 0);
                let done = error.is_none() || attempts.len() > rounds || repeated || doubted_again;
                // Each round starts again right after the question.
                let repair_fits = error.is_some()
                    && n_question_end
                        + opts.max_new_tokens.min(capacity / 4)
                        + REPAIR_RESERVE_TOKENS
                        <= kv.capacity();
                if done || !repair_fits {
                    break (sql, error);
                }
                // The engine's own rewrites instead of a model round: the fix a doubt carries
                // (an integer ratio made exact), used when the fixed statement passes without
                // doubt; a column on the wrong table that exactly one other table has,
                // requalified, or a table used but not read, joined on its declared key, when
                // that fixes this error (the statement passes, or fails further on for another
                // reason; a doubt means it did not fix).
                let fixed = rejection.as_ref().filter(|_| rewrites < MAX_REWRITES).and_then(|r| {
                    match &r.fix {
                        Some(fix) => Some(((**fix).clone(), true)),
                        None => repair::requalified(r, &sql, &shown)
                            .or_else(|| repair::joined(r, &sql, &shown))
                            .map(|f| (f, false)),
                    }
                });
                if let Some(((fixed, note), exact)) = fixed {
                    let t = Instant::now();
                    let fixes = match check(&fixed, &stop, opts, validate) {
                        Ok(()) => true,
                        Err(r) => {
                            !exact
                                && !r.advisory
                                && error.as_deref() != Some(&cap_chars(&r.message, MAX_ERROR_CHARS))
                        }
                    };
                    timings.validate_ms += ms_since(t);
                    if fixes {
                        rewrite = Some((fixed, note, stop));
                        continue;
                    }
                }
                let message = error.unwrap_or_default();
                // Repair round: the rejected answer, the server's message and the catalog facts as a
                // new turn (each round starts again right after the question).
                let repair_ids =
                    prompt::repair(&sql, &message, &feedback, advisory).encode(&self.tok)?;
                // Repair answers are always decoded in the constrainer's strict mode: identifiers
                // inside the schema (the rejected draft's aliases standing for its tables from their
                // first use), only known functions, and never the word a located error was about in
                // any earlier rejected statement (a small model otherwise writes its last answer again).
                if let Some(span) = rejection_span {
                    bans.push((sql.clone(), span));
                }
                let mut c = Constrainer::with_hints(&shown, repair::alias_hints(&sql, &shown))
                    .known_calls_only();
                for (rejected, (start, end)) in &bans {
                    c = c.with_ban(rejected, *start, *end);
                }
                shaping.constrainer = Some(c);
                // The turn starts with the rejected statement: the rows of its tokens the cache
                // still holds (just decoded) are kept (`held.rs`).
                let (kept, rest) = held.resume(&repair_ids);
                kv.truncate(kept);
                kv.check_room(rest.len() + 1)?;
                let t4 = Instant::now();
                context.truncate(n_question_end);
                context.extend_from_slice(&repair_ids);
                logits = self.prefill(rt, kv, rest, on_progress)?;
                held.fed(rest, kv.len());
                prefill_tokens += rest.len();
                timings.prefill_ms += ms_since(t4);
            };

            // A doubted answer is valid: when the rounds after it did no better, it is the answer.
            let (mut sql, mut error) = match attempts.iter().find(|a| a.advisory) {
                Some(a) if error.is_some() => (a.sql.clone(), None),
                _ => (sql, error),
            };
            let doubted = attempts.iter().any(|a| a.advisory && a.sql == sql);
            // Candidates: branches off the first answer, when they can change the result.
            let mut cands: Vec<Candidate> = Vec::new();
            let mut chosen = None;
            // Not when the first answer ran out of tokens: its branches share its budget.
            let cut_off = attempts[0].stop == StopReason::Budget;
            // Decoded when they can change the answer: it is rejected or doubted, or results vote.
            if opts.candidates > 1 && !cut_off && (execute.is_some() || error.is_some() || doubted)
            {
                let t = Instant::now();
                let digest = match (&error, execute.as_deref_mut()) {
                    (None, Some(run)) => run(&sql),
                    _ => None,
                };
                timings.execute_ms += ms_since(t);
                cands.push(Candidate {
                    sql: sql.clone(),
                    branch: None,
                    mean_logprob: candidates::mean_logprob(&last_scores),
                    error: error.clone(),
                    doubted,
                    digest,
                });
                let first = &attempts[0];
                let points = candidates::branch_points(
                    &self.tok,
                    &first.ids,
                    &first_scores,
                    opts.candidates - 1,
                )
                .unwrap_or_default();
                // Branches decode as the first answer did (the repair rounds' constrainer goes).
                shaping.constrainer = opts.schema_constraints.then(|| Constrainer::new(&shown));
                for p in points {
                    let alt = first_scores[p];
                    let mut prefix = first.ids[..p].to_vec();
                    prefix.push(alt.alt);
                    let max_new = opts.max_new_tokens.saturating_sub(prefix.len());
                    if max_new == 0 || n_question_end + prefix.len() + 1 > kv.capacity() {
                        continue;
                    }
                    // The first answer's tokens up to the branch point: kept where the cache
                    // still holds them (the last repair turn starts with them, or the last branch).
                    let (kept, rest) = held.resume(&prefix);
                    kv.truncate(kept);
                    let t1 = Instant::now();
                    let logits = self.prefill(rt, kv, rest, on_progress)?;
                    held.fed(rest, kv.len());
                    prefill_tokens += rest.len();
                    timings.prefill_ms += ms_since(t1);
                    context.truncate(n_question_end);
                    context.extend_from_slice(&prefix);
                    let seed = self.tok.decode(&prefix);
                    let backtrack = if shaping.constrainer.is_some() { MAX_BACKTRACKS } else { 0 };
                    let limits =
                        DecodeLimits { max_new, stop_at_statement: true, seed: &seed, backtrack };
                    let mut scores = first_scores[..p].to_vec();
                    scores.push(TokenScore {
                        logprob: alt.alt_logprob,
                        alt: first.ids[p],
                        alt_logprob: alt.logprob,
                    });
                    let t2 = Instant::now();
                    let d = self.decode(
                        rt,
                        kv,
                        logits,
                        &context,
                        drafter,
                        limits,
                        &shaping,
                        Some(&mut scores),
                        on_progress,
                    )?;
                    timings.decode_ms += ms_since(t2);
                    held.fed(&d.ids[..d.ids.len().saturating_sub(1)], kv.len());
                    generated_tokens += d.ids.len();
                    spec.add(d.stats);
                    let branch_sql = extract_sql(&d.text).sql;
                    if cands.iter().any(|c| c.sql == branch_sql) {
                        continue; // the same statement again: no new evidence
                    }
                    let t3 = Instant::now();
                    let verdict = check(&branch_sql, &d.stop, opts, validate);
                    timings.validate_ms += ms_since(t3);
                    let t4 = Instant::now();
                    // A doubted branch is valid, chosen only when no undoubted one is.
                    let doubt = verdict.as_ref().err().is_some_and(|r| r.advisory);
                    let verdict = if doubt { Ok(()) } else { verdict };
                    let digest = match (&verdict, execute.as_deref_mut()) {
                        (Ok(()), Some(run)) => run(&branch_sql),
                        _ => None,
                    };
                    timings.execute_ms += ms_since(t4);
                    cands.push(Candidate {
                        sql: branch_sql,
                        branch: Some(p),
                        mean_logprob: candidates::mean_logprob(&scores),
                        error: verdict.err().map(|r| cap_chars(&r.message, MAX_ERROR_CHARS)),
                        doubted: doubt,
                        digest,
                    });
                }
                chosen = candidates::choose(&cands);
                if let Some(i) = chosen.filter(|&i| i > 0) {
                    sql.clone_from(&cands[i].sql);
                    error = None;
                }
            }
            Ok(Outcome {
                prompt: plan.text(&question),
                sql,
                error,
                fingerprint: plan.fingerprint,
                prompt_tokens: n_prefix + plan.question_ids.len(),
                prefix_tokens: n_prefix,
                shown: plan.shown,
                dropped: plan.dropped,
                prefix_source,
                prefill_tokens,
                generated_tokens,
                attempts,
                timings,
                speculation: speculate,
                forward_passes: spec.forward_passes,
                draft_tokens: spec.draft_tokens,
                accepted_tokens: spec.accepted_tokens,
                active_vocab: shaping.vocab.as_ref().map(ActiveVocab::len),
                schema_constraints: opts.schema_constraints,
                constrained_tokens: shaping.changed.get(),
                memory,
                candidates: cands,
                chosen,
            })
        };
        answer().map_err(with_plan)
    }

    /// Greedy continuation of `prompt` (any text, no chat template): prefills it into `kv`
    /// (emptied first), then generates up to `max_new` tokens, stopping only at an
    /// end-of-generation token or a full cache. With `speculation`, prompt-lookup drafts are
    /// verified in batches; the tokens are the same either way.
    pub fn complete(
        &self,
        rt: &Runtime,
        kv: &mut KvCache,
        prompt: &[u32],
        max_new: usize,
        speculation: bool,
    ) -> Result<Decoded, Nl2SqlError> {
        kv.clear();
        let logits = self.prefill(rt, kv, prompt, &mut |_| true)?;
        let drafter = Drafter::lookup_only();
        let limits = DecodeLimits { max_new, stop_at_statement: false, seed: "", backtrack: 0 };
        let speculate = speculation && self.batch_invariant();
        self.decode(
            rt,
            kv,
            logits,
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

    /// The one forward entry point for logits: runs `tokens` at positions `kv.len()..` and
    /// returns `[n_out, vocab]` logits (`n_out` = 1 for `Last`, `tokens.len()` for `All`).
    /// `between_layers` runs before each layer on this thread; false cancels the call.
    fn logits(
        &self,
        rt: &Runtime,
        kv: &mut KvCache,
        tokens: &[u32],
        which: Logits,
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        match self.model.forward_checked(rt, kv, tokens, which, between_layers) {
            Err(crate::model::ModelError::Interrupted { .. }) => Err(Nl2SqlError::Cancelled),
            r => Ok(r?),
        }
    }

    /// The one token chooser: the next token given the answer `text` so far and the logits
    /// `row` of its position (`[vocab]`, or `[active]` under vocabulary pruning); greedy, so the
    /// same question over the same schema always gives the same SQL.
    fn choose(&self, text: &str, row: &[f32], excluded: &[u32], shaping: &Shaping) -> Choice {
        if shaping.is_plain() {
            Choice { id: argmax(row), acceptable: true }
        } else {
            shaping.pick(&self.tok, text, row, excluded)
        }
    }

    /// Decode-time logits: the full vocabulary, or only the active rows under pruning
    /// (bitwise the same values as the full logits' entries).
    fn decode_logits(
        &self,
        rt: &Runtime,
        kv: &mut KvCache,
        tokens: &[u32],
        which: Logits,
        shaping: &Shaping,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        match &shaping.vocab {
            Some(v) => Ok(self.model.forward_rows(rt, kv, tokens, which, v.ids())?),
            None => self.logits(rt, kv, tokens, which, &mut || true),
        }
    }

    /// Runs `ids` through the model in chunks (cancellable between layers); returns the last
    /// token's logits `[vocab]`.
    fn prefill(
        &self,
        rt: &Runtime,
        kv: &mut KvCache,
        ids: &[u32],
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        kv.check_room(ids.len())?;
        let mut logits = Vec::new();
        for (k, chunk) in ids.chunks(PREFILL_CHUNK).enumerate() {
            // Checked before every layer: a chunk at a long context takes hundreds of ms.
            let progress = Progress::Prefill { done: k * PREFILL_CHUNK, total: ids.len() };
            logits = self.logits(rt, kv, chunk, Logits::Last, &mut || on_progress(progress))?;
        }
        Ok(logits)
    }

    /// Greedy generation from `logits` (the prompt `context` is in `kv`) until a stop, with
    /// drafts from `drafter` verified in batches when it is set (see [`decode::decode`]).
    #[allow(clippy::too_many_arguments)]
    fn decode(
        &self,
        rt: &Runtime,
        kv: &mut KvCache,
        logits: Vec<f32>,
        context: &[u32],
        drafter: Option<(&Drafter, &[u32])>,
        limits: DecodeLimits<'_>,
        shaping: &Shaping,
        mut scores: Option<&mut Vec<TokenScore>>,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Decoded, Nl2SqlError> {
        // Under pruning every row the decoder sees is `[active]`, the prompt's last one included.
        let logits = match &shaping.vocab {
            Some(v) => v.ids().iter().map(|&id| logits[id as usize]).collect(), // [active]
            None => logits,                                                     // [vocab]
        };
        decode::decode(
            &self.tok,
            kv,
            logits,
            context,
            drafter,
            limits,
            &mut |kv, tokens, which| self.decode_logits(rt, kv, tokens, which, shaping),
            &mut |text, row, excluded| {
                let c = self.choose(text, row, excluded, shaping);
                if let Some(s) = scores.as_deref_mut() {
                    // Rows are `[active]` under pruning: index <-> id through the active set.
                    let ids = shaping.vocab.as_ref().map(ActiveVocab::ids);
                    let j = match ids {
                        Some(v) => v.iter().position(|&x| x == c.id),
                        None => Some(c.id as usize),
                    };
                    let id_of = |i: usize| ids.map_or(i as u32, |v| v[i]);
                    s.extend(j.and_then(|j| candidates::score(row, j, id_of)));
                }
                c
            },
            on_progress,
        )
    }
}

/// The verdict on an answer's statement: none, cut off at the token budget, else the validator's.
fn check(
    sql: &str,
    stop: &StopReason,
    opts: &Options,
    validate: &mut dyn FnMut(&str) -> Result<(), Rejection>,
) -> Result<(), Rejection> {
    if sql.is_empty() {
        Err(Rejection::from("the answer contains no SQL statement"))
    } else if *stop == StopReason::Budget {
        Err(Rejection::from(format!(
            "the answer was cut off at the limit of {} tokens (turboinfer.max_new_tokens)",
            opts.max_new_tokens
        )))
    } else {
        validate(sql)
    }
}

/// `schema` normalized ([`SchemaInfo::normalize`]): the one copy a call makes.
fn normalized(schema: &SchemaInfo) -> SchemaInfo {
    let mut s = schema.clone();
    s.normalize();
    s
}

/// The tables of the normalized `schema` shown in the prompt (`shown`: qualified names).
fn shown_tables(schema: &SchemaInfo, shown: &[String]) -> SchemaInfo {
    SchemaInfo {
        tables: schema
            .tables
            .iter()
            .filter(|t| shown.contains(&t.qualified_name()))
            .cloned()
            .collect(),
        default_schema: schema.default_schema.clone(),
    }
}

impl Engine {
    /// Makes `cache.kv` (allocated) hold the prefix of `plan`, from the first place that has
    /// it: memory (the previous call's prefix), else a cache file, else computed by a prefill
    /// (then stored to a cache file). Cache-file time goes to `timings.cache_file_ms`.
    fn load_prefix(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        plan: &Plan,
        timings: &mut PhaseTimings,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<PrefixSource, Nl2SqlError> {
        let n_prefix = plan.prefix_ids.len();
        let in_memory = cache.prefix == Some((plan.fingerprint, n_prefix))
            && cache.kv.as_ref().is_some_and(|kv| kv.len() >= n_prefix);
        let kv = cache.kv.as_mut().expect("allocated by the caller");
        if in_memory {
            cache.stats.hits += 1;
            kv.truncate(n_prefix);
            return Ok(PrefixSource::Memory);
        }
        cache.prefix = None; // only a completed prefill or a validated file makes it valid again
        kv.clear();
        let key = self.kv_file_key(plan);
        let tf = Instant::now();
        let from_file = cache
            .files
            .as_ref()
            .is_some_and(|f| load_prefix_file(f, &key, kv, &mut cache.stats, &mut cache.events));
        timings.cache_file_ms += ms_since(tf);
        let source = if from_file {
            PrefixSource::File
        } else {
            cache.stats.misses += 1;
            let mut schema_progress = |p| {
                on_progress(match p {
                    Progress::Prefill { done, total } => Progress::SchemaPrefill { done, total },
                    p => p,
                })
            };
            self.prefill(rt, kv, &plan.prefix_ids, &mut schema_progress)?;
            let tf = Instant::now();
            if let Some(f) = cache.files.as_ref() {
                store_prefix_file(f, &key, kv, &mut cache.stats, &mut cache.events);
            }
            timings.cache_file_ms += ms_since(tf);
            PrefixSource::Computed
        };
        cache.prefix = Some((plan.fingerprint, n_prefix));
        Ok(source)
    }
}

// ---- Active vocabulary and schema constraints (see `vocab.rs`, `constrain.rs`) ----

/// How one call shapes token choice: an optional active vocabulary (subset LM head) and an
/// optional identifier constrainer; plain greedy when both are off.
#[derive(Debug)]
struct Shaping {
    vocab: Option<ActiveVocab>,
    constrainer: Option<Constrainer>,
    /// Picks the constrainer changed.
    changed: std::cell::Cell<usize>,
}

impl Shaping {
    /// True when neither pruning nor constraints are on.
    fn is_plain(&self) -> bool {
        self.vocab.is_none() && self.constrainer.is_none()
    }

    /// Neither pruning nor constraints.
    fn plain() -> Shaping {
        Shaping { vocab: None, constrainer: None, changed: std::cell::Cell::new(0) }
    }

    /// The next token from a logits row (`[active]` under pruning, else `[vocab]`) given the
    /// text generated so far, never one of `excluded`.
    fn pick(&self, tok: &Tokenizer, text: &str, row: &[f32], excluded: &[u32]) -> Choice {
        let ids = self.vocab.as_ref().map(ActiveVocab::ids);
        match &self.constrainer {
            Some(c) => {
                let p = c.choose_excluding(tok, text, row, ids, excluded);
                self.changed.set(self.changed.get() + p.changed as usize);
                Choice { id: p.id, acceptable: p.acceptable }
            }
            None => {
                let j = argmax(row) as usize;
                Choice { id: ids.map_or(j as u32, |r| r[j]), acceptable: true }
            }
        }
    }
}

impl Engine {
    /// The active vocabulary and constrainer `opts` ask for, over the tables `plan` shows.
    /// `shown` holds the tables of the prompt.
    fn shaping(
        &self,
        shown: &SchemaInfo,
        plan: &Plan,
        question: &str,
        opts: &Options,
    ) -> Result<Shaping, Nl2SqlError> {
        let vocab = if opts.vocab_pruning {
            let base = match self.vocab_base.get() {
                Some(b) => b,
                None => {
                    let b = VocabBase::new(&self.tok)?;
                    self.vocab_base.get_or_init(|| b)
                }
            };
            let prompt: Vec<u32> =
                plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect();
            Some(ActiveVocab::build(base, &self.tok, shown, &prompt, question)?)
        } else {
            None
        };
        let constrainer = opts.schema_constraints.then(|| Constrainer::new(shown));
        Ok(Shaping { vocab, constrainer, changed: std::cell::Cell::new(0) })
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
