//! The compute runtime: a private rayon thread pool that all parallel engine work runs inside.
//!
//! The engine never touches rayon's global pool and never spawns detached rayon tasks: inside a
//! PostgreSQL backend the threads must be created (with signals blocked) by whoever owns the
//! process, and every parallel region must finish before the call that started it returns.

use rayon::{ThreadPool, ThreadPoolBuilder};

/// Errors creating a runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("cannot build a thread pool with {n_threads} threads: {source}")]
    Pool { n_threads: usize, source: rayon::ThreadPoolBuildError },
}

/// Owns the engine's worker threads.
pub struct Runtime {
    pool: ThreadPool,
}

impl std::fmt::Debug for Runtime {
    /// Short summary (the weights themselves are not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("n_threads", &self.n_threads()).finish()
    }
}

impl Runtime {
    /// Builds a pool of `n_threads` workers (0 means one per available CPU).
    pub fn new(n_threads: usize) -> Result<Runtime, RuntimeError> {
        let n = if n_threads == 0 {
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
        } else {
            n_threads
        };
        let pool = ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("turboinfer-{i}"))
            .build()
            .map_err(|source| RuntimeError::Pool { n_threads: n, source })?;
        Ok(Runtime { pool })
    }

    /// A one-worker runtime that is the calling thread itself: no thread is created (for places
    /// where creating one is impossible: user-mode QEMU hangs on it, see `tests/aarch64_contract.rs`).
    /// The calling thread stays this pool's worker for the rest of its life (rayon leaks the
    /// registry of such a pool), so make at most one per thread; a second one is an error.
    pub fn on_current_thread() -> Result<Runtime, RuntimeError> {
        let pool = ThreadPoolBuilder::new()
            .num_threads(1)
            .use_current_thread()
            .build()
            .map_err(|source| RuntimeError::Pool { n_threads: 1, source })?;
        Ok(Runtime { pool })
    }

    /// Number of worker threads.
    pub fn n_threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` inside the pool, so rayon parallel iterators in `f` use these workers.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// Runs `background` on one of the pool's workers while `here` runs on the calling thread,
    /// and returns both results once both are done. `here` need not be `Send`: it may use what
    /// belongs to the calling thread (a PostgreSQL backend reads its catalog there while a worker
    /// loads a model). A panic in either is resumed here, after both have finished.
    pub fn beside<A: Send, B>(
        &self,
        background: impl FnOnce() -> A + Send,
        here: impl FnOnce() -> B,
    ) -> (A, B) {
        let mut a = None;
        let b = self.pool.in_place_scope(|s| {
            s.spawn(|_| a = Some(background()));
            here()
        });
        (a.expect("the scope ends after its job"), b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn beside_runs_the_background_on_a_worker_and_here_on_the_caller() {
        let rt = Runtime::new(1).unwrap();
        let caller = std::thread::current().id();
        let here_thread = std::cell::Cell::new(None); // borrowed by `here`, so `here` is not Send
        let (worker, sum) = rt.beside(
            || std::thread::current().name().unwrap_or("").to_string(),
            || {
                here_thread.set(Some(std::thread::current().id()));
                (1..=10).sum::<i32>()
            },
        );
        assert_eq!(worker, "turboinfer-0");
        assert_eq!(here_thread.get(), Some(caller));
        assert_eq!(sum, 55);
        // A panic on either side reaches the caller, after both sides have finished.
        let done = std::sync::atomic::AtomicBool::new(false);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.beside(
                || {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    done.store(true, std::sync::atomic::Ordering::SeqCst);
                },
                || panic!("here"),
            )
        }));
        assert!(r.is_err());
        assert!(done.load(std::sync::atomic::Ordering::SeqCst));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.beside(|| panic!("background"), || 1)
        }));
        assert!(r.is_err());
    }

    #[test]
    fn work_runs_on_the_private_pool() {
        let rt = Runtime::new(2).unwrap();
        assert_eq!(rt.n_threads(), 2);
        let names: Vec<String> = rt.install(|| {
            (0..64)
                .into_par_iter()
                .map(|_| std::thread::current().name().unwrap_or("").to_string())
                .collect()
        });
        assert!(names.iter().all(|n| n.starts_with("turboinfer-")), "{names:?}");
        let sum: u64 = rt.install(|| (0..1000u64).into_par_iter().sum());
        assert_eq!(sum, 499500);
    }
}
