//! Rotary position embedding (RoPE) in ggml's two layouts.

/// How the rotated pairs are laid out inside a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeMode {
    /// ggml "normal" mode: adjacent pairs `(x[2i], x[2i+1])`. Used for `llama` GGUFs, whose
    /// converter permuted the Q/K rows so that the HF half-split becomes adjacent pairs.
    Normal,
    /// GPT-NeoX mode: pairs `(x[i], x[i + n_rot/2])` (qwen2, qwen3).
    Neox,
}

/// Cosines and sines for a run of positions: `[n_pos, n_rot/2]` each.
#[derive(Debug, Clone)]
pub struct RopeTable {
    n_rot: usize,
    cos: Vec<f32>, // [n_pos, n_rot/2]
    sin: Vec<f32>, // [n_pos, n_rot/2]
}

impl RopeTable {
    /// Angles `pos * base^(-2i/n_rot)` for `i < n_rot/2` and every position in `positions`.
    ///
    /// Like ggml's rope cache, the frequency is advanced by repeated f32 multiplication by
    /// `base^(-2/n_rot)`, so our angles round the same way as llama.cpp's.
    pub fn new(positions: impl IntoIterator<Item = usize>, n_rot: usize, base: f32) -> RopeTable {
        assert!(n_rot.is_multiple_of(2) && n_rot > 0, "n_rot must be even and positive");
        let half = n_rot / 2;
        let theta_scale = crate::kernels::math::powf(base, -2.0 / n_rot as f32);
        let mut cos = Vec::new();
        let mut sin = Vec::new();
        for p in positions {
            let mut theta = p as f32;
            for _ in 0..half {
                let (s, c) = crate::kernels::math::sin_cos(theta);
                cos.push(c);
                sin.push(s);
                theta *= theta_scale;
            }
        }
        RopeTable { n_rot, cos, sin }
    }

    /// Number of positions in the table.
    pub fn n_pos(&self) -> usize {
        self.cos.len() / (self.n_rot / 2)
    }

    /// Rotates every head in `x` (`[n_heads, head_dim]`, `head_dim >= n_rot`) for table row `i`.
    /// Dimensions at and above `n_rot` are left unchanged (partial rotary, as in ggml).
    pub fn apply(&self, i: usize, x: &mut [f32], head_dim: usize, mode: RopeMode) {
        assert!(head_dim >= self.n_rot && x.len().is_multiple_of(head_dim), "rope shape mismatch");
        let half = self.n_rot / 2;
        let cos = &self.cos[i * half..(i + 1) * half];
        let sin = &self.sin[i * half..(i + 1) * half];
        for head in x.chunks_exact_mut(head_dim) {
            for k in 0..half {
                let (a, b) = match mode {
                    RopeMode::Normal => (2 * k, 2 * k + 1),
                    RopeMode::Neox => (k, k + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * cos[k] - x1 * sin[k];
                head[b] = x0 * sin[k] + x1 * cos[k];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct formula with f64 angles, for comparison.
    fn naive(x: &[f32], pos: usize, base: f64, mode: RopeMode) -> Vec<f32> {
        let d = x.len();
        let half = d / 2;
        let mut out = x.to_vec();
        for k in 0..half {
            let theta = pos as f64 * base.powf(-2.0 * k as f64 / d as f64);
            let (a, b) = if mode == RopeMode::Normal { (2 * k, 2 * k + 1) } else { (k, k + half) };
            let (x0, x1) = (x[a] as f64, x[b] as f64);
            out[a] = (x0 * theta.cos() - x1 * theta.sin()) as f32;
            out[b] = (x0 * theta.sin() + x1 * theta.cos()) as f32;
        }
        out
    }

    #[test]
    fn both_modes_match_formula() {
        let x: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
        for mode in [RopeMode::Normal, RopeMode::Neox] {
            for pos in [0usize, 1, 7, 100] {
                let t = RopeTable::new([pos], 16, 10000.0);
                let mut y = x.clone();
                t.apply(0, &mut y, 16, mode);
                let want = naive(&x, pos, 10000.0, mode);
                for i in 0..16 {
                    assert!(
                        (y[i] - want[i]).abs() < 1e-4,
                        "{mode:?} pos {pos} dim {i}: {} vs {}",
                        y[i],
                        want[i]
                    );
                }
            }
        }
    }

    #[test]
    fn position_zero_is_identity_and_norm_is_preserved() {
        let x: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
        let t = RopeTable::new([0, 5], 8, 1e6);
        let mut y = x.clone();
        t.apply(0, &mut y, 8, RopeMode::Neox);
        assert_eq!(x, y);
        t.apply(1, &mut y, 8, RopeMode::Neox);
        let n0: f32 = x.iter().map(|v| v * v).sum();
        let n1: f32 = y.iter().map(|v| v * v).sum();
        assert!((n0 - n1).abs() < 1e-3);
        assert_ne!(x, y);
    }

    #[test]
    fn partial_rotary_leaves_tail() {
        let x: Vec<f32> = (0..8).map(|i| i as f32 + 1.0).collect();
        let t = RopeTable::new([3], 4, 10000.0);
        let mut y = x.clone();
        t.apply(0, &mut y, 8, RopeMode::Normal);
        assert_eq!(&y[4..], &x[4..]);
        assert_ne!(&y[..4], &x[..4]);
    }
}
