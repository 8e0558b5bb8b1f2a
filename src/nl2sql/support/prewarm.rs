//! `Engine::prewarm`: the slow part of a first question, done ahead (after a restart, a
//! migration, or before users arrive): for a schema that fits the context, its prefix's KV state
//! (computed, or read from a cache file, and written to one for the other backends); for one that
//! does not, every table's embedding for schema linking (`link.rs`, stored in `link_store`'s
//! file for the other backends), and the prefix of the home schema alone when that fits.
//!
//! Why the home schema's prefix: a question over a schema that does not fit is shown the home
//! schema (the search path's first) whole when it fits, plus only the tables of other schemas
//! that rank ahead of every home table (`trim::select_home_first`). Most questions have none
//! ahead, and their prompt's prefix is then exactly the home tables' blocks and the notes: the
//! text, hence the fingerprint and the cache file, a plan over the home tables alone produces
//! (each block depends on its table and the default schema only). A question with tables ahead
//! simply misses that file.

use std::time::Instant;

use crate::nl2sql::api::outcome::PhaseTimings;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::options::Options;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::decode::prefix_cache::{PrefixCache, PrefixSource};
use crate::nl2sql::plan::link::LinkSlot;
use crate::nl2sql::plan::planner::{normalized, Plan};
use crate::nl2sql::plan::prompt;
use crate::nl2sql::schema::tables::SchemaInfo;
use crate::nl2sql::Engine;
use crate::platform::clock::ms_since;
use crate::platform::runtime::Runtime;

/// What a prewarm did.
#[derive(Debug, Clone, PartialEq)]
pub struct Prewarm {
    /// Tables and views of the schema.
    pub tables: usize,
    /// Whether the whole schema fits the context (then its prefix was prepared).
    pub fits: bool,
    /// Where the prepared prefix's KV state came from: the whole schema's when it fits, else
    /// the home schema's alone when that fits (`None`: no prefix prepared).
    pub prefix: Option<PrefixSource>,
    /// Tables in the prepared prefix (all, or the home schema's).
    pub prefix_tables: usize,
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
        let plan = self.plan_normalized(&schema, "?", opts, None, None)?;
        let mut out = Prewarm {
            tables: schema.tables.len(),
            fits: plan.linking.is_none(),
            prefix: None,
            prefix_tables: 0,
            prefix_tokens: 0,
            embedded: 0,
            ms: 0.0,
        };
        let prefix_plan = if out.fits {
            Some(plan)
        } else {
            if let Some(mut slot) = link {
                let linker = slot.get()?;
                out.embedded = linker.similarity(rt, &schema, "?", progress)?.1;
            }
            self.home_plan(&schema, opts)?
        };
        if let Some(plan) = prefix_plan {
            self.ready_kv(cache, self.memory_plan(opts, rt.n_threads()).positions)?;
            let mut timings = PhaseTimings::default();
            out.prefix = Some(self.load_prefix(rt, cache, &plan, &mut timings, progress)?.0);
            out.prefix_tables = plan.shown.len();
            out.prefix_tokens = plan.prefix_ids.len();
        }
        out.ms = ms_since(t);
        Ok(out)
    }

    /// The plan of the home schema's tables alone, when the normalized `schema` has any and
    /// they fit the context and the schema budget (`opts.schema_tokens`) the way a question
    /// over the whole schema would show them whole; else `None`.
    fn home_plan(&self, schema: &SchemaInfo, opts: &Options) -> Result<Option<Plan>, Nl2SqlError> {
        let home = schema.default_schema.as_deref();
        let tables: Vec<usize> = (0..schema.tables.len())
            .filter(|&i| Some(schema.tables[i].schema.as_str()) == home)
            .collect();
        if tables.is_empty() || tables.len() == schema.tables.len() {
            // No home schema, or nothing but it: that is the whole schema, which does not fit.
            return Ok(None);
        }
        // Still normalized: a subsequence of a sorted, deduplicated list.
        let alone = schema.subset_with_stats(&tables);
        let plan = match self.plan_normalized(&alone, "?", opts, None, None) {
            // Not even one home table fits: there is nothing to prepare.
            Err(Nl2SqlError::ContextTooSmall { .. }) => return Ok(None),
            r => r?,
        };
        let fixed = prompt::prefix_with_notes("").encode(self.tokenizer())?.len();
        let within_budget =
            opts.schema_tokens == 0 || plan.prefix_ids.len() <= fixed + opts.schema_tokens;
        Ok((plan.linking.is_none() && within_budget).then_some(plan))
    }
}
