//! What a call reports: the answer, its attempts, and grouped counters (prompt, tokens,
//! speculation, token shaping, candidates, timings, memory).

use crate::generate::fingerprint::Fingerprint;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::memory_plan::MemoryPlan;
use crate::nl2sql::check::refusal::Verdict;
use crate::nl2sql::decode::candidates::CandidateChoice;
use crate::nl2sql::decode::prefix_cache::PrefixSource;
pub use crate::nl2sql::decode::shaping::ShapingSummary;
use crate::nl2sql::decode::sql_decode::{SpecStats, StopReason};
use crate::nl2sql::plan::conversation::Turn;
use crate::nl2sql::plan::planner::Plan;

/// The result of a call that ran the model.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What the call did with the earlier turns of a follow-up (`conversation.rs`).
    pub follow_up: FollowUp,
    /// The last attempt's statement (no `;`); validated unless `error` is set.
    pub sql: String,
    /// The validator's message when even the repaired statement was rejected.
    pub error: Option<String>,
    /// The prompt: its text, fingerprint and tables.
    pub prompt: PromptSummary,
    /// Where the prefix's KV state came from.
    pub prefix_source: PrefixSource,
    /// Tokens of the prompt, run through the model and generated.
    pub tokens: TokenCounts,
    /// The first answer and one per repair round.
    pub attempts: Vec<Attempt>,
    /// Whether speculative decoding was on, and the decode counters over all attempts.
    pub speculation: Speculation,
    /// The token shaping of the call: the repair rounds' schema constraints.
    pub shaping: ShapingSummary,
    /// The candidates weighed when branches were decoded, and the one chosen.
    pub candidates: CandidateChoice,
    /// The repair budget and whether it stopped a round or a branch.
    pub repair_budget: RepairBudget,
    /// Milliseconds spent per phase.
    pub timings: PhaseTimings,
    /// The memory the call needed beyond the mapped model.
    pub memory: MemoryPlan,
    /// The refusal check's verdict, when it ran; a refused call has no `sql` and no attempts.
    pub refusal: Option<Verdict>,
    /// Mean `log p` per token of the answer's decode (how sure the model was of its words),
    /// when the call kept token scores (`Options::candidates` > 1) and the answer was decoded,
    /// not rewritten by the engine (`verdict.rs` weighs it).
    pub answer_logprob: Option<f32>,
}

impl Outcome {
    /// Whether the refusal check refused the question.
    pub fn refused(&self) -> bool {
        self.refusal.is_some_and(|v| v.refused())
    }

    /// Whether the schema prefix's KV state was reused whole (from memory or a cache file).
    pub fn cache_hit(&self) -> bool {
        matches!(self.prefix_source, PrefixSource::Memory | PrefixSource::File)
    }

    /// Accepted / proposed draft tokens (0 when nothing was proposed).
    pub fn acceptance_rate(&self) -> f64 {
        self.speculation.stats.acceptance_rate()
    }

    /// `Ok` when the statement was accepted, else [`Nl2SqlError::Refused`] or
    /// [`Nl2SqlError::InvalidSql`].
    pub fn into_result(self) -> Result<Outcome, Nl2SqlError> {
        if let Some(v) = self.refusal.filter(Verdict::refused) {
            return Err(Nl2SqlError::Refused { reason: v.reason(self.prompt.shown.len()) });
        }
        match self.error {
            None => Ok(self),
            Some(message) => Err(Nl2SqlError::InvalidSql { sql: self.sql, message }),
        }
    }
}

/// The prompt of a call, as reported.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSummary {
    /// The first attempt's whole prompt text (`Plan::text`), for running the same prompt
    /// elsewhere.
    pub text: String,
    /// The schema prefix's fingerprint.
    pub fingerprint: Fingerprint,
    /// Qualified names of the tables in the prompt, in prompt order.
    pub shown: Vec<String>,
    /// Qualified names of the tables left out for lack of room.
    pub dropped: Vec<String>,
    /// The approved examples shown before the question (`Plan::examples`): id and similarity.
    pub examples: Vec<(i64, f64)>,
    /// How the shown tables were chosen when not all fit (`None`: all were shown).
    pub linking: Option<crate::nl2sql::plan::link::LinkReport>,
}

impl From<Plan> for PromptSummary {
    /// What an outcome reports of a call's prompt.
    fn from(plan: Plan) -> PromptSummary {
        PromptSummary {
            text: plan.text(),
            fingerprint: plan.fingerprint,
            shown: plan.shown,
            dropped: plan.dropped,
            examples: plan.examples,
            linking: plan.linking,
        }
    }
}

/// Token counts of a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenCounts {
    /// Prompt tokens (prefix + question).
    pub prompt: usize,
    /// Tokens of the schema prefix.
    pub prefix: usize,
    /// Prompt tokens actually run through the model in this call.
    pub prefill: usize,
    /// Prefix tokens whose keys and values came from memory or a cache file (all of the prefix
    /// on a hit; its beginning shared with the previous call's prefix on a `partial` one).
    pub reused: usize,
    /// Tokens generated over all attempts.
    pub generated: usize,
}

/// Speculative decoding in a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Speculation {
    /// Whether speculative decoding was on.
    pub on: bool,
    /// Decode forward passes, draft tokens proposed and accepted over all attempts and branches
    /// (the forward passes equal the generated tokens minus each decode's first token, which
    /// comes from the prompt's logits, without speculation).
    pub stats: SpecStats,
}

/// The repair budget of a call (`Options::repair_tokens`) and what it did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RepairBudget {
    /// The budget in decoded tokens (0: none).
    pub tokens: usize,
    /// Tokens the answer and its repairs decoded (the line's attempts; branches and attempts
    /// cut off at `max_new_tokens` not counted).
    pub decoded: usize,
    /// Whether the budget stopped a repair round or a rescue branch that would have run.
    pub reached: bool,
}

impl RepairBudget {
    /// The budget `tokens` (0: none), nothing decoded yet.
    pub fn new(tokens: usize) -> RepairBudget {
        RepairBudget { tokens, ..RepairBudget::default() }
    }

    /// Whether a line that decoded `decoded` tokens may decode more: a repair round or a
    /// branch. Records the decoded tokens; a `false` marks the budget reached.
    pub fn allows(&mut self, decoded: usize) -> bool {
        self.decoded = decoded;
        let allowed = self.tokens == 0 || decoded < self.tokens;
        self.reached |= !allowed;
        allowed
    }
}

/// One generation + validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The model's raw answer text.
    pub raw: String,
    /// The extracted statement (no `;`).
    pub sql: String,
    /// Tokens decoded (0 for a rewrite).
    pub generated_tokens: usize,
    /// The generated token ids.
    pub ids: Vec<u32>,
    /// Why the decode stopped.
    pub stop: StopReason,
    /// The validator's message when it rejected `sql`, or its doubt (see `advisory`).
    pub error: Option<String>,
    /// `error` is a doubt (`doubt.rs`): `sql` is valid and runs, but looks wrong.
    pub advisory: bool,
    /// Not decoded: the previous attempt's statement rewritten by the engine (a column put on the
    /// wrong table requalified, `fixes::requalified`; a table used but not read joined,
    /// `fixes::joined`; integer divisions made exact, a doubt's `fix`), and how.
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
    /// The caller's executor, running candidate answers (see `Engine::answer`).
    pub execute_ms: f64,
    /// The refusal check: the prefill of its turn (also counted in `prefill_ms`) and the verdict.
    pub refusal_ms: f64,
}

/// Why a follow-up's earlier turns were dropped (`conversation.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The schema prefix differs from the one the turns were asked over.
    SchemaChanged,
}

impl Dropped {
    /// The reason `nl2sql_explain` reports.
    pub fn reason(self) -> &'static str {
        match self {
            Dropped::SchemaChanged => "the schema shown to the model changed",
        }
    }
}

/// What a call did with its earlier turns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FollowUp {
    /// The call was given earlier turns.
    pub asked: bool,
    /// How many of them (the newest) are in the prompt.
    pub used: usize,
    /// Why none are, when they were dropped.
    pub dropped: Option<Dropped>,
    /// Prompt tokens after the schema prefix whose cache rows were kept from the previous call
    /// (the earlier turns' question and answer, not prefilled again).
    pub reused_tokens: usize,
}

/// The turns outcomes make (`conversation.rs`).
impl Turn {
    /// The turn `outcome` makes of `question` (cleaned), when it enters a conversation: an
    /// answered question with an accepted statement. A refused question, or one whose statement
    /// was still rejected after the repair rounds, is no turn: it leaves the conversation as it
    /// was, so a follow-up after it follows the turn before.
    pub fn of(question: &str, outcome: &Outcome) -> Option<Turn> {
        let accepted = !outcome.refused() && outcome.error.is_none() && !outcome.sql.is_empty();
        accepted.then(|| Turn::answered(question, &outcome.sql, &outcome.attempts))
    }

    /// The turn of `question` answered with the accepted statement `sql` after `attempts`.
    fn answered(question: &str, sql: &str, attempts: &[Attempt]) -> Turn {
        // Answered at the first attempt: the model's own words (the cache holds their rows).
        let answer = match attempts {
            [a] if a.rewritten.is_none() && a.sql == sql => a.raw.clone(),
            _ => format!("```sql\n{sql}\n```"),
        };
        Turn { question: question.to_string(), sql: sql.to_string(), answer }
    }
}

/// An attempt of three generated tokens that stopped at the end of its statement, for tests of
/// what reads attempts (this module's, the verdict's).
#[cfg(test)]
pub(crate) fn test_attempt(raw: &str, sql: &str, error: Option<&str>) -> Attempt {
    Attempt {
        raw: raw.into(),
        sql: sql.into(),
        generated_tokens: 3,
        ids: vec![1, 2, 3],
        stop: StopReason::EndOfStatement,
        error: error.map(str::to_string),
        advisory: false,
        rewritten: None,
        sqlstate: None,
        feedback: String::new(),
        spec: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(raw: &str, sql: &str, error: Option<&str>) -> Attempt {
        test_attempt(raw, sql, error)
    }

    #[test]
    fn first_answers_keep_the_model_words() {
        let raw = "```sql\nSELECT count(*) FROM orders;\n```";
        let sql = "SELECT count(*) FROM orders";
        let mut attempts = vec![attempt(raw, sql, None)];
        let t = Turn::answered("How many orders?", sql, &attempts);
        assert_eq!(t.answer, raw, "the model's own words");
        assert_eq!((t.question.as_str(), t.sql.as_str()), ("How many orders?", sql));
        // Repaired: the final statement, fenced.
        attempts.insert(0, attempt("```sql\nSELECT nope\n```", "SELECT nope", Some("no")));
        let t = Turn::answered("How many orders?", sql, &attempts);
        assert_eq!(t.answer, "```sql\nSELECT count(*) FROM orders\n```");
        // Rewritten by the engine: fenced too.
        let mut rewritten = attempt(raw, sql, None);
        rewritten.rewritten = Some("requalified".into());
        let t = Turn::answered("How many orders?", sql, &[rewritten]);
        assert_eq!(t.answer, "```sql\nSELECT count(*) FROM orders\n```");
    }
}
