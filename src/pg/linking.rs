//! Schema preparation: `nl2sql_tables(question [, schemas])`, the tables nl2sql() would show the
//! model for a question and how they were chosen, without generating anything (schema linking,
//! `nl2sql::link`); and `turboinfer_prewarm([schemas])`, which does a first question's slow part
//! ahead (`Engine::prewarm`).
//!
//! For a DBA asking "why did it not see my table?" and for benchmarks of the choice itself: the
//! same plan as an nl2sql call with the same settings, in milliseconds instead of seconds (no
//! forward pass; the first call over a large schema embeds its tables, as nl2sql's would).

use pgrx::prelude::*;

use super::encoding::{Jsonb, Text, TextArray};
use super::errors::report;
use super::{backend, catalog, gucs, progress, slots};
use crate::nl2sql::link::LinkSlot;
use crate::nl2sql::{Engine, Nl2SqlError, Options, PrefixCache, Progress};
use crate::platform::runtime::Runtime;

/// One row of nl2sql_tables(): position, table, similarity, chosen by.
type Row = (i32, String, Option<f32>, String);

/// `nl2sql_tables(question, schemas DEFAULT NULL)`: the tables an nl2sql call would show, in
/// prompt order: `chosen_by` is `all` (the whole schema fits), `meaning` (by the encoder's
/// similarity to the question, shown per table) or `words` (by the question's words: no encoder,
/// or turboinfer.schema_encoder empty).
/// A NULL question gives no rows (not STRICT: `schemas` NULL is its default).
#[pg_extern(volatile, parallel_unsafe, security_invoker)]
fn nl2sql_tables(
    question: Option<Text>,
    schemas: default!(Option<TextArray>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(position, i32),
        name!(table_name, String),
        name!(similarity, Option<f32>),
        name!(chosen_by, String),
    ),
> {
    let Some(Text(question)) = question else { return TableIterator::new(Vec::new()) };
    let (schema, _) = read_schema(schemas.map(|s| s.0));
    let plan = with_engine(|engine, _, rt, opts, link, progress| {
        engine.plan_linked(rt, &schema, &question, opts, link, progress)
    });
    let (by, sims) = match &plan.linking {
        None => ("all", Vec::new()),
        Some(l) if l.encoder.is_some() => ("meaning", l.similarity.clone()),
        Some(_) => ("words", Vec::new()),
    };
    let rows: Vec<Row> = plan
        .shown
        .into_iter()
        .enumerate()
        .map(|(i, t)| (i as i32 + 1, t, sims.get(i).copied(), by.to_string()))
        .collect();
    TableIterator::new(rows)
}

/// `turboinfer_prewarm(schemas DEFAULT NULL) RETURNS jsonb`: prepares the schema the caller sees
/// (the search path, or `schemas`) for the next questions, in this backend and, through the
/// cache directory, in every other: a schema that fits the context gets its prefix computed (or
/// read) and written to a cache file; one that does not gets every table embedded for schema
/// linking (written to the embeddings file), and the prefix of its home schema alone (the first
/// schema) when that fits. Run it after a restart or a migration, e.g. from a scheduler, as a
/// role that sees what the users see. Returns what it did.
#[pg_extern(volatile, parallel_unsafe, security_invoker)]
fn turboinfer_prewarm(schemas: default!(Option<TextArray>, "NULL")) -> Jsonb {
    Jsonb(prewarm(schemas.map(|s| s.0)))
}

/// What `turboinfer_prewarm(schemas)` does and returns, as the current role with the current
/// search path; also the background preparation's work (`prepare::worker`). An error is raised
/// as nl2sql's.
pub(super) fn prewarm(schemas: Option<Vec<String>>) -> serde_json::Value {
    let (schema, _) = read_schema(schemas);
    let p = with_engine(|engine, cache, rt, opts, link, progress| {
        engine.prewarm(rt, cache, &schema, opts, link, progress)
    });
    let encoder = if p.fits { None } else { gucs::schema_encoder() };
    serde_json::json!({
        "tables": p.tables,
        "fits": p.fits,
        "prefix": p.prefix.map(|s| s.name()),
        "prefix_tables": p.prefix_tables,
        "prefix_tokens": p.prefix_tokens,
        "encoder": encoder,
        "tables_embedded": p.embedded,
        "ms": (p.ms * 10.0).round() / 10.0,
    })
}

/// The schema `schemas` (or the search path) names, as `catalog::read_schema_cached`, read while
/// a model to (re)load loads beside (`backend::load_beside`).
fn read_schema(
    schemas: Option<Vec<String>>,
) -> (std::rc::Rc<crate::nl2sql::SchemaInfo>, super::catalog_cache::Use) {
    let read = || catalog::read_schema_cached(schemas);
    backend::load_beside(read).map(|(_, r)| r).unwrap_or_else(|e| report(e))
}

/// Runs `f` with the backend's engine, its prefix cache (pointed at the cache directory), its
/// threads, the call's options, the linker slot of `turboinfer.schema_encoder` and a progress
/// report that checks for interrupts, holding an inference slot (embedding thousands of tables
/// is model-sized work); an error is raised as nl2sql's.
fn with_engine<R>(
    f: impl FnOnce(
        &Engine,
        &mut PrefixCache,
        &Runtime,
        &Options,
        Option<LinkSlot<'_>>,
        &mut dyn FnMut(Progress) -> bool,
    ) -> Result<R, Nl2SqlError>,
) -> R {
    let opts = super::nl2sql::options();
    let slot = slots::acquire();
    let encoder = gucs::schema_encoder();
    let mut reporter = progress::Reporter::new();
    let out = backend::with_backend(|b| {
        let (loaded, _, rt) = b.model_and_runtime().unwrap_or_else(|e| report(e));
        loaded.cache.set_file_dir(gucs::kv_file_dir());
        super::embed::with_linker(|linker| {
            let link = encoder.as_deref().map(|encoder| super::embed::slot(linker, encoder));
            let mut progress = |p| {
                pgrx::check_for_interrupts!();
                reporter.on(p);
                true
            };
            f(&loaded.engine, &mut loaded.cache, rt, &opts, link, &mut progress)
        })
    });
    reporter.finish();
    drop(slot);
    out.unwrap_or_else(|e| report(e))
}
