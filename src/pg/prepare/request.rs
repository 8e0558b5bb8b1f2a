//! Asking for a preparation: the event trigger `turboinfer_schema_changed` on `ddl_command_end`
//! (the tags below) and `turboinfer_prepare_request()`, which the extension's install and upgrade
//! scripts call last. Neither may fail or slow the DDL: no model work and no wait here (lock
//! probes without waiting, one worker registration), everything inside a subtransaction whose
//! failure becomes a LOG line.
//!
//! The trigger function is C, not PL/pgSQL: it must see the caller's role and `search_path`
//! (the preparation is for them), which a SECURITY DEFINER function with a fixed `search_path`
//! (the pattern of `turboinfer_comment_changed`) would hide; and C resolves no names through the
//! caller's `search_path`, which is what that pattern guards against. An event trigger's function
//! is called without an EXECUTE check, so EXECUTE is revoked from PUBLIC on both functions.

use crate::pg::prepare_locks::{tag, REQUESTS, WAITING};
use crate::pg::{gucs, locks, subxact};
use pgrx::bgworkers::BackgroundWorkerBuilder;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::{c_char, CStr};

/// What the worker is asked: where, as whom, with which search path. Travels in the worker's
/// `bgw_extra` (128 bytes): the three OIDs (little-endian), then the search path NUL-terminated,
/// or a lone NUL byte for none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Request {
    pub db: pg_sys::Oid,
    /// The role that logged in: the worker connects as it (it can log in; the current role
    /// need not: PostgreSQL 15 refuses a worker connection as a NOLOGIN role).
    pub session_user: pg_sys::Oid,
    /// The role whose view is prepared (`current_user` of the DDL).
    pub role: pg_sys::Oid,
    /// The DDL session's `search_path`; `None`: the worker's own (the login role's and
    /// database's settings), when there was none to take or it does not fit.
    pub search_path: Option<String>,
}

/// Size of `bgw_extra`.
const EXTRA: usize = 128;
/// The longest search path that travels: `bgw_extra` less the three OIDs and the NUL.
pub(super) const MAX_SEARCH_PATH: usize = EXTRA - 12 - 1;

impl Request {
    pub fn encode(&self) -> [c_char; EXTRA] {
        let mut out = [0 as c_char; EXTRA];
        let oids = [self.db, self.session_user, self.role];
        for (i, oid) in oids.iter().enumerate() {
            for (j, b) in oid.to_u32().to_le_bytes().into_iter().enumerate() {
                out[4 * i + j] = b as c_char;
            }
        }
        if let Some(p) = self.search_path.as_deref().filter(|p| p.len() <= MAX_SEARCH_PATH) {
            for (j, b) in p.bytes().enumerate() {
                out[12 + j] = b as c_char;
            }
        }
        out
    }

    pub fn decode(extra: &[c_char; EXTRA]) -> Request {
        let bytes: Vec<u8> = extra.iter().map(|&c| c as u8).collect();
        let oid = |i: usize| {
            let b = [bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]];
            pg_sys::Oid::from(u32::from_le_bytes(b))
        };
        let path = &bytes[12..];
        let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
        let search_path = (end > 0).then(|| String::from_utf8_lossy(&path[..end]).into_owned());
        Request { db: oid(0), session_user: oid(1), role: oid(2), search_path }
    }
}

/// `turboinfer_schema_changed()`: the event trigger function (`RETURNS event_trigger`, declared
/// in the SQL below). Asks for a preparation with the caller's role and search path.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn turboinfer_schema_changed(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo is the call's; an event trigger passes an EventTriggerData node as context.
    let fired = unsafe {
        let ctx = (*fcinfo).context;
        !ctx.is_null() && (*ctx).type_ == pg_sys::NodeTag::T_EventTriggerData
    };
    if !fired {
        error!("turboinfer_schema_changed: not called by the event trigger manager");
    }
    // SAFETY: a GUC lookup by name on the backend thread (the value is copied at once).
    let path = unsafe {
        let p = pg_sys::GetConfigOption(c"search_path".as_ptr(), true, false);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    };
    ask(path);
    pg_sys::Datum::from(0)
}

/// The V1 calling convention record of `turboinfer_schema_changed` (what `PG_FUNCTION_INFO_V1`
/// declares; pgrx makes it only for `#[pg_extern]` functions, which cannot return
/// `event_trigger`).
#[unsafe(no_mangle)]
pub extern "C" fn pg_finfo_turboinfer_schema_changed() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// `turboinfer_prepare_request()`: asks for a preparation of the caller's view with the login
/// role's default search path (an extension script runs with `search_path` set to the
/// extension's schema, not the session's). Called by the install and upgrade scripts; not
/// callable by PUBLIC.
#[pg_extern(volatile, parallel_unsafe)]
fn turboinfer_prepare_request() {
    ask(None);
}

/// Asks for a preparation unless the setting is off, this is a hot standby (no DDL happens there;
/// a standby prepares with `turboinfer_prewarm()`) or `pg_upgrade` is restoring. Any failure is a
/// LOG line: the DDL goes on.
fn ask(search_path: Option<String>) {
    // SAFETY: plain reads of server state on the backend thread.
    let (upgrade, recovery) = unsafe { (pg_sys::IsBinaryUpgrade, pg_sys::RecoveryInProgress()) };
    if !gucs::BACKGROUND_PREPARE.get() || upgrade || recovery {
        return;
    }
    match subxact::kept(|| schedule(search_path)) {
        Ok(true) => {}
        Ok(false) => pgrx::log!(
            "turboinfer: no background worker slot free (max_worker_processes) to prepare the schema prefix; turboinfer_prewarm() does it"
        ),
        Err(e) => pgrx::log!("turboinfer: cannot ask for a background preparation: {}", message(&e)),
    }
}

/// Marks this transaction as a requester and starts a worker unless one is already waiting.
/// False when no worker slot was free.
fn schedule(search_path: Option<String>) -> bool {
    const SHARE: pg_sys::LOCKMODE = pg_sys::ShareLock as pg_sys::LOCKMODE;
    const EXCLUSIVE: pg_sys::LOCKMODE = pg_sys::ExclusiveLock as pg_sys::LOCKMODE;
    // Not taken only in the instant a worker probes it on its way to the catalog: that worker
    // has let WAITING go, so a new one is started just below.
    locks::try_acquire(&tag(REQUESTS), SHARE, false);
    let waiting = tag(WAITING);
    if !locks::try_acquire(&waiting, EXCLUSIVE, false) {
        return true; // a worker waits, and will wait for this transaction
    }
    locks::release(&waiting, EXCLUSIVE, false);
    // SAFETY: plain reads of the session's identity on the backend thread.
    let request = unsafe {
        Request {
            db: pg_sys::MyDatabaseId,
            session_user: pg_sys::GetSessionUserId(),
            role: pg_sys::GetUserId(),
            search_path,
        }
    };
    start(&request)
}

/// Registers the worker for `request`; false when no slot was free.
fn start(request: &Request) -> bool {
    let builder = BackgroundWorkerBuilder::new("turboinfer prepare")
        .set_type("turboinfer prepare")
        .set_library("turboinfer")
        .set_function("turboinfer_prepare_main")
        .enable_spi_access()
        // Never restarted: a failed preparation is logged, and the next DDL asks again.
        .set_restart_time(None);
    let mut bgw: pg_sys::BackgroundWorker = (&builder).into();
    bgw.bgw_extra = request.encode();
    let mut handle: *mut pg_sys::BackgroundWorkerHandle = std::ptr::null_mut();
    // SAFETY: a filled-in registration; false (no slot) is not an error. The handle is not kept:
    // nobody waits for the worker.
    unsafe { pg_sys::RegisterDynamicBackgroundWorker(&mut bgw, &mut handle) }
}

/// The message of a caught error.
pub(super) fn message(e: &pgrx::pg_sys::panic::CaughtError) -> String {
    use pgrx::pg_sys::panic::CaughtError;
    match e {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => r.message().to_string(),
        CaughtError::RustPanic { ereport, .. } => ereport.message().to_string(),
    }
}

pgrx::extension_sql!(
    r#"
-- Background preparation (src/pg/prepare/): after DDL that changes what nl2sql() shows, a
-- background worker prepares the schema prefix of the role that made the change, with its
-- search_path (turboinfer.background_prepare). The function is C: it reads the caller's role
-- and search_path and resolves no name; an event trigger's function needs no EXECUTE privilege,
-- so nobody may call it directly.
CREATE FUNCTION turboinfer_schema_changed() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'turboinfer_schema_changed';
CREATE EVENT TRIGGER turboinfer_schema_changed ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'DROP TABLE', 'CREATE TABLE AS', 'SELECT INTO',
        'CREATE VIEW', 'ALTER VIEW', 'DROP VIEW',
        'CREATE MATERIALIZED VIEW', 'ALTER MATERIALIZED VIEW', 'DROP MATERIALIZED VIEW',
        'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE', 'DROP FOREIGN TABLE', 'IMPORT FOREIGN SCHEMA',
        'CREATE SCHEMA', 'ALTER SCHEMA', 'DROP SCHEMA', 'COMMENT', 'GRANT', 'REVOKE',
        'ALTER TYPE', 'DROP TYPE', 'ALTER DOMAIN', 'DROP DOMAIN', 'DROP OWNED',
        'CREATE EXTENSION', 'ALTER EXTENSION', 'DROP EXTENSION')
    EXECUTE FUNCTION turboinfer_schema_changed();
REVOKE EXECUTE ON FUNCTION turboinfer_schema_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION turboinfer_prepare_request() FROM PUBLIC;
"#,
    name = "turboinfer_prepare_trigger",
    requires = [turboinfer_prepare_request],
);

pgrx::extension_sql!(
    r#"
-- Last: the new extension's first preparation (src/pg/prepare/).
SELECT @extschema@.turboinfer_prepare_request();
"#,
    name = "turboinfer_prepare_first",
    finalize,
);
