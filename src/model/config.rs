//! Model hyper-parameters read from GGUF metadata.

use super::ModelError;
use crate::gguf::{GgufFile, MetaValue};
use crate::ops::RopeMode;

/// Supported transformer families (the GGUF `general.architecture` value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama / SmolLM2: adjacent-pair RoPE (converter-permuted Q/K), no biases.
    Llama,
    /// Qwen2 / Qwen2.5: Q/K/V biases, NEOX RoPE.
    Qwen2,
    /// Qwen3: per-head RMSNorm on Q and K before RoPE, NEOX RoPE, no biases.
    Qwen3,
}

impl Arch {
    /// Parses a `general.architecture` string.
    pub fn parse(s: &str) -> Result<Arch, ModelError> {
        match s {
            "llama" => Ok(Arch::Llama),
            "qwen2" => Ok(Arch::Qwen2),
            "qwen3" => Ok(Arch::Qwen3),
            _ => Err(ModelError::UnsupportedArch(s.to_string())),
        }
    }

    /// The GGUF key prefix (`llama.block_count`, …).
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }
}

/// Everything about the network's shape needed to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub arch: Arch,
    pub n_layers: usize,
    /// Model (embedding) width.
    pub dim: usize,
    /// Hidden width of the feed-forward block.
    pub ffn_dim: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Leading dimensions of each head that RoPE rotates (`rope.dimension_count`, default head_dim).
    pub n_rot: usize,
    pub rope_theta: f32,
    pub rope_mode: RopeMode,
    pub rms_eps: f32,
    pub vocab_size: usize,
    /// Training context length (upper bound for the KV cache size).
    pub context_length: usize,
    /// True when there is no `output.weight` and the LM head is `token_embd.weight`.
    pub tied_embeddings: bool,
    /// Q/K/V projections have biases (qwen2).
    pub qkv_bias: bool,
    /// Per-head RMSNorm of Q and K before RoPE (qwen3).
    pub qk_norm: bool,
}

/// Default RoPE base when the file does not say (`llama.rope.freq_base` defaults to 10000 in llama.cpp).
const DEFAULT_ROPE_THETA: f32 = 10_000.0;
/// Default RMSNorm epsilon when absent (llama.cpp's hparams default).
const DEFAULT_RMS_EPS: f32 = 1e-5;
/// Largest value we accept for any size field: far above real models, low enough that products
/// of a few of them cannot overflow `usize` on 64-bit targets.
const MAX_SIZE: u64 = 1 << 24;

impl Config {
    /// Reads and validates the config of `file`.
    pub fn from_gguf(file: &GgufFile) -> Result<Config, ModelError> {
        let arch = Arch::parse(file.get_str("general.architecture")?)?;
        let p = arch.name();
        let key = |k: &str| format!("{p}.{k}");
        let size = |k: &str| -> Result<usize, ModelError> {
            let full = key(k);
            let v = file.get_u64(&full)?;
            if v == 0 || v > MAX_SIZE {
                return Err(ModelError::BadMetadata {
                    key: full,
                    reason: format!("value {v} out of range"),
                });
            }
            Ok(v as usize)
        };
        let opt_size = |k: &str| -> Result<Option<usize>, ModelError> {
            if file.get(&key(k)).is_none() {
                return Ok(None);
            }
            size(k).map(Some)
        };
        let opt_f32 = |k: &str, default: f32| -> Result<f32, ModelError> {
            match file.get(&key(k)) {
                None => Ok(default),
                Some(_) => Ok(file.get_f64(&key(k))? as f32),
            }
        };

        let n_layers = size("block_count")?;
        let dim = size("embedding_length")?;
        let ffn_dim = size("feed_forward_length")?;
        let n_heads = size("attention.head_count")?;
        let n_kv_heads = opt_size("attention.head_count_kv")?.unwrap_or(n_heads);
        let head_dim = match opt_size("attention.key_length")? {
            Some(h) => h,
            None => {
                if dim % n_heads != 0 {
                    return Err(ModelError::BadMetadata {
                        key: key("attention.head_count"),
                        reason: format!(
                            "embedding length {dim} is not a multiple of {n_heads} heads"
                        ),
                    });
                }
                dim / n_heads
            }
        };
        if let Some(vl) = opt_size("attention.value_length")? {
            if vl != head_dim {
                return Err(ModelError::BadMetadata {
                    key: key("attention.value_length"),
                    reason: format!("value length {vl} differs from key length {head_dim}"),
                });
            }
        }
        if n_heads % n_kv_heads != 0 {
            return Err(ModelError::BadMetadata {
                key: key("attention.head_count_kv"),
                reason: format!("{n_heads} heads is not a multiple of {n_kv_heads} KV heads"),
            });
        }
        let n_rot = opt_size("rope.dimension_count")?.unwrap_or(head_dim);
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(ModelError::BadMetadata {
                key: key("rope.dimension_count"),
                reason: format!("{n_rot} rotary dims for head size {head_dim}"),
            });
        }
        let rope_theta = opt_f32("rope.freq_base", DEFAULT_ROPE_THETA)?;
        let rms_eps = opt_f32("attention.layer_norm_rms_epsilon", DEFAULT_RMS_EPS)?;
        if !(rope_theta > 0.0 && rope_theta.is_finite() && rms_eps >= 0.0 && rms_eps.is_finite()) {
            return Err(ModelError::BadMetadata {
                key: key("rope.freq_base"),
                reason: "non-finite or negative".into(),
            });
        }
        if let Some(MetaValue::String(s)) = file.get(&key("rope.scaling.type")) {
            if s != "none" {
                return Err(ModelError::BadMetadata {
                    key: key("rope.scaling.type"),
                    reason: format!("RoPE scaling {s:?} is not supported"),
                });
            }
        }
        // The vocabulary size: explicit key, else the embedding matrix's row count.
        let vocab_size = match opt_size("vocab_size")? {
            Some(v) => v,
            None => {
                let t = file
                    .tensor("token_embd.weight")
                    .ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
                match t.info.dims.as_slice() {
                    [_, v] if *v > 0 && *v <= MAX_SIZE => *v as usize,
                    d => {
                        return Err(ModelError::ShapeMismatch {
                            name: "token_embd.weight".into(),
                            expected: vec![dim as u64, 0],
                            found: d.to_vec(),
                        })
                    }
                }
            }
        };
        let context_length = size("context_length")?;
        let tied_embeddings = file.tensor("output.weight").is_none();
        let (rope_mode, qkv_bias, qk_norm) = match arch {
            Arch::Llama => (RopeMode::Normal, false, false),
            Arch::Qwen2 => (RopeMode::Neox, true, false),
            Arch::Qwen3 => (RopeMode::Neox, false, true),
        };
        Ok(Config {
            arch,
            n_layers,
            dim,
            ffn_dim,
            n_heads,
            n_kv_heads,
            head_dim,
            n_rot,
            rope_theta,
            rope_mode,
            rms_eps,
            vocab_size,
            context_length,
            tied_embeddings,
            qkv_bias,
            qk_norm,
        })
    }

    /// Width of the concatenated query heads.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of the concatenated key (or value) heads.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}
