//! Runtime numeric options of a loaded model (KV cache type, attention arithmetic).

use super::KvDtype;
use crate::ops::AttnPrecision;

/// Numeric choices that do not change the weights. The defaults reproduce llama.cpp's CPU
/// arithmetic (f16 KV cache, ggml flash-attention rounding), which the fixture tests check against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelOptions {
    /// Element type of caches made by `Model::new_cache`.
    pub kv_dtype: KvDtype,
    /// How attention is computed.
    pub attn_precision: AttnPrecision,
}
