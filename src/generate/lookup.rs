//! Prompt lookup: when the last few tokens occurred earlier (in the schema prompt, the question
//! or the answer so far), propose the tokens that followed them there. SQL copies identifiers and
//! literals from its input, so these copies are often right.

/// Longest n-gram looked up: longer contexts are rarer and add little over 3 tokens of SQL.
pub const MAX_NGRAM: usize = 3;

/// The continuation of the longest (at most [`MAX_NGRAM`]) suffix of `history` that occurred
/// earlier in `history`: (n-gram length, up to `max` following tokens). The latest earlier
/// occurrence wins (the nearest context is the most relevant, e.g. the answer's own aliases).
pub fn lookup(history: &[u32], max: usize) -> Option<(usize, Vec<u32>)> {
    if max == 0 {
        return None;
    }
    let len = history.len();
    for n in (1..=MAX_NGRAM.min(len.saturating_sub(1))).rev() {
        let tail = &history[len - n..];
        // Occurrences that end before the tail starts' last token: start positions i < len - n.
        for i in (0..len - n).rev() {
            if &history[i..i + n] == tail {
                let from = i + n;
                let to = (from + max).min(len);
                if from < to {
                    return Some((n, history[from..to].to_vec()));
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_what_followed_the_longest_match() {
        // "... users ( user_id integer ... FROM users" -> "( user_id"
        let h = [1, 2, 3, 4, 9, 9, 7, 1, 2];
        assert_eq!(lookup(&h, 3), Some((2, vec![3, 4, 9])));
        assert_eq!(lookup(&h, 1), Some((2, vec![3])));
        // Only the last token recurs.
        assert_eq!(lookup(&[5, 1, 6, 7, 1], 2), Some((1, vec![6, 7])));
        assert_eq!(lookup(&[1, 2, 3], 4), None);
        assert_eq!(lookup(&[], 4), None);
        assert_eq!(lookup(&[1, 1], 0), None);
    }

    #[test]
    fn latest_occurrence_wins_and_continuation_is_clipped() {
        let h = [8, 1, 2, 8, 1, 3, 8, 1];
        assert_eq!(lookup(&h, 5), Some((2, vec![3, 8, 1])));
        // An overlapping repeat: "1 1 1" -> continuation stops at the end of history.
        assert_eq!(lookup(&[1, 1, 1], 5), Some((2, vec![1])));
    }
}
