//! Sparse SwiGLU execution for one layer and one token: predictor → active neurons → gate/up over the
//! active rows only → down over the active neurons only (neuron-major Q8_0 rows from the sidecar).

use super::sidecar::{LayerView, Sidecar};
use super::simd;
use super::stats::{LayerReport, LayerStats};
use super::SparseError;
use crate::gguf::GgufFile;
use crate::model::LayerWeights;
use crate::ops::{self, SharedActs};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// Active neurons per parallel gate/up task: 64 rows of a 896-wide Q5_0 matrix are ~40 KB of
/// weights, a few µs of work, large next to rayon's ~1 µs per-task cost.
const ROWS_PER_TASK: usize = 64;
/// Active neurons per parallel down task (each task owns a `dim`-float accumulator, summed in a
/// fixed order afterwards so results do not depend on scheduling).
const DOWN_PER_TASK: usize = 256;

/// Tunables of the sparse path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SparseConfig {
    /// A token whose predicted active fraction exceeds this runs the dense FFN (the sparse gather
    /// stops paying off near full activity).
    pub fallback_ratio: f32,
    /// At or above this active fraction the down projection uses the original matrix over the
    /// activations with inactive neurons zeroed (exactly the dense arithmetic when all are active);
    /// below it, the sidecar's neuron-major rows of only the active neurons.
    pub dense_down_ratio: f32,
    /// Also sparsify multi-token batches (prefill, scoring), token by token. Off: batches are dense
    /// (their union of active neurons is close to all of them, and the dense batch kernels are faster).
    pub batches: bool,
    /// Also compute every neuron to measure the predictor's recall (slow; reports only).
    pub audit: bool,
}

impl Default for SparseConfig {
    /// Decode-only sparsity with measured-reasonable switch points.
    fn default() -> Self {
        // 0.9: above ~90% active the gather overhead exceeds the ~10% saved; 0.75: neuron-major
        // Q8_0 rows (1.06 B/weight) read more bytes than the dense Q4_K/Q6_K/Q5_0 down matrix
        // (0.56-0.82 B/weight) once more than ~3/4 of the neurons are active.
        SparseConfig { fallback_ratio: 0.9, dense_down_ratio: 0.75, batches: false, audit: false }
    }
}

/// A sparse FFN bound to a sidecar and one sparsity level.
#[derive(Debug)]
pub struct SparseFfn {
    sidecar: Arc<Sidecar>,
    /// Index into the sidecar's levels, or `None` for "every neuron active" (sparsity 0).
    level: Option<usize>,
    pub config: SparseConfig,
    stats: Vec<LayerStats>,
}

impl SparseFfn {
    /// Binds `sidecar` at the calibrated level nearest to `target` (0 = all neurons active).
    pub fn new(sidecar: Arc<Sidecar>, target: f32, config: SparseConfig) -> Result<SparseFfn, SparseError> {
        if !(0.0..1.0).contains(&target) {
            return Err(SparseError::BadTarget(target));
        }
        let level = if target == 0.0 {
            None
        } else {
            let lv = &sidecar.spec().levels;
            let best = (0..lv.len()).min_by(|&a, &b| (lv[a] - target).abs().total_cmp(&(lv[b] - target).abs()));
            best
        };
        let stats = (0..sidecar.spec().n_layers).map(|_| LayerStats::default()).collect();
        Ok(SparseFfn { sidecar, level, config, stats })
    }

    /// The target sparsity in effect (0 for all-active).
    pub fn target(&self) -> f32 {
        self.level.map_or(0.0, |i| self.sidecar.spec().levels[i])
    }

    /// The sidecar.
    pub fn sidecar(&self) -> &Arc<Sidecar> {
        &self.sidecar
    }

    /// Per-layer report of the counters so far.
    pub fn report(&self) -> Vec<LayerReport> {
        let f = self.sidecar.spec().ffn_dim;
        self.stats.iter().map(|s| s.report(f)).collect()
    }

    /// Zeroes the counters.
    pub fn reset_stats(&self) {
        self.stats.iter().for_each(LayerStats::reset);
    }

    /// Runs layer `l`'s FFN on `h` (`[n, dim]`, the normed FFN input) into `out` (`[n, dim]`).
    /// Returns false (and writes nothing) when the caller should run the dense path instead.
    pub fn forward(&self, l: usize, file: &GgufFile, lw: &LayerWeights, h: &[f32], out: &mut [f32]) -> Result<bool, SparseError> {
        let dim = self.sidecar.spec().dim;
        let n = h.len() / dim;
        if n > 1 && !self.config.batches {
            return Ok(false);
        }
        for (ht, ot) in h.chunks_exact(dim).zip(out.chunks_exact_mut(dim)) {
            self.token(l, file, lw, ht, ot)?;
        }
        Ok(true)
    }

    /// The active neurons (positions in the sidecar's order) for input `h` (`[dim]`).
    fn predict(&self, v: &LayerView<'_>, h: &[f32]) -> Vec<u32> {
        let f = v.order.len();
        let Some(level) = self.level else { return (0..f as u32).collect() };
        let r = v.p.len() / h.len();
        let mut z = vec![0.0f32; r]; // [rank]
        for (i, &hi) in h.iter().enumerate() {
            simd::axpy(&mut z, hi, &v.p[i * r..(i + 1) * r]);
        }
        let mut s = v.bias[v.n_hot..].to_vec(); // [ffn_dim - n_hot] scores of the cold neurons
        for (k, &zk) in z.iter().enumerate() {
            simd::axpy(&mut s, zk, &v.q[k * f + v.n_hot..(k + 1) * f]);
        }
        let cut = v.cutoff[level];
        let mut active: Vec<u32> = (0..v.n_hot as u32).collect();
        active.extend(s.iter().enumerate().filter(|(_, &x)| x > cut).map(|(j, _)| (j + v.n_hot) as u32));
        active
    }

    /// One token through layer `l`.
    fn token(&self, l: usize, file: &GgufFile, lw: &LayerWeights, h: &[f32], out: &mut [f32]) -> Result<(), SparseError> {
        let t0 = Instant::now();
        let v = self.sidecar.layer(l);
        let f = v.order.len();
        let active = self.predict(&v, h);
        let mut acts = SharedActs::new(h, h.len());
        if active.len() as f32 > self.config.fallback_ratio * f as f32 {
            let mut a = vec![0.0f32; f]; // [ffn_dim] original neuron order
            let mut u = vec![0.0f32; f]; // [ffn_dim]
            dense_mul(file, &lw.w_gate, &mut acts, &mut a)?;
            dense_mul(file, &lw.w_up, &mut acts, &mut u)?;
            ops::swiglu(&mut a, &u);
            dense_mul(file, &lw.w_down, &mut SharedActs::new(&a, f), out)?;
            self.stats[l].add(f, true, t0.elapsed().as_nanos() as u64);
            self.audit(l, &v, &a, |_| true);
            return Ok(());
        }
        // Gate and up over the active rows only.
        let (ag, agb) = acts.get(lw.w_gate.act_ty)?;
        let ag = ag.to_vec();
        let (au, _) = acts.get(lw.w_up.act_ty)?;
        debug_assert_eq!(ag.len(), agb);
        let (gk, uk) = (lw.w_gate.rows(file).kernels.vec_dot, lw.w_up.rows(file).kernels.vec_dot);
        let cols = lw.w_gate.cols;
        let mut a = vec![0.0f32; active.len()]; // [n_active] in `active` order
        a.par_chunks_mut(ROWS_PER_TASK).zip(active.par_chunks(ROWS_PER_TASK)).for_each(|(ao, js)| {
            for (y, &j) in ao.iter_mut().zip(js) {
                let r = v.order[j as usize] as usize;
                let g = gk(cols, lw.w_gate.row_bytes_of(file, r), &ag);
                let u = uk(cols, lw.w_up.row_bytes_of(file, r), au);
                *y = ops::silu(g) * u;
            }
        });
        // Down over the active neurons only.
        if active.len() as f32 >= self.config.dense_down_ratio * f as f32 {
            let mut full = vec![0.0f32; f]; // [ffn_dim] original order, inactive neurons zero
            for (&j, &y) in active.iter().zip(&a) {
                full[v.order[j as usize] as usize] = y;
            }
            dense_mul(file, &lw.w_down, &mut SharedActs::new(&full, f), out)?;
        } else {
            let rb = v.down_row_bytes;
            let parts: Vec<Vec<f32>> = a
                .par_chunks(DOWN_PER_TASK)
                .zip(active.par_chunks(DOWN_PER_TASK))
                .map(|(ys, js)| {
                    let mut acc = vec![0.0f32; out.len()]; // [dim]
                    for (&y, &j) in ys.iter().zip(js) {
                        let j = j as usize;
                        simd::axpy_q8_0(&mut acc, y, &v.down[j * rb..(j + 1) * rb]);
                    }
                    acc
                })
                .collect();
            out.fill(0.0);
            for p in &parts {
                simd::axpy(out, 1.0, p);
            }
        }
        self.stats[l].add(active.len(), false, t0.elapsed().as_nanos() as u64);
        if self.config.audit {
            let mut pred = vec![false; f]; // by original neuron index
            for &j in &active {
                pred[v.order[j as usize] as usize] = true;
            }
            let mut acts = SharedActs::new(h, h.len());
            let mut g = vec![0.0f32; f]; // [ffn_dim]
            let mut u = vec![0.0f32; f]; // [ffn_dim]
            dense_mul(file, &lw.w_gate, &mut acts, &mut g)?;
            dense_mul(file, &lw.w_up, &mut acts, &mut u)?;
            ops::swiglu(&mut g, &u);
            self.audit(l, &v, &g, |i| pred[i]);
        }
        Ok(())
    }

    /// Counts truly active neurons of the dense activations `a` (`[ffn_dim]`, original order) and
    /// how many of them `predicted` (by original index) covered.
    fn audit(&self, l: usize, v: &LayerView<'_>, a: &[f32], predicted: impl Fn(usize) -> bool) {
        if !self.config.audit {
            return;
        }
        let thr = self.level.map_or(0.0, |i| v.thr[i]);
        let (mut t, mut hit) = (0, 0);
        for (i, &x) in a.iter().enumerate() {
            if x.abs() > thr {
                t += 1;
                hit += predicted(i) as usize;
            }
        }
        self.stats[l].add_audit(t, hit);
    }
}

/// `out = acts · mᵀ` for one token through the dense kernels (the same arithmetic as the dense path).
fn dense_mul(file: &GgufFile, m: &crate::model::Matrix, acts: &mut SharedActs<'_>, out: &mut [f32]) -> Result<(), SparseError> {
    let (a, rb) = acts.get(m.act_ty)?;
    ops::matmul(m.rows(file), a, rb, 1, out);
    Ok(())
}
