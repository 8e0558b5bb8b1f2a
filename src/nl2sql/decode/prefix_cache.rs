//! The reusable KV state of one backend/session (the schema prefix's cache buffers, its drafter
//! and its cache files) and what a call reports about it.

use crate::generate::fingerprint::Fingerprint;
use crate::generate::kv_file::{KvFileDir, KvFileError, KvFileKey};
use crate::model::KvCache;
use crate::nl2sql::decode::draft::Drafter;
use crate::nl2sql::decode::seq::{Seq, Transport};
use std::rc::Rc;

/// Counters of the prefix cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Prefix found in memory.
    pub hits: u64,
    /// Prefix computed by the model (wholly, or after a kept common beginning).
    pub misses: u64,
    /// Of the misses, those that kept the beginning they share with the previous prefix.
    pub partial: u64,
    /// Prefix loaded from a cache file.
    pub file_hits: u64,
    /// Cache files written.
    pub file_writes: u64,
    /// Cache files refused (corrupt or mismatched) or not written (I/O error, too large).
    pub file_errors: u64,
}

/// Where the prefix's KV state of a call came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixSource {
    /// Already in this cache's memory.
    Memory,
    /// Loaded from a cache file (another or an earlier backend computed it).
    File,
    /// Computed by the model after the tokens it shares with the previous call's prefix, whose
    /// keys and values were kept (`TokenCounts::reused` says how many): a big schema's prompts
    /// show different tables per question but often begin alike.
    Partial,
    /// Computed by the model.
    Computed,
}

impl PrefixSource {
    /// The name `nl2sql_explain` reports: `hit`, `file`, `partial` or `miss`.
    pub fn name(self) -> &'static str {
        match self {
            PrefixSource::Memory => "hit",
            PrefixSource::File => "file",
            PrefixSource::Partial => "partial",
            PrefixSource::Computed => "miss",
        }
    }
}

/// Something about the cache file worth logging (the engine does not log by itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEvent {
    /// Damage or I/O trouble (an operator should hear of it) rather than routine news.
    pub warning: bool,
    pub message: String,
}

/// The reusable KV state of one backend/session: the cache buffers and which prefix they hold.
#[derive(Default)]
pub struct PrefixCache {
    /// The KV buffers (allocated by a call, at its context size), here or in a batch server.
    pub(crate) kv: Option<Seq>,
    /// The batch server the next call's sequence lives in (`None`: this process).
    pub(crate) transport: Option<Rc<dyn Transport>>,
    /// Fingerprint and token count of the prefix at the start of `kv`, when it is complete.
    pub(crate) prefix: Option<(Fingerprint, usize)>,
    /// That prefix's tokens and the identity it was computed under ([`Engine`]'s prefix
    /// identity: model and FFN hook), valid while `prefix` is `Some`: a later prefix that begins
    /// with the same tokens under the same identity keeps those positions.
    ///
    /// [`Engine`]: super::Engine
    pub(crate) held: (Vec<u32>, String),
    /// Hit/miss counters.
    pub(crate) stats: CacheStats,
    /// Directory of cache files shared with other processes (`None`: memory only).
    pub(crate) files: Option<KvFileDir>,
    /// Cache file events not yet taken by the caller.
    pub(crate) events: Vec<CacheEvent>,
    /// The speculative drafter of the last schema prefix (built once per fingerprint).
    pub(crate) drafter: Option<Drafter>,
    /// The tokens whose rows `kv` holds after the prefix, as the last call left them (its
    /// question part, then what it decoded and fed): a follow-up's earlier turns begin with
    /// them (`conversation.rs`). Valid while `kv` holds exactly the prefix and these; taken by
    /// every call (`stages::prefix::load`) and set again only by one that completes.
    pub(crate) tail: Vec<u32>,
}

impl std::fmt::Debug for PrefixCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixCache")
            .field("len", &self.kv.as_ref().map(Seq::len))
            .field("capacity", &self.capacity())
            .field("remote", &self.remote())
            .field("prefix", &self.prefix)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl PrefixCache {
    /// An empty cache (buffers are allocated on first use).
    pub fn new() -> PrefixCache {
        PrefixCache::default()
    }

    /// Hit/miss counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// Fingerprint of the cached prefix, if one is complete.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.prefix.map(|p| p.0)
    }

    /// Positions the KV buffers can hold (0 before first use).
    pub fn capacity(&self) -> usize {
        self.kv.as_ref().map_or(0, Seq::capacity)
    }

    /// From the next call on, keeps the sequence in the batch server behind `transport`
    /// (`None`: in this process). A change drops the sequence (and the prefix it held).
    pub fn set_transport(&mut self, transport: Option<Rc<dyn Transport>>) {
        let same = match (&self.transport, &transport) {
            (None, None) => true,
            (Some(a), Some(b)) => Rc::ptr_eq(a, b),
            _ => false,
        };
        if !same {
            self.kv = None;
            self.prefix = None;
            self.transport = transport;
        }
    }

    /// Whether calls run their forward passes in a batch server.
    pub fn remote(&self) -> bool {
        self.transport.is_some()
    }

    /// Forgets the cached prefix (keeps the buffers).
    pub fn invalidate(&mut self) {
        self.prefix = None;
    }

    /// How many leading tokens of `ids` the buffers hold from the last complete prefix, computed
    /// under `identity` (0 when there is none). The keys and values of a position depend only on
    /// the tokens up to it (causal attention) and the engine computes them bit for bit the same
    /// in any chunking, so those positions are exactly what a prefill of `ids` would write.
    pub(crate) fn shared_with(&self, ids: &[u32], identity: &str) -> usize {
        let (held, held_identity) = &self.held;
        if self.prefix.is_none() || held_identity != identity {
            return 0;
        }
        common_len(held, ids).min(self.kv.as_ref().map_or(0, Seq::len))
    }

    /// Uses cache files in `files` from the next call on (`None`: memory only).
    pub fn set_file_dir(&mut self, files: Option<KvFileDir>) {
        self.files = files;
    }

    /// Takes the cache file events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<CacheEvent> {
        std::mem::take(&mut self.events)
    }

    /// The drafter kept for the last schema prefix, if one was built.
    pub fn drafter(&self) -> Option<&Drafter> {
        self.drafter.as_ref()
    }
}

/// Fills `kv` with the prefix of `key` from its cache file, if there is a valid one; records
/// why not otherwise (a missing file is not news).
pub(crate) fn load_prefix_file(
    files: &KvFileDir,
    key: &KvFileKey,
    kv: &mut KvCache,
    stats: &mut CacheStats,
    events: &mut Vec<CacheEvent>,
) -> bool {
    match files.load(key, kv) {
        Ok(path) => {
            stats.file_hits += 1;
            events.push(CacheEvent {
                warning: false,
                message: format!(
                    "schema prefix of {} tokens loaded from {}",
                    key.prefix_ids.len(),
                    path.display()
                ),
            });
            true
        }
        Err(KvFileError::Missing) => false,
        Err(e) => {
            stats.file_errors += 1;
            events.push(CacheEvent { warning: e.is_warning(), message: e.to_string() });
            false
        }
    }
}

/// Writes the prefix of `key` (at the start of `kv`) to its cache file, recording the outcome.
pub(crate) fn store_prefix_file(
    files: &KvFileDir,
    key: &KvFileKey,
    kv: &KvCache,
    stats: &mut CacheStats,
    events: &mut Vec<CacheEvent>,
) {
    match files.store(key, kv) {
        Ok(s) => {
            stats.file_writes += 1;
            let evicted = if s.evicted > 0 {
                format!(", evicted {} older file(s)", s.evicted)
            } else {
                String::new()
            };
            events.push(CacheEvent {
                warning: false,
                message: format!(
                    "schema prefix written to {} ({} bytes{evicted})",
                    s.path.display(),
                    s.bytes
                ),
            });
        }
        Err(e) => {
            stats.file_errors += 1;
            events.push(CacheEvent {
                warning: e.is_warning(),
                message: format!("schema prefix not cached: {e}"),
            });
        }
    }
}

/// The length of the common beginning of `a` and `b`.
pub(crate) fn common_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
