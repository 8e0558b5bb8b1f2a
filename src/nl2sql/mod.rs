//! nl2sql, engine side (no PostgreSQL types): the schema model, its rendering to compact DDL,
//! trimming to the context budget, the ChatML prompt, the schema-prefix KV cache, generation
//! that stops at the end of the statement, and answer cleaning. The PostgreSQL glue
//! (`src/pg/nl2sql.rs`) reads the schema, validates with the server's parser and reports errors.

pub mod bench;
#[cfg(feature = "sparse")]
pub mod calibration;
pub mod candidates;
pub mod constrain;
mod conversation;
pub mod decode;
pub mod doubt;
pub mod draft;
mod engine;
mod error;
pub mod examples;
mod forward;
mod held;
mod hooks;
pub mod ident;
pub mod lexer;
pub mod link;
pub mod link_store;
mod memory_plan;
pub mod model_path;
mod options;
mod outcome;
mod prefix_cache;
mod prewarm;
mod progress;
pub mod prompt;
pub mod refusal;
mod render;
pub mod repair;
mod schema;
pub mod seq;
mod shaping;
pub mod sqltext;
mod stages;
pub mod trim;
mod values;
pub mod verdict;
mod vocab;

pub use crate::generate::fingerprint::Fingerprint;
pub use conversation::{Conversation, Dropped, FollowUp, Turn};
pub use decode::{DecodeLimits, Decoded, SpecStats, StopReason};
pub use engine::{Engine, Plan, MAX_QUESTION_CHARS};
pub use error::Nl2SqlError;
pub use forward::PREFILL_CHUNK;
pub use hooks::{ExecuteFn, Hooks};
pub use memory_plan::MemoryPlan;
pub use options::{
    Options, DEFAULT_CANDIDATES, DEFAULT_CONTEXT_TOKENS, DEFAULT_EXAMPLES,
    DEFAULT_FOLLOW_UP_TOKENS, DEFAULT_MAX_NEW_TOKENS, DEFAULT_REPAIR_ROUNDS, DEFAULT_REPAIR_TOKENS,
    DEFAULT_SAMPLES, DEFAULT_SCHEMA_TOKENS,
};
pub use outcome::{
    Attempt, Outcome, PhaseTimings, PromptSummary, RepairBudget, ShapingSummary, Speculation,
    TokenCounts,
};
pub use prefix_cache::{CacheEvent, CacheStats, PrefixCache, PrefixSource};
pub use prewarm::Prewarm;
pub use progress::Progress;
pub use render::{render_schema, Renderer};
pub use repair::Rejection;
pub use schema::{
    Column, ColumnStats, ForeignKey, LazyStats, SchemaInfo, StatsSource, Table, TableKind,
};
