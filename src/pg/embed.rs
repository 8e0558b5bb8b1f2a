//! `turboinfer_embed(text, encoder)`: a sentence embedding of `text` (`crate::embed`), as `real[]`.
//!
//! The encoder is loaded on the first call in a backend and kept (one at a time: ~90 MB for
//! all-MiniLM-L6-v2; asking for another replaces it). It runs on the backend thread, single
//! threaded (a text is at most 256 tokens: tens of milliseconds), so there is no worker to
//! interrupt; nothing of PostgreSQL's reaches the engine but the text.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use pgrx::prelude::*;

use super::errors::report;
use crate::embed::{resolve_dir, Encoder};
use crate::nl2sql::model_path::MODELS_DIR;

thread_local! {
    /// The backend's encoder and the name it was loaded as.
    static ENCODER: RefCell<Option<(String, Rc<Encoder>)>> = const { RefCell::new(None) };
}

/// The encoder named `name`, loaded now if the backend holds another or none.
fn load_encoder(name: &str) -> Rc<Encoder> {
    if let Some(e) =
        ENCODER.with_borrow(|c| c.as_ref().filter(|(n, _)| n == name).map(|(_, e)| e.clone()))
    {
        return e;
    }
    let dir = resolve_dir(name, Path::new(MODELS_DIR)).unwrap_or_else(|e| report(e));
    // Drop the old one before loading: two encoders at once would double the memory.
    ENCODER.with_borrow_mut(|c| *c = None);
    let e = Rc::new(Encoder::load(&dir).unwrap_or_else(|e| report(e)));
    ENCODER.with_borrow_mut(|c| *c = Some((name.to_string(), e.clone())));
    e
}

/// `turboinfer_embed(text, encoder DEFAULT 'all-minilm-l6-v2') RETURNS real[]`: the unit-length
/// sentence embedding of `text` (384 values for all-MiniLM-L6-v2; texts beyond 256 tokens are
/// truncated). The encoder is a directory inside the models directory that
/// `turboinfer-fetch-model` installed (the SQL default is `embed::DEFAULT_ENCODER`, spelled out
/// because pgrx needs a literal). Cosine similarity of two embeddings is their dot product.
#[pg_extern(stable, strict, parallel_safe, security_invoker)]
fn turboinfer_embed(text: &str, encoder: default!(&str, "'all-minilm-l6-v2'")) -> Vec<f32> {
    load_encoder(encoder).embed(text).unwrap_or_else(|e| report(e))
}
