//! Transformer model: configuration, weights, forward pass and KV cache.
