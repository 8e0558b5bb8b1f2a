//! A repair round's turn: the rejected statement, the server's message and the catalog facts as
//! a new turn right after the question, its answer decoded under the constrainer's strict mode.

use super::call::CallState;
use crate::nl2sql::api::outcome::Attempt;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::decode::constrain::Constrainer;
use crate::nl2sql::plan::planner::REPAIR_RESERVE_TOKENS;
use crate::nl2sql::plan::prompt;
use crate::nl2sql::repair::feedback::alias_hints;

/// Longest parser message fed back to the model.
pub const MAX_ERROR_CHARS: usize = 300;

/// Rejected statements and the byte span of their located error, for the repair bans.
pub type Bans = Vec<(String, (usize, usize))>;

/// Whether a repair round fits after an attempt rejected with `error`: each round starts again
/// right after the question.
pub fn fits(call: &CallState<'_, '_>, error: &Option<String>) -> bool {
    let capacity = call.kv().capacity();
    error.is_some()
        && call.question_end + call.opts.max_new_tokens.min(capacity / 4) + REPAIR_RESERVE_TOKENS
            <= capacity
}

/// Starts the repair round of the rejected attempt `rejected` (its located error at byte span
/// `span`, added to `bans`): the turn is prefilled and the constrainer set for its answer.
pub fn start(
    call: &mut CallState<'_, '_>,
    rejected: &Attempt,
    span: Option<(usize, usize)>,
    bans: &mut Bans,
) -> Result<(), Nl2SqlError> {
    let (sql, shown) = (&rejected.sql, &call.shown);
    let message = rejected.error.clone().unwrap_or_default();
    // Repair round: the rejected answer, the server's message and the catalog facts as a new
    // turn (each round starts again right after the question).
    let repair_ids = prompt::repair(sql, &message, &rejected.feedback, rejected.advisory)
        .encode(call.forward.tok)?;
    // Repair answers are always decoded in the constrainer's strict mode: identifiers inside the
    // schema (the rejected draft's aliases standing for its tables from their first use), only
    // known functions, and never the word a located error was about in any earlier rejected
    // statement (a small model otherwise writes its last answer again).
    if let Some(span) = span {
        bans.push((sql.clone(), span));
    }
    let mut c = Constrainer::with_hints(shown, alias_hints(sql, shown)).known_calls_only();
    for (banned, (start, end)) in bans.iter() {
        c = c.with_ban(banned, *start, *end);
    }
    call.shaping.constrainer = Some(c);
    // The turn starts with the rejected statement: the rows of its tokens the cache still holds
    // (just decoded) are kept (`held.rs`).
    call.prefill_turn(&repair_ids)
}
