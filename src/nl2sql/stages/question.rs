//! Stage `question`: the question's prefill, with the refusal check (`nl2sql::refusal`) when it
//! is on (never for a follow-up: it judges a question alone, and a follow-up such as "by
//! region?" is not one; after earlier exchanges its verdicts are not calibrated).
//!
//! Without the check the question part (its user turn and the opening of the assistant's) is one
//! prefill. With it, the user turn and the check turn go in one batch, whose last logits give
//! the verdict; the cache is cut back to the end of the user turn, and only when the question is
//! not refused the assistant's opening is prefilled: the same cache rows and the same logits as
//! one prefill of the question part (batch = sequential), so an answered question's answer is
//! bitwise what it is without the check.
//!
//! The check's turn is skipped (`refusal::Skip`) when the question part, prefilled whole as
//! without the check, gives first logits that open a SQL fence surely and two question words are
//! in the schema: the answer starts from those logits. Otherwise the cache is cut back to the end
//! of the user turn and the check runs as above; its verdict is the same as without the skip rule
//! (the same rows, batch = sequential). The assistant's opening the probe computed is set aside
//! over the check's turn (`KvCache::save_rows`) and put back after it: they are what a prefill of
//! the opening would compute (batch = sequential), and the answer starts from the probe's logits.
//! (Leaving the last token pending to ride with the first draft, as below, costs the same number
//! of passes here, one of them wider: the first token from the probe's logits is free; measured
//! on sql-eval, 2026-12-07, docs/performance.md.) A remote sequence, or a forward pass that is not
//! batch-invariant, prefills the opening once more.
//!
//! The question's last tokens (the assistant's opening after an unprobed check; the last
//! prefill chunk without it) are left pending when `pending` is asked: the first decode pass
//! feeds them with its first draft (`speculate::Start::Pending`), so the answer's first token
//! often costs no pass of its own. Same tokens, same logits.

use super::call::CallState;
use crate::nl2sql::api::outcome::PhaseTimings;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::check::refusal::{self, AnswerTokens, RefusalMode, Skip, Verdict};
use crate::nl2sql::decode::held::Held;
use crate::nl2sql::decode::passes::Forward;
use crate::nl2sql::decode::seq::Seq;
use crate::nl2sql::decode::sql_decode::Start;
use crate::nl2sql::schema::render::Renderer;
use crate::nl2sql::schema::tables::SchemaInfo;
use crate::platform::clock::ms_since;
use std::time::Instant;

/// What the check needs besides the question: its threshold and the tables the model was shown
/// (their rendered text for `refusal::matched_words`).
pub struct Check<'a> {
    /// `turboinfer.refusal_margin`.
    pub threshold: f32,
    /// The tables of the prompt.
    pub shown: &'a SchemaInfo,
    /// The question, cleaned.
    pub question: &'a str,
    /// When the check's turn may be skipped (`turboinfer.refusal = auto` and a model measured
    /// for it).
    pub skip: Option<Skip>,
    /// Whether rows computed once may be kept instead of computed again (the forward pass is
    /// batch-invariant: `CallState::keep_rows`): the assistant's opening that a skip probe
    /// computed is then set aside over the check's turn and put back, not prefilled once more.
    pub keep_rows: bool,
}

/// Prefills the question after the prefix (the rows a follow-up kept aside), checked first when
/// refusals are on; leaves where the answer's decode starts and the verdict.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    let plan = call.plan.as_ref().expect("the prompt is planned (stages/plan.rs)");
    let opts = call.opts;
    let check = opts.refusal.threshold(call.refusal_margin).filter(|_| plan.earlier == 0).map(
        |threshold| Check {
            threshold,
            shown: &call.shown,
            question: &call.question,
            // Only with the measured margin (`auto`): `on` checks every question.
            skip: call.refusal_skip.filter(|_| opts.refusal == RefusalMode::Auto),
            keep_rows: call.keep_rows,
        },
    );
    // The question's last tokens wait for the first draft (speculation on); sampled candidates
    // start from the question's logits: then none is left pending.
    let pending = call.speculate && opts.samples == 0;
    let kv = call.cache.kv.as_mut().expect("the KV buffers are ready (stages/open.rs)");
    let (start, refusal, prefilled) = prefill(
        &call.forward,
        kv,
        &plan.question_ids[call.follow_up.reused_tokens..],
        plan.plain_question_ids.as_deref(),
        check,
        pending,
        &mut call.timings,
        call.hooks.progress,
    )?;
    call.question_end = kv.len() + start.pending_len();
    call.context = plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect();
    call.held = Held::new(call.question_end, call.keep_rows);
    call.question_logits = match (&start, opts.samples > 0) {
        (Start::Logits(l), true) => l.clone(),
        _ => Vec::new(),
    };
    call.next = start;
    call.refusal = refusal;
    call.tokens.prefill += prefilled;
    Ok(())
}

/// The question's tokens after what `kv` holds (`question_ids`: user turn then the assistant's
/// opening), checked first when `check` is given and there is room: where the decode starts
/// (the logits of the last prompt position, empty when refused, or with `pending` the last
/// tokens still to feed), the verdict, and the prompt tokens run through the model (pending
/// ones included). Times go to `timings` (prefill, and the check's share in `refusal_ms`).
///
/// `plain`: the question part without the approved examples, when `question_ids` has some
/// (`Plan::plain_question_ids`). The check then runs on the plain question, as it was calibrated
/// (after earlier exchanges the model judges differently: every development question was
/// refused), its rows are cut off again, and the question part with its examples is prefilled
/// whole: a few dozen prompt tokens more.
#[allow(clippy::too_many_arguments)]
fn prefill(
    forward: &Forward<'_>,
    kv: &mut Seq,
    question_ids: &[u32],
    plain: Option<&[u32]>,
    check: Option<Check<'_>>,
    pending: bool,
    timings: &mut PhaseTimings,
    progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<(Start, Option<Verdict>, usize), Nl2SqlError> {
    let t = Instant::now();
    let checked = plain.unwrap_or(question_ids);
    let split = refusal::assistant_start(forward.tok, checked);
    let turn = refusal::check_turn().encode(forward.tok)?;
    let (check, split) = match (check, split) {
        // The check turn must fit next to the question (a nearly full context skips it).
        (Some(c), Some(i)) if kv.len() + i + turn.len() < kv.capacity() => (c, i),
        _ => {
            let start = forward.prefill_start(kv, question_ids, pending, progress)?;
            timings.prefill_ms += ms_since(t);
            return Ok((start, None, question_ids.len()));
        }
    };
    let answers = AnswerTokens::new(forward.tok)?;
    let start = kv.len();
    let user_end = start + split;
    let matched = refusal::matched_words(&schema_text(check.shown), check.question);
    // The skip reads the answer's own first logits: only without examples (with them the
    // check judges another prompt than the answer's) and with enough matched words.
    let (mut opening, mut probed) = (None, 0);
    let mut ids = checked[..split].to_vec();
    // The assistant's opening as the probe computed it (its rows and the logits of its last
    // position), when they may be put back after the check's turn.
    let mut kept = None;
    if let Some(skip) = check.skip.filter(|s| plain.is_none() && matched >= s.words) {
        let row = forward.prefill(kv, question_ids, progress)?;
        opening = refusal::opening_logprob(forward.tok, &row)?;
        if opening.is_some_and(|o| skip.skips(o, matched)) {
            timings.prefill_ms += ms_since(t);
            let verdict = Verdict { margin: None, opening, matched, threshold: check.threshold };
            return Ok((Start::Logits(row), Some(verdict), question_ids.len()));
        }
        // Not sure enough: the user turn stays, the check's turn follows it; the opening's
        // rows are set aside (the check's turn takes their positions).
        if check.keep_rows {
            kept = kv.save_rows(user_end).map(|rows| (rows, row));
        }
        kv.truncate(user_end);
        (probed, ids) = (question_ids.len(), Vec::new());
    }
    ids.extend_from_slice(&turn);
    // Only the answers' rows of the LM head: the margin reads nothing else.
    let sub = forward.prefill_rows(kv, &ids, &answers.rows(), progress)?;
    let verdict = Verdict {
        margin: Some(answers.margin_of_rows(&sub)),
        opening,
        matched,
        threshold: check.threshold,
    };
    // With examples the plain user turn goes too: the question part is prefilled whole below.
    kv.truncate(if plain.is_some() { start } else { user_end });
    timings.refusal_ms += ms_since(t);
    let mut prefilled = probed + ids.len();
    let start = if verdict.refused() {
        Start::Logits(Vec::new())
    } else if let Some((rows, row)) = kept {
        // The rows and logits a prefill of the opening would compute (batch = sequential).
        kv.restore_rows(&rows)?;
        Start::Logits(row)
    } else {
        let rest = if plain.is_some() { question_ids } else { &question_ids[split..] };
        prefilled += rest.len();
        forward.prefill_start(kv, rest, pending, progress)?
    };
    timings.prefill_ms += ms_since(t);
    Ok((start, Some(verdict), prefilled))
}

/// The tables of `shown` as the prompt renders them.
fn schema_text(shown: &SchemaInfo) -> String {
    let r = Renderer::new(shown);
    shown.tables.iter().map(|t| r.table(t)).collect()
}
