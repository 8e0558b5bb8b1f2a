//! The tokenizer's error type.

/// Everything that can go wrong while building a tokenizer from GGUF metadata or encoding text.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    #[error("tokenizer metadata key {0:?} is missing")]
    MissingKey(String),
    #[error("tokenizer metadata key {key:?} has type {found}, expected {expected}")]
    WrongType { key: String, expected: &'static str, found: &'static str },
    #[error("unsupported tokenizer model {0:?} (supported: \"gpt2\", byte-level BPE)")]
    UnsupportedModel(String),
    #[error("unsupported pre-tokenizer {0:?} (supported: {supported})", supported = super::pretok::SUPPORTED.join(", "))]
    UnsupportedPreTokenizer(String),
    #[error("invalid tokenizer vocabulary: {0}")]
    InvalidVocab(String),
    #[error("cannot build the BPE tokenizer: {0}")]
    Build(String),
    #[error("cannot encode text: {0}")]
    Encode(String),
}
