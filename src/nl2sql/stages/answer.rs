//! What the stages of a call settle, stage by stage.

use crate::nl2sql::api::outcome::{Attempt, RepairBudget};
use crate::nl2sql::decode::candidates::{self, CandidateChoice, TokenScore};
use crate::nl2sql::decode::sql_decode::StopReason;

/// The answer as far as the stages have settled it.
#[derive(Debug, Default)]
pub struct Answer {
    /// The statement answered (no `;`).
    pub sql: String,
    /// The validator's message when `sql` is rejected.
    pub error: Option<String>,
    /// The first answer, then one per repair round or rewrite.
    pub attempts: Vec<Attempt>,
    /// Token scores of the first answer (where branches start), kept when candidates are
    /// wanted.
    pub first_scores: Vec<TokenScore>,
    /// Token scores of the last attempt (its likelihood; empty for a rewrite), kept when
    /// candidates are wanted.
    pub last_scores: Vec<TokenScore>,
    /// The candidates weighed and the one chosen (empty when no branch was decoded).
    pub candidates: CandidateChoice,
    /// The repair budget: the tokens the line decoded, and whether it stopped a round or a
    /// branch.
    pub budget: RepairBudget,
}

impl Answer {
    /// Mean `log p` per token of the decode that wrote `answer`'s statement (`Outcome::answer_logprob`, weighed by `api/verdict.rs`):
    /// the chosen candidate's when candidates were weighed, else the attempt's whose statement it is
    /// (the first or the last: the token scores of those two are kept); `None` for an engine rewrite
    /// or when no scores were kept.
    pub fn mean_logprob(&self) -> Option<f32> {
        let lp = match self.candidates.chosen {
            Some(i) => self.candidates.weighed.get(i)?.mean_logprob,
            None => {
                let at = self.attempts.iter().rposition(|a| a.sql == self.sql)?;
                if self.attempts[at].rewritten.is_some() {
                    return None;
                }
                let last = self.attempts.len() - 1;
                let scores = match at {
                    _ if at == last => &self.last_scores,
                    0 => &self.first_scores,
                    _ => return None,
                };
                candidates::mean_logprob(scores)
            }
        };
        lp.is_finite().then_some(lp)
    }

    /// An answer not begun, under a repair budget of `repair_tokens` decoded tokens (0: none).
    pub fn new(repair_tokens: usize) -> Answer {
        Answer { budget: RepairBudget::new(repair_tokens), ..Answer::default() }
    }

    /// Tokens the answer and its repairs decoded so far, as the repair budget counts them: a
    /// rewrite decodes none, and an attempt cut off at `max_new_tokens` is not counted (its
    /// length is the limit's, not the statement's: a model caught in a loop, which a round after
    /// it usually ends with a short statement; the rounds still bound it).
    pub fn decoded(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.stop != StopReason::Budget)
            .map(|a| a.generated_tokens)
            .sum()
    }
}
