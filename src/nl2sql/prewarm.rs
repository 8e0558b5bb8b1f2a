//! `Engine::prewarm`: the slow part of a first question, done ahead (after a restart, a
//! migration, or before users arrive): for a schema that fits the context, its prefix's KV state
//! (computed, or read from a cache file, and written to one for the other backends); for one that
//! does not, every table's embedding for schema linking (`link.rs`, stored in `link_store`'s
//! file for the other backends).

use std::time::Instant;

use super::engine::{normalized, Engine};
use super::link::LinkSlot;
use super::options::Options;
use super::outcome::PhaseTimings;
use super::prefix_cache::{PrefixCache, PrefixSource};
use super::progress::Progress;
use super::schema::SchemaInfo;
use super::Nl2SqlError;
use crate::clock::ms_since;
use crate::runtime::Runtime;

/// What a prewarm did.
#[derive(Debug, Clone, PartialEq)]
pub struct Prewarm {
    /// Tables and views of the schema.
    pub tables: usize,
    /// Whether the whole schema fits the context (then its prefix was prepared).
    pub fits: bool,
    /// Where the prefix's KV state came from, when it fits.
    pub prefix: Option<PrefixSource>,
    /// Its tokens.
    pub prefix_tokens: usize,
    /// Tables embedded now (the others were in this backend's memo or the shared file), when it
    /// does not fit and an encoder is configured.
    pub embedded: usize,
    /// Milliseconds in all.
    pub ms: f64,
}

impl Engine {
    /// Prepares `schema` under `opts` as described in the module documentation; `link` is the
    /// encoder nl2sql calls would use (`None`: nothing to embed); `progress` may cancel.
    pub fn prewarm(
        &self,
        rt: &Runtime,
        cache: &mut PrefixCache,
        schema: &SchemaInfo,
        opts: &Options,
        link: Option<LinkSlot<'_>>,
        progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Prewarm, Nl2SqlError> {
        let t = Instant::now();
        if schema.tables.is_empty() {
            return Err(Nl2SqlError::NoTables);
        }
        let schema = normalized(schema);
        // Whether it fits does not depend on the question beyond its few tokens: a one-character
        // question decides it (a question of hundreds of tokens may still not fit later).
        let plan = self.plan_normalized(&schema, "?", opts, None)?;
        let mut out = Prewarm {
            tables: schema.tables.len(),
            fits: plan.linking.is_none(),
            prefix: None,
            prefix_tokens: 0,
            embedded: 0,
            ms: 0.0,
        };
        if out.fits {
            self.ready_kv(cache, self.memory_plan(opts, rt.n_threads()).positions)?;
            let mut timings = PhaseTimings::default();
            out.prefix = Some(self.load_prefix(rt, cache, &plan, &mut timings, progress)?.0);
            out.prefix_tokens = plan.prefix_ids.len();
        } else if let Some(mut slot) = link {
            let linker = slot.get()?;
            out.embedded = linker.similarity(rt, &schema, "?", progress)?.1;
        }
        out.ms = ms_since(t);
        Ok(out)
    }
}
