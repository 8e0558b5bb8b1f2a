//! The first answer and its repairs: decode, judge, and while the statement is rejected (or
//! doubted) and rounds remain, either the engine's own rewrite (`rewrite.rs`) or a repair round
//! (`repair_turn.rs`) and a fresh answer, while the line's decoded tokens are within the repair
//! budget (`Options::repair_tokens`). A doubted answer the rounds after it did not better is the
//! answer.

use super::answer::Answer;
use super::call::CallState;
use super::repair_turn::{self, Bans, MAX_ERROR_CHARS};
use super::rewrite::{self, Rewrite};
use crate::nl2sql::api::outcome::Attempt;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::check::rejection::{error_span, Rejection};
use crate::nl2sql::decode::sql_decode::Decoded;
use crate::nl2sql::plan::prompt;
use crate::nl2sql::repair::feedback::{cap_chars, feedback};
use crate::nl2sql::sql::sqltext::extract_sql;

/// Runs the first answer and the repair rounds from the question's logits; leaves the attempts,
/// the answer's statement and verdict, and the token scores in `call.answer`. Nothing for a
/// refused question.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    if call.refused() {
        return Ok(());
    }
    let mut answer = std::mem::take(&mut call.answer);
    repair_loop(call, &mut answer)?;
    call.answer = answer;
    Ok(())
}

/// [`run`] on the answer taken out of the call's state.
fn repair_loop(call: &mut CallState<'_, '_>, answer: &mut Answer) -> Result<(), Nl2SqlError> {
    let opts = call.opts;
    let mut bans = Bans::new();
    // Token scores of the first answer (where branches start) and of the last (its likelihood),
    // kept when candidates are wanted.
    let want_scores = opts.candidates > 1;
    // The next attempt when the engine rewrote the last statement itself (no decode).
    let mut pending: Option<Rewrite> = None;
    loop {
        let mut scores = Vec::new();
        let (decoded, rewritten) = match pending.take() {
            Some(r) => r.into_answer(),
            None => {
                let seed = if answer.attempts.is_empty() { "" } else { prompt::REPAIR_SEED };
                let recorder = want_scores.then_some(&mut scores);
                (call.decode(seed, opts.max_new_tokens, recorder)?, None)
            }
        };
        if answer.attempts.is_empty() {
            answer.first_scores.clone_from(&scores);
        }
        answer.last_scores = scores;
        let (rejection, rejection_span) = judge(call, answer, decoded, rewritten);
        let attempts = &answer.attempts;
        let last = attempts.last().expect("just pushed");
        // A repair that repeats an earlier rejected statement will not do better next round.
        let repeated = attempts.iter().filter(|a| a.sql == last.sql).count() > 1;
        // A doubt is worth one repair round per call, no more; it is granted even when the
        // rejections before it used the rounds up (unless repairs are off). The engine's own
        // rewrites are not model rounds: they do not count.
        let advisory = last.advisory;
        let doubted_again = advisory && attempts.iter().filter(|a| a.advisory).count() > 1;
        let rewrites = attempts.iter().filter(|a| a.rewritten.is_some()).count();
        let rounds =
            opts.repair_rounds + rewrites + usize::from(advisory && opts.repair_rounds > 0);
        let done = last.error.is_none() || attempts.len() > rounds || repeated || doubted_again;
        if done || !repair_turn::fits(call, &last.error) {
            break;
        }
        pending = rewrite::find(call, rejection.as_ref(), last, rewrites);
        if pending.is_none() {
            // A model round decodes a whole statement again: not past the repair budget (the
            // engine's rewrites decode nothing and run past it).
            let decoded = answer.decoded();
            if !answer.budget.allows(decoded) {
                break;
            }
            let last = answer.attempts.last().expect("just pushed");
            repair_turn::start(call, last, rejection_span, &mut bans)?;
        }
    }
    answer.budget.decoded = answer.decoded();
    // A doubted answer is valid: when the rounds after it did no better, it is the answer.
    let last = answer.attempts.last().expect("one attempt at least");
    (answer.sql, answer.error) = match answer.attempts.iter().find(|a| a.advisory) {
        Some(a) if last.error.is_some() => (a.sql.clone(), None),
        _ => (last.sql.clone(), last.error.clone()),
    };
    Ok(())
}

/// Judges an answer (`decoded`, or the engine's rewrite when `rewritten` says how) and records it
/// as the next attempt of `answer`; returns its rejection and the byte span of the located error.
fn judge(
    call: &mut CallState<'_, '_>,
    answer: &mut Answer,
    decoded: Decoded,
    rewritten: Option<String>,
) -> (Option<Rejection>, Option<(usize, usize)>) {
    let Decoded { ids, text: raw, stop, stats } = decoded;
    let sql = extract_sql(&raw).sql;
    let rejection = call.check(&sql, &stop).err();
    let advisory = rejection.as_ref().is_some_and(|r| r.advisory);
    let rejection_span = rejection.as_ref().and_then(|r| error_span(r, &sql));
    let error = rejection.as_ref().map(|r| cap_chars(&r.message, MAX_ERROR_CHARS));
    let feedback = match &rejection {
        Some(r) => feedback(r, &sql, &call.shown),
        None => String::new(),
    };
    answer.attempts.push(Attempt {
        raw,
        sql,
        generated_tokens: ids.len(),
        ids,
        stop,
        error,
        advisory,
        rewritten,
        sqlstate: rejection.as_ref().and_then(|r| r.sqlstate.clone()),
        feedback,
        spec: stats,
    });
    (rejection, rejection_span)
}
