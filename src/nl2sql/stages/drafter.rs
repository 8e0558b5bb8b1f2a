//! Stage `drafter`: when speculation is on, the drafter of the plan's schema prefix (it lives
//! next to the prefix it was built for, in the session's cache; building it counts as prompt
//! time) and the question's focus tokens. Speculation verifies drafts in batches, exact only if a
//! batch equals the same tokens one by one, which a sparse FFN hook that keeps batches dense
//! breaks (`CallState::speculate`).

use super::call::CallState;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::decode::draft::{focus_tokens, Drafter};
use crate::platform::clock::ms_since;
use std::time::Instant;

/// Readies the drafter and the focus tokens; nothing when speculation is off.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    if !call.speculate {
        return Ok(());
    }
    let plan = call.plan.as_ref().expect("the prompt is planned (stages/plan.rs)");
    let (tok, slot) = (call.forward.tok, &mut call.cache.drafter);
    if slot.as_ref().is_none_or(|d| d.fingerprint() != Some(plan.fingerprint)) {
        let t = Instant::now();
        let previous = slot.take();
        let rt = Some(call.forward.rt);
        let d = Drafter::for_schema_after(tok, &call.shown, plan.fingerprint, previous, rt)?;
        *slot = Some(d);
        call.timings.prompt_ms += ms_since(t);
    }
    call.focus = focus_tokens(tok, &call.shown, &call.question, &plan.question_ids)?;
    Ok(())
}
