//! The cache rows after the question, kept for the next turn when it starts the same way.
//!
//! Every turn after the first answer starts again right after the question: a repair turn with
//! the statement just rejected, a candidate branch with the first answer's leading tokens. The
//! KV cache often still holds those tokens' rows: they were just decoded. Rows depend only on
//! the tokens before them, and the forward pass is batch-invariant (a batch gives bitwise the
//! rows and logits of its tokens one at a time; `Engine::batch_invariant`), so keeping the
//! rows of the common leading tokens instead of computing them again gives the same logits, the
//! same answer, with fewer prompt tokens through the model. Without batch invariance (a sparse
//! FFN hook that keeps batches dense) nothing is kept: the turn is computed as before.

/// The tokens whose rows the cache holds after the question (`question_end`), in order.
#[derive(Debug)]
pub struct Held {
    /// Cache length at the end of the question: rows before it are never given up here.
    question_end: usize,
    /// `[cache length - question_end]` token ids, when known.
    tokens: Vec<u32>,
    /// False when kept rows would not be bitwise what a prefill computes.
    enabled: bool,
}

impl Held {
    /// Nothing held yet after a question ending at cache position `question_end`.
    pub fn new(question_end: usize, enabled: bool) -> Held {
        Held { question_end, tokens: Vec::new(), enabled }
    }

    /// Records `tokens` as fed after the held ones, then checks the record against the cache's
    /// length `cache_len`: on any disagreement the record is dropped (nothing is kept later:
    /// safe, only slower).
    pub fn fed(&mut self, tokens: &[u32], cache_len: usize) {
        self.tokens.extend_from_slice(tokens);
        if self.question_end + self.tokens.len() != cache_len {
            self.tokens.clear();
        }
    }

    /// The tokens held after the question when the cache's length `cache_len` agrees with the
    /// record and keeping rows is on (`None` otherwise).
    pub fn tokens(&self, cache_len: usize) -> Option<&[u32]> {
        let agrees = self.question_end + self.tokens.len() == cache_len;
        (self.enabled && agrees).then_some(self.tokens.as_slice())
    }

    /// How many leading tokens of `next` keep their rows: the common prefix with the held
    /// tokens, less one when it covers all of `next` (its last token is run for its logits).
    pub fn keep(&self, next: &[u32]) -> usize {
        if !self.enabled {
            return 0;
        }
        let common = self.tokens.iter().zip(next).take_while(|(a, b)| a == b).count();
        common.min(next.len().saturating_sub(1))
    }

    /// The next turn `next` after the question: the cache length to cut back to (the question
    /// and the rows of `next` kept) and the tokens of `next` still to run (never empty when
    /// `next` is not). The caller truncates, runs them, then reports them with [`Held::fed`].
    pub fn resume<'a>(&mut self, next: &'a [u32]) -> (usize, &'a [u32]) {
        let keep = self.keep(next);
        self.tokens.truncate(keep);
        (self.question_end + keep, &next[keep..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_common_prefix_but_reruns_the_last_token() {
        let mut h = Held::new(10, true);
        h.fed(&[1, 2, 3, 4], 14);
        // A repair turn starting with the same three tokens, then others.
        assert_eq!(h.resume(&[1, 2, 3, 9, 9]), (13, &[9, 9][..]));
        // The same tokens exactly: the last is run again for its logits.
        assert_eq!(h.resume(&[1, 2, 3]), (12, &[3][..]));
        // Different from the first token on: back to the question.
        assert_eq!(h.resume(&[7, 8]), (10, &[7, 8][..]));
        h.fed(&[7, 8, 5], 13);
        assert_eq!(h.resume(&[7, 8, 5, 6]), (13, &[6][..]));
    }

    #[test]
    fn keeps_nothing_when_disabled_or_out_of_step() {
        let mut h = Held::new(10, false);
        h.fed(&[1, 2, 3, 4], 14);
        assert_eq!(h.resume(&[1, 2, 3, 4, 5]), (10, &[1, 2, 3, 4, 5][..]));
        // A record that disagrees with the cache's length is dropped.
        let mut h = Held::new(10, true);
        h.fed(&[1, 2, 3, 4], 15);
        assert_eq!(h.keep(&[1, 2, 3, 4, 5]), 0);
        assert_eq!(h.resume(&[1]), (10, &[1][..]));
    }
}
