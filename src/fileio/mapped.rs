//! The one way the engine maps a file it reads in place: a read-only shared mapping of a regular
//! file, opened without blocking ([`crate::fileio::regular_file`]), whose length (and magic) is
//! checked before any byte is read, optionally watched for changes under it
//! ([`crate::fileio::mapguard`]).

use crate::fileio::mapguard::MapWatch;
use crate::fileio::regular_file::{self, Links};
use memmap2::{Advice, Mmap, UncheckedAdvice};
use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Whether a mapping is watched for faults and in-place rewrites (see [`crate::fileio::mapguard`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Watched: long-lived mappings read by every forward pass (models, packs).
    Yes,
    /// Not watched: the file stays open for [`MappedFile::file`].
    No,
}

/// Why [`MappedFile::open`] refused a file.
#[derive(Debug)]
pub enum MapError {
    /// Opening, inspecting or mapping it failed (`NotFound` for a missing file; a FIFO, device,
    /// directory or refused symbolic link is `InvalidInput`, see [`crate::fileio::regular_file`]).
    Io(io::Error),
    /// Shorter than the minimum length: `len` bytes, of which `head` are the first (up to 16).
    Short { len: u64, head: Vec<u8> },
    /// Long enough, but it does not start with the expected magic: `found` is its start.
    Magic { found: Vec<u8> },
}

/// How many leading bytes a [`MapError::Short`] carries: enough for any of the engine's magics.
const HEAD: u64 = 16;

/// A mapping read in scattered pieces, see [`MappedFile::scattered`]; restores the kernel's
/// default read-around when dropped.
pub struct Scattered<'a>(&'a MappedFile);

impl Drop for Scattered<'_> {
    fn drop(&mut self) {
        let _ = self.0.map.advise(Advice::Normal);
    }
}

/// The piece of a range one read-ahead call asks for: 128 KiB, the smallest per-call limit Linux
/// can have (the default `read_ahead_kb`), so no part of a piece is dropped on any device. The
/// calls cost the same in total whatever the piece (measured: 934 MiB advised in 93 ms with
/// 128 KiB pieces, 98 ms with 512 KiB; the page allocation dominates), and the reads they queue
/// merge in the block layer.
pub const WILL_NEED_CHUNK: usize = 128 << 10;

/// A read-only shared mapping of a regular file, validated at open.
pub struct MappedFile {
    path: PathBuf,
    /// Watches `map` (declared first: released before the mapping is unmapped).
    watch: Option<MapWatch>,
    /// The open file, when not watched (a watch keeps it itself).
    file: Option<File>,
    map: Mmap,
}

impl std::fmt::Debug for MappedFile {
    /// The length only (the data is not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedFile")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .finish()
    }
}

impl MappedFile {
    /// Opens `path` without blocking (symbolic links as `links` says), refuses anything but a
    /// regular file, one shorter than `min_len` bytes (before mapping it) and one that does not
    /// start with `magic` (empty: not checked), and maps it read-only and shared.
    pub fn open(
        path: &Path,
        links: Links,
        min_len: u64,
        magic: &[u8],
        watch: Watch,
    ) -> Result<MappedFile, MapError> {
        let file = regular_file::open(path, links).map_err(MapError::Io)?;
        let len = file.metadata().map_err(MapError::Io)?.len();
        if len < min_len.max(magic.len() as u64) {
            let mut head = Vec::new();
            let _ = (&file).take(HEAD.min(len)).read_to_end(&mut head);
            return Err(MapError::Short { len, head });
        }
        // SAFETY: a read-only mapping of a file the engine never writes in place (its files are
        // replaced by rename). Another process could still truncate it while mapped, which no one
        // can prevent: a watched mapping turns the fault into `changed()`, and every range a
        // reader hands out is checked against the length validated here.
        let map = unsafe { Mmap::map(&file) }.map_err(MapError::Io)?;
        if !map.starts_with(magic) {
            return Err(MapError::Magic { found: map[..magic.len()].to_vec() });
        }
        Ok(match watch {
            Watch::Yes => MappedFile {
                path: path.to_path_buf(),
                watch: Some(MapWatch::new(file, &map)),
                file: None,
                map,
            },
            Watch::No => {
                MappedFile { path: path.to_path_buf(), watch: None, file: Some(file), map }
            }
        })
    }

    /// The file this was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The whole mapped file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Length of the file in bytes.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// True for an empty mapping (never, for a file with a minimum length).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Asks the kernel to start reading `range` of the file into the page cache now
    /// (`madvise(MADV_WILLNEED)`, asynchronous: it queues the reads and returns). Advice only:
    /// a range outside the file, or a kernel that refuses, changes nothing and is not an error.
    ///
    /// The range is advised in pieces of [`WILL_NEED_CHUNK`]: Linux reads at most
    /// `max(read_ahead_kb, max_sectors_kb)` per call and silently drops the rest (one call over
    /// 200 MiB read 8 MiB here), so one call per piece is what makes it read the whole range.
    pub fn will_need(&self, range: Range<usize>) {
        let end = range.end.min(self.map.len());
        let mut at = range.start;
        while at < end {
            let len = WILL_NEED_CHUNK.min(end - at);
            if self.map.advise_range(Advice::WillNeed, at, len).is_err() {
                return;
            }
            at += len;
        }
    }

    /// Turns off the kernel's read-around for faults in this mapping until the returned guard is
    /// dropped (`MADV_RANDOM`, then `MADV_NORMAL`). For reading scattered small pieces (norm
    /// vectors, the sample hashes at both ends of every tensor): otherwise each piece's first
    /// touch reads a whole read-ahead window around it (`read_ahead_kb`, 128 KiB by default,
    /// 8 MiB on the VMs measured here, where loading the 1.5B model read 1.3 GB of its two files
    /// for a few hundred KiB of norms and hashes). Advice only.
    pub fn scattered(&self) -> Scattered<'_> {
        let _ = self.map.advise(Advice::Random);
        Scattered(self)
    }

    /// With `random`, turns off the kernel's read-around for faults in `range` for as long as
    /// the mapping lives (`MADV_RANDOM`): for a region only ever read a row at a time (token
    /// embeddings). Without, restores the default (`MADV_NORMAL`).
    pub fn random_access(&self, range: Range<usize>, random: bool) {
        let end = range.end.min(self.map.len());
        if range.start < end {
            let advice = if random { Advice::Random } else { Advice::Normal };
            let _ = self.map.advise_range(advice, range.start, end - range.start);
        }
    }

    /// Gives `range` of the file back: drops this process's page-table entries for it
    /// (`madvise(MADV_DONTNEED)`) and asks the kernel to evict its pages from the page cache
    /// (`posix_fadvise(POSIX_FADV_DONTNEED)`, which leaves pages another process still maps). The
    /// next read of the range faults the same bytes back in from the file. Advice only, like
    /// [`MappedFile::will_need`].
    pub fn drop_behind(&self, range: Range<usize>) {
        let end = range.end.min(self.map.len());
        if range.start >= end {
            return;
        }
        // SAFETY: a shared, read-only mapping of a file: MADV_DONTNEED only unmaps its pages, and
        // the next access maps the file's (unchanged) bytes again, so no reference into the
        // mapping sees different data.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                UncheckedAdvice::DontNeed,
                range.start,
                end - range.start,
            )
        };
        let file = self.watch.as_ref().map(MapWatch::file).or(self.file.as_ref());
        if let Some(f) = file {
            // SAFETY: plain system call on an open descriptor; it only drops cached pages.
            unsafe {
                libc::posix_fadvise(
                    f.as_raw_fd(),
                    range.start as libc::off_t,
                    (end - range.start) as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                );
            }
        }
    }

    /// The open file of an unwatched mapping (`None` when watched).
    pub fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// True when a watched file changed under the mapping (a read past a new end, which read
    /// zeros, or a new size or modification time: what was read from it may be garbage; see
    /// [`MapWatch::changed`]); never for an unwatched one.
    pub fn changed(&self) -> bool {
        self.watch.as_ref().is_some_and(MapWatch::changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A file with `bytes` under the system temporary directory, removed at drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(tag: &str, bytes: &[u8]) -> TempFile {
            let p = std::env::temp_dir().join(format!(
                "turboinfer-mapped-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::write(&p, bytes).unwrap();
            TempFile(p)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// A valid file maps; its bytes are the file's.
    #[test]
    fn maps_a_valid_file() {
        let f = TempFile::new("ok", b"MAGICpayload");
        for watch in [Watch::Yes, Watch::No] {
            let m = MappedFile::open(&f.0, Links::Refuse, 8, b"MAGIC", watch).unwrap();
            assert_eq!(m.bytes(), b"MAGICpayload");
            assert_eq!(m.file().is_some(), watch == Watch::No);
            assert!(!m.changed());
        }
    }

    /// Read-ahead and drop-behind advice over any range, inside the file or not, is accepted and
    /// changes no byte read through the mapping.
    #[test]
    fn advice_changes_no_byte() {
        let f = TempFile::new("advice", b"MAGICpayload");
        for watch in [Watch::Yes, Watch::No] {
            let m = MappedFile::open(&f.0, Links::Refuse, 0, b"MAGIC", watch).unwrap();
            #[allow(clippy::reversed_empty_ranges)] // an empty range is advice too
            let ranges = [0..12, 3..5, 5..3, 10..1 << 20, 1 << 20..2 << 20];
            for r in ranges {
                let scattered = m.scattered();
                m.random_access(r.clone(), true);
                m.random_access(r.clone(), false);
                assert_eq!(m.bytes(), b"MAGICpayload");
                drop(scattered);
                m.will_need(r.clone());
                assert_eq!(m.bytes(), b"MAGICpayload");
                m.drop_behind(r);
                assert_eq!(m.bytes(), b"MAGICpayload", "the bytes fault back in unchanged");
            }
            assert!(!m.changed());
        }
    }

    /// A short, truncated or empty file is an error carrying its start, not a panic.
    #[test]
    fn a_short_file_is_an_error() {
        let f = TempFile::new("short", b"MAG");
        match MappedFile::open(&f.0, Links::Refuse, 8, b"", Watch::No) {
            Err(MapError::Short { len: 3, head }) => assert_eq!(head, b"MAG"),
            other => panic!("{other:?}"),
        }
        // Shorter than the magic itself, with no minimum length.
        match MappedFile::open(&f.0, Links::Refuse, 0, b"MAGIC", Watch::No) {
            Err(MapError::Short { len: 3, .. }) => {}
            other => panic!("{other:?}"),
        }
        let empty = TempFile::new("empty", b"");
        match MappedFile::open(&empty.0, Links::Follow, 1, b"", Watch::Yes) {
            Err(MapError::Short { len: 0, head }) => assert!(head.is_empty()),
            other => panic!("{other:?}"),
        }
    }

    /// A wrong magic is an error naming what was found.
    #[test]
    fn a_wrong_magic_is_an_error() {
        let f = TempFile::new("magic", b"OTHER-file");
        match MappedFile::open(&f.0, Links::Refuse, 4, b"MAGIC", Watch::No) {
            Err(MapError::Magic { found }) => assert_eq!(found, b"OTHER"),
            other => panic!("{other:?}"),
        }
    }

    /// A missing file is `NotFound`; a directory is refused, not mapped.
    #[test]
    fn missing_and_non_regular_files_are_io_errors() {
        let missing = std::env::temp_dir().join("turboinfer-mapped-no-such-file");
        match MappedFile::open(&missing, Links::Refuse, 0, b"", Watch::No) {
            Err(MapError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::NotFound),
            other => panic!("{other:?}"),
        }
        match MappedFile::open(&std::env::temp_dir(), Links::Follow, 0, b"", Watch::No) {
            Err(MapError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::InvalidInput),
            other => panic!("{other:?}"),
        }
    }
}
