//! Cache files of the schema prefix's KV state, shared by every backend of a server.
//!
//! One file per (model, numeric mode, prefix text, KV dtype): `<fingerprint hex>.<dtype>.tikv` in
//! the cache directory. A backend that computed a prefix writes its keys and values once; other
//! and later backends that miss in memory map the file read-only, validate it and copy it into
//! their own KV cache instead of running the prefix through the model.
//!
//! Layout (little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TIKVPFX\0` |
//! | 8 | 4 | format version (`VERSION`) |
//! | 12 | 4 | payload offset (header + token ids, padded to `PAYLOAD_ALIGN`) |
//! | 16 | 32 | model hash: SHA-256 of the model identity and numeric options |
//! | 48 | 32 | prompt fingerprint (covers model identity and exact prefix text) |
//! | 80 | 4 | KV dtype (1 = f32, 2 = f16) |
//! | 84 | 4 | layers |
//! | 88 | 4 | KV heads |
//! | 92 | 4 | head size |
//! | 96 | 4 | kv_dim (KV heads × head size, checked for consistency) |
//! | 100 | 4 | token count `n` |
//! | 104 | 8 | payload length in bytes |
//! | 112 | 4 | CRC-32 of the payload |
//! | 116 | 4 | CRC-32 of bytes `0..payload offset` with this field zeroed |
//! | 120 | 8 | reserved (zero) |
//! | 128 | 4·n | the prefix token ids |
//! | … | | zero padding up to the payload offset |
//! | off | | payload: `KvCache::export_prefix` layout |
//!
//! Files are written to a unique temporary name, fsynced and renamed into place, so a reader
//! only ever sees complete files, and writers of the same key race harmlessly (same content, last
//! rename wins). A file is never modified in place once renamed, which is what makes mapping it
//! safe: an unlink or a rename over it leaves the mapped inode intact.
//!
//! A file that cannot be used is never an error for the caller: `load` says why (so the caller
//! can log it), deletes it when it is corrupt, and the prefix is recomputed.

use super::fingerprint::Fingerprint;
use crate::fileio::{le, AtomicFile, MapError, MappedFile, Watch};
use crate::model::{KvCache, KvDtype};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// File signature.
pub const MAGIC: [u8; 8] = *b"TIKVPFX\0";
/// Format version; bump on any layout change (older files are then ignored and replaced).
pub const VERSION: u32 = 1;
/// Size of the fixed header before the token ids.
pub const FIXED_HEADER: usize = 128;
/// Payload alignment: a cache line, and a multiple of every element size.
pub const PAYLOAD_ALIGN: usize = 64;
/// File name suffix of complete cache files.
pub const SUFFIX: &str = ".tikv";
/// Suffix of files being written.
const PART_SUFFIX: &str = ".part";
/// A temporary file older than this belongs to a writer that died (a write takes well under a
/// minute even for the largest prefix), so eviction removes it.
const STALE_PART: Duration = Duration::from_secs(3600);
/// Byte offset of the header checksum field.
const HEADER_CRC_AT: usize = 116;

/// Why a cache file was not used or written.
#[derive(Debug, thiserror::Error)]
pub enum KvFileError {
    /// No file for this key (the normal first-use case).
    #[error("no cache file")]
    Missing,
    /// Damaged (truncated, bad checksum, inconsistent header); the file was deleted.
    #[error("corrupt cache file {path}: {reason} (deleted)")]
    Corrupt { path: PathBuf, reason: String },
    /// Intact but not for this prefix (other version, model, dtype, shape or tokens).
    #[error("cache file {path} does not match: {reason}")]
    Mismatch { path: PathBuf, reason: String },
    /// The prefix's file would exceed the directory's size limit.
    #[error("a cache file of {bytes} bytes would exceed the {max} byte limit")]
    TooLarge { bytes: u64, max: u64 },
    #[error("cache file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

impl KvFileError {
    /// True for the cases an operator should hear about (damage, I/O trouble); false for the
    /// expected ones (no file yet, a file for another version or shape, a prefix too large).
    pub fn is_warning(&self) -> bool {
        matches!(self, KvFileError::Corrupt { .. } | KvFileError::Io { .. })
    }
}

/// What a cache file must hold to be used for one prefix.
#[derive(Debug, Clone, Copy)]
pub struct KvFileKey<'a> {
    pub fingerprint: Fingerprint,
    /// `model_hash(identity, options)` of the engine.
    pub model_hash: [u8; 32],
    /// The plan's prefix token ids.
    pub prefix_ids: &'a [u32],
}

/// SHA-256 of the model identity and a description of its numeric options (the KV values depend
/// on both).
pub fn model_hash(identity: &str, numeric_options: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"turboinfer-kv-model-v1\0");
    for part in [identity, numeric_options] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

/// File count and total bytes of a cache directory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirStats {
    pub files: u64,
    pub bytes: u64,
}

/// What a successful `store` did.
#[derive(Debug, Clone)]
pub struct Stored {
    pub path: PathBuf,
    pub bytes: u64,
    /// Older files removed to stay within the size limit.
    pub evicted: usize,
}

/// A cache directory with a size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvFileDir {
    dir: PathBuf,
    max_bytes: u64,
}

/// The dtype code stored in the header.
fn dtype_code(d: KvDtype) -> u32 {
    match d {
        KvDtype::F32 => 1,
        KvDtype::F16 => 2,
    }
}

/// The dtype's name in file names.
fn dtype_name(d: KvDtype) -> &'static str {
    match d {
        KvDtype::F32 => "f32",
        KvDtype::F16 => "f16",
    }
}

/// Offset of the payload of a file holding `n` token ids (`None` on overflow).
fn payload_offset(n: usize) -> Option<usize> {
    let end = n.checked_mul(4)?.checked_add(FIXED_HEADER)?;
    end.checked_next_multiple_of(PAYLOAD_ALIGN)
}

/// CRC-32 of a header (`bytes[..off]`) with its own checksum field taken as zero.
fn header_crc(header: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[..HEADER_CRC_AT]);
    h.update(&[0; 4]);
    h.update(&header[HEADER_CRC_AT + 4..]);
    h.finalize()
}

/// The header of a file for `key` holding `kv`'s first `n` positions, with the payload checksum.
fn encode_header(key: &KvFileKey, kv: &KvCache, payload_len: u64, payload_crc: u32) -> Vec<u8> {
    let n = key.prefix_ids.len();
    let off = payload_offset(n).expect("prefix length is bounded by the KV capacity");
    let (layers, heads, hd) = kv.shape();
    let mut b = vec![0u8; off];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(off as u32).to_le_bytes());
    b[16..48].copy_from_slice(&key.model_hash);
    b[48..80].copy_from_slice(&key.fingerprint.0);
    for (i, v) in [
        dtype_code(kv.dtype()),
        layers as u32,
        heads as u32,
        hd as u32,
        (heads * hd) as u32,
        n as u32,
    ]
    .into_iter()
    .enumerate()
    {
        b[80 + 4 * i..84 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    b[104..112].copy_from_slice(&payload_len.to_le_bytes());
    b[112..116].copy_from_slice(&payload_crc.to_le_bytes());
    for (i, id) in key.prefix_ids.iter().enumerate() {
        b[FIXED_HEADER + 4 * i..FIXED_HEADER + 4 * i + 4].copy_from_slice(&id.to_le_bytes());
    }
    let crc = header_crc(&b);
    b[HEADER_CRC_AT..HEADER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Why `check` refused a file: damaged (`true`) or merely not for this prefix (`false`).
type Refusal = (bool, String);

/// Validates a whole file image against `key` and `kv`'s shape; returns the payload's byte
/// range. Every offset and length is checked before use.
fn check(b: &[u8], key: &KvFileKey, kv: &KvCache) -> Result<std::ops::Range<usize>, Refusal> {
    let corrupt = |r: String| (true, r);
    let mismatch = |r: String| (false, r);
    if b.len() < FIXED_HEADER {
        return Err(corrupt(format!("truncated header ({} bytes)", b.len())));
    }
    if b[0..8] != MAGIC {
        return Err(corrupt("bad magic".into()));
    }
    // A field of the fixed header (its length was checked above).
    let u32_at = |at| le::u32_at(b, at).ok_or_else(|| corrupt("truncated header".into()));
    let version = u32_at(8)?;
    if version != VERSION {
        return Err(mismatch(format!("format version {version}, expected {VERSION}")));
    }
    let n = u32_at(100)? as usize;
    let off = u32_at(12)? as usize;
    if payload_offset(n) != Some(off) {
        return Err(corrupt(format!("payload offset {off} does not fit {n} tokens")));
    }
    if b.len() < off {
        return Err(corrupt(format!("truncated token list ({} of {off} header bytes)", b.len())));
    }
    if header_crc(&b[..off]) != u32_at(HEADER_CRC_AT)? {
        return Err(corrupt("header checksum mismatch".into()));
    }
    if b[16..48] != key.model_hash {
        return Err(mismatch("written for another model file or numeric mode".into()));
    }
    if b[48..80] != key.fingerprint.0 {
        return Err(mismatch("other prompt fingerprint".into()));
    }
    let (layers, heads, hd) = kv.shape();
    let want =
        [dtype_code(kv.dtype()), layers as u32, heads as u32, hd as u32, (heads * hd) as u32];
    let got = (0..5).map(|i| u32_at(80 + 4 * i)).collect::<Result<Vec<u32>, _>>()?;
    if got != want {
        return Err(mismatch(format!(
            "dtype/layers/kv_heads/head_dim/kv_dim {got:?}, expected {want:?}"
        )));
    }
    if n != key.prefix_ids.len()
        || (0..n).any(|i| le::u32_at(b, FIXED_HEADER + 4 * i) != Some(key.prefix_ids[i]))
    {
        return Err(mismatch("prefix token ids differ from the prompt's".into()));
    }
    if n > kv.capacity() {
        return Err(mismatch(format!("{n} positions do not fit a KV cache of {}", kv.capacity())));
    }
    let payload_len = le::u64_at(b, 104).ok_or_else(|| corrupt("truncated header".into()))?;
    if payload_len != kv.prefix_bytes(n) as u64 {
        return Err(corrupt(format!("payload length {payload_len} does not fit the shape")));
    }
    let end = off as u64 + payload_len;
    if (b.len() as u64) != end {
        return Err(corrupt(format!("file is {} bytes, expected {end}", b.len())));
    }
    let payload = off..b.len();
    if crc32fast::hash(&b[payload.clone()]) != u32_at(112)? {
        return Err(corrupt("payload checksum mismatch".into()));
    }
    Ok(payload)
}

impl KvFileDir {
    /// The cache in `dir`, holding at most `max_bytes` of complete files.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> KvFileDir {
        KvFileDir { dir: dir.into(), max_bytes }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The size limit in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Path of the file for `fingerprint` with KV element type `dtype`.
    pub fn path_for(&self, fingerprint: &Fingerprint, dtype: KvDtype) -> PathBuf {
        self.dir.join(format!("{}.{}{SUFFIX}", fingerprint.hex(), dtype_name(dtype)))
    }

    /// Whether a file for `key` with element type `dtype` is there (not whether it is valid:
    /// [`KvFileDir::load`] checks that). Lets a caller keep its buffers when there is none.
    pub fn has(&self, key: &KvFileKey, dtype: KvDtype) -> bool {
        fs::symlink_metadata(self.path_for(&key.fingerprint, dtype)).is_ok()
    }

    /// Fills `kv` (its content replaced; `len()` becomes the prefix length) from the file for
    /// `key`, after validating it. A damaged file is deleted. On error `kv` is left empty.
    pub fn load(&self, key: &KvFileKey, kv: &mut KvCache) -> Result<PathBuf, KvFileError> {
        kv.clear();
        let path = self.path_for(&key.fingerprint, kv.dtype());
        // Non-blocking, regular files only, no symlink followed: anything else planted here is
        // an I/O refusal (a warning and a miss: the prefix is computed), and is left in place.
        // Not watched: cache files are never written in place after their rename (writers use a
        // fresh temporary file), and the directory is private to the server; the length is
        // re-checked against the header before any payload byte is read.
        let links = crate::fileio::regular_file::Links::Refuse;
        let (map, refusal) =
            match MappedFile::open(&path, links, FIXED_HEADER as u64, b"", Watch::No) {
                Err(MapError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(KvFileError::Missing)
                }
                Err(MapError::Io(source)) => return Err(KvFileError::Io { path, source }),
                Err(MapError::Short { len, .. }) => {
                    (None, Err((true, format!("truncated header ({len} bytes)"))))
                }
                // (No magic is asked for: `check` tells a bad one, in these words.)
                Err(MapError::Magic { .. }) => (None, Err((true, "bad magic".to_string()))),
                Ok(map) => {
                    let r = check(map.bytes(), key, kv).and_then(|payload| {
                        kv.import_prefix(key.prefix_ids.len(), &map.bytes()[payload])
                            .map_err(|e| (false, e.to_string()))
                    });
                    (Some(map), r)
                }
            };
        match refusal {
            Ok(()) => {
                // Recently used files are evicted last.
                if let Some(file) = map.as_ref().and_then(MappedFile::file) {
                    let _ = file.set_modified(SystemTime::now());
                }
                Ok(path)
            }
            Err((corrupt, reason)) => {
                kv.clear();
                if corrupt {
                    let _ = fs::remove_file(&path);
                    Err(KvFileError::Corrupt { path, reason })
                } else {
                    Err(KvFileError::Mismatch { path, reason })
                }
            }
        }
    }

    /// Writes the first `key.prefix_ids.len()` positions of `kv` as the file for `key`
    /// (atomically: temporary file, fsync, rename, directory fsync), creating the directory
    /// (mode 0700) if needed, then evicts the least recently used files beyond the size limit.
    pub fn store(&self, key: &KvFileKey, kv: &KvCache) -> Result<Stored, KvFileError> {
        let n = key.prefix_ids.len();
        assert!(n <= kv.len(), "the prefix is in the cache");
        let off = payload_offset(n).expect("n is bounded by the KV capacity");
        let payload_len = kv.prefix_bytes(n) as u64;
        let bytes = off as u64 + payload_len;
        if bytes > self.max_bytes {
            return Err(KvFileError::TooLarge { bytes, max: self.max_bytes });
        }
        let dir_err = |source| KvFileError::Io { path: self.dir.clone(), source };
        fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir).map_err(dir_err)?;
        let path = self.path_for(&key.fingerprint, kv.dtype());
        let io_err = |source| KvFileError::Io { path: path.clone(), source };
        // Private to the server (0600); the `.part` suffix lets `evict` remove what a writer that
        // died left behind.
        let mut file = AtomicFile::create(&path, Some(0o600), PART_SUFFIX).map_err(io_err)?;
        let written = (|| -> io::Result<()> {
            let mut w = BufWriter::with_capacity(1 << 20, file.file());
            w.write_all(&vec![0u8; off])?;
            let mut crc = crc32fast::Hasher::new();
            kv.export_prefix(n, &mut |piece| {
                crc.update(piece);
                w.write_all(piece)
            })?;
            let header = encode_header(key, kv, payload_len, crc.finalize());
            w.seek(SeekFrom::Start(0))?;
            w.write_all(&header)?;
            w.into_inner().map_err(|e| e.into_error())?;
            Ok(())
        })();
        written.and_then(|()| file.commit()).map_err(io_err)?;
        let evicted = self.evict(&path);
        Ok(Stored { path, bytes, evicted })
    }

    /// Complete cache files: (path, size, last use).
    fn entries(&self) -> Vec<(PathBuf, u64, SystemTime)> {
        let Ok(rd) = fs::read_dir(&self.dir) else { return Vec::new() };
        rd.filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(SUFFIX))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                m.is_file().then(|| (e.path(), m.len(), m.modified().unwrap_or(UNIX_EPOCH)))
            })
            .collect()
    }

    /// Removes the least recently used files (never `keep`) until the total is within the limit,
    /// and temporary files of writers that died. Returns how many cache files were removed.
    pub fn evict(&self, keep: &Path) -> usize {
        if let Ok(rd) = fs::read_dir(&self.dir) {
            for e in rd.filter_map(Result::ok) {
                let stale = e
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STALE_PART);
                if e.file_name().to_string_lossy().ends_with(PART_SUFFIX) && stale {
                    let _ = fs::remove_file(e.path());
                }
            }
        }
        let mut entries = self.entries();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.2);
        let mut removed = 0;
        for (path, size, _) in entries {
            if total <= self.max_bytes {
                break;
            }
            if path != keep && fs::remove_file(&path).is_ok() {
                total -= size;
                removed += 1;
            }
        }
        removed
    }

    /// Number and total size of the complete cache files.
    pub fn stats(&self) -> DirStats {
        let e = self.entries();
        DirStats { files: e.len() as u64, bytes: e.iter().map(|e| e.1).sum() }
    }

    /// Deletes every cache file and temporary file; returns what was removed.
    pub fn clear(&self) -> DirStats {
        let mut removed = DirStats::default();
        let Ok(rd) = fs::read_dir(&self.dir) else { return removed };
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name().to_string_lossy().into_owned();
            if !(name.ends_with(SUFFIX) || name.ends_with(PART_SUFFIX)) {
                continue;
            }
            let size = e.metadata().map_or(0, |m| m.len());
            if fs::remove_file(e.path()).is_ok() && name.ends_with(SUFFIX) {
                removed.files += 1;
                removed.bytes += size;
            }
        }
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Config;

    /// A small shape: 2 layers, 2 KV heads of size 4.
    fn cfg(layers: usize, heads: usize, hd: usize) -> Config {
        Config {
            arch: crate::model::Arch::Llama,
            n_layers: layers,
            dim: 8,
            ffn_dim: 16,
            n_heads: heads,
            n_kv_heads: heads,
            head_dim: hd,
            n_rot: hd,
            rope_theta: 10_000.0,
            rope_mode: crate::ops::RopeMode::Normal,
            rms_eps: 1e-5,
            vocab_size: 10,
            context_length: 64,
            tied_embeddings: true,
            qkv_bias: false,
            qk_norm: false,
        }
    }

    /// A cache of `n` positions with distinct values, using the model-independent API only.
    fn filled(c: &Config, dtype: KvDtype, n: usize) -> KvCache {
        let mut kv = KvCache::with_dtype(c, 32, dtype);
        let bytes = kv.prefix_bytes(n);
        let payload: Vec<u8> = match dtype {
            KvDtype::F32 => {
                (0..bytes / 4).flat_map(|i| (i as f32 * 0.25 - 3.0).to_le_bytes()).collect()
            }
            KvDtype::F16 => (0..bytes / 2)
                .flat_map(|i| half::f16::from_f32(i as f32 * 0.5).to_bits().to_le_bytes())
                .collect(),
        };
        kv.import_prefix(n, &payload).unwrap();
        kv
    }

    /// The payload bytes of `kv`'s first `n` positions.
    fn payload(kv: &KvCache, n: usize) -> Vec<u8> {
        kv.prefix_payload(n)
    }

    /// A fresh empty directory under the target's temp dir.
    fn tmpdir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("turboinfer-kvfile-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    const IDS: [u32; 5] = [7, 1, 99, 4, 12];

    /// A key for `IDS`.
    fn key() -> KvFileKey<'static> {
        KvFileKey {
            fingerprint: Fingerprint::of("m", "prefix"),
            model_hash: model_hash("m", "opts"),
            prefix_ids: &IDS,
        }
    }

    #[test]
    fn round_trip_both_dtypes_and_permissions() {
        use std::os::unix::fs::PermissionsExt;
        for dtype in [KvDtype::F32, KvDtype::F16] {
            let dir = tmpdir(&format!("rt-{dtype:?}"));
            let files = KvFileDir::new(dir.join("sub"), 1 << 30);
            let c = cfg(2, 2, 4);
            let kv = filled(&c, dtype, 5);
            let stored = files.store(&key(), &kv).unwrap();
            assert_eq!(fs::metadata(&stored.path).unwrap().len(), stored.bytes);
            assert_eq!(fs::metadata(&stored.path).unwrap().permissions().mode() & 0o777, 0o600);
            assert_eq!(fs::metadata(files.dir()).unwrap().permissions().mode() & 0o777, 0o700);
            let mut other = KvCache::with_dtype(&c, 16, dtype);
            assert!(matches!(
                files.load(&KvFileKey { prefix_ids: &IDS[..4], ..key() }, &mut other),
                Err(KvFileError::Mismatch { .. })
            ));
            files.load(&key(), &mut other).unwrap();
            assert_eq!(other.len(), 5);
            assert_eq!(payload(&other, 5), payload(&kv, 5));
            assert_eq!(files.stats(), DirStats { files: 1, bytes: stored.bytes });
            assert_eq!(files.clear().files, 1);
            assert!(matches!(files.load(&key(), &mut other), Err(KvFileError::Missing)));
            assert!(other.is_empty());
            let _ = fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn every_truncation_and_byte_flip_is_rejected_and_deleted() {
        let dir = tmpdir("corrupt");
        let files = KvFileDir::new(&dir, 1 << 30);
        let c = cfg(2, 2, 4);
        let kv = filled(&c, KvDtype::F32, 5);
        let path = files.store(&key(), &kv).unwrap().path;
        let good = fs::read(&path).unwrap();
        let mut probe = KvCache::with_dtype(&c, 32, KvDtype::F32);
        // Every truncation point in the header and token ids, then a spread through the payload.
        let payload_at = payload_offset(IDS.len()).unwrap();
        let mut cuts: Vec<usize> = (0..payload_at + 8).collect();
        cuts.extend((payload_at..good.len()).step_by(37));
        cuts.push(good.len() - 1);
        for cut in cuts {
            fs::write(&path, &good[..cut]).unwrap();
            let r = files.load(&key(), &mut probe);
            assert!(matches!(r, Err(KvFileError::Corrupt { .. })), "cut at {cut}: {r:?}");
            assert!(!path.exists(), "a corrupt file is deleted (cut at {cut})");
            assert!(probe.is_empty());
        }
        // Any flipped byte (header, token ids, padding, payload): rejected, never loaded.
        for at in (0..good.len()).step_by(3).chain([good.len() - 1]) {
            let mut bad = good.clone();
            bad[at] ^= 0x5a;
            fs::write(&path, &bad).unwrap();
            let r = files.load(&key(), &mut probe);
            assert!(r.is_err(), "flip at {at} accepted");
            // A flip in the version field reads as another version (ignored, not deleted).
            let version_field = (8..12).contains(&at);
            assert_eq!(
                matches!(r, Err(KvFileError::Mismatch { .. })),
                version_field,
                "flip at {at}: {r:?}"
            );
            assert!(probe.is_empty());
        }
        // Extra trailing bytes.
        let mut long = good.clone();
        long.push(0);
        fs::write(&path, &long).unwrap();
        assert!(matches!(files.load(&key(), &mut probe), Err(KvFileError::Corrupt { .. })));
        fs::write(&path, &good).unwrap();
        files.load(&key(), &mut probe).unwrap();
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn mismatched_files_are_ignored_not_deleted() {
        let dir = tmpdir("mismatch");
        let files = KvFileDir::new(&dir, 1 << 30);
        let c = cfg(2, 2, 4);
        let kv = filled(&c, KvDtype::F32, 5);
        let path = files.store(&key(), &kv).unwrap().path;
        let mut probe = KvCache::with_dtype(&c, 32, KvDtype::F32);
        let cases: Vec<(&str, KvFileKey)> = vec![
            ("model", KvFileKey { model_hash: model_hash("other", "opts"), ..key() }),
            ("numeric mode", KvFileKey { model_hash: model_hash("m", "other opts"), ..key() }),
            ("token ids", KvFileKey { prefix_ids: &[7, 1, 99, 4, 13], ..key() }),
        ];
        for (what, k) in cases {
            assert!(
                matches!(files.load(&k, &mut probe), Err(KvFileError::Mismatch { .. })),
                "{what}"
            );
            assert!(path.exists());
        }
        // A file renamed to another fingerprint's name.
        let fp2 = Fingerprint::of("m", "other prefix");
        fs::copy(&path, files.path_for(&fp2, KvDtype::F32)).unwrap();
        assert!(matches!(
            files.load(&KvFileKey { fingerprint: fp2, ..key() }, &mut probe),
            Err(KvFileError::Mismatch { .. })
        ));
        // Other shapes: layers, heads, head size; too small a cache.
        for c2 in [cfg(3, 2, 4), cfg(2, 1, 4), cfg(2, 2, 8), cfg(2, 4, 2)] {
            let mut p = KvCache::with_dtype(&c2, 32, KvDtype::F32);
            assert!(
                matches!(files.load(&key(), &mut p), Err(KvFileError::Mismatch { .. })),
                "{c2:?}"
            );
        }
        let mut small = KvCache::with_dtype(&c, 4, KvDtype::F32);
        assert!(matches!(files.load(&key(), &mut small), Err(KvFileError::Mismatch { .. })));
        // Another dtype: a file written as f32 renamed to the f16 name.
        fs::copy(&path, files.path_for(&key().fingerprint, KvDtype::F16)).unwrap();
        let mut h = KvCache::with_dtype(&c, 32, KvDtype::F16);
        assert!(matches!(files.load(&key(), &mut h), Err(KvFileError::Mismatch { .. })));
        files.load(&key(), &mut probe).unwrap();
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn size_limit_evicts_least_recently_used() {
        let dir = tmpdir("evict");
        let c = cfg(2, 2, 4);
        let kv = filled(&c, KvDtype::F32, 5);
        let one = payload_offset(5).unwrap() as u64 + kv.prefix_bytes(5) as u64;
        let files = KvFileDir::new(&dir, 2 * one);
        let keys: Vec<Fingerprint> =
            (0..3).map(|i| Fingerprint::of("m", &format!("p{i}"))).collect();
        for (i, fp) in keys.iter().enumerate() {
            let s = files.store(&KvFileKey { fingerprint: *fp, ..key() }, &kv).unwrap();
            assert_eq!(s.evicted, usize::from(i == 2));
            // Distinct modification times even on coarse-grained file systems.
            let t = SystemTime::now() - Duration::from_secs(100 - 10 * i as u64);
            fs::File::options().write(true).open(&s.path).unwrap().set_modified(t).unwrap();
        }
        assert_eq!(files.stats().files, 2);
        assert!(!files.path_for(&keys[0], KvDtype::F32).exists(), "oldest evicted");
        let tiny = KvFileDir::new(&dir, one - 1);
        assert!(matches!(tiny.store(&key(), &kv), Err(KvFileError::TooLarge { .. })));
        let _ = fs::remove_dir_all(&dir);
    }
}
