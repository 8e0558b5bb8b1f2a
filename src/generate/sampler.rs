//! Token samplers: greedy, temperature, top-k, top-p and repetition penalty, with llama.cpp's
//! semantics and order (penalties → top-k → top-p → temperature → random draw).

/// Sampling settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// `<= 0` means greedy (argmax after penalties), as in llama.cpp.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 disables.
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability mass reaches `top_p`; `>= 1` disables.
    pub top_p: f32,
    /// Repetition penalty (1.0 disables): a recent token's logit is divided by it when positive,
    /// multiplied by it when negative (llama.cpp `penalty_repeat`, applied once per distinct token).
    pub repeat_penalty: f32,
    /// How many of the most recent tokens the penalty looks at (llama.cpp `penalty_last_n`).
    pub repeat_last_n: usize,
    /// Seed of the random generator (only used when `temperature > 0`).
    pub seed: u64,
}

/// llama.cpp's default `penalty_last_n`.
const DEFAULT_REPEAT_LAST_N: usize = 64;
/// llama.cpp's default `top_k`.
const DEFAULT_TOP_K: usize = 40;
/// llama.cpp's default `top_p`.
const DEFAULT_TOP_P: f32 = 0.95;

impl Default for SamplerConfig {
    /// Greedy decoding with no penalty; top-k/top-p at llama.cpp's defaults for when temperature is set.
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.0,
            top_k: DEFAULT_TOP_K,
            top_p: DEFAULT_TOP_P,
            repeat_penalty: 1.0,
            repeat_last_n: DEFAULT_REPEAT_LAST_N,
            seed: 0x5EED,
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed 64-bit PRNG; enough for sampling and
/// fully determined by its seed.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        // Constants from the SplitMix64 reference implementation (golden-ratio increment and
        // the two multipliers of the finaliser).
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A stateful sampler (holds the RNG and scratch buffers).
#[derive(Debug, Clone)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: SplitMix64,
    logits: Vec<f32>,      // [vocab] penalised copy
    cand: Vec<(u32, f32)>, // [n_candidates] (id, logit), then (id, prob)
}

impl Sampler {
    /// A sampler with settings `cfg`, its RNG seeded from `cfg.seed`.
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let rng = SplitMix64::new(cfg.seed);
        Sampler { cfg, rng, logits: Vec::new(), cand: Vec::new() }
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Whether this sampler is deterministic argmax.
    pub fn is_greedy(&self) -> bool {
        self.cfg.temperature <= 0.0
    }

    /// Picks the next token from `logits` (`[vocab]`); `recent` is the token history (prompt +
    /// generated), of which the last `repeat_last_n` are penalised.
    pub fn sample(&mut self, logits: &[f32], recent: &[u32]) -> u32 {
        assert!(!logits.is_empty(), "sample from empty logits");
        self.logits.clear();
        self.logits.extend_from_slice(logits);
        self.apply_penalty(recent);
        if self.is_greedy() {
            return argmax(&self.logits);
        }
        let c = &self.cfg;
        self.cand.clear();
        self.cand.extend(self.logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        let desc = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        // top-k: partial selection, then sort only the survivors.
        if c.top_k > 0 && c.top_k < self.cand.len() {
            self.cand.select_nth_unstable_by(c.top_k - 1, desc);
            self.cand.truncate(c.top_k);
        }
        self.cand.sort_unstable_by(desc);
        // top-p over the (untempered) softmax of the survivors, as llama.cpp's chain does.
        if c.top_p < 1.0 {
            let probs = softmax_of(&self.cand);
            let mut cum = 0.0f64;
            let mut keep = self.cand.len();
            for (i, p) in probs.iter().enumerate() {
                cum += p;
                if cum >= c.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            self.cand.truncate(keep.max(1));
        }
        // temperature, then draw.
        let t = c.temperature;
        for e in self.cand.iter_mut() {
            e.1 /= t;
        }
        let probs = softmax_of(&self.cand);
        let u = self.rng.next_f64();
        let mut cum = 0.0f64;
        for (e, p) in self.cand.iter().zip(&probs) {
            cum += p;
            if u < cum {
                return e.0;
            }
        }
        self.cand.last().expect("at least one candidate").0
    }

    /// Applies the repetition penalty to the penalised copy of the logits.
    fn apply_penalty(&mut self, recent: &[u32]) {
        let p = self.cfg.repeat_penalty;
        if p == 1.0 || self.cfg.repeat_last_n == 0 {
            return;
        }
        let start = recent.len().saturating_sub(self.cfg.repeat_last_n);
        let window = &recent[start..];
        let mut seen: Vec<u32> = Vec::with_capacity(window.len());
        for &id in window {
            if (id as usize) >= self.logits.len() || seen.contains(&id) {
                continue;
            }
            seen.push(id);
            let l = &mut self.logits[id as usize];
            *l = if *l > 0.0 { *l / p } else { *l * p };
        }
    }
}

/// Index of the largest value (the lowest index among equals).
pub fn argmax(x: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// Softmax (f64) of the candidates' values, in candidate order.
fn softmax_of(c: &[(u32, f32)]) -> Vec<f64> {
    let max = c.iter().map(|e| e.1).fold(f32::NEG_INFINITY, f32::max) as f64;
    let mut p: Vec<f64> =
        c.iter().map(|e| crate::kernels::math::exp_f64(e.1 as f64 - max)).collect();
    let s: f64 = p.iter().sum();
    for v in p.iter_mut() {
        *v /= s;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small logit vector with a tie between ids 1 and 5.
    fn logits() -> Vec<f32> {
        vec![1.0, 3.0, -2.0, 2.5, 0.0, 3.0, -1.0, 2.9]
    }

    #[test]
    fn greedy_is_argmax_first_of_ties() {
        let mut s = Sampler::new(SamplerConfig::default());
        assert_eq!(s.sample(&logits(), &[]), 1); // ids 1 and 5 tie at 3.0: lowest wins
        assert_eq!(argmax(&[0.0, -1.0, 5.0, 4.0]), 2);
    }

    #[test]
    fn top_k_one_equals_greedy_at_any_temperature() {
        let mut s = Sampler::new(SamplerConfig {
            temperature: 5.0,
            top_k: 1,
            seed: 7,
            ..Default::default()
        });
        let mut rng = SplitMix64::new(99);
        for _ in 0..50 {
            let l: Vec<f32> = (0..100).map(|_| rng.next_f64() as f32 * 10.0).collect();
            assert_eq!(s.sample(&l, &[]), argmax(&l));
        }
    }

    #[test]
    fn seeded_sampling_is_deterministic_and_varies() {
        let cfg = SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 42,
            ..Default::default()
        };
        let l = vec![0.0f32; 50]; // uniform: every draw is a fresh random token
        let run = |cfg: SamplerConfig| {
            let mut s = Sampler::new(cfg);
            (0..40).map(|_| s.sample(&l, &[])).collect::<Vec<u32>>()
        };
        let a = run(cfg.clone());
        assert_eq!(a, run(cfg.clone()));
        assert_ne!(a, run(SamplerConfig { seed: 43, ..cfg }));
        let distinct: std::collections::HashSet<_> = a.iter().collect();
        assert!(distinct.len() > 10, "uniform draws should spread: {a:?}");
    }

    #[test]
    fn sampling_follows_probabilities() {
        // p = softmax([ln 3, 0]) = [0.75, 0.25]
        let l = vec![(3.0f32).ln(), 0.0];
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 1,
            ..Default::default()
        });
        let n = 20000;
        let zeros = (0..n).filter(|_| s.sample(&l, &[]) == 0).count();
        let f = zeros as f64 / n as f64;
        assert!((f - 0.75).abs() < 0.02, "{f}");
    }

    #[test]
    fn top_p_cuts_the_tail() {
        // probs ~ [0.6, 0.3, 0.1]: top_p 0.5 keeps only id 0; 0.85 keeps ids 0 and 1.
        let l: Vec<f32> = [0.6f32, 0.3, 0.1].iter().map(|p| p.ln()).collect();
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.5,
            seed: 3,
            ..Default::default()
        });
        assert!((0..200).all(|_| s.sample(&l, &[]) == 0));
        let mut s = Sampler::new(SamplerConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.85,
            seed: 3,
            ..Default::default()
        });
        let got: std::collections::HashSet<u32> = (0..500).map(|_| s.sample(&l, &[])).collect();
        assert_eq!(got, [0u32, 1].into_iter().collect());
    }

    #[test]
    fn repetition_penalty_divides_positive_and_multiplies_negative() {
        let mut s = Sampler::new(SamplerConfig { repeat_penalty: 2.0, ..Default::default() });
        // id 1 (3.0) and id 5 (3.0) lead; penalising 1 and 5 makes id 7 (2.9) the argmax.
        assert_eq!(s.sample(&logits(), &[1, 5, 1]), 7);
        assert_eq!(s.logits[1], 1.5); // 3.0 / 2, applied once although seen twice
                                      // Negative logits get more negative.
        let mut s = Sampler::new(SamplerConfig { repeat_penalty: 2.0, ..Default::default() });
        s.sample(&[-1.0, -3.0], &[0]);
        assert_eq!(s.logits[0], -2.0);
        // Only the last `repeat_last_n` tokens count.
        let mut s = Sampler::new(SamplerConfig {
            repeat_penalty: 2.0,
            repeat_last_n: 1,
            ..Default::default()
        });
        assert_eq!(s.sample(&logits(), &[1, 5]), 1);
    }
}
