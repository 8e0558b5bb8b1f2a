//! Greedy decoding with optional speculation: each forward pass feeds the last chosen token and
//! a draft of the next ones (`[last, d1..dk]`, logits for every position), the draft is accepted
//! as long as the chooser picks the drafted token from the previous position's logits, the KV
//! cache is rolled back past the first rejection, and the chooser's own token is emitted there.
//!
//! Every stop check (end of generation, end of statement, token budget, full context) runs token
//! by token in the same order as plain decoding, and the chooser sees the text as it is at each
//! position, so with a batch-invariant forward pass the outcome (ids, text, stop reason) is the
//! same as without speculation; only the number of forward passes changes.
//!
//! Nothing here knows what is generated: where drafts come from ([`Drafting`]), when the answer is
//! complete and which token is chosen are the caller's (nl2sql: `nl2sql::decode`).

use super::GenerateError;
use crate::model::KvCache;
use crate::tokenizer::{StreamDecoder, Tokenizer};
use std::collections::VecDeque;

pub use super::StopReason;
/// Forward-pass and draft counters of a decode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Forward passes run while decoding (prompt prefill not included, nor the pass that feeds
    /// a pending start's prompt tokens with the first draft).
    pub forward_passes: usize,
    /// Draft tokens proposed for verification.
    pub draft_tokens: usize,
    /// Draft tokens the model agreed with.
    pub accepted_tokens: usize,
}

impl SpecStats {
    /// Adds `other`'s counters.
    pub fn add(&mut self, other: SpecStats) {
        self.forward_passes += other.forward_passes;
        self.draft_tokens += other.draft_tokens;
        self.accepted_tokens += other.accepted_tokens;
    }

    /// Accepted / proposed draft tokens (0 when nothing was proposed).
    pub fn acceptance_rate(&self) -> f64 {
        if self.draft_tokens == 0 {
            0.0
        } else {
            self.accepted_tokens as f64 / self.draft_tokens as f64
        }
    }
}

/// What one decode produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// Generated token ids (the stopping token included, as it was counted).
    pub ids: Vec<u32>,
    /// The limits' seed followed by their text (an end-of-generation token adds none).
    pub text: String,
    pub stop: StopReason,
    pub stats: SpecStats,
}

/// Limits of one decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits<'a> {
    /// Most tokens generated.
    pub max_new: usize,
    /// Text the answer already starts with in the prompt (e.g. an opening SQL fence, or the
    /// tokens a branch shares with the answer it branches off): the returned text begins with
    /// it, and the stop checks and the chooser see it.
    pub seed: &'a str,
    /// Most back-outs of a dead end (see [`decode`]); 0 never backs out (and keeps no rows).
    pub backtrack: usize,
}

/// A source of draft tokens for one decode.
pub trait Drafting {
    /// Up to `max` (> 0) draft tokens to follow `history` (prompt + the `generated` tokens so
    /// far), whose answer text is `text`; empty for none.
    fn propose(&mut self, history: &[u32], generated: usize, text: &str, max: usize) -> Vec<u32>;

    /// Learns from one verification round: `accepted` of the `drafted` tokens were right.
    fn verified(&mut self, drafted: usize, accepted: usize);
}

/// A chooser's answer: the token, and whether it keeps the text acceptable (false: the text so
/// far is a dead end; `id` is then the plain argmax, taken when the decoder cannot back out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    pub id: u32,
    pub acceptable: bool,
}

/// How far back a dead end is backed out: a dead end is a word the constraint cannot finish (an
/// invented name half written, a banned word), and a word is a few tokens long.
const BACKTRACK_DEPTH: usize = 8;

/// What the decoder needs of the cache it decodes into: how much it holds, how much it may hold,
/// and rewinding it (a KV cache of this process, or a sequence another process holds).
pub trait Positions {
    /// Tokens held.
    fn len(&self) -> usize;
    /// True when no token is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Tokens it may hold.
    fn capacity(&self) -> usize;
    /// Keeps the first `n` tokens.
    fn truncate(&mut self, n: usize);
}

impl Positions for KvCache {
    fn len(&self) -> usize {
        KvCache::len(self)
    }
    fn capacity(&self) -> usize {
        KvCache::capacity(self)
    }
    fn truncate(&mut self, n: usize) {
        KvCache::truncate(self, n)
    }
}

/// Runs the model on tokens appended to the cache and returns the logits rows of the last `n`
/// of them (`[n, vocab]`, 1 <= n <= tokens).
pub type ForwardFn<'a, E, C = KvCache> =
    dyn FnMut(&mut C, &[u32], usize) -> Result<Vec<f32>, E> + 'a;

/// Where a decode starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Start {
    /// Every prompt token is in the cache; this is the logits row after the last (`[width]`).
    Logits(Vec<f32>),
    /// The prompt's last tokens (at least one) are not in the cache yet: the first forward pass
    /// feeds them together with a first draft, so the pass that computes the prompt's last
    /// logits also verifies the answer's first tokens. Whenever the draft's first token is
    /// right this saves the one-token pass that plain decoding spends on the first answer token
    /// (memory-bound: it reads every weight for one token); the tokens and the logits of every
    /// position are the same either way (batch = sequential).
    Pending(Vec<u32>),
}

impl Start {
    /// Prompt tokens not yet in the cache.
    pub fn pending_len(&self) -> usize {
        match self {
            Start::Logits(_) => 0,
            Start::Pending(t) => t.len(),
        }
    }
}
/// Picks the next token from (text so far, logits row, ids excluded at this position).
pub type ChooseFn<'a> = dyn FnMut(&str, &[f32], &[u32]) -> Choice + 'a;
/// True when the answer text is complete (ends the decode with [`StopReason::EndOfStatement`]).
pub type CompleteFn<'a> = dyn Fn(&str) -> bool + 'a;

/// Decodes from `start` with the KV cache `kv` holding the prompt `context` (but the pending
/// tokens of a [`Start::Pending`], which `context` ends with). `forward` is the one forward
/// entry point (returns `[n_out, width]`), `choose` the one token chooser (text so far, logits row, token ids not to pick
/// there), `complete` the check that ends the answer (`None`: only end-of-generation, budget and
/// a full context stop), `on_step` runs before every forward pass with the number of tokens
/// generated so far (returning `false` cancels with [`GenerateError::Cancelled`]). With
/// `drafting` set, its drafts are verified in batches; without, one token per pass.
///
/// Back-outs: when the chooser finds no acceptable token (a constrained decode at a dead end),
/// the last tokens are taken back one at a time, at most [`BACKTRACK_DEPTH`] deep and
/// `limits.backtrack` times per decode, each excluded at its position, until a position offers
/// another acceptable token; the decode continues from there (one forward pass, the KV cache
/// rolled back). Without a way back, the chooser's fallback (plain argmax) is taken. The rows
/// of the last positions are kept for this only when `limits.backtrack > 0`.
///
/// On return the cache holds the prompt and every generated token but the last (as plain
/// decoding leaves it).
#[allow(clippy::too_many_arguments)]
pub fn decode<E: From<GenerateError>, C: Positions + ?Sized>(
    tok: &Tokenizer,
    kv: &mut C,
    start: Start,
    context: &[u32],
    mut drafting: Option<&mut dyn Drafting>,
    limits: Limits<'_>,
    complete: Option<&CompleteFn>,
    forward: &mut ForwardFn<E, C>,
    choose: &mut ChooseFn,
    on_step: &mut dyn FnMut(usize) -> bool,
) -> Result<Decoded, E> {
    let mut ids: Vec<u32> = Vec::new();
    let mut history: Vec<u32> = context.to_vec(); // prompt + generated, for prompt lookup
    let mut stream = tok.stream_decoder();
    let mut text = limits.seed.to_string();
    let mut stats = SpecStats::default();
    let mut r = 0usize; // row of `rows` the next token is chosen from
                        // draft: the tokens fed after the last chosen one (or after the pending prompt tokens);
                        // rows[j + 1] follows draft[j]. rows: [draft.len() + 1, width] logits of the last pass.
                        // base: the cache length at the prompt's end (the first generated token goes there).
    let (mut rows, mut draft, base) = match start {
        Start::Logits(first) => (first, Vec::new(), kv.len()),
        Start::Pending(tail) => {
            assert!(!tail.is_empty(), "a pending start has tokens");
            // Tokens 1..=k come out of this pass after a draft of k: the budget bounds k.
            let room = kv.capacity().saturating_sub(kv.len() + tail.len());
            let max = limits.max_new.saturating_sub(1).min(room);
            let draft = match drafting.as_deref_mut() {
                Some(d) if max > 0 => d.propose(&history, 0, &text, max),
                _ => Vec::new(),
            };
            if !on_step(0) {
                return Err(GenerateError::Cancelled.into());
            }
            let base = kv.len() + tail.len();
            let mut batch = tail;
            batch.extend_from_slice(&draft);
            // The prompt's pass: not counted as a decode pass (plain decoding would run it as
            // the prefill's last), its draft is.
            let rows = forward(kv, &batch, draft.len() + 1)?;
            stats.draft_tokens += draft.len();
            (rows, draft, base)
        }
    };
    let width = rows.len() / (draft.len() + 1);
    // Back-outs: the rows of the last positions (`(position, [width])`), the tokens excluded
    // per position, and how many back-outs are left.
    let mut kept: VecDeque<(usize, Vec<f32>)> = VecDeque::new();
    let mut excluded: Vec<(usize, u32)> = Vec::new();
    let mut backtracks_left = limits.backtrack;
    let stop = loop {
        if ids.len() >= limits.max_new {
            break StopReason::Budget;
        }
        let pos = ids.len();
        let row = &rows[r * width..(r + 1) * width];
        if limits.backtrack > 0 {
            if kept.len() == BACKTRACK_DEPTH {
                kept.pop_front();
            }
            kept.push_back((pos, row.to_vec()));
        }
        let here = |excluded: &[(usize, u32)], p: usize| {
            excluded.iter().filter(|e| e.0 == p).map(|e| e.1).collect::<Vec<u32>>()
        };
        let mut choice = choose(&text, row, &here(&excluded, pos));
        let mut backed_out = false;
        if !choice.acceptable && backtracks_left > 0 {
            // Take tokens back until a kept position offers another acceptable one.
            let mut t_ids = ids.clone();
            let mut t_excluded = excluded.clone();
            while let Some(&last) = t_ids.last() {
                let p = t_ids.len() - 1;
                let Some((_, prev)) = kept.iter().find(|k| k.0 == p) else { break };
                t_ids.pop();
                t_excluded.retain(|e| e.0 <= p);
                t_excluded.push((p, last));
                let t_text = replay(tok, limits.seed, &t_ids).0;
                let c = choose(&t_text, prev, &here(&t_excluded, p));
                if c.acceptable {
                    backtracks_left -= 1;
                    choice = c;
                    backed_out = true;
                    kept.retain(|k| k.0 <= p);
                    (ids, text, excluded) = (t_ids, t_text, t_excluded);
                    history.truncate(context.len() + ids.len());
                    stream = replay(tok, limits.seed, &ids).1;
                    break;
                }
            }
        }
        let id = choice.id;
        ids.push(id);
        history.push(id);
        let hit = !backed_out && r < draft.len() && draft[r] == id;
        if hit {
            stats.accepted_tokens += 1;
        }
        if tok.is_eog(id) {
            break StopReason::EndOfGeneration;
        }
        text.push_str(&stream.push(id));
        if complete.is_some_and(|c| c(&text)) {
            break StopReason::EndOfStatement;
        }
        if ids.len() >= limits.max_new {
            break StopReason::Budget;
        }
        if hit {
            // Already in the cache, and its logits are the next row.
            r += 1;
            continue;
        }
        // End of a verification round: `r` drafted tokens were accepted.
        if !backed_out {
            if let Some(d) = drafting.as_deref_mut() {
                d.verified(draft.len(), r);
            }
        }
        kv.truncate(base + ids.len() - 1); // every generated token but `id`
        if kv.len() + 1 > kv.capacity() {
            break StopReason::ContextFull;
        }
        draft = match drafting.as_deref_mut() {
            Some(d) => {
                let room = kv.capacity() - kv.len() - 1;
                // Tokens n+1..n+k+1 come out of this pass; more than the budget left is waste.
                let max = (limits.max_new - ids.len() - 1).min(room);
                if max == 0 {
                    Vec::new()
                } else {
                    d.propose(&history, ids.len(), &text, max)
                }
            }
            None => Vec::new(),
        };
        if !on_step(ids.len()) {
            return Err(GenerateError::Cancelled.into());
        }
        let mut batch = Vec::with_capacity(draft.len() + 1);
        batch.push(id);
        batch.extend_from_slice(&draft);
        rows = forward(kv, &batch, batch.len())?;
        assert_eq!(rows.len(), batch.len() * width, "one logits row per fed token");
        stats.forward_passes += 1;
        stats.draft_tokens += draft.len();
        r = 0;
    };
    text.push_str(&stream.finish());
    kv.truncate(base + ids.len().saturating_sub(1));
    Ok(Decoded { ids, text, stop, stats })
}

/// The text of `seed` + `ids` as the streaming decoder gives it token by token, and that
/// decoder, ready for the next token.
fn replay<'t>(tok: &'t Tokenizer, seed: &str, ids: &[u32]) -> (String, StreamDecoder<'t>) {
    let mut stream = tok.stream_decoder();
    let mut text = seed.to_string();
    for &id in ids {
        text.push_str(&stream.push(id));
    }
    (text, stream)
}
