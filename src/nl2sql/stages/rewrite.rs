//! The engine's own rewrites of a rejected statement, instead of a model round: the fix a doubt
//! carries (an integer ratio made exact), used when the fixed statement passes without doubt;
//! mixed-case names written without quotes, quoted (`fixes::requoted`); a column on the wrong table that exactly one other table has, requalified
//! (`fixes::requalified`), or a table used but not read, joined on its declared key
//! (`fixes::joined`), an ambiguous column the tables having it are joined on qualified
//! (`fixes::disambiguated`), or a reserved word used as a table alias renamed (`fixes::dealiased`),
//! when that fixes this error (the statement passes, or fails further on for
//! another reason; a doubt means it did not fix).

use super::call::CallState;
use super::repair_turn::MAX_ERROR_CHARS;
use crate::nl2sql::api::outcome::Attempt;
use crate::nl2sql::check::rejection::Rejection;
use crate::nl2sql::decode::sql_decode::{Decoded, SpecStats, StopReason};
use crate::nl2sql::repair::feedback::cap_chars;
use crate::nl2sql::repair::fixes;

/// Most statements the engine rewrites itself in one call (`fixes::requalified`,
/// `fixes::joined`, a doubt's `fix`): each fixes one column reference, one missing table or the
/// divisions, and a statement rarely has more wrong ones than this.
const MAX_REWRITES: usize = 3;

/// A statement the engine rewrote itself: the next attempt, not decoded.
#[derive(Debug)]
pub struct Rewrite {
    /// The rewritten statement.
    sql: String,
    /// How it was rewritten.
    note: String,
    /// The stop of the attempt it rewrote.
    stop: StopReason,
}

impl Rewrite {
    /// The rewrite as an attempt's answer (no tokens) and its note.
    pub fn into_answer(self) -> (Decoded, Option<String>) {
        let none = Decoded {
            ids: Vec::new(),
            text: self.sql,
            stop: self.stop,
            stats: SpecStats::default(),
        };
        (none, Some(self.note))
    }
}

/// The rewrite of the `rejected` attempt's statement that fixes its `rejection`, when there is
/// one and fewer than [`MAX_REWRITES`] of the call's `rewrites` came before it. Each candidate
/// fix is judged by the validator.
pub fn find(
    call: &mut CallState<'_, '_>,
    rejection: Option<&Rejection>,
    rejected: &Attempt,
    rewrites: usize,
) -> Option<Rewrite> {
    let (sql, shown) = (&rejected.sql, &call.shown);
    let fixed = rejection.filter(|_| rewrites < MAX_REWRITES).and_then(|r| match &r.fix {
        Some(fix) => Some(((**fix).clone(), true)),
        None => fixes::requoted(r, sql, shown)
            .or_else(|| fixes::requalified(r, sql, shown))
            .or_else(|| fixes::joined(r, sql, shown))
            .or_else(|| fixes::disambiguated(r, sql, shown))
            .or_else(|| fixes::dealiased(r, sql))
            .map(|f| (f, false)),
    });
    let ((fixed, note), exact) = fixed?;
    let fixes = match call.check(&fixed, &rejected.stop) {
        Ok(()) => true,
        Err(r) => {
            !exact
                && !r.advisory
                && rejected.error.as_deref() != Some(&cap_chars(&r.message, MAX_ERROR_CHARS))
        }
    };
    fixes.then(|| Rewrite { sql: fixed, note, stop: rejected.stop.clone() })
}
