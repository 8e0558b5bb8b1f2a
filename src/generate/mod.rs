//! The generation loop: prompt → tokens → batched prefill → token-by-token decode, with streaming
//! text, stop conditions (end-of-generation token, stop strings, token budget) and timings; and
//! the machinery of generation that knows nothing of what is generated: speculative decoding
//! with verification and back-outs (`speculate`), prompt lookup and a token trie for drafts,
//! prompt-prefix fingerprints and the files of a prefix's KV state (`kv_file`); the token
//! samplers every decode step draws with (`sampler`).

pub mod fingerprint;
pub mod kv_file;
pub mod lookup;
pub mod sampler;
pub mod speculate;
pub mod trie;

use crate::model::{KvCache, Logits, Model, ModelError};
use crate::platform::clock::ms_since;
use crate::platform::runtime::Runtime;
use crate::tokenizer::{Tokenizer, TokenizerError};
use sampler::{Sampler, SamplerConfig};
use std::time::Instant;

/// Errors of a generation call.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    #[error("the prompt is empty (no tokens)")]
    EmptyPrompt,
    /// The caller's progress callback asked to stop.
    #[error("generation was cancelled")]
    Cancelled,
}

/// Settings of one generation.
#[derive(Debug, Clone)]
pub struct GenerateParams {
    /// Most tokens to generate (the end-of-generation token counts).
    pub max_tokens: usize,
    pub sampler: SamplerConfig,
    /// Generation stops when the decoded text contains any of these; the stop string itself and
    /// anything after it is not part of the output.
    pub stop: Vec<String>,
    /// Parse special-token text such as `<|im_start|>` in the prompt into single tokens.
    pub parse_special: bool,
}

impl Default for GenerateParams {
    /// 128 greedy tokens, no stop strings, special tokens parsed.
    fn default() -> Self {
        GenerateParams {
            max_tokens: 128,
            sampler: SamplerConfig::default(),
            stop: Vec::new(),
            parse_special: true,
        }
    }
}

/// Why a generation ended (of [`generate`], and of an nl2sql attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (for [`generate`], the last of
    /// `output_ids`).
    EndOfGeneration,
    /// The decoded text hit this stop string ([`generate`]).
    StopString(String),
    /// The SQL statement ended (`;`, closing fence, blank line after the SQL: nl2sql).
    EndOfStatement,
    /// The token budget (`max_tokens`, `max_new_tokens`) was generated.
    Budget,
    /// The KV cache is full.
    ContextFull,
}

impl StopReason {
    /// A short lowercase name (nl2sql_explain's `stop`).
    pub fn name(&self) -> &'static str {
        match self {
            StopReason::EndOfGeneration => "end_of_generation",
            StopReason::StopString(_) => "stop_string",
            StopReason::EndOfStatement => "end_of_statement",
            StopReason::Budget => "max_new_tokens",
            StopReason::ContextFull => "context_full",
        }
    }
}

/// Wall-clock costs of a generation.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    /// Prompt tokens processed in the batched prefill.
    pub prefill_tokens: usize,
    pub prefill_ms: f64,
    /// Single-token forward passes after the prefill (each yields one more token).
    pub decode_tokens: usize,
    /// Time of those passes plus sampling and detokenizing.
    pub decode_ms: f64,
}

impl Timings {
    /// Prompt tokens per second.
    pub fn prefill_tok_s(&self) -> f64 {
        rate(self.prefill_tokens, self.prefill_ms)
    }

    /// Decode passes per second.
    pub fn decode_tok_s(&self) -> f64 {
        rate(self.decode_tokens, self.decode_ms)
    }
}

/// `n` events in `ms` milliseconds as a per-second rate (0 when nothing was timed).
fn rate(n: usize, ms: f64) -> f64 {
    if n == 0 || ms <= 0.0 {
        0.0
    } else {
        n as f64 * 1000.0 / ms
    }
}

/// The result of a generation.
#[derive(Debug, Clone)]
pub struct Generation {
    pub prompt_ids: Vec<u32>,
    /// Every generated token, including a final end-of-generation token.
    pub output_ids: Vec<u32>,
    /// The generated text (without end-of-generation tokens or a stop string).
    pub text: String,
    pub stop_reason: StopReason,
    pub timings: Timings,
}

/// Tokenizes `prompt` (BOS per the model's metadata) and generates from it; see [`generate_ids`].
pub fn generate(
    model: &Model,
    tok: &Tokenizer,
    rt: &Runtime,
    cache: &mut KvCache,
    prompt: &str,
    params: &GenerateParams,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, GenerateError> {
    let ids = tok.encode_prompt(prompt, params.parse_special)?;
    generate_ids(model, tok, rt, cache, &ids, params, on_text)
}

/// Generates a continuation of `prompt_ids`, calling `on_text` with each newly printable piece.
///
/// The cache is cleared first. The prompt runs as one batch; then each sampled token is fed back
/// alone until an end-of-generation token, a stop string, the budget, or a full context.
pub fn generate_ids(
    model: &Model,
    tok: &Tokenizer,
    rt: &Runtime,
    cache: &mut KvCache,
    prompt_ids: &[u32],
    params: &GenerateParams,
    on_text: &mut dyn FnMut(&str),
) -> Result<Generation, GenerateError> {
    if prompt_ids.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    cache.clear();
    let mut sampler = Sampler::new(params.sampler.clone());
    let mut history: Vec<u32> = prompt_ids.to_vec(); // prompt + output, for the repetition penalty
    let mut output = Vec::new();
    let mut timings = Timings::default();
    let mut stream = tok.stream_decoder();
    let mut text = TextStop::new(&params.stop);

    let t0 = Instant::now();
    let mut logits = model.forward(rt, cache, prompt_ids, Logits::Last)?;
    timings.prefill_tokens = prompt_ids.len();
    timings.prefill_ms = ms_since(t0);

    let t1 = Instant::now();
    let reason = loop {
        if output.len() >= params.max_tokens {
            break StopReason::Budget;
        }
        let id = sampler.sample(&logits, &history);
        output.push(id);
        history.push(id);
        if tok.is_eog(id) {
            break StopReason::EndOfGeneration;
        }
        if let Some(s) = text.push(&stream.push(id), on_text) {
            break StopReason::StopString(s);
        }
        if output.len() >= params.max_tokens {
            break StopReason::Budget;
        }
        if cache.check_room(1).is_err() {
            break StopReason::ContextFull;
        }
        logits = model.forward(rt, cache, &[id], Logits::Last)?;
        timings.decode_tokens += 1;
    };
    if !matches!(reason, StopReason::StopString(_)) {
        // A trailing incomplete character becomes U+FFFD; a stop string can still complete here.
        let tail = stream.finish();
        if let Some(s) = text.push(&tail, on_text) {
            let text = text.finish(on_text);
            timings.decode_ms = ms_since(t1);
            return Ok(Generation {
                prompt_ids: prompt_ids.to_vec(),
                output_ids: output,
                text,
                stop_reason: StopReason::StopString(s),
                timings,
            });
        }
    }
    let text = text.finish(on_text);
    timings.decode_ms = ms_since(t1);
    Ok(Generation {
        prompt_ids: prompt_ids.to_vec(),
        output_ids: output,
        text,
        stop_reason: reason,
        timings,
    })
}

/// Streams text while holding back anything that could be the start of a stop string.
#[derive(Debug)]
struct TextStop<'a> {
    stops: &'a [String],
    text: String,
    /// Bytes of `text` already handed to the callback.
    emitted: usize,
    stopped: bool,
}

impl<'a> TextStop<'a> {
    /// A filter for `stops` (empty strings are ignored).
    fn new(stops: &'a [String]) -> Self {
        TextStop { stops, text: String::new(), emitted: 0, stopped: false }
    }

    /// Appends `piece`; emits what is safe; returns the stop string if one now occurs (the text
    /// is then cut just before it).
    fn push(&mut self, piece: &str, on_text: &mut dyn FnMut(&str)) -> Option<String> {
        if self.stopped || piece.is_empty() {
            return None;
        }
        self.text.push_str(piece);
        let pending = &self.text[self.emitted..];
        // Earliest occurrence of any stop string in the not-yet-emitted text.
        let hit = self
            .stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| pending.find(s.as_str()).map(|i| (i, s)))
            .min_by_key(|(i, _)| *i);
        if let Some((i, s)) = hit {
            let cut = self.emitted + i;
            if cut > self.emitted {
                on_text(&self.text[self.emitted..cut]);
            }
            self.text.truncate(cut);
            self.emitted = cut;
            self.stopped = true;
            return Some(s.clone());
        }
        // Hold back the longest suffix that is a proper prefix of some stop string.
        let mut hold = 0;
        for s in self.stops.iter().filter(|s| !s.is_empty()) {
            for k in (1..s.len().min(pending.len() + 1)).rev() {
                let start = pending.len() - k;
                if k > hold
                    && pending.is_char_boundary(start)
                    && s.as_bytes().starts_with(&pending.as_bytes()[start..])
                {
                    hold = k;
                    break;
                }
            }
        }
        let end = self.text.len() - hold;
        if end > self.emitted {
            on_text(&self.text[self.emitted..end]);
            self.emitted = end;
        }
        None
    }

    /// Emits whatever was held back and returns the full text.
    fn finish(mut self, on_text: &mut dyn FnMut(&str)) -> String {
        if self.emitted < self.text.len() {
            on_text(&self.text[self.emitted..]);
            self.emitted = self.text.len();
        }
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds pieces through a stop filter; returns (streamed pieces joined, final text, stop).
    fn run(stops: &[&str], pieces: &[&str]) -> (String, String, Option<String>) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut f = TextStop::new(&stops);
        let mut streamed = String::new();
        let mut hit = None;
        for p in pieces {
            if let Some(s) = f.push(p, &mut |t| streamed.push_str(t)) {
                hit = Some(s);
                break;
            }
        }
        let text = f.finish(&mut |t| streamed.push_str(t));
        (streamed, text, hit)
    }

    #[test]
    fn stop_string_split_across_pieces_is_not_emitted() {
        let (streamed, text, hit) = run(&[";\n"], &["SELECT 1", ";", "\n", "more"]);
        assert_eq!(streamed, "SELECT 1");
        assert_eq!(text, "SELECT 1");
        assert_eq!(hit.as_deref(), Some(";\n"));
    }

    #[test]
    fn false_prefix_is_released() {
        let (streamed, text, hit) = run(&["```"], &["a`", "`b", " c"]);
        assert_eq!(hit, None);
        assert_eq!(streamed, "a``b c");
        assert_eq!(text, "a``b c");
    }

    #[test]
    fn earliest_stop_wins_and_no_stops_stream_everything() {
        let (_, text, hit) = run(&["XY", "B"], &["aBcXY"]);
        assert_eq!((text.as_str(), hit.as_deref()), ("a", Some("B")));
        let (streamed, text, hit) = run(&[], &["héllo", " wörld"]);
        assert_eq!((streamed.as_str(), text.as_str(), hit), ("héllo wörld", "héllo wörld", None));
    }

    #[test]
    fn held_text_is_emitted_at_the_end() {
        let (streamed, text, hit) = run(&["<|end|>"], &["answer <|e"]);
        assert_eq!(hit, None);
        assert_eq!(streamed, "answer <|e");
        assert_eq!(text, "answer <|e");
    }

    #[test]
    fn timings_rates() {
        let t = Timings {
            prefill_tokens: 100,
            prefill_ms: 500.0,
            decode_tokens: 10,
            decode_ms: 1000.0,
        };
        assert_eq!(t.prefill_tok_s(), 200.0);
        assert_eq!(t.decode_tok_s(), 10.0);
        assert_eq!(Timings::default().decode_tok_s(), 0.0);
    }
}
