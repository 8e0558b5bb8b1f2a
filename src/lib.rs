//! TurboInfer: a CPU language-model engine (pure Rust, no PostgreSQL types) plus, behind the
//! `pg` feature, the thin PostgreSQL glue in `src/pg/`.
//!
//! The modules in dependency order, one blank line apart so that rustfmt keeps the order: each
//! uses only those above it (`make lint` checks there is no circle). The engine comes first, then
//! `nl2sql` (what knows SQL), then `pg` (the glue, the only module that knows the server).
//! `docs/architecture.md` has the map.
#![recursion_limit = "256"] // serde_json::json! objects with many keys (nl2sql_explain)

/// What the engine asks of the process: its thread pool, fallible allocation, the clock.
pub mod platform;

/// Files on disk: opening without blocking, atomic writes, validated and watched mappings.
pub mod fileio;

/// Quantized block formats: scalar reference, quantizers, the numeric contract.
pub mod quant;

/// GGUF model files: the reader over a shared mapping, the writer, requantization.
pub mod gguf;

/// SIMD kernels per CPU tier, CPU feature detection, the engine's elementary functions.
pub mod kernels;

/// Numeric operations of the forward pass: norms, RoPE, attention, matrix products.
pub mod ops;

/// The transformer: configuration, weights over the mapping, forward pass, KV cache.
pub mod model;

/// Byte-level BPE from the GGUF vocabulary.
pub mod tokenizer;

/// The sentence encoder (BERT) used for schema linking and `turboinfer_embed()`.
pub mod embed;

/// Many sequences served from one model: batched passes, KV caches under a memory budget.
pub mod serve;

/// Generation that knows no SQL: the decode loop, samplers, speculation, KV-state files.
pub mod generate;

/// Experimental sparse FFN (PowerInfer-style), plugged into the forward pass through a hook.
#[cfg(feature = "sparse")]
pub mod sparse;

/// The library half of the `turboinfer` CLI: its option parser and the sparse subcommands.
pub mod cli;

/// What knows SQL and schemas: linking, prompts, drafts, constraints, repair, the Engine.
pub mod nl2sql;

/// The PostgreSQL glue: settings, per-backend state, catalog, validation, SQL functions.
#[cfg(feature = "pg")]
mod pg;
