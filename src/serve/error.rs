//! The serve module's error type.

use crate::model::ModelError;

/// What a request to a [`super::Server`] can get wrong, or what can fail for the whole pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServeError {
    /// The request says its sequence held `pos` tokens, but the server knows `known`: the
    /// sequence was forgotten (or never started), so the caller must send it again from 0.
    #[error("sequence {seq} holds {known} tokens here, the request continues after {pos}; send it again from position 0")]
    UnknownPosition { seq: u64, pos: usize, known: usize },
    /// The same sequence twice in one batch.
    #[error("sequence {seq} appears twice in one batch")]
    Duplicate { seq: u64 },
    /// A request with no new tokens, or asking for the logits of more tokens than it has.
    #[error("sequence {seq}: {tokens} new tokens, logits asked for the last {logits} (need 1 or more tokens, at most that many logits)")]
    BadRequest { seq: u64, tokens: usize, logits: usize },
    /// A token or a logits row that is not in the model's vocabulary.
    #[error("sequence {seq}: token id {id} is outside the model's vocabulary of {vocab}")]
    OutOfVocab { seq: u64, id: u32, vocab: usize },
    /// The sequence would outgrow the context each sequence is given.
    #[error("sequence {seq} would hold {needed} tokens, each sequence holds at most {n_ctx}")]
    ContextFull { seq: u64, needed: usize, n_ctx: usize },
    /// The memory budget holds fewer caches than this batch needs at once.
    #[error("the KV memory budget ({budget} bytes) holds {fits} sequences of {n_ctx} tokens at once; this batch needs more (raise the budget or send fewer at a time)")]
    OverBudget { budget: usize, fits: usize, n_ctx: usize },
    /// The caller's check between layers stopped the pass: no sequence of the batch advanced.
    #[error("forward pass interrupted")]
    Interrupted,
    /// The forward pass failed: no sequence of the batch advanced.
    /// The model error's message (the error itself is not `Clone`, and every request of
    /// the batch gets it).
    #[error("forward pass failed: {0}")]
    Model(String),
}

impl From<ModelError> for ServeError {
    fn from(e: ModelError) -> ServeError {
        match e {
            ModelError::Interrupted { .. } => ServeError::Interrupted,
            e => ServeError::Model(e.to_string()),
        }
    }
}
