//! The model module's error type.

use crate::gguf::GgufError;
use crate::quant::GgmlType;

/// Everything that can go wrong loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("unsupported model architecture {0:?} (supported: llama, qwen2, qwen3)")]
    UnsupportedArch(String),
    #[error("bad model metadata {key:?}: {reason}")]
    BadMetadata { key: String, reason: String },
    #[error("model tensor {0:?} is missing")]
    MissingTensor(String),
    #[error("tensor {name:?} has shape {found:?}, expected {expected:?} (ggml order)")]
    ShapeMismatch { name: String, expected: Vec<u64>, found: Vec<u64> },
    #[error("tensor {name:?} has type {ty}, which this engine cannot {what}")]
    UnsupportedType { name: String, ty: GgmlType, what: &'static str },
    #[error("context is full: {needed} positions needed, the KV cache holds {capacity}")]
    ContextFull { needed: usize, capacity: usize },
    #[error("token id {id} is out of range for a vocabulary of {vocab}")]
    TokenOutOfRange { id: u32, vocab: usize },
    #[error("forward pass called with no tokens")]
    EmptyBatch,
    /// A batched step asked for the logits of more tokens than it has.
    #[error("logits asked for the last {asked} tokens of a step of {tokens}")]
    LogitsRows { asked: usize, tokens: usize },
    /// The model or pack file changed while mapped (overwritten or truncated in place): what
    /// this pass read may be garbage, and the mapping must be dropped and the model reloaded.
    #[error("the model file {} changed while in use (rewritten or truncated in place); replace model files by rename, never in place", path.display())]
    FileChanged { path: std::path::PathBuf },
    /// The caller's check between layers asked to stop (cancellation).
    #[error("forward pass interrupted before layer {layer}")]
    Interrupted { layer: usize },
    #[error("KV cache was made for a different model shape")]
    CacheMismatch,
    /// The allocator refused one of the large buffers (`what`: "KV cache", "forward-pass
    /// scratch", "logits"); `bytes` is what that buffer (the whole KV cache) needed.
    #[error("out of memory: the {what} needs {bytes} bytes")]
    OutOfMemory { what: &'static str, bytes: usize },
    #[error(transparent)]
    Quant(#[from] crate::quant::QuantError),
    /// The SIMD kernel tier could not be selected (e.g. `TURBOINFER_KERNELS` names a tier this CPU lacks).
    #[error(transparent)]
    Kernels(#[from] crate::kernels::KernelError),
    /// The attached FFN hook failed (e.g. a sparse FFN's bad sidecar data). Boxed: the model
    /// does not know the hook's error type, and the message is the hook's own.
    #[error(transparent)]
    FfnHook(Box<dyn std::error::Error + Send + Sync>),
    /// The packed weights file is unusable for this model.
    #[error(transparent)]
    Packed(#[from] super::PackedError),
}

impl ModelError {
    /// `OutOfMemory` for `what`, reporting the allocator's failed request.
    pub fn oom(what: &'static str) -> impl Fn(crate::platform::fallible::AllocError) -> ModelError {
        move |e| ModelError::OutOfMemory { what, bytes: e.bytes }
    }
}
