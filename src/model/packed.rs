//! Packed K-quant weights file (`<model>.kx16`): every packable Q4_K, Q6_K and Q2_K matrix of a GGUF
//! model (but an untied token embedding, which is never multiplied) in the
//! `Q4_K×16` / `Q6_K×16` layouts of `kernels::packed` or the lookup-table layout `Q2_K×32` of
//! `kernels::lut` (a build older than the Q2_K entries refuses such a file as a bad entry and
//! runs unpacked), written once next to the model and shared read-only by
//! every process that maps it (the CLI, every PostgreSQL backend), like the model itself. Never a
//! private per-process copy (project rule, issue #4).
//!
//! Format (little-endian; version 2; version 1 held Q4_K matrices only):
//! ```text
//! offset  size  field
//! 0       8     magic "TIQ4KX16"
//! 8       4     format version (u32, = FORMAT_VERSION)
//! 12      4     number of entries (u32)
//! 16      8     source GGUF length in bytes (u64)
//! 24      8     source GGUF header length: start of its tensor data section (u64)
//! 32      8     FNV-1a 64 of the source bytes [0, header length): metadata + tensor table
//! 40      8     length of this file (u64)
//! 48      8     FNV-1a 64 of the entry table
//! 56      8     FNV-1a 64 of bytes [0, 56) of this header
//! 64      ...   entry table, one per packed tensor, in GGUF order:
//!                 name length u16, name (UTF-8), data offset u64 (absolute), data length u64,
//!                 sample hash of the source tensor u64, sample hash of the packed data u64
//! ...     ...   packed data: each tensor at a 64-byte aligned offset, exactly as long as in the
//!               GGUF (the layout is a byte permutation); the file ends with the last tensor
//! ```
//! A sample hash is FNV-1a 64 of the first 4 KiB followed by the last 4 KiB of a tensor's bytes:
//! the source sample refuses a different GGUF that happens to share the header, the packed sample
//! catches a damaged pack. Opening validates everything (magic, version, checksums, identity of
//! the source, every entry's name, type, shape, bounds, length and alignment), so a bad file is a
//! [`PackedError`], never a panic or a read outside the mapping.

use crate::fileio::{le, AtomicFile, MapError, MappedFile, Watch};
use crate::gguf::{GgufFile, TensorInfo};
use crate::kernels::packed::{pack, packable, PACK_ROWS};
use std::collections::HashMap;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// File magic (TurboInfer K-quants ×16; kept from version 1).
pub const MAGIC: [u8; 8] = *b"TIQ4KX16";
/// The format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 2;
/// The file name suffix appended to the model's file name.
pub const SUFFIX: &str = "kx16";
/// Bytes of the fixed header.
const HEADER: usize = 64;
/// Alignment of every packed tensor: one cache line / one 512-bit vector, so a kernel's 64-byte
/// loads of a packed block never straddle lines.
const ALIGN: u64 = 64;
/// Bytes hashed at each end of a tensor for its sample hash: one page, enough to tell two
/// different weight files apart while costing nothing at open.
const SAMPLE: usize = 4096;
/// Target bytes packed per write: large enough for efficient writes, small enough that packing
/// never holds more than this much in memory (one row group is at most ~80 KB on real models).
const CHUNK: usize = 1 << 20;
/// Bytes of an entry besides its name: name length u16 + four u64 fields.
const ENTRY_FIXED: usize = 2 + 4 * 8;
/// Longest tensor name accepted in an entry (GGUF allows 64 bytes; more means a corrupt table).
const MAX_NAME: usize = 256;

/// Everything that can be wrong with a packed weights file.
#[derive(Debug, thiserror::Error)]
pub enum PackedError {
    #[error("packed weights file {path} does not exist")]
    Missing { path: PathBuf },
    #[error("packed weights file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("packed weights file {path} is truncated: {file_len} bytes, needed {needed}")]
    Truncated { path: PathBuf, needed: u64, file_len: u64 },
    #[error("{path} is not a packed weights file (magic {found:02x?}, expected \"TIQ4KX16\")")]
    BadMagic { path: PathBuf, found: Vec<u8> },
    #[error("packed weights file {path} has format version {found}, this build reads version {FORMAT_VERSION} (re-create it with `turboinfer pack`)")]
    WrongVersion { path: PathBuf, found: u32 },
    #[error("packed weights file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("packed weights file {path} is stale (made from a different model file; re-create it with `turboinfer pack`): {reason}")]
    Stale { path: PathBuf, reason: String },
    #[error("packed weights file {path}: entry {name:?} (offset {offset}, {len} bytes) lies outside the file ({file_len} bytes)")]
    OutOfBounds { path: PathBuf, name: String, offset: u64, len: u64, file_len: u64 },
    #[error("packed weights file {path}: entry {name:?}: {reason}")]
    BadEntry { path: PathBuf, name: String, reason: String },
    #[error("model {path} has no packable Q4_K, Q6_K or Q2_K matrix (nothing to pack)")]
    NothingToPack { path: PathBuf },
    #[error("cannot write packed weights file {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Continues an FNV-1a 64 hash `h` over `bytes`.
fn fnv_more(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
    }
    h
}

/// FNV-1a 64 of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv_more(FNV_OFFSET, bytes)
}

/// The sample hash of a tensor's bytes: FNV-1a 64 of its first 4 KiB, then of its last 4 KiB.
fn sample_hash(b: &[u8]) -> u64 {
    let n = b.len().min(SAMPLE);
    fnv_more(fnv1a64(&b[..n]), &b[b.len() - n..])
}

/// The identity of a GGUF file a pack is bound to: its length, header length and header hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceId {
    pub len: u64,
    pub header_len: u64,
    pub header_hash: u64,
}

impl SourceId {
    /// The identity of `gguf` (hashes its header region: metadata and tensor table).
    pub fn of(gguf: &GgufFile) -> SourceId {
        let header_len = gguf.header().data_offset.min(gguf.len());
        SourceId {
            len: gguf.len(),
            header_len,
            header_hash: fnv1a64(&gguf.bytes()[..header_len as usize]),
        }
    }
}

/// The conventional pack path of a model: `<model file>.kx16`.
pub fn sidecar_path(model: &Path) -> PathBuf {
    let mut s = model.as_os_str().to_owned();
    s.push(".");
    s.push(SUFFIX);
    PathBuf::from(s)
}

/// `(rows, cols)` of a tensor the pack holds: a 2-D Q4_K, Q6_K or Q2_K tensor `packable` in
/// `kernels::packed`.
pub fn packable_shape(t: &TensorInfo) -> Option<(usize, usize)> {
    if t.dims.len() != 2 {
        return None;
    }
    let (cols, rows) = (usize::try_from(t.dims[0]).ok()?, usize::try_from(t.dims[1]).ok()?);
    packable(t.ty, rows, cols).then_some((rows, cols))
}

/// Whether `write` packs `t`: every packable matrix except an untied token embedding (with an
/// `output.weight` present, the embedding is only read row by row, never multiplied).
pub fn worth_packing(gguf: &GgufFile, t: &TensorInfo) -> bool {
    packable_shape(t).is_some()
        && !(t.name == "token_embd.weight" && gguf.tensor("output.weight").is_some())
}

/// Rounds `x` up to the packed-data alignment (None on overflow).
fn align_up(x: u64) -> Option<u64> {
    x.checked_add(ALIGN - 1).map(|v| v / ALIGN * ALIGN)
}

/// One packed tensor: where its packed bytes are in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedEntry {
    pub name: String,
    /// Absolute offset of the packed bytes (64-byte aligned).
    pub offset: u64,
    /// Length in bytes (the tensor's size in the GGUF).
    pub len: u64,
    /// Sample hash of the source tensor's bytes.
    pub source_sample: u64,
    /// Sample hash of the packed bytes.
    pub packed_sample: u64,
}

impl PackedEntry {
    /// The entry's serialized form (see the module doc).
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.name.len() as u16).to_le_bytes());
        out.extend_from_slice(self.name.as_bytes());
        for v in [self.offset, self.len, self.source_sample, self.packed_sample] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// What `write` produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteSummary {
    pub path: PathBuf,
    /// Packed tensors.
    pub tensors: usize,
    /// Length of the file.
    pub bytes: u64,
}

/// The 64-byte header for `src`, `n` entries, the table's hash and the file's length.
fn encode_header(src: SourceId, n: u32, table_hash: u64, file_len: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&n.to_le_bytes());
    h[16..24].copy_from_slice(&src.len.to_le_bytes());
    h[24..32].copy_from_slice(&src.header_len.to_le_bytes());
    h[32..40].copy_from_slice(&src.header_hash.to_le_bytes());
    h[40..48].copy_from_slice(&file_len.to_le_bytes());
    h[48..56].copy_from_slice(&table_hash.to_le_bytes());
    let hh = fnv1a64(&h[..56]);
    h[56..64].copy_from_slice(&hh.to_le_bytes());
    h
}

/// Writes the pack of `gguf` to `out`: streams one chunk of row groups at a time into a temporary
/// file in the same directory, fsyncs it, makes it world-readable (0644) and renames it over `out`.
pub fn write(gguf: &GgufFile, out: &Path) -> Result<WriteSummary, PackedError> {
    let todo: Vec<(&TensorInfo, usize, usize)> = gguf
        .tensors()
        .iter()
        .filter(|t| worth_packing(gguf, t))
        .filter_map(|t| packable_shape(t).map(|(r, c)| (t, r, c)))
        .collect();
    if todo.is_empty() {
        return Err(PackedError::NothingToPack { path: gguf.path().to_path_buf() });
    }
    let werr = |source| PackedError::Write { path: out.to_path_buf(), source };
    let bad = |reason: String| werr(std::io::Error::new(std::io::ErrorKind::InvalidInput, reason));
    // Layout first: the table's size only depends on the names.
    let mut table_len = 0u64;
    for (t, ..) in &todo {
        if t.name.is_empty() || t.name.len() > MAX_NAME {
            return Err(bad(format!("tensor name {:?} is not 1..={MAX_NAME} bytes", t.name)));
        }
        table_len += (ENTRY_FIXED + t.name.len()) as u64;
    }
    let mut entries = Vec::with_capacity(todo.len());
    let mut at =
        align_up(HEADER as u64 + table_len).ok_or_else(|| bad("layout overflows".into()))?;
    for (t, ..) in &todo {
        entries.push(PackedEntry {
            name: t.name.clone(),
            offset: at,
            len: t.size,
            source_sample: 0,
            packed_sample: 0,
        });
        at = at
            .checked_add(t.size)
            .and_then(align_up)
            .ok_or_else(|| bad("layout overflows".into()))?;
    }
    let file_len = entries.last().map(|e| e.offset + e.len).unwrap_or(HEADER as u64);

    // Readable by every user (the postgres OS user reads packs root wrote).
    let mut file = AtomicFile::create(out, Some(0o644), ".tmp").map_err(werr)?;
    let tmp = file.temp_path().to_path_buf();
    let terr = |source| PackedError::Write { path: tmp.clone(), source };
    let mut w = BufWriter::with_capacity(CHUNK, file.file());
    // Header and table are written last (they hold the packed samples); zeros for now.
    let mut pos = 0u64;
    let mut buf = Vec::new();
    for ((t, rows, cols), e) in todo.iter().zip(entries.iter_mut()) {
        let pad = (e.offset - pos) as usize;
        w.write_all(&vec![0u8; pad]).map_err(terr)?;
        let src = gguf.data_of(t);
        e.source_sample = sample_hash(src);
        let group = src.len() / (rows / PACK_ROWS);
        let per_chunk = (CHUNK / group).max(1) * group;
        let (mut head, mut tail) = (Vec::with_capacity(SAMPLE), Vec::with_capacity(2 * SAMPLE));
        for s in src.chunks(per_chunk) {
            buf.resize(s.len(), 0);
            pack(t.ty, s.len() / group * PACK_ROWS, *cols, s, &mut buf);
            w.write_all(&buf).map_err(terr)?;
            let need = SAMPLE - head.len();
            head.extend_from_slice(&buf[..need.min(buf.len())]);
            tail.extend_from_slice(&buf[buf.len().saturating_sub(SAMPLE)..]);
            let excess = tail.len().saturating_sub(SAMPLE);
            tail.drain(..excess);
        }
        e.packed_sample = fnv_more(fnv1a64(&head), &tail);
        pos = e.offset + e.len;
    }
    let f = w.into_inner().map_err(|e| terr(e.into_error()))?;
    let mut table = Vec::with_capacity(table_len as usize);
    for e in &entries {
        e.encode(&mut table);
    }
    let header = encode_header(SourceId::of(gguf), entries.len() as u32, fnv1a64(&table), file_len);
    f.seek(SeekFrom::Start(0)).map_err(terr)?;
    f.write_all(&header).map_err(terr)?;
    f.write_all(&table).map_err(terr)?;
    file.commit().map_err(werr)?;
    Ok(WriteSummary { path: out.to_path_buf(), tensors: entries.len(), bytes: file_len })
}

/// An open, validated pack: a read-only shared mapping plus its entry table.
pub struct PackedFile {
    /// The watched mapping (what [`PackedFile`] dereferences to: path, bytes, length, `changed`).
    map: MappedFile,
    source: SourceId,
    entries: Vec<PackedEntry>,
    by_name: HashMap<String, usize>,
}

/// A pack is a validated mapping plus its entry table: the mapping's accessors are the pack's
/// (see [`GgufFile`]'s).
impl std::ops::Deref for PackedFile {
    type Target = MappedFile;

    fn deref(&self) -> &MappedFile {
        &self.map
    }
}

impl std::fmt::Debug for PackedFile {
    /// Short summary (the data is not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackedFile")
            .field("path", &self.path())
            .field("len", &self.len())
            .field("entries", &self.entries.len())
            .finish()
    }
}

impl PackedFile {
    /// Maps `path` read-only and shared and validates it completely against `gguf`, the model it
    /// must have been made from.
    pub fn open(path: impl AsRef<Path>, gguf: &GgufFile) -> Result<PackedFile, PackedError> {
        let path = path.as_ref().to_path_buf();
        // Non-blocking, regular files only, no symlink followed (packs are written by rename).
        let links = crate::fileio::regular_file::Links::Refuse;
        let map = match MappedFile::open(&path, links, HEADER as u64, &MAGIC, Watch::Yes) {
            Ok(m) => m,
            Err(MapError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(PackedError::Missing { path })
            }
            Err(MapError::Io(source)) => return Err(PackedError::Io { path, source }),
            // Still tell a foreign file from a short pack.
            Err(MapError::Short { head, .. })
                if head.len() >= MAGIC.len() && head[..8] != MAGIC =>
            {
                return Err(PackedError::BadMagic { path, found: head[..8].to_vec() })
            }
            Err(MapError::Short { len, .. }) => {
                return Err(PackedError::Truncated { path, needed: HEADER as u64, file_len: len })
            }
            Err(MapError::Magic { found }) => return Err(PackedError::BadMagic { path, found }),
        };
        // Validation reads the entry table and 4 KiB at both ends of every tensor in both files:
        // without read-around (see `MappedFile::scattered`).
        let (entries, source) = {
            let _scattered = (map.scattered(), gguf.scattered());
            parse(&path, map.bytes(), gguf)?
        };
        let by_name = entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Ok(PackedFile { map, source, entries, by_name })
    }

    /// The identity of the GGUF this pack was made from.
    pub fn source(&self) -> SourceId {
        self.source
    }

    /// Whether this pack was made from `gguf` (same length and header hash).
    pub fn matches(&self, gguf: &GgufFile) -> bool {
        gguf.len() == self.source.len && SourceId::of(gguf) == self.source
    }

    /// The packed tensors, in file order.
    pub fn entries(&self) -> &[PackedEntry] {
        &self.entries
    }

    /// The entry of tensor `name`, if packed.
    pub fn entry(&self, name: &str) -> Option<&PackedEntry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// The packed bytes of an entry of this file (its range was validated at open).
    pub fn data_of(&self, e: &PackedEntry) -> &[u8] {
        &self.bytes()[e.offset as usize..(e.offset + e.len) as usize]
    }
}

/// Validates a mapped pack against `gguf`; returns its entries and source identity.
fn parse(
    path: &Path,
    b: &[u8],
    gguf: &GgufFile,
) -> Result<(Vec<PackedEntry>, SourceId), PackedError> {
    let p = || path.to_path_buf();
    let corrupt = |reason: String| PackedError::Corrupt { path: p(), reason };
    let file_len = b.len() as u64;
    // The header's fields (the caller checked that the file holds a whole header).
    let truncated = || PackedError::Truncated { path: p(), needed: HEADER as u64, file_len };
    let u32_at = |at| le::u32_at(b, at).ok_or_else(truncated);
    let u64_at = |at| le::u64_at(b, at).ok_or_else(truncated);
    if b.len() < HEADER {
        return Err(truncated());
    }
    if b[0..8] != MAGIC {
        return Err(PackedError::BadMagic { path: p(), found: b[0..8].to_vec() });
    }
    let version = u32_at(8)?;
    if fnv1a64(&b[..56]) != u64_at(56)? {
        // A newer or older format may lay the header out differently: report the version if it differs.
        if version != FORMAT_VERSION {
            return Err(PackedError::WrongVersion { path: p(), found: version });
        }
        return Err(corrupt("header checksum mismatch".into()));
    }
    if version != FORMAT_VERSION {
        return Err(PackedError::WrongVersion { path: p(), found: version });
    }
    let n = u32_at(12)? as usize;
    let source = SourceId { len: u64_at(16)?, header_len: u64_at(24)?, header_hash: u64_at(32)? };
    let want_len = u64_at(40)?;
    if file_len < want_len {
        return Err(PackedError::Truncated { path: p(), needed: want_len, file_len });
    }
    if file_len > want_len {
        return Err(corrupt(format!("file has {file_len} bytes, its header says {want_len}")));
    }
    // Identity of the source before the entries: a stale pack is the common case.
    if source.len != gguf.len() {
        return Err(PackedError::Stale {
            path: p(),
            reason: format!(
                "made from a model file of {} bytes, {} has {}",
                source.len,
                gguf.path().display(),
                gguf.len()
            ),
        });
    }
    let here = SourceId::of(gguf);
    if source != here {
        return Err(PackedError::Stale {
            path: p(),
            reason: format!(
                "model header hash {:016x} differs from the pack's {:016x} ({})",
                here.header_hash,
                source.header_hash,
                gguf.path().display()
            ),
        });
    }
    if n == 0 || n > gguf.tensors().len() {
        return Err(corrupt(format!(
            "{n} entries for a model of {} tensors",
            gguf.tensors().len()
        )));
    }
    // The table.
    let mut at = HEADER;
    let mut entries: Vec<PackedEntry> = Vec::with_capacity(n);
    for i in 0..n {
        let short = || corrupt(format!("entry table ends inside entry {i}"));
        let nl = b.get(at..at + 2).ok_or_else(short)?;
        let nl = u16::from_le_bytes([nl[0], nl[1]]) as usize;
        if nl == 0 || nl > MAX_NAME {
            return Err(corrupt(format!("entry {i} has a name of {nl} bytes")));
        }
        let end = at + ENTRY_FIXED + nl;
        if end > b.len() {
            return Err(short());
        }
        let name = std::str::from_utf8(&b[at + 2..at + 2 + nl])
            .map_err(|_| corrupt(format!("entry {i} name is not UTF-8")))?
            .to_string();
        let f = at + 2 + nl;
        let field = |k: usize| le::u64_at(b, f + 8 * k).ok_or_else(short);
        entries.push(PackedEntry {
            name,
            offset: field(0)?,
            len: field(1)?,
            source_sample: field(2)?,
            packed_sample: field(3)?,
        });
        at = end;
    }
    if fnv1a64(&b[HEADER..at]) != u64_at(48)? {
        return Err(corrupt("entry table checksum mismatch".into()));
    }
    // Every entry.
    let mut seen = HashMap::with_capacity(n);
    let mut prev_end = at as u64;
    for e in &entries {
        let bad =
            |reason: String| PackedError::BadEntry { path: p(), name: e.name.clone(), reason };
        if seen.insert(e.name.as_str(), ()).is_some() {
            return Err(bad("listed twice".into()));
        }
        let t = gguf.tensor(&e.name).ok_or_else(|| {
            bad(format!("the model {} has no such tensor", gguf.path().display()))
        })?;
        let (_rows, _cols) = packable_shape(t.info).ok_or_else(|| {
            bad(format!(
                "tensor type {} shape {:?} is not a packable Q4_K/Q6_K matrix",
                t.info.ty, t.info.dims
            ))
        })?;
        let end = e.offset.checked_add(e.len);
        if end.is_none_or(|end| end > file_len) {
            return Err(PackedError::OutOfBounds {
                path: p(),
                name: e.name.clone(),
                offset: e.offset,
                len: e.len,
                file_len,
            });
        }
        if e.len != t.info.size {
            return Err(bad(format!("{} bytes, the tensor has {}", e.len, t.info.size)));
        }
        if e.offset % ALIGN != 0 {
            return Err(bad(format!("offset {} is not {ALIGN}-byte aligned", e.offset)));
        }
        if e.offset < prev_end {
            return Err(bad(format!(
                "offset {} overlaps the table or the previous entry (ends at {prev_end})",
                e.offset
            )));
        }
        prev_end = e.offset + e.len;
        if sample_hash(t.data) != e.source_sample {
            return Err(PackedError::Stale {
                path: p(),
                reason: format!("the weights of {:?} differ from the ones packed", e.name),
            });
        }
        if sample_hash(&b[e.offset as usize..prev_end as usize]) != e.packed_sample {
            return Err(bad("packed data checksum mismatch (damaged file)".into()));
        }
    }
    Ok((entries, source))
}

/// Whether packed weights are in use for a model, and if not why (reported by the CLI's `info`,
/// `nl2sql_explain` and `turboinfer_bench()`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PackStatus {
    /// No pack file next to the model (or none looked for).
    #[default]
    None,
    /// A valid pack is attached to `matrices` matrices of `bytes` bytes in total.
    Attached { path: PathBuf, matrices: usize, bytes: u64 },
    /// A pack file exists but was not used; the model runs unpacked.
    Ignored { path: PathBuf, reason: String },
}

impl std::fmt::Display for PackStatus {
    /// `kx16 (N matrices)` | `none` | `ignored: <reason>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PackStatus::None => write!(f, "none"),
            PackStatus::Attached { matrices, .. } => {
                write!(f, "kx16 ({matrices} matrices)")?;
                if crate::kernels::try_kernels().ok().and_then(|k| k.packed_q4_k()).is_none() {
                    write!(f, ", unused: no packed kernel on this kernel tier")?;
                }
                Ok(())
            }
            PackStatus::Ignored { reason, .. } => write!(f, "ignored: {reason}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a 64 matches the published test vectors.
    #[test]
    fn fnv_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// The sidecar path appends the suffix to the whole file name.
    #[test]
    fn sidecar_path_appends_suffix() {
        assert_eq!(sidecar_path(Path::new("/m/qwen.gguf")), PathBuf::from("/m/qwen.gguf.kx16"));
    }

    /// Alignment rounds up and refuses overflow.
    #[test]
    fn align_rounds_up() {
        assert_eq!(align_up(0), Some(0));
        assert_eq!(align_up(1), Some(64));
        assert_eq!(align_up(128), Some(128));
        assert_eq!(align_up(u64::MAX), None);
    }

    /// A header round-trips its checksum.
    #[test]
    fn header_checksum() {
        let h = encode_header(SourceId { len: 1, header_len: 2, header_hash: 3 }, 4, 5, 6);
        assert_eq!(&h[..8], &MAGIC);
        assert_eq!(Some(fnv1a64(&h[..56])), crate::fileio::le::u64_at(&h, 56));
    }
}
