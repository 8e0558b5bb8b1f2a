//! nl2sql, engine side (no PostgreSQL types): a question and a schema in, SQL out. The PostgreSQL
//! glue (`src/pg/nl2sql.rs`) reads the schema, validates with the server's parser and reports
//! errors; [`Engine::answer`] (`engine.rs`) is the way in: the pipeline of one call as its stages
//! in order (`stages/`), each over the call's state.
//!
//! Rooms, in order: `base/`, `sql/`, `schema/`, `plan/`, `decode/`, `check/`, `repair/`, `api/`,
//! `stages/`, then the root (`engine.rs`, this file), then `support/`.
//! A room names only rooms before it (no upward arrow; `make lint`, tools/nl2sql_house.py rooms):
//! - `base/`: errors, progress events, the memory plan, the call's settings;
//! - `sql/`: SQL text without a schema (lexer, identifiers, the statement of an answer);
//! - `schema/`: the tables the caller may read and their rendering to DDL;
//! - `plan/`: the prompt of a call: tables chosen, examples, earlier turns, tokenized;
//! - `decode/`: KV sequences and the prefix cache, forward passes, decoding with drafts and
//!   identifier constraints, candidates' token scores and choice;
//! - `check/`: the refusal check, the validator's verdict, doubts, statement helpers;
//! - `repair/`: a repair round's feedback and the engine's own rewrites;
//! - `api/`: the caller's hooks, the call's outcome, the conversation a client carries and the
//!   verdict on an answer;
//! - `stages/`: the pipeline's stages over the call's state;
//! - the root: `Engine` and its way in, [`Engine::answer`];
//! - `support/` (not the pipeline): the benchmark, sparse calibration prompts, model paths,
//!   prewarming.

pub mod api;
pub mod base;
pub mod check;
pub mod decode;
mod engine;
pub mod plan;
pub mod repair;
pub mod schema;
pub mod sql;
mod stages;
pub mod support;

pub use crate::generate::fingerprint::Fingerprint;
pub use api::carried::{Carried, TokenError};
pub use api::hooks::{ExecuteFn, Hooks};
pub use api::outcome::{
    Attempt, Dropped, FollowUp, Outcome, PhaseTimings, PromptSummary, RepairBudget, ShapingSummary,
    Speculation, TokenCounts,
};
pub use api::verdict;
pub use base::error::Nl2SqlError;
pub use base::memory_plan::MemoryPlan;
pub use base::options::{
    Options, DEFAULT_CANDIDATES, DEFAULT_CONTEXT_TOKENS, DEFAULT_EXAMPLES,
    DEFAULT_FOLLOW_UP_TOKENS, DEFAULT_MAX_NEW_TOKENS, DEFAULT_REPAIR_ROUNDS, DEFAULT_REPAIR_TOKENS,
    DEFAULT_SAMPLES, DEFAULT_SCHEMA_TOKENS,
};
pub use base::progress::Progress;
pub use check::rejection::Rejection;
pub use decode::passes::PREFILL_CHUNK;
pub use decode::prefix_cache::{CacheEvent, CacheStats, PrefixCache, PrefixSource};
pub use decode::{DecodeLimits, Decoded, SpecStats, StopReason};
pub use engine::Engine;
pub use plan::conversation::{Conversation, Turn};
pub use plan::planner::{Plan, MAX_QUESTION_CHARS};
pub use schema::render::{render_schema, Renderer};
pub use schema::tables::{
    Column, ColumnStats, ForeignKey, LazyStats, SchemaInfo, StatsSource, Table, TableKind,
};
pub use stages::Call;
pub use support::prewarm::Prewarm;

// The rooms' public modules at their former paths (`nl2sql::prompt`, `nl2sql::doubt`, ...), so
// that callers outside nl2sql/ keep their imports; inside nl2sql/ every path names its room.
pub use check::{doubt, refusal, rejection, statement};
pub use decode::{candidates, constrain, draft, seq};
pub use plan::{examples, link, link_store, prompt, trim};
pub use repair::{feedback, fixes};
pub use sql::{ident, lexer, sqltext};
#[cfg(feature = "sparse")]
pub use support::calibration;
pub use support::{bench, model_path};
