//! The one internal subtransaction: parse analysis (`validate.rs`) and read-only execution
//! (`readonly.rs`) run inside it rolled back, so that nothing they touch persists and their
//! locks go; the background preparation's request (`prepare::request`) runs inside it kept on
//! success, so that its failure cannot fail the DDL that asked.

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::PgTryBuilder;
use std::panic::AssertUnwindSafe;

/// Runs `f` inside an internal subtransaction that is always rolled back, on success and on
/// error alike; returns its value, or the ERROR (or Rust panic) it raised, already copied and
/// flushed by pgrx's catch, for the caller to turn into a verdict or to rethrow.
///
/// The pattern of PL/Python's and PL/Tcl's subtransaction blocks: remember the memory context
/// and resource owner, begin, run, roll back (releasing locks, memory, SPI connections and
/// settings made with SET LOCAL semantics), restore both.
pub fn rolled_back<T>(f: impl FnOnce() -> T) -> Result<T, Box<CaughtError>> {
    run(f, false)
}

/// Runs `f` as [`rolled_back`] does, except that on success the subtransaction is committed into
/// the enclosing transaction (its locks are then the transaction's); on error it is rolled back.
pub fn kept<T>(f: impl FnOnce() -> T) -> Result<T, Box<CaughtError>> {
    run(f, true)
}

/// The subtransaction of [`rolled_back`] and [`kept`]: committed when `keep` and `f` succeeded.
fn run<T>(f: impl FnOnce() -> T, keep: bool) -> Result<T, Box<CaughtError>> {
    let f = AssertUnwindSafe(f);
    // SAFETY: backend thread; the subtransaction is begun and ended here on every path (pgrx's
    // catch turns an ERROR inside `f` into a value before the rollback).
    unsafe {
        let oldcontext = pg_sys::CurrentMemoryContext;
        let oldowner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(oldcontext);
        let outcome = PgTryBuilder::new(move || {
            let f = f; // the whole wrapper, not its field (which is not UnwindSafe)
            Ok((f.0)())
        })
        .catch_others(|e| Err(Box::new(e)))
        .execute();
        if keep && outcome.is_ok() {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        pg_sys::MemoryContextSwitchTo(oldcontext);
        pg_sys::CurrentResourceOwner = oldowner;
        outcome
    }
}
