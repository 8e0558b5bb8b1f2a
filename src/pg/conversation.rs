//! Conversations, the glue's side (the engine's is `nl2sql/conversation.rs`): the answered
//! questions a follow-up is asked after, in one of two places.
//!
//! - **Carried by the client** (`nl2sql_converse(question, previous)`): each answer comes with a
//!   token holding the conversation (`nl2sql/carried.rs`), which the client passes back with its
//!   next question. The server keeps nothing, so two clients sharing a backend through a pooler
//!   (or one client whose transactions run on several backends) never see each other's turns.
//! - **Kept in the session** (`nl2sql(question, follow_up => true)` and the other functions'
//!   `follow_up`): a convenience for psql, kept in the backend's memory and nowhere else. It is
//!   dropped by `DISCARD ALL`, `RESET ALL` and `SET`/`RESET SESSION AUTHORIZATION` (`discard.rs`),
//!   the statements a pooler resets a backend with between clients.
//!
//! Either way:
//! - A question answered without a conversation starts a new one; a follow-up continues it.
//!   Only answered turns enter (an accepted statement): a refused question or one whose SQL
//!   stayed invalid leaves the conversation as it was.
//! - The session's conversation changes with the transaction that changed it: a turn recorded
//!   by a call whose transaction (or subtransaction) is rolled back, as when the call is
//!   cancelled, fails afterwards (`nl2sql_run` executing the SQL) or its client rolls back,
//!   is taken back (`undo`, by PostgreSQL's transaction callbacks). A token is returned only
//!   with the answer, so a call that does not return leaves the client's token as it was.
//! - The conversation is dropped, before a follow-up uses it, when what decided the prompt of
//!   its turns changed: the role (`SET ROLE`, a `SECURITY DEFINER` function: `GetUserId`), the
//!   schemas read (the search path, or the schemas argument), `row_security`, or the model.
//!   The engine drops it when the schema prefix changed (DDL, `ANALYZE`, a `COMMENT`).
//! - At most `turboinfer.follow_up_turns` turns are kept, the newest.

use super::catalog_cache::Key;
use super::gucs;
use crate::nl2sql::{Carried, Conversation, Fingerprint, Outcome, TokenError, Turn};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::cell::RefCell;

/// The turns of a conversation and what they were asked under.
#[derive(Clone)]
pub(super) struct History {
    /// Role, schemas and row security of the turns' schema reads.
    key: Key,
    /// The model file they were answered with.
    model: String,
    /// The conversation's first question (examples and tables are chosen by it).
    first_question: String,
    /// The schema prefix they were asked over.
    fingerprint: Fingerprint,
    /// The turns, oldest first.
    turns: Vec<Turn>,
}

impl History {
    /// The engine's view of these turns: the newest `turboinfer.follow_up_turns`.
    pub fn conversation(&self) -> Conversation<'_> {
        Conversation {
            first_question: &self.first_question,
            turns: self.turns(),
            fingerprint: self.fingerprint,
        }
    }

    /// The turns a follow-up is asked after: the newest `turboinfer.follow_up_turns`, oldest
    /// first.
    pub fn turns(&self) -> &[Turn] {
        &self.turns[self.turns.len() - self.turns.len().min(max_turns())..]
    }

    /// Why these turns cannot be followed by a question asked under `key` with `model`.
    fn mismatch(&self, key: &Key, model: &str) -> Option<&'static str> {
        if self.key.user != key.user {
            Some("the role changed")
        } else if self.key.schemas != key.schemas || self.key.explicit != key.explicit {
            Some("the schemas searched changed")
        } else if self.key.row_security != key.row_security {
            Some("row_security changed")
        } else if self.model != model {
            Some("the model changed")
        } else {
            None
        }
    }

    /// The conversation after the call that asked `question` (cleaned) under `key` with `model`
    /// and got `outcome`, given the one before it (`h`): an answered question starts it again,
    /// or continues it when it was a follow-up of it (`continued`); anything else leaves it as
    /// it was, unless the engine found its schema prefix changed.
    fn advance(
        h: &mut Option<History>,
        question: &str,
        outcome: &Outcome,
        key: &Key,
        model: &str,
        continued: bool,
    ) {
        let follow_up = outcome.follow_up;
        if follow_up.dropped.is_some() {
            *h = None;
        }
        let Some(turn) = Turn::of(question, outcome) else { return };
        let keep = max_turns();
        match h.as_mut() {
            Some(c) if continued && follow_up.dropped.is_none() => {
                c.turns.push(turn);
                let extra = c.turns.len().saturating_sub(keep);
                c.turns.drain(..extra);
            }
            _ => {
                *h = Some(History {
                    key: key.clone(),
                    model: model.to_string(),
                    first_question: question.to_string(),
                    fingerprint: outcome.prompt.fingerprint,
                    turns: vec![turn],
                })
            }
        }
    }
}

/// `turboinfer.follow_up_turns`.
fn max_turns() -> usize {
    usize::try_from(gucs::FOLLOW_UP_TURNS.get()).unwrap_or(1).max(1)
}

// ---------------------------------------------------------------------------------------------
// Carried by the client.

/// A digest of the model file's path: a token says which model answered its turns without
/// showing the server's file system to the client.
fn model_digest(model: &str) -> String {
    Sha256::digest(model.as_bytes()).iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// The token of `h`: its turns and, as the scope, what they were asked under.
pub(super) fn to_token(h: &History) -> String {
    let scope = json!({
        "role": h.key.user,
        "schemas": h.key.schemas,
        "explicit": h.key.explicit,
        "row_security": h.key.row_security,
        "model": model_digest(&h.model),
    });
    Carried {
        scope,
        first_question: h.first_question.clone(),
        fingerprint: h.fingerprint,
        turns: h.turns.clone(),
    }
    .encode()
}

/// The conversation a client's token carries (`nl2sql_converse`'s `previous`), or why it is
/// not a token this server wrote.
pub(super) fn decode(token: &str) -> Result<Carried, TokenError> {
    Carried::decode(token, max_turns())
}

/// The conversation `c` as followed by a question asked under `key` with `model` (the current
/// call's), or why its turns cannot be (then they are not used).
pub(super) fn follow_carried(c: Carried, key: &Key, model: &str) -> Result<History, &'static str> {
    let s = &c.scope;
    let scope_key = Key {
        user: s["role"].as_u64().and_then(|u| u32::try_from(u).ok()).unwrap_or(0),
        schemas: s["schemas"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        explicit: s["explicit"].as_bool().unwrap_or(false),
        row_security: s["row_security"].as_bool().unwrap_or(true),
    };
    // The digest stands for the path: the same model when the digests are equal.
    let same_model = s["model"].as_str() == Some(model_digest(model).as_str());
    let h = History {
        key: scope_key,
        model: if same_model { model.to_string() } else { String::new() },
        first_question: c.first_question,
        fingerprint: c.fingerprint,
        turns: c.turns,
    };
    match h.mismatch(key, model) {
        Some(why) => Err(why),
        None => Ok(h),
    }
}

/// The conversation a client continues after its call: see [`History::advance`]; the session's
/// own conversation is not touched.
pub(super) fn carried_after(
    previous: Option<History>,
    question: &str,
    outcome: &Outcome,
    key: &Key,
    model: &str,
) -> Option<History> {
    let continued = previous.is_some();
    let mut h = previous;
    History::advance(&mut h, question, outcome, key, model, continued);
    h
}

// ---------------------------------------------------------------------------------------------
// Kept in the session.

thread_local! {
    /// The backend's conversation (PostgreSQL backends are single-threaded).
    static HISTORY: RefCell<Option<History>> = const { RefCell::new(None) };
    /// What to restore when a (sub)transaction that changed [`HISTORY`] is rolled back: for each
    /// open subtransaction that changed it (oldest first), the conversation before its first
    /// change.
    static UNDO: RefCell<Vec<(u32, Option<History>)>> = const { RefCell::new(Vec::new()) };
}

/// Changes the session's conversation with `f`, first saving what it was for the current
/// subtransaction (once per subtransaction).
fn change(f: impl FnOnce(&mut Option<History>)) {
    let sub = undo::current_subtransaction();
    HISTORY.with_borrow_mut(|h| {
        UNDO.with_borrow_mut(|u| {
            if let Some(sub) = sub {
                if u.last().map(|e| e.0) != Some(sub) {
                    u.push((sub, h.clone()));
                }
            }
        });
        f(h)
    })
}

/// The conversation a follow-up asked under `key` with `model` follows, or why there is none
/// (then the conversation is dropped: its turns were asked under something else).
pub(super) fn for_follow_up(key: &Key, model: &str) -> Result<History, &'static str> {
    let current = HISTORY.with_borrow(|h| h.as_ref().map(|c| (c.mismatch(key, model), c.clone())));
    match current {
        None => Err("no earlier question was answered in this session"),
        Some((None, c)) => Ok(c),
        Some((Some(why), _)) => {
            change(|h| *h = None);
            Err(why)
        }
    }
}

/// Records the call that asked `question` (cleaned) under `key` with `model` and got `outcome`
/// in the session's conversation ([`History::advance`]).
pub(super) fn record(question: &str, outcome: &Outcome, key: &Key, model: &str, continued: bool) {
    if outcome.follow_up.dropped.is_none() && Turn::of(question, outcome).is_none() {
        return; // nothing changes: no undo entry needed
    }
    change(|h| History::advance(h, question, outcome, key, model, continued));
}

/// Forgets the session's conversation (`DISCARD ALL`, `RESET ALL`, `SET SESSION
/// AUTHORIZATION`: `discard.rs`); rolled back with the statement's transaction.
pub(super) fn forget() {
    if HISTORY.with_borrow(Option::is_some) {
        change(|h| *h = None);
    }
}

/// Registers the transaction callbacks that take back a rolled-back change (`_PG_init`).
pub(super) fn install() {
    undo::install();
}

/// The session conversation's changes follow the transaction that made them: PostgreSQL's
/// transaction and subtransaction callbacks commit or restore [`UNDO`]'s entries. Only Rust
/// memory of this thread is touched in them (no allocation in a PostgreSQL context, no ERROR).
mod undo {
    use super::{HISTORY, UNDO};
    use pgrx::pg_sys;

    /// The current subtransaction's id, inside a transaction.
    pub(super) fn current_subtransaction() -> Option<u32> {
        // SAFETY: plain reads of the backend's transaction state, on the backend thread.
        unsafe { pg_sys::IsTransactionState().then(|| pg_sys::GetCurrentSubTransactionId()) }
    }

    pub(super) fn install() {
        // SAFETY: `_PG_init` runs on the backend thread; the callbacks are plain functions that
        // live as long as the library (never unloaded).
        unsafe {
            pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
        }
    }

    /// Restores the conversation saved by the oldest of `entries` (the state before them all).
    fn restore(entries: Vec<(u32, Option<super::History>)>) {
        if let Some((_, saved)) = entries.into_iter().next() {
            HISTORY.with_borrow_mut(|h| *h = saved);
        }
    }

    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn on_xact(
        event: pg_sys::XactEvent::Type,
        _arg: *mut std::ffi::c_void,
    ) {
        use pg_sys::XactEvent::*;
        match event {
            XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT | XACT_EVENT_PREPARE => {
                UNDO.with_borrow_mut(Vec::clear)
            }
            XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
                restore(UNDO.with_borrow_mut(std::mem::take))
            }
            _ => {}
        }
    }

    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn on_subxact(
        event: pg_sys::SubXactEvent::Type,
        sub: pg_sys::SubTransactionId,
        parent: pg_sys::SubTransactionId,
        _arg: *mut std::ffi::c_void,
    ) {
        use pg_sys::SubXactEvent::*;
        match event {
            // The subtransaction's changes become its parent's: the parent's saved state, when
            // it has one, is the older (ids grow with nesting and time).
            SUBXACT_EVENT_COMMIT_SUB => UNDO.with_borrow_mut(|u| {
                if u.last().map(|e| e.0) == Some(sub) {
                    if u.len() >= 2 && u[u.len() - 2].0 == parent {
                        u.pop();
                    } else if let Some(last) = u.last_mut() {
                        last.0 = parent;
                    }
                }
            }),
            // Everything since the subtransaction began is taken back.
            SUBXACT_EVENT_ABORT_SUB => {
                let taken = UNDO.with_borrow_mut(|u| {
                    let keep = u.iter().take_while(|e| e.0 < sub).count();
                    u.split_off(keep)
                });
                restore(taken);
            }
            _ => {}
        }
    }
}
