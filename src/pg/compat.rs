//! The PostgreSQL server API where it differs between the majors this library builds for
//! (14 to 18, one pgrx cfg feature each). Every difference lives here, named after the server
//! change that made it; the rest of the glue calls these and never learns the server version.
//! docs/postgres-versions.md lists them.

use pgrx::pg_sys;

/// Checks the caller's privileges on every relation a query's range table reads (raising the
/// server's "permission denied for table" error, SQLSTATE 42501, on the first it lacks).
///
/// PostgreSQL 16 moved the permission fields out of `RangeTblEntry` into the query's
/// `rteperminfos` ("Rework query relation permission checking"): the check is
/// `ExecCheckPermissions(rtable, rteperminfos, ...)`; before, `ExecCheckRTPerms(rtable, ...)`.
///
/// # Safety
/// `query` is an analysed `Query` of the current memory context; an ERROR raised here unwinds
/// through the caller, which must be guarded (`pg_guard` or `PgTryBuilder`).
pub unsafe fn check_range_table_privileges(query: *mut pg_sys::Query) {
    #[cfg(any(feature = "pg14", feature = "pg15"))]
    pg_sys::ExecCheckRTPerms((*query).rtable, true);
    #[cfg(not(any(feature = "pg14", feature = "pg15")))]
    pg_sys::ExecCheckPermissions((*query).rtable, (*query).rteperminfos, true);
}

/// This process's number in `ProcGlobal->allProcs` (its PGPROC slot).
///
/// PostgreSQL 17 replaced `MyProc->pgprocno` by the global `MyProcNumber` ("Replace BackendIds
/// with 0-based ProcNumbers").
pub fn my_proc_number() -> i32 {
    // SAFETY: MyProc / MyProcNumber are set for every backend and background worker with shared
    // memory access, before any of our code runs in it.
    #[cfg(any(feature = "pg14", feature = "pg15", feature = "pg16"))]
    unsafe {
        (*pg_sys::MyProc).pgprocno
    }
    #[cfg(not(any(feature = "pg14", feature = "pg15", feature = "pg16")))]
    unsafe {
        pg_sys::MyProcNumber
    }
}
