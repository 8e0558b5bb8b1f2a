//! Stage `prefix`: the schema prefix's KV rows, from the first place that has them (the
//! previous call's in memory, a cache file, else a prefill after the tokens shared with the
//! previous prefix), and for a follow-up the rows of its earlier turns the previous call left.

use super::call::CallState;
use crate::generate::kv_file::{self, KvFileKey};
use crate::model::Model;
use crate::nl2sql::api::outcome::PhaseTimings;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::decode::passes::Forward;
use crate::nl2sql::decode::prefix_cache::{
    common_len, load_prefix_file, store_prefix_file, PrefixCache, PrefixSource,
};
use crate::nl2sql::plan::planner::Plan;
use crate::platform::clock::ms_since;
use std::time::Instant;

/// Loads the plan's prefix into the call's KV cache; its time, cache files' aside, is prefill.
pub fn run(call: &mut CallState<'_, '_>) -> Result<(), Nl2SqlError> {
    let plan = call.plan.as_ref().expect("the prompt is planned (stages/plan.rs)");
    let t = Instant::now();
    let identity = &call.planner.identity;
    let progress = &mut *call.hooks.progress;
    let (source, reused, kept) =
        load(&call.forward, identity, call.cache, plan, &mut call.timings, progress)?;
    call.follow_up.reused_tokens = kept;
    (call.tokens.prefill, call.tokens.reused) = (plan.prefix_ids.len() - reused, reused);
    call.timings.prefill_ms += ms_since(t) - call.timings.cache_file_ms;
    call.prefix_source = Some(source);
    Ok(())
}

/// What a cache file must hold to serve as `plan`'s prefix with `model`, its options, the
/// prefix identity (`Engine::prefix_identity`: model file and FFN hook) and this build's
/// arithmetic (`kernels::numerics_id`: version, numerics revision, kernel tier).
pub fn file_key<'p>(model: &Model, identity: &str, plan: &'p Plan) -> KvFileKey<'p> {
    let numerics = format!("{:?} {}", model.options(), crate::kernels::numerics_id());
    let model_hash = kv_file::model_hash(identity, &numerics);
    KvFileKey { fingerprint: plan.fingerprint, model_hash, prefix_ids: &plan.prefix_ids }
}

/// Makes `cache.kv` (allocated) hold the prefix of `plan`, from the first place that has
/// it: memory (the previous call's prefix), else a cache file, else computed by a prefill
/// (then stored to a cache file) after the tokens it shares with the previous call's prefix,
/// which are kept. Returns where it came from, how many positions of the prefix were kept
/// and, for a follow-up (`plan.earlier` > 0) whose prefix is in memory, how many of its
/// question part's leading tokens kept the rows the previous call left after the prefix
/// (its earlier turns: `PrefixCache::tail`; at most all but the last token).
/// Cache-file time goes to `timings.cache_file_ms`.
pub fn load(
    forward: &Forward<'_>,
    identity: &str,
    cache: &mut PrefixCache,
    plan: &Plan,
    timings: &mut PhaseTimings,
    on_progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<(PrefixSource, usize, usize), Nl2SqlError> {
    let n_prefix = plan.prefix_ids.len();
    // What the previous call left after the prefix; valid for this call only (a call that
    // fails leaves none).
    let tail = std::mem::take(&mut cache.tail);
    let in_memory = cache.prefix == Some((plan.fingerprint, n_prefix))
        && cache.kv.as_ref().is_some_and(|kv| kv.len() >= n_prefix);
    if in_memory {
        cache.stats.hits += 1;
        let kv = cache.kv.as_mut().expect("allocated by the caller");
        let kept = match plan.earlier > 0 && kv.len() == n_prefix + tail.len() {
            true => {
                common_len(&tail, &plan.question_ids).min(plan.question_ids.len().saturating_sub(1))
            }
            false => 0,
        };
        kv.truncate(n_prefix + kept);
        return Ok((PrefixSource::Memory, n_prefix, kept));
    }
    // At most all but the last token: a prefix equal to the held one is a memory hit above
    // (this keeps the kept part strictly shorter, so something is always computed).
    let mut kept = cache.shared_with(&plan.prefix_ids, identity).min(n_prefix.saturating_sub(1));
    cache.prefix = None; // only a completed prefill or a validated file makes it valid again
    let key = file_key(forward.model, identity, plan);
    let tf = Instant::now();
    let kv = cache.kv.as_mut().expect("allocated by the caller");
    // Cache files hold this process's caches; a batch server shares prefixes by itself.
    // Loading clears the buffers, so a file is tried only when there is one.
    let from_file = match (cache.files.as_ref(), kv.local_mut()) {
        (Some(f), Some(local)) if f.has(&key, local.dtype()) => {
            kept = 0;
            load_prefix_file(f, &key, local, &mut cache.stats, &mut cache.events)
        }
        _ => false,
    };
    timings.cache_file_ms += ms_since(tf);
    let source = if from_file {
        PrefixSource::File
    } else {
        cache.stats.misses += 1;
        if kept > 0 {
            cache.stats.partial += 1;
        }
        kv.truncate(kept);
        let mut schema_progress = |p| {
            on_progress(match p {
                Progress::Prefill { done, total } => Progress::SchemaPrefill { done, total },
                p => p,
            })
        };
        forward.prefill(kv, &plan.prefix_ids[kept..], &mut schema_progress)?;
        let tf = Instant::now();
        if let (Some(f), Some(kv)) = (cache.files.as_ref(), kv.local()) {
            store_prefix_file(f, &key, kv, &mut cache.stats, &mut cache.events);
        }
        timings.cache_file_ms += ms_since(tf);
        match kept {
            0 => PrefixSource::Computed,
            _ => PrefixSource::Partial,
        }
    };
    cache.prefix = Some((plan.fingerprint, n_prefix));
    cache.held = (plan.prefix_ids.clone(), identity.to_string());
    Ok((source, if from_file { n_prefix } else { kept }, 0))
}
