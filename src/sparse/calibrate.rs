//! Calibration: run the model over text, record per-layer FFN inputs and |silu(gate)*up|, choose
//! per-layer thresholds for each target sparsity, order neurons hot-first, fit a low-rank predictor
//! per layer, repack the down projection neuron-major, and produce the sidecar contents.
//!
//! The predictor is a reduced-rank linear regression of `ln(|a| + eps)` on the FFN input `h`:
//! `score = (h·P)·Q + b`, `P` `[dim, r]`, `Q` `[r, ffn]`. `P` spans the input directions that covary
//! most with the (centered) targets (randomized range finder with one power iteration on
//! `Hᵀ·Y`), `Q` is the ridge least-squares fit given `P`. A cold neuron is computed when its score
//! exceeds the level's cutoff, chosen so that the predicted active fraction on the calibration set
//! equals `1 - target`.

use super::hook::{Recorder, SparseHook};
use super::linalg::{gemm, orthonormalize_rows, spd_solve, transpose};
use super::sidecar::{model_key, LayerData, SidecarSpec};
use super::SparseError;
use crate::generate::sampler::SplitMix64;
use crate::kernels::q8_0_row_bytes;
use crate::model::FfnHook;
use crate::model::{Logits, Model};
use crate::platform::runtime::Runtime;
use crate::quant::{self, GgmlType};
use crate::tokenizer::Tokenizer;
use rayon::prelude::*;
use std::sync::Arc;

/// A neuron active (at the strictest level) in at least this fraction of calibration tokens is
/// "hot": always computed, never predicted (misses on such neurons would be frequent and costly).
const HOT_FREQ: f32 = 0.5;
/// Tokens per forward pass while recording: the cancel callback is polled between passes, so this
/// bounds the reaction time (32 tokens of the 1.5B take well under a second on two cores) while
/// keeping the batch kernels' weight reuse.
const CANCEL_CHUNK: usize = 32;
/// Ridge term relative to the mean diagonal of `ZᵀZ` (keeps the solve well-posed for tiny sets).
const RIDGE: f32 = 1e-3;

/// Calibration settings.
#[derive(Debug, Clone)]
pub struct CalibOptions {
    /// Target sparsities to calibrate (each in (0, 1)).
    pub levels: Vec<f32>,
    /// Predictor rank.
    pub rank: usize,
    /// Tokens to record per layer.
    pub max_tokens: usize,
    /// Tokens per forward window (each window starts a fresh context).
    pub window: usize,
    pub seed: u64,
}

impl Default for CalibOptions {
    /// 2048 tokens, rank 64, three levels.
    fn default() -> Self {
        CalibOptions {
            levels: vec![0.5, 0.7, 0.85],
            rank: 64,
            max_tokens: 2048,
            window: 256,
            seed: 1,
        }
    }
}

/// What calibration measured, per layer.
#[derive(Debug, Clone)]
pub struct CalibReport {
    pub tokens: usize,
    /// `[layer][level]` recall on the calibration set.
    pub recall: Vec<Vec<f32>>,
    /// `[layer]` hot neuron count.
    pub n_hot: Vec<usize>,
}

/// Records activations over `texts` and fits everything; returns the sidecar contents.
pub fn calibrate(
    model: &mut Model,
    tok: &Tokenizer,
    rt: &Runtime,
    texts: &[String],
    opts: &CalibOptions,
) -> Result<(SidecarSpec, Vec<LayerData>, CalibReport), SparseError> {
    calibrate_with(model, tok, rt, texts, opts, &|_| false)
}

/// Restores a model's previous FFN hook when dropped (also when the caller's cancel callback
/// unwinds, e.g. PostgreSQL's interrupt check raising an ERROR).
struct HookGuard<'a> {
    model: &'a mut Model,
    prev: Option<Arc<dyn FfnHook>>,
}

impl Drop for HookGuard<'_> {
    /// Puts the previous hook back.
    fn drop(&mut self) {
        self.model.set_ffn_hook(self.prev.take());
    }
}

/// Where a calibration is, given to its cancel callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalibProgress {
    /// About to record tokens from `done` on, up to `total` (the token budget).
    Record { done: usize, total: usize },
    /// About to fit layer `done` of `total`.
    Fit { done: usize, total: usize },
}

/// [`calibrate`] with a cancel callback, polled on the calling thread before every forward pass
/// (at most [`CANCEL_CHUNK`] tokens) and before fitting each layer, with where the calibration
/// is: returning true stops with [`SparseError::Cancelled`]. The callback may also unwind; the
/// model's hook is restored either way.
pub fn calibrate_with(
    model: &mut Model,
    tok: &Tokenizer,
    rt: &Runtime,
    texts: &[String],
    opts: &CalibOptions,
    cancel: &dyn Fn(CalibProgress) -> bool,
) -> Result<(SidecarSpec, Vec<LayerData>, CalibReport), SparseError> {
    let c = model.config().clone();
    let mut levels = opts.levels.clone();
    levels.sort_by(f32::total_cmp);
    levels.dedup();
    if levels.is_empty() || levels.iter().any(|l| !(*l > 0.0 && *l < 1.0)) {
        return Err(SparseError::Calibration(format!("levels {levels:?} must be in (0, 1)")));
    }
    if !c.dim.is_multiple_of(32) {
        return Err(SparseError::Unsupported {
            what: "calibration",
            reason: format!("dim {} not a multiple of 32", c.dim),
        });
    }
    let rank = opts.rank.clamp(1, c.dim);
    let rec = Arc::new(SparseHook::Record(Recorder::new(c.n_layers, c.dim, opts.max_tokens)));
    let prev = model.ffn_hook().cloned();
    model.set_ffn_hook(Some(rec.clone()));
    let run = {
        let guard = HookGuard { model: &mut *model, prev };
        record_texts(guard.model, tok, rt, texts, opts, cancel)
    }; // the guard is dropped here: the previous hook is back
    run?;
    let SparseHook::Record(r) = &*rec else { unreachable!("made above") };
    let n = r.tokens();
    if n < 16 {
        return Err(SparseError::Calibration(format!(
            "only {n} calibration tokens (need at least 16)"
        )));
    }
    let mut layers = Vec::with_capacity(c.n_layers);
    let mut report = CalibReport { tokens: n, recall: Vec::new(), n_hot: Vec::new() };
    for l in 0..c.n_layers {
        if cancel(CalibProgress::Fit { done: l, total: c.n_layers }) {
            return Err(SparseError::Cancelled);
        }
        let lr = r.take(l);
        let down = dequant_down(model, l)?;
        let d = rt.install(|| {
            fit_layer(
                &lr.h,
                &lr.a,
                lr.n,
                c.dim,
                c.ffn_dim,
                rank,
                &levels,
                &down,
                opts.seed ^ l as u64,
            )
        });
        report.recall.push(d.recall.clone());
        report.n_hot.push(d.n_hot);
        layers.push(d);
    }
    let spec = SidecarSpec {
        n_layers: c.n_layers,
        dim: c.dim,
        ffn_dim: c.ffn_dim,
        rank,
        levels,
        model_key: model_key(model.file()),
    };
    Ok((spec, layers, report))
}

/// Runs every text (in windows of `opts.window` tokens, each a fresh context, fed
/// [`CANCEL_CHUNK`] tokens per pass) until the recorder is full; polls `cancel` before every pass.
fn record_texts(
    model: &Model,
    tok: &Tokenizer,
    rt: &Runtime,
    texts: &[String],
    opts: &CalibOptions,
    cancel: &dyn Fn(CalibProgress) -> bool,
) -> Result<(), SparseError> {
    let calib = |e: &dyn std::fmt::Display| SparseError::Calibration(e.to_string());
    let mut seen = 0usize;
    for t in texts {
        let ids = tok.encode(t, true).map_err(|e| calib(&e))?;
        for w in ids.chunks(opts.window.max(8)) {
            if seen >= opts.max_tokens {
                return Ok(());
            }
            let mut cache = model.new_cache(w.len());
            for (k, part) in w.chunks(CANCEL_CHUNK).enumerate() {
                let done = seen + k * CANCEL_CHUNK;
                if cancel(CalibProgress::Record { done, total: opts.max_tokens }) {
                    return Err(SparseError::Cancelled);
                }
                model.forward(rt, &mut cache, part, Logits::Last).map_err(|e| calib(&e))?;
            }
            seen += w.len();
        }
    }
    Ok(())
}

/// Layer `l`'s down projection dequantized, `[dim, ffn]`.
fn dequant_down(model: &Model, l: usize) -> Result<Vec<f32>, SparseError> {
    let m = &model.weights().layers[l].w_down;
    let f = model.file();
    let mut out = vec![0.0f32; m.rows * m.cols]; // [dim, ffn]
    for (r, row) in out.chunks_exact_mut(m.cols).enumerate() {
        quant::dequantize_row(m.ty, m.row_bytes_of(f, r), row)?;
    }
    Ok(out)
}

/// The `q`-quantile of `v` (sorts a copy partially).
fn quantile(v: &[f32], q: f32) -> f32 {
    let mut c = v.to_vec();
    let k = ((c.len() as f64 * q as f64) as usize).min(c.len() - 1);
    *c.select_nth_unstable_by(k, f32::total_cmp).1
}

/// Fits one layer from `n` recorded rows: `h` `[n, dim]`, `a` `[n, ffn]` (f16), `down` `[dim, ffn]`.
#[allow(clippy::too_many_arguments)]
fn fit_layer(
    h: &[f32],
    a: &[half::f16],
    n: usize,
    dim: usize,
    ffn: usize,
    r: usize,
    levels: &[f32],
    down: &[f32],
    seed: u64,
) -> LayerData {
    let absa: Vec<f32> = a.par_iter().map(|x| x.to_f32().abs()).collect(); // [n, ffn]
                                                                           // A sample of 2^20 magnitudes is plenty for a quantile (error ~1e-3 in rank).
    let step = (absa.len() / (1 << 20)).max(1);
    let sample: Vec<f32> = absa.iter().step_by(step).copied().collect();
    let thr: Vec<f32> = levels.iter().map(|&s| quantile(&sample, s)).collect();
    let strict = *thr.last().expect("at least one level");
    // Activity frequency at the strictest level; hot-first order.
    let mut freq = vec![0u32; ffn];
    for row in absa.chunks_exact(ffn) {
        for (f, &x) in freq.iter_mut().zip(row) {
            *f += (x > strict) as u32;
        }
    }
    let mut order: Vec<u32> = (0..ffn as u32).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(freq[i as usize]));
    let n_hot =
        order.iter().take_while(|&&i| freq[i as usize] as f32 >= HOT_FREQ * n as f32).count();
    // Targets in hot-first column order, centered; inputs centered.
    let eps = 0.1 * thr[0].max(1e-12);
    let mut y = vec![0.0f32; n * ffn]; // [n, ffn] permuted
    y.par_chunks_mut(ffn).zip(absa.par_chunks(ffn)).for_each(|(yr, ar)| {
        for (j, v) in yr.iter_mut().enumerate() {
            *v = (ar[order[j] as usize] + eps).ln();
        }
    });
    let mu_y = col_means(&y, n, ffn);
    let mu_h = col_means(h, n, dim);
    y.par_chunks_mut(ffn).for_each(|row| row.iter_mut().zip(&mu_y).for_each(|(v, m)| *v -= m));
    let mut hc = h.to_vec(); // [n, dim]
    hc.par_chunks_mut(dim).for_each(|row| row.iter_mut().zip(&mu_h).for_each(|(v, m)| *v -= m));
    // Range finder: X ≈ top-r left singular subspace of Hcᵀ·Yc (in input space).
    let mut rng = SplitMix64::new(seed);
    let omega: Vec<f32> = (0..ffn * r).map(|_| rng.next_f64() as f32 * 2.0 - 1.0).collect(); // [ffn, r]
    let hct = transpose(&hc, n, dim); // [dim, n]
    let yt = transpose(&y, n, ffn); // [ffn, n]
    let t = gemm(&y, &omega, n, ffn, r); // [n, r]
    let mut x = gemm(&hct, &t, dim, n, r); // [dim, r]
    for _ in 0..1 {
        let mut xt = transpose(&x, dim, r); // [r, dim]
        orthonormalize_rows(&mut xt, r, dim);
        x = transpose(&xt, r, dim);
        let u = gemm(&hc, &x, n, dim, r); // [n, r]
        let v = gemm(&yt, &u, ffn, n, r); // [ffn, r]
        let t = gemm(&y, &v, n, ffn, r); // [n, r]
        x = gemm(&hct, &t, dim, n, r); // [dim, r]
    }
    let mut xt = transpose(&x, dim, r);
    orthonormalize_rows(&mut xt, r, dim);
    let p = transpose(&xt, r, dim); // [dim, r]
                                    // Q by ridge least squares on Z = Hc·P.
    let z = gemm(&hc, &p, n, dim, r); // [n, r]
    let zt = transpose(&z, n, r); // [r, n]
    let mut g = gemm(&zt, &z, r, n, r); // [r, r]
    let lam = RIDGE * (0..r).map(|i| g[i * r + i]).sum::<f32>() / r as f32 + 1e-6;
    (0..r).for_each(|i| g[i * r + i] += lam);
    let b = gemm(&zt, &y, r, n, ffn); // [r, ffn]
    let q = spd_solve(&g, &b, r, ffn).unwrap_or_else(|| vec![0.0; r * ffn]);
    // bias = mu_y - (mu_h·P)·Q
    let mp = gemm(&mu_h, &p, 1, dim, r); // [1, r]
    let mpq = gemm(&mp, &q, 1, r, ffn); // [1, ffn]
    let bias: Vec<f32> = mu_y.iter().zip(&mpq).map(|(m, v)| m - v).collect();
    // Calibration scores of the cold neurons (centered form: Z·Q + mu_y).
    let s = gemm(&z, &q, n, r, ffn); // [n, ffn]
    let cold = ffn - n_hot;
    let cold_scores: Vec<f32> = s
        .par_chunks(ffn)
        .flat_map_iter(|row| {
            row[n_hot..].iter().zip(&mu_y[n_hot..]).map(|(v, m)| v + m).collect::<Vec<_>>()
        })
        .collect();
    let mut cutoff = Vec::new();
    let mut recall = Vec::new();
    for (li, &lvl) in levels.iter().enumerate() {
        let want_cold = (1.0 - lvl as f64) * (n * ffn) as f64 - (n * n_hot) as f64;
        let cut = if want_cold <= 0.0 || cold == 0 {
            f32::INFINITY
        } else {
            let keep = (want_cold as usize).min(cold_scores.len());
            quantile(&cold_scores, 1.0 - keep as f32 / cold_scores.len() as f32)
        };
        let (mut tot, mut hit) = (0u64, 0u64);
        for t in 0..n {
            for j in 0..ffn {
                if absa[t * ffn + order[j] as usize] > thr[li] {
                    tot += 1;
                    hit += (j < n_hot || cold_scores[t * cold + j - n_hot] > cut) as u64;
                }
            }
        }
        cutoff.push(cut);
        recall.push(if tot > 0 { hit as f32 / tot as f32 } else { 1.0 });
    }
    // Down projection, neuron-major in hot-first order, Q8_0.
    let rb = q8_0_row_bytes(dim);
    let qf = quant::quantize_row_fn(GgmlType::Q8_0).expect("Q8_0 quantizer exists");
    let mut down_t = vec![0u8; ffn * rb]; // [ffn, rb]
    down_t.par_chunks_mut(rb).enumerate().for_each(|(j, dst)| {
        let col = order[j] as usize;
        let v: Vec<f32> = (0..dim).map(|i| down[i * ffn + col]).collect();
        qf(&v, dst);
    });
    LayerData { n_hot, thr, cutoff, recall, order, p, q, bias, down: down_t }
}

/// Column means of `x` (`[n, d]`).
fn col_means(x: &[f32], n: usize, d: usize) -> Vec<f32> {
    let mut m = vec![0.0f64; d];
    for row in x.chunks_exact(d) {
        for (a, &v) in m.iter_mut().zip(row) {
            *a += v as f64;
        }
    }
    m.iter().map(|v| (v / n as f64) as f32).collect()
}
