//! Drafts from the backend's earlier answers. Questions on one schema come in runs, and their
//! answers repeat one another: the same join written the same way (`JOIN sbcustomer AS c ON
//! t.sbtxcustid = c.sbcustid`), the same aliases, the same layout of the select list. Prompt
//! lookup cannot see them (they are in no prompt) and the templates write joins their own way.
//! When the end of the answer being decoded occurred in an earlier answer, what followed it
//! there is the draft. Drafts only decide how many tokens a pass verifies, never which tokens
//! are kept (greedy verification), so an earlier answer changes the time of the next one and
//! nothing else.

use std::collections::VecDeque;

/// Tokens of earlier answers kept: about the last 20 answers of ~100 tokens. A lookup scans
/// them all at each draft (~16k token comparisons, microseconds against a ~60 ms pass).
pub const RECALL_TOKENS: usize = 2048;

/// Longest context matched: enough to tell `JOIN sbcustomer AS c ON` from other joins of the
/// same table; longer contexts add nothing to a draft of at most `MAX_DRAFT` tokens.
const MAX_CONTEXT: usize = 8;

/// Shortest context matched: one or two tokens (`,`, ` AS`, `(`) follow everything in SQL, and
/// a copy after them is mostly wrong (a one-token prompt-lookup match is right 24-31 % of the
/// time, docs/nl2sql-accuracy.md).
const MIN_CONTEXT: usize = 3;

/// The backend's earlier answers, newest last, at most [`RECALL_TOKENS`] tokens in all.
#[derive(Debug, Clone, Default)]
pub struct Recall {
    answers: VecDeque<Vec<u32>>,
    tokens: usize,
}

impl Recall {
    /// Keeps the answer `ids`, dropping the oldest answers beyond [`RECALL_TOKENS`]. An answer
    /// too short to match anything is not kept; a longer one than the whole budget keeps its
    /// start (where an answer's select list and joins are).
    pub fn remember(&mut self, ids: &[u32]) {
        if ids.len() <= MIN_CONTEXT {
            return;
        }
        let ids = &ids[..ids.len().min(RECALL_TOKENS)];
        while self.tokens + ids.len() > RECALL_TOKENS {
            let Some(old) = self.answers.pop_front() else { break };
            self.tokens -= old.len();
        }
        self.tokens += ids.len();
        self.answers.push_back(ids.to_vec());
    }

    /// Tokens kept.
    pub fn tokens(&self) -> usize {
        self.tokens
    }

    /// What followed the longest end of `answer` (at least `min_context` tokens, and at least
    /// [`MIN_CONTEXT`]) in an earlier answer: (context length, up to `max` tokens). Of equally
    /// long matches the newest answer's last one wins (the latest habit).
    pub fn lookup(
        &self,
        answer: &[u32],
        min_context: usize,
        max: usize,
    ) -> Option<(usize, Vec<u32>)> {
        if max == 0 {
            return None;
        }
        let lo = min_context.max(MIN_CONTEXT);
        for n in (lo..=MAX_CONTEXT.min(answer.len())).rev() {
            let tail = &answer[answer.len() - n..];
            for past in self.answers.iter().rev().filter(|p| p.len() > n) {
                // Occurrences with at least one token after them.
                for i in (0..past.len() - n).rev() {
                    if &past[i..i + n] == tail {
                        let from = i + n;
                        return Some((n, past[from..(from + max).min(past.len())].to_vec()));
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest matching end wins, then the newest answer; what followed is copied up to max.
    #[test]
    fn copies_what_followed_the_longest_match_in_the_newest_answer() {
        let mut r = Recall::default();
        r.remember(&[1, 2, 3, 4, 5, 6, 7]);
        r.remember(&[9, 3, 4, 5, 8, 8]);
        // "3 4 5" occurs in both: the newest answer's continuation.
        assert_eq!(r.lookup(&[0, 3, 4, 5], 0, 4), Some((3, vec![8, 8])));
        // "2 3 4 5" only in the first: a longer context beats the newer answer.
        assert_eq!(r.lookup(&[2, 3, 4, 5], 0, 2), Some((4, vec![6, 7])));
        // Shorter than the shortest context, or than asked: nothing.
        assert_eq!(r.lookup(&[4, 5], 0, 4), None);
        assert_eq!(r.lookup(&[0, 3, 4, 5], 4, 4), None);
        // A match at an answer's end has nothing to copy.
        assert_eq!(r.lookup(&[9, 5, 6, 7], 0, 4), None);
        assert_eq!(r.lookup(&[1, 2, 3], 0, 0), None);
    }

    /// The budget drops the oldest answers; short answers are not kept.
    #[test]
    fn keeps_at_most_the_budget() {
        let mut r = Recall::default();
        r.remember(&[1, 2]);
        assert_eq!(r.tokens(), 0);
        let a: Vec<u32> = (0..1500).collect();
        let b: Vec<u32> = (5000..6000).collect();
        r.remember(&a);
        r.remember(&b);
        assert_eq!(r.tokens(), 1000, "the first answer went");
        assert_eq!(r.lookup(&[1, 2, 3], 0, 2), None);
        assert_eq!(r.lookup(&[5001, 5002, 5003], 0, 2), Some((3, vec![5004, 5005])));
        let huge: Vec<u32> = (0..5000).collect();
        r.remember(&huge);
        assert_eq!(r.tokens(), RECALL_TOKENS);
    }
}
