//! The built-in benchmark behind `turboinfer_bench()`: one question over a fixed two-table schema,
//! answered cold (the schema prefix computed) and then warm (the prefix reused).

use crate::nl2sql::api::outcome::Outcome;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::options::Options;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::check::rejection::Rejection;
use crate::nl2sql::decode::prefix_cache::PrefixCache;
use crate::nl2sql::schema::tables::{ForeignKey, SchemaInfo, Table, TableKind};
use crate::nl2sql::Engine;
use crate::platform::runtime::Runtime;
use std::time::Instant;

/// The benchmark's question.
pub const BENCH_QUESTION: &str = "How many users are there?";

/// The benchmark schema (the fixtures' two tables, in schema `bench`).
pub fn bench_schema() -> SchemaInfo {
    let mut users = Table::new("bench", "users", TableKind::Table)
        .column("id", "integer", false)
        .column("name", "text", false)
        .column("email", "text", true)
        .column("country", "text", true)
        .column("created_at", "timestamp without time zone", true);
    users.primary_key = vec!["id".into()];
    let mut orders = Table::new("bench", "orders", TableKind::Table)
        .column("id", "integer", false)
        .column("user_id", "integer", true)
        .column("amount", "numeric(10,2)", true)
        .column("status", "text", true)
        .column("ordered_at", "timestamp without time zone", true);
    orders.primary_key = vec!["id".into()];
    orders.foreign_keys.push(ForeignKey {
        columns: vec!["user_id".into()],
        ref_schema: "bench".into(),
        ref_table: "users".into(),
        ref_columns: vec!["id".into()],
    });
    SchemaInfo::new(vec![users, orders], Some("bench"))
}

/// The two answers of a benchmark run and their wall-clock times.
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// The first answer, with a fresh prefix cache (the schema prefix is computed).
    pub cold: Outcome,
    pub cold_ms: f64,
    /// The same question again (the prefix comes from the cache).
    pub warm: Outcome,
    pub warm_ms: f64,
}

impl BenchRun {
    /// Prompt tokens per second of the cold answer's prefill.
    pub fn prefill_tok_s(&self) -> f64 {
        rate(self.cold.tokens.prefill, self.cold.timings.prefill_ms)
    }

    /// Generated tokens per second of the cold answer's decode.
    pub fn decode_tok_s(&self) -> f64 {
        rate(self.cold.tokens.generated, self.cold.timings.decode_ms)
    }
}

/// `n` per `ms` milliseconds, in per second (0 when no time was measured).
fn rate(n: usize, ms: f64) -> f64 {
    if ms > 0.0 {
        n as f64 * 1000.0 / ms
    } else {
        0.0
    }
}

/// Answers [`BENCH_QUESTION`] over [`bench_schema`] twice with one prefix cache (see
/// [`Engine::run`] for `on_progress` and `validate`). Timing only: an answer the validator
/// rejects (a small model) still measures the engine.
pub fn bench(
    engine: &Engine,
    rt: &Runtime,
    opts: &Options,
    on_progress: &mut dyn FnMut(Progress) -> bool,
    validate: &mut dyn FnMut(&str) -> Result<(), Rejection>,
) -> Result<BenchRun, Nl2SqlError> {
    let schema = bench_schema();
    let mut cache = PrefixCache::new();
    let mut answer = || {
        let t = Instant::now();
        let out =
            engine.run(rt, &mut cache, &schema, BENCH_QUESTION, opts, on_progress, validate)?;
        Ok::<_, Nl2SqlError>((out, t.elapsed().as_secs_f64() * 1000.0))
    };
    let (cold, cold_ms) = answer()?;
    let (warm, warm_ms) = answer()?;
    Ok(BenchRun { cold, cold_ms, warm, warm_ms })
}
