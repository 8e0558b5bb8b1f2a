//! PostgreSQL glue: the only module that may use `pgrx`. Each function here is a thin wrapper that
//! calls the pure-Rust engine and turns its errors into `ereport`s.
//!
//! Layers, one way: the SQL surface (`nl2sql`, `run`, `calibrate`, `functions`) uses the backend
//! state (`backend`: model handle, caches, the sparse sidecar) and `errors`, the one mapping of
//! every module's errors to SQLSTATEs; neither of those knows the surface.

mod backend;
mod calibrate;
mod candidates;
mod catalog;
mod catalog_cache;
mod compat;
mod conversation;
mod discard;
mod embed;
mod encoding;
mod errors;
mod examples;
mod facts;
mod functions;
mod gucs;
mod latch;
mod linking;
mod locks;
mod nl2sql;
mod nodes;
mod panic;
mod prepare;
mod prepare_locks;
mod progress;
mod readonly;
mod result_check;
mod run;
mod slots;
mod stat;
mod subxact;
mod track;
mod validate;
mod verdict;
mod worker;

// The magic block tells the server which PostgreSQL major version this library was built for.
::pgrx::pg_module_magic!(name, version);

/// Library initialisation (once per backend, when the library is first loaded): registers the
/// settings, replaces pgrx's panic hook (no backtraces to clients, see `panic`), installs the
/// hook that lets `DISCARD ALL` and the other session resets forget the session's conversation
/// (see `discard`) and the transaction callbacks that take back a rolled-back turn (see
/// `conversation`), and, when the library is preloaded, requests the shared memory of
/// `turboinfer_stat` (see `stat`) and, with `turboinfer.batch_worker` on, registers the batch
/// worker and its board (see `worker`). No threads are created and no model is loaded here: the
/// postmaster may load the library before forking.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    panic::install();
    gucs::register();
    discard::install();
    conversation::install();
    stat::init();
    worker::init();
}
