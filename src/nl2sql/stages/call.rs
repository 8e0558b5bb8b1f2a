//! One call's state, from its inputs to its answer ([`CallState`]: what every stage of the
//! pipeline works on, `Engine::answer`), and the small steps the stages take through it: start a
//! turn after the question, decode an answer, judge a statement, execute one.

use super::answer::Answer;
use crate::nl2sql::api::hooks::Hooks;
use crate::nl2sql::api::outcome::{FollowUp, Outcome, PhaseTimings, Speculation, TokenCounts};
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::memory_plan::MemoryPlan;
use crate::nl2sql::base::options::Options;
use crate::nl2sql::check::refusal::{Skip, Verdict};
use crate::nl2sql::check::rejection::Rejection;
use crate::nl2sql::decode::candidates::TokenScore;
use crate::nl2sql::decode::held::Held;
use crate::nl2sql::decode::passes::Forward;
use crate::nl2sql::decode::prefix_cache::{PrefixCache, PrefixSource};
use crate::nl2sql::decode::seq::Seq;
use crate::nl2sql::decode::shaping::Shaping;
use crate::nl2sql::decode::sql_decode::{DecodeLimits, Decoded, SpecStats, Start, StopReason};
use crate::nl2sql::plan::conversation::Conversation;
use crate::nl2sql::plan::planner::{Plan, Planner};
use crate::nl2sql::schema::tables::SchemaInfo;
use crate::platform::clock::ms_since;
use crate::platform::runtime::Runtime;
use std::time::Instant;

/// Back-outs of dead ends per constrained decode (see `decode::decode`): each costs one
/// forward pass, and a repair answer meets a handful (a banned word, an invented function name
/// half written); the cap bounds a decode that keeps meeting them.
const MAX_BACKTRACKS: usize = 32;

/// Why the KV buffers are there: the `open` stage allocates them before any other stage runs.
const KV_READY: &str = "the KV buffers are ready (stages/open.rs)";

/// Why a plan is there: the `plan` stage settles it before the stages that read it.
const PLANNED: &str = "the prompt is planned (stages/plan.rs)";

/// The inputs of one nl2sql call (`Engine::answer`).
pub struct Call<'a, 'h> {
    /// The worker threads of its forward passes.
    pub rt: &'a Runtime,
    /// The session's reusable KV state (schema prefix, drafter, cache files).
    pub cache: &'a mut PrefixCache,
    /// The tables the role may read.
    pub schema: &'a SchemaInfo,
    /// The question as asked.
    pub question: &'a str,
    /// The earlier turns when the question is a follow-up (`conversation.rs`).
    pub conv: Option<Conversation<'a>>,
    /// The call's settings.
    pub opts: &'a Options,
    /// The caller's validator, executor, progress report and table linker.
    pub hooks: Hooks<'h>,
}

/// What the engine lends a call: its model's forward passes, its planner and what it knows of
/// its model (`Engine::parts`).
pub struct EngineParts<'a> {
    /// The model, tokenizer and runtime of every forward pass.
    pub forward: Forward<'a>,
    /// The tokenizer, identity and context of prompt planning.
    pub planner: Planner<'a>,
    /// The refusal margin measured for this model (`refusal::calibrated_margin`), if any.
    pub refusal_margin: Option<f32>,
    /// When the check's turn may be skipped for this model (`refusal::calibrated_skip`).
    pub refusal_skip: Option<Skip>,
    /// True when a batch's forward pass is bitwise its tokens' one at a time
    /// (`Engine::batch_invariant`).
    pub batch_invariant: bool,
}

/// One call's state: its inputs, what the engine lends it, and what the stages settled so far
/// (`'a`: the call's borrows, `'h`: the caller's hooks). Each stage of the pipeline
/// (`Engine::answer`) is `run(&mut CallState)`.
pub struct CallState<'a, 'h> {
    /// The model, tokenizer and runtime of every forward pass.
    pub forward: Forward<'a>,
    /// Prompt planning (`planner.rs`).
    pub planner: Planner<'a>,
    /// The refusal margin measured for the model, if any.
    pub refusal_margin: Option<f32>,
    /// When the refusal check's turn may be skipped for the model.
    pub refusal_skip: Option<Skip>,
    /// The call's settings.
    pub opts: &'a Options,
    /// The schema as given (the `plan` stage normalizes it).
    pub schema: &'a SchemaInfo,
    /// The question as asked.
    pub asked: &'a str,
    /// The earlier turns of a follow-up.
    pub conv: Option<Conversation<'a>>,
    /// The session's reusable KV state: its `kv` holds the schema prefix, the question, then the
    /// current turn and its answer.
    pub cache: &'a mut PrefixCache,
    /// The caller's validator, executor and progress report.
    pub hooks: Hooks<'h>,
    /// The memory the call needs beyond the model (`Engine::memory_plan`).
    pub memory: MemoryPlan,
    /// When the call started (its prompt time runs from here).
    pub started: Instant,
    /// Drafts are verified in batches (`Options::speculation`, exact only when batch-invariant).
    pub speculate: bool,
    /// Cache rows after the question are kept for the turns that start the same way.
    pub keep_rows: bool,
    /// The question, cleaned (`open`).
    pub question: String,
    /// The prompt (`plan`).
    pub plan: Option<Plan>,
    /// The tables the prompt shows (constraints, repair facts; `plan`).
    pub shown: SchemaInfo,
    /// What the call did with its earlier turns (`plan`, `prefix`).
    pub follow_up: FollowUp,
    /// Where the prefix's KV rows came from (`prefix`).
    pub prefix_source: Option<PrefixSource>,
    /// The refusal check's verdict, when it ran (`question`).
    pub refusal: Option<Verdict>,
    /// Cache length at the end of the question: every turn after the first answer starts here.
    pub question_end: usize,
    /// The prompt tokens the decoder sees: prefix, question, then the current turn.
    pub context: Vec<u32>,
    /// What the cache holds after the question, for the turns that start the same way.
    pub held: Held,
    /// The question's focus tokens for the drafter when speculation is on (`drafter`).
    pub focus: Vec<u32>,
    /// Active vocabulary and constrainer of the next decode.
    pub shaping: Shaping,
    /// Where the next decode starts: the logits of the last prompt position, or the prompt's
    /// last tokens, pending (fed by the decode's first pass with its first draft).
    pub next: Start,
    /// The question's last logits, kept when sampled candidates are wanted (empty otherwise).
    pub question_logits: Vec<f32>,
    /// Milliseconds per phase so far.
    pub timings: PhaseTimings,
    /// Decode forward passes and draft tokens so far.
    pub spec: SpecStats,
    /// Prompt, prefix, prefilled and generated tokens so far.
    pub tokens: TokenCounts,
    /// The answer as far as the stages settled it.
    pub answer: Answer,
}

impl<'a, 'h> CallState<'a, 'h> {
    /// The state of `call` before its first stage, with what `engine` lends it and its memory
    /// plan.
    pub fn new(engine: EngineParts<'a>, call: Call<'a, 'h>, memory: MemoryPlan) -> Self {
        let opts = call.opts;
        CallState {
            forward: engine.forward,
            planner: engine.planner,
            refusal_margin: engine.refusal_margin,
            refusal_skip: engine.refusal_skip,
            opts,
            schema: call.schema,
            asked: call.question,
            conv: call.conv,
            cache: call.cache,
            hooks: call.hooks,
            memory,
            started: Instant::now(),
            speculate: opts.speculation && engine.batch_invariant,
            keep_rows: opts.keep_rows && engine.batch_invariant,
            question: String::new(),
            plan: None,
            shown: SchemaInfo::default(),
            follow_up: FollowUp::default(),
            prefix_source: None,
            refusal: None,
            question_end: 0,
            context: Vec::new(),
            held: Held::new(0, false),
            focus: Vec::new(),
            shaping: Shaping::plain(),
            next: Start::Logits(Vec::new()),
            question_logits: Vec::new(),
            timings: PhaseTimings::default(),
            spec: SpecStats::default(),
            tokens: TokenCounts::default(),
            answer: Answer::new(opts.repair_tokens),
        }
    }

    /// What the call reports once every stage ran.
    pub fn into_outcome(self) -> Outcome {
        let answer = self.answer;
        let answer_logprob = answer.mean_logprob();
        Outcome {
            follow_up: self.follow_up,
            shaping: self.shaping.summary(),
            prompt: self.plan.expect(PLANNED).into(),
            sql: answer.sql,
            error: answer.error,
            prefix_source: self.prefix_source.expect("the prefix is loaded (stages/prefix.rs)"),
            tokens: self.tokens,
            attempts: answer.attempts,
            speculation: Speculation { on: self.speculate, stats: self.spec },
            candidates: answer.candidates,
            repair_budget: answer.budget,
            timings: self.timings,
            memory: self.memory,
            refusal: self.refusal,
            answer_logprob,
        }
    }
}

impl CallState<'_, '_> {
    /// The KV cache.
    pub fn kv(&self) -> &Seq {
        self.cache.kv.as_ref().expect(KV_READY)
    }

    /// True when the refusal check refused the question: no answer is decoded.
    pub fn refused(&self) -> bool {
        self.refusal.is_some_and(|v| v.refused())
    }

    /// Starts a turn after the question with the tokens `ids` (a repair turn, a branch's
    /// leading tokens): the rows of its leading tokens the cache still holds are kept
    /// (`held.rs`), the rest is prefilled but, when drafts are verified, its last chunk, which
    /// waits for the next decode's first draft (prefilled all the same when sampled candidates
    /// need the turn's logits).
    pub fn prefill_turn(&mut self, ids: &[u32]) -> Result<(), Nl2SqlError> {
        let (kept, rest) = self.held.resume(ids);
        let kv = self.cache.kv.as_mut().expect(KV_READY);
        kv.truncate(kept);
        kv.check_room(rest.len() + 1)?;
        let t = Instant::now();
        self.context.truncate(self.question_end);
        self.context.extend_from_slice(ids);
        let drafting = self.speculate && self.cache.drafter.is_some();
        let pending = drafting && self.opts.samples == 0;
        let kv = self.cache.kv.as_mut().expect(KV_READY);
        self.next = self.forward.prefill_start(kv, rest, pending, self.hooks.progress)?;
        let fed = rest.len() - self.next.pending_len();
        self.held.fed(&rest[..fed], kv.len());
        self.tokens.prefill += rest.len();
        self.timings.prefill_ms += ms_since(t);
        Ok(())
    }

    /// Decodes an answer from the waiting logits until its statement ends, at most `max_new`
    /// tokens after `seed` (the text the answer already starts with); records each token's
    /// score in `scores` when given. Counts its tokens, passes and time.
    pub fn decode(
        &mut self,
        seed: &str,
        max_new: usize,
        scores: Option<&mut Vec<TokenScore>>,
    ) -> Result<Decoded, Nl2SqlError> {
        let t = Instant::now();
        // A constrained decode backs out of the dead ends its constraint can reach.
        let backtrack = if self.shaping.constrainer.is_some() { MAX_BACKTRACKS } else { 0 };
        let limits = DecodeLimits { max_new, stop_at_statement: true, seed, backtrack };
        let start = std::mem::replace(&mut self.next, Start::Logits(Vec::new()));
        let cache = &mut *self.cache;
        let kv = cache.kv.as_mut().expect(KV_READY);
        // The pending tokens of a turn are fed after the question (`held` records them); the
        // question's own end before it (the cache then stops short of `question_end`).
        let turn_tail = match &start {
            Start::Pending(t) if kv.len() >= self.question_end => t.clone(),
            _ => Vec::new(),
        };
        // The drafter and its focus tokens when speculation is on (`drafter` stage).
        let drafter = cache.drafter.as_ref().filter(|_| self.speculate);
        let drafter = drafter.map(|d| (d, self.focus.as_slice()));
        let d = self.forward.decode(
            kv,
            start,
            &self.context,
            drafter,
            limits,
            &self.shaping,
            scores,
            self.hooks.progress,
        )?;
        if let Some((drafter, _)) = drafter {
            if seed.is_empty() {
                drafter.remember_opening(&d.ids);
            }
            drafter.remember_answer(&d.ids);
        }
        // The decode fed every token it kept but its last (`speculate::decode`).
        let mut fed = turn_tail;
        fed.extend_from_slice(&d.ids[..d.ids.len().saturating_sub(1)]);
        self.held.fed(&fed, kv.len());
        self.tokens.generated += d.ids.len();
        self.spec.add(d.stats);
        self.timings.decode_ms += ms_since(t);
        Ok(d)
    }

    /// The verdict on an answer's statement `sql` (its decode stopped for `stop`): none, cut off
    /// at the token budget, else the validator's. Its time counts as validation.
    pub fn check(&mut self, sql: &str, stop: &StopReason) -> Result<(), Rejection> {
        let t = Instant::now();
        let verdict = if sql.is_empty() {
            Err(Rejection::from("the answer contains no SQL statement"))
        } else if *stop == StopReason::Budget {
            Err(Rejection::from(format!(
                "the answer was cut off at the limit of {} tokens (turboinfer.max_new_tokens)",
                self.opts.max_new_tokens
            )))
        } else {
            (self.hooks.validate)(sql)
        };
        self.timings.validate_ms += ms_since(t);
        verdict
    }

    /// The digest of `sql`'s rows from the caller's executor, when `valid` and there is one.
    /// Its time counts as execution.
    pub fn execute(&mut self, sql: &str, valid: bool) -> Option<u64> {
        let t = Instant::now();
        let digest = match (valid, self.hooks.execute.as_deref_mut()) {
            (true, Some(run)) => run(sql),
            _ => None,
        };
        self.timings.execute_ms += ms_since(t);
        digest
    }
}
