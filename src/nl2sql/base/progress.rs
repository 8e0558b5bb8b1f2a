//! What an nl2sql call is doing, reported to its caller: the engine side of progress, whose
//! PostgreSQL side (`src/pg/progress.rs`) turns it into NOTICEs and checks for interrupts.

/// What the engine is doing, reported before every forward pass (the caller may cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// About to run prompt tokens `done..done+chunk` of `total` (the question, a repair turn).
    Prefill { done: usize, total: usize },
    /// The same for the schema prefix when it is computed (no cached KV state): the long prefill,
    /// hundreds of ms to many seconds on a large schema.
    SchemaPrefill { done: usize, total: usize },
    /// About to embed tables `done..` of the `total` whose descriptions the linker has not seen
    /// (`link.rs`): seconds for thousands of tables, once per schema and backend.
    Linking { done: usize, total: usize },
    /// `generated` tokens generated so far in this attempt.
    Decode { generated: usize },
}
