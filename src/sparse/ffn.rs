//! Sparse SwiGLU execution for one layer and one token: predictor → active neurons → gate/up over the
//! active rows only → down over the active neurons only (neuron-major Q8_0 rows from the sidecar).

use super::sidecar::{LayerView, Sidecar};
use super::stats::{thread_cpu_ns, LayerReport, LayerStats};
use super::SparseError;
use crate::gguf::GgufFile;
use crate::kernels::kernels;
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
/// Rows ahead to prefetch in the gathers: ~2 rows of 600-1000 bytes cover a DRAM latency (~100 ns)
/// at the ~0.1 µs a row's dot product takes.
const PREFETCH_AHEAD: usize = 2;

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
    /// Evaluation only: replace the predictor by the truth (compute every neuron densely, keep
    /// those above the level's threshold). Measures what the sparsity level itself costs in
    /// accuracy, separately from the predictor's misses; no speed-up.
    pub oracle: bool,
    /// How the active neurons are chosen.
    pub selector: Selector,
}

/// How a token's active neurons are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Selector {
    /// The sidecar's low-rank predictor (skips gate, up and down of inactive neurons).
    #[default]
    Predictor,
    /// The exact gate: compute every gate row, keep the top `(1 - target)` neurons by
    /// |silu(gate)|, and compute up and down for those only (CATS-style; skips up and down).
    Gate,
}

impl std::str::FromStr for Selector {
    type Err = String;
    /// `predictor` or `gate`.
    fn from_str(s: &str) -> Result<Selector, String> {
        match s {
            "predictor" => Ok(Selector::Predictor),
            "gate" => Ok(Selector::Gate),
            _ => Err(format!("unknown selector {s:?} (predictor|gate)")),
        }
    }
}

impl Default for SparseConfig {
    /// Decode-only sparsity with measured-reasonable switch points.
    fn default() -> Self {
        // 0.9: above ~90% active the gather overhead exceeds the ~10% saved; 0.75: neuron-major
        // Q8_0 rows (1.06 B/weight) read more bytes than the dense Q4_K/Q6_K/Q5_0 down matrix
        // (0.56-0.82 B/weight) once more than ~3/4 of the neurons are active.
        SparseConfig {
            fallback_ratio: 0.9,
            dense_down_ratio: 0.75,
            batches: false,
            audit: false,
            oracle: false,
            selector: Selector::Predictor,
        }
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
    /// Per layer: position in the sidecar order of each original neuron (inverse of `order`).
    pos_of: Vec<Vec<u32>>,
}

impl SparseFfn {
    /// Binds `sidecar` at the calibrated level nearest to `target` (0 = all neurons active).
    pub fn new(
        sidecar: Arc<Sidecar>,
        target: f32,
        config: SparseConfig,
    ) -> Result<SparseFfn, SparseError> {
        if !(0.0..1.0).contains(&target) {
            return Err(SparseError::BadTarget(target));
        }
        let level = if target == 0.0 {
            None
        } else {
            let lv = &sidecar.spec().levels;
            (0..lv.len()).min_by(|&a, &b| (lv[a] - target).abs().total_cmp(&(lv[b] - target).abs()))
        };
        let stats = (0..sidecar.spec().n_layers).map(|_| LayerStats::default()).collect();
        let pos_of = (0..sidecar.spec().n_layers)
            .map(|l| {
                let order = sidecar.layer(l).order;
                let mut inv = vec![0u32; order.len()];
                for (j, &o) in order.iter().enumerate() {
                    inv[o as usize] = j as u32;
                }
                inv
            })
            .collect();
        Ok(SparseFfn { sidecar, level, config, stats, pos_of })
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

    /// All layers' counters summed up.
    pub fn summary(&self) -> super::Summary {
        super::Summary::of(&self.stats, self.sidecar.spec().ffn_dim)
    }

    /// Zeroes the counters.
    pub fn reset_stats(&self) {
        self.stats.iter().for_each(LayerStats::reset);
    }

    /// Runs layer `l`'s FFN on `h` (`[n, dim]`, the normed FFN input) into `out` (`[n, dim]`).
    /// Returns false (and writes nothing) when the caller should run the dense path instead.
    pub fn forward(
        &self,
        l: usize,
        file: &GgufFile,
        lw: &LayerWeights,
        h: &[f32],
        out: &mut [f32],
    ) -> Result<bool, SparseError> {
        let spec = self.sidecar.spec();
        let dim = spec.dim;
        if l >= spec.n_layers
            || lw.w_gate.rows != spec.ffn_dim
            || lw.w_gate.cols != dim
            || lw.w_up.rows != spec.ffn_dim
            || lw.w_down.rows != dim
        {
            return Err(SparseError::ShapeMismatch {
                path: self.sidecar.path().to_path_buf(),
                found: format!("{} layers, dim {dim}, ffn {}", spec.n_layers, spec.ffn_dim),
                expected: format!("layer {l} with dim {}, ffn {}", lw.w_gate.cols, lw.w_gate.rows),
            });
        }
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
        let kset = kernels();
        let f = v.order.len();
        let Some(level) = self.level else { return (0..f as u32).collect() };
        let r = v.p.len() / h.len();
        let mut z = vec![0.0f32; r]; // [rank]
        for (i, &hi) in h.iter().enumerate() {
            kset.axpy(&mut z, hi, &v.p[i * r..(i + 1) * r]);
        }
        let mut s = v.bias[v.n_hot..].to_vec(); // [ffn_dim - n_hot] scores of the cold neurons
        for (k, &zk) in z.iter().enumerate() {
            kset.axpy(&mut s, zk, &v.q[k * f + v.n_hot..(k + 1) * f]);
        }
        let cut = v.cutoff[level];
        let mut active: Vec<u32> = (0..v.n_hot as u32).collect();
        active.extend(
            s.iter().enumerate().filter(|(_, &x)| x > cut).map(|(j, _)| (j + v.n_hot) as u32),
        );
        active
    }

    /// One token through layer `l`.
    fn token(
        &self,
        l: usize,
        file: &GgufFile,
        lw: &LayerWeights,
        h: &[f32],
        out: &mut [f32],
    ) -> Result<(), SparseError> {
        let kset = kernels();
        let t0 = Instant::now();
        let c0 = thread_cpu_ns();
        let v = self.sidecar.layer(l);
        let f = v.order.len();
        let mut acts = SharedActs::new(h, h.len(), kernels());
        if let (true, Some(level)) = (self.config.oracle, self.level) {
            let mut a = vec![0.0f32; f]; // [ffn_dim] original neuron order
            let mut u = vec![0.0f32; f]; // [ffn_dim]
            dense_mul(file, &lw.w_gate, &mut acts, &mut a)?;
            dense_mul(file, &lw.w_up, &mut acts, &mut u)?;
            ops::swiglu(&mut a, &u);
            let thr = v.thr[level];
            let mut kept = 0;
            for x in a.iter_mut() {
                if x.abs() > thr {
                    kept += 1;
                } else {
                    *x = 0.0;
                }
            }
            dense_mul(file, &lw.w_down, &mut SharedActs::new(&a, f, kernels()), out)?;
            self.stats[l].add(kept, false, t0.elapsed().as_nanos() as u64, thread_cpu_ns() - c0);
            return Ok(());
        }
        if let (Selector::Gate, Some(_)) = (self.config.selector, self.level) {
            return self.token_gate(l, file, lw, &v, h, out, t0, c0);
        }
        let active = self.predict(&v, h);
        if active.len() as f32 > self.config.fallback_ratio * f as f32 {
            let mut a = vec![0.0f32; f]; // [ffn_dim] original neuron order
            let mut u = vec![0.0f32; f]; // [ffn_dim]
            dense_mul(file, &lw.w_gate, &mut acts, &mut a)?;
            dense_mul(file, &lw.w_up, &mut acts, &mut u)?;
            ops::swiglu(&mut a, &u);
            dense_mul(file, &lw.w_down, &mut SharedActs::new(&a, f, kernels()), out)?;
            self.stats[l].add(f, true, t0.elapsed().as_nanos() as u64, thread_cpu_ns() - c0);
            self.audit(l, &v, &a, |_| true);
            return Ok(());
        }
        // Gate and up over the active rows only, in ascending row order (the rows stay in the
        // GGUF mapping; ascending addresses let the hardware prefetcher stream across gaps).
        let (ag, _) = acts.get(lw.w_gate.act_ty)?;
        let ag = ag.to_vec();
        let (au, _) = acts.get(lw.w_up.act_ty)?;
        let (gk, uk) = (lw.w_gate.rows(file).kernels.vec_dot, lw.w_up.rows(file).kernels.vec_dot);
        let cols = lw.w_gate.cols;
        let mut rows: Vec<u32> = active.iter().map(|&j| v.order[j as usize]).collect();
        rows.sort_unstable();
        let mut ys = vec![0.0f32; rows.len()]; // [n_active] in `rows` order
        ys.par_chunks_mut(ROWS_PER_TASK).zip(rows.par_chunks(ROWS_PER_TASK)).for_each(
            |(yo, rs)| {
                for (k, (y, &r)) in yo.iter_mut().zip(rs).enumerate() {
                    if let Some(&next) = rs.get(k + PREFETCH_AHEAD) {
                        prefetch(lw.w_gate.row_bytes_of(file, next as usize));
                        prefetch(lw.w_up.row_bytes_of(file, next as usize));
                    }
                    let r = r as usize;
                    let g = gk(cols, lw.w_gate.row_bytes_of(file, r), &ag);
                    let u = uk(cols, lw.w_up.row_bytes_of(file, r), au);
                    *y = ops::silu(g) * u;
                }
            },
        );
        let mut full = vec![0.0f32; f]; // [ffn_dim] original order, inactive neurons zero
        for (&r, &y) in rows.iter().zip(&ys) {
            full[r as usize] = y;
        }
        // Down over the active neurons only.
        if active.len() as f32 >= self.config.dense_down_ratio * f as f32 {
            dense_mul(file, &lw.w_down, &mut SharedActs::new(&full, f, kernels()), out)?;
        } else {
            let parts: Vec<Vec<f32>> = active
                .par_chunks(DOWN_PER_TASK)
                .map(|js| down_rows(&v, js, &full, out.len()))
                .collect();
            out.fill(0.0);
            for p in &parts {
                kset.axpy(out, 1.0, p);
            }
        }
        self.stats[l].add(
            active.len(),
            false,
            t0.elapsed().as_nanos() as u64,
            thread_cpu_ns() - c0,
        );
        if self.config.audit {
            let mut pred = vec![false; f]; // by original neuron index
            for &j in &active {
                pred[v.order[j as usize] as usize] = true;
            }
            let mut acts = SharedActs::new(h, h.len(), kernels());
            let mut g = vec![0.0f32; f]; // [ffn_dim]
            let mut u = vec![0.0f32; f]; // [ffn_dim]
            dense_mul(file, &lw.w_gate, &mut acts, &mut g)?;
            dense_mul(file, &lw.w_up, &mut acts, &mut u)?;
            ops::swiglu(&mut g, &u);
            self.audit(l, &v, &g, |i| pred[i]);
        }
        Ok(())
    }

    /// One token through layer `l` with the exact-gate selector.
    #[allow(clippy::too_many_arguments)]
    fn token_gate(
        &self,
        l: usize,
        file: &GgufFile,
        lw: &LayerWeights,
        v: &LayerView<'_>,
        h: &[f32],
        out: &mut [f32],
        t0: Instant,
        c0: u64,
    ) -> Result<(), SparseError> {
        let kset = kernels();
        let f = v.order.len();
        let mut acts = SharedActs::new(h, h.len(), kernels());
        let mut g = vec![0.0f32; f]; // [ffn_dim] original order
        dense_mul(file, &lw.w_gate, &mut acts, &mut g)?;
        let keep = (((1.0 - self.target()) * f as f32).ceil() as usize).clamp(1, f);
        let sg: Vec<f32> = g.iter().map(|&x| ops::silu(x)).collect(); // [ffn_dim]
        let mut mag: Vec<f32> = sg.iter().map(|x| x.abs()).collect();
        let cut = *mag.select_nth_unstable_by(f - keep, f32::total_cmp).1;
        let mut rows: Vec<u32> = (0..f as u32).filter(|&i| sg[i as usize].abs() >= cut).collect();
        rows.truncate(keep.max(1) + 16); // ties at the cut: a handful more at most
        let (au, _) = acts.get(lw.w_up.act_ty)?;
        let uk = lw.w_up.rows(file).kernels.vec_dot;
        let cols = lw.w_up.cols;
        let mut full = vec![0.0f32; f]; // [ffn_dim] original order, inactive neurons zero
        let mut ys = vec![0.0f32; rows.len()];
        ys.par_chunks_mut(ROWS_PER_TASK).zip(rows.par_chunks(ROWS_PER_TASK)).for_each(
            |(yo, rs)| {
                for (k, (y, &r)) in yo.iter_mut().zip(rs).enumerate() {
                    if let Some(&next) = rs.get(k + PREFETCH_AHEAD) {
                        prefetch(lw.w_up.row_bytes_of(file, next as usize));
                    }
                    *y = sg[r as usize] * uk(cols, lw.w_up.row_bytes_of(file, r as usize), au);
                }
            },
        );
        for (&r, &y) in rows.iter().zip(&ys) {
            full[r as usize] = y;
        }
        if rows.len() as f32 >= self.config.dense_down_ratio * f as f32 {
            dense_mul(file, &lw.w_down, &mut SharedActs::new(&full, f, kernels()), out)?;
        } else {
            let mut pos: Vec<u32> = rows.iter().map(|&r| self.pos_of[l][r as usize]).collect();
            pos.sort_unstable();
            let parts: Vec<Vec<f32>> = pos
                .par_chunks(DOWN_PER_TASK)
                .map(|js| down_rows(v, js, &full, out.len()))
                .collect();
            out.fill(0.0);
            for p in &parts {
                kset.axpy(out, 1.0, p);
            }
        }
        self.stats[l].add(rows.len(), false, t0.elapsed().as_nanos() as u64, thread_cpu_ns() - c0);
        if self.config.audit {
            let mut u = vec![0.0f32; f]; // [ffn_dim]
            dense_mul(file, &lw.w_up, &mut acts, &mut u)?;
            let a: Vec<f32> = sg.iter().zip(&u).map(|(s, u)| s * u).collect();
            let mut sel = vec![false; f];
            rows.iter().for_each(|&r| sel[r as usize] = true);
            self.audit(l, v, &a, |i| sel[i]);
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

/// `Σ_j full[order[j]] * down_t[j]` over positions `js` (`[dim]`), four rows per accumulator pass.
fn down_rows(v: &LayerView<'_>, js: &[u32], full: &[f32], dim: usize) -> Vec<f32> {
    let kset = kernels();
    let rb = v.down_row_bytes;
    let row = |j: u32| &v.down[j as usize * rb..(j as usize + 1) * rb];
    let coef = |j: u32| full[v.order[j as usize] as usize];
    let mut acc = vec![0.0f32; dim]; // [dim]
    let quads = js.chunks_exact(4);
    let rest = quads.remainder();
    for (k, c) in quads.enumerate() {
        if let Some(next) = js.get((k + 2) * 4..(k + 3) * 4) {
            next.iter().for_each(|&j| prefetch(row(j)));
        }
        kset.axpy4_q8_0(
            &mut acc,
            [coef(c[0]), coef(c[1]), coef(c[2]), coef(c[3])],
            [row(c[0]), row(c[1]), row(c[2]), row(c[3])],
        );
    }
    for &j in rest {
        kset.axpy_q8_0(&mut acc, coef(j), row(j));
    }
    acc
}

/// Asks the CPU to start loading `b` into cache (a hint: never faults, no effect on results).
#[inline(always)]
fn prefetch(b: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..b.len()).step_by(64) {
        // SAFETY: `_mm_prefetch` is a hint that never faults; the address is inside `b`; SSE is
        // part of the x86_64 baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                b.as_ptr().add(off) as *const i8,
            )
        };
    }
    // Elsewhere no hint: nothing to do.
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// `out = acts · mᵀ` for one token through the dense kernels (the same arithmetic as the dense path).
fn dense_mul(
    file: &GgufFile,
    m: &crate::model::Matrix,
    acts: &mut SharedActs<'_>,
    out: &mut [f32],
) -> Result<(), SparseError> {
    let (a, rb) = acts.get(m.act_ty)?;
    ops::matmul(m.rows(file), a, rb, 1, out);
    Ok(())
}
