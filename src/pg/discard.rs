//! The statements that reset a session for its next client forget the session's conversation
//! (`conversation.rs`), as they forget its prepared statements, settings or temporary tables:
//! `DISCARD ALL` (pgbouncer's `server_reset_query`), `RESET ALL` and `SET`/`RESET SESSION
//! AUTHORIZATION` (the reset of client-side pools that keep prepared statements:
//! `SET SESSION AUTHORIZATION DEFAULT; RESET ALL; ...`). A pooler runs one of them before
//! handing the backend to another client, whose follow-ups must not follow the previous
//! client's questions.
//!
//! A `ProcessUtility_hook`, installed when the library is loaded (`_PG_init`): it runs every
//! utility statement as before (the hook it replaced, or `standard_ProcessUtility`) and, after
//! one of these statements succeeded, drops the conversation (with the statement's transaction:
//! a `RESET ALL` rolled back leaves it). Nothing else is looked at or changed.

use pgrx::pg_sys;
use pgrx::prelude::*;

/// The hook that was installed before this one (another extension's), called in its place.
static mut PREVIOUS: pg_sys::ProcessUtility_hook_type = None;

/// Installs the hook, once per process (`_PG_init` runs once).
pub(super) fn install() {
    // SAFETY: `_PG_init` runs on the backend thread before any statement of this library; the
    // hook chain is a plain process-global that PostgreSQL reads on this thread only.
    unsafe {
        PREVIOUS = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// Whether `pstmt` resets the session for another client: `DISCARD ALL`, `RESET ALL`, or
/// `SET`/`RESET SESSION AUTHORIZATION` (any form: the grammar makes each a `VariableSetStmt`
/// named `session_authorization`).
///
/// # Safety
///
/// `pstmt` is the statement PostgreSQL passes to the hook (a valid `PlannedStmt`).
unsafe fn resets_session(pstmt: *mut pg_sys::PlannedStmt) -> bool {
    let stmt = unsafe { (*pstmt).utilityStmt };
    if stmt.is_null() {
        return false;
    }
    match unsafe { (*stmt).type_ } {
        pg_sys::NodeTag::T_DiscardStmt => unsafe {
            (*(stmt as *mut pg_sys::DiscardStmt)).target == pg_sys::DiscardMode::DISCARD_ALL
        },
        pg_sys::NodeTag::T_VariableSetStmt => {
            let set = unsafe { &*(stmt as *mut pg_sys::VariableSetStmt) };
            if set.kind == pg_sys::VariableSetKind::VAR_RESET_ALL {
                return true;
            }
            // SAFETY: a `VariableSetStmt`'s name is NULL (RESET ALL) or a NUL-terminated string.
            !set.name.is_null()
                && unsafe { std::ffi::CStr::from_ptr(set.name) }.to_bytes()
                    == b"session_authorization"
        }
        _ => false,
    }
}

#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL's arguments, passed on unchanged; read before running it (the
    // statement is not freed by running it, but read first all the same).
    let resets = unsafe { resets_session(pstmt) };
    // SAFETY: as above; `PREVIOUS` was set once by `install`.
    unsafe {
        match PREVIOUS {
            Some(previous) => {
                previous(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc)
            }
            None => pg_sys::standard_ProcessUtility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
    }
    // Reached only when the statement succeeded (an ERROR unwinds past it).
    if resets {
        super::conversation::forget();
    }
}
