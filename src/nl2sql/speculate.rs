//! Greedy decoding with optional speculation: each forward pass feeds the last chosen token and
//! a draft of the next ones (`[last, d1..dk]`, logits for every position), the draft is accepted
//! as long as the chooser picks the drafted token from the previous position's logits, the KV
//! cache is rolled back past the first rejection, and the chooser's own token is emitted there.
//!
//! Every stop check (end of generation, end of statement, token budget, full context) runs token
//! by token in the same order as plain decoding, and the chooser sees the text as it is at each
//! position, so with a batch-invariant forward pass the outcome (ids, text, stop reason) is the
//! same as without speculation; only the number of forward passes changes.

use super::draft::{Drafter, Window};
use super::engine::{Progress, StopReason};
use super::error::Nl2SqlError;
use super::sqltext::answer_complete;
use crate::model::{KvCache, Logits};
use crate::tokenizer::Tokenizer;

/// Forward-pass and draft counters of a decode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Forward passes run while decoding (prompt prefill not included).
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

/// Limits and switches of one decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Most tokens generated.
    pub max_new: usize,
    /// Stop when the first SQL statement of the text has ended ([`answer_complete`]).
    pub stop_at_statement: bool,
    /// Text the answer already starts with in the prompt (e.g. an opening SQL fence): the
    /// returned text begins with it, and the stop checks and the chooser see it.
    pub seed: &'static str,
}

/// Decodes from `first` (the logits row after the prompt, `[width]`) with the KV cache `kv`
/// holding the prompt `context`. `forward` is the one forward entry point (returns `[n_out,
/// width]`), `choose` the one token chooser (text so far, logits row), `on_progress` runs before
/// every forward pass (returning `false` cancels). With `drafter` set, drafts are verified in
/// batches (its templates preferring the `focus` tokens at branch points); without, one token
/// per pass. On return the cache holds the prompt and every
/// generated token but the last (as plain decoding leaves it).
#[allow(clippy::too_many_arguments)]
pub fn decode(
    tok: &Tokenizer,
    kv: &mut KvCache,
    first: Vec<f32>,
    context: &[u32],
    drafter: Option<(&Drafter, &[u32])>,
    limits: DecodeLimits,
    forward: &mut dyn FnMut(&mut KvCache, &[u32], Logits) -> Result<Vec<f32>, Nl2SqlError>,
    choose: &mut dyn FnMut(&str, &[f32]) -> u32,
    on_progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Decoded, Nl2SqlError> {
    let width = first.len();
    let base = kv.len();
    let mut rows = first; // [draft.len() + 1, width] logits of the last verification
    let mut r = 0usize; // row of `rows` the next token is chosen from
    let mut draft: Vec<u32> = Vec::new(); // tokens fed after the last chosen one; rows[j + 1] follows draft[j]
    let mut ids: Vec<u32> = Vec::new();
    let mut history: Vec<u32> = context.to_vec(); // prompt + generated, for prompt lookup
    let mut stream = tok.stream_decoder();
    let mut text = limits.seed.to_string();
    let mut stats = SpecStats::default();
    let mut window = Window::new();
    let stop = loop {
        if ids.len() >= limits.max_new {
            break StopReason::Budget;
        }
        let id = choose(&text, &rows[r * width..(r + 1) * width]);
        ids.push(id);
        history.push(id);
        let hit = r < draft.len() && draft[r] == id;
        if hit {
            stats.accepted_tokens += 1;
        }
        if tok.is_eog(id) {
            break StopReason::EndOfGeneration;
        }
        text.push_str(&stream.push(id));
        if limits.stop_at_statement && answer_complete(&text) {
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
        window.update(draft.len(), r);
        kv.truncate(base + ids.len() - 1); // every generated token but `id`
        if kv.check_room(1).is_err() {
            break StopReason::ContextFull;
        }
        draft = match drafter {
            Some((d, focus)) => {
                let room = kv.capacity() - kv.len() - 1;
                // Tokens n+1..n+k+1 come out of this pass; more than the budget left is waste.
                let k = window.len(&text).min(limits.max_new - ids.len() - 1).min(room);
                if k == 0 { Vec::new() } else { d.propose(&history, ids.len(), k, focus) }
            }
            None => Vec::new(),
        };
        if !on_progress(Progress::Decode { generated: ids.len() }) {
            return Err(Nl2SqlError::Cancelled);
        }
        let mut batch = Vec::with_capacity(draft.len() + 1);
        batch.push(id);
        batch.extend_from_slice(&draft);
        let which = if draft.is_empty() { Logits::Last } else { Logits::All };
        rows = forward(kv, &batch, which)?;
        assert_eq!(rows.len(), batch.len() * width, "one logits row per fed token");
        stats.forward_passes += 1;
        stats.draft_tokens += draft.len();
        r = 0;
    };
    text.push_str(&stream.finish());
    kv.truncate(base + ids.len().saturating_sub(1));
    Ok(Decoded { ids, text, stop, stats })
}
