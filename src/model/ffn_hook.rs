//! The hook the forward pass calls around each layer's feed-forward block: a replacement for the
//! dense FFN (e.g. a sparse executor) or an observer of its activations (e.g. a calibration
//! recorder). The model defines it and knows nothing of what implements it.

use super::{LayerWeights, ModelError};
use crate::gguf::GgufFile;

/// What a model calls into from its FFN block (attach with `Model::set_ffn_hook`).
///
/// `Any` lets the owner of a hook get its concrete type back from the model
/// (`&dyn FfnHook` upcasts to `&dyn Any`).
pub trait FfnHook: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Runs layer `l`'s FFN on `h` (`[n, dim]`, the normed FFN input) into `out` (`[n, dim]`)
    /// if this hook computes it; `Ok(false)` (nothing written) means "do it densely". A hook's
    /// own failure is a [`ModelError::FfnHook`].
    fn run(
        &self,
        l: usize,
        file: &GgufFile,
        lw: &LayerWeights,
        h: &[f32],
        out: &mut [f32],
    ) -> Result<bool, ModelError>;

    /// True when a batch of tokens gets bitwise the results of the same tokens one at a time
    /// (what exact speculative decoding needs).
    fn batch_invariant(&self) -> bool;

    /// Sees the dense path's FFN input `h` (`[n, dim]`) and activations `act` (`[n, ffn_dim]`,
    /// silu(gate)*up) of layer `l`.
    fn observe(&self, l: usize, h: &[f32], act: &[f32]);
}
