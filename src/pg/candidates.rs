//! Candidate execution for nl2sql (`turboinfer.candidate_execution`): each validated candidate
//! runs read-only in a subtransaction that is always rolled back, and its rows become a digest
//! that equal results share (see `nl2sql::candidates`).

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::PgTryBuilder;
use std::hash::{Hash, Hasher};

/// Rows read per candidate: enough to tell typical answers apart; a result larger than this is
/// compared on its first rows (in the order the statement gives them).
const CANDIDATE_ROWS: i64 = 1000;

/// The digest of `sql`'s rows (order-insensitive), or `None` when it failed to run. Errors that
/// are not about the statement (cancel, timeout, shutdown, out of memory) are re-raised.
pub fn result_digest(sql: &str) -> Option<u64> {
    // Row text of every column whatever the names (`q::text` is the row's record literal).
    let wrapped = format!("SELECT q::text FROM ({sql}) AS q");
    enum Ran {
        Rows(Vec<String>),
        Failed,
        Propagate(CaughtError),
    }
    // SAFETY: the subtransaction pattern of validate::analyze (PL/Python's): remember the memory
    // context and resource owner, start an internal subtransaction, run, roll it back, restore.
    let ran = unsafe {
        let oldcontext = pg_sys::CurrentMemoryContext;
        let oldowner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(oldcontext);
        let ran = PgTryBuilder::new(|| {
            // Read-only for the subtransaction: nothing the statement reaches may write.
            pg_sys::set_config_option(
                c"transaction_read_only".as_ptr(),
                c"on".as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_LOCAL,
                true,
                0,
                false,
            );
            let rows = Spi::connect(|client| {
                let table = client.select(&wrapped, Some(CANDIDATE_ROWS), &[])?;
                let mut rows = Vec::new();
                for row in table {
                    rows.push(row.get::<String>(1)?.unwrap_or_default());
                }
                Ok::<_, pgrx::spi::Error>(rows)
            });
            match rows {
                Ok(r) => Ran::Rows(r),
                Err(_) => Ran::Failed,
            }
        })
        .catch_others(|e| match e {
            CaughtError::PostgresError(ref r) | CaughtError::ErrorReport(ref r)
                if !super::validate::must_propagate_code(r.sql_error_code() as i32) =>
            {
                Ran::Failed
            }
            other => Ran::Propagate(other),
        })
        .execute();
        pg_sys::RollbackAndReleaseCurrentSubTransaction();
        pg_sys::MemoryContextSwitchTo(oldcontext);
        pg_sys::CurrentResourceOwner = oldowner;
        ran
    };
    match ran {
        Ran::Rows(mut rows) => {
            rows.sort_unstable();
            let mut h = std::collections::hash_map::DefaultHasher::new();
            rows.hash(&mut h);
            Some(h.finish())
        }
        Ran::Failed => None,
        Ran::Propagate(e) => e.rethrow(),
    }
}
