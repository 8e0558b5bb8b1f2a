//! The sparse sidecar file: per-layer thresholds, predictors, neuron order and the neuron-major
//! down projection, written once by calibration and memory-mapped read-only (shared between backends).
//!
//! Layout (little-endian, version 1):
//! ```text
//! [0, 256)      header: magic "TISPARSE", version u32, n_layers u32, dim u32, ffn_dim u32, rank u32,
//!               n_levels u32, model_key [32], checksum [32] (SHA-256 of the file with this field
//!               zeroed), file_len u64, levels f32[MAX_LEVELS] (target sparsities), zero padding
//! [256, ...)    n_layers layer records of LAYER_REC_BYTES: n_hot u32, 0 u32, thr f32[MAX_LEVELS],
//!               cutoff f32[MAX_LEVELS], calibration recall f32[MAX_LEVELS], zero padding
//! then per layer, each section 64-byte aligned:
//!               order u32[ffn_dim]            neuron j (hot first) is FFN row order[j]
//!               p f32[dim, rank]              predictor input projection
//!               q f32[rank, ffn_dim]          predictor output projection (columns in `order`)
//!               bias f32[ffn_dim]             predictor bias (in `order`)
//!               down Q8_0[ffn_dim, dim]       down projection transposed, rows in `order`
//! ```

use super::SparseError;
use crate::fileio::{le, MapError, MappedFile, Watch};
use crate::gguf::GgufFile;
use crate::kernels::q8_0_row_bytes;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// File magic.
pub const MAGIC: &[u8; 8] = b"TISPARSE";
/// Format version this build writes and reads.
pub const VERSION: u32 = 1;
/// Most sparsity levels one sidecar holds (enough for a sweep; fixes the record size).
pub const MAX_LEVELS: usize = 8;
/// Header size (fixed, room to grow without moving the data).
pub const HEADER_BYTES: usize = 256;
/// Per-layer record size.
pub const LAYER_REC_BYTES: usize = 128;
/// Section alignment: a cache line, and enough for f32/u32 views of the mapping.
const ALIGN: usize = 64;
/// Byte range of the checksum inside the header.
const CHECKSUM_AT: std::ops::Range<usize> = 64..96;

/// Shape and identity of a sidecar.
#[derive(Debug, Clone, PartialEq)]
pub struct SidecarSpec {
    pub n_layers: usize,
    pub dim: usize,
    pub ffn_dim: usize,
    pub rank: usize,
    /// Calibrated target sparsities, ascending.
    pub levels: Vec<f32>,
    /// `model_key` of the GGUF file the sidecar was calibrated on.
    pub model_key: [u8; 32],
}

/// One layer's calibrated data (owned; what calibration produces).
#[derive(Debug, Clone, Default)]
pub struct LayerData {
    /// Neurons `order[..n_hot]` are computed for every token without prediction.
    pub n_hot: usize,
    /// Per level: |silu(gate)*up| above which a neuron counts as active.
    pub thr: Vec<f32>,
    /// Per level: predictor score above which a cold neuron is computed.
    pub cutoff: Vec<f32>,
    /// Per level: recall of truly active neurons on the calibration set.
    pub recall: Vec<f32>,
    pub order: Vec<u32>, // [ffn_dim]
    pub p: Vec<f32>,     // [dim, rank]
    pub q: Vec<f32>,     // [rank, ffn_dim]
    pub bias: Vec<f32>,  // [ffn_dim]
    pub down: Vec<u8>,   // [ffn_dim, q8_0_row_bytes(dim)]
}

/// One layer's data borrowed from the mapping.
#[derive(Debug, Clone, Copy)]
pub struct LayerView<'a> {
    pub n_hot: usize,
    pub thr: &'a [f32],
    pub cutoff: &'a [f32],
    pub recall: &'a [f32],
    pub order: &'a [u32],
    pub p: &'a [f32],
    pub q: &'a [f32],
    pub bias: &'a [f32],
    pub down: &'a [u8],
    /// Bytes of one row of `down`.
    pub down_row_bytes: usize,
}

/// Rounds `x` up to the section alignment.
fn align(x: usize) -> usize {
    x.div_ceil(ALIGN) * ALIGN
}

/// Byte sizes of one layer's sections: order, p, q, bias, down.
fn section_sizes(s: &SidecarSpec) -> [usize; 5] {
    [
        s.ffn_dim * 4,
        s.dim * s.rank * 4,
        s.rank * s.ffn_dim * 4,
        s.ffn_dim * 4,
        s.ffn_dim * q8_0_row_bytes(s.dim),
    ]
}

/// Offsets of every layer's sections and the total file length.
fn layout(s: &SidecarSpec) -> (Vec<[usize; 5]>, usize) {
    let sizes = section_sizes(s);
    let mut off = align(HEADER_BYTES + s.n_layers * LAYER_REC_BYTES);
    let mut out = Vec::with_capacity(s.n_layers);
    for _ in 0..s.n_layers {
        let mut o = [0usize; 5];
        for (i, sz) in sizes.iter().enumerate() {
            o[i] = off;
            off = align(off + sz);
        }
        out.push(o);
    }
    (out, off)
}

/// Identity of a model file: SHA-256 of its header, metadata and tensor directory (everything
/// before the tensor data) plus the file length. Cheap (no weight bytes hashed), and any change of
/// tensor types, shapes, offsets or metadata changes it.
pub fn model_key(file: &GgufFile) -> [u8; 32] {
    let end = (file.header().data_offset as usize).min(file.bytes().len());
    let mut h = Sha256::new();
    h.update(&file.bytes()[..end]);
    h.update(file.len().to_le_bytes());
    h.finalize().into()
}

/// Hex form of a key (for messages).
pub fn hex(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// The conventional sidecar path of a model: `<model>.sparse`.
pub fn default_path(model: &Path) -> PathBuf {
    let mut s = model.as_os_str().to_owned();
    s.push(".sparse");
    PathBuf::from(s)
}

/// Checks the spec's invariants (shared by writer and reader).
fn check_spec(s: &SidecarSpec) -> Result<(), String> {
    if s.n_layers == 0 || s.dim == 0 || s.ffn_dim == 0 || s.rank == 0 {
        return Err("zero dimension".into());
    }
    if !s.dim.is_multiple_of(32) {
        return Err(format!("dim {} is not a multiple of 32 (Q8_0 down rows)", s.dim));
    }
    if s.levels.is_empty() || s.levels.len() > MAX_LEVELS {
        return Err(format!("{} levels (expected 1..={MAX_LEVELS})", s.levels.len()));
    }
    if s.levels.iter().any(|l| !(0.0..1.0).contains(l)) || s.levels.windows(2).any(|w| w[0] >= w[1])
    {
        return Err(format!("levels {:?} are not ascending in [0, 1)", s.levels));
    }
    // Keep every size far from overflow (a hostile header must not make us allocate or index wildly).
    let big = 1usize << 20;
    if s.n_layers > 4096 || s.dim > big || s.ffn_dim > big || s.rank > 4096 {
        return Err("implausible shape".into());
    }
    Ok(())
}

/// Writes a sidecar atomically (temporary file, then rename).
pub fn write(path: &Path, spec: &SidecarSpec, layers: &[LayerData]) -> Result<(), SparseError> {
    let corrupt = |reason: String| SparseError::Corrupt { path: path.to_path_buf(), reason };
    check_spec(spec).map_err(corrupt)?;
    if layers.len() != spec.n_layers {
        return Err(corrupt(format!("{} layers given, spec says {}", layers.len(), spec.n_layers)));
    }
    let (offs, total) = layout(spec);
    let sizes = section_sizes(spec);
    let mut buf = vec![0u8; total];
    buf[0..8].copy_from_slice(MAGIC);
    let put_u32 = |b: &mut [u8], at: usize, v: usize| {
        b[at..at + 4].copy_from_slice(&(v as u32).to_le_bytes())
    };
    put_u32(&mut buf, 8, VERSION as usize);
    put_u32(&mut buf, 12, spec.n_layers);
    put_u32(&mut buf, 16, spec.dim);
    put_u32(&mut buf, 20, spec.ffn_dim);
    put_u32(&mut buf, 24, spec.rank);
    put_u32(&mut buf, 28, spec.levels.len());
    buf[32..64].copy_from_slice(&spec.model_key);
    buf[96..104].copy_from_slice(&(total as u64).to_le_bytes());
    for (i, l) in spec.levels.iter().enumerate() {
        buf[104 + 4 * i..108 + 4 * i].copy_from_slice(&l.to_le_bytes());
    }
    let nl = spec.levels.len();
    for (li, (d, o)) in layers.iter().zip(&offs).enumerate() {
        let bad = d.order.len() != spec.ffn_dim
            || d.p.len() != spec.dim * spec.rank
            || d.q.len() != spec.rank * spec.ffn_dim
            || d.bias.len() != spec.ffn_dim
            || d.down.len() != sizes[4]
            || d.thr.len() != nl
            || d.cutoff.len() != nl
            || d.recall.len() != nl
            || d.n_hot > spec.ffn_dim;
        if bad {
            return Err(corrupt(format!("layer {li}: section sizes do not match the spec")));
        }
        let r = HEADER_BYTES + li * LAYER_REC_BYTES;
        put_u32(&mut buf, r, d.n_hot);
        for i in 0..nl {
            buf[r + 8 + 4 * i..r + 12 + 4 * i].copy_from_slice(&d.thr[i].to_le_bytes());
            let c = r + 8 + 4 * MAX_LEVELS + 4 * i;
            buf[c..c + 4].copy_from_slice(&d.cutoff[i].to_le_bytes());
            let c = r + 8 + 8 * MAX_LEVELS + 4 * i;
            buf[c..c + 4].copy_from_slice(&d.recall[i].to_le_bytes());
        }
        let put_words = |b: &mut [u8], at: usize, words: &mut dyn Iterator<Item = [u8; 4]>| {
            for (k, w) in words.enumerate() {
                b[at + 4 * k..at + 4 * k + 4].copy_from_slice(&w);
            }
        };
        put_words(&mut buf, o[0], &mut d.order.iter().map(|v| v.to_le_bytes()));
        put_words(&mut buf, o[1], &mut d.p.iter().map(|v| v.to_le_bytes()));
        put_words(&mut buf, o[2], &mut d.q.iter().map(|v| v.to_le_bytes()));
        put_words(&mut buf, o[3], &mut d.bias.iter().map(|v| v.to_le_bytes()));
        buf[o[4]..o[4] + sizes[4]].copy_from_slice(&d.down);
    }
    let sum: [u8; 32] = Sha256::digest(&buf).into();
    buf[CHECKSUM_AT].copy_from_slice(&sum);
    // Readers only ever see a complete file (see `crate::fileio::atomic`); concurrent
    // calibrations each write a temporary file of their own.
    crate::fileio::atomic::write_all(path, None, &buf)
        .map_err(|source| SparseError::Io { path: path.to_path_buf(), source })
}

/// An opened, fully validated sidecar (read-only mapping).
pub struct Sidecar {
    path: PathBuf,
    map: MappedFile,
    spec: SidecarSpec,
    offs: Vec<[usize; 5]>,
}

impl std::fmt::Debug for Sidecar {
    /// Short summary (the data is not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar").field("path", &self.path).field("spec", &self.spec).finish()
    }
}

/// Views `b` as `T`s (4-byte plain numbers); `None` if misaligned or not a whole number of them.
fn cast<T: Copy>(b: &[u8]) -> Option<&[T]> {
    // SAFETY: used only with T = f32/u32 (every bit pattern valid); align_to only returns a
    // middle slice that is correctly aligned and in bounds; we require empty prefix and suffix.
    let (pre, mid, post) = unsafe { b.align_to::<T>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

impl Sidecar {
    /// Maps and validates `path` (magic, version, shape, length, checksum, neuron permutations).
    /// If `model` is given, the sidecar must have been calibrated on exactly that file.
    pub fn open(path: impl AsRef<Path>, model: Option<&GgufFile>) -> Result<Sidecar, SparseError> {
        let path = path.as_ref().to_path_buf();
        if cfg!(target_endian = "big") {
            return Err(SparseError::Unsupported {
                what: "sidecar",
                reason: "big-endian host".into(),
            });
        }
        // Non-blocking, regular files only, no symlink followed (sidecars are written by rename).
        let links = crate::fileio::regular_file::Links::Refuse;
        let map = match MappedFile::open(&path, links, HEADER_BYTES as u64, MAGIC, Watch::No) {
            Ok(m) => m,
            Err(MapError::Io(source)) => return Err(SparseError::Io { path, source }),
            Err(MapError::Short { .. } | MapError::Magic { .. }) => {
                return Err(SparseError::BadMagic { path })
            }
        };
        let corrupt = |reason: String| SparseError::Corrupt { path: path.clone(), reason };
        let b = map.bytes();
        // Header fields (the file holds a whole header: checked above).
        let u32_at = |at| le::u32_at(b, at).expect("inside the header");
        let version = u32_at(8);
        if version != VERSION {
            return Err(SparseError::Version { path, found: version, expected: VERSION });
        }
        let n_levels = u32_at(28) as usize;
        if n_levels == 0 || n_levels > MAX_LEVELS {
            return Err(corrupt(format!("{n_levels} sparsity levels")));
        }
        let mut key_bytes = [0u8; 32];
        key_bytes.copy_from_slice(&b[32..64]);
        let spec = SidecarSpec {
            n_layers: u32_at(12) as usize,
            dim: u32_at(16) as usize,
            ffn_dim: u32_at(20) as usize,
            rank: u32_at(24) as usize,
            levels: (0..n_levels)
                .map(|i| le::f32_at(b, 104 + 4 * i).expect("inside the header"))
                .collect(),
            model_key: key_bytes,
        };
        check_spec(&spec).map_err(corrupt)?;
        let (offs, total) = layout(&spec);
        let stated = le::u64_at(b, 96).expect("inside the header");
        if b.len() != total || stated != total as u64 {
            return Err(corrupt(format!(
                "length {} (header says {stated}), expected {total}",
                b.len()
            )));
        }
        let mut h = Sha256::new();
        h.update(&b[..CHECKSUM_AT.start]);
        h.update([0u8; 32]);
        h.update(&b[CHECKSUM_AT.end..]);
        let sum: [u8; 32] = h.finalize().into();
        if sum[..] != b[CHECKSUM_AT] {
            return Err(corrupt("checksum mismatch".into()));
        }
        if let Some(m) = model {
            let key = model_key(m);
            if key != spec.model_key {
                return Err(SparseError::ModelMismatch {
                    path,
                    sidecar: hex(&spec.model_key),
                    model: hex(&key),
                });
            }
        }
        let sc = Sidecar { path: path.clone(), map, spec, offs };
        for l in 0..sc.spec.n_layers {
            let v = sc.layer(l);
            if v.n_hot > sc.spec.ffn_dim {
                return Err(corrupt(format!("layer {l}: n_hot {} > ffn_dim", v.n_hot)));
            }
            let mut seen = vec![false; sc.spec.ffn_dim];
            for &o in v.order {
                let o = o as usize;
                if o >= seen.len() || std::mem::replace(&mut seen[o], true) {
                    return Err(corrupt(format!("layer {l}: neuron order is not a permutation")));
                }
            }
        }
        Ok(sc)
    }

    /// Checks that the sidecar's shape matches a model of `n_layers` layers, `dim`, `ffn_dim`.
    pub fn check_shape(
        &self,
        n_layers: usize,
        dim: usize,
        ffn_dim: usize,
    ) -> Result<(), SparseError> {
        let s = &self.spec;
        if (s.n_layers, s.dim, s.ffn_dim) != (n_layers, dim, ffn_dim) {
            return Err(SparseError::ShapeMismatch {
                path: self.path.clone(),
                found: format!("{} layers, dim {}, ffn {}", s.n_layers, s.dim, s.ffn_dim),
                expected: format!("{n_layers} layers, dim {dim}, ffn {ffn_dim}"),
            });
        }
        Ok(())
    }

    /// The header fields.
    pub fn spec(&self) -> &SidecarSpec {
        &self.spec
    }

    /// Where the sidecar was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's SHA-256 checksum (as stored and verified at open): its content identity.
    pub fn checksum(&self) -> [u8; 32] {
        self.map.bytes()[CHECKSUM_AT].try_into().expect("32 bytes")
    }

    /// Size of the file in bytes.
    pub fn len_bytes(&self) -> usize {
        self.map.bytes().len()
    }

    /// Layer `l`'s data (`l < n_layers`).
    pub fn layer(&self, l: usize) -> LayerView<'_> {
        let s = &self.spec;
        let b = self.map.bytes();
        let o = self.offs[l];
        let sz = section_sizes(s);
        let r = HEADER_BYTES + l * LAYER_REC_BYTES;
        let nl = s.levels.len();
        let rec = |k: usize| {
            cast::<f32>(&b[r + 8 + 4 * MAX_LEVELS * k..r + 8 + 4 * MAX_LEVELS * k + 4 * nl])
                .expect("aligned")
        };
        LayerView {
            n_hot: le::u32_at(b, r).expect("validated at open") as usize,
            thr: rec(0),
            cutoff: rec(1),
            recall: rec(2),
            order: cast::<u32>(&b[o[0]..o[0] + sz[0]]).expect("aligned"),
            p: cast::<f32>(&b[o[1]..o[1] + sz[1]]).expect("aligned"),
            q: cast::<f32>(&b[o[2]..o[2] + sz[2]]).expect("aligned"),
            bias: cast::<f32>(&b[o[3]..o[3] + sz[3]]).expect("aligned"),
            down: &b[o[4]..o[4] + sz[4]],
            down_row_bytes: q8_0_row_bytes(s.dim),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small synthetic sidecar (2 layers, dim 32, ffn 8, rank 2, two levels).
    fn sample() -> (SidecarSpec, Vec<LayerData>) {
        let spec = SidecarSpec {
            n_layers: 2,
            dim: 32,
            ffn_dim: 8,
            rank: 2,
            levels: vec![0.5, 0.8],
            model_key: [7; 32],
        };
        let layer = |k: u32| LayerData {
            n_hot: 1,
            thr: vec![0.1, 0.2],
            cutoff: vec![-1.0, 1.0],
            recall: vec![0.9, 0.8],
            order: (0..8).map(|i| (i + k) % 8).collect(),
            p: (0..64).map(|i| i as f32).collect(),
            q: (0..16).map(|i| -(i as f32)).collect(),
            bias: vec![0.5; 8],
            down: vec![k as u8; 8 * q8_0_row_bytes(32)],
        };
        (spec, vec![layer(0), layer(3)])
    }

    /// A unique temporary path.
    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("turboinfer-sidecar-{}-{name}", std::process::id()))
    }

    /// Written data reads back identically.
    #[test]
    fn round_trip() {
        let (spec, layers) = sample();
        let p = tmp("rt");
        write(&p, &spec, &layers).unwrap();
        let sc = Sidecar::open(&p, None).unwrap();
        assert_eq!(sc.spec(), &spec);
        for (l, d) in layers.iter().enumerate() {
            let v = sc.layer(l);
            assert_eq!(
                (v.n_hot, v.thr, v.cutoff, v.recall),
                (d.n_hot, &d.thr[..], &d.cutoff[..], &d.recall[..])
            );
            assert_eq!(
                (v.order, v.p, v.q, v.bias, v.down),
                (&d.order[..], &d.p[..], &d.q[..], &d.bias[..], &d.down[..])
            );
        }
        sc.check_shape(2, 32, 8).unwrap();
        assert!(matches!(sc.check_shape(2, 32, 16), Err(SparseError::ShapeMismatch { .. })));
        std::fs::remove_file(&p).unwrap();
    }

    /// Any flipped byte, a truncation, a bad magic, a future version or a non-permutation is refused
    /// with the matching typed error.
    #[test]
    fn corruption_is_rejected() {
        let (spec, mut layers) = sample();
        let p = tmp("bad");
        write(&p, &spec, &layers).unwrap();
        let good = std::fs::read(&p).unwrap();
        let check = |bytes: &[u8], want: &str| {
            std::fs::write(&p, bytes).unwrap();
            let e = Sidecar::open(&p, None).unwrap_err();
            let ok = match want {
                "magic" => matches!(e, SparseError::BadMagic { .. }),
                "version" => matches!(e, SparseError::Version { .. }),
                _ => matches!(&e, SparseError::Corrupt { reason, .. } if reason.contains(want)),
            };
            assert!(ok, "expected {want}, got {e}");
        };
        // A flipped bit anywhere after the header fields (levels, records, predictors, down rows).
        for at in [110, HEADER_BYTES + 3, good.len() / 2, good.len() - 1] {
            let mut b = good.clone();
            b[at] ^= 0x10;
            check(&b, "checksum");
        }
        check(&good[..good.len() - 5], "length");
        check(&good[..10], "magic");
        let mut b = good.clone();
        b[0] = b'X';
        check(&b, "magic");
        let mut b = good.clone();
        b[8] = 2;
        check(&b, "version");
        let mut b = good.clone();
        b[28] = 0;
        check(&b, "levels");
        // A valid checksum over a broken permutation is still refused.
        layers[1].order[0] = layers[1].order[1];
        write(&p, &spec, &layers).unwrap();
        let e = Sidecar::open(&p, None).unwrap_err();
        assert!(e.to_string().contains("permutation"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }
}
