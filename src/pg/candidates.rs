//! Candidate execution for nl2sql (`turboinfer.candidate_execution`): each validated candidate
//! runs through the read-only executor (`readonly.rs`: a subtransaction that is always rolled
//! back, `transaction_read_only`, the caller's privileges) under a short timer of its own, and
//! its rows become a digest that equal results share (see `nl2sql::candidates`).

use super::readonly::{run_read_only, Rows, RunError};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::PgTryBuilder;
use std::ffi::c_int;
use std::hash::{Hash, Hasher};

/// Rows read per candidate: enough to tell typical answers apart; a larger result is compared
/// on its first rows (in the order the statement gives them).
const CANDIDATE_ROWS: usize = 1000;

/// Most time one candidate may run: a candidate whose result takes longer than this would make
/// the answer slow for one vote; it simply does not vote. The session's statement_timeout still
/// bounds the whole call.
const CANDIDATE_TIMEOUT_MS: c_int = 1000;

// PostgreSQL's timeout module (utils/timeout.h; not in pgrx's bindings). `TimeoutId` is a C enum:
// USER_TIMEOUT (12 in PostgreSQL 15) asks RegisterTimeout for a free user slot.
const USER_TIMEOUT: c_int = 12;
extern "C-unwind" {
    fn RegisterTimeout(id: c_int, handler: Option<unsafe extern "C-unwind" fn()>) -> c_int;
    fn enable_timeout_after(id: c_int, delay_ms: c_int);
    fn disable_timeout(id: c_int, keep_indicator: bool);
    fn get_timeout_indicator(id: c_int, reset_indicator: bool) -> bool;
}

thread_local! {
    /// This backend's timeout slot for candidates, registered on first use.
    static TIMER: std::cell::Cell<Option<c_int>> = const { std::cell::Cell::new(None) };
}

/// The timer's handler (signal context): a query cancel, as the SIGINT handler requests one;
/// the timeout module records that this timer fired, which tells it apart from the user's cancel.
unsafe extern "C-unwind" fn candidate_timeout() {
    pg_sys::QueryCancelPending = 1;
    pg_sys::InterruptPending = 1;
    pg_sys::SetLatch(pg_sys::MyLatch);
}

/// `sql`'s first `row_limit` rows, run read-only under this backend's candidate timer
/// ([`CANDIDATE_TIMEOUT_MS`]), or why it did not run; `None` when it ran out of its time. The
/// user's cancel, the statement_timeout and resource errors are re-raised.
pub(super) fn run_timed(sql: &str, row_limit: usize) -> Option<Result<Rows, RunError>> {
    run_within(sql, row_limit, CANDIDATE_TIMEOUT_MS)
}

/// [`run_timed`] under a timer of `ms` milliseconds (a probe that must cost less than a
/// candidate: the verdict's value lookups).
pub(super) fn run_within(sql: &str, row_limit: usize, ms: c_int) -> Option<Result<Rows, RunError>> {
    // Registered once per backend: PostgreSQL has 10 user timeout slots, and a backend that
    // asks for an eleventh ends with FATAL.
    let timer = TIMER.with(|t| match t.get() {
        Some(id) => id,
        None => {
            // SAFETY: backend thread; the handler only sets the flags the SIGINT handler sets.
            let id = unsafe { RegisterTimeout(USER_TIMEOUT, Some(candidate_timeout)) };
            t.set(Some(id));
            id
        }
    });
    // SAFETY: backend thread; the timer is disabled on every path out (an ERROR that leaves this
    // function also ends the statement, whose error recovery disables all timeouts).
    unsafe { enable_timeout_after(timer, ms) };
    let ran = PgTryBuilder::new(|| Some(run_read_only(sql, row_limit)))
        .catch_others(|e| {
            // SAFETY: backend thread.
            let ours = unsafe { get_timeout_indicator(timer, true) };
            match e {
                CaughtError::PostgresError(ref r) | CaughtError::ErrorReport(ref r)
                    if ours
                        && r.sql_error_code() == pgrx::PgSqlErrorCode::ERRCODE_QUERY_CANCELED =>
                {
                    None
                }
                other => {
                    // SAFETY: as above.
                    unsafe { disable_timeout(timer, false) };
                    other.rethrow()
                }
            }
        })
        .execute();
    // SAFETY: as above.
    unsafe { disable_timeout(timer, false) };
    ran
}

/// The digest of `sql`'s rows, or `None` when it failed to run or ran out of its time. Only
/// values count, not column names (two candidates naming a count differently agree), and neither
/// row nor column order. The user's cancel, the statement_timeout and resource errors are
/// re-raised.
pub fn result_digest(sql: &str) -> Option<u64> {
    let rows = run_timed(sql, CANDIDATE_ROWS)?.ok()?;
    let mut keys: Vec<Vec<String>> = rows
        .rows
        .iter()
        .map(|r| {
            let mut values: Vec<String> = match serde_json::from_str(r) {
                Ok(serde_json::Value::Object(m)) => m.values().map(|v| v.to_string()).collect(),
                _ => vec![r.clone()],
            };
            values.sort_unstable();
            values
        })
        .collect();
    keys.sort_unstable();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    keys.hash(&mut h);
    rows.truncated.hash(&mut h);
    Some(h.finish())
}
