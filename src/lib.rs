//! TurboInfer: a CPU language-model engine (pure Rust, no PostgreSQL types) plus, behind the
//! `pg` feature, the thin PostgreSQL glue in `src/pg/`.
#![recursion_limit = "256"] // serde_json::json! objects with many keys (nl2sql_explain)

pub mod cli_args;
pub mod clock;
pub mod cpu;
pub mod embed;
pub mod fallible;
pub mod fileio;
pub mod generate;
pub mod gguf;
pub mod kernels;
pub mod mapguard;
pub mod math;
pub mod model;
pub mod nl2sql;
pub mod ops;
pub mod quant;
pub mod regular_file;
pub mod runtime;
pub mod sampler;
pub mod serve;
#[cfg(feature = "sparse")]
pub mod sparse;
pub mod tokenizer;

#[cfg(feature = "pg")]
mod pg;
