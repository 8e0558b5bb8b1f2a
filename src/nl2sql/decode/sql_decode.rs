//! nl2sql's decode: the generic speculative decoder (`generate::speculate`) with SQL drafts (the
//! schema's templates and prompt lookup, [`Drafter`], at the adaptive SQL draft length
//! [`Window`]) and the end of the first SQL statement as the answer's end.

use crate::generate::speculate::{self, ChooseFn, Drafting, ForwardFn, Limits, Positions};
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::decode::draft::{Drafter, Window, OPENING_TOKENS};
use crate::nl2sql::sql::sqltext::answer_complete;
use crate::tokenizer::Tokenizer;

pub use crate::generate::speculate::{Choice, Decoded, SpecStats, Start, StopReason};

/// Limits and switches of one decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits<'a> {
    /// Most tokens generated.
    pub max_new: usize,
    /// Stop when the first SQL statement of the text has ended ([`answer_complete`]).
    pub stop_at_statement: bool,
    /// Text the answer already starts with in the prompt (e.g. an opening SQL fence, or a
    /// branch's shared tokens): the returned text begins with it, and the stop checks and the
    /// chooser see it.
    pub seed: &'a str,
    /// Most back-outs of a dead end (see [`speculate::decode`]); 0 never backs out.
    pub backtrack: usize,
}

/// A [`Drafter`]'s proposals at the adaptive length of a [`Window`], its templates preferring
/// the `focus` tokens at branch points.
struct SqlDrafting<'a> {
    drafter: &'a Drafter,
    focus: &'a [u32],
    window: Window,
}

impl Drafting for SqlDrafting<'_> {
    /// The window's length after `text`, at most `max`.
    /// An answer's opening (nothing generated, no seed) is drafted whole
    /// ([`OPENING_TOKENS`]: the fence and the statement's first keyword, the model's habit), so
    /// that the prompt's last pass, which carries it, also yields the statement's first word.
    fn propose(&mut self, history: &[u32], generated: usize, text: &str, max: usize) -> Vec<u32> {
        let opening = if generated == 0 && text.is_empty() { OPENING_TOKENS } else { 0 };
        let k = self.window.len(text).max(opening).min(max);
        if k == 0 {
            Vec::new()
        } else {
            self.drafter.propose(history, generated, k, self.focus)
        }
    }

    /// The window learns the acceptance.
    fn verified(&mut self, drafted: usize, accepted: usize) {
        self.window.update(drafted, accepted);
    }
}

/// [`speculate::decode`] with SQL drafts from `drafter` (and its `focus` tokens) when set, the
/// end of the statement as a stop when `limits.stop_at_statement`, and progress reported as
/// [`Progress::Decode`].
#[allow(clippy::too_many_arguments)]
pub fn decode<C: Positions + ?Sized>(
    tok: &Tokenizer,
    kv: &mut C,
    start: Start,
    context: &[u32],
    drafter: Option<(&Drafter, &[u32])>,
    limits: DecodeLimits<'_>,
    forward: &mut ForwardFn<Nl2SqlError, C>,
    choose: &mut ChooseFn,
    on_progress: &mut dyn FnMut(Progress) -> bool,
) -> Result<Decoded, Nl2SqlError> {
    let mut drafting =
        drafter.map(|(drafter, focus)| SqlDrafting { drafter, focus, window: Window::new() });
    let generic =
        Limits { max_new: limits.max_new, seed: limits.seed, backtrack: limits.backtrack };
    let complete: &dyn Fn(&str) -> bool = &answer_complete;
    speculate::decode(
        tok,
        kv,
        start,
        context,
        drafting.as_mut().map(|d| d as &mut dyn Drafting),
        generic,
        limits.stop_at_statement.then_some(complete),
        forward,
        choose,
        &mut |generated| on_progress(Progress::Decode { generated }),
    )
}
