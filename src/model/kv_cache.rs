//! Per-sequence key/value cache.

use super::{Config, ModelError};

/// Keys and values of every layer for one sequence, in f32.
///
/// Layout per layer: `k[l]`, `v[l]` are `[n_kv_heads, capacity, head_dim]` (head-major, so one
/// head's keys for consecutive positions are contiguous for the attention dot products).
/// Buffers are allocated zeroed, which the OS maps lazily: resident memory grows with use.
#[derive(Debug, Clone)]
pub struct KvCache {
    n_layers: usize,
    n_kv_heads: usize,
    head_dim: usize,
    capacity: usize,
    len: usize,
    k: Vec<Vec<f32>>, // [n_layers][n_kv_heads, capacity, head_dim]
    v: Vec<Vec<f32>>, // [n_layers][n_kv_heads, capacity, head_dim]
}

impl KvCache {
    /// A cache for up to `n_ctx` positions (clamped to the model's training context length).
    pub fn new(cfg: &Config, n_ctx: usize) -> KvCache {
        let capacity = n_ctx.clamp(1, cfg.context_length);
        let per_layer = cfg.n_kv_heads * capacity * cfg.head_dim;
        KvCache {
            n_layers: cfg.n_layers,
            n_kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            capacity,
            len: 0,
            k: (0..cfg.n_layers).map(|_| vec![0.0; per_layer]).collect(),
            v: (0..cfg.n_layers).map(|_| vec![0.0; per_layer]).collect(),
        }
    }

    /// Number of positions filled.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no position is filled.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum number of positions.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Forgets every position at or after `pos` (rollback for prefix reuse or rejected drafts).
    /// A `pos` beyond the current length is a no-op.
    pub fn truncate(&mut self, pos: usize) {
        self.len = self.len.min(pos);
    }

    /// Empties the cache.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Fails with `ContextFull` unless `n` more positions fit.
    pub fn check_room(&self, n: usize) -> Result<(), ModelError> {
        if self.len + n > self.capacity {
            return Err(ModelError::ContextFull { needed: self.len + n, capacity: self.capacity });
        }
        Ok(())
    }

    /// Fails with `CacheMismatch` unless the cache was built for `cfg`'s shape.
    pub(crate) fn check_shape(&self, cfg: &Config) -> Result<(), ModelError> {
        if self.n_layers != cfg.n_layers || self.n_kv_heads != cfg.n_kv_heads || self.head_dim != cfg.head_dim {
            return Err(ModelError::CacheMismatch);
        }
        Ok(())
    }

    /// Writes keys and values of `n_tok` tokens at positions `len..len+n_tok` into layer `layer`.
    /// `k`, `v`: `[n_tok, n_kv_heads, head_dim]`. Does not advance `len` (see `advance`).
    pub(crate) fn store(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        let hd = self.head_dim;
        let row = self.n_kv_heads * hd;
        let n_tok = k.len() / row;
        assert!(self.len + n_tok <= self.capacity && v.len() == k.len());
        for t in 0..n_tok {
            let pos = self.len + t;
            for h in 0..self.n_kv_heads {
                let dst = (h * self.capacity + pos) * hd;
                let src = t * row + h * hd;
                self.k[layer][dst..dst + hd].copy_from_slice(&k[src..src + hd]);
                self.v[layer][dst..dst + hd].copy_from_slice(&v[src..src + hd]);
            }
        }
    }

    /// One layer's keys and values: `[n_kv_heads, capacity, head_dim]` each.
    pub(crate) fn layer(&self, layer: usize) -> (&[f32], &[f32]) {
        (&self.k[layer], &self.v[layer])
    }

    /// Marks `n` more positions as filled (after all layers stored them).
    pub(crate) fn advance(&mut self, n: usize) {
        assert!(self.len + n <= self.capacity);
        self.len += n;
    }
}
