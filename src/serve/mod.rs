//! Many sequences served from one model: every waiting sequence's new tokens in one batched
//! forward pass ([`Model::forward_batch`]), their KV caches held under a memory budget.
//!
//! This is the engine half of batching across callers (issue #30): a process that owns the
//! model (the PostgreSQL glue's background worker) takes requests from its callers, each for a
//! forward pass over its sequence's new tokens, and runs the ones waiting together, so the
//! weights are read once per pass instead of once per caller. The callers keep everything
//! else (prompt, constraints, drafts, validation) and ask only for logits.
//!
//! - [`table`]: the sequences, their token histories and their caches; least recently used
//!   caches are evicted when the budget is full, and rebuilt from the history when their
//!   sequence comes back.
//! - [`error`]: what a request can get wrong.
//! - [`wire`]: one caller's requests and their answers as bytes, for a shared-memory segment
//!   between a backend and the worker.
//!
//! Greedy answers cannot change: a sequence's logits are bitwise those of the sequence run
//! alone, whatever it was batched with, whether its cache was evicted and recomputed, and
//! whether its prefix was copied from another sequence's cache (every position's keys and
//! values depend only on the tokens up to it, computed row by row: the batch = sequential
//! property of the engine).

mod error;
mod table;
pub mod wire;

pub use error::ServeError;
pub use table::{Reply, Request, SeqId, Server, ServerStats};
