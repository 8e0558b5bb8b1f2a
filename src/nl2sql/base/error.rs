//! The nl2sql module's error type.

use crate::generate::GenerateError;
use crate::model::ModelError;
use crate::nl2sql::base::memory_plan::MemoryPlan;
use crate::tokenizer::TokenizerError;

/// Everything that can make an nl2sql call fail.
#[derive(Debug, thiserror::Error)]
pub enum Nl2SqlError {
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the question is {chars} characters long; the limit is {max}")]
    QuestionTooLong { chars: usize, max: usize },
    #[error("no tables or views are visible to show the model")]
    NoTables,
    #[error("the context is too small: the prompt needs at least {needed} tokens but {available} are available")]
    ContextTooSmall { needed: usize, available: usize },
    #[error("unsupported model: {0}")]
    UnsupportedModel(String),
    #[error("generation was cancelled")]
    Cancelled,
    #[error("the model did not produce a valid query: {message}")]
    InvalidSql { sql: String, message: String },
    /// The refusal check judged that the shown tables cannot answer the question
    /// (`refusal.rs`); `reason` says how sure it was.
    #[error("this database cannot answer that question: {reason}")]
    Refused { reason: String },
    /// The allocator refused a large buffer (`what`, `bytes`: see `ModelError::OutOfMemory`);
    /// `plan` is what the call needed.
    #[error("out of memory: the {what} needs {bytes} bytes (this call needs about {} bytes: KV cache of {} positions {} bytes, scratch {} bytes)", .plan.total_bytes(), .plan.positions, .plan.kv_cache_bytes, .plan.scratch_bytes)]
    OutOfMemory { what: &'static str, bytes: usize, plan: MemoryPlan },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The sentence encoder of schema linking failed (`link.rs`; a call falls back to the
    /// question's words instead of failing, so this only reaches callers of `Linker`).
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    /// The process serving this caller's sequences refused a request (`seq.rs`).
    #[error("the batch server refused a request: {0}")]
    Serve(crate::serve::ServeError),
    /// The process serving this caller's sequences is gone or unusable (`seq.rs`).
    #[error("the batch server failed: {0}")]
    Transport(String),
    /// A generation error with no nl2sql meaning of its own.
    #[error(transparent)]
    Generate(GenerateError),
}

impl From<GenerateError> for Nl2SqlError {
    /// Cancellation, model and tokenizer errors become nl2sql's own variants (one
    /// `Cancelled` whichever layer noticed it); the rest is wrapped.
    fn from(e: GenerateError) -> Nl2SqlError {
        match e {
            GenerateError::Cancelled => Nl2SqlError::Cancelled,
            GenerateError::Model(e) => Nl2SqlError::Model(e),
            GenerateError::Tokenizer(e) => Nl2SqlError::Tokenizer(e),
            e => Nl2SqlError::Generate(e),
        }
    }
}
