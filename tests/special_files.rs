//! Special files planted where the engine expects its own files (issue 16, item 9): a FIFO at a
//! KV cache file, packed weights, sparse sidecar or model path is refused at once (a plain open
//! would block until a writer appears, beyond the reach of cancel), and a symbolic link at a
//! cache, pack or sidecar path is refused instead of followed. A refused cache file is a miss
//! (an I/O warning, the file left in place), never used.

mod common;

use std::fs::{self, OpenOptions};
use std::os::unix::fs::{symlink, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use turboinfer::generate::kv_file::{KvFileDir, KvFileError};
use turboinfer::gguf::GgufFile;
use turboinfer::model::packed::{PackedError, PackedFile};
use turboinfer::model::Logits;
use turboinfer::nl2sql::{Engine, Options, SchemaInfo, Table, TableKind, PREFILL_CHUNK};
use turboinfer::platform::runtime::Runtime;
#[cfg(feature = "sparse")]
use turboinfer::sparse::Sidecar;

/// How long a refusal may take: an open that blocks on a FIFO never returns, a refusal takes
/// microseconds; 5 s leaves room for a loaded machine.
const PROMPT: Duration = Duration::from_secs(5);

/// A fresh, empty temporary directory for test `tag`, deleted when the guard drops.
struct TmpDir(PathBuf);

impl TmpDir {
    /// Creates the directory.
    fn new(tag: &str) -> TmpDir {
        let d =
            std::env::temp_dir().join(format!("turboinfer-special-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        TmpDir(d)
    }
}

impl Drop for TmpDir {
    /// Deletes the directory and everything in it.
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Creates a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// Runs `f` (which opens `fifo`) and returns its result, failing the test if it has not returned
/// within [`PROMPT`]. A blocked open is then released by opening the FIFO for writing, so the
/// test ends either way.
fn promptly<T: Send>(what: &str, fifo: &Path, f: impl FnOnce() -> T + Send) -> T {
    let (tx, rx) = mpsc::channel();
    let r = std::thread::scope(|s| {
        s.spawn(move || {
            let _ = tx.send(f());
        });
        let r = rx.recv_timeout(PROMPT);
        if r.is_err() {
            let _ = OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(fifo);
        }
        r
    });
    r.unwrap_or_else(|_| panic!("{what}: still blocked on the FIFO after {PROMPT:?}"))
}

/// The error text of `r`, which must be an error.
fn err_text<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> String {
    match r {
        Ok(_) => panic!("{what}: accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn model_pack_and_sidecar_refuse_fifos_and_links() {
    let Some(model) = common::model_path("smollm2-135m") else { return };
    let gguf = GgufFile::open(&model).unwrap();
    let tmp = TmpDir::new("files");

    // A FIFO as the model, the packed weights or the sparse sidecar: a prompt, clear error.
    let fifo = tmp.0.join("planted.fifo");
    mkfifo(&fifo);
    let e = err_text("model FIFO", promptly("model FIFO", &fifo, || GgufFile::open(&fifo)));
    assert!(e.contains("is a FIFO, not a regular file"), "{e}");
    let e = err_text("pack FIFO", promptly("pack FIFO", &fifo, || PackedFile::open(&fifo, &gguf)));
    assert!(e.contains("is a FIFO, not a regular file"), "{e}");
    #[cfg(feature = "sparse")]
    {
        let e = err_text(
            "sidecar FIFO",
            promptly("sidecar FIFO", &fifo, || Sidecar::open(&fifo, None)),
        );
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");
    }

    // A symbolic link as the pack or the sidecar is not followed (here: to the model file).
    let link = tmp.0.join("planted.link");
    symlink(&model, &link).unwrap();
    let e = err_text("pack link", PackedFile::open(&link, &gguf));
    assert!(e.contains("is a symbolic link, which is not followed"), "{e}");
    #[cfg(feature = "sparse")]
    {
        let e = err_text("sidecar link", Sidecar::open(&link, None));
        assert!(e.contains("is a symbolic link, which is not followed"), "{e}");
    }
    // A model path is resolved and confined by its caller: a link to a model still opens.
    assert!(GgufFile::open(&link).is_ok());

    // A directory is refused too (not a regular file), missing files stay "missing".
    #[cfg(feature = "sparse")]
    {
        let e = err_text("sidecar dir", Sidecar::open(&tmp.0, None));
        assert!(e.contains("is a directory, not a regular file"), "{e}");
    }
    assert!(matches!(
        PackedFile::open(tmp.0.join("absent.kx16"), &gguf),
        Err(PackedError::Missing { .. })
    ));
}

#[test]
fn kv_cache_file_fifo_or_link_is_a_miss() {
    let Some(model) = common::model_path("smollm2-135m") else { return };
    let e = Engine::load(&model, "smollm2-135m").unwrap();
    let rt = Runtime::new(2).unwrap();
    let opts = Options { max_new_tokens: 4, context_tokens: 1024, ..Options::default() };
    let schema = SchemaInfo::new(
        vec![Table::new("public", "users", TableKind::Table).column("id", "integer", false)],
        Some("public"),
    );
    let plan = e.plan(&schema, "How many users?", &opts).unwrap();
    let key = e.kv_file_key(&plan);
    let mut kv = e.model().new_cache(1024);

    // A genuine cache file for this prefix, in its own directory.
    let good = TmpDir::new("kv-good");
    let good_files = KvFileDir::new(&good.0, 1 << 30);
    for chunk in plan.prefix_ids.chunks(PREFILL_CHUNK) {
        e.model().forward(&rt, &mut kv, chunk, Logits::Last).unwrap();
    }
    let stored = good_files.store(&key, &kv).unwrap();

    // A FIFO at the cache path: refused at once as an I/O warning, left in place, kv empty.
    let planted = TmpDir::new("kv-planted");
    let files = KvFileDir::new(&planted.0, 1 << 30);
    let path = files.path_for(&key.fingerprint, kv.dtype());
    mkfifo(&path);
    let r = promptly("cache FIFO", &path, || files.load(&key, &mut kv));
    assert!(matches!(&r, Err(KvFileError::Io { .. })), "{r:?}");
    assert!(r.as_ref().unwrap_err().is_warning());
    assert!(err_text("cache FIFO", r).contains("is a FIFO, not a regular file"));
    assert_eq!(kv.len(), 0);
    assert!(fs::symlink_metadata(&path).unwrap().file_type().is_fifo());

    // A symbolic link at the cache path to a valid cache file is not followed: not used.
    fs::remove_file(&path).unwrap();
    symlink(&stored.path, &path).unwrap();
    let r = files.load(&key, &mut kv);
    assert!(err_text("cache link", r).contains("is a symbolic link, which is not followed"));
    assert_eq!(kv.len(), 0);
    // The same file through its real path loads.
    good_files.load(&key, &mut kv).unwrap();
    assert_eq!(kv.len(), plan.prefix_ids.len());
}
