//! Candidate answers (`candidates.rs`): branches off the first answer and sampled answers
//! (`samples.rs`), decoded when they can change the result, and the choice among them and the
//! answer of the repair loop.

use super::answer::Answer;
use super::call::CallState;
use super::repair_turn::MAX_ERROR_CHARS;
use crate::nl2sql::api::outcome::Attempt;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::decode::candidates::{self, Candidate, CandidateChoice, TokenScore};
use crate::nl2sql::decode::sql_decode::StopReason;
use crate::nl2sql::repair::feedback::cap_chars;
use crate::nl2sql::sql::sqltext::extract_sql;

/// Weighs the answer against up to `opts.candidates - 1` branches off the first answer, when
/// they can change the result; the chosen candidate becomes the answer. Leaves the candidates
/// in `call.answer.candidates` (empty when none was decoded). Nothing for a refused question.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    if call.refused() {
        return Ok(());
    }
    let mut answer = std::mem::take(&mut call.answer);
    branches(call, &mut answer)?;
    call.answer = answer;
    Ok(())
}

/// [`run`] on the answer taken out of the call's state.
fn branches(call: &mut CallState<'_, '_>, answer: &mut Answer) -> Result<(), Nl2SqlError> {
    let opts = call.opts;
    let doubted = answer.attempts.iter().any(|a| a.advisory && a.sql == answer.sql);
    // Not when the first answer ran out of tokens: its branches share its budget.
    let cut_off = answer.attempts[0].stop == StopReason::Budget;
    // Decoded when they can change the answer: it is rejected or doubted (to rescue it, within
    // the repair budget), or results vote (the caller asked for that).
    let rescue = answer.error.is_some() || doubted;
    let wanted = (opts.candidates > 1 || opts.samples > 0)
        && !cut_off
        && (call.hooks.execute.is_some() || rescue && answer.budget.allows(answer.decoded()));
    if !wanted {
        return Ok(());
    }
    let digest = call.execute(&answer.sql, answer.error.is_none());
    let mut cands = vec![Candidate {
        sql: answer.sql.clone(),
        branch: None,
        sample: None,
        mean_logprob: candidates::mean_logprob(&answer.last_scores),
        error: answer.error.clone(),
        doubted,
        digest,
    }];
    let (first, first_scores) = (&answer.attempts[0], &answer.first_scores);
    let points =
        candidates::branch_points(call.forward.tok, &first.ids, first_scores, opts.candidates - 1)
            .unwrap_or_default();
    // Branches decode as the first answer did: unconstrained (the repair rounds' constrainer goes).
    call.shaping.constrainer = None;
    for p in points {
        if let Some(c) = branch(call, first, first_scores, p, &cands)? {
            cands.push(c);
        }
    }
    super::samples::run(call, &mut cands)?;
    let chosen = candidates::choose(&cands);
    if let Some(i) = chosen.filter(|&i| i > 0) {
        answer.sql.clone_from(&cands[i].sql);
        answer.error = None;
    }
    answer.candidates = CandidateChoice { weighed: cands, chosen };
    Ok(())
}

/// The candidate branching off the `first` answer (token scores `first_scores`) at token `p`:
/// its tokens up to `p`, the alternative there, then greedy. `None` when it does not fit or
/// its statement is one of `cands` already.
fn branch(
    call: &mut CallState<'_, '_>,
    first: &Attempt,
    first_scores: &[TokenScore],
    p: usize,
    cands: &[Candidate],
) -> Result<Option<Candidate>, Nl2SqlError> {
    let alt = first_scores[p];
    let mut prefix = first.ids[..p].to_vec();
    prefix.push(alt.alt);
    let max_new = call.opts.max_new_tokens.saturating_sub(prefix.len());
    if max_new == 0 || call.question_end + prefix.len() + 1 > call.kv().capacity() {
        return Ok(None);
    }
    // The first answer's tokens up to the branch point: kept where the cache still holds them
    // (the last repair turn starts with them, or the last branch).
    call.prefill_turn(&prefix)?;
    let seed = call.forward.tok.decode(&prefix);
    let mut scores = first_scores[..p].to_vec();
    scores.push(TokenScore {
        logprob: alt.alt_logprob,
        alt: first.ids[p],
        alt_logprob: alt.logprob,
    });
    let d = call.decode(&seed, max_new, Some(&mut scores))?;
    let sql = extract_sql(&d.text).sql;
    if cands.iter().any(|c| c.sql == sql) {
        return Ok(None); // the same statement again: no new evidence
    }
    let verdict = call.check(&sql, &d.stop);
    // A doubted branch is valid, chosen only when no undoubted one is.
    let doubt = verdict.as_ref().err().is_some_and(|r| r.advisory);
    let verdict = if doubt { Ok(()) } else { verdict };
    let digest = call.execute(&sql, verdict.is_ok());
    Ok(Some(Candidate {
        sql,
        branch: Some(p),
        sample: None,
        mean_logprob: candidates::mean_logprob(&scores),
        error: verdict.err().map(|r| cap_chars(&r.message, MAX_ERROR_CHARS)),
        doubted: doubt,
        digest,
    }))
}
