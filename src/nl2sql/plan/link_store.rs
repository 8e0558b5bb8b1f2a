//! Table embeddings on disk (`link.rs`), shared by every backend: a table embedded once is read
//! back by the next backend (or after a restart) instead of embedded again, the cold cost of
//! schema linking on thousands of tables.
//!
//! One append-only file per encoder in the schema-prefix cache directory (the superuser's
//! `turboinfer.cache_dir`, mode 0700), `link-<encoder>.emb`:
//!
//! ```text
//! header  24 bytes: "TILINK01", dim u32, 0 u32, encoder tag u64 (FNV-1a 64 of its config.json,
//!                   then the model file's length: another encoder under the same name is
//!                   another file's business)
//! record  16 + 4·dim bytes: key u64 (FNV-1a 64 of the table's description), CRC-32 u32 of the
//!                   values, 0 u32, dim × f32, all little-endian
//! ```
//!
//! Records are appended with one `write` per batch on a file opened `O_APPEND` (concurrent
//! appenders do not interleave within a write on a local file system). A reader keeps the
//! records up to the first damaged or partial one and cuts the file there (what a crash in the
//! middle of an append leaves). A file beyond its size limit, or with another header, is started
//! afresh. Nothing here is an error for the caller: without the file, tables are embedded.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file's magic.
const MAGIC: &[u8; 8] = b"TILINK01";
/// Header bytes.
const HEADER: usize = 24;
/// Bytes of a record before its values.
const RECORD_HEAD: usize = 16;

/// The embeddings file of one encoder.
#[derive(Debug, Clone)]
pub struct LinkStore {
    path: PathBuf,
    dim: usize,
    tag: u64,
    max_bytes: u64,
}

impl LinkStore {
    /// The file of encoder `name` (a plain name: `embed::resolve_dir` checked it) in `dir`, for
    /// `dim`-value embeddings of the encoder identified by `tag`, at most `max_bytes` long.
    pub fn new(dir: &Path, name: &str, dim: usize, tag: u64, max_bytes: u64) -> LinkStore {
        LinkStore { path: dir.join(format!("link-{name}.emb")), dim, tag, max_bytes }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn header(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[..8].copy_from_slice(MAGIC);
        h[8..12].copy_from_slice(&(self.dim as u32).to_le_bytes());
        h[16..24].copy_from_slice(&self.tag.to_le_bytes());
        h
    }

    fn record_bytes(&self) -> usize {
        RECORD_HEAD + 4 * self.dim
    }

    /// The embeddings in the file (empty when there is none, or it is another encoder's or too
    /// large); a damaged tail is cut off.
    pub fn load(&self) -> HashMap<u64, Vec<f32>> {
        let mut out = HashMap::new();
        let Ok(mut f) = fs::File::open(&self.path) else { return out };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        if len > self.max_bytes {
            return out;
        }
        let mut bytes = Vec::new();
        if f.read_to_end(&mut bytes).is_err()
            || bytes.len() < HEADER
            || bytes[..HEADER] != self.header()
        {
            return out;
        }
        let rb = self.record_bytes();
        let mut good = HEADER;
        for r in bytes[HEADER..].chunks_exact(rb) {
            let key = u64::from_le_bytes(r[..8].try_into().expect("8 bytes"));
            let crc = u32::from_le_bytes(r[8..12].try_into().expect("4 bytes"));
            if crc32fast::hash(&r[RECORD_HEAD..]) != crc {
                break;
            }
            let v = r[RECORD_HEAD..]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect();
            out.insert(key, v);
            good += rb;
        }
        if good < bytes.len() {
            // A partial or damaged record (a crash mid-append): appends continue after the last
            // good one.
            let _ = OpenOptions::new()
                .write(true)
                .open(&self.path)
                .and_then(|f| f.set_len(good as u64));
        }
        out
    }

    /// Appends `records` (key, embedding of `dim` values) in one write, creating the directory
    /// (0700) and the file (0600) as needed; a file that would outgrow its limit, or holds
    /// another header, is started afresh.
    pub fn append(&self, records: &[(u64, &[f32])]) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(records.len() * self.record_bytes());
        for (key, v) in records {
            assert_eq!(v.len(), self.dim, "an embedding of the store's dimension");
            let start = buf.len();
            buf.extend_from_slice(&key.to_le_bytes());
            buf.extend_from_slice(&[0u8; 8]);
            for x in v.iter() {
                buf.extend_from_slice(&x.to_le_bytes());
            }
            let crc = crc32fast::hash(&buf[start + RECORD_HEAD..]);
            buf[start + 8..start + 12].copy_from_slice(&crc.to_le_bytes());
        }
        if let Some(dir) = self.path.parent() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        let len = fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        let fresh =
            len < HEADER as u64 || len + buf.len() as u64 > self.max_bytes || !self.has_header();
        if fresh {
            if (HEADER + buf.len()) as u64 > self.max_bytes {
                return Ok(());
            }
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&self.path)?;
            let mut all = self.header().to_vec();
            all.extend_from_slice(&buf);
            return f.write_all(&all);
        }
        let mut f = OpenOptions::new().append(true).mode(0o600).open(&self.path)?;
        f.write_all(&buf)
    }

    /// Whether the file starts with this store's header.
    fn has_header(&self) -> bool {
        let mut h = [0u8; HEADER];
        fs::File::open(&self.path).and_then(|mut f| f.read_exact(&mut h)).is_ok()
            && h == self.header()
    }
}

/// Removes every embeddings file in `dir` (`turboinfer_cache_clear`); returns how many.
pub fn clear(dir: &Path) -> usize {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    rd.filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("link-") && n.ends_with(".emb")
        })
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("turboinfer-linkstore-{name}-{}", std::process::id()))
    }

    #[test]
    fn records_come_back_and_a_torn_tail_is_cut() {
        let d = dir("roundtrip");
        let s = LinkStore::new(&d, "enc", 3, 7, 1 << 20);
        assert!(s.load().is_empty());
        s.append(&[(1, &[0.5, -1.0, 2.0][..]), (2, &[1.0, 0.0, 0.0][..])]).unwrap();
        s.append(&[(3, &[0.0, 0.0, 1.0][..])]).unwrap();
        let m = s.load();
        assert_eq!(m.len(), 3);
        assert_eq!(m[&1], [0.5, -1.0, 2.0]);
        // A crash mid-append: half a record at the end.
        let mut f = OpenOptions::new().append(true).open(s.path()).unwrap();
        f.write_all(&[9u8; 10]).unwrap();
        assert_eq!(s.load().len(), 3);
        let len = fs::metadata(s.path()).unwrap().len();
        assert_eq!(len, (HEADER + 3 * s.record_bytes()) as u64, "the tail was cut");
        s.append(&[(4, &[1.0, 1.0, 1.0][..])]).unwrap();
        assert_eq!(s.load().len(), 4, "appends continue after the last good record");
        // A flipped value bit ends the good records there.
        let mut bytes = fs::read(s.path()).unwrap();
        bytes[HEADER + s.record_bytes() + RECORD_HEAD] ^= 1;
        fs::write(s.path(), &bytes).unwrap();
        assert_eq!(s.load().len(), 1);
        // Another encoder under the same name (another tag): started afresh.
        let other = LinkStore::new(&d, "enc", 3, 8, 1 << 20);
        assert!(other.load().is_empty());
        other.append(&[(5, &[1.0, 2.0, 3.0][..])]).unwrap();
        assert_eq!(other.load().len(), 1);
        assert!(s.load().is_empty());
        // The size limit: a store that would outgrow it starts over.
        let small = LinkStore::new(&d, "small", 3, 7, (HEADER + 2 * (RECORD_HEAD + 12)) as u64);
        small.append(&[(1, &[1.0, 1.0, 1.0][..]), (2, &[2.0, 2.0, 2.0][..])]).unwrap();
        small.append(&[(3, &[3.0, 3.0, 3.0][..])]).unwrap();
        assert_eq!(small.load().keys().copied().collect::<Vec<_>>(), [3]);
        assert_eq!(clear(&d), 2, "both encoders' files");
        assert!(s.load().is_empty() && clear(&d) == 0);
        fs::remove_dir_all(&d).unwrap();
    }
}
