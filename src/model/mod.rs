//! Transformer model: configuration, weights, forward pass and KV cache.

mod config;
mod error;
mod kv_cache;

pub use config::{Arch, Config};
pub use error::ModelError;
pub use kv_cache::KvCache;
