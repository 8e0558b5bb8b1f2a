//! A mapped file that changes under its mapping becomes an error of the call that reads it, not a
//! crash of the server.
//!
//! Model and pack files are mapped read-only and shared. An administrator who overwrites one in
//! place (`cp new.gguf model.gguf` truncates it first) or truncates it makes every page past the
//! new end fault with SIGBUS on the next read: the default action kills the backend, and
//! PostgreSQL then restarts every session of the server. Unwinding out of a signal handler is not
//! possible, so [`MapWatch`] does what is: a process-wide SIGBUS handler that, for an address
//! inside a watched mapping, maps an anonymous zero page over the faulting page (the read is then
//! retried and sees zeros: the pass finishes with garbage but without a crash) and marks the
//! mapping faulted. The owner asks [`MapWatch::changed`] after its work (the model does after every
//! forward pass) and turns a fault — or a file whose size or modification time changed, which an
//! in-place copy that happened not to fault also shows — into an error; the caller then drops the
//! mapping and reloads. Faults outside every watched mapping go to the previous disposition.
//!
//! The handler is async-signal-safe: atomic loads and stores and one `mmap` system call.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Mappings watched at once: a backend maps a model, its pack and a sparse sidecar, and the
/// engine tests keep a few models open; 64 leaves room, and a mapping beyond it is simply not
/// watched (as before this module).
const SLOTS: usize = 64;

/// Per slot: whether it is taken, the mapping's start and length (0 = not watching), whether a
/// fault was repaired in it.
static USED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
static START: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static FAULTED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];
/// The page size (set before the handler is installed).
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS disposition found when the handler was installed (for faults that are not ours),
/// or the installation error.
static PREVIOUS: OnceLock<Result<libc::sigaction, i32>> = OnceLock::new();

/// Installs the handler once per process; false if that failed (then nothing is watched).
fn install() -> bool {
    PREVIOUS
        .get_or_init(|| {
            // SAFETY: sysconf and sigaction are called with valid arguments; the handler only
            // touches the statics above.
            unsafe {
                let page = libc::sysconf(libc::_SC_PAGESIZE);
                if page > 0 {
                    PAGE.store(page as usize, Ordering::Relaxed);
                }
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_sigbus as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, &act, &mut old) == 0 {
                    Ok(old)
                } else {
                    Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
                }
            }
        })
        .is_ok()
}

/// The SIGBUS handler (see the module doc).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let len = LEN[i].load(Ordering::Acquire);
        let start = START[i].load(Ordering::Acquire);
        if len == 0 || addr < start || addr >= start + len {
            continue;
        }
        let page = PAGE.load(Ordering::Relaxed);
        let base = addr & !(page - 1);
        // SAFETY: replaces one page inside a mapping this process owns (checked above) with an
        // anonymous read-only zero page; nothing else refers to that page as anything but bytes.
        let r = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if r != libc::MAP_FAILED {
            FAULTED[i].store(true, Ordering::Release);
            return; // the faulting read is retried and sees zeros
        }
    }
    // Not ours (or the page could not be replaced): what would have happened without us.
    match PREVIOUS.get() {
        Some(Ok(old)) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: calling the previously installed handler with the arguments we got, in the
            // form its flags declare.
            unsafe {
                if old.sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                        std::mem::transmute(old.sa_sigaction);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
                    f(sig);
                }
            }
        }
        _ => {
            // Default action: restore it and return; the read faults again and the process
            // terminates as it would have.
            // SAFETY: sigaction with a zeroed (SIG_DFL) action.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

/// A watched mapping of an open file (see the module doc): keeps the file open to compare its
/// size and modification time with those at open.
#[derive(Debug)]
pub struct MapWatch {
    /// The slot, when the mapping is watched for faults.
    slot: Option<usize>,
    file: File,
    size: u64,
    mtime: (i64, i64),
}

impl MapWatch {
    /// Watches `map` (a mapping of `file`, valid for as long as this lives: drop this first).
    pub fn new(file: File, map: &[u8]) -> MapWatch {
        let (size, mtime) = file
            .metadata()
            .map_or((map.len() as u64, (0, 0)), |m| (m.size(), (m.mtime(), m.mtime_nsec())));
        let slot = if map.is_empty() || !install() {
            None
        } else {
            (0..SLOTS).find(|&i| {
                USED[i].compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok()
            })
        };
        if let Some(i) = slot {
            FAULTED[i].store(false, Ordering::Release);
            START[i].store(map.as_ptr() as usize, Ordering::Release);
            LEN[i].store(map.len(), Ordering::Release);
        }
        MapWatch { slot, file, size, mtime }
    }

    /// The open file under the mapping.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// True when a read of the mapping faulted (and saw zeros), or the file's size or
    /// modification time differ from those at open (it was rewritten in place). A file replaced
    /// by rename is another file: the mapping still holds the old one, unchanged.
    pub fn changed(&self) -> bool {
        if self.slot.is_some_and(|i| FAULTED[i].load(Ordering::Acquire)) {
            return true;
        }
        match self.file.metadata() {
            Ok(m) => m.size() != self.size || (m.mtime(), m.mtime_nsec()) != self.mtime,
            Err(_) => true,
        }
    }
}

impl Drop for MapWatch {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            LEN[i].store(0, Ordering::Release);
            START[i].store(0, Ordering::Release);
            FAULTED[i].store(false, Ordering::Release);
            USED[i].store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A file truncated under its mapping: reading past the new end is a repaired fault (zeros),
    /// not a SIGBUS, and the watch reports the change; an untouched file reports none.
    #[test]
    fn a_truncated_mapping_reads_zeros_and_reports_the_change() {
        let dir = std::env::temp_dir().join(format!("turboinfer-mapguard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.bin");
        let page = 4096 * 4;
        std::fs::File::create(&path).unwrap().write_all(&vec![7u8; page * 4]).unwrap();
        let file = File::open(&path).unwrap();
        // SAFETY: test-only mapping of a file this test owns.
        let map = unsafe { memmap2::Mmap::map(&file).unwrap() };
        let watch = MapWatch::new(file, &map);
        assert_eq!(map[page * 3], 7);
        assert!(!watch.changed());
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(page as u64).unwrap();
        let after: u64 = map[page * 2..page * 3].iter().map(|&b| b as u64).sum();
        assert_eq!(after, 0, "the truncated part reads as zeros");
        assert!(watch.changed());
        drop(watch);
        drop(map);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
