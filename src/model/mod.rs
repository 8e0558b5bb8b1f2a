//! Transformer model: configuration, weights, forward pass and KV cache.

mod config;
mod error;
mod ffn_hook;
mod forward;
mod kv_cache;
mod options;
pub mod packed;
mod readahead;
mod weights;

pub use config::{Arch, Config};
pub use error::ModelError;
pub use ffn_hook::FfnHook;
pub use forward::{Logits, Model, SeqStep, DEFAULT_READAHEAD};
pub use kv_cache::{KvCache, KvDtype, KvRows};
pub use options::ModelOptions;
pub use packed::{PackStatus, PackedError, PackedFile};
pub use weights::{LayerWeights, Matrix, ReadFrom, Weights};
