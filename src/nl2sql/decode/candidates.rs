//! Several candidate answers, and the choice among them: the engine side of candidates, whose
//! PostgreSQL side (`src/pg/candidates.rs`) executes them read-only for the result digests.
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

/// Logits further than this below the maximum are left out of the log-sum-exp: they add less
/// than 150k · e^-40 (1e-12) to a sum of at least 1 (see [`log_sum_exp`]).
const LSE_SPAN: f32 = 40.0;

/// Entries of a row per part. Each part is scanned and its exponentials summed on its own, and
/// the parts' results are combined in row order, so [`score_on`] (the parts on the pool's
/// threads) and [`score`] (one after the other) give the same bits. 16k entries is long enough
/// that waking a thread pays (a vocabulary row is ~150k).
const PART: usize = 16 * 1024;

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
    score_in(None, row, j)
}

/// [`score`] with its passes over the row (the maximum and the best other token, then the
/// exponentials) on `rt`'s threads: bitwise the same score. Decoding scores every token while
/// the pool's threads wait.
pub fn score_on(rt: &Runtime, row: &[f32], j: usize) -> Option<TokenScore> {
    score_in(Some(rt), row, j)
}

/// [`score`], its parts on `rt`'s threads if any.
fn score_in(rt: Option<&Runtime>, row: &[f32], j: usize) -> Option<TokenScore> {
    if row.len() < 2 || j >= row.len() {
        return None;
    }
    let scan = Scan::combine(&parts(rt, row, |at, p| Scan::of(p, at, j)));
    let floor = scan.max - LSE_SPAN;
    let sums = parts(rt, row, |_, p| exp_sum(p, scan.max, floor));
    let lse = scan.max as f64 + math::ln_f64(sums.iter().sum());
    // A row of at least 2 entries has an entry other than j.
    let (alt, alt_v) = scan.alt.expect("a row of at least 2 entries");
    Some(TokenScore {
        logprob: (row[j] as f64 - lse) as f32,
        alt: alt as u32,
        alt_logprob: (alt_v as f64 - lse) as f32,
    })
}

/// `f(at, part)` of each [`PART`]-entry part of `row` (starting at entry `at`), in row order:
/// on `rt`'s threads, or on this one.
fn parts<T: Send>(
    rt: Option<&Runtime>,
    row: &[f32],
    f: impl Fn(usize, &[f32]) -> T + Sync,
) -> Vec<T> {
    match rt {
        Some(rt) => {
            rt.install(|| row.par_chunks(PART).enumerate().map(|(i, p)| f(i * PART, p)).collect())
        }
        None => row.chunks(PART).enumerate().map(|(i, p)| f(i * PART, p)).collect(),
    }
}

/// `ln Σ e^v` over the entries of `row` (within [`LSE_SPAN`] of the maximum), in f64; `-inf`
/// for an empty row. The log-softmax of entry `i` is `row[i] - log_sum_exp(row)`.
pub fn log_sum_exp(row: &[f32]) -> f64 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let floor = max - LSE_SPAN;
    let sum: f64 = parts(None, row, |_, p| exp_sum(p, max, floor)).iter().sum();
    max as f64 + math::ln_f64(sum)
}

/// One part of a row, scanned: its maximum and the first of its largest entries other than the
/// chosen token's (`None`: the part has no other entry).
#[derive(Debug, Clone, Copy)]
struct Scan {
    max: f32,
    alt: Option<(usize, f32)>,
}

impl Scan {
    /// The scan of `part`, which starts at entry `at` of its row, for chosen token `j`.
    fn of(part: &[f32], at: usize, j: usize) -> Scan {
        let max = part.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut alt: Option<(usize, f32)> = None;
        for (i, &v) in part.iter().enumerate() {
            if at + i != j && alt.is_none_or(|(_, best)| v > best) {
                alt = Some((at + i, v));
            }
        }
        Scan { max, alt }
    }

    /// The row's scan from its parts' (in row order): the first largest entry wins, as in one
    /// pass over the row.
    fn combine(parts: &[Scan]) -> Scan {
        let max = parts.iter().map(|s| s.max).fold(f32::NEG_INFINITY, f32::max);
        let mut alt: Option<(usize, f32)> = None;
        for p in parts {
            if let Some((i, v)) = p.alt {
                if alt.is_none_or(|(_, best)| v > best) {
                    alt = Some((i, v));
                }
            }
        }
        Scan { max, alt }
    }
}

/// `Σ e^(v - max)` over the entries `v` of `part` above `floor`, in f64: eight running sums (the
/// loop vectorizes: [`math::exp_wide`] has no branch and no division), added in lane order.
fn exp_sum(part: &[f32], max: f32, floor: f32) -> f64 {
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let mut chunks = part.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            let e = math::exp_wide(c[l] - max);
            acc[l] += if c[l] > floor { e } else { 0.0 };
        }
    }
    for (a, &v) in acc.iter_mut().zip(chunks.remainder()) {
        if v > floor {
            *a += math::exp_wide(v - max);
        }
    }
    acc.iter().sum()
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

    /// A deterministic generator of values in [0, 1) (xorshift64).
    fn uniform(mut seed: u64) -> impl FnMut() -> f64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn score_on_threads_is_bitwise_score() {
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        // Rows shaped like a vocabulary's logits: a wide spread, a peak, ties, values beyond
        // the span; a deterministic generator.
        let mut next = uniform(0x2545_f491_4f6c_dd1d);
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
    fn scores_match_an_f64_reference() {
        // The reference: the platform's f64 exp and ln of every entry less the maximum (the
        // difference in f32, as the score takes it), summed in row order. The score leaves out
        // entries 40 below the maximum and sums in lanes and parts: the same to ~1e-13, and
        // its f32 log-probabilities within one rounding step.
        let mut next = uniform(0x9e37_79b9_7f4a_7c15);
        let ulps = |a: f32, b: f32| (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs();
        for (n, spread) in [(151_936, 30.0), (40_000, 90.0), (PART + 3, 5.0), (9, 2.0)] {
            let row: Vec<f32> = (0..n).map(|_| ((next() - 0.5) * spread) as f32).collect();
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f64 = row.iter().map(|&v| ((v - max) as f64).exp()).sum();
            let lse = max as f64 + sum.ln();
            let d = (log_sum_exp(&row) - lse).abs();
            assert!(d < 1e-12, "n {n}: {d:e}");
            for j in [0, n / 2, n - 1] {
                let s = score(&row, j).unwrap();
                assert!(ulps(s.logprob, (row[j] as f64 - lse) as f32) <= 1, "n {n} j {j}");
                let alt = (0..n).filter(|&i| i != j).fold(if j == 0 { 1 } else { 0 }, |a, i| {
                    if row[i] > row[a] {
                        i
                    } else {
                        a
                    }
                });
                assert_eq!(s.alt as usize, alt, "n {n} j {j}: the first largest other entry");
                assert!(ulps(s.alt_logprob, (row[alt] as f64 - lse) as f32) <= 1);
            }
        }
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
