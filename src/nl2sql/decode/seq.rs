//! The sequence a call decodes into: a KV cache of this process ([`Seq::Local`]), or a sequence
//! kept by another process that runs the forward passes for many callers at once
//! ([`Seq::Remote`], through a [`Transport`]; the PostgreSQL glue's batch worker, issue #30).
//!
//! Every forward pass of a call goes through [`super::passes::Forward`], which takes a `Seq`:
//! the stages only see its length, its room, rewinds and forks, so they decode the same way
//! whichever process holds the keys and values. A remote sequence keeps its token history here
//! (the server may evict its cache and rebuild it from the tokens, and a fork is a new sequence
//! whose first request carries its parent's tokens: the server copies the rows they share).
//!
//! Greedy answers do not depend on where a sequence lives: the server's logits are bitwise the
//! sequence's alone (`serve`'s contract), and both sides use the model's default cache type.

use crate::generate::speculate::Positions;
use crate::model::{Config, KvCache, KvRows, ModelError};
use crate::nl2sql::base::error::Nl2SqlError;
use crate::serve::{Request, SeqId, ServeError};
use std::rc::Rc;

/// The way to a process that runs forward passes for several callers (implemented by the
/// PostgreSQL glue; the engine only knows this trait).
pub trait Transport {
    /// Runs `reqs` (each for a different sequence) in one pass of the server and answers each in
    /// order with its logits rows (`[req.logits, vocab]`) or its own error. `Err` when the
    /// transport failed as a whole (the call was cancelled, the server went away): then no
    /// sequence of this caller can be trusted to have advanced.
    fn step(&self, reqs: &[Request]) -> Result<Vec<Result<Vec<f32>, ServeError>>, Nl2SqlError>;
    /// A name for a new sequence, unused so far by this caller.
    fn new_seq(&self) -> SeqId;
    /// The sequence is no longer needed (sent with the next step; the server also forgets every
    /// sequence of a caller that goes away).
    fn forget(&self, seq: SeqId);
    /// Bumped whenever the server may have lost this caller's sequences (a cancelled step, a
    /// restarted server): a sequence last sent in another epoch is sent again from position 0.
    fn epoch(&self) -> u64;
}

/// A sequence the server behind `transport` holds.
pub struct RemoteSeq {
    transport: Rc<dyn Transport>,
    id: SeqId,
    /// Every token of the sequence in this caller's view.
    tokens: Vec<u32>,
    /// How many of `tokens` the server holds (as far as this caller knows); the rest goes with
    /// the next request.
    sent: usize,
    /// The transport's epoch when `sent` was last confirmed.
    epoch: u64,
    /// Positions this caller allows the sequence (the server's own limit is at least this).
    capacity: usize,
}

impl Drop for RemoteSeq {
    fn drop(&mut self) {
        self.transport.forget(self.id);
    }
}

impl RemoteSeq {
    /// A new empty sequence of up to `capacity` positions.
    pub fn new(transport: Rc<dyn Transport>, capacity: usize) -> RemoteSeq {
        let id = transport.new_seq();
        let epoch = transport.epoch();
        RemoteSeq { transport, id, tokens: Vec::new(), sent: 0, epoch, capacity }
    }

    /// Whether this sequence was made by `transport`.
    pub fn uses(&self, transport: &Rc<dyn Transport>) -> bool {
        Rc::ptr_eq(&self.transport, transport)
    }

    /// The request that runs `new` after the tokens so far, with logits for its last `logits`
    /// (of the vocabulary entries `rows` only, when set); the tokens not yet sent go first (a
    /// fork's prefix, a history the server lost).
    fn request(&mut self, new: &[u32], logits: usize, rows: Option<&[u32]>) -> Request {
        if self.epoch != self.transport.epoch() {
            // The server may have dropped it: start over under a new name.
            self.transport.forget(self.id);
            self.id = self.transport.new_seq();
            self.sent = 0;
            self.epoch = self.transport.epoch();
        }
        let mut tokens = self.tokens[self.sent..].to_vec();
        tokens.extend_from_slice(new);
        Request { seq: self.id, pos: self.sent, tokens, logits, rows: rows.map(<[u32]>::to_vec) }
    }

    /// `Ok` when `n` more tokens fit.
    fn check_room(&self, n: usize) -> Result<(), ModelError> {
        match self.tokens.len() + n <= self.capacity {
            true => Ok(()),
            false => Err(ModelError::ContextFull {
                needed: self.tokens.len() + n,
                capacity: self.capacity,
            }),
        }
    }

    /// Records that the server ran `new` (after the tokens so far).
    fn ran(&mut self, new: &[u32]) {
        self.tokens.extend_from_slice(new);
        self.sent = self.tokens.len();
    }
}

/// Where a call's keys and values live (see the module docs).
pub enum Seq {
    /// In this process.
    Local(KvCache),
    /// In a server's process.
    Remote(RemoteSeq),
}

impl Seq {
    /// Tokens held.
    pub fn len(&self) -> usize {
        match self {
            Seq::Local(kv) => kv.len(),
            Seq::Remote(r) => r.tokens.len(),
        }
    }

    /// True when no token is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions the sequence may hold.
    pub fn capacity(&self) -> usize {
        match self {
            Seq::Local(kv) => kv.capacity(),
            Seq::Remote(r) => r.capacity,
        }
    }

    /// Keeps the first `n` tokens (no-op when it holds fewer).
    pub fn truncate(&mut self, n: usize) {
        match self {
            Seq::Local(kv) => kv.truncate(n),
            Seq::Remote(r) => {
                r.tokens.truncate(n);
                r.sent = r.sent.min(n);
            }
        }
    }

    /// Holds nothing.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// `Ok` when `n` more tokens fit ([`ModelError::ContextFull`] otherwise).
    pub fn check_room(&self, n: usize) -> Result<(), ModelError> {
        match self {
            Seq::Local(kv) => kv.check_room(n),
            Seq::Remote(r) => r.check_room(n),
        }
    }

    /// A new sequence of `capacity` positions holding this one's first `n` tokens (`cfg`: the
    /// model's, for a local cache).
    pub fn fork(&self, n: usize, capacity: usize, cfg: &Config) -> Result<Seq, Nl2SqlError> {
        match self {
            Seq::Local(kv) => {
                let mut other = KvCache::try_with_dtype(cfg, capacity, kv.dtype())?;
                kv.copy_prefix_to(n, &mut other)?;
                Ok(Seq::Local(other))
            }
            Seq::Remote(r) => {
                let mut other = RemoteSeq::new(r.transport.clone(), capacity);
                other.tokens = r.tokens[..n.min(r.tokens.len())].to_vec();
                Ok(Seq::Remote(other))
            }
        }
    }

    /// Sets aside the rows of positions `from..len()` to put back later with
    /// [`Seq::restore_rows`] ([`KvCache::save_rows`]); `None` for a remote sequence, whose server
    /// keeps rows only as the tokens' (put back, they would be computed again).
    pub fn save_rows(&self, from: usize) -> Option<KvRows> {
        self.local().map(|kv| kv.save_rows(from))
    }

    /// Puts back rows set aside by [`Seq::save_rows`] right after the positions they followed.
    pub fn restore_rows(&mut self, saved: &KvRows) -> Result<(), ModelError> {
        match self {
            Seq::Local(kv) => kv.restore_rows(saved),
            Seq::Remote(_) => Err(ModelError::CacheMismatch),
        }
    }

    /// The local cache, if it is one.
    pub fn local_mut(&mut self) -> Option<&mut KvCache> {
        match self {
            Seq::Local(kv) => Some(kv),
            Seq::Remote(_) => None,
        }
    }

    /// The local cache, if it is one.
    pub fn local(&self) -> Option<&KvCache> {
        match self {
            Seq::Local(kv) => Some(kv),
            Seq::Remote(_) => None,
        }
    }
}

/// One sequence's part of a [`remote_step`]: its new tokens, how many of the last get logits,
/// and the vocabulary entries of those rows (`None`: all).
pub(crate) type RemoteStep<'a, 'b> = (&'a mut RemoteSeq, &'b [u32], usize, Option<&'b [u32]>);

/// Runs `steps` (remote sequences of one transport) in one request to the server; returns each
/// step's logits in order (`[logits, vocab]`, or `[logits, rows.len()]`). A sequence the server
/// no longer knows (restarted, or forgotten) is sent again whole, once.
pub(crate) fn remote_step(steps: &mut [RemoteStep<'_, '_>]) -> Result<Vec<Vec<f32>>, Nl2SqlError> {
    let Some(transport) = steps.first().map(|s| s.0.transport.clone()) else {
        return Ok(Vec::new());
    };
    for (seq, new, _, _) in steps.iter() {
        seq.check_room(new.len())?;
    }
    let mut retried = false;
    loop {
        let reqs: Vec<Request> =
            steps.iter_mut().map(|(s, new, n, rows)| s.request(new, *n, *rows)).collect();
        let replies = transport.step(&reqs)?;
        let lost = replies.iter().any(|r| matches!(r, Err(ServeError::UnknownPosition { .. })));
        if lost && !retried {
            retried = true;
            for (s, _, _, _) in steps.iter_mut() {
                s.sent = 0;
            }
            continue;
        }
        let mut out = Vec::with_capacity(replies.len());
        for ((seq, new, _, _), reply) in steps.iter_mut().zip(replies) {
            match reply {
                Ok(rows) => {
                    seq.ran(new);
                    out.push(rows);
                }
                Err(e) => return Err(Nl2SqlError::Serve(e)),
            }
        }
        return Ok(out);
    }
}

impl Positions for Seq {
    fn len(&self) -> usize {
        Seq::len(self)
    }
    fn capacity(&self) -> usize {
        Seq::capacity(self)
    }
    fn truncate(&mut self, n: usize) {
        Seq::truncate(self, n)
    }
}
