//! The state the stages of one call share, and the small steps they take through it: start a turn
//! after the question, decode an answer, judge a statement, execute one.

use crate::nl2sql::candidates::TokenScore;
use crate::nl2sql::decode::{DecodeLimits, Decoded, SpecStats, Start, StopReason};
use crate::nl2sql::draft::Drafter;
use crate::nl2sql::error::Nl2SqlError;
use crate::nl2sql::forward::Forward;
use crate::nl2sql::held::Held;
use crate::nl2sql::hooks::Hooks;
use crate::nl2sql::options::Options;
use crate::nl2sql::outcome::{PhaseTimings, TokenCounts};
use crate::nl2sql::repair::Rejection;
use crate::nl2sql::schema::SchemaInfo;
use crate::nl2sql::seq::Seq;
use crate::nl2sql::shaping::Shaping;
use crate::platform::clock::ms_since;
use std::time::Instant;

/// Back-outs of dead ends per constrained decode (see `decode::decode`): each costs one
/// forward pass, and a repair answer meets a handful (a banned word, an invented function name
/// half written); the cap bounds a decode that keeps meeting them.
const MAX_BACKTRACKS: usize = 32;

/// One call's shared state, from the end of the question on (`'a`: the call's borrows, `'h`: the
/// caller's hooks).
pub struct CallState<'a, 'h> {
    /// The model, tokenizer and runtime of every forward pass.
    pub forward: Forward<'a>,
    /// The call's settings.
    pub opts: &'a Options,
    /// The tables the prompt shows (constraints, repair facts).
    pub shown: &'a SchemaInfo,
    /// The KV cache: schema prefix, question, then the current turn and its answer.
    pub kv: &'a mut Seq,
    /// Cache length at the end of the question: every turn after the first answer starts here.
    pub question_end: usize,
    /// The prompt tokens the decoder sees: prefix, question, then the current turn.
    pub context: Vec<u32>,
    /// What the cache holds after the question, for the turns that start the same way.
    pub held: Held,
    /// The drafter and its focus tokens when speculation is on.
    pub drafter: Option<(&'a Drafter, &'a [u32])>,
    /// Active vocabulary and constrainer of the next decode.
    pub shaping: Shaping,
    /// Where the next decode starts: the logits of the last prompt position, or the prompt's
    /// last tokens, pending (fed by the decode's first pass with its first draft).
    pub next: Start,
    /// The question's last logits, kept when sampled candidates are wanted (empty otherwise).
    pub question_logits: Vec<f32>,
    /// The caller's validator, executor and progress report.
    pub hooks: Hooks<'h>,
    /// Milliseconds per phase so far.
    pub timings: PhaseTimings,
    /// Decode forward passes and draft tokens so far.
    pub spec: SpecStats,
    /// Prompt, prefix, prefilled and generated tokens so far.
    pub tokens: TokenCounts,
}

impl CallState<'_, '_> {
    /// Starts a turn after the question with the tokens `ids` (a repair turn, a branch's
    /// leading tokens): the rows of its leading tokens the cache still holds are kept
    /// (`held.rs`), the rest is prefilled but, when drafts are verified, its last chunk, which
    /// waits for the next decode's first draft (prefilled all the same when sampled candidates
    /// need the turn's logits).
    pub fn prefill_turn(&mut self, ids: &[u32]) -> Result<(), Nl2SqlError> {
        let (kept, rest) = self.held.resume(ids);
        self.kv.truncate(kept);
        self.kv.check_room(rest.len() + 1)?;
        let t = Instant::now();
        self.context.truncate(self.question_end);
        self.context.extend_from_slice(ids);
        let pending = self.drafter.is_some() && self.opts.samples == 0;
        self.next = self.forward.prefill_start(self.kv, rest, pending, self.hooks.progress)?;
        let fed = rest.len() - self.next.pending_len();
        self.held.fed(&rest[..fed], self.kv.len());
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
        // The pending tokens of a turn are fed after the question (`held` records them); the
        // question's own end before it (the cache then stops short of `question_end`).
        let turn_tail = match &start {
            Start::Pending(t) if self.kv.len() >= self.question_end => t.clone(),
            _ => Vec::new(),
        };
        let d = self.forward.decode(
            self.kv,
            start,
            &self.context,
            self.drafter,
            limits,
            &self.shaping,
            scores,
            self.hooks.progress,
        )?;
        if let Some((drafter, _)) = self.drafter {
            if seed.is_empty() {
                drafter.remember_opening(&d.ids);
            }
            drafter.remember_answer(&d.ids);
        }
        // The decode fed every token it kept but its last (`speculate::decode`).
        let mut fed = turn_tail;
        fed.extend_from_slice(&d.ids[..d.ids.len().saturating_sub(1)]);
        self.held.fed(&fed, self.kv.len());
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
