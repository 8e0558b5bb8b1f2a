//! What the caller of an nl2sql call plugs in: the validator, the optional executor of candidate
//! answers, and the progress report (which can cancel).

use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::check::rejection::Rejection;
use crate::nl2sql::plan::link::LinkSlot;

/// Runs a validated candidate read-only and returns a digest of its rows (equal results, equal
/// digests), or `None` when it could not run (see `Engine::answer`).
pub type ExecuteFn<'a> = dyn FnMut(&str) -> Option<u64> + 'a;

/// The caller's side of a call.
pub struct Hooks<'a> {
    /// Why a statement is not acceptable (a rejection, or a doubt: `Rejection::advisory`), or
    /// `Ok` when it is.
    pub validate: &'a mut dyn FnMut(&str) -> Result<(), Rejection>,
    /// Runs validated candidates (read-only, the caller's business) for a digest of their rows;
    /// `None`: candidates are not executed.
    pub execute: Option<&'a mut ExecuteFn<'a>>,
    /// Runs before every forward pass; returning `false` cancels the call.
    pub progress: &'a mut dyn FnMut(Progress) -> bool,
    /// The sentence encoder that picks the tables when the schema does not fit (`link.rs`);
    /// `None`: they are picked by the question's words (`trim.rs`).
    pub link: Option<LinkSlot<'a>>,
}
