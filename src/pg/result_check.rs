//! The result check (`turboinfer.result_check`): an answer that passed validation runs once,
//! read-only; one that fails on the data is rejected, and a result with nothing in it is doubted.
//!
//! Validation plans a statement but does not run it, so a statement can pass and still fail on
//! the rows: a text column cast to a date that holds other text, a format pattern the function
//! does not know, a division by zero (SQLSTATE class 22, data exception). Its caller would get
//! that ERROR; here it is the server's rejection like any other, and the repair rounds see it.
//!
//! A question about the data expects data back. When a valid answer returns no rows, or only
//! NULLs (an aggregate over no rows), it most often compares a column with a value the column
//! never holds, joins on columns that do not match, or filters on a date range the data does not
//! reach. That is a doubt (`doubt.rs`), not a rejection: the engine asks the model once for a
//! better statement and keeps this one when the repair does no better (an empty answer can be
//! right). Nothing about any particular schema or question is assumed.
//!
//! The run is the candidates' (`candidates::run_timed`): `readonly.rs`'s executor (a
//! subtransaction that is always rolled back, `transaction_read_only`, the caller's privileges,
//! row-level security and search_path) under a short timer of its own. For an empty result the
//! doubt names the joins that match no row at all (each column equality between two tables,
//! tried on its own: `SELECT 1 FROM a JOIN b ON a.x = b.y LIMIT 1`, the same way), the most
//! common cause a repair can act on. A statement that outlasts the timer, or fails for another
//! reason than its data (e.g. a view that writes, refused in the read-only run), gets no verdict
//! here. Off by default: with it on, nl2sql executes what it writes.

use super::candidates::run_timed;
use super::readonly::RunError;
use super::validate;
use crate::nl2sql::doubt::{ColumnRef, QueryFacts};
use crate::nl2sql::ident::quote_ident;
use crate::nl2sql::statement::word_positions;
use crate::nl2sql::{Rejection, SchemaInfo};
use pgrx::pg_sys::panic::CaughtError;

/// Rows read to judge a result: enough to see that a column has values somewhere; the executor
/// stops after them (one more, to tell a cut result), so a large result costs no more.
const CHECK_ROWS: usize = 100;

/// SQLSTATE class of data exceptions (invalid input syntax, datetime format, division by zero).
const DATA_EXCEPTION_CLASS: &str = "22";

/// Joins tried on their own for an empty result: each is one more read-only query under the
/// timer, and a statement rarely has more equalities that matter.
const MAX_JOINS_TRIED: usize = 4;

/// `Ok` when `sql`'s result holds a value (or could not be judged), else the rejection for a
/// data exception or the doubt for an empty result. `facts`: what parse analysis found in it.
/// `schema`: the catalog the prompt showed (its primary keys say which side of a join that
/// matches nothing is the likelier mistake).
pub fn review(sql: &str, facts: &QueryFacts, schema: &SchemaInfo) -> Result<(), Rejection> {
    let rows = match run_timed(sql, CHECK_ROWS) {
        Some(Ok(rows)) => rows,
        Some(Err(RunError::Failed(e))) => {
            return match e.as_ref() {
                CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => {
                    let rejection = validate::rejection(r);
                    let data = rejection
                        .sqlstate
                        .as_deref()
                        .is_some_and(|s| s.starts_with(DATA_EXCEPTION_CLASS));
                    if data {
                        Err(rejection)
                    } else {
                        Ok(())
                    }
                }
                _ => Ok(()),
            };
        }
        Some(Err(RunError::Refused { .. })) | None => return Ok(()),
    };
    let what = if rows.rows.is_empty() {
        "it returns no rows on this database"
    } else if !rows.truncated && rows.rows.iter().all(|r| all_null(r)) {
        "every value it returns is NULL on this database (as when no row matches)"
    } else {
        return Ok(());
    };
    let (mut lines, span) = empty_joins(sql, facts, schema);
    lines.push(
        "Check the values it compares columns with (use the values the schema shows, with their spelling and case), the columns each join matches, and the date range. If no rows is the right answer, write the same query again."
            .to_string(),
    );
    Err(Rejection {
        message: format!("the query runs, but {what}"),
        facts: lines,
        advisory: true,
        span,
        ..Rejection::default()
    })
}

/// True when the row (one jsonb object's text, `readonly::Rows`) has no non-NULL value.
fn all_null(row: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(row) {
        Ok(serde_json::Value::Object(m)) => m.values().all(serde_json::Value::is_null),
        _ => false,
    }
}

/// One line per column equality of `facts` between two tables that no pair of rows satisfies,
/// and where the first one's likelier wrong column is written in `sql` (the repair is then made
/// to write another word there, as for other doubts): the side that is not its table's primary
/// key (a join usually matches a reference with a key), else the left one.
fn empty_joins(
    sql: &str,
    facts: &QueryFacts,
    schema: &SchemaInfo,
) -> (Vec<String>, Option<(u32, u32)>) {
    let mut span = None;
    let mut seen: Vec<(&ColumnRef, &ColumnRef)> = Vec::new();
    let mut lines = Vec::new();
    for (a, b) in &facts.equalities {
        if (a.schema == b.schema && a.table == b.table) || seen.contains(&(a, b)) {
            continue;
        }
        if seen.len() == MAX_JOINS_TRIED {
            break;
        }
        seen.push((a, b));
        let probe = format!(
            "SELECT 1 FROM {} AS l JOIN {} AS r ON l.{} = r.{} LIMIT 1",
            qualified(a),
            qualified(b),
            quote_ident(&a.column),
            quote_ident(&b.column)
        );
        if let Some(Ok(rows)) = run_timed(&probe, 1) {
            if rows.rows.is_empty() {
                lines.push(format!(
                    "No row of {} has a {} equal to the {} of a row of {}: the join {}.{} = {}.{} matches nothing.",
                    a.table, a.column, b.column, b.table, a.table, a.column, b.table, b.column
                ));
                if span.is_none() {
                    let (wrong, other) =
                        if is_key(schema, a) && !is_key(schema, b) { (b, a) } else { (a, b) };
                    span = join_word(sql, &wrong.column, &other.column);
                }
            }
        }
    }
    (lines, span)
}

/// True when `c` is its table's whole primary key.
fn is_key(schema: &SchemaInfo, c: &ColumnRef) -> bool {
    schema
        .tables
        .iter()
        .any(|t| t.schema == c.schema && t.name == c.table && t.primary_key == [c.column.as_str()])
}

/// The byte span of `column` where it is written next to `other` (within a join condition's
/// reach), else of its first occurrence.
fn join_word(sql: &str, column: &str, other: &str) -> Option<(u32, u32)> {
    /// Bytes around a column where its partner in `x = y` is looked for (qualifiers, spaces,
    /// the operator).
    const REACH: usize = 80;
    let positions = word_positions(sql, column);
    let near = |p: usize| {
        let lo = sql.floor_char_boundary(p.saturating_sub(REACH));
        let hi = sql.ceil_char_boundary((p + column.len() + REACH).min(sql.len()));
        !word_positions(&sql[lo..hi], other).is_empty()
    };
    let at = positions.iter().copied().find(|&p| near(p)).or(positions.first().copied())?;
    Some((u32::try_from(at).ok()?, u32::try_from(at + column.len()).ok()?))
}

/// `schema.table` of a column, quoted.
fn qualified(c: &ColumnRef) -> String {
    format!("{}.{}", quote_ident(&c.schema), quote_ident(&c.table))
}
