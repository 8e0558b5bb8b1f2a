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

/// Makes every `prefix.*` setting name that is not defined an error from now on, and reports
/// and removes the placeholders already set under it (from postgresql.conf, ALTER SYSTEM, ...).
///
/// PostgreSQL 15 added `MarkGUCPrefixReserved`, which replaced `EmitWarningsOnPlaceholders`.
/// PostgreSQL 14 has only the latter: it warns about (and keeps) the placeholders set so far,
/// and a mistyped name set later is accepted as a placeholder, not refused.
pub fn reserve_setting_prefix(prefix: &std::ffi::CStr) {
    // SAFETY: a NUL-terminated string; called from _PG_init, after the definitions.
    #[cfg(feature = "pg14")]
    unsafe {
        pg_sys::EmitWarningsOnPlaceholders(prefix.as_ptr())
    }
    #[cfg(not(feature = "pg14"))]
    unsafe {
        pg_sys::MarkGUCPrefixReserved(prefix.as_ptr())
    }
}

/// Parse analysis of one raw statement without parameters, against the live catalog.
///
/// PostgreSQL 15 renamed `parse_analyze` to `parse_analyze_fixedparams` ("Rename
/// parse_analyze() to parse_analyze_fixedparams()", beside the new `parse_analyze_withcb`); the
/// arguments are the same.
///
/// # Safety
/// `raw` comes from `raw_parser` on `sql` in the current memory context; an ERROR raised here
/// unwinds through the caller, which must be guarded.
pub unsafe fn parse_analyze(
    raw: *mut pg_sys::RawStmt,
    sql: *const std::ffi::c_char,
) -> *mut pg_sys::Query {
    #[cfg(feature = "pg14")]
    let analyse = pg_sys::parse_analyze;
    #[cfg(not(feature = "pg14"))]
    let analyse = pg_sys::parse_analyze_fixedparams;
    analyse(raw, sql, std::ptr::null_mut(), 0, std::ptr::null_mut())
}

/// A `Var`'s range-table index, as the `int` it is since PostgreSQL 15 (where `Var.varno`
/// became `int`); an `Index` (unsigned) before.
///
/// # Safety
/// `var` points to a live `Var` node.
pub unsafe fn var_number(var: *const pg_sys::Var) -> i32 {
    #[cfg(feature = "pg14")]
    return (*var).varno as i32;
    #[cfg(not(feature = "pg14"))]
    return (*var).varno;
}

/// The node tag of a `MERGE` statement: PostgreSQL 15 added `MERGE`; before, no statement has it.
pub const MERGE_STMT: Option<pg_sys::NodeTag> = {
    #[cfg(feature = "pg14")]
    let tag = None;
    #[cfg(not(feature = "pg14"))]
    let tag = Some(pg_sys::NodeTag::T_MergeStmt);
    tag
};

/// Installs `handler` for signal `signo` in this backend or background worker.
///
/// PostgreSQL 18 gave the backend its own `pqsignal_be`; in backend code `pqsignal` is a macro
/// for it (port.h), which the bindings do not see.
///
/// # Safety
/// `handler` is async-signal-safe, as every PostgreSQL signal handler.
pub unsafe fn set_signal_handler(
    signo: i32,
    handler: unsafe extern "C-unwind" fn(std::ffi::c_int),
) {
    #[cfg(feature = "pg18")]
    pg_sys::pqsignal_be(signo, Some(handler));
    #[cfg(not(feature = "pg18"))]
    pg_sys::pqsignal(signo, Some(handler));
}

/// The attributes (columns) of a tuple descriptor, in order.
///
/// PostgreSQL 18 put a `CompactAttribute` array first in `TupleDescData` ("Introduce
/// CompactAttribute array in TupleDesc"); the full `FormData_pg_attribute` array follows it and
/// is reached through `TupleDescAttr`, no longer as the `attrs` member.
///
/// # Safety
/// `desc` is a live tuple descriptor that outlives the returned slice, which no one else
/// accesses meanwhile. Only fields outside the compact attributes (such as the name) may be
/// changed through it: the compact copy of the others is not refreshed.
pub unsafe fn tuple_desc_attributes<'a>(
    desc: pg_sys::TupleDesc,
) -> &'a mut [pg_sys::FormData_pg_attribute] {
    let natts = usize::try_from((*desc).natts).unwrap_or(0);
    #[cfg(feature = "pg18")]
    let attrs = if natts == 0 {
        std::ptr::NonNull::dangling().as_ptr()
    } else {
        pg_sys::TupleDescAttr(desc, 0)
    };
    #[cfg(not(feature = "pg18"))]
    let attrs = (*desc).attrs.as_mut_ptr();
    std::slice::from_raw_parts_mut(attrs, natts)
}

/// The grouping expression a top-level `Var` of the grouping step stands for; any other node as
/// it is.
///
/// PostgreSQL 18 added a range-table entry for the grouping step (`RTE_GROUP`, "Introduce an
/// RTE for the grouping step"): after parse analysis, a grouping expression in the target list
/// or HAVING is a `Var` of that entry, whose `groupexprs` holds the expressions themselves (a
/// grouped column is then no longer a `Var` of its table). Before 18 the expressions are there
/// as written.
///
/// # Safety
/// `rtable` is the range table of the query level `node` belongs to; both are live.
pub unsafe fn grouped_expression(
    rtable: *mut pg_sys::List,
    node: *mut pg_sys::Node,
) -> *mut pg_sys::Node {
    #[cfg(feature = "pg18")]
    if !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_Var {
        let v = node as *mut pg_sys::Var;
        let entries = super::nodes::list_ptrs(rtable);
        let rte = usize::try_from((*v).varno)
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|i| entries.get(i))
            .map(|&p| p as *mut pg_sys::RangeTblEntry);
        if let Some(rte) =
            rte.filter(|&r| (*v).varlevelsup == 0 && (*r).rtekind == pg_sys::RTEKind::RTE_GROUP)
        {
            let exprs = super::nodes::list_ptrs((*rte).groupexprs);
            let at = usize::try_from((*v).varattno).ok().and_then(|n| n.checked_sub(1));
            if let Some(&e) = at.and_then(|i| exprs.get(i)) {
                return e as *mut pg_sys::Node;
            }
        }
    }
    #[cfg(not(feature = "pg18"))]
    let _ = rtable;
    node
}
