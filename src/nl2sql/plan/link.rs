//! Schema linking by meaning: when the schema does not fit the prompt, which tables to show.
//!
//! Each table is described in one line of words (`table_text`: its name and its columns' names
//! split at `_`, its comment and its columns' comments), embedded by the sentence encoder
//! (`crate::embed`), and compared with the question's embedding (cosine: a dot product of unit
//! vectors). Tables are offered to the prompt's budget by that similarity fused with the
//! question's words found in table and column names (`trim::matches`; reciprocal rank fusion,
//! [`fuse`]), best first, each followed by the tables its foreign keys reference (what a join
//! from it needs); ties go to schema order, so the choice is deterministic.
//!
//! Embeddings are kept per table text (`Linker`'s memo, per backend, and `link_store`'s file for
//! every backend): a table is embedded again only when its description changes, so after the
//! first question about a schema the cost per call is one embedding (the question's) and the dot
//! products. What only the tables give (their descriptions' keys, their words) is kept for a
//! schema whose reader stamped it (`SchemaInfo::stamp`: the PostgreSQL glue's schema cache), so
//! a warm call over 5,000 tables ranks them in ~13 ms instead of ~37.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;

use crate::embed::{resolve_dir, EmbedError, Encoder};
use crate::model::packed::fnv1a64;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::plan::link_store::LinkStore;
use crate::nl2sql::plan::trim;
use crate::nl2sql::schema::tables::{SchemaInfo, Table};
use crate::platform::clock::ms_since;
use crate::platform::runtime::Runtime;

/// Most table embeddings a linker keeps (384 floats each for all-MiniLM-L6-v2: ~1.5 KiB; 100,000
/// are ~150 MiB). Beyond it the memo starts afresh: a bound on a backend's memory, far above
/// any one catalog this is meant for (thousands of tables).
const MAX_MEMO: usize = 100_000;

/// Tables embedded per thread between two progress reports (which may cancel the call): a
/// description of 256 tokens (the encoder's limit) takes ~0.2 s on one core, so a cancel waits
/// at most about that long.
const PER_THREAD: usize = 1;

/// Characters of a table's description kept (the encoder reads at most 256 tokens of it; a
/// comment may be long).
const MAX_TEXT_CHARS: usize = 2000;

/// A loaded sentence encoder and the table embeddings it computed or read.
pub struct Linker {
    name: String,
    encoder: Encoder,
    /// Identifies the encoder's files (`link_store`'s tag).
    tag: u64,
    /// Hash of a table's description → its unit-length embedding.
    memo: HashMap<u64, Vec<f32>>,
    /// Where embeddings are shared with other backends, when there is a cache directory.
    store: Option<LinkStore>,
    /// What the last stamped schema's tables gave (their descriptions' keys and their words),
    /// reused while the same schema comes back (`SchemaInfo::stamp`).
    derived: Option<Derived>,
}

/// What linking derives from a schema's tables alone, kept by its stamp: describing and hashing
/// thousands of tables, and splitting their names into words, cost more than the rest of a call.
struct Derived {
    stamp: Option<u64>,
    /// [table] the key of its description ([`table_text`], [`text_key`]).
    keys: Vec<u64>,
    /// [table] its words for `trim::matches_in`.
    words: Vec<trim::TableWords>,
}

/// What linking did in one call (`nl2sql_explain`'s `linking`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkReport {
    /// The encoder's name, or `None` when tables were chosen by the question's words.
    pub encoder: Option<String>,
    /// Why the encoder was not used (not installed, failed to load), when it was not.
    pub fallback: Option<String>,
    /// Tables embedded in this call (the others came from the memo).
    pub embedded: usize,
    /// Time spent embedding and ranking, ms.
    pub ms: f64,
    /// The shown tables' similarity to the question, in prompt order (empty by words).
    pub similarity: Vec<f32>,
}

/// Where an nl2sql call finds its linker: the backend's slot (loaded into it on first use) and
/// the encoder to load there.
pub struct LinkSlot<'a> {
    pub linker: &'a mut Option<Linker>,
    /// The encoder's name (a directory inside `models_dir`, see `embed::resolve_dir`).
    pub encoder: &'a str,
    pub models_dir: &'a Path,
    /// The directory and size limit of the embeddings file shared by backends (`link_store`);
    /// `None`: embeddings stay in this backend.
    pub store: Option<(PathBuf, u64)>,
}

impl LinkSlot<'_> {
    /// The linker for `self.encoder`, loaded now if the slot holds none or another one.
    /// A name that is not installed leaves the slot as it was.
    pub fn get(&mut self) -> Result<&mut Linker, EmbedError> {
        self.get_beside(None, || ()).map(|(l, _)| l)
    }

    /// [`LinkSlot::get`]; when the linker must be loaded and `rt` is given, it loads (and reads
    /// the embeddings file) on a worker of `rt` while `also` runs on this thread, and `also`'s
    /// result comes back with it. `also` runs only when there is a load.
    fn get_beside<R>(
        &mut self,
        rt: Option<&Runtime>,
        also: impl FnOnce() -> R,
    ) -> Result<(&mut Linker, Option<R>), EmbedError> {
        let store = self.store.as_ref().map(|(d, max)| (d.as_path(), *max));
        let mut other = None;
        if self.linker.as_ref().is_none_or(|l| l.name != self.encoder) {
            let dir = resolve_dir(self.encoder, self.models_dir)?;
            // Dropped before loading the other: two encoders at once would double the memory.
            *self.linker = None;
            let load = || {
                let mut linker = Linker::load_dir(self.encoder, &dir)?;
                linker.use_store(store);
                Ok::<_, EmbedError>(linker)
            };
            let linker = match rt {
                Some(rt) => {
                    let (linker, r) = rt.beside(load, also);
                    other = Some(r);
                    linker
                }
                None => load(),
            };
            *self.linker = Some(linker?);
        }
        let linker = self.linker.as_mut().expect("loaded above");
        linker.use_store(store);
        Ok((linker, other))
    }
}

impl Linker {
    /// Loads encoder `name` from `models_dir`.
    pub fn load(name: &str, models_dir: &Path) -> Result<Linker, EmbedError> {
        Linker::load_dir(name, &resolve_dir(name, models_dir)?)
    }

    /// Loads the encoder in `dir` (resolved) under the name `name`.
    fn load_dir(name: &str, dir: &Path) -> Result<Linker, EmbedError> {
        let encoder = Encoder::load(dir)?;
        // The files' identity: config.json's bytes, then the weights' length.
        let config = std::fs::read(dir.join("config.json")).unwrap_or_default();
        let weights = std::fs::metadata(dir.join("model.safetensors")).map(|m| m.len());
        let tag = fnv1a64(&[config, weights.unwrap_or(0).to_le_bytes().to_vec()].concat());
        Ok(Linker {
            name: name.to_string(),
            encoder,
            tag,
            memo: HashMap::new(),
            store: None,
            derived: None,
        })
    }

    /// Shares embeddings through the file in `store` (directory, size limit) from now on,
    /// reading what other backends stored there; `None` keeps them in this backend.
    pub fn use_store(&mut self, store: Option<(&Path, u64)>) {
        let dim = self.encoder.config().dim;
        let want = store.map(|(dir, max)| LinkStore::new(dir, &self.name, dim, self.tag, max));
        if want.as_ref().map(|s| s.path()) == self.store.as_ref().map(|s| s.path()) {
            return;
        }
        if let Some(s) = &want {
            for (k, v) in s.load() {
                if self.memo.len() < MAX_MEMO {
                    self.memo.entry(k).or_insert(v);
                }
            }
        }
        self.store = want;
    }

    /// The embeddings file in use, if any.
    pub fn store(&self) -> Option<&LinkStore> {
        self.store.as_ref()
    }

    /// The encoder's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The encoder.
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// Table embeddings held.
    pub fn memo_len(&self) -> usize {
        self.memo.len()
    }

    /// The tables of `schema` that share a word with `question`, best first (`trim::matches`,
    /// with the words kept for a stamped schema).
    pub fn matches(&mut self, schema: &SchemaInfo, question: &str) -> Vec<usize> {
        trim::matches_in(&self.derived(schema).words, question)
    }

    /// What `schema`'s tables give ([`Derived`]): kept from an earlier call with the same stamp,
    /// else computed (and kept when the schema has a stamp).
    fn derived(&mut self, schema: &SchemaInfo) -> &Derived {
        // An unstamped schema's work is never reused: no later schema can be known to be it.
        let kept =
            self.derived.as_ref().is_some_and(|d| d.stamp.is_some() && d.stamp == schema.stamp);
        if !kept {
            self.derived = Some(Derived::of(schema));
        }
        self.derived.as_ref().expect("set above")
    }

    /// The similarity of every table of `schema` to `question` (cosine, in `[-1, 1]`), and how
    /// many tables had to be embedded. Embeds on `rt`'s threads, [`PER_THREAD`] tables per thread at a time,
    /// calling `progress` before each chunk (returning `false` cancels).
    pub fn similarity(
        &mut self,
        rt: &Runtime,
        schema: &SchemaInfo,
        question: &str,
        progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<(Vec<f32>, usize), Nl2SqlError> {
        let keys = self.derived(schema).keys.clone();
        // The tables whose description is not embedded yet, one per description.
        let texts = |indices: &mut dyn Iterator<Item = usize>| -> Vec<(u64, String)> {
            let mut v: Vec<(u64, String)> =
                indices.map(|i| (keys[i], table_text(&schema.tables[i]))).collect();
            v.sort_by_key(|(k, _)| *k);
            v.dedup_by_key(|(k, _)| *k);
            v
        };
        let mut missing =
            texts(&mut (0..keys.len()).filter(|&i| !self.memo.contains_key(&keys[i])));
        if self.memo.len() + missing.len() > MAX_MEMO {
            self.memo.clear();
            missing = texts(&mut (0..keys.len()));
        }
        let total = missing.len();
        let per_chunk = PER_THREAD * rt.n_threads().max(1);
        for (c, chunk) in missing.chunks(per_chunk).enumerate() {
            if !progress(Progress::Linking { done: c * per_chunk, total }) {
                return Err(Nl2SqlError::Cancelled);
            }
            let enc = &self.encoder;
            let vecs: Vec<Result<Vec<f32>, EmbedError>> =
                rt.install(|| chunk.par_iter().map(|(_, text)| enc.embed(text)).collect());
            for ((k, _), v) in chunk.iter().zip(vecs) {
                self.memo.insert(*k, v.map_err(Nl2SqlError::Embed)?);
            }
            if let Some(store) = &self.store {
                // Shared with the other backends as it goes (a cancelled call keeps its work);
                // a file that cannot be written only means they embed the tables themselves.
                let recs: Vec<(u64, &[f32])> =
                    chunk.iter().map(|(k, _)| (*k, self.memo[k].as_slice())).collect();
                let _ = store.append(&recs);
            }
        }
        let q = self.encoder.embed(question).map_err(Nl2SqlError::Embed)?;
        let sims = keys
            .iter()
            .map(|k| {
                let t = &self.memo[k];
                // f64 sum in index order: the same value wherever it runs.
                t.iter().zip(&q).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() as f32
            })
            .collect();
        Ok((sims, total))
    }
}

impl Derived {
    /// What `schema`'s tables give.
    fn of(schema: &SchemaInfo) -> Derived {
        Derived {
            stamp: schema.stamp,
            keys: schema.tables.iter().map(|t| text_key(&table_text(t))).collect(),
            words: schema.tables.iter().map(trim::TableWords::of).collect(),
        }
    }
}

/// What a call links with: its threads, the backend's slot, and its progress report.
pub(crate) struct Linking<'a, 'b> {
    pub rt: &'a Runtime,
    pub slot: &'a mut LinkSlot<'b>,
    pub progress: &'a mut dyn FnMut(Progress) -> bool,
}

/// The order in which `schema`'s tables are offered to the prompt's budget, and how it was
/// found: by meaning with `link` ([`priority`]), else by the question's words
/// (`trim::priority`); also by words when the encoder cannot be loaded or fails, with the
/// reason in the report (the question still gets an answer). Only cancellation is an error.
pub(crate) fn order(
    schema: &SchemaInfo,
    question: &str,
    link: Option<Linking<'_, '_>>,
) -> Result<(Vec<usize>, LinkReport), Nl2SqlError> {
    let t = Instant::now();
    let by_words = |fallback: Option<String>| {
        let report = LinkReport { fallback, ms: ms_since(t), ..LinkReport::default() };
        Ok((trim::priority(schema, question), report))
    };
    let Some(Linking { rt, slot, progress }) = link else { return by_words(None) };
    let name = slot.encoder.to_string();
    // An encoder to load loads beside the description of the tables, which it needs next.
    let linker = match slot.get_beside(Some(rt), || Derived::of(schema)) {
        Ok((l, derived)) => {
            if derived.is_some() {
                l.derived = derived;
            }
            l
        }
        Err(e) => return by_words(Some(fallback_reason(&name, &e))),
    };
    match linker.similarity(rt, schema, question, progress) {
        Ok((similarity, embedded)) => {
            let order = priority(schema, &fuse(&linker.matches(schema, question), &similarity));
            let report = LinkReport {
                encoder: Some(name),
                fallback: None,
                embedded,
                ms: ms_since(t),
                similarity,
            };
            Ok((order, report))
        }
        Err(Nl2SqlError::Embed(e)) => by_words(Some(fallback_reason(&name, &e))),
        Err(e) => Err(e),
    }
}

/// Why encoder `name` was not used, without file paths (any caller may read it in
/// `nl2sql_explain`; the paths are the superuser's business).
fn fallback_reason(name: &str, e: &EmbedError) -> String {
    match e {
        EmbedError::Missing { .. } => format!("encoder \"{name}\" is not installed"),
        EmbedError::Io { .. } => format!("encoder \"{name}\": its files could not be read"),
        e => format!("encoder \"{name}\": {e}"),
    }
}

/// A table described in words for the encoder: `orders (sales of the shop): order id, user id,
/// placed at (when it was placed), …`. Names are split at `_` (the encoder's vocabulary knows
/// words, not snake case); comments as written, whitespace folded. Cut at [`MAX_TEXT_CHARS`].
pub fn table_text(t: &Table) -> String {
    let words = |s: &str| s.split('_').filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s = words(&t.name);
    if let Some(c) = t.comment.as_deref().map(fold).filter(|c| !c.is_empty()) {
        s.push_str(&format!(" ({c})"));
    }
    s.push(':');
    for (i, col) in t.columns.iter().enumerate() {
        s.push_str(if i == 0 { " " } else { ", " });
        s.push_str(&words(&col.name));
        if let Some(c) = col.comment.as_deref().map(fold).filter(|c| !c.is_empty()) {
            s.push_str(&format!(" ({c})"));
        }
        if s.len() > MAX_TEXT_CHARS {
            break;
        }
    }
    s[..s.floor_char_boundary(MAX_TEXT_CHARS)].to_string()
}

/// The key of a description (the memo's and the file's: FNV-1a 64, stable across builds;
/// collisions are as likely as for any 64-bit hash over thousands of texts, ~1e-12).
fn text_key(text: &str) -> u64 {
    fnv1a64(text.as_bytes())
}

/// Reciprocal rank fusion's constant (Cormack, Clarke & Büttcher, SIGIR 2009: k = 60, used as
/// is by hybrid search engines): a rank's weight is 1 / (k + rank).
const RRF_K: f32 = 60.0;

/// One relevance per table from two rankings, by reciprocal rank fusion: the tables matching
/// the question's words (`matched`, best first) and every table by `similarity` (best first,
/// ties by schema order). A table named in the question and one it means both rise; neither
/// ranking alone decides (on the big-schema benchmark words found tables with opaque names
/// that the encoder missed, and the encoder tables the words missed).
pub fn fuse(matched: &[usize], similarity: &[f32]) -> Vec<f32> {
    let mut by_sim: Vec<usize> = (0..similarity.len()).collect();
    by_sim.sort_by(|&a, &b| similarity[b].total_cmp(&similarity[a]).then(a.cmp(&b)));
    let mut score = vec![0.0f32; similarity.len()];
    for (r, &i) in by_sim.iter().enumerate() {
        score[i] += 1.0 / (RRF_K + r as f32 + 1.0);
    }
    for (r, &i) in matched.iter().enumerate() {
        score[i] += 1.0 / (RRF_K + r as f32 + 1.0);
    }
    score
}

/// The order in which tables are offered to the budget: by similarity (best first, ties by
/// schema order), each followed by the tables its foreign keys reference that were not offered
/// yet (in key order).
pub fn priority(schema: &SchemaInfo, similarity: &[f32]) -> Vec<usize> {
    assert_eq!(similarity.len(), schema.tables.len(), "one similarity per table");
    let index: HashMap<(&str, &str), usize> = schema
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| ((t.schema.as_str(), t.name.as_str()), i))
        .collect();
    let mut by_sim: Vec<usize> = (0..schema.tables.len()).collect();
    by_sim.sort_by(|&a, &b| similarity[b].total_cmp(&similarity[a]).then(a.cmp(&b)));
    let mut seen = vec![false; schema.tables.len()];
    let mut order = Vec::with_capacity(by_sim.len());
    for i in by_sim {
        if seen[i] {
            continue;
        }
        seen[i] = true;
        order.push(i);
        for fk in &schema.tables[i].foreign_keys {
            if let Some(&j) = index.get(&(fk.ref_schema.as_str(), fk.ref_table.as_str())) {
                if !seen[j] {
                    seen[j] = true;
                    order.push(j);
                }
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::schema::tables::TableKind;

    fn shop() -> SchemaInfo {
        let users = Table::new("public", "users", TableKind::Table).column("id", "integer", false);
        let orders = Table::new("public", "orders", TableKind::Table)
            .column("id", "integer", false)
            .column("user_id", "integer", false)
            .with_foreign_key(&["user_id"], "public", "users", &["id"]);
        let mut items = Table::new("public", "order_items", TableKind::Table)
            .column("order_id", "integer", false)
            .column("product_id", "integer", false)
            .with_foreign_key(&["order_id"], "public", "orders", &["id"])
            .with_foreign_key(&["product_id"], "public", "products", &["id"]);
        items.comment = Some("one line\n of an   order".into());
        let products =
            Table::new("public", "products", TableKind::Table).column("id", "integer", false);
        SchemaInfo::new(vec![users, orders, items, products], Some("public"))
    }

    #[test]
    fn tables_are_described_in_words() {
        let s = shop();
        assert_eq!(
            table_text(&s.tables[2]),
            "order items (one line of an order): order id, product id"
        );
        assert_eq!(table_text(&s.tables[0]), "users: id");
    }

    #[test]
    fn fusion_adds_reciprocal_ranks() {
        // Similarity ranks: 2, 0, 1, 3; words: 3 then 1.
        let f = fuse(&[3, 1], &[0.5, 0.2, 0.9, 0.1]);
        let rr = |r: f32| 1.0 / (RRF_K + r);
        assert_eq!(f, [rr(2.0), rr(3.0) + rr(2.0), rr(1.0), rr(4.0) + rr(1.0)]);
        // No words matched: the similarity order.
        let f = fuse(&[], &[0.5, 0.2, 0.9, 0.1]);
        assert_eq!(priority(&shop(), &f), priority(&shop(), &[0.5, 0.2, 0.9, 0.1]));
    }

    #[test]
    fn similarity_first_then_referenced_tables() {
        let s = shop();
        // order_items best: the two tables it references follow it, then the rest by similarity.
        assert_eq!(priority(&s, &[0.1, 0.2, 0.9, 0.3]), [2, 1, 3, 0]);
        // Ties go to schema order; a referenced table already offered is not offered again.
        assert_eq!(priority(&s, &[0.5, 0.5, 0.0, 0.0]), [0, 1, 2, 3]);
        assert_eq!(priority(&s, &[0.0, 0.9, 0.0, 0.0]), [1, 0, 2, 3]);
    }
}
