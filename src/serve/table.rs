//! The sequence table of a [`Server`]: each sequence's token history and (when resident) its
//! KV cache, the budget that bounds the resident caches, and one batched pass per [`Server::step`].

use super::ServeError;
use crate::model::{KvCache, Model, SeqStep};
use crate::platform::runtime::Runtime;
use std::collections::{HashMap, HashSet};

/// A sequence's name, chosen by the caller (e.g. a backend's process number and call number).
pub type SeqId = u64;

/// One caller's request: a forward pass over its sequence's new tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The sequence.
    pub seq: SeqId,
    /// How many tokens the sequence held before `tokens` in the caller's view. A sequence the
    /// server holds longer is rewound to it (drafts the caller rejected); 0 starts a sequence
    /// (or starts it over). Greater than what the server holds: [`ServeError::UnknownPosition`].
    pub pos: usize,
    /// The new tokens (at least one), at positions `pos..`.
    pub tokens: Vec<u32>,
    /// Logits for the last this many of `tokens` (0 for a prompt chunk nobody reads).
    pub logits: usize,
    /// Only these vocabulary entries of each logits row (token ids, ascending; a caller under
    /// vocabulary pruning): the LM head computes just those. `None`: the whole vocabulary.
    pub rows: Option<Vec<u32>>,
}

/// What a request gets back.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// `[logits, vocab]` (`[logits, rows.len()]` for a request with `rows`): the rows asked
    /// for, in token order.
    pub logits: Vec<f32>,
    /// Tokens of the history run again because the sequence's cache had been evicted.
    pub recomputed: usize,
    /// Tokens whose keys and values were copied from another sequence sharing them (a schema
    /// prefix asked about by several callers is computed once).
    pub copied: usize,
}

/// Counters since the server was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Batched forward passes run.
    pub passes: u64,
    /// Requests answered.
    pub requests: u64,
    /// Tokens run through the model (new ones and recomputed ones).
    pub tokens: u64,
    /// Of those, history tokens recomputed after an eviction.
    pub recomputed: u64,
    /// Tokens whose cache entries were copied from another sequence instead of computed.
    pub copied: u64,
    /// Caches evicted to make room.
    pub evictions: u64,
    /// The largest batch (requests in one pass).
    pub max_batch: u64,
}

/// One sequence: everything it was fed, and its cache while resident (then `kv.len()` equals
/// `tokens.len()`).
struct Seq {
    tokens: Vec<u32>,
    kv: Option<KvCache>,
    /// The step that last used it (least recently used caches are evicted first).
    used: u64,
}

/// Sequences served from one model under a KV memory budget (see the module docs).
pub struct Server {
    /// Positions each sequence's cache holds.
    n_ctx: usize,
    /// Bytes the resident caches may take.
    budget: usize,
    /// The model's vocabulary size (requests are checked against it).
    vocab: usize,
    /// Bytes of one cache.
    per_cache: usize,
    seqs: HashMap<SeqId, Seq>,
    /// Caches of retired sequences (their callers went away), kept only to give their prefix
    /// to a later sequence (a new session asking about the same schema copies it instead of
    /// computing it); they count against the budget and are the first to go when it is short.
    retired: Vec<Seq>,
    step: u64,
    stats: ServerStats,
}

impl Server {
    /// A server whose sequences hold up to `n_ctx` tokens each (clamped to the model's
    /// training context), with at most `budget` bytes of caches resident.
    pub fn new(model: &Model, n_ctx: usize, budget: usize) -> Server {
        let n_ctx = KvCache::capacity_for(model.config(), n_ctx);
        Server {
            n_ctx,
            budget,
            vocab: model.config().vocab_size,
            per_cache: model.kv_cache_bytes(n_ctx).max(1),
            seqs: HashMap::new(),
            retired: Vec::new(),
            step: 0,
            stats: ServerStats::default(),
        }
    }

    /// How many caches the budget holds at once: the most requests one step can run.
    pub fn fits(&self) -> usize {
        self.budget / self.per_cache
    }

    /// Positions each sequence holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Sequences known, and how many of them have their cache resident.
    pub fn sequences(&self) -> (usize, usize) {
        (self.seqs.len(), self.seqs.values().filter(|s| s.kv.is_some()).count())
    }

    /// Caches kept from retired sequences (see [`Server::retire_where`]).
    pub fn retired(&self) -> usize {
        self.retired.len()
    }

    /// Bytes of the resident caches (retired ones included).
    pub fn resident_bytes(&self) -> usize {
        (self.sequences().1 + self.retired.len()) * self.per_cache
    }

    /// The counters.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Drops a sequence (its caller finished, cancelled or went away). False if unknown.
    pub fn forget(&mut self, seq: SeqId) -> bool {
        self.seqs.remove(&seq).is_some()
    }

    /// Drops every sequence whose id satisfies `which` (a caller that went away or cancelled:
    /// its sequences' positions are no longer known to it); returns how many.
    pub fn forget_where(&mut self, which: impl Fn(SeqId) -> bool) -> usize {
        let before = self.seqs.len();
        self.seqs.retain(|&id, _| !which(id));
        before - self.seqs.len()
    }

    /// [`Server::forget_where`], but the resident caches of those sequences stay as donors of
    /// their prefixes (a cache holds exactly the keys and values of its tokens, whoever asked
    /// for them) until the budget needs their room; returns how many sequences were dropped.
    pub fn retire_where(&mut self, which: impl Fn(SeqId) -> bool) -> usize {
        let ids: Vec<SeqId> = self.seqs.keys().copied().filter(|&id| which(id)).collect();
        for id in &ids {
            let s = self.seqs.remove(id).expect("listed");
            if s.kv.is_some() {
                self.retired.push(s);
            }
        }
        ids.len()
    }

    /// Runs every valid request of `reqs` in one batched forward pass and answers each, in
    /// order. A request that is invalid, or that the budget has no room for, gets its error
    /// and changes nothing; when the pass itself fails (or `between_layers` stops it), every
    /// request that was in it gets that error and no sequence advanced.
    pub fn step(
        &mut self,
        model: &Model,
        rt: &Runtime,
        reqs: &[Request],
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Vec<Result<Reply, ServeError>> {
        let mut out: Vec<Option<Result<Reply, ServeError>>> = vec![None; reqs.len()];
        let run = self.admit(reqs, &mut out);
        self.step += 1;
        let now = self.step;

        // Rewind each sequence to where its caller stands.
        for &i in &run {
            let r = &reqs[i];
            let s =
                self.seqs.entry(r.seq).or_insert(Seq { tokens: Vec::new(), kv: None, used: now });
            s.tokens.truncate(r.pos);
            if let Some(kv) = &mut s.kv {
                kv.truncate(r.pos);
            }
            s.used = now;
        }
        self.make_room(reqs, &run);

        // Each sequence's cache (taken out of the table for the pass) and the tokens to feed it.
        struct Plan {
            i: usize,
            kv: KvCache,
            feed: Vec<u32>,
            fresh: bool,
            recomputed: usize,
            copied: usize,
        }
        let mut plans: Vec<Plan> = Vec::with_capacity(run.len());
        // First the sequences not resident (while every resident cache, of this batch too, is
        // still in the table to copy from): a new cache, the longest prefix another sequence
        // shares copied into it, and the rest of the history run again with the new tokens.
        for &i in &run {
            let r = &reqs[i];
            if self.seqs[&r.seq].kv.is_some() {
                continue;
            }
            let mut kv = match model.try_new_cache(self.n_ctx) {
                Ok(kv) => kv,
                Err(e) => {
                    out[i] = Some(Err(e.into()));
                    continue;
                }
            };
            let hist = &self.seqs[&r.seq].tokens;
            let full: Vec<u32> = hist.iter().chain(&r.tokens).copied().collect();
            // At least the tokens whose logits are asked for (and one) must be computed.
            let limit = full.len() - r.logits.max(1);
            let copied = match self.donor(r.seq, &full[..limit]) {
                Some((donor, n)) if n > 0 => match donor.copy_prefix_to(n, &mut kv) {
                    Ok(()) => n,
                    Err(_) => 0, // a cache of another shape: compute instead
                },
                _ => 0,
            };
            let recomputed = r.pos.saturating_sub(copied);
            plans.push(Plan {
                i,
                kv,
                feed: full[copied..].to_vec(),
                fresh: true,
                recomputed,
                copied,
            });
        }
        // Then the resident ones, which feed their new tokens; when another cache holds more of
        // the history they are heading for (a prompt sent in chunks, the first of which found a
        // donor), its rows up to there are copied first.
        for &i in &run {
            let r = &reqs[i];
            let Some(mut kv) = self.seqs.get_mut(&r.seq).and_then(|s| s.kv.take()) else {
                continue;
            };
            let full: Vec<u32> =
                self.seqs[&r.seq].tokens.iter().chain(&r.tokens).copied().collect();
            let limit = full.len() - r.logits.max(1);
            // The rows before `pos` are this sequence's own: the same tokens, the same bits.
            let copied = match self.donor(r.seq, &full[..limit]) {
                Some((donor, n)) if n > r.pos && donor.copy_prefix_to(n, &mut kv).is_ok() => {
                    n - r.pos
                }
                _ => 0,
            };
            plans.push(Plan {
                i,
                kv,
                feed: full[r.pos + copied..].to_vec(),
                fresh: false,
                recomputed: 0,
                copied,
            });
        }
        if plans.is_empty() {
            return out.into_iter().map(|o| o.expect("every request answered")).collect();
        }

        let mut steps: Vec<SeqStep<'_>> = plans
            .iter_mut()
            .map(|p| SeqStep {
                cache: &mut p.kv,
                tokens: &p.feed,
                logits: reqs[p.i].logits,
                rows: reqs[p.i].rows.as_deref(),
            })
            .collect();
        let res = model.forward_batch(rt, &mut steps, between_layers);
        drop(steps);
        match res {
            Ok(logits) => {
                let vocab = model.config().vocab_size;
                let mut at = 0;
                self.stats.passes += 1;
                self.stats.max_batch = self.stats.max_batch.max(plans.len() as u64);
                for p in plans {
                    let r = &reqs[p.i];
                    let width = r.logits * r.rows.as_ref().map_or(vocab, Vec::len);
                    let rows = &logits[at..at + width];
                    at += width;
                    let s = self.seqs.get_mut(&r.seq).expect("admitted");
                    s.tokens.extend_from_slice(&r.tokens);
                    debug_assert_eq!(p.kv.len(), s.tokens.len());
                    s.kv = Some(p.kv);
                    self.stats.requests += 1;
                    self.stats.tokens += p.feed.len() as u64;
                    self.stats.recomputed += p.recomputed as u64;
                    self.stats.copied += p.copied as u64;
                    out[p.i] = Some(Ok(Reply {
                        logits: rows.to_vec(),
                        recomputed: p.recomputed,
                        copied: p.copied,
                    }));
                }
            }
            Err(e) => {
                let e = ServeError::from(e);
                for p in plans {
                    // A resident cache did not advance; a new one holds a copied prefix that
                    // may run past the history: dropped, rebuilt next time.
                    if !p.fresh {
                        self.seqs.get_mut(&reqs[p.i].seq).expect("admitted").kv = Some(p.kv);
                    }
                    out[p.i] = Some(Err(e.clone()));
                }
            }
        }
        out.into_iter().map(|o| o.expect("every request answered")).collect()
    }

    /// Checks each request; returns the indices of those to run (at most [`Server::fits`]) and
    /// records an error for the others.
    fn admit(&self, reqs: &[Request], out: &mut [Option<Result<Reply, ServeError>>]) -> Vec<usize> {
        let mut seen = HashSet::new();
        let mut run = Vec::new();
        for (i, r) in reqs.iter().enumerate() {
            let known = self.seqs.get(&r.seq).map_or(0, |s| s.tokens.len());
            // A token or row outside the vocabulary would fail the whole pass, every caller's.
            let rows = r.rows.as_deref().unwrap_or_default();
            let stray = r.tokens.iter().chain(rows).find(|&&t| t as usize >= self.vocab);
            let err = if let Some(&id) = stray {
                Some(ServeError::OutOfVocab { seq: r.seq, id, vocab: self.vocab })
            } else if r.tokens.is_empty() || r.logits > r.tokens.len() {
                Some(ServeError::BadRequest {
                    seq: r.seq,
                    tokens: r.tokens.len(),
                    logits: r.logits,
                })
            } else if r.pos > known {
                Some(ServeError::UnknownPosition { seq: r.seq, pos: r.pos, known })
            } else if r.pos + r.tokens.len() > self.n_ctx {
                Some(ServeError::ContextFull {
                    seq: r.seq,
                    needed: r.pos + r.tokens.len(),
                    n_ctx: self.n_ctx,
                })
            } else if !seen.insert(r.seq) {
                Some(ServeError::Duplicate { seq: r.seq })
            } else if run.len() >= self.fits() {
                Some(ServeError::OverBudget {
                    budget: self.budget,
                    fits: self.fits(),
                    n_ctx: self.n_ctx,
                })
            } else {
                None
            };
            match err {
                Some(e) => out[i] = Some(Err(e)),
                None => run.push(i),
            }
        }
        run
    }

    /// Evicts the least recently used caches of sequences outside this batch until the batch's
    /// sequences fit in the budget beside the resident ones. Retired caches go first, oldest
    /// first: a live sequence's cache would have to be recomputed, a retired one is only a
    /// possible donor.
    fn make_room(&mut self, reqs: &[Request], run: &[usize]) {
        let batch: HashSet<SeqId> = run.iter().map(|&i| reqs[i].seq).collect();
        let needed = batch.iter().filter(|id| self.seqs[id].kv.is_none()).count();
        let mut resident = self.sequences().1;
        while resident + self.retired.len() + needed > self.fits() && !self.retired.is_empty() {
            let oldest = (0..self.retired.len()).min_by_key(|&i| self.retired[i].used);
            self.retired.remove(oldest.expect("not empty"));
            self.stats.evictions += 1;
        }
        while resident + needed > self.fits() {
            // Oldest first; ties by id so that the choice is the same every run.
            let victim = self
                .seqs
                .iter()
                .filter(|(id, s)| s.kv.is_some() && !batch.contains(id))
                .min_by_key(|(id, s)| (s.used, **id))
                .map(|(id, _)| *id);
            let Some(v) = victim else { break }; // admit() kept the batch within the budget
            self.seqs.get_mut(&v).expect("found").kv = None;
            self.stats.evictions += 1;
            resident -= 1;
        }
    }

    /// The resident cache (of another sequence than `seq`, or a retired one) whose tokens
    /// share the longest prefix with `tokens`, and that prefix's length.
    fn donor(&self, seq: SeqId, tokens: &[u32]) -> Option<(&KvCache, usize)> {
        let shared = |s: &Seq| s.tokens.iter().zip(tokens).take_while(|(a, b)| a == b).count();
        // The longest shared prefix; ties go to a live sequence (the lowest id), then to the
        // earliest retired cache: the same choice every run.
        let live =
            self.seqs.iter().filter(|(id, _)| **id != seq).filter_map(|(id, s)| {
                Some(((shared(s), 1u8, std::cmp::Reverse(*id)), s.kv.as_ref()?))
            });
        let retired = self.retired.iter().enumerate().filter_map(|(i, s)| {
            Some(((shared(s), 0u8, std::cmp::Reverse(i as u64)), s.kv.as_ref()?))
        });
        live.chain(retired).max_by_key(|(k, _)| *k).map(|((n, ..), kv)| (kv, n))
    }
}
