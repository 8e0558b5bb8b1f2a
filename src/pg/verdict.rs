//! The verdict of an answer as the user meets it, the glue's side of `nl2sql/api/verdict.rs`: `nl2sql_explain`'s
//! `verdict` object, and for `nl2sql` and `nl2sql_run` a NOTICE with the reasons of an unsure
//! answer, or an ERROR instead of the answer (`turboinfer.unsure`).

use super::errors::{error_report, report};
use super::gucs::{self, Unsure};
use crate::nl2sql::verdict::{self, Facts, Verdict};
use crate::nl2sql::Outcome;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use serde_json::json;

/// The SQLSTATE of an unsure answer under `turboinfer.unsure = error`: P0004 (assert_failure,
/// PL/pgSQL's class, as the refusal's P0002): the application asserted that answers are sure.
pub const UNSURE: PgSqlErrorCode = PgSqlErrorCode::ERRCODE_ASSERT_FAILURE;

/// The verdict of an accepted `outcome` with the caller's `facts`.
pub fn of(outcome: &Outcome, facts: Facts) -> Verdict {
    verdict::verdict(outcome, facts)
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

/// Raises what `turboinfer.unsure` asks for an unsure answer `sql` of function `who` (`nl2sql`
/// or `nl2sql_run`): a NOTICE with the reasons, or an ERROR (P0004) with the reasons and the
/// query, which does not return. Nothing for a sure answer.
pub fn raise(who: &str, v: &Verdict, sql: &str) {
    if v.sure() {
        return;
    }
    let reasons = v.summary();
    match gucs::UNSURE.get() {
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
