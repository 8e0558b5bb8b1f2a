//! How one call shapes token choice (see `vocab.rs`, `constrain.rs`): an active vocabulary and
//! an identifier constrainer, or plain greedy.

use super::constrain::Constrainer;
use super::decode::Choice;
use super::outcome::ShapingSummary;
use super::vocab::ActiveVocab;
use crate::generate::sampler::argmax;
use crate::tokenizer::Tokenizer;

/// How one call shapes token choice: an optional active vocabulary (subset LM head) and an
/// optional identifier constrainer; plain greedy when both are off.
#[derive(Debug)]
pub struct Shaping {
    /// The active vocabulary when pruning is on: logits rows are `[active]`.
    pub vocab: Option<ActiveVocab>,
    /// The identifier constrainer when constraints are on (and in every repair round).
    pub constrainer: Option<Constrainer>,
    /// Picks the constrainer changed.
    pub changed: std::cell::Cell<usize>,
}

impl Shaping {
    /// What an outcome reports of the call's shaping (`schema_constraints`: the setting).
    pub fn summary(&self, schema_constraints: bool) -> ShapingSummary {
        ShapingSummary {
            active_vocab: self.vocab.as_ref().map(ActiveVocab::len),
            schema_constraints,
            constrained_tokens: self.changed.get(),
        }
    }

    /// True when neither pruning nor constraints are on.
    pub fn is_plain(&self) -> bool {
        self.vocab.is_none() && self.constrainer.is_none()
    }

    /// Neither pruning nor constraints.
    pub fn plain() -> Shaping {
        Shaping { vocab: None, constrainer: None, changed: std::cell::Cell::new(0) }
    }

    /// The next token from a logits row (`[active]` under pruning, else `[vocab]`) given the
    /// text generated so far, never one of `excluded`.
    pub fn pick(&self, tok: &Tokenizer, text: &str, row: &[f32], excluded: &[u32]) -> Choice {
        let ids = self.vocab.as_ref().map(ActiveVocab::ids);
        match &self.constrainer {
            Some(c) => {
                let p = c.choose_excluding(tok, text, row, ids, excluded);
                self.changed.set(self.changed.get() + p.changed as usize);
                Choice { id: p.id, acceptable: p.acceptable }
            }
            None => {
                let j = argmax(row) as usize;
                Choice { id: ids.map_or(j as u32, |r| r[j]), acceptable: true }
            }
        }
    }
}
