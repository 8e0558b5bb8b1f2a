//! Room `decode`: forward passes and generation: the KV sequences (`seq.rs`) and the session's
//! prefix cache, the passes (`passes.rs`), the decoder that stops at the end of the statement
//! (`sql_decode.rs`) with SQL drafts (`draft/`), the identifier constraints of repair answers
//! (`constrain.rs`, `sql_words.rs`, `shaping.rs`), what the cache holds after the question
//! (`held.rs`), and the token scores and choice of candidate answers (`candidates.rs`).

pub mod candidates;
pub mod constrain;
pub mod draft;
pub(crate) mod held;
pub(crate) mod passes;
pub(crate) mod prefix_cache;
pub mod seq;
pub(crate) mod shaping;
pub(crate) mod sql_decode;
pub(crate) mod sql_words;

pub use sql_decode::{decode, Choice, DecodeLimits, Decoded, SpecStats, Start, StopReason};
