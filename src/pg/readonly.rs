//! Running a validated query read-only, with the caller's privileges, and nothing it does kept:
//! [`run_read_only`]. Used by `nl2sql_run()` (`run.rs`); written to be reused for several
//! candidate answers of one question (run each, compare the rows).
//!
//! No SQL function exposes this executor for arbitrary SQL: it only ever runs statements that
//! passed `validate::validate` (one plain query, no data-modifying statement anywhere, no
//! function with side effects, every table and column readable by the caller).

use super::encoding;
use super::subxact;
use super::validate;
use crate::nl2sql::Rejection;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, CStr, CString};

/// The largest `row_limit`: every row is held in backend memory (SPI's copy, then its JSON text)
/// before the first one is returned, so a limit keeps one call's memory bounded (10,000 rows of a
/// few hundred bytes are a few MB). Answers to questions are read by people; bigger results
/// belong in a cursor over the SQL of `nl2sql()`.
pub const MAX_ROW_LIMIT: usize = 10_000;

/// The result of [`run_read_only`].
pub struct Rows {
    /// Each row as the text of one jsonb object (jsonb's canonical output, so equal rows have
    /// equal text): column names as keys, values as `to_jsonb` converts them (numbers, booleans,
    /// strings, nested arrays/objects, `null`). jsonb orders keys (shorter first, then bytewise),
    /// not by column position. UTF-8 (converted from the database encoding).
    pub rows: Vec<String>,
    /// True when the statement had more rows than `row_limit` (only the first `row_limit` are in
    /// `rows`).
    pub truncated: bool,
}

/// Why [`run_read_only`] returned no rows. Errors that are not about the statement (cancellation
/// and statement_timeout, 57xxx; insufficient resources, 53xxx; system errors, 58xxx; internal
/// errors, XX000) are never returned: they are re-raised, after the rollback, as they were.
pub enum RunError {
    /// The statement is not one plain read-only query (the shape check of
    /// `validate::check_query`); nothing ran. `errors::report_run` raises it as SQLSTATE 25006.
    Refused { sql: String, reason: Box<Rejection> },
    /// The statement raised an ERROR while running (e.g. 42501 permission denied, 22012 division
    /// by zero); everything it did was rolled back. The server's own report (SQLSTATE, message,
    /// detail, hint), re-raised unchanged by `errors::report_run`.
    Failed(Box<CaughtError>),
}

/// Runs `sql` read-only and returns at most `row_limit` of its rows (`row_limit` >= 1; callers
/// check it against [`MAX_ROW_LIMIT`]). The contract:
///
/// * `sql` must already have passed `validate::validate` (the full validation nl2sql() applies);
///   the shape check ([`validate::check_query`]: one plain query, no INSERT/UPDATE/DELETE/MERGE
///   anywhere, no INTO, no FOR UPDATE/SHARE) is repeated here as defence in depth, before
///   anything runs: [`RunError::Refused`].
/// * It runs inside an internal subtransaction that is ALWAYS rolled back (so nothing it does
///   persists, on success as on error), with `transaction_read_only` set on for that
///   subtransaction only (`SET LOCAL` semantics: reverted at its end), through SPI with
///   `read_only = true` (the current snapshot, no command counter increment), as the current
///   user (SECURITY INVOKER: the caller's privileges, row-level security and search_path).
/// * The executor stops after `row_limit + 1` rows: one more than returned, to tell whether the
///   result was cut ([`Rows::truncated`]).
/// * Rows are copied out of SPI memory (as jsonb text) before the rollback. Columns with the
///   same name are told apart: the second `x` becomes `x_2`, the third `x_3` (a suffix already
///   taken by another column is skipped); unnamed columns keep PostgreSQL's name `?column?`.
/// * The session's statement_timeout applies as usual (the caller's statement timer is running);
///   an ERROR of the statement comes back as [`RunError::Failed`]; cancellation, timeouts and
///   resource errors are re-raised (cancellation stays cancellation).
pub fn run_read_only(sql: &str, row_limit: usize) -> Result<Rows, RunError> {
    let refused =
        |reason: Rejection| RunError::Refused { sql: sql.to_string(), reason: Box::new(reason) };
    validate::check_query(sql).map_err(refused)?;
    let text = encoding::try_to_server(sql).map_err(|reason| refused(reason.into()))?;
    let c =
        CString::new(text).map_err(|_| refused("the statement contains a NUL character".into()))?;
    // SAFETY (of the call inside): SPI on the backend thread, inside the subtransaction.
    let outcome = subxact::rolled_back(|| unsafe { run_in_subtransaction(&c, row_limit) });
    match outcome {
        Ok(rows) => Ok(rows),
        Err(e) => match e.as_ref() {
            CaughtError::PostgresError(r) | CaughtError::ErrorReport(r)
                if !validate::must_propagate(&validate::sqlstate(r.sql_error_code() as i32)) =>
            {
                Err(RunError::Failed(e))
            }
            // Cancellation, resources, internal errors and Rust panics: as they were.
            _ => e.rethrow(),
        },
    }
}

/// The statement's rows (inside the subtransaction; an ERROR unwinds to the catch).
unsafe fn run_in_subtransaction(sql: &CStr, row_limit: usize) -> Rows {
    // SET LOCAL transaction_read_only = on: the subtransaction's GUC nesting level reverts it
    // at rollback (and AbortSubTransaction restores XactReadOnly). Setting it on is always
    // allowed; elevel ERROR: a failure raises.
    pg_sys::set_config_option(
        c"transaction_read_only".as_ptr(),
        c"on".as_ptr(),
        pg_sys::GucContext::PGC_USERSET,
        pg_sys::GucSource::PGC_S_SESSION,
        pg_sys::GucAction::GUC_ACTION_LOCAL,
        true,
        pgrx::PgLogLevel::ERROR as c_int,
        false,
    );
    pg_sys::SPI_connect();
    // One row more than returned tells whether the result was cut.
    let tcount =
        std::ffi::c_long::try_from(row_limit.saturating_add(1)).unwrap_or(std::ffi::c_long::MAX);
    let rc = pg_sys::SPI_execute(sql.as_ptr(), true, tcount);
    if rc != pg_sys::SPI_OK_SELECT as c_int {
        // check_query admits queries only: anything else is a bug (XX000, re-raised).
        pgrx::error!("nl2sql_run: SPI_execute returned {rc} for a query");
    }
    let table = pg_sys::SPI_tuptable;
    let processed = usize::try_from(pg_sys::SPI_processed).unwrap_or(usize::MAX);
    let kept = processed.min(row_limit);
    let mut rows = Vec::with_capacity(kept);
    if kept > 0 {
        let desc = distinct_names((*table).tupdesc);
        for i in 0..kept {
            rows.push(row_json(*(*table).vals.add(i), desc));
        }
    }
    pg_sys::SPI_finish();
    Rows { rows, truncated: processed > row_limit }
}

/// One row as jsonb text: the tuple as a composite datum of `desc`, `row_to_json` (the same
/// value conversions as `to_jsonb`), then `jsonb_in` and `jsonb_out` (jsonb's canonical form).
unsafe fn row_json(tuple: pg_sys::HeapTuple, desc: pg_sys::TupleDesc) -> String {
    let call = |f, arg: pg_sys::Datum| {
        pgrx::fcinfo::direct_function_call_as_datum(f, &[Some(arg)])
            .unwrap_or_else(|| pgrx::error!("nl2sql_run: a JSON conversion returned NULL"))
    };
    let record = pg_sys::heap_copy_tuple_as_datum(tuple, desc);
    let json = call(pg_sys::row_to_json, record);
    let json_text = pg_sys::text_to_cstring(json.cast_mut_ptr());
    let jsonb = call(pg_sys::jsonb_in, pg_sys::Datum::from(json_text));
    let out = call(pg_sys::jsonb_out, jsonb).cast_mut_ptr::<c_char>();
    let s = encoding::from_server(CStr::from_ptr(out).to_bytes());
    for p in [
        record.cast_mut_ptr(),
        json.cast_mut_ptr(),
        json_text.cast(),
        jsonb.cast_mut_ptr(),
        out.cast(),
    ] {
        pg_sys::pfree(p);
    }
    s
}

/// A blessed copy of `desc` (a record type `row_to_json` can look up) whose column names are
/// distinct: a repeated name gets `_2`, `_3`, ... (the first suffix no column has).
unsafe fn distinct_names(desc: pg_sys::TupleDesc) -> pg_sys::TupleDesc {
    let copy = pg_sys::CreateTupleDescCopy(desc);
    // Only names are changed: see compat::tuple_desc_attributes.
    let attrs = super::compat::tuple_desc_attributes(copy);
    let name = |a: &pg_sys::FormData_pg_attribute| {
        CStr::from_ptr(a.attname.data.as_ptr()).to_bytes().to_vec()
    };
    let mut taken: HashSet<Vec<u8>> = attrs.iter().map(name).collect();
    let mut seen: HashSet<Vec<u8>> = HashSet::new();
    for a in attrs.iter_mut() {
        let n = name(a);
        if seen.insert(n.clone()) {
            continue;
        }
        let mut k = 2;
        let renamed = loop {
            let suffix = format!("_{k}");
            // Names are at most NAMEDATALEN - 1 bytes: clip the base at a character boundary.
            let room = (pg_sys::NAMEDATALEN as usize - 1).saturating_sub(suffix.len());
            let keep = pg_sys::pg_mbcliplen(
                n.as_ptr() as *const c_char,
                c_int::try_from(n.len()).unwrap_or(0),
                c_int::try_from(room).unwrap_or(0),
            );
            let mut candidate = n[..usize::try_from(keep).unwrap_or(0)].to_vec();
            candidate.extend_from_slice(suffix.as_bytes());
            if !taken.contains(&candidate) {
                break candidate;
            }
            k += 1;
        };
        let c = CString::new(renamed.clone()).unwrap_or_default();
        pg_sys::namestrcpy(&mut a.attname, c.as_ptr());
        taken.insert(renamed.clone());
        seen.insert(renamed);
    }
    // An anonymous record type (the result of a query), registered for this backend.
    (*copy).tdtypeid = pg_sys::RECORDOID;
    (*copy).tdtypmod = -1;
    pg_sys::BlessTupleDesc(copy)
}
