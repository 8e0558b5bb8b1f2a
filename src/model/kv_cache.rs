//! Per-sequence key/value cache, stored in f32 or f16.

use super::{Config, ModelError};
use crate::ops::f16::f16;
use crate::ops::KvView;

/// Element type of the cached keys and values.
///
/// The default is f32: on the three reference models f16 (llama.cpp's default, `-ctk f16`) does not
/// bring the log-probabilities measurably closer to llama.cpp's (see tests/model_fixtures.rs
/// `precision_table`), so the more accurate type is kept; f16 halves the cache memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvDtype {
    /// IEEE half precision: half the memory, and what llama.cpp stores by default.
    F16,
    /// Full precision.
    #[default]
    F32,
}

impl std::str::FromStr for KvDtype {
    type Err = String;
    /// Parses `f16` or `f32`.
    fn from_str(s: &str) -> Result<KvDtype, String> {
        match s {
            "f16" => Ok(KvDtype::F16),
            "f32" => Ok(KvDtype::F32),
            _ => Err(format!("unknown KV cache type `{s}` (expected f16 or f32)")),
        }
    }
}

/// One dtype's buffers: `[n_layers][n_kv_heads, capacity, head_dim]` for keys and for values.
#[derive(Debug, Clone)]
enum Store {
    F32 { k: Vec<Vec<f32>>, v: Vec<Vec<f32>> },
    F16 { k: Vec<Vec<f16>>, v: Vec<Vec<f16>> },
}

/// Keys and values of every layer for one sequence, in f32 or f16 (see `KvDtype`).
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
    store: Store,
}

impl KvCache {
    /// A cache of the default `KvDtype` (f32) for up to `n_ctx` positions (clamped to the model's
    /// training context length).
    pub fn new(cfg: &Config, n_ctx: usize) -> KvCache {
        KvCache::with_dtype(cfg, n_ctx, KvDtype::default())
    }

    /// A cache of element type `dtype` for up to `n_ctx` positions (clamped as in `new`).
    pub fn with_dtype(cfg: &Config, n_ctx: usize, dtype: KvDtype) -> KvCache {
        let capacity = n_ctx.clamp(1, cfg.context_length);
        let per_layer = cfg.n_kv_heads * capacity * cfg.head_dim;
        let store = match dtype {
            KvDtype::F32 => Store::F32 {
                k: (0..cfg.n_layers).map(|_| vec![0.0; per_layer]).collect(),
                v: (0..cfg.n_layers).map(|_| vec![0.0; per_layer]).collect(),
            },
            KvDtype::F16 => Store::F16 {
                k: (0..cfg.n_layers).map(|_| vec![f16::ZERO; per_layer]).collect(),
                v: (0..cfg.n_layers).map(|_| vec![f16::ZERO; per_layer]).collect(),
            },
        };
        KvCache { n_layers: cfg.n_layers, n_kv_heads: cfg.n_kv_heads, head_dim: cfg.head_dim, capacity, len: 0, store }
    }

    /// Element type of the stored keys and values.
    pub fn dtype(&self) -> KvDtype {
        match self.store {
            Store::F32 { .. } => KvDtype::F32,
            Store::F16 { .. } => KvDtype::F16,
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
                match &mut self.store {
                    Store::F32 { k: kc, v: vc } => {
                        kc[layer][dst..dst + hd].copy_from_slice(&k[src..src + hd]);
                        vc[layer][dst..dst + hd].copy_from_slice(&v[src..src + hd]);
                    }
                    Store::F16 { k: kc, v: vc } => {
                        crate::ops::f16::to_f16(&mut kc[layer][dst..dst + hd], &k[src..src + hd]);
                        crate::ops::f16::to_f16(&mut vc[layer][dst..dst + hd], &v[src..src + hd]);
                    }
                }
            }
        }
    }

    /// One layer's keys and values: `[n_kv_heads, capacity, head_dim]` each.
    pub(crate) fn layer(&self, layer: usize) -> KvView<'_> {
        match &self.store {
            Store::F32 { k, v } => KvView::F32 { k: &k[layer], v: &v[layer] },
            Store::F16 { k, v } => KvView::F16 { k: &k[layer], v: &v[layer] },
        }
    }

    /// Marks `n` more positions as filled (after all layers stored them).
    pub(crate) fn advance(&mut self, n: usize) {
        assert!(self.len + n <= self.capacity);
        self.len += n;
    }
}
