//! The backend's sentence encoder (`crate::embed`, wrapped in schema linking's `Linker`), shared by
//! `turboinfer_embed(text, encoder)` (a sentence embedding as `real[]`) and nl2sql's schema
//! linking (`nl2sql::link`).
//!
//! The encoder is loaded on first use in a backend and kept (one at a time: ~90 MB for
//! all-MiniLM-L6-v2; asking for another replaces it). turboinfer_embed runs it on the backend
//! thread (a text is at most 256 tokens: tens of milliseconds); schema linking on the backend's
//! worker threads, between progress checks (and loads it on one of them, while the backend thread
//! describes the tables). Nothing of PostgreSQL's reaches the engine but text.

use std::cell::RefCell;
use std::path::Path;

use pgrx::prelude::*;

use super::errors::report;
use crate::nl2sql::link::{LinkSlot, Linker};
use crate::nl2sql::model_path::MODELS_DIR;

thread_local! {
    /// The backend's encoder (with the table embeddings schema linking computed), shared by
    /// turboinfer_embed() and nl2sql(): one at a time.
    static LINKER: RefCell<Option<Linker>> = const { RefCell::new(None) };
}

/// Runs `f` with the backend's linker slot (empty until an encoder is first needed). The linker
/// is taken out of the slot while `f` runs (SQL that `f` runs may call turboinfer_embed(), which
/// then loads its own) and put back afterwards, also when an ERROR unwinds through `f`.
pub(super) fn with_linker<R>(f: impl FnOnce(&mut Option<Linker>) -> R) -> R {
    /// Puts the linker back into the slot when dropped.
    struct Back(Option<Linker>);
    impl Drop for Back {
        fn drop(&mut self) {
            if let Some(l) = self.0.take() {
                LINKER.with_borrow_mut(|slot| *slot = Some(l));
            }
        }
    }
    let mut held = Back(LINKER.with_borrow_mut(Option::take));
    f(&mut held.0)
}

/// Most bytes of the table embeddings file (`nl2sql::link_store`): a quarter of
/// turboinfer.cache_max_mb, at most 256 MiB (~170,000 tables of all-MiniLM-L6-v2).
const STORE_MAX_BYTES: u64 = 256 << 20;

/// The slot of `linker` for encoder `encoder`: the models directory, and the embeddings file in
/// the schema-prefix cache directory when there is one (turboinfer.cache_max_mb > 0).
pub(super) fn slot<'a>(linker: &'a mut Option<Linker>, encoder: &'a str) -> LinkSlot<'a> {
    let store = super::gucs::kv_file_dir()
        .map(|d| (d.dir().to_path_buf(), (d.max_bytes() / 4).min(STORE_MAX_BYTES)));
    LinkSlot { linker, encoder, models_dir: Path::new(MODELS_DIR), store }
}

/// `turboinfer_embed(text, encoder DEFAULT 'all-minilm-l6-v2') RETURNS real[]`: the unit-length
/// sentence embedding of `text` (384 values for all-MiniLM-L6-v2; texts beyond 256 tokens are
/// truncated). The encoder is a directory inside the models directory that
/// `turboinfer-fetch-model` installed (the SQL default is `embed::DEFAULT_ENCODER`, spelled out
/// because pgrx needs a literal). Cosine similarity of two embeddings is their dot product.
#[pg_extern(stable, strict, parallel_safe, security_invoker)]
fn turboinfer_embed(text: &str, encoder: default!(&str, "'all-minilm-l6-v2'")) -> Vec<f32> {
    with_linker(|linker| {
        let mut slot = slot(linker, encoder);
        let l = slot.get().unwrap_or_else(|e| report(e));
        l.encoder().embed(text).unwrap_or_else(|e| report(e))
    })
}
