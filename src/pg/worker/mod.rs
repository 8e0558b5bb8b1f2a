//! The batch worker (issue #30): with the library in `shared_preload_libraries` and
//! `turboinfer.batch_worker = on`, one background worker owns the model and runs the forward
//! passes of every backend that is generating, all waiting sequences in one batched pass
//! (`serve::Server`), their KV caches under `turboinfer.batch_memory_mb`.
//!
//! Each backend keeps its own call (prompt, constraints, drafts, validation, repair,
//! candidates, with its own privileges) and asks the worker only for forward passes over its
//! sequences' new tokens (`nl2sql::seq::Transport`, implemented by [`client`]). The board in
//! shared memory ([`board`]) names the worker and gives each backend a slot; a step's requests
//! and answers travel in a DSM segment the backend keeps ([`crate::serve::wire`]); latches wake
//! each side. Answers are the same bits as in-process: the server's logits are each sequence's
//! alone.
//!
//! Without preloading (or with the setting off) nothing here runs: each backend maps the model
//! and computes by itself, as before. A backend also computes by itself when its call does not
//! match what the worker serves (another model, a longer context, a sparse FFN) or every slot
//! is taken.
//!
//! - [`board`]: the shared-memory board and its slot states.
//! - [`server`]: the worker's main loop.
//! - [`client`]: a backend's side.

pub mod board;
pub mod client;
pub mod server;

use super::gucs;
use board::Board;
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, pg_sys, PgLwLock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The board (see `board`), set up only when the worker is registered.
pub static BOARD: PgLwLock<Board> = unsafe { PgLwLock::new(c"turboinfer_batch_worker") };
/// Whether [`BOARD`] exists: set by `_PG_init` in the postmaster, inherited by its children.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// How soon the postmaster starts a worker that exited (terminated, or failed): soon enough that
/// the next call finds it, not so soon that a worker failing at start spins.
const RESTART: Duration = Duration::from_secs(1);

/// Registers the worker and its shared memory when the library is being preloaded and
/// `turboinfer.batch_worker` is on (called from `_PG_init`).
#[allow(unexpected_cfgs)]
pub fn init() {
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } || !gucs::BATCH_WORKER.get()
    {
        return;
    }
    pg_shmem_init!(BOARD = Board::new());
    ENABLED.store(true, Ordering::Relaxed);
    BackgroundWorkerBuilder::new("turboinfer batch worker")
        .set_type("turboinfer batch worker")
        .set_library("turboinfer")
        .set_function("turboinfer_batch_worker_main")
        .enable_shmem_access(None)
        // Connected to no database (shared catalogs only): it reads no table, but then it is a
        // row of pg_stat_activity that pg_terminate_backend() can stop like any backend.
        .enable_spi_access()
        // A hot standby's backends are served too (the worker reads no database).
        .set_start_time(BgWorkerStartTime::ConsistentState)
        .set_restart_time(Some(RESTART))
        .load();
}

/// Whether the worker is registered in this server.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The worker as `turboinfer_info()` shows it (`null` when it is not registered).
pub fn info() -> serde_json::Value {
    if !enabled() {
        return serde_json::Value::Null;
    }
    let b = *BOARD.share();
    let c = b.counters;
    let callers = b.slots.iter().filter(|s| s.state != board::State::Free).count();
    let waiting = b
        .slots
        .iter()
        .filter(|s| matches!(s.state, board::State::Posted | board::State::Running))
        .count();
    serde_json::json!({
        "pid": (b.worker_pid != 0).then_some(b.worker_pid),
        "ready": b.ready,
        "failure": Some(b.failure()).filter(|f| !f.is_empty()),
        "generation": b.generation,
        "threads": b.threads,
        "n_ctx": b.n_ctx,
        "memory_bytes": b.budget_bytes,
        "sequences_fit": b.fits,
        "sequences": c.sequences,
        "sequences_resident": c.resident,
        "sequences_retired": c.retired,
        "resident_bytes": c.resident_bytes,
        "callers": callers,
        "callers_waiting": waiting,
        "passes": c.server.passes,
        "steps": c.steps,
        "requests": c.server.requests,
        "tokens": c.server.tokens,
        "max_batch": c.server.max_batch,
        "evictions": c.server.evictions,
        "recomputed_tokens": c.server.recomputed,
        "copied_tokens": c.server.copied,
    })
}
