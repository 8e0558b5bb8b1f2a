//! The forward passes of an nl2sql call: prefill in chunks, greedy decode with the call's token
//! shaping and drafts, the one logits entry point and the one token chooser.

use crate::generate::sampler::argmax;
use crate::model::{KvCache, Model, ModelError, SeqStep};
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::decode::candidates::{self, TokenScore};
use crate::nl2sql::decode::draft::Drafter;
use crate::nl2sql::decode::seq::{self, Seq};
use crate::nl2sql::decode::shaping::Shaping;
use crate::nl2sql::decode::sql_decode::{self, Choice, DecodeLimits, Decoded, Start};
use crate::platform::runtime::Runtime;
use crate::tokenizer::Tokenizer;
use std::cell::{Cell, RefCell};

/// Prompt tokens per forward pass while prefilling: large enough that each weight row is reused
/// across many tokens and that a question part with the refusal check's turn (~40-100 tokens)
/// is one pass, not a full chunk and a small memory-bound one; the chunk's scratch stays a
/// small fraction of the KV cache (~40 MB for the 1.5B model). A cancel request is seen
/// between the layers of a pass (a layer of 128 tokens is ~20-30 ms on two cores).
pub const PREFILL_CHUNK: usize = 128;

/// A model and its tokenizer on a runtime: what every forward pass of a call needs.
#[derive(Clone, Copy)]
pub struct Forward<'a> {
    /// The model.
    pub model: &'a Model,
    /// Its tokenizer.
    pub tok: &'a Tokenizer,
    /// The worker threads the passes run on.
    pub rt: &'a Runtime,
}

impl Forward<'_> {
    /// The one forward entry point for logits: runs `tokens` at positions `kv.len()..` and
    /// returns the logits of the last `n` (0: none, no LM head): `[n, vocab]`.
    /// `between_layers` runs before each half layer on this thread (once before the pass for a
    /// remote sequence, whose transport also checks for cancellation while it waits); false
    /// cancels the call.
    fn logits(
        &self,
        kv: &mut Seq,
        tokens: &[u32],
        n: usize,
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        self.logits_of(kv, tokens, n, None, between_layers)
    }

    /// [`Forward::logits`] of the vocabulary entries `rows` only (ascending; `None`: all):
    /// `[n, rows.len()]`, bitwise those entries of the full rows.
    fn logits_of(
        &self,
        kv: &mut Seq,
        tokens: &[u32],
        n: usize,
        rows: Option<&[u32]>,
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        let kv = match kv {
            Seq::Local(kv) => kv,
            Seq::Remote(r) => {
                // Once per pass (the server runs the layers): progress, and an early stop.
                if !between_layers() {
                    return Err(Nl2SqlError::Cancelled);
                }
                let mut out = seq::remote_step(&mut [(r, tokens, n, rows)])?;
                return Ok(out.pop().unwrap_or_default());
            }
        };
        let step = SeqStep { cache: kv, tokens, logits: n, rows };
        checked(self.model.forward_batch(self.rt, &mut [step], between_layers))
    }

    /// One decode step of several sequences in one pass (`Model::forward_seqs`, or one request
    /// to the server of remote ones): `tokens[i]` after what `kvs[i]` holds; returns
    /// `[kvs.len(), vocab]` logits. The sequences are all local or all remote (forks of one).
    /// `between_layers` runs before each half layer of a local pass of several sequences (as
    /// in [`Forward::logits`]; a remote step checks while it waits); false cancels the call.
    pub fn logits_seqs(
        &self,
        kvs: &mut [&mut Seq],
        tokens: &[u32],
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        let mut local: Vec<&mut KvCache> = Vec::new();
        let mut remote = Vec::new();
        for (s, t) in kvs.iter_mut().zip(tokens.chunks(1)) {
            match &mut **s {
                Seq::Local(kv) => local.push(kv),
                Seq::Remote(r) => remote.push((r, t, 1, None)),
            }
        }
        match (local.is_empty(), remote.is_empty()) {
            (_, true) => {
                checked(self.model.forward_seqs(self.rt, &mut local, tokens, between_layers))
            }
            (true, false) => Ok(seq::remote_step(&mut remote)?.concat()),
            (false, false) => {
                Err(Nl2SqlError::Transport("local and remote sequences in one step".into()))
            }
        }
    }

    /// The one token chooser: the next token given the answer `text` so far and the logits
    /// `row` of its position (`[vocab]`); greedy, so the
    /// same question over the same schema always gives the same SQL.
    fn choose(&self, text: &str, row: &[f32], excluded: &[u32], shaping: &Shaping) -> Choice {
        if shaping.is_plain() {
            Choice { id: argmax(row), acceptable: true }
        } else {
            shaping.pick(self.tok, text, row, excluded)
        }
    }

    /// Runs `ids` through the model in chunks (cancellable between layers); returns the last
    /// token's logits `[vocab]`.
    pub fn prefill(
        &self,
        kv: &mut Seq,
        ids: &[u32],
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        kv.check_room(ids.len())?;
        self.prefill_part(kv, ids, ids.len(), true, on_progress)
    }

    /// [`Forward::prefill`], with the last token's logits of the vocabulary entries `rows`
    /// only (ascending): `[rows.len()]`, bitwise those entries of the full row. For a caller
    /// that reads a few tokens' logits (the refusal check's yes and no): the LM head's product
    /// then skips the rest of the output matrix.
    pub fn prefill_rows(
        &self,
        kv: &mut Seq,
        ids: &[u32],
        rows: &[u32],
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        kv.check_room(ids.len())?;
        self.prefill_chunks(kv, ids, ids.len(), true, Some(rows), on_progress)
    }

    /// [`Forward::prefill`] of `ids`, the first part of a prompt of `total` tokens (progress
    /// is reported against `total`); the last token's logits only when `last_logits`.
    fn prefill_part(
        &self,
        kv: &mut Seq,
        ids: &[u32],
        total: usize,
        last_logits: bool,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        self.prefill_chunks(kv, ids, total, last_logits, None, on_progress)
    }

    /// [`Forward::prefill_part`], the last token's logits of the vocabulary entries `rows`
    /// (`None`: all).
    fn prefill_chunks(
        &self,
        kv: &mut Seq,
        ids: &[u32],
        total: usize,
        last_logits: bool,
        rows: Option<&[u32]>,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Vec<f32>, Nl2SqlError> {
        kv.check_room(ids.len())?;
        let mut logits = Vec::new();
        let n_chunks = ids.len().div_ceil(PREFILL_CHUNK);
        for (k, chunk) in ids.chunks(PREFILL_CHUNK).enumerate() {
            // Checked before every layer: a chunk at a long context takes hundreds of ms.
            let progress = Progress::Prefill { done: k * PREFILL_CHUNK, total };
            // Only the last chunk's logits are read: the others skip the LM head, whose one-row
            // product reads the whole output matrix (~190 MB for the 1.5B, ~10 ms a chunk).
            let n = usize::from(last_logits && k + 1 == n_chunks);
            logits = self.logits_of(kv, chunk, n, rows, &mut || on_progress(progress))?;
        }
        Ok(logits)
    }

    /// Runs `ids` through the model as [`Forward::prefill`] does, but with `pending` leaves the
    /// last chunk out for the decode's first pass to feed with its first draft
    /// ([`Start::Pending`]); without, returns the last token's logits ([`Start::Logits`]).
    pub fn prefill_start(
        &self,
        kv: &mut Seq,
        ids: &[u32],
        pending: bool,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Start, Nl2SqlError> {
        if !pending || ids.is_empty() {
            return Ok(Start::Logits(self.prefill_part(kv, ids, ids.len(), true, on_progress)?));
        }
        kv.check_room(ids.len())?;
        // The last chunk as `prefill` cuts it: the passes before it are the same.
        let split = (ids.len() - 1) / PREFILL_CHUNK * PREFILL_CHUNK;
        if split > 0 {
            self.prefill_part(kv, &ids[..split], ids.len(), false, on_progress)?;
        }
        Ok(Start::Pending(ids[split..].to_vec()))
    }

    /// Greedy generation from `start` (the prompt `context` is in `kv`, but a pending start's
    /// tokens) until a stop, with drafts from `drafter` verified in batches when it is set (see
    /// [`decode::decode`]). A pass over a draft (or a pending start) is checked between its
    /// layers like a prefill chunk (1 + `MAX_DRAFT` tokens on the scalar tier is over a second
    /// of work).
    #[allow(clippy::too_many_arguments)]
    pub fn decode(
        &self,
        kv: &mut Seq,
        start: Start,
        context: &[u32],
        drafter: Option<(&Drafter, &[u32])>,
        limits: DecodeLimits<'_>,
        shaping: &Shaping,
        mut scores: Option<&mut Vec<TokenScore>>,
        on_progress: &mut dyn FnMut(Progress) -> bool,
    ) -> Result<Decoded, Nl2SqlError> {
        // The decoder reports progress between passes, and a pass over a draft is checked
        // between its layers with the last progress reported: both through `on_progress`,
        // which they call one at a time.
        let on_progress = RefCell::new(on_progress);
        let last = Cell::new(Progress::Decode { generated: 0 });
        sql_decode::decode(
            self.tok,
            kv,
            start,
            context,
            drafter,
            limits,
            &mut |kv, tokens, rows| {
                let mut check = || (*on_progress.borrow_mut())(last.get());
                self.logits(kv, tokens, rows, &mut check)
            },
            &mut |text, row, excluded| {
                let c = self.choose(text, row, excluded, shaping);
                if let Some(s) = scores.as_deref_mut() {
                    s.extend(candidates::score_on(self.rt, row, c.id as usize));
                }
                c
            },
            &mut |p| {
                last.set(p);
                (*on_progress.borrow_mut())(p)
            },
        )
    }
}

/// A local pass's result: an interruption by `between_layers` is the call's cancellation.
fn checked(r: Result<Vec<f32>, ModelError>) -> Result<Vec<f32>, Nl2SqlError> {
    match r {
        Err(ModelError::Interrupted { .. }) => Err(Nl2SqlError::Cancelled),
        r => Ok(r?),
    }
}
