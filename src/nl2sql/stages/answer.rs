//! What the stages of a call settle, stage by stage.

use crate::nl2sql::candidates::{CandidateChoice, TokenScore};
use crate::nl2sql::outcome::Attempt;

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
}
