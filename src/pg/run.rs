//! `nl2sql_run(question, row_limit)`: the answer to a question, not only its SQL. Generates the
//! SQL exactly as `nl2sql(question)` does (same code path, same validation, same ERRORs), then
//! runs it read-only with the caller's privileges through [`readonly::run_read_only`] (an
//! internal subtransaction that is always rolled back, `transaction_read_only` on, SPI
//! read-only, at most `row_limit` rows) and returns each row as one jsonb object.
//!
//! Why `SETOF jsonb` and not `SETOF record`: the columns are only known once the model has
//! written the query, inside the call; a record result would need a column definition list
//! (`AS t(a int, b text)`) from a caller who cannot know the columns before asking.

use super::encoding::{JsonbText, Text};
use super::errors::{raise, report_run};
use super::readonly::{self, MAX_ROW_LIMIT};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// `row_limit` as a count, or ERROR 22023 (before anything is generated).
fn checked_limit(row_limit: i32) -> usize {
    match usize::try_from(row_limit) {
        Ok(n) if (1..=MAX_ROW_LIMIT).contains(&n) => n,
        _ => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("nl2sql_run: row_limit must be between 1 and {MAX_ROW_LIMIT}, not {row_limit}"),
            None,
            Some(format!(
                "Pass a row_limit from 1 to {MAX_ROW_LIMIT} (e.g. nl2sql_run(question, 1000)); for bigger results run the SQL of nl2sql(question) yourself (in psql: SELECT nl2sql(question) \\gexec)."
            )),
        ),
    }
}

/// `nl2sql_run(question, row_limit DEFAULT 100)`: the rows answering `question` over the tables
/// the caller can see in the search path, each as one jsonb object (column names as keys; a
/// repeated name gets `_2`, `_3`, ...), at most `row_limit` (1 to 10000) of them, with a NOTICE
/// when the result was cut. Nothing the query does persists. STRICT: a NULL argument gives no rows.
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker)]
fn nl2sql_run(
    question: Text,
    row_limit: default!(i32, 100),
    follow_up: default!(bool, false),
) -> SetOfIterator<'static, JsonbText> {
    let limit = checked_limit(row_limit);
    let outcome = super::nl2sql::accepted_outcome(&question.0, follow_up);
    let sql = &outcome.sql;
    let rows = readonly::run_read_only(sql, limit).unwrap_or_else(|e| report_run(e));
    if rows.truncated {
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
            format!(
                "nl2sql_run: the result was cut at {limit} {} (row_limit); the query has more",
                if limit == 1 { "row" } else { "rows" }
            ),
            "nl2sql_run",
        )
        .set_hint(format!(
            "Pass a larger row_limit (at most {MAX_ROW_LIMIT}), e.g. nl2sql_run(question, {}), or run the SQL of nl2sql(question) yourself (in psql: SELECT nl2sql(question) \\gexec).",
            (limit * 10).min(MAX_ROW_LIMIT)
        ))
        .report(PgLogLevel::NOTICE);
    }
    // The verdict knows the rows now (none is one reason to be unsure): after the cut's NOTICE.
    super::verdict::raise("nl2sql_run", &question.0, &outcome, Some(rows.rows.len()));
    SetOfIterator::new(rows.rows.into_iter().map(JsonbText))
}
