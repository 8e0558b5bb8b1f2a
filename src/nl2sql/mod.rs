//! nl2sql, engine side (no PostgreSQL types): the schema model, its rendering to compact DDL,
//! trimming to the context budget, the ChatML prompt, the schema-prefix KV cache, generation
//! that stops at the end of the statement, and answer cleaning. The PostgreSQL glue
//! (`src/pg/nl2sql.rs`) reads the schema, validates with the server's parser and reports errors.

pub mod calibration;
pub mod constrain;
pub mod draft;
mod engine;
mod error;
mod fingerprint;
pub mod ident;
pub mod kv_file;
pub mod model_path;
pub mod prompt;
mod render;
pub mod repair;
mod schema;
pub mod speculate;
pub mod sqltext;
pub mod trim;
mod values;
pub mod vocab;

pub use engine::{
    Attempt, CacheEvent, CacheStats, Engine, MemoryPlan, Options, Outcome, PhaseTimings, Plan,
    PrefixCache, PrefixSource, Progress, StopReason, DEFAULT_MAX_NEW_TOKENS, DEFAULT_REPAIR_ROUNDS,
    MAX_QUESTION_CHARS, PREFILL_CHUNK,
};
pub use error::Nl2SqlError;
pub use fingerprint::Fingerprint;
pub use render::{render_schema, Renderer};
pub use repair::Rejection;
pub use schema::{Column, ColumnStats, ForeignKey, SchemaInfo, Table, TableKind};
pub use speculate::{DecodeLimits, Decoded, SpecStats};
