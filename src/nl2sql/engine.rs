//! The nl2sql engine: plan the prompt (render, trim, fingerprint), reuse or compute the schema
//! prefix's KV state, generate until the statement ends, clean the answer, validate it through
//! the caller's validator, and repair once with the validator's message when it fails.

use super::constrain::Constrainer;
use super::error::Nl2SqlError;
use super::fingerprint::Fingerprint;
use super::ident::sanitize_question;
use super::prompt::{self, Segments};
use super::render::Renderer;
use super::schema::SchemaInfo;
use super::sqltext::{answer_complete, extract_sql};
use super::trim;
use super::vocab::{ActiveVocab, VocabBase};
use crate::gguf::GgufFile;
use crate::model::{KvCache, Logits, Model};
use crate::runtime::Runtime;
use crate::sampler::{Sampler, SamplerConfig};
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

/// Tokens kept free for the repair turn's instruction and the parser message (which is capped at
/// [`MAX_ERROR_CHARS`], at most roughly one token per 3 characters of SQL-ish English).
const REPAIR_RESERVE_TOKENS: usize = 160;

/// Longest parser message fed back to the model.
const MAX_ERROR_CHARS: usize = 300;

/// Settings of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Most tokens generated per attempt.
    pub max_new_tokens: usize,
    /// KV cache size (clamped to the model's training context): prompt + answer + repair.
    pub context_tokens: usize,
    /// Compute logits only for the active vocabulary (`vocab.rs`); may change an answer when the
    /// full-vocabulary argmax lies outside the set.
    pub vocab_pruning: bool,
    /// Keep table and column names inside the visible schema (`constrain.rs`).
    pub schema_constraints: bool,
}

impl Default for Options {
    /// 128 new tokens, 4096 positions.
    fn default() -> Self {
        Options { max_new_tokens: 128, context_tokens: 4096, vocab_pruning: false, schema_constraints: false }
    }
}

/// What the engine is doing, reported before every forward pass (the caller may cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// About to run prompt tokens `done..done+chunk` of `total`.
    Prefill { done: usize, total: usize },
    /// `generated` tokens generated so far in this attempt.
    Decode { generated: usize },
}

/// Why an attempt's generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The statement ended (`;`, closing fence, blank line after the SQL).
    EndOfStatement,
    /// The model produced an end-of-generation token.
    EndOfGeneration,
    /// `max_new_tokens` were generated.
    Budget,
    /// The KV cache is full.
    ContextFull,
}

impl StopReason {
    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::EndOfStatement => "end_of_statement",
            StopReason::EndOfGeneration => "end_of_generation",
            StopReason::Budget => "max_new_tokens",
            StopReason::ContextFull => "context_full",
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
    pub stop: StopReason,
    /// The validator's message when it rejected `sql`.
    pub error: Option<String>,
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
    /// Whether the schema prefix's KV state was reused.
    pub cache_hit: bool,
    /// Prompt tokens actually run through the model in this call.
    pub prefill_tokens: usize,
    /// Tokens generated over all attempts.
    pub generated_tokens: usize,
    /// One or two (after a repair).
    pub attempts: Vec<Attempt>,
    pub timings: PhaseTimings,
    /// Size of the active vocabulary when pruning was on.
    pub active_vocab: Option<usize>,
    /// Whether identifiers were constrained to the schema.
    pub schema_constraints: bool,
    /// Tokens where the schema constraint replaced the model's first choice.
    pub constrained_tokens: usize,
}

impl Outcome {
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
    pub hits: u64,
    pub misses: u64,
}

/// The reusable KV state of one backend/session: the cache buffers and which prefix they hold.
#[derive(Debug, Default)]
pub struct PrefixCache {
    kv: Option<KvCache>,
    /// Fingerprint and token count of the prefix at the start of `kv`, when it is complete.
    prefix: Option<(Fingerprint, usize)>,
    stats: CacheStats,
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
}

/// A model + tokenizer ready to answer questions.
pub struct Engine {
    model: Model,
    tok: Tokenizer,
    /// Identifies the exact model file (part of every fingerprint).
    identity: String,
    /// The schema-independent part of active vocabularies, built on first use.
    vocab_base: OnceLock<VocabBase>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("identity", &self.identity).field("model", &self.model).finish()
    }
}

impl Engine {
    /// Opens the GGUF file at `path` once (one shared mapping for weights and vocabulary).
    pub fn load(path: &Path, identity: &str) -> Result<Engine, Nl2SqlError> {
        let file = Arc::new(GgufFile::open(path).map_err(crate::model::ModelError::from)?);
        let tok = Tokenizer::from_gguf(&file)?;
        let model = Model::from_gguf(file)?;
        Engine::new(model, tok, identity)
    }

    /// An engine over an already loaded model; fails unless the vocabulary has ChatML markers.
    pub fn new(model: Model, tok: Tokenizer, identity: &str) -> Result<Engine, Nl2SqlError> {
        prompt::check_chat_template(&tok)?;
        Ok(Engine { model, tok, identity: identity.to_string(), vocab_base: OnceLock::new() })
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

    /// KV positions a cache gets under `opts` (the model's training context bounds it).
    pub fn context_capacity(&self, opts: &Options) -> usize {
        opts.context_tokens.clamp(1, self.model.config().context_length)
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
    pub fn plan(&self, schema: &SchemaInfo, question: &str, opts: &Options) -> Result<Plan, Nl2SqlError> {
        let mut schema = schema.clone();
        schema.normalize();
        if schema.tables.is_empty() {
            return Err(Nl2SqlError::NoTables);
        }
        let capacity = self.context_capacity(opts);
        let question_ids = prompt::question(question).encode(&self.tok)?;
        let fixed = prompt::prefix("").encode(&self.tok)?.len();
        let reserve = answer_reserve(opts.max_new_tokens, capacity);
        let renderer = Renderer::new(&schema);
        let blocks: Vec<String> = schema.tables.iter().map(|t| renderer.table(t)).collect();
        let overhead = fixed + question_ids.len() + reserve;

        let all: String = blocks.concat();
        let all_prefix = prompt::prefix(&all);
        let all_ids = all_prefix.encode(&self.tok)?;
        let (shown, prefix, prefix_ids) = if all_ids.len() + question_ids.len() + reserve <= capacity {
            ((0..schema.tables.len()).collect::<Vec<_>>(), all_prefix, all_ids)
        } else {
            let table_tokens: Vec<usize> = blocks.iter().map(|b| self.tok.encode(b, false).map(|v| v.len())).collect::<Result<_, _>>()?;
            let smallest = table_tokens.iter().copied().min().unwrap_or(0);
            let mut budget = capacity.saturating_sub(overhead);
            loop {
                let sel = trim::select(&schema, question, &table_tokens, budget);
                if sel.shown.is_empty() {
                    return Err(Nl2SqlError::ContextTooSmall { needed: overhead + smallest, available: capacity });
                }
                let text: String = sel.shown.iter().map(|&i| blocks[i].as_str()).collect();
                let prefix = prompt::prefix(&text);
                let ids = prefix.encode(&self.tok)?;
                let total = ids.len() + question_ids.len() + reserve;
                if total <= capacity {
                    break (sel.shown, prefix, ids);
                }
                // Tokens merged differently across table boundaries: shrink and pick again.
                budget = budget.saturating_sub(total - capacity);
            }
        };
        let dropped = (0..schema.tables.len()).filter(|i| !shown.contains(i)).map(|i| schema.tables[i].qualified_name()).collect();
        let fingerprint = Fingerprint::of(&self.identity, &prefix.canonical());
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
    /// the reason a statement is not acceptable), and at most one repair round. A statement that
    /// is still rejected is reported in [`Outcome::error`] ([`Outcome::into_result`] turns that
    /// into [`Nl2SqlError::InvalidSql`]).
    /// `on_progress` runs before every forward pass; returning `false` cancels the call.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        on_progress: &mut dyn FnMut(Progress) -> bool,
        validate: &mut dyn FnMut(&str) -> Result<(), String>,
    ) -> Result<Outcome, Nl2SqlError> {
        let t0 = Instant::now();
        let question = Engine::clean_question(question)?;
        let plan = self.plan(schema, &question, opts)?;
        let shaping = self.shaping(schema, &plan, &question, opts)?;
        let mut timings = PhaseTimings { prompt_ms: ms_since(t0), ..Default::default() };
        let capacity = self.context_capacity(opts);

        // The KV buffers: reuse when they have the right size.
        if cache.kv.as_ref().is_none_or(|kv| kv.capacity() != capacity) {
            cache.kv = Some(self.model.new_cache(capacity));
            cache.prefix = None;
        }
        let n_prefix = plan.prefix_ids.len();
        let cache_hit = cache.prefix == Some((plan.fingerprint, n_prefix)) && cache.kv.as_ref().is_some_and(|kv| kv.len() >= n_prefix);
        let kv = cache.kv.as_mut().expect("allocated above");
        let mut prefill_tokens = 0;
        let t1 = Instant::now();
        if cache_hit {
            cache.stats.hits += 1;
            kv.truncate(n_prefix);
        } else {
            cache.stats.misses += 1;
            cache.prefix = None; // only a completed prefill makes it valid again
            kv.clear();
            self.prefill(rt, kv, &plan.prefix_ids, on_progress)?;
            prefill_tokens += n_prefix;
            cache.prefix = Some((plan.fingerprint, n_prefix));
        }
        let mut logits = self.prefill(rt, kv, &plan.question_ids, on_progress)?;
        prefill_tokens += plan.question_ids.len();
        timings.prefill_ms += ms_since(t1);
        let n_question_end = kv.len();

        let mut attempts = Vec::with_capacity(2);
        let mut generated_tokens = 0;
        loop {
            let t2 = Instant::now();
            let (raw, n, stop) = self.decode(rt, kv, logits, opts.max_new_tokens, &shaping, on_progress)?;
            timings.decode_ms += ms_since(t2);
            generated_tokens += n;
            let sql = extract_sql(&raw).sql;
            let t3 = Instant::now();
            let verdict = if sql.is_empty() { Err("the answer contains no SQL statement".to_string()) } else { validate(&sql) };
            timings.validate_ms += ms_since(t3);
            let error = verdict.err().map(|e| cap_chars(&e, MAX_ERROR_CHARS));
            attempts.push(Attempt { raw, sql: sql.clone(), generated_tokens: n, stop, error: error.clone() });
            let done = error.is_none() || attempts.len() == 2;
            let repair_fits = error.is_some() && {
                kv.truncate(n_question_end);
                kv.check_room(opts.max_new_tokens.min(capacity / 4) + REPAIR_RESERVE_TOKENS).is_ok()
            };
            if done || !repair_fits {
                return Ok(Outcome {
                    sql,
                    error,
                    fingerprint: plan.fingerprint,
                    prompt_tokens: n_prefix + plan.question_ids.len(),
                    prefix_tokens: n_prefix,
                    shown: plan.shown,
                    dropped: plan.dropped,
                    cache_hit,
                    prefill_tokens,
                    generated_tokens,
                    attempts,
                    timings,
                    active_vocab: shaping.vocab.as_ref().map(ActiveVocab::len),
                    schema_constraints: shaping.constrainer.is_some(),
                    constrained_tokens: shaping.changed.get(),
                });
            }
            let message = error.unwrap_or_default();
            // Repair round: the rejected answer and the parser's message as a new turn.
            let repair_ids = prompt::repair(&sql, &message).encode(&self.tok)?;
            kv.check_room(repair_ids.len() + 1)?;
            let t4 = Instant::now();
            logits = self.prefill(rt, kv, &repair_ids, on_progress)?;
            prefill_tokens += repair_ids.len();
            timings.prefill_ms += ms_since(t4);
        }
    }

    /// Runs `ids` through the model in chunks (cancellable between chunks); returns the last
    /// token's logits `[vocab]`.
    fn prefill(&self, rt: &Runtime, kv: &mut KvCache, ids: &[u32], on_progress: &mut dyn FnMut(Progress) -> bool) -> Result<Vec<f32>, Nl2SqlError> {
        kv.check_room(ids.len())?;
        let mut logits = Vec::new();
        for (k, chunk) in ids.chunks(PREFILL_CHUNK).enumerate() {
            if !on_progress(Progress::Prefill { done: k * PREFILL_CHUNK, total: ids.len() }) {
                return Err(Nl2SqlError::Cancelled);
            }
            logits = self.model.forward(rt, kv, chunk, Logits::Last)?;
        }
        Ok(logits)
    }

    /// Greedy generation from `logits` until the statement ends; returns (text, tokens, reason).
    fn decode(
        &self,
        rt: &Runtime,
        kv: &mut KvCache,
        mut logits: Vec<f32>,
        max_new: usize,
        shaping: &Shaping,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<(String, usize, StopReason), Nl2SqlError> {
        // Greedy: the same question over the same schema always gives the same SQL.
        let mut sampler = Sampler::new(SamplerConfig::default());
        let mut full_row = true; // the prefill's logits cover the whole vocabulary
        let mut stream = self.tok.stream_decoder();
        let mut text = String::new();
        let mut n = 0;
        let stop = loop {
            if n >= max_new {
                break StopReason::Budget;
            }
            let id = if shaping.is_plain() { sampler.sample(&logits, &[]) } else { shaping.pick(&self.tok, &text, &logits, full_row) };
            n += 1;
            if self.tok.is_eog(id) {
                break StopReason::EndOfGeneration;
            }
            text.push_str(&stream.push(id));
            if answer_complete(&text) {
                break StopReason::EndOfStatement;
            }
            if n >= max_new {
                break StopReason::Budget;
            }
            if kv.check_room(1).is_err() {
                break StopReason::ContextFull;
            }
            if !on_progress(Progress::Decode { generated: n }) {
                return Err(Nl2SqlError::Cancelled);
            }
            logits = match &shaping.vocab {
                Some(v) => self.model.forward_rows(rt, kv, &[id], Logits::Last, v.ids())?,
                None => self.model.forward(rt, kv, &[id], Logits::Last)?,
            };
            full_row = shaping.vocab.is_none();
        };
        text.push_str(&stream.finish());
        Ok((text, n, stop))
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

    /// The next token from a logits row (`[vocab]` when `full_row`, else `[active]`) given the
    /// text generated so far.
    fn pick(&self, tok: &Tokenizer, text: &str, logits: &[f32], full_row: bool) -> u32 {
        let sub: Vec<f32>;
        let (row, ids) = match &self.vocab {
            Some(v) if full_row => {
                sub = v.ids().iter().map(|&id| logits[id as usize]).collect(); // [active]
                (&sub[..], Some(v.ids()))
            }
            Some(v) => (logits, Some(v.ids())),
            None => (logits, None),
        };
        match &self.constrainer {
            Some(c) => {
                let p = c.choose(tok, text, row, ids);
                self.changed.set(self.changed.get() + p.changed as usize);
                p.id
            }
            None => {
                let j = crate::sampler::argmax(row) as usize;
                ids.map_or(j as u32, |r| r[j])
            }
        }
    }
}

impl Engine {
    /// The active vocabulary and constrainer `opts` ask for, over the tables `plan` shows.
    fn shaping(&self, schema: &SchemaInfo, plan: &Plan, question: &str, opts: &Options) -> Result<Shaping, Nl2SqlError> {
        let mut shown = schema.clone();
        shown.tables.retain(|t| plan.shown.contains(&t.qualified_name()));
        let vocab = if opts.vocab_pruning {
            let base = match self.vocab_base.get() {
                Some(b) => b,
                None => {
                    let b = VocabBase::new(&self.tok)?;
                    self.vocab_base.get_or_init(|| b)
                }
            };
            let prompt: Vec<u32> = plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect();
            Some(ActiveVocab::build(base, &self.tok, &shown, &prompt, question)?)
        } else {
            None
        };
        let constrainer = opts.schema_constraints.then(|| Constrainer::new(&shown));
        Ok(Shaping { vocab, constrainer, changed: std::cell::Cell::new(0) })
    }
}

/// Positions kept free after the prompt: room for an answer and a repair round (repair turn +
/// second answer). An answer budget above a quarter of the context is not reserved in full (it
/// would leave no room for the schema): such answers end at `context_full` instead.
fn answer_reserve(max_new_tokens: usize, capacity: usize) -> usize {
    2 * max_new_tokens.min(capacity / 4) + REPAIR_RESERVE_TOKENS
}

/// `s` cut to at most `max` characters.
fn cap_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// Milliseconds elapsed since `t`.
fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_capped_by_the_context() {
        assert_eq!(answer_reserve(128, 4096), 2 * 128 + REPAIR_RESERVE_TOKENS);
        assert_eq!(answer_reserve(4096, 8192), 2 * 2048 + REPAIR_RESERVE_TOKENS);
    }

    #[test]
    fn caps_characters() {
        assert_eq!(cap_chars("abc", 5), "abc");
        assert_eq!(cap_chars("ééééé", 2), "éé...");
    }

    #[test]
    fn questions_are_checked() {
        assert!(matches!(Engine::clean_question(" \n\t"), Err(Nl2SqlError::EmptyQuestion)));
        assert_eq!(Engine::clean_question(" how many\nusers? ").unwrap(), "how many users?");
        let long = "x".repeat(MAX_QUESTION_CHARS + 1);
        assert!(matches!(Engine::clean_question(&long), Err(Nl2SqlError::QuestionTooLong { chars, max }) if chars == MAX_QUESTION_CHARS + 1 && max == MAX_QUESTION_CHARS));
        assert!(Engine::clean_question(&"x".repeat(MAX_QUESTION_CHARS)).is_ok());
    }
}
