//! Stage `open`: the question cleaned (one line, not blank, not too long) and the call's KV
//! buffers ready, first, so that a context too large for the memory fails before any work.

use super::call::CallState;
use crate::model::Model;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::decode::prefix_cache::PrefixCache;
use crate::nl2sql::decode::seq::{RemoteSeq, Seq};
use crate::nl2sql::plan::planner::clean_question;

/// Cleans the question and readies the KV buffers for the call's memory plan.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    call.question = clean_question(call.asked)?;
    ready_kv(call.forward.model, call.cache, call.memory.positions)
}

/// KV buffers of `capacity` positions in `cache`: the ones it has when they have that size;
/// else the old ones are dropped before new ones are asked for (both would not fit where one
/// barely does).
pub fn ready_kv(
    model: &Model,
    cache: &mut PrefixCache,
    capacity: usize,
) -> Result<(), Nl2SqlError> {
    let fits = match (&cache.kv, &cache.transport) {
        (Some(Seq::Local(kv)), None) => kv.capacity() == capacity,
        (Some(Seq::Remote(r)), Some(t)) => r.uses(t) && cache.capacity() == capacity,
        _ => false,
    };
    if !fits {
        cache.kv = None;
        cache.prefix = None;
        cache.kv = Some(match cache.transport.clone() {
            Some(t) => Seq::Remote(RemoteSeq::new(t, capacity)),
            None => Seq::Local(model.try_new_cache(capacity)?),
        });
    }
    Ok(())
}
