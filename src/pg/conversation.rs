//! The session's conversation: the answered questions a follow-up (`nl2sql(question, follow_up
//! => true)`) is asked after, kept in the backend's memory and nowhere else.
//!
//! - A question answered without `follow_up` starts a new conversation; one answered as a
//!   follow-up continues it. Only answered turns enter (an accepted statement): a refused
//!   question or one whose SQL stayed invalid leaves the conversation as it was, and a
//!   cancelled call changes nothing.
//! - The conversation is dropped, before a follow-up uses it, when what decided the prompt of
//!   its turns changed: the role (`SET ROLE`, a `SECURITY DEFINER` function: `GetUserId`), the
//!   schemas read (the search path, or the schemas argument), `row_security`, or the model.
//!   The engine drops it when the schema prefix changed (DDL, `ANALYZE`, a `COMMENT`).
//! - At most `turboinfer.follow_up_turns` turns are kept, the newest.
//! - `DISCARD ALL` forgets it (`discard.rs`), as a session-mode pooler resets a backend for its
//!   next client.

use super::catalog_cache::Key;
use super::gucs;
use crate::nl2sql::{Conversation, Fingerprint, Outcome, Turn};
use std::cell::RefCell;

/// The turns of the session's conversation and what they were asked under.
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
}

/// `turboinfer.follow_up_turns`.
fn max_turns() -> usize {
    usize::try_from(gucs::FOLLOW_UP_TURNS.get()).unwrap_or(1).max(1)
}

thread_local! {
    /// The backend's conversation (PostgreSQL backends are single-threaded).
    static HISTORY: RefCell<Option<History>> = const { RefCell::new(None) };
}

/// The conversation a follow-up asked under `key` with `model` follows, or why there is none
/// (then the conversation is dropped: its turns were asked under something else).
pub(super) fn for_follow_up(key: &Key, model: &str) -> Result<History, &'static str> {
    HISTORY.with_borrow_mut(|h| {
        let why = match h.as_ref() {
            None => "no earlier question was answered in this session",
            Some(c) if c.key.user != key.user => "the role changed",
            Some(c) if c.key.schemas != key.schemas || c.key.explicit != key.explicit => {
                "the schemas searched changed"
            }
            Some(c) if c.key.row_security != key.row_security => "row_security changed",
            Some(c) if c.model != model => "the model changed",
            Some(c) => return Ok(c.clone()),
        };
        *h = None;
        Err(why)
    })
}

/// Records the call that asked `question` (cleaned) under `key` with `model` and got `outcome`:
/// an answered question starts the conversation again, or continues it when it was a follow-up
/// of it (`continued`); anything else leaves it as it was, unless the engine found its schema
/// prefix changed.
pub(super) fn record(question: &str, outcome: &Outcome, key: &Key, model: &str, continued: bool) {
    let follow_up = outcome.follow_up;
    HISTORY.with_borrow_mut(|h| {
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
    })
}

/// Forgets the conversation (`DISCARD ALL`: `discard.rs`).
pub(super) fn forget() {
    HISTORY.with_borrow_mut(|h| *h = None);
}
