//! Sleeping on this backend's latch: the one wait every waiting loop of the glue uses (inference
//! slots, the batch worker's callers), woken early by SetLatch and shown as wait event
//! `Extension` in `pg_stat_activity`.

use pgrx::pg_sys;

/// Sleeps until this process's latch is set or `timeout_ms` pass (the postmaster's death ends
/// the process), then resets the latch. Interrupts are the caller's to check.
pub fn wait(timeout_ms: i64) {
    // SAFETY: MyLatch is this process's latch; WL_EXIT_ON_PM_DEATH exits if the postmaster dies.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            timeout_ms as _,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}
