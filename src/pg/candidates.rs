//! Candidate execution for nl2sql (`turboinfer.candidate_execution`): each validated candidate
//! runs through the read-only executor (`readonly.rs`: a subtransaction that is always rolled
//! back, `transaction_read_only`, the caller's privileges), and its rows become a digest that
//! equal results share (see `nl2sql::candidates`).

use super::readonly::run_read_only;
use std::hash::{Hash, Hasher};

/// Rows read per candidate: enough to tell typical answers apart; a larger result is compared
/// on its first rows (in the order the statement gives them).
const CANDIDATE_ROWS: usize = 1000;

/// The digest of `sql`'s rows, or `None` when it failed to run. Only values count, not column
/// names (two candidates naming a count differently agree), and neither row nor column order.
/// Cancellation, timeouts and resource errors are re-raised by the executor.
pub fn result_digest(sql: &str) -> Option<u64> {
    let rows = run_read_only(sql, CANDIDATE_ROWS).ok()?;
    let mut keys: Vec<Vec<String>> = rows
        .rows
        .iter()
        .map(|r| {
            let mut values: Vec<String> = match serde_json::from_str(r) {
                Ok(serde_json::Value::Object(m)) => m.values().map(|v| v.to_string()).collect(),
                _ => vec![r.clone()],
            };
            values.sort_unstable();
            values
        })
        .collect();
    keys.sort_unstable();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    keys.hash(&mut h);
    rows.truncated.hash(&mut h);
    Some(h.finish())
}
