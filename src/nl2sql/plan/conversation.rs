//! Follow-up questions: a question answered after the session's earlier turns ("how many orders
//! last month?", then "by region?").
//!
//! The earlier turns go into the prompt as finished exchanges between the approved examples and
//! the question (`prompt::question_in_conversation`): each turn's question and the assistant's
//! words for its answer. A turn answered at the first attempt is shown exactly as the model wrote
//! it, so the next turn's prompt begins with the tokens the KV cache already holds after the
//! schema prefix (the question and the answer just decoded): those rows are kept
//! (`stages/prefix.rs`), only the follow-up's own tokens are prefilled. A repaired or rewritten
//! answer is shown as its final statement in a SQL fence.
//!
//! Which turns there are, and when they are dropped (another role, search path or model), is
//! the caller's business (the PostgreSQL glue keeps them per backend: `src/pg/conversation.rs`, the
//! other side of this file); the engine drops them when
//! the schema prefix they were asked over changed ([`Conversation::fingerprint`]), and the oldest
//! ones beyond `Options::follow_up_tokens`.

use crate::generate::fingerprint::Fingerprint;

/// One answered turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The question as asked (cleaned).
    pub question: String,
    /// Its accepted statement.
    pub sql: String,
    /// The assistant's words for it in later prompts.
    pub answer: String,
}

/// The earlier turns a follow-up is asked after.
#[derive(Debug, Clone, Copy)]
pub struct Conversation<'a> {
    /// The conversation's first question: the approved examples and, in a schema too big to
    /// show whole, the tables are chosen by it for every turn, so that each turn's prompt is
    /// the one before it continued.
    pub first_question: &'a str,
    /// The earlier turns, oldest first.
    pub turns: &'a [Turn],
    /// The schema prefix they were asked over: when the prompt's prefix differs (the schema
    /// changed, or the model), the turns are dropped and the question is asked alone.
    pub fingerprint: Fingerprint,
}
