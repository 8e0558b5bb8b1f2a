//! `turboinfer_stat` (view over `turboinfer_stat()`) and `turboinfer_stat_reset()`: counters of
//! the nl2sql family's calls per (database, role), in the style of pg_stat_statements.
//!
//! Two scopes, one table type ([`Table`], plain `Copy` data):
//! - `shared`: the library is in `shared_preload_libraries`; the table lives in shared memory
//!   (requested in `_PG_init` through pgrx's `pg_shmem_init!`, i.e. `shmem_request_hook` +
//!   `shmem_startup_hook`) under one LWLock, and counts every backend's calls;
//! - `backend`: the library was loaded by a call; the table lives in this backend and counts its
//!   own calls only (lost when the session ends).
//!
//! A call is recorded once, by [`super::track`], whether it answered or raised an ERROR.

use super::encoding::Jsonb;
use crate::nl2sql::{Outcome, PrefixSource};
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PgLwLock, PgSqlErrorCode};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

/// Rows of the table: one per (database, role) that called the nl2sql family. A server has a
/// handful of databases and of roles that ask questions; 256 pairs (e.g. 16 databases x 16 roles)
/// cost 68 KiB of shared memory (272 bytes a row). Pairs beyond it are counted in the overflow
/// row (NULL dbid and userid) rather than evicting a row: totals stay right and no counts vanish
/// (rows are keyed by database and role, not by query text: they do not churn like
/// pg_stat_statements' entries).
pub const MAX_ENTRIES: usize = 256;
/// SQLSTATEs counted separately per row; the rest go to the `other` bucket. The family raises
/// about fifteen distinct SQLSTATEs (src/pg/errors.rs), of which one role meets a few.
pub const MAX_SQLSTATES: usize = 8;

/// The counters of one row.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Counters {
    pub calls: i64,
    pub errors: i64,
    pub repairs: i64,
    pub cache_hits_memory: i64,
    pub cache_hits_file: i64,
    pub cache_misses: i64,
    pub prompt_tokens: i64,
    pub generated_tokens: i64,
    pub forward_passes: i64,
    pub total_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub validate_ms: f64,
    /// Calls whose forward passes the batch worker ran, and the time they waited for them.
    pub batch_calls: i64,
    pub batch_wait_ms: f64,
    /// (packed SQLSTATE, count); code 0 = free slot.
    pub sqlstates: [(i32, i64); MAX_SQLSTATES],
    /// Errors whose SQLSTATE found no free slot.
    pub other_errors: i64,
}

/// One call, as recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sample {
    /// The packed SQLSTATE of the ERROR (or of the rejected answer), `None` when it answered.
    pub sqlstate: Option<i32>,
    pub repairs: i64,
    pub prefix: Option<PrefixSource>,
    pub prompt_tokens: i64,
    pub generated_tokens: i64,
    pub forward_passes: i64,
    pub total_ms: f64,
    pub prefill_ms: f64,
    pub decode_ms: f64,
    pub validate_ms: f64,
    /// The milliseconds it waited for the batch worker's passes, when the worker served it.
    pub batch_wait_ms: Option<f64>,
}

impl Sample {
    /// The sample of a call that ran the model (`sqlstate`: that of a rejected answer;
    /// `batch_wait_ms`: see the field).
    pub fn of(
        o: &Outcome,
        sqlstate: Option<i32>,
        total_ms: f64,
        batch_wait_ms: Option<f64>,
    ) -> Sample {
        Sample {
            sqlstate,
            repairs: o.attempts.len().saturating_sub(1) as i64,
            prefix: Some(o.prefix_source),
            prompt_tokens: o.tokens.prompt as i64,
            generated_tokens: o.tokens.generated as i64,
            forward_passes: o.speculation.stats.forward_passes as i64,
            total_ms,
            prefill_ms: o.timings.prefill_ms,
            decode_ms: o.timings.decode_ms,
            validate_ms: o.timings.validate_ms,
            batch_wait_ms,
        }
    }
}

impl Counters {
    /// Adds one call.
    fn add(&mut self, s: &Sample) {
        self.calls += 1;
        self.repairs += s.repairs;
        match s.prefix {
            Some(PrefixSource::Memory) => self.cache_hits_memory += 1,
            Some(PrefixSource::File) => self.cache_hits_file += 1,
            Some(PrefixSource::Computed | PrefixSource::Partial) => self.cache_misses += 1,
            None => {}
        }
        self.prompt_tokens += s.prompt_tokens;
        self.generated_tokens += s.generated_tokens;
        self.forward_passes += s.forward_passes;
        self.total_ms += s.total_ms;
        self.prefill_ms += s.prefill_ms;
        self.decode_ms += s.decode_ms;
        self.validate_ms += s.validate_ms;
        if let Some(ms) = s.batch_wait_ms {
            self.batch_calls += 1;
            self.batch_wait_ms += ms;
        }
        if let Some(code) = s.sqlstate {
            self.errors += 1;
            let slot = (self.sqlstates.iter().position(|(c, _)| *c == code))
                .or_else(|| self.sqlstates.iter().position(|(c, _)| *c == 0));
            match slot {
                Some(i) => self.sqlstates[i] = (code, self.sqlstates[i].1 + 1),
                None => self.other_errors += 1,
            }
        }
    }

    /// `{"42703": 3, ..., "other": n}` (`other` only when some error found no slot).
    fn errors_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        let mut codes: Vec<_> = self.sqlstates.iter().filter(|(c, _)| *c != 0).collect();
        codes.sort_by_key(|(c, _)| sqlstate(*c));
        for (c, n) in codes {
            m.insert(sqlstate(*c), (*n).into());
        }
        if self.other_errors > 0 {
            m.insert("other".into(), self.other_errors.into());
        }
        serde_json::Value::Object(m)
    }
}

/// The five characters of a packed SQLSTATE (PostgreSQL's MAKE_SQLSTATE: six bits per character,
/// first character lowest, each offset from '0').
pub fn sqlstate(code: i32) -> String {
    (0..5).map(|i| char::from(b'0' + ((code >> (6 * i)) & 0x3F) as u8)).collect()
}

/// A row: the (database, role) it counts and its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct Entry {
    used: bool,
    dbid: u32,
    userid: u32,
    c: Counters,
}

// 272 bytes a row: the shared memory size stated at MAX_ENTRIES.
const _: () = assert!(std::mem::size_of::<Entry>() == 272);

/// The whole table: plain data, valid as all zeroes, no pointers (it may live in shared memory).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Table {
    entries: [Entry; MAX_ENTRIES],
    /// Calls of pairs that found no free row.
    overflow: Counters,
    /// When the counters were last reset (or created): a PostgreSQL TimestampTz.
    reset_at: i64,
}

// SAFETY: Table is Copy data without pointers or references, valid in any process.
unsafe impl pgrx::PGRXSharedMemory for Table {}

impl Table {
    /// An empty table reset at `now`.
    fn new(now: i64) -> Table {
        Table {
            entries: [Entry::default(); MAX_ENTRIES],
            overflow: Counters::default(),
            reset_at: now,
        }
    }

    /// Adds a call of (dbid, userid).
    fn add(&mut self, dbid: u32, userid: u32, s: &Sample) {
        let found =
            self.entries.iter().position(|e| e.used && e.dbid == dbid && e.userid == userid);
        let row = found.or_else(|| self.entries.iter().position(|e| !e.used));
        match row {
            Some(i) => {
                let e = &mut self.entries[i];
                if !e.used {
                    *e = Entry { used: true, dbid, userid, c: Counters::default() };
                }
                e.c.add(s);
            }
            None => self.overflow.add(s),
        }
    }

    /// The rows, by (dbid, userid), then the overflow row (key `None`) when it counted anything.
    fn rows(&self) -> Vec<(Option<(u32, u32)>, Counters)> {
        let mut rows: Vec<_> = self
            .entries
            .iter()
            .filter(|e| e.used)
            .map(|e| (Some((e.dbid, e.userid)), e.c))
            .collect();
        rows.sort_by_key(|r| r.0);
        if self.overflow.calls > 0 {
            rows.push((None, self.overflow));
        }
        rows
    }
}

/// The shared table (scope `shared`), initialised only when the library is preloaded.
static SHARED: PgLwLock<Table> = unsafe { PgLwLock::new(c"turboinfer_stat") };
/// Whether [`SHARED`] was set up: set by `_PG_init` in the postmaster, inherited by its children.
static PRELOADED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This backend's table (scope `backend`), created at its first call.
    static LOCAL: RefCell<Option<Box<Table>>> = const { RefCell::new(None) };
}

/// Requests the shared table when the library is being preloaded (called from `_PG_init`).
/// Otherwise nothing: a backend that loads the library later counts in its own table.
// pg_shmem_init! tests the features of other PostgreSQL versions, which this crate lacks.
#[allow(unexpected_cfgs)]
pub fn init() {
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        // SAFETY: GetCurrentTimestamp only reads the clock (run by the shmem startup hook).
        pg_shmem_init!(SHARED = Table::new(unsafe { pg_sys::GetCurrentTimestamp() }));
        PRELOADED.store(true, Ordering::Relaxed);
    }
}

/// `shared` or `backend` (see the module doc).
fn scope() -> &'static str {
    if PRELOADED.load(Ordering::Relaxed) {
        "shared"
    } else {
        "backend"
    }
}

/// Runs `f` on the table of this scope (the shared one under its LWLock in exclusive mode when
/// `write`, shared mode otherwise).
fn with_table<R>(write: bool, f: impl FnOnce(&mut Table) -> R) -> R {
    if PRELOADED.load(Ordering::Relaxed) {
        if write {
            f(&mut SHARED.exclusive())
        } else {
            let mut copy = Box::new(*SHARED.share());
            f(&mut copy)
        }
    } else {
        LOCAL.with(|t| {
            let mut t = t.borrow_mut();
            // SAFETY: GetCurrentTimestamp only reads the clock.
            let table = t.get_or_insert_with(|| {
                Box::new(Table::new(unsafe { pg_sys::GetCurrentTimestamp() }))
            });
            f(table)
        })
    }
}

/// Records one call of the current role in the current database.
pub fn record(s: &Sample) {
    // SAFETY: plain reads of the backend's globals.
    let (dbid, userid) = unsafe { (pg_sys::MyDatabaseId.to_u32(), pg_sys::GetUserId().to_u32()) };
    with_table(true, |t| t.add(dbid, userid, s));
}

/// The packed code of `code` (for [`Sample::sqlstate`]).
pub fn code(code: PgSqlErrorCode) -> i32 {
    code as i32
}

/// `turboinfer_stat()`: one row per (database, role) that called nl2sql(), nl2sql_explain() or
/// nl2sql_run() since the last reset, plus an overflow row (NULL dbid and userid) when the table
/// was full. Every role sees every row: the rows hold counters only (no question, no SQL), and
/// database and role names are readable by everyone in the catalogs anyway. PARALLEL RESTRICTED:
/// a parallel worker has no backend-scope counters of the leader.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_restricted)]
fn turboinfer_stat() -> TableIterator<
    'static,
    (
        name!(dbid, Option<pg_sys::Oid>),
        name!(userid, Option<pg_sys::Oid>),
        name!(calls, i64),
        name!(errors, i64),
        name!(errors_by_sqlstate, Jsonb),
        name!(repairs, i64),
        name!(cache_hits_memory, i64),
        name!(cache_hits_file, i64),
        name!(cache_misses, i64),
        name!(prompt_tokens, i64),
        name!(generated_tokens, i64),
        name!(forward_passes, i64),
        name!(total_ms, f64),
        name!(prefill_ms, f64),
        name!(decode_ms, f64),
        name!(validate_ms, f64),
        name!(batch_calls, i64),
        name!(batch_wait_ms, f64),
        name!(scope, String),
        name!(stats_reset, Option<pgrx::datum::TimestampWithTimeZone>),
    ),
> {
    let (rows, reset_at) = with_table(false, |t| (t.rows(), t.reset_at));
    let reset = pgrx::datum::TimestampWithTimeZone::try_from(reset_at).ok();
    let scope = scope();
    TableIterator::new(rows.into_iter().map(move |(key, c)| {
        (
            key.map(|k| pg_sys::Oid::from(k.0)),
            key.map(|k| pg_sys::Oid::from(k.1)),
            c.calls,
            c.errors,
            Jsonb(c.errors_json()),
            c.repairs,
            c.cache_hits_memory,
            c.cache_hits_file,
            c.cache_misses,
            c.prompt_tokens,
            c.generated_tokens,
            c.forward_passes,
            c.total_ms,
            c.prefill_ms,
            c.decode_ms,
            c.validate_ms,
            c.batch_calls,
            c.batch_wait_ms,
            scope.to_string(),
            reset,
        )
    }))
}

/// `turboinfer_stat_reset()`: clears the counters of this scope (shared: every backend's, all
/// databases and roles; backend: this backend's) and returns the reset time. EXECUTE is revoked
/// from PUBLIC: superusers and roles granted EXECUTE may call it.
#[pg_extern(volatile, parallel_unsafe)]
fn turboinfer_stat_reset() -> pgrx::datum::TimestampWithTimeZone {
    // SAFETY: GetCurrentTimestamp only reads the clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    with_table(true, |t| *t = Table::new(now));
    pgrx::datum::TimestampWithTimeZone::try_from(now)
        .expect("the current time is a valid timestamp")
}

pgrx::extension_sql!(
    r#"
-- The readable form of turboinfer_stat(): database and role names next to their OIDs (NULL
-- names for a dropped database or role, and for the overflow row).
CREATE VIEW turboinfer_stat AS
SELECT s.dbid, d.datname, s.userid, r.rolname, s.calls, s.errors, s.errors_by_sqlstate,
       s.repairs, s.cache_hits_memory, s.cache_hits_file, s.cache_misses, s.prompt_tokens,
       s.generated_tokens, s.forward_passes, s.total_ms, s.prefill_ms, s.decode_ms,
       s.validate_ms, s.batch_calls, s.batch_wait_ms, s.scope, s.stats_reset
FROM turboinfer_stat() s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.userid;
GRANT SELECT ON turboinfer_stat TO PUBLIC;
REVOKE EXECUTE ON FUNCTION turboinfer_stat_reset() FROM PUBLIC;
"#,
    name = "turboinfer_stat_view",
    requires = [turboinfer_stat, turboinfer_stat_reset],
);
