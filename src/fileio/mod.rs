//! The engine's own files on disk (packed weights, sparse sidecars, KV-state files, written GGUF
//! models): one way to open them, one way to write them and one way to map them back.
//!
//! - [`regular_file`]: opening a file to read without blocking and without being redirected: a
//!   FIFO, socket, device or directory is refused, and so, when asked, is a symbolic link.
//! - [`atomic`]: a file appears complete or not at all (temporary file in the same directory,
//!   fsync, rename, fsync of the directory), and a failed write leaves nothing behind.
//! - [`mapped`]: a read-only shared mapping of a regular file, opened without blocking, with its
//!   length (and magic) checked before any byte is read.
//! - [`mapguard`]: a mapped file that changes under its mapping (SIGBUS) becomes an error of the
//!   call that reads it, not a crash of the server.
//! - [`le`]: bounds-checked little-endian readers of the fields of those files.

pub mod atomic;
pub mod le;
pub mod mapguard;
pub mod mapped;
pub mod regular_file;

pub use atomic::AtomicFile;
pub use mapped::{MapError, MappedFile, Watch};
