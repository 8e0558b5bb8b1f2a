//! How one call shapes token choice (see `constrain.rs`): an identifier constrainer (every repair
//! round's answer), or plain greedy.

use crate::generate::sampler::argmax;
use crate::nl2sql::decode::constrain::Constrainer;
use crate::nl2sql::decode::sql_decode::Choice;
use crate::tokenizer::Tokenizer;

/// How a call shaped token choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShapingSummary {
    /// Tokens of repair rounds where the schema constraint replaced the model's first choice.
    pub constrained_tokens: usize,
}

/// How one call shapes token choice: an optional identifier constrainer; plain greedy without.
#[derive(Debug)]
pub struct Shaping {
    /// The identifier constrainer of a repair round's answer (none for the first answer and
    /// the branches).
    pub constrainer: Option<Constrainer>,
    /// Picks the constrainer changed.
    pub changed: std::cell::Cell<usize>,
}

impl Shaping {
    /// What an outcome reports of the call's shaping.
    pub fn summary(&self) -> ShapingSummary {
        ShapingSummary { constrained_tokens: self.changed.get() }
    }

    /// True when no constraint is on.
    pub fn is_plain(&self) -> bool {
        self.constrainer.is_none()
    }

    /// No constraint.
    pub fn plain() -> Shaping {
        Shaping { constrainer: None, changed: std::cell::Cell::new(0) }
    }

    /// The next token from a logits row (`[vocab]`) given the text generated so far, never one
    /// of `excluded`.
    pub fn pick(&self, tok: &Tokenizer, text: &str, row: &[f32], excluded: &[u32]) -> Choice {
        match &self.constrainer {
            Some(c) => {
                let p = c.choose_excluding(tok, text, row, excluded);
                self.changed.set(self.changed.get() + p.changed as usize);
                Choice { id: p.id, acceptable: p.acceptable }
            }
            None => Choice { id: argmax(row), acceptable: true },
        }
    }
}
