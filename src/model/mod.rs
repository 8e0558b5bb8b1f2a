//! Transformer model: configuration, weights, forward pass and KV cache.

mod config;
mod error;
mod forward;
mod kv_cache;
mod weights;

pub use config::{Arch, Config};
pub use error::ModelError;
pub use forward::{Logits, Model};
pub use kv_cache::KvCache;
pub use weights::{LayerWeights, Matrix, Weights};
