//! The one hook every call of the nl2sql family passes through ([`track`], around `answer()` in
//! `nl2sql`): it records the call in `turboinfer_stat` ([`stat`]) and logs it at
//! `turboinfer.log_queries`, once, whether it answered or raised an ERROR.
//!
//! ERRORs travel as Rust panics from where they are raised (`errors::report`, or a PostgreSQL
//! error caught at a pgrx FFI boundary: cancel, statement_timeout, catalog errors) to the
//! function's boundary, where pgrx raises them; [`track`] catches the unwind, reads the SQLSTATE
//! and message from the payload, records, and resumes it unchanged. PostgreSQL's error state was
//! already flushed by pgrx at that point, so taking an LWLock or emitting a log message is safe.

use super::errors::{error_report, INVALID_SQL, REFUSED};
use super::{gucs, stat};
use crate::nl2sql::Outcome;
use crate::platform::clock::ms_since;
use pgrx::pg_sys::panic::{CaughtError, ErrorReportWithLevel};
use pgrx::PgSqlErrorCode;
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::time::Instant;

/// Runs `body` (one call answering `question`), recording and logging its result; `outcome`
/// gives the engine's outcome of a result. An ERROR is re-raised unchanged after recording.
pub fn track<T>(question: &str, body: impl FnOnce() -> T, outcome: impl Fn(&T) -> &Outcome) -> T {
    let t0 = Instant::now();
    let waited = super::worker::client::waited();
    // The call's wait for the batch worker, when the worker served it.
    let batch = || {
        let (steps, ms) = super::worker::client::waited();
        (steps > waited.0).then_some(ms - waited.1)
    };
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => {
            let o = outcome(&v);
            let total_ms = ms_since(t0);
            let rejected = match (&o.refusal, &o.error) {
                (Some(v), _) if v.refused() => {
                    Some((stat::code(REFUSED), v.reason(o.prompt.shown.len())))
                }
                (_, Some(m)) => Some((stat::code(INVALID_SQL), m.clone())),
                _ => None,
            };
            stat::record(&stat::Sample::of(o, rejected.as_ref().map(|r| r.0), total_ms, batch()));
            log(question, Some(&o.sql), rejected, o.attempts.len().saturating_sub(1), total_ms);
            v
        }
        Err(payload) => {
            let total_ms = ms_since(t0);
            let (code, message) = error_of(&*payload);
            stat::record(&stat::Sample {
                sqlstate: Some(code),
                total_ms,
                batch_wait_ms: batch(),
                ..Default::default()
            });
            log(question, None, Some((code, message)), 0, total_ms);
            resume_unwind(payload)
        }
    }
}

/// The SQLSTATE and message of an ERROR on its way to PostgreSQL; a genuine Rust panic is
/// XX000 (what pgrx raises for it).
fn error_of(payload: &(dyn Any + Send)) -> (i32, String) {
    let report: Option<&ErrorReportWithLevel> = payload
        .downcast_ref::<ErrorReportWithLevel>()
        .or_else(|| match payload.downcast_ref::<CaughtError>()? {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => Some(r),
            CaughtError::RustPanic { ereport, .. } => Some(ereport),
        });
    match report {
        Some(r) => (stat::code(r.sql_error_code()), r.message().to_string()),
        None => (stat::code(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR), "internal error".into()),
    }
}

/// Logs one call at `turboinfer.log_queries` (nothing when off): the question, the SQL (`None`
/// when the call ended before one was generated), the outcome (`ok`, or the SQLSTATE and message
/// of the ERROR or of the rejected answer) and repair rounds; the time goes to the DETAIL, so
/// that the message itself does not vary between runs.
fn log(
    question: &str,
    sql: Option<&str>,
    error: Option<(i32, String)>,
    repairs: usize,
    total_ms: f64,
) {
    let Some(level) = gucs::LOG_QUERIES.get().level() else { return };
    let outcome = match error {
        None => "ok".to_string(),
        Some((code, message)) => format!("{} {message}", stat::sqlstate(code)),
    };
    let sql = sql.map_or_else(|| "none".to_string(), |s| format!("\"{s}\""));
    error_report(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        format!(
            "turboinfer: question \"{question}\"; SQL {sql}; outcome: {outcome}; repair rounds: {repairs}"
        ),
        Some(format!("time: {total_ms:.1} ms")),
        None,
    )
    .report(level);
}
