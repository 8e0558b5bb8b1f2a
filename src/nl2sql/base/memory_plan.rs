//! The memory one nl2sql call needs beyond the mapped model.

/// The memory one call needs beyond the mapped model, known before it starts
/// (`Engine::memory_plan`): the KV cache, allocated up front, and an upper estimate of the
/// largest transient buffers of one forward pass (a prefill chunk or a verified draft).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemoryPlan {
    /// KV cache positions (`context_tokens` capped at the model's training context).
    pub positions: usize,
    /// Bytes of the KV cache for `positions` (times `1 + samples`: each sampled candidate has its
    /// own, `stages/samples.rs`).
    pub kv_cache_bytes: usize,
    /// Upper estimate of the bytes of one forward pass's buffers.
    pub scratch_bytes: usize,
}

impl MemoryPlan {
    /// KV cache plus scratch.
    pub fn total_bytes(&self) -> usize {
        self.kv_cache_bytes.saturating_add(self.scratch_bytes)
    }
}
