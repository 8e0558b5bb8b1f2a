//! The worker "turboinfer prepare": started by a request (`request`), connected to the requesting
//! database as the role that logged in there, it
//!
//! 1. holds `WAITING` (or exits at once when another worker of the database holds it: that one
//!    will see this request's transaction);
//! 2. waits until, for `turboinfer.prepare_delay`, no requesting transaction was open when it
//!    looked (every [`TICK_MS`]); lets `WAITING` go and checks once more;
//! 3. waits for `PREPARING` (a worker of the database still preparing);
//! 4. in one transaction, as the role that made the change with its `search_path`, does what
//!    `turboinfer_prewarm()` does (`linking::prewarm`: the same code), and writes one LOG line of
//!    what it did (or why it did nothing);
//! 5. exits, releasing the model and the KV cache.
//!
//! Every failure (no model, a model that fails to load, a role or database gone, a schema without
//! tables) is caught and logged as one line; SIGTERM (server shutdown, `pg_terminate_backend`)
//! ends it at the next check with PostgreSQL's usual FATAL, and SIGINT (`pg_cancel_backend`)
//! cancels the preparation. It is never restarted.

use super::request::{message, Request};
use crate::pg::prepare_locks::{tag, PREPARING, REQUESTS, WAITING};
use crate::pg::{gucs, latch, linking, locks};
use pgrx::pg_sys;
use pgrx::PgTryBuilder;
use std::ffi::{CStr, CString};
use std::time::{Duration, Instant};

/// How often the waiting worker looks for open requesting transactions: a probe costs a few
/// microseconds, and a DDL transaction lasting longer than this is seen open (a shorter one is
/// committed before the catalog is read anyway, so only the idle clock can miss it).
const TICK_MS: i64 = 100;

const EXCLUSIVE: pg_sys::LOCKMODE = pg_sys::ExclusiveLock as pg_sys::LOCKMODE;

unsafe extern "C-unwind" {
    /// PostgreSQL's SIGTERM handler for backends (postgres.c), by its C symbol: pgrx's
    /// `pg_sys::die` is a Rust wrapper, not a signal handler.
    fn die(signal: std::ffi::c_int);
}

/// The worker's entry point (named in the registration).
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn turboinfer_prepare_main(_arg: pg_sys::Datum) {
    // SAFETY: PostgreSQL's own handler for SIGTERM (sets ProcDiePending and the latch; the next
    // interrupt check ends the process with FATAL), instead of bgworker_die, which would raise
    // FATAL inside the signal handler, across Rust frames. Then signals are let in.
    unsafe {
        crate::pg::compat::set_signal_handler(pg_sys::SIGTERM as i32, die);
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    // SAFETY: MyBgworkerEntry is this worker's registration.
    let request = Request::decode(unsafe { &(*pg_sys::MyBgworkerEntry).bgw_extra });
    // A database dropped since: FATAL "database ... does not exist", one line, no restart.
    // SAFETY: connects once, before any database access.
    unsafe {
        pg_sys::BackgroundWorkerInitializeConnectionByOid(request.db, request.session_user, 0)
    };
    if wait_quiet() {
        activity("waiting for the preparation before it");
        while !locks::try_acquire(&tag(PREPARING), EXCLUSIVE, true) {
            pause();
        }
        activity("preparing the schema prefix");
        let line = match in_transaction(|| prepare(&request)) {
            Ok(line) => line,
            Err(e) => format!("nothing prepared: {e}"),
        };
        pgrx::log!("turboinfer prepare: {line}");
    }
    // SAFETY: ends this process through PostgreSQL's exit path; status 0 unregisters the worker.
    unsafe { pg_sys::proc_exit(0) };
}

/// Steps 1 and 2: true once the schema is quiet and this worker is the one to prepare; false when
/// another worker of the database waits already (it will prepare).
fn wait_quiet() -> bool {
    let waiting = tag(WAITING);
    if !locks::try_acquire(&waiting, EXCLUSIVE, true) {
        return false;
    }
    let delay = Duration::from_millis(gucs::PREPARE_DELAY.get().max(0) as u64);
    activity(&format!("waiting for {} ms without schema changes", delay.as_millis()));
    let mut quiet_since = Instant::now();
    loop {
        if !no_requester() {
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() >= delay {
            locks::release(&waiting, EXCLUSIVE, true);
            // A request made before the release holds REQUESTS until its transaction ends; one
            // made after finds WAITING free and starts the next worker.
            if no_requester() {
                return true;
            }
            if !locks::try_acquire(&waiting, EXCLUSIVE, true) {
                return false; // a worker started meanwhile waits instead
            }
            quiet_since = Instant::now();
        }
        pause();
    }
}

/// True when no transaction that asked for a preparation is still open.
fn no_requester() -> bool {
    let requests = tag(REQUESTS);
    let free = locks::try_acquire(&requests, EXCLUSIVE, true);
    if free {
        locks::release(&requests, EXCLUSIVE, true);
    }
    free
}

/// Sleeps one tick on the latch, then checks interrupts (SIGTERM, SIGINT).
fn pause() {
    latch::wait(TICK_MS);
    pgrx::check_for_interrupts!();
}

/// Shows `what` as the worker's `query` in pg_stat_activity.
fn activity(what: &str) {
    let text = CString::new(format!("turboinfer prepare: {what}")).unwrap_or_default();
    // SAFETY: copies the text into this backend's status entry.
    unsafe { pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_RUNNING, text.as_ptr()) };
}

/// Step 4, inside a transaction: the LOG line's text.
fn prepare(request: &Request) -> String {
    // SAFETY: catalog lookups inside the transaction; a name copied at once (NULL: gone).
    let name = |p: *mut std::ffi::c_char| {
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let db = name(unsafe { pg_sys::get_database_name(request.db) }).unwrap_or_default();
    let Some(role) = name(unsafe { pg_sys::GetUserNameFromId(request.role, true) }) else {
        return format!("database \"{db}\": the role {} is gone", request.role.to_u32());
    };
    let path = request.search_path.as_deref().unwrap_or("(the role's default)");
    let whose = format!("database \"{db}\", role \"{role}\", search_path {path}");
    // Read in this session: ALTER DATABASE ... SET turboinfer.background_prepare = off counts.
    if !gucs::BACKGROUND_PREPARE.get() {
        return format!("{whose}: nothing prepared: turboinfer.background_prepare is off");
    }
    // SAFETY: a catalog lookup inside the transaction.
    if unsafe { pg_sys::get_extension_oid(c"turboinfer".as_ptr(), true) } == pg_sys::InvalidOid {
        return format!("{whose}: nothing prepared: the extension is not installed");
    }
    // SAFETY: this process's identity for the rest of its life (it prepares once, then exits);
    // privileges are checked as that role, as its own session would.
    unsafe {
        if request.role != request.session_user {
            pg_sys::SetUserIdAndSecContext(
                request.role,
                pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32,
            );
        }
        if let Some(p) = request.search_path.as_deref().and_then(|p| CString::new(p).ok()) {
            pg_sys::SetConfigOption(
                c"search_path".as_ptr(),
                p.as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
            );
        }
    }
    let p = linking::prewarm(None);
    format!("{whose}: {p}")
}

/// Runs `f` in a transaction: committed when it returns, rolled back when it raises an ERROR (or
/// panics), whose message is returned instead.
fn in_transaction(f: impl FnOnce() -> String) -> Result<String, String> {
    let f = std::panic::AssertUnwindSafe(f);
    // SAFETY: the worker's own transaction, begun and ended here on every path.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
        let out = PgTryBuilder::new(move || {
            let f = f;
            Ok((f.0)())
        })
        .catch_others(|e| Err(message(&e)))
        .execute();
        if out.is_ok() {
            pg_sys::PopActiveSnapshot();
            pg_sys::CommitTransactionCommand();
        } else {
            pg_sys::AbortCurrentTransaction();
        }
        out
    }
}
