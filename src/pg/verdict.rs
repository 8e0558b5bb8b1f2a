//! The verdict of an answer as the user meets it, the glue's side of `nl2sql/api/verdict.rs`: `nl2sql_explain`'s
//! `verdict` object, and for `nl2sql` and `nl2sql_run` a NOTICE with the reasons of an unsure
//! answer, or an ERROR instead of the answer (`turboinfer.unsure`).

use super::candidates::run_within;
use super::errors::{error_report, report};
use super::gucs::{self, Unsure};
use super::validate;
use crate::nl2sql::doubt::QueryFacts;
use crate::nl2sql::ident::{quote_ident, quote_literal};
use crate::nl2sql::verdict::{self, Facts, MissingValue, Verdict};
use crate::nl2sql::Outcome;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode, Spi};
use serde_json::json;

/// The SQLSTATE of an unsure answer under `turboinfer.unsure = error`: P0004 (assert_failure,
/// PL/pgSQL's class, as the refusal's P0002): the application asserted that answers are sure.
pub const UNSURE: PgSqlErrorCode = PgSqlErrorCode::ERRCODE_ASSERT_FAILURE;

/// Most values looked up per answer: each is one read-only query, and an answer rarely filters
/// on more values that matter.
const MAX_VALUES_PROBED: usize = 3;

/// Most time one value lookup may take (milliseconds): an index or a small table answers in
/// well under a millisecond; a lookup that outlasts this (a large table scanned) tells nothing.
const VALUE_PROBE_MS: i32 = 200;

/// The verdict of an accepted `outcome` to `question`; `rows`: what the answer returned when the
/// caller ran it. Looks up, as the caller, the values the answer compares text columns with, and
/// asks the catalog whether the tables it joins without using them are joined on unique columns
/// and whether the columns it tests with `IS NOT NULL` are declared NOT NULL.
pub fn of(question: &str, outcome: &Outcome, rows: Option<usize>) -> Verdict {
    let question = question.to_string();
    let facts = match validate::analyze(&outcome.sql) {
        Ok(f) => {
            let (repeating_joins, needless_joins) = unused_joins(&f);
            Facts {
                rows,
                missing_values: missing_values(&f),
                repeating_joins,
                needless_joins,
                always_true: declared_not_null(&f),
                self_joins: f.self_joins,
                question,
            }
        }
        Err(_) => Facts { rows, question, ..Facts::default() },
    };
    verdict::verdict(outcome, facts)
}

/// Most columns of `IS NOT NULL` tests looked up in the catalog per answer: one query each.
const MAX_NOT_NULL_PROBED: usize = 3;

/// The columns of `facts.not_null_tests` the catalog declares NOT NULL, as `table.column` the
/// way the user writes them. A column the catalog does not answer for is left out.
fn declared_not_null(facts: &QueryFacts) -> Vec<String> {
    let mut out = Vec::new();
    for c in facts.not_null_tests.iter().take(MAX_NOT_NULL_PROBED) {
        let relation =
            quote_literal(&format!("{}.{}", quote_ident(&c.schema), quote_ident(&c.table)));
        let query = format!(
            "SELECT a.attnotnull FROM pg_catalog.pg_attribute a \
              WHERE a.attrelid OPERATOR(pg_catalog.=) {relation}::pg_catalog.regclass \
                AND a.attname OPERATOR(pg_catalog.=) {} AND NOT a.attisdropped",
            quote_literal(&c.column)
        );
        // Through the read-only SPI path (`select`), as catalog.rs reads the catalog.
        let declared = Spi::connect(|s| s.select(&query, Some(1), &[])?.first().get_one::<bool>());
        if let Ok(Some(true)) = declared {
            out.push(format!("{}.{}", quote_ident(&c.table), quote_ident(&c.column)));
        }
    }
    out
}

/// The tables of `facts.unused_joins`, as the user writes their names: those joined on columns
/// no unique index of theirs covers (they repeat rows), and those joined on columns one covers (a
/// unique index, without a predicate, on a subset of the joined columns makes each row match at
/// most once: they only drop rows). A table the catalog does not answer for is in neither.
fn unused_joins(facts: &QueryFacts) -> (Vec<String>, Vec<String>) {
    let (mut repeating, mut needless) = (Vec::new(), Vec::new());
    for j in &facts.unused_joins {
        let relation =
            quote_literal(&format!("{}.{}", quote_ident(&j.schema), quote_ident(&j.table)));
        let columns = j.columns.iter().map(|c| quote_literal(c)).collect::<Vec<_>>().join(", ");
        let query = format!(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_index i \
              WHERE i.indrelid OPERATOR(pg_catalog.=) {relation}::pg_catalog.regclass AND i.indisunique \
                AND i.indpred IS NULL AND i.indexprs IS NULL \
                AND (SELECT pg_catalog.array_agg(a.attname::text) FROM pg_catalog.unnest(i.indkey) k \
                     JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid \
                      AND a.attnum OPERATOR(pg_catalog.=) k) OPERATOR(pg_catalog.<@) ARRAY[{columns}]::text[])"
        );
        // Through the read-only SPI path (`select`), as catalog.rs reads the catalog.
        let unique = Spi::connect(|c| c.select(&query, Some(1), &[])?.first().get_one::<bool>());
        match unique {
            Ok(Some(false)) => repeating.push(quote_ident(&j.table)),
            Ok(Some(true)) => needless.push(quote_ident(&j.table)),
            _ => {}
        }
    }
    (repeating, needless)
}

/// The values `facts` compares a text column with (`c = 'value'`) that no row of the column
/// holds, as the caller sees the table (privileges, row-level security): each looked up with
/// `SELECT 1 FROM t WHERE c = 'value' LIMIT 1`, read-only under a short timer. A value whose
/// lookup fails or outlasts the timer is not reported.
fn missing_values(facts: &QueryFacts) -> Vec<MissingValue> {
    let mut missing = Vec::new();
    for (c, value) in facts.value_filters.iter().take(MAX_VALUES_PROBED) {
        if value.contains('\u{fffd}') {
            continue; // not representable as read back (lossy conversion): do not guess
        }
        let probe = format!(
            "SELECT 1 FROM {}.{} WHERE {} = {} LIMIT 1",
            quote_ident(&c.schema),
            quote_ident(&c.table),
            quote_ident(&c.column),
            quote_literal(value)
        );
        if let Some(Ok(rows)) = run_within(&probe, 1, VALUE_PROBE_MS) {
            if rows.rows.is_empty() {
                missing.push(MissingValue {
                    value: value.clone(),
                    table: quote_ident(&c.table),
                    column: quote_ident(&c.column),
                });
            }
        }
    }
    missing
}

/// `nl2sql_explain`'s `verdict`: `{"sure": bool, "reasons": [{"code", "message"}]}`.
pub fn json(v: &Verdict) -> serde_json::Value {
    json!({
        "sure": v.sure(),
        "reasons": v.reasons.iter().map(|r| json!({ "code": r.code(), "message": r.message() })).collect::<Vec<_>>(),
    })
}

/// What to do about an unsure answer: nothing, or the hint for a user who wants it anyway.
const HINT: &str = "Act on the reasons (rephrase the question with the schema's words, check the filtered values), or read the query before using it; SET turboinfer.unsure = ignore silences this message.";

/// Raises what `turboinfer.unsure` asks for an unsure accepted answer `outcome` of function
/// `who` (`nl2sql` or `nl2sql_run`, which passes the `rows` it returned): a NOTICE with the
/// reasons, or an ERROR (P0004) with the reasons and the query, which does not return. Nothing
/// for a sure answer, and nothing computed under `ignore`.
pub fn raise(who: &str, question: &str, outcome: &Outcome, rows: Option<usize>) {
    let setting = gucs::UNSURE.get();
    if matches!(setting, Unsure::Ignore) {
        return; // no verdict needed, no value looked up
    }
    let v = of(question, outcome, rows);
    if v.sure() {
        return;
    }
    let sql = &outcome.sql;
    let reasons = v.summary();
    match setting {
        Unsure::Ignore => {}
        Unsure::Notice => {
            let r = error_report(
                PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
                format!("{who}: the answer is unsure: {reasons}"),
                None,
                Some(HINT.into()),
            );
            report_as(r, PgLogLevel::NOTICE);
        }
        Unsure::Error => report(error_report(
            UNSURE,
            format!("{who}: the answer is unsure: {reasons}"),
            Some(format!("The query was not returned (turboinfer.unsure = error): {sql}")),
            Some("Act on the reasons (rephrase the question with the schema's words, check the filtered values), or SET turboinfer.unsure = notice to get the query with a NOTICE.".into()),
        )),
    }
}

/// Reports `r` at `level` (below ERROR: returns).
fn report_as(r: ErrorReport, level: PgLogLevel) {
    r.report(level);
}
