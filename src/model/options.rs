//! Runtime numeric options of a loaded model (KV cache type, attention arithmetic).

use super::KvDtype;
use crate::ops::AttnPrecision;

/// Numeric choices that do not change the weights. The defaults are the exact mode (f32 cache, f32
/// attention); `{kv_dtype: F16, attn_precision: GgmlF16}` reproduces llama.cpp's CPU attention
/// arithmetic (f16 cache, ggml flash-attention rounding) and halves the cache memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelOptions {
    /// Element type of caches made by `Model::new_cache`.
    pub kv_dtype: KvDtype,
    /// How attention is computed.
    pub attn_precision: AttnPrecision,
}
