//! Opening the files the engine maps (models, packed weights, sparse sidecars, KV cache files)
//! without blocking and without being redirected.
//!
//! A plain `File::open` of a FIFO blocks until some process opens it for writing, and nothing
//! interrupts that wait: a FIFO planted where a cache file is expected froze a PostgreSQL backend
//! beyond the reach of cancel and statement_timeout. [`open`] opens with `O_NONBLOCK` (a FIFO
//! opened for reading returns at once), checks with `fstat` on the opened descriptor that it is a
//! regular file, and refuses anything else (FIFO, socket, device, directory). With
//! [`Links::Refuse`] it also opens with `O_NOFOLLOW`, so a symbolic link in the last component is
//! refused instead of followed (directories above it are followed as usual).
//!
//! Errors are `std::io::Error`s, so each reader keeps reporting them through its own error type:
//! `NotFound` stays `NotFound` (a missing file is an ordinary case for caches), a refusal is
//! `InvalidInput` with a message that names what was found.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// What [`open`] does with a symbolic link as the last path component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Refuse it (`O_NOFOLLOW`): cache files, packed weights and sparse sidecars, which the
    /// server itself writes by rename and never as links.
    Refuse,
    /// Follow it: model files, whose path was resolved (and confined) by the caller.
    Follow,
}

/// Opens `path` read-only without blocking; refuses anything but a regular file (see the module
/// doc). The returned file is in blocking mode again.
pub fn open(path: &Path, links: Links) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        // O_NOFOLLOW on a symbolic link fails with ELOOP, whose text ("too many levels of
        // symbolic links") would mislead.
        Err(e) if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a symbolic link, which is not followed",
            ));
        }
        Err(e) => return Err(e),
    };
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_block_device() || kind.is_char_device() {
            "a device"
        } else {
            "a special file"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {what}, not a regular file"),
        ));
    }
    // Back to blocking mode: harmless for a regular file, and what later readers expect.
    // SAFETY: fcntl on a descriptor this function owns; no memory is passed.
    unsafe {
        let fd = file.as_raw_fd();
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}
