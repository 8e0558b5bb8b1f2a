//! Per-backend state: the model (loaded lazily over a shared read-only mmap, reloaded when the
//! file changes), the schema-prefix KV cache, and the worker pool (created lazily with the
//! backend's signals blocked so that PostgreSQL's signal handlers only ever run on the backend's
//! own thread).

pub mod sparse;

use super::gucs;
use crate::nl2sql::model_path::{self, ModelPathError, MODELS_DIR};
use crate::nl2sql::{Engine, Nl2SqlError, PrefixCache};
use crate::platform::runtime::Runtime;
use std::cell::RefCell;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

/// Identity of a model file on disk: a change of any field means a different file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

impl FileId {
    /// Reads the identity of `path` (following symlinks).
    pub fn of(path: &Path) -> std::io::Result<FileId> {
        let m = std::fs::metadata(path)?;
        Ok(FileId {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        })
    }

    /// A string for fingerprints: path plus identity.
    pub fn identity(&self, path: &Path) -> String {
        format!(
            "{}|dev={}|ino={}|size={}|mtime_ns={}",
            path.display(),
            self.dev,
            self.ino,
            self.size,
            self.mtime_ns
        )
    }
}

/// A loaded model and its caches.
pub struct Loaded {
    pub path: PathBuf,
    pub id: FileId,
    pub engine: Engine,
    /// The per-backend schema-prefix cache used by nl2sql().
    pub cache: PrefixCache,
    /// The `turboinfer.context_tokens` value last reported as capped at this model's training
    /// context (the NOTICE is given once per value and load, not on every call).
    pub context_capped: Option<usize>,
    /// How long the load took.
    pub load_ms: f64,
    /// The sparse FFN sidecar opened for this model and the hooks built from it (dropped with
    /// the model: a reload starts without one).
    pub sparse: Option<sparse::SparseCache>,
}

/// Everything a backend keeps between calls.
#[derive(Default)]
pub struct Backend {
    pub loaded: Option<Loaded>,
    /// Shared with a call that runs beside the backend thread ([`load_beside`]).
    runtime: Option<Rc<Runtime>>,
    /// The thread count the runtime was built for (`gucs::threads()`).
    runtime_threads: usize,
}

thread_local! {
    /// The backend's state (PostgreSQL backends are single-threaded; only this thread touches it).
    static BACKEND: RefCell<Backend> = RefCell::new(Backend::default());
}

/// Why the model cannot be used.
#[derive(Debug)]
pub enum LoadError {
    Path(ModelPathError),
    Engine(PathBuf, Nl2SqlError),
    Runtime(String),
    /// `turboinfer.threads` above `turboinfer.threads_limit` for a non-superuser.
    Limit(gucs::LimitExceeded),
}

/// Runs `f` with the backend state. Not re-entrant (nl2sql does not call itself).
pub fn with_backend<R>(f: impl FnOnce(&mut Backend) -> R) -> R {
    BACKEND.with(|b| f(&mut b.borrow_mut()))
}

impl Backend {
    /// The model named by `turboinfer.model`, loading or reloading it when needed. Returns
    /// whether a (re)load happened.
    pub fn model(&mut self) -> Result<(&mut Loaded, bool), LoadError> {
        let reloaded = match self.stale()? {
            Some((path, id)) => {
                let (engine, load_ms) = load_engine(&path, &id);
                self.keep(path, id, engine?, load_ms);
                true
            }
            None => false,
        };
        let loaded = self.loaded.as_mut().expect("loaded or kept above");
        loaded.engine.set_weight_budget(gucs::weight_budget());
        Ok((loaded, reloaded))
    }

    /// The file `turboinfer.model` names and its identity when it is not the model loaded (whose
    /// mapping is dropped then: two large models need not be mapped at once), `None` when it is.
    fn stale(&mut self) -> Result<Option<(PathBuf, FileId)>, LoadError> {
        let setting = gucs::model_setting();
        let path = model_path::resolve_existing(&setting, Path::new(MODELS_DIR))
            .map_err(LoadError::Path)?;
        let id = FileId::of(&path)
            .map_err(|_| LoadError::Path(ModelPathError::Missing(path.display().to_string())))?;
        if matches!(&self.loaded, Some(l) if l.path == path && l.id == id) {
            return Ok(None);
        }
        self.loaded = None;
        Ok(Some((path, id)))
    }

    /// Keeps `engine`, loaded from `path` (file `id`) in `load_ms`, as the backend's model.
    fn keep(&mut self, path: PathBuf, id: FileId, engine: Engine, load_ms: f64) {
        if let crate::model::PackStatus::Ignored { .. } = engine.model().pack_status() {
            // The model runs unpacked (same results, slower); the reason also shows in
            // nl2sql_explain(), turboinfer_info() and turboinfer_bench().
            pgrx::log!("turboinfer: packed weights {}", engine.model().pack_status());
        }
        self.loaded = Some(Loaded {
            path,
            id,
            engine,
            cache: PrefixCache::new(),
            context_capped: None,
            load_ms,
            sparse: None,
        });
    }

    /// The worker pool for the current `turboinfer.threads`, created on first use.
    pub fn runtime(&mut self) -> Result<&Runtime, LoadError> {
        self.runtime_shared()?;
        Ok(self.runtime.as_deref().expect("set above"))
    }

    /// [`Backend::runtime`], shared.
    fn runtime_shared(&mut self) -> Result<Rc<Runtime>, LoadError> {
        let n = gucs::threads().map_err(LoadError::Limit)?;
        if self.runtime.is_none() || self.runtime_threads != n {
            self.runtime = None; // joins nothing: rayon workers exit once the pool is dropped
            self.runtime = Some(Rc::new(spawn_runtime(n)?));
            self.runtime_threads = n;
        }
        Ok(Rc::clone(self.runtime.as_ref().expect("set above")))
    }

    /// Both the model and the runtime (split borrows).
    pub fn model_and_runtime(&mut self) -> Result<(&mut Loaded, bool, &Runtime), LoadError> {
        self.runtime()?;
        let (_, reloaded) = self.model()?;
        let rt = self.runtime.as_deref().expect("created above");
        Ok((self.loaded.as_mut().expect("loaded above"), reloaded, rt))
    }
}

/// Loads the engine of model file `path` (identity `id`); with how long it took, ms. Touches
/// nothing of PostgreSQL's: it may run on a worker thread.
fn load_engine(path: &Path, id: &FileId) -> (Result<Engine, LoadError>, f64) {
    let t = Instant::now();
    let engine = Engine::load(path, &id.identity(path))
        .map_err(|e| LoadError::Engine(path.to_path_buf(), e));
    (engine, crate::platform::clock::ms_since(t))
}

/// Makes the backend's model and worker pool ready, as [`Backend::model_and_runtime`] does, while
/// `here` runs on the backend thread: a model that must be (re)loaded is loaded on a worker of
/// the pool meanwhile, so a backend's first call reads its catalog during the load instead of
/// after it. Returns the load's time in ms when one happened, and `here`'s result. A path or pool
/// error is returned before `here` runs; an ERROR raised in `here` unwinds after the load has
/// finished (the model loaded is dropped). `here` must not use [`with_backend`].
pub fn load_beside<R>(here: impl FnOnce() -> R) -> Result<(Option<f64>, R), LoadError> {
    let (rt, stale) = with_backend(|b| Ok::<_, LoadError>((b.runtime_shared()?, b.stale()?)))?;
    let Some((path, id)) = stale else { return Ok((None, here())) };
    let ((engine, load_ms), r) = rt.beside(|| load_engine(&path, &id), here);
    let engine = engine?;
    with_backend(|b| b.keep(path, id, engine, load_ms));
    Ok((Some(load_ms), r))
}

/// Builds a runtime with PostgreSQL's signals blocked, so the workers inherit a mask that keeps
/// every signal on the backend thread, then restores the backend's mask.
pub fn spawn_runtime(n_threads: usize) -> Result<Runtime, LoadError> {
    // SAFETY: plain libc signal-set manipulation on stack-allocated sets.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGALRM,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGHUP,
            libc::SIGQUIT,
        ] {
            libc::sigaddset(&mut block, sig);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old) != 0 {
            return Err(LoadError::Runtime("pthread_sigmask failed".into()));
        }
        let rt = Runtime::new(n_threads);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        rt.map_err(|e| LoadError::Runtime(e.to_string()))
    }
}

/// Resident set size of this process in bytes (from /proc/self/statm), if readable.
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64)
}
