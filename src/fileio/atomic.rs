//! The one way the engine writes a file that others read: readers see the old file or the
//! complete new one, never a half-written one, and a crash after success cannot lose it.
//!
//! The durability rule, for every file: the bytes go into a new temporary file in the same
//! directory (same filesystem, so the rename is atomic), the file is fsynced, renamed over the
//! destination, and the directory is fsynced (the rename itself is durable only then). A
//! filesystem that cannot fsync a directory (`EINVAL`) is accepted; any other failure is an error.
//! On any error, or when the [`AtomicFile`] is dropped without [`AtomicFile::commit`], the
//! temporary file is removed.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A file being written in place of `dest`: write through [`AtomicFile::file`], then
/// [`AtomicFile::commit`]. Dropped uncommitted, it removes its temporary file.
#[derive(Debug)]
pub struct AtomicFile {
    dest: PathBuf,
    tmp: PathBuf,
    /// `None` once committed (nothing left to remove).
    file: Option<File>,
    perms: Option<u32>,
}

impl AtomicFile {
    /// Creates a new temporary file `.<name>.<pid>.<nanos>.<n><temp_suffix>` beside `dest`
    /// (never an existing file: `O_EXCL`). With `perms`, the file is created with that mode and
    /// gets exactly that mode before the rename (whatever the umask); without, the platform
    /// default applies.
    pub fn create(dest: &Path, perms: Option<u32>, temp_suffix: &str) -> io::Result<AtomicFile> {
        // Distinguishes concurrent writes from one process; the pid and the time, from others
        // (and from a temporary file a crashed process with the same pid left).
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let name = dest.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the destination has no file name")
        })?;
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(
            ".{}.{nanos}.{}{temp_suffix}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let tmp = dest.with_file_name(tmp_name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        if let Some(mode) = perms {
            options.mode(mode);
        }
        let file = options.open(&tmp)?;
        Ok(AtomicFile { dest: dest.to_path_buf(), tmp, file: Some(file), perms })
    }

    /// The temporary file's path (for error messages).
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// The temporary file, to write (and seek) in.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("an uncommitted AtomicFile has its file")
    }

    /// Makes the written file durable and puts it in place of the destination (see the module
    /// doc). On error the temporary file is gone and the destination is as before, unless only
    /// the final directory fsync failed (the new file is then in place, maybe not durably).
    pub fn commit(mut self) -> io::Result<()> {
        let file = self.file.take().expect("an uncommitted AtomicFile has its file");
        let renamed = (|| {
            file.sync_all()?;
            if let Some(mode) = self.perms {
                file.set_permissions(std::fs::Permissions::from_mode(mode))?;
            }
            drop(file);
            std::fs::rename(&self.tmp, &self.dest)
        })();
        if let Err(e) = renamed {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(e);
        }
        sync_dir(self.dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")))
    }
}

impl Drop for AtomicFile {
    /// An uncommitted write leaves nothing behind.
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` as `dest` under the durability rule of the module doc.
pub fn write_all(dest: &Path, perms: Option<u32>, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = AtomicFile::create(dest, perms, ".tmp")?;
    f.file().write_all(bytes)?;
    f.commit()
}

/// Fsyncs the directory `dir`; `EINVAL` (a filesystem that cannot sync a directory) is accepted.
fn sync_dir(dir: &Path) -> io::Result<()> {
    match File::open(dir)?.sync_all() {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A fresh empty directory under the system temporary directory, removed at drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
            let d = std::env::temp_dir()
                .join(format!("turboinfer-atomic-{tag}-{}-{nanos}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            TempDir(d)
        }

        /// Names in the directory, sorted.
        fn names(&self) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A committed write replaces the destination and leaves no temporary file.
    #[test]
    fn commit_replaces_the_destination() {
        let d = TempDir::new("commit");
        let dest = d.0.join("f.bin");
        std::fs::write(&dest, b"old").unwrap();
        let mut f = AtomicFile::create(&dest, None, ".tmp").unwrap();
        assert!(f.temp_path().starts_with(&d.0));
        f.file().write_all(b"new contents").unwrap();
        // Readers still see the old file until the commit.
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");
        f.commit().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new contents");
        assert_eq!(d.names(), vec!["f.bin".to_string()]);
    }

    /// A write that fails before the commit leaves neither a temporary file nor a half file,
    /// and the old destination untouched.
    #[test]
    fn a_failed_write_leaves_nothing() {
        let d = TempDir::new("fail");
        let dest = d.0.join("f.bin");
        std::fs::write(&dest, b"old").unwrap();
        let result = (|| -> io::Result<()> {
            let mut f = AtomicFile::create(&dest, None, ".part")?;
            f.file().write_all(b"half")?;
            Err(io::Error::other("the writer failed"))
        })();
        assert!(result.is_err());
        assert_eq!(d.names(), vec!["f.bin".to_string()]);
        assert_eq!(std::fs::read(&dest).unwrap(), b"old");

        // A failed rename (the destination is a non-empty directory) also removes the temporary.
        let blocked = d.0.join("dir");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("x"), b"x").unwrap();
        let mut f = AtomicFile::create(&blocked, None, ".tmp").unwrap();
        f.file().write_all(b"data").unwrap();
        assert!(f.commit().is_err());
        assert_eq!(d.names(), vec!["dir".to_string(), "f.bin".to_string()]);
    }

    /// With permissions given, the file has exactly them; the temporary file's name ends with
    /// the suffix asked for.
    #[test]
    fn permissions_and_suffix() {
        let d = TempDir::new("perms");
        let dest = d.0.join("p.bin");
        let f = AtomicFile::create(&dest, Some(0o640), ".part").unwrap();
        assert!(f.temp_path().to_string_lossy().ends_with(".part"));
        f.commit().unwrap();
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        write_all(&dest, Some(0o600), b"x").unwrap();
        assert_eq!(std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read(&dest).unwrap(), b"x");
    }

    /// A destination in a missing directory is an error at create, with nothing written.
    #[test]
    fn a_missing_directory_is_an_error() {
        let d = TempDir::new("missing");
        assert!(AtomicFile::create(&d.0.join("no/such/f"), None, ".tmp").is_err());
        assert!(AtomicFile::create(Path::new("/"), None, ".tmp").is_err());
        assert!(d.names().is_empty());
    }
}
