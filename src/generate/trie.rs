//! A token trie: the pre-tokenized SQL templates, walked along the tokens generated so far to
//! propose how the statement continues.

/// One trie node: its children (token, node index) and how many inserted sequences pass here.
#[derive(Debug, Clone, Default)]
struct Node {
    /// (token id, child node index), in insertion order.
    children: Vec<(u32, u32)>,
    /// Sequences inserted through this node (the most travelled child is the likeliest).
    count: u32,
}

/// A trie over token sequences.
#[derive(Debug, Clone)]
pub struct TokenTrie {
    /// `nodes[0]` is the root.
    nodes: Vec<Node>,
}

impl Default for TokenTrie {
    /// An empty trie (a root only).
    fn default() -> Self {
        TokenTrie::new()
    }
}

impl TokenTrie {
    /// An empty trie.
    pub fn new() -> TokenTrie {
        TokenTrie { nodes: vec![Node::default()] }
    }

    /// Number of nodes, root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// Adds `seq` (counting it on every node of its path).
    pub fn insert(&mut self, seq: &[u32]) {
        let mut at = 0usize;
        self.nodes[0].count += 1;
        for &t in seq {
            at = match self.child(at, t) {
                Some(c) => c,
                None => {
                    let idx = self.nodes.len();
                    self.nodes.push(Node::default());
                    self.nodes[at].children.push((t, idx as u32));
                    idx
                }
            };
            self.nodes[at].count += 1;
        }
    }

    /// The child of `node` reached by token `t`.
    fn child(&self, node: usize, t: u32) -> Option<usize> {
        self.nodes[node].children.iter().find(|c| c.0 == t).map(|c| c.1 as usize)
    }

    /// The node reached from the root along `seq`, if `seq` is a path of the trie.
    pub fn walk(&self, seq: &[u32]) -> Option<usize> {
        seq.iter().try_fold(0usize, |at, &t| self.child(at, t))
    }

    /// Up to `max` tokens continuing from `node`, each time along the child whose token is in
    /// `focus` (sorted; e.g. the question's words and the schema names it mentions), else the
    /// most travelled one (the first inserted among equals). Stops before a branch where no
    /// child is in `focus` and the likeliest carries less than half of the sequences (a guess
    /// there is mostly wasted verification work), unless nothing was proposed yet.
    pub fn continuation(&self, mut node: usize, max: usize, focus: &[u32]) -> Vec<u32> {
        let mut out = Vec::new();
        while out.len() < max {
            let mut best: Option<(u32, u32)> = None;
            let key =
                |t: u32, c: u32| (focus.binary_search(&t).is_ok(), self.nodes[c as usize].count);
            for &(t, c) in &self.nodes[node].children {
                if best.is_none_or(|(bt, b)| key(t, c) > key(bt, b)) {
                    best = Some((t, c));
                }
            }
            let Some((t, c)) = best else { break };
            let through: u32 =
                self.nodes[node].children.iter().map(|&(_, c)| self.nodes[c as usize].count).sum();
            let weak = !key(t, c).0 && 2 * self.nodes[c as usize].count < through;
            if weak && !out.is_empty() {
                break;
            }
            out.push(t);
            node = c as usize;
        }
        out
    }

    /// The continuation after the longest suffix of `tokens` (at most `max_suffix` long) that is a
    /// path from the root and has a continuation: (suffix length, up to `max` tokens).
    pub fn complete_suffix(
        &self,
        tokens: &[u32],
        max_suffix: usize,
        max: usize,
        focus: &[u32],
    ) -> Option<(usize, Vec<u32>)> {
        for s in (1..=max_suffix.min(tokens.len())).rev() {
            if let Some(node) = self.walk(&tokens[tokens.len() - s..]) {
                let cont = self.continuation(node, max, focus);
                if !cont.is_empty() {
                    return Some((s, cont));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_and_follows_the_most_travelled_branch() {
        let mut t = TokenTrie::new();
        assert!(t.is_empty());
        t.insert(&[1, 2, 3, 4]);
        t.insert(&[1, 2, 5]);
        t.insert(&[1, 2, 5, 6]);
        t.insert(&[7, 8]);
        assert!(!t.is_empty());
        assert_eq!(t.len(), 1 + 4 + 2 + 2);
        let n = t.walk(&[1, 2]).unwrap();
        assert_eq!(
            t.continuation(n, 10, &[]),
            vec![5, 6],
            "two sequences go through 5, one through 3"
        );
        assert_eq!(t.continuation(n, 1, &[]), vec![5]);
        assert_eq!(
            t.continuation(n, 10, &[3, 11]),
            vec![3, 4],
            "a focus token beats travel counts"
        );
        // From the root: 1 carries 3 of 4 sequences; then 2 (all), then 5 (2 of 3).
        assert_eq!(t.continuation(0, 10, &[]), vec![1, 2, 5, 6]);
        t.insert(&[1, 2, 9]);
        t.insert(&[1, 2, 10]);
        // Now 5 carries 2 of 5 sequences below 2: a weak guess, the draft stops before it.
        assert_eq!(t.continuation(0, 10, &[]), vec![1, 2]);
        assert_eq!(
            t.continuation(t.walk(&[1, 2]).unwrap(), 10, &[]),
            vec![5, 6],
            "the first token is always proposed"
        );
        assert_eq!(t.walk(&[2]), None);
        assert_eq!(t.continuation(t.walk(&[1, 2, 3, 4]).unwrap(), 5, &[]), Vec::<u32>::new());
    }

    #[test]
    fn ties_go_to_the_first_inserted() {
        let mut t = TokenTrie::new();
        t.insert(&[1, 9]);
        t.insert(&[1, 8]);
        assert_eq!(t.continuation(t.walk(&[1]).unwrap(), 3, &[]), vec![9]);
    }

    #[test]
    fn longest_matching_suffix_wins() {
        let mut t = TokenTrie::new();
        t.insert(&[10, 11, 12]); // "FROM users ;"
        t.insert(&[11, 13]); // "users WHERE"
                             // ... 10 11 -> the suffix [10, 11] matches and continues with 12.
        assert_eq!(t.complete_suffix(&[5, 6, 10, 11], 4, 4, &[]), Some((2, vec![12])));
        // Only [11] matches.
        assert_eq!(t.complete_suffix(&[5, 11], 4, 4, &[]), Some((1, vec![13])));
        // A leaf match has no continuation: shorter suffixes are tried, then none.
        assert_eq!(t.complete_suffix(&[10, 11, 12], 4, 4, &[]), None);
        assert_eq!(t.complete_suffix(&[], 4, 4, &[]), None);
        // The suffix length is bounded.
        assert_eq!(t.complete_suffix(&[5, 6, 10, 11], 1, 4, &[]), Some((1, vec![13])));
    }
}
