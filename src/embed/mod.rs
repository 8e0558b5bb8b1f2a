//! Sentence embeddings: a BERT-style encoder (all-MiniLM-L6-v2 and models of its shape) read from a
//! sentence-transformers directory, for schema linking by meaning (issue #29).
//!
//! ```text
//! text ─WordPiece (tokenizer.json)→ [CLS] ids [SEP] (≤ 256)
//!      ─embeddings: word + position + token type 0, LayerNorm→ x [n, d]
//!      ─× layers: x = LN(x + attention(x)); x = LN(x + W2·gelu(W1·x))
//!      ─mean over the n tokens, then L2 norm→ [d], unit length
//! ```
//!
//! The files (`config.json`, `model.safetensors`, `tokenizer.json`, optionally
//! `1_Pooling/config.json`) are what the sentence-transformers package ships; nothing is
//! downloaded. Checked against an independent numpy forward of the same files
//! (`scripts/embed-reference.py`, fixture `tests/fixtures/minilm.json`): cosine ≥ 0.999 on every
//! fixture sentence (`tests/embed.rs`).

mod bert;
mod safetensors;

use std::path::{Path, PathBuf};

pub use bert::{Config, Encoder, MAX_TEXT, MAX_TOKENS};
pub use safetensors::SafeTensors;

/// The encoder `turboinfer-fetch-model` installs and `turboinfer_embed` uses by default.
pub const DEFAULT_ENCODER: &str = "all-minilm-l6-v2";

/// Longest encoder name accepted (the directory name under the models directory).
const MAX_NAME: usize = 64;

/// The directory of encoder `name` inside `models_dir`: a plain name (letters, digits, `.`, `_`,
/// `-`, not starting with `.`), whose directory, with every symlink resolved, still lies inside
/// the (resolved) models directory. Anyone may call `turboinfer_embed`, so the name must not be a
/// way to make the server read other files.
pub fn resolve_dir(name: &str, models_dir: &Path) -> Result<PathBuf, EmbedError> {
    let plain = !name.is_empty()
        && name.len() <= MAX_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !plain {
        return Err(EmbedError::BadName(name.chars().take(MAX_NAME + 1).collect()));
    }
    let dir = models_dir.join(name);
    let missing = || EmbedError::Missing { name: name.to_string(), dir: dir.clone() };
    let real = dir.canonicalize().map_err(|_| missing())?;
    let real_models = models_dir.canonicalize().map_err(|_| missing())?;
    if !real.starts_with(&real_models) || !real.is_dir() {
        return Err(missing());
    }
    Ok(real)
}

/// What can go wrong loading or running an encoder.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The encoder name is not a plain directory name.
    #[error("encoder name {0:?} is not a plain name (letters, digits, '.', '_', '-')")]
    BadName(String),
    /// No such encoder is installed.
    #[error("encoder {name:?} is not installed (looked for {dir:?})")]
    Missing { name: String, dir: PathBuf },
    /// The allocator refused the weights.
    #[error("{0}")]
    OutOfMemory(#[from] crate::platform::fallible::AllocError),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// A file is not what the encoder needs (its message names the file and the field).
    #[error("{0}")]
    Format(String),
    /// The tokenizer refused the text or its file.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
}
