//! Stage `plan`: the prompt of the call (`planner.rs`: the tables shown, the examples, a
//! follow-up's earlier turns), planned again for the question alone when the turns were asked
//! over another schema prefix, and the tables it shows.

use super::call::CallState;
use crate::nl2sql::api::outcome::{Dropped, FollowUp};
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::plan::link::Linking;
use crate::nl2sql::plan::planner::{normalized, shown_tables};
use crate::platform::clock::ms_since;

/// Plans the prompt; its time (from the call's start) is the prompt time.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    // Normalized once per call: the plan and the tables it shows share it.
    let schema = normalized(call.schema);
    let (rt, opts, conv) = (call.forward.rt, call.opts, call.conv);
    let hooks = &mut call.hooks;
    let linking =
        hooks.link.as_mut().map(|slot| Linking { rt, slot, progress: &mut *hooks.progress });
    call.follow_up = FollowUp { asked: conv.is_some(), ..FollowUp::default() };
    let mut plan = call.planner.plan(&schema, &call.question, opts, linking, conv)?;
    if conv.is_some_and(|c| c.fingerprint != plan.fingerprint) {
        // Another schema (or model) than the turns were asked over: the question alone.
        call.follow_up.dropped = Some(Dropped::SchemaChanged);
        let linking =
            hooks.link.as_mut().map(|slot| Linking { rt, slot, progress: &mut *hooks.progress });
        plan = call.planner.plan(&schema, &call.question, opts, linking, None)?;
    }
    call.follow_up.used = plan.earlier;
    // The tables the prompt shows (repair constraints and facts).
    call.shown = shown_tables(&schema, &plan.shown);
    call.timings.prompt_ms = ms_since(call.started);
    let (n_prefix, n_question) = (plan.prefix_ids.len(), plan.question_ids.len());
    (call.tokens.prompt, call.tokens.prefix) = (n_prefix + n_question, n_prefix);
    call.plan = Some(plan);
    Ok(())
}
