//! The engine's own files on disk (packed weights, sparse sidecars, KV-state files, written GGUF
//! models): one way to write them and one way to map them back.
//!
//! - [`atomic`]: a file appears complete or not at all (temporary file in the same directory,
//!   fsync, rename, fsync of the directory), and a failed write leaves nothing behind.
//! - [`mapped`]: a read-only shared mapping of a regular file, opened without blocking, with its
//!   length (and magic) checked before any byte is read.
//! - [`le`]: bounds-checked little-endian readers of the fields of those files.

pub mod atomic;
pub mod le;
pub mod mapped;

pub use atomic::AtomicFile;
pub use mapped::{MapError, MappedFile, Watch};
