//! Several candidate answers, and the choice among them.
//!
//! The first answer is greedy. Its alternatives branch off it at the positions where the model
//! was least sure (the smallest gap between its first and second choice): the greedy tokens up
//! to that position, the second choice there, then greedy again. Each branch costs a prefill of
//! its prefix (one batched pass) and the decode of its tail. Sampled answers
//! (`stages/samples.rs`, `turboinfer.samples`) are further candidates, decoded together. Candidates
//! that validation rejects are dropped; among the rest the choice is, in this order:
//! 1. when the caller executes candidates (read-only, `turboinfer.candidate_execution`): the
//!    largest group of candidates whose results agree, the greedy line's group on a tie;
//! 2. otherwise the greedy line's answer when it is valid (it is the model's first choice at
//!    every token), else the valid branch with the highest mean log-probability per token.

use crate::kernels::math;
use crate::platform::runtime::Runtime;
use crate::tokenizer::Tokenizer;
use rayon::prelude::*;

/// Logits further than this below the maximum are left out of the log-sum-exp (see [`score`]).
const LSE_SPAN: f32 = 40.0;

/// How sure the model was of one generated token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenScore {
    /// log p of the chosen token.
    pub logprob: f32,
    /// The best other token and its log p.
    pub alt: u32,
    pub alt_logprob: f32,
}

/// The score of choosing token `j` from logits `row` (`[vocab]`). `None` for a row of fewer
/// than 2 entries.
pub fn score(row: &[f32], j: usize) -> Option<TokenScore> {
    if row.len() < 2 || j >= row.len() {
        return None;
    }
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    // log-sum-exp in f64 (150k terms summed in f32 lose the small ones), over the logits within
    // LSE_SPAN of the maximum: the rest add less than 150k * e^-40 (1e-12) to a sum of at least
    // 1, and skipping their exp keeps this to one cheap pass per token.
    let floor = max - LSE_SPAN;
    let sum: f64 =
        row.iter().filter(|&&v| v > floor).map(|&v| math::exp_f64((v - max) as f64)).sum();
    let lse = max as f64 + math::ln_f64(sum);
    Some(with_lse(row, j, lse))
}

/// [`score`] with the exponentials of the log-sum-exp computed on `rt`'s threads, in vector lanes
/// ([`math::exp_f64_in_place`]): bitwise the same score (the same values, summed in the same
/// order on this thread), in a fraction of the time. Decoding scores every token while the
/// pool's threads wait, and the 150k exponentials of a row were ~5 % of a decode's time.
pub fn score_on(rt: &Runtime, row: &[f32], j: usize) -> Option<TokenScore> {
    if row.len() < 2 || j >= row.len() {
        return None;
    }
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max - LSE_SPAN;
    // [≤ vocab] the kept logits less the maximum, in row order, then their exponentials.
    let mut terms: Vec<f64> =
        row.iter().filter(|&&v| v > floor).map(|&v| (v - max) as f64).collect();
    // Chunks large enough that waking a thread pays (a row is ~150k terms).
    const CHUNK: usize = 16 * 1024;
    rt.install(|| terms.par_chunks_mut(CHUNK).for_each(math::exp_f64_in_place));
    let sum: f64 = terms.iter().sum();
    let lse = max as f64 + math::ln_f64(sum);
    Some(with_lse(row, j, lse))
}

/// The score of token `j` of `row` given the row's log-sum-exp `lse`.
fn with_lse(row: &[f32], j: usize, lse: f64) -> TokenScore {
    let mut alt = if j == 0 { 1 } else { 0 };
    for (i, &v) in row.iter().enumerate() {
        if i != j && v > row[alt] {
            alt = i;
        }
    }
    TokenScore {
        logprob: (row[j] as f64 - lse) as f32,
        alt: alt as u32,
        alt_logprob: (row[alt] as f64 - lse) as f32,
    }
}

/// Mean log-probability per token of `scores` (a length-fair likelihood: a total favours short
/// answers); `-inf` when empty.
pub fn mean_logprob(scores: &[TokenScore]) -> f32 {
    if scores.is_empty() {
        f32::NEG_INFINITY
    } else {
        scores.iter().map(|s| s.logprob).sum::<f32>() / scores.len() as f32
    }
}

/// Where to branch off a greedy answer of tokens `ids` with `scores` (one per token): up to `n`
/// positions, the least sure first (smallest gap between the chosen token's and the
/// alternative's log p). A position qualifies when its alternative changes the words, not only
/// their spacing or case (`Count` for `COUNT`, a newline for a space: the same SQL again), and
/// is no end-of-generation token. `None` when the scores do not line up with the tokens (a
/// constrained decode that backed out re-chose positions).
pub fn branch_points(
    tok: &Tokenizer,
    ids: &[u32],
    scores: &[TokenScore],
    n: usize,
) -> Option<Vec<usize>> {
    if scores.len() != ids.len() {
        return None;
    }
    let mut order: Vec<(f32, usize)> = scores
        .iter()
        .enumerate()
        .filter(|&(p, s)| !tok.is_eog(s.alt) && differs(tok, ids[p], s.alt))
        .map(|(p, s)| (s.logprob - s.alt_logprob, p))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Some(order.into_iter().take(n).map(|(_, p)| p).collect())
}

/// True when tokens `a` and `b` differ in more than whitespace and letter case.
fn differs(tok: &Tokenizer, a: u32, b: u32) -> bool {
    let norm = |id: u32| -> String {
        String::from_utf8_lossy(&tok.token_to_piece(id))
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect()
    };
    norm(a) != norm(b)
}

/// One candidate answer as the chooser sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The statement (no `;`).
    pub sql: String,
    /// `None` for the greedy line (the first answer and its repairs) and for samples; the
    /// position it branched off otherwise.
    pub branch: Option<usize>,
    /// For a sampled answer (`stages/samples.rs`), its index (its generator's seed).
    pub sample: Option<usize>,
    /// Mean log p per token of its decode.
    pub mean_logprob: f32,
    /// The validator's message when it was rejected.
    pub error: Option<String>,
    /// Valid, but doubted (`doubt.rs`): chosen only when no undoubted candidate is valid.
    pub doubted: bool,
    /// A digest of its rows when it was executed (`None`: not executed, or it failed).
    pub digest: Option<u64>,
}

/// The candidates a call weighed and the one it chose.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidateChoice {
    /// The candidates weighed when branches were decoded (the greedy line first), else empty.
    pub weighed: Vec<Candidate>,
    /// The index in `weighed` of the answer returned, when one was chosen.
    pub chosen: Option<usize>,
}

/// The index of the chosen candidate (see the module comment), `None` when none is valid.
pub fn choose(cands: &[Candidate]) -> Option<usize> {
    let valid: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].error.is_none()).collect();
    let undoubted: Vec<usize> = valid.iter().copied().filter(|&i| !cands[i].doubted).collect();
    let valid = if undoubted.is_empty() { valid } else { undoubted };
    let greedy = |i: usize| cands[i].branch.is_none() && cands[i].sample.is_none();
    let better = |a: usize, b: usize| -> bool {
        // a before b: the greedy line first, then the more likely.
        (greedy(a) && !greedy(b))
            || (greedy(a) == greedy(b) && cands[a].mean_logprob > cands[b].mean_logprob)
    };
    let best_of = |set: &[usize]| -> Option<usize> {
        set.iter().copied().reduce(|a, b| if better(b, a) { b } else { a })
    };
    let executed: Vec<usize> =
        valid.iter().copied().filter(|&i| cands[i].digest.is_some()).collect();
    if !executed.is_empty() {
        // Groups by result; the largest wins, the one holding the better member on a tie.
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for &i in &executed {
            match groups.iter_mut().find(|g| cands[g[0]].digest == cands[i].digest) {
                Some(g) => g.push(i),
                None => groups.push(vec![i]),
            }
        }
        let lead = |g: &Vec<usize>| best_of(g).expect("groups are not empty");
        let best = groups
            .iter()
            .reduce(|a, b| {
                if b.len() > a.len() || (b.len() == a.len() && better(lead(b), lead(a))) {
                    b
                } else {
                    a
                }
            })
            .expect("at least one group");
        return Some(lead(best));
    }
    best_of(&valid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(branch: Option<usize>, lp: f32, ok: bool, digest: Option<u64>) -> Candidate {
        Candidate {
            sql: String::new(),
            branch,
            sample: None,
            mean_logprob: lp,
            error: (!ok).then(|| "rejected".to_string()),
            doubted: false,
            digest,
        }
    }

    #[test]
    fn doubted_candidates_only_when_nothing_else_is_valid() {
        let doubted = |mut c: Candidate| {
            c.doubted = true;
            c
        };
        // The greedy line doubted, a less likely branch not: the branch.
        let cands = vec![doubted(cand(None, -0.1, true, None)), cand(Some(3), -0.5, true, None)];
        assert_eq!(choose(&cands), Some(1));
        // Every valid one doubted: the usual order among them; an invalid one never.
        let cands = vec![doubted(cand(None, -0.1, true, None)), cand(Some(3), -0.05, false, None)];
        assert_eq!(choose(&cands), Some(0));
    }

    #[test]
    fn score_on_threads_is_bitwise_score() {
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        // Rows shaped like a vocabulary's logits: a wide spread, a peak, ties, values beyond
        // the span; a deterministic generator.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for (n, spread) in [(151_936, 30.0), (50_000, 80.0), (17, 3.0), (2, 1.0)] {
            let mut row: Vec<f32> = (0..n).map(|_| ((next() - 0.5) * spread) as f32).collect();
            row[n / 3] = 25.0;
            row[n / 2] = 25.0;
            for j in [0, 1, n / 3, n / 2, n - 1] {
                assert_eq!(score_on(&rt, &row, j), score(&row, j), "n {n} j {j}");
                let (a, b) = (score_on(&rt, &row, j).unwrap(), score(&row, j).unwrap());
                assert_eq!(a.logprob.to_bits(), b.logprob.to_bits());
                assert_eq!(a.alt_logprob.to_bits(), b.alt_logprob.to_bits());
            }
        }
        assert_eq!(score_on(&rt, &[1.0], 0), None);
    }

    #[test]
    fn scores_are_log_softmax() {
        let row = [0.0f32, (2.0f32).ln(), f32::NEG_INFINITY, 0.0];
        let s = score(&row, 1).unwrap();
        // p = 2/4 for index 1, 1/4 for 0 and 3.
        assert!((s.logprob - 0.5f32.ln()).abs() < 1e-6);
        assert_eq!(s.alt, 0, "the first of equal alternatives");
        assert!((s.alt_logprob - 0.25f32.ln()).abs() < 1e-6);
        assert!(score(&[1.0], 0).is_none());
        assert!(score(&row, 4).is_none());
    }

    #[test]
    fn without_execution_the_valid_greedy_line_wins() {
        let c = [cand(None, -0.5, true, None), cand(Some(3), -0.1, true, None)];
        assert_eq!(choose(&c), Some(0));
        let c = [
            cand(None, -0.1, false, None),
            cand(Some(3), -0.9, true, None),
            cand(Some(5), -0.4, true, None),
        ];
        assert_eq!(choose(&c), Some(2), "the most likely valid branch");
        let c = [cand(None, -0.1, false, None), cand(Some(3), -0.9, false, None)];
        assert_eq!(choose(&c), None);
    }

    #[test]
    fn with_execution_agreement_wins() {
        let c = [
            cand(None, -0.1, true, Some(1)),
            cand(Some(2), -0.5, true, Some(2)),
            cand(Some(4), -0.6, true, Some(2)),
        ];
        assert_eq!(choose(&c), Some(1), "two agreeing branches outvote the greedy line");
        let c = [cand(None, -0.9, true, Some(1)), cand(Some(2), -0.1, true, Some(2))];
        assert_eq!(choose(&c), Some(0), "a tie goes to the greedy line");
        let c = [
            cand(None, -0.9, false, Some(1)),
            cand(Some(2), -0.3, true, None),
            cand(Some(4), -0.6, true, Some(7)),
        ];
        assert_eq!(choose(&c), Some(2), "only executed valid candidates vote");
    }
}
