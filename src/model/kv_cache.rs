//! Per-sequence key/value cache, stored in f32 or f16.

use super::{Config, ModelError};
use crate::ops::f16::f16;
use crate::ops::KvView;
use crate::platform::fallible::{try_zeroed, AllocError, Zeroable};

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
    /// training context length). Panics when the memory cannot be had (tools and tests; the
    /// server uses [`KvCache::try_with_dtype`]).
    pub fn new(cfg: &Config, n_ctx: usize) -> KvCache {
        KvCache::with_dtype(cfg, n_ctx, KvDtype::default())
    }

    /// A cache of element type `dtype` for up to `n_ctx` positions (clamped as in `new`); panics
    /// when the memory cannot be had (see [`KvCache::try_with_dtype`]).
    pub fn with_dtype(cfg: &Config, n_ctx: usize, dtype: KvDtype) -> KvCache {
        KvCache::try_with_dtype(cfg, n_ctx, dtype).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Positions a cache asked for `n_ctx` holds: at least one, at most the training context.
    pub fn capacity_for(cfg: &Config, n_ctx: usize) -> usize {
        n_ctx.clamp(1, cfg.context_length)
    }

    /// Bytes of the buffers of a cache of `dtype` asked for `n_ctx` positions (clamped as in
    /// `new`): keys and values of every layer (saturating, never overflows).
    pub fn bytes_for(cfg: &Config, n_ctx: usize, dtype: KvDtype) -> usize {
        let elem = match dtype {
            KvDtype::F32 => 4,
            KvDtype::F16 => 2,
        };
        [cfg.n_layers, cfg.n_kv_heads, KvCache::capacity_for(cfg, n_ctx), cfg.head_dim, elem]
            .iter()
            .fold(2usize, |a, &b| a.saturating_mul(b))
    }

    /// [`KvCache::with_dtype`] that fails with `ModelError::OutOfMemory` (the whole cache's
    /// bytes) instead of aborting when the allocator refuses a buffer.
    pub fn try_with_dtype(
        cfg: &Config,
        n_ctx: usize,
        dtype: KvDtype,
    ) -> Result<KvCache, ModelError> {
        let capacity = KvCache::capacity_for(cfg, n_ctx);
        let oom = |_: AllocError| ModelError::OutOfMemory {
            what: "KV cache",
            bytes: KvCache::bytes_for(cfg, n_ctx, dtype),
        };
        let per_layer = cfg.n_kv_heads.saturating_mul(capacity).saturating_mul(cfg.head_dim);
        fn layers<T: Zeroable>(
            n_layers: usize,
            per_layer: usize,
        ) -> Result<Vec<Vec<T>>, AllocError> {
            (0..n_layers).map(|_| try_zeroed(per_layer)).collect()
        }
        let (nl, pl) = (cfg.n_layers, per_layer);
        let store = match dtype {
            KvDtype::F32 => {
                Store::F32 { k: layers(nl, pl).map_err(oom)?, v: layers(nl, pl).map_err(oom)? }
            }
            KvDtype::F16 => {
                Store::F16 { k: layers(nl, pl).map_err(oom)?, v: layers(nl, pl).map_err(oom)? }
            }
        };
        Ok(KvCache {
            n_layers: cfg.n_layers,
            n_kv_heads: cfg.n_kv_heads,
            head_dim: cfg.head_dim,
            capacity,
            len: 0,
            store,
        })
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
        if self.n_layers != cfg.n_layers
            || self.n_kv_heads != cfg.n_kv_heads
            || self.head_dim != cfg.head_dim
        {
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

    /// Copies the first `n` positions (at most `len()`) of every layer into `other`, whose
    /// length becomes `n`: a second sequence that shares this one's prefix (candidates decoded
    /// together from one question). `other` must have this cache's shape and element type.
    pub fn copy_prefix_to(&self, n: usize, other: &mut KvCache) -> Result<(), ModelError> {
        let n = n.min(self.len);
        if n > other.capacity {
            return Err(ModelError::ContextFull { needed: n, capacity: other.capacity });
        }
        copy_positions(self, 0, other, 0, n)?;
        other.len = n;
        Ok(())
    }

    /// Sets aside the rows of positions `from..len()` of every layer (none when `from` is past
    /// the end): computed once, they can be put back with [`KvCache::restore_rows`] after other
    /// rows were computed at those positions and cut off again (the refusal check's turn, which
    /// follows the question where the answer's opening also does).
    pub fn save_rows(&self, from: usize) -> KvRows {
        let from = from.min(self.len);
        let n = self.len - from;
        let mut rows = KvCache {
            n_layers: self.n_layers,
            n_kv_heads: self.n_kv_heads,
            head_dim: self.head_dim,
            capacity: n,
            len: n,
            store: match self.store {
                Store::F32 { .. } => Store::F32 {
                    k: vec![vec![0.0; self.n_kv_heads * n * self.head_dim]; self.n_layers],
                    v: vec![vec![0.0; self.n_kv_heads * n * self.head_dim]; self.n_layers],
                },
                Store::F16 { .. } => Store::F16 {
                    k: vec![
                        vec![f16::from_bits(0); self.n_kv_heads * n * self.head_dim];
                        self.n_layers
                    ],
                    v: vec![
                        vec![f16::from_bits(0); self.n_kv_heads * n * self.head_dim];
                        self.n_layers
                    ],
                },
            },
        };
        copy_positions(self, from, &mut rows, 0, n).expect("same shape and element type");
        KvRows { at: from, rows }
    }

    /// Puts back rows set aside by [`KvCache::save_rows`] at the positions they were taken
    /// from; the cache must hold exactly the positions before them (`CacheMismatch` otherwise,
    /// nothing changed): its length becomes the end of the restored rows.
    pub fn restore_rows(&mut self, saved: &KvRows) -> Result<(), ModelError> {
        if self.len != saved.at {
            return Err(ModelError::CacheMismatch);
        }
        self.check_room(saved.rows.len)?;
        copy_positions(&saved.rows, 0, self, saved.at, saved.rows.len)?;
        self.len += saved.rows.len;
        Ok(())
    }

    /// Marks `n` more positions as filled (after all layers stored them).
    pub(crate) fn advance(&mut self, n: usize) {
        assert!(self.len + n <= self.capacity);
        self.len += n;
    }
}

/// Rows of a [`KvCache`] set aside ([`KvCache::save_rows`]): positions `at..at + n` of every
/// layer, kept as a cache of their own (`rows`, positions `0..n`).
#[derive(Debug, Clone)]
pub struct KvRows {
    at: usize,
    rows: KvCache,
}

impl KvRows {
    /// Number of positions set aside.
    pub fn len(&self) -> usize {
        self.rows.len
    }

    /// True when no position was set aside.
    pub fn is_empty(&self) -> bool {
        self.rows.len == 0
    }
}

/// Copies positions `from..from + n` of every layer of `src` to positions `to..to + n` of `dst`
/// (lengths unchanged): the two caches must have the same shape and element type
/// (`CacheMismatch`) and the positions must exist in each buffer.
fn copy_positions(
    src: &KvCache,
    from: usize,
    dst: &mut KvCache,
    to: usize,
    n: usize,
) -> Result<(), ModelError> {
    if src.shape() != dst.shape() || src.elem_bytes() != dst.elem_bytes() {
        return Err(ModelError::CacheMismatch);
    }
    assert!(from + n <= src.capacity && to + n <= dst.capacity);
    let hd = src.head_dim;
    // One layer's buffers are `[n_kv_heads, capacity, head_dim]`: each head's run of positions
    // is contiguous.
    fn copy<T: Copy>(
        src: &[Vec<T>],
        dst: &mut [Vec<T>],
        heads: usize,
        caps: (usize, usize),
        offsets: (usize, usize),
        len: usize,
    ) {
        for (s, d) in src.iter().zip(dst) {
            for h in 0..heads {
                let (a, b) = (h * caps.0 + offsets.0, h * caps.1 + offsets.1);
                d[b..b + len].copy_from_slice(&s[a..a + len]);
            }
        }
    }
    let caps = (src.capacity * hd, dst.capacity * hd);
    let offsets = (from * hd, to * hd);
    match (&src.store, &mut dst.store) {
        (Store::F32 { k, v }, Store::F32 { k: k2, v: v2 }) => {
            copy(k, k2, src.n_kv_heads, caps, offsets, n * hd);
            copy(v, v2, src.n_kv_heads, caps, offsets, n * hd);
        }
        (Store::F16 { k, v }, Store::F16 { k: k2, v: v2 }) => {
            copy(k, k2, src.n_kv_heads, caps, offsets, n * hd);
            copy(v, v2, src.n_kv_heads, caps, offsets, n * hd);
        }
        _ => return Err(ModelError::CacheMismatch),
    }
    Ok(())
}

/// Prefix export/import: the first `n` positions of every layer, as the bytes a cache file holds.
///
/// Payload layout, little-endian, capacity-independent: for each layer `l` in order, the keys
/// `[n_kv_heads, n, head_dim]` then the values `[n_kv_heads, n, head_dim]`, each element in the
/// cache's own dtype (4 bytes for f32, 2 for f16).
impl KvCache {
    /// Number of layers, KV heads and head size this cache was built for.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.n_layers, self.n_kv_heads, self.head_dim)
    }

    /// Bytes per stored element (4 for f32, 2 for f16).
    pub fn elem_bytes(&self) -> usize {
        match self.store {
            Store::F32 { .. } => 4,
            Store::F16 { .. } => 2,
        }
    }

    /// Size in bytes of the payload holding the first `n` positions.
    pub fn prefix_bytes(&self, n: usize) -> usize {
        2 * self.n_layers * self.n_kv_heads * n * self.head_dim * self.elem_bytes()
    }

    /// The whole payload of the first `n` positions in one buffer (tests compare caches by it).
    #[cfg(test)]
    pub(crate) fn prefix_payload(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.export_prefix(n, &mut |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .expect("writing to a Vec cannot fail");
        out
    }

    /// Calls `sink` with consecutive pieces of the payload of the first `n` positions (at most
    /// `len()`), in file order. Pieces are one head's keys or values: `[n, head_dim]`.
    pub fn export_prefix(
        &self,
        n: usize,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let n = n.min(self.len);
        let hd = self.head_dim;
        let mut buf: Vec<u8> = Vec::with_capacity(n * hd * 4);
        for l in 0..self.n_layers {
            for kv in 0..2 {
                for h in 0..self.n_kv_heads {
                    let start = h * self.capacity * hd;
                    buf.clear();
                    match &self.store {
                        Store::F32 { k, v } => {
                            let src = if kv == 0 { &k[l] } else { &v[l] };
                            src[start..start + n * hd]
                                .iter()
                                .for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
                        }
                        Store::F16 { k, v } => {
                            let src = if kv == 0 { &k[l] } else { &v[l] };
                            src[start..start + n * hd]
                                .iter()
                                .for_each(|x| buf.extend_from_slice(&x.to_bits().to_le_bytes()));
                        }
                    }
                    sink(&buf)?;
                }
            }
        }
        Ok(())
    }

    /// Replaces the cache content by `n` positions read from `payload` (layout above); `len()`
    /// becomes `n`. Fails (cache unchanged) when `n` exceeds the capacity or the payload size is
    /// not `prefix_bytes(n)`.
    pub fn import_prefix(&mut self, n: usize, payload: &[u8]) -> Result<(), ModelError> {
        if n > self.capacity {
            return Err(ModelError::ContextFull { needed: n, capacity: self.capacity });
        }
        if payload.len() != self.prefix_bytes(n) {
            return Err(ModelError::CacheMismatch);
        }
        let hd = self.head_dim;
        let piece = n * hd * self.elem_bytes();
        let mut chunks = payload.chunks_exact(piece.max(1));
        for l in 0..self.n_layers {
            for kv in 0..2 {
                for h in 0..self.n_kv_heads {
                    let start = h * self.capacity * hd;
                    let src = if piece == 0 {
                        &[][..]
                    } else {
                        chunks.next().expect("payload size checked above")
                    };
                    match &mut self.store {
                        Store::F32 { k, v } => {
                            let dst = if kv == 0 { &mut k[l] } else { &mut v[l] };
                            for (d, s) in
                                dst[start..start + n * hd].iter_mut().zip(src.chunks_exact(4))
                            {
                                *d = f32::from_le_bytes([s[0], s[1], s[2], s[3]]);
                            }
                        }
                        Store::F16 { k, v } => {
                            let dst = if kv == 0 { &mut k[l] } else { &mut v[l] };
                            for (d, s) in
                                dst[start..start + n * hd].iter_mut().zip(src.chunks_exact(2))
                            {
                                *d = f16::from_bits(u16::from_le_bytes([s[0], s[1]]));
                            }
                        }
                    }
                }
            }
        }
        self.len = n;
        Ok(())
    }
}

#[cfg(test)]
mod prefix_io_tests {
    use super::*;

    /// A tiny config for shape-only tests.
    fn cfg() -> Config {
        Config {
            arch: super::super::Arch::Llama,
            n_layers: 2,
            dim: 8,
            ffn_dim: 16,
            n_heads: 2,
            n_kv_heads: 2,
            head_dim: 4,
            n_rot: 4,
            rope_theta: 10_000.0,
            rope_mode: crate::ops::RopeMode::Normal,
            rms_eps: 1e-5,
            vocab_size: 10,
            context_length: 16,
            tied_embeddings: true,
            qkv_bias: false,
            qk_norm: false,
        }
    }

    #[test]
    fn a_cache_beyond_the_memory_is_an_error_not_an_abort() {
        // 2^40 positions of 2 heads x 4 floats x 2 layers: 64 TiB per layer, more than any
        // machine's address space.
        let c = Config { context_length: 1 << 40, ..cfg() };
        let want = KvCache::bytes_for(&c, 1 << 40, KvDtype::F32);
        assert_eq!(want, 2 * 2 * 2 * (1 << 40) * 4 * 4);
        match KvCache::try_with_dtype(&c, 1 << 40, KvDtype::F32) {
            Err(ModelError::OutOfMemory { what: "KV cache", bytes }) => assert_eq!(bytes, want),
            other => panic!("expected OutOfMemory, got {:?}", other.map(|k| k.capacity())),
        }
        // Clamped to the training context; f16 halves it.
        assert_eq!(KvCache::bytes_for(&cfg(), 1000, KvDtype::F16), 2 * 2 * 2 * 16 * 4 * 2);
        assert_eq!(KvCache::try_with_dtype(&cfg(), 1000, KvDtype::F16).unwrap().capacity(), 16);
    }

    #[test]
    fn export_import_round_trip_in_both_dtypes() {
        for dtype in [KvDtype::F32, KvDtype::F16] {
            let c = cfg();
            let mut a = KvCache::with_dtype(&c, 16, dtype);
            let row = c.n_kv_heads * c.head_dim;
            for l in 0..c.n_layers {
                let k: Vec<f32> = (0..5 * row).map(|i| (i + 100 * l) as f32 * 0.5).collect();
                let v: Vec<f32> = k.iter().map(|x| -x).collect();
                a.store(l, &k, &v);
            }
            a.advance(5);
            let mut payload = Vec::new();
            a.export_prefix(5, &mut |b| {
                payload.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
            assert_eq!(payload.len(), a.prefix_bytes(5));
            let mut b = KvCache::with_dtype(&c, 8, dtype);
            b.import_prefix(5, &payload).unwrap();
            assert_eq!(b.len(), 5);
            for l in 0..c.n_layers {
                let (va, vb) = (a.layer(l), b.layer(l));
                match (va, vb) {
                    (KvView::F32 { k: ka, v: xa }, KvView::F32 { k: kb, v: xb }) => {
                        for h in 0..c.n_kv_heads {
                            assert_eq!(
                                &ka[h * 16 * 4..h * 16 * 4 + 20],
                                &kb[h * 8 * 4..h * 8 * 4 + 20]
                            );
                            assert_eq!(
                                &xa[h * 16 * 4..h * 16 * 4 + 20],
                                &xb[h * 8 * 4..h * 8 * 4 + 20]
                            );
                        }
                    }
                    (KvView::F16 { k: ka, v: xa }, KvView::F16 { k: kb, v: xb }) => {
                        for h in 0..c.n_kv_heads {
                            assert_eq!(
                                &ka[h * 16 * 4..h * 16 * 4 + 20],
                                &kb[h * 8 * 4..h * 8 * 4 + 20]
                            );
                            assert_eq!(
                                &xa[h * 16 * 4..h * 16 * 4 + 20],
                                &xb[h * 8 * 4..h * 8 * 4 + 20]
                            );
                        }
                    }
                    _ => panic!("dtype changed"),
                }
            }
            // Wrong sizes are refused and leave the cache as it was.
            assert!(b.import_prefix(5, &payload[1..]).is_err());
            assert!(b.import_prefix(9, &payload).is_err());
            assert_eq!(b.len(), 5);
        }
    }

    fn payload(c: &KvCache, n: usize) -> Vec<u8> {
        c.prefix_payload(n)
    }

    /// Stores `n` positions whose values depend on `seed` in every layer.
    fn fill(a: &mut KvCache, c: &Config, n: usize, seed: usize) {
        let row = c.n_kv_heads * c.head_dim;
        for l in 0..c.n_layers {
            let k: Vec<f32> =
                (0..n * row).map(|i| (i + 100 * l + 1000 * seed) as f32 * 0.25).collect();
            let v: Vec<f32> = k.iter().map(|x| -x).collect();
            a.store(l, &k, &v);
        }
        a.advance(n);
    }

    #[test]
    fn rows_set_aside_come_back_where_they_were() {
        for dtype in [KvDtype::F32, KvDtype::F16] {
            let c = cfg();
            let mut a = KvCache::with_dtype(&c, 16, dtype);
            fill(&mut a, &c, 5, 1);
            fill(&mut a, &c, 3, 2);
            let want = payload(&a, 8);
            let saved = a.save_rows(5);
            assert_eq!(saved.len(), 3);
            // Other rows at the same positions, then cut off again.
            a.truncate(5);
            fill(&mut a, &c, 6, 3);
            assert_ne!(payload(&a, 8), want);
            // Not at the positions they were taken from: refused, nothing changed.
            assert!(matches!(a.restore_rows(&saved), Err(ModelError::CacheMismatch)));
            assert_eq!(a.len(), 11);
            a.truncate(5);
            a.restore_rows(&saved).unwrap();
            assert_eq!(a.len(), 8);
            assert_eq!(payload(&a, 8), want);
            // Nothing to set aside past the end.
            assert!(a.save_rows(9).is_empty());
        }
    }
}
