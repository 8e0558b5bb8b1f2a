//! Stage `follow_up`: what the cache holds after the prefix, left for the next call's follow-up
//! (`PrefixCache::tail`: the question part and the answer's rows; kept only when they are
//! bitwise what a prefill computes).

use super::call::CallState;
use crate::nl2sql::base::error::Nl2SqlError;

/// Leaves the tokens of the rows after the prefix in the session's cache.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    let kv_len = call.kv().len();
    let plan = call.plan.as_ref().expect("the prompt is planned (stages/plan.rs)");
    let n_prefix = plan.prefix_ids.len();
    let after_question = call.held.tokens(kv_len).filter(|_| call.keep_rows);
    let tail = after_question.map(|t| {
        let mut tail = plan.question_ids[..call.question_end - n_prefix].to_vec();
        tail.extend_from_slice(t);
        tail
    });
    call.cache.tail = tail.unwrap_or_default();
    Ok(())
}
