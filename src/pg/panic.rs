//! Rust panics never show a backtrace to the client.
//!
//! pgrx 0.18 installs a panic hook (in `Pg_magic_func`) that captures `Backtrace::capture()` on
//! every panic and stores it in a thread-local; pgrx then appends it to the DETAIL of the ERROR
//! it raises, both for a Rust panic and for a PostgreSQL error re-raised through Rust (e.g. a
//! statement timeout seen by `check_for_interrupts!`). With `RUST_BACKTRACE` set in the server's
//! environment, every such ERROR carried ~40 frames with build paths to any client.
//!
//! [`install`] replaces that hook with ours: PostgreSQL errors carried as panics (pgrx's
//! `ErrorReportWithLevel`, `ErrorReport`, `CaughtError` payloads) are left to pgrx silently, and
//! a genuine Rust panic is described by the standard hook on stderr, which is the server log:
//! message, source location and, with `RUST_BACKTRACE`, the backtrace. The client gets the ERROR
//! (SQLSTATE XX000 for a panic) with its message and no backtrace. What is lost is the panic's
//! source location in the ERROR's LOCATION field (now `<unknown>`): it is in the server log.

use pgrx::pg_sys::panic::{CaughtError, ErrorReport, ErrorReportWithLevel};
use std::panic::PanicHookInfo;

/// Replaces pgrx's panic hook (see the module doc). Called from `_PG_init`, which PostgreSQL runs
/// after `Pg_magic_func` (where pgrx installs its hook), before any thread of ours exists.
pub fn install() {
    // The first take_hook returns pgrx's hook and leaves the standard one installed; the second
    // returns the standard hook itself, which we keep for genuine panics.
    drop(std::panic::take_hook());
    let standard = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
        if !is_postgres_error(info) {
            standard(info);
        }
    }));
}

/// Whether the panic carries an ERROR on its way to PostgreSQL (raised by `ereport`/`error!`, or
/// a PostgreSQL error caught at an FFI boundary and re-raised): not a bug, nothing to log here.
fn is_postgres_error(info: &PanicHookInfo<'_>) -> bool {
    let p = info.payload();
    p.is::<ErrorReportWithLevel>() || p.is::<ErrorReport>() || p.is::<CaughtError>()
}
