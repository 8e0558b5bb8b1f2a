//! Splitting special tokens (`<|im_start|>`, `<tool_call>`) out of text before BPE, the way
//! llama.cpp does: candidates are tried longest first, each one cutting every remaining text
//! fragment at all of its (non-overlapping, left-to-right) occurrences.

/// One piece of partitioned input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragment<'a> {
    /// Ordinary text, to be pre-tokenized and BPE-encoded on its own.
    Text(&'a str),
    /// A special token found verbatim in the text.
    Token(u32),
}

/// One candidate special token.
#[derive(Debug, Clone)]
struct Entry {
    id: u32,
    text: String,
    /// Control/unknown tokens are matched only when the caller asks to parse special tokens;
    /// user-defined tokens always are (llama.cpp and Hugging Face agree on this).
    needs_parse_special: bool,
}

/// The special tokens of a vocabulary, longest text first.
#[derive(Debug, Clone, Default)]
pub struct SpecialMatcher {
    entries: Vec<Entry>,
}

impl SpecialMatcher {
    /// Builds the matcher from `(id, text, needs_parse_special)`; empty texts are ignored.
    pub fn new(candidates: impl IntoIterator<Item = (u32, String, bool)>) -> SpecialMatcher {
        let mut entries: Vec<Entry> = candidates
            .into_iter()
            .filter(|(_, t, _)| !t.is_empty())
            .map(|(id, text, needs_parse_special)| Entry { id, text, needs_parse_special })
            .collect();
        // Longest first; ties by id so the order is deterministic.
        entries.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.id.cmp(&b.id)));
        SpecialMatcher { entries }
    }

    /// Number of candidate special tokens.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Cuts `text` into ordinary-text fragments and special tokens.
    pub fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let mut frags = Vec::new();
        if text.is_empty() {
            return frags;
        }
        frags.push(Fragment::Text(text));
        for e in &self.entries {
            if e.needs_parse_special && !parse_special {
                continue;
            }
            // Cheap whole-text test first: most candidates never occur.
            if !text.contains(e.text.as_str()) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                match f {
                    Fragment::Token(_) => next.push(f),
                    Fragment::Text(mut rest) => {
                        while let Some(at) = rest.find(e.text.as_str()) {
                            if at > 0 {
                                next.push(Fragment::Text(&rest[..at]));
                            }
                            next.push(Fragment::Token(e.id));
                            rest = &rest[at + e.text.len()..];
                        }
                        if !rest.is_empty() {
                            next.push(Fragment::Text(rest));
                        }
                    }
                }
            }
            frags = next;
        }
        frags
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Fragment::*;

    fn matcher() -> SpecialMatcher {
        SpecialMatcher::new([
            (1, "<|im_start|>".to_string(), true),
            (2, "<|im_end|>".to_string(), true),
            (3, "<tool>".to_string(), false),
            (4, "<tool>x".to_string(), true),
        ])
    }

    #[test]
    fn splits_control_tokens_only_when_asked() {
        let m = matcher();
        let t = "<|im_start|>user\nhi<|im_end|>";
        assert_eq!(m.partition(t, true), vec![Token(1), Text("user\nhi"), Token(2)]);
        assert_eq!(m.partition(t, false), vec![Text(t)]);
        assert_eq!(m.partition("", true), vec![]);
    }

    #[test]
    fn user_defined_always_and_longest_first() {
        let m = matcher();
        assert_eq!(m.partition("a<tool>b", false), vec![Text("a"), Token(3), Text("b")]);
        assert_eq!(m.partition("<tool>x<tool>", true), vec![Token(4), Token(3)]);
        assert_eq!(m.partition("<tool>x<tool>", false), vec![Token(3), Text("x"), Token(3)]);
        assert_eq!(m.partition("<|im_end|><|im_end|>", true), vec![Token(2), Token(2)]);
    }
}
