//! The library half of the `turboinfer` command-line tool (the binary itself is
//! `src/bin/turboinfer.rs`, which only dispatches).
//!
//! - [`args`]: the one option parser the binary and every subcommand share.
//! - `sparse` (feature `sparse`): the sparse FFN subcommands (`calibrate`, `sparse-report`,
//!   `perplexity`, `sparse-agree`).

pub mod args;
#[cfg(feature = "sparse")]
pub mod sparse;
