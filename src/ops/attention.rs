//! Causal grouped-query attention over an f32 or f16 KV cache, in two precision modes.

use super::f16::{self as h16, f16};
use crate::kernels::math;
use crate::kernels::{KernelSet, VecDotBatchFn, WeightedSumFn, MAX_BATCH};
use crate::quant::GgmlType;
use rayon::prelude::*;

/// Geometry of one attention call.
#[derive(Debug, Clone, Copy)]
pub struct AttnShape {
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    /// Row stride of the cache: positions allocated per KV head.
    pub max_seq: usize,
    /// Position of the first query token (the cache already holds positions `0..pos0`).
    pub pos0: usize,
}

/// One layer's cached keys and values, `[n_kv_heads, max_seq, head_dim]` each, in the cache's type.
#[derive(Debug, Clone, Copy)]
pub enum KvView<'a> {
    F32 { k: &'a [f32], v: &'a [f32] },
    F16 { k: &'a [f16], v: &'a [f16] },
}

/// How the attention arithmetic is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttnPrecision {
    /// (Default.) Scores and the weighted V sum in f32 from the (widened) cache values, plain softmax.
    #[default]
    Exact,
    /// llama.cpp's CPU flash attention (ggml-cpu `ggml_compute_forward_flash_attn_ext_f16`) as it
    /// runs for decoding: its one-chunk path, which with an f16 cache rounds Q to f16 for the K dot,
    /// runs an online softmax and accumulates `Σ p·V` in an f16 vector (rescaled and rounded at
    /// every key); with an f32 cache it is f32 (online softmax). Used for every batch size: ggml
    /// switches to an f32 tiled path from 64 query rows on, we do not, so that a row's result never
    /// depends on the batch it was computed in (speculative decoding needs batch = sequential bitwise).
    GgmlF16,
}

impl std::str::FromStr for AttnPrecision {
    type Err = String;
    /// Parses `exact` or `ggml` (also `ggml-f16`).
    fn from_str(s: &str) -> Result<AttnPrecision, String> {
        match s {
            "exact" => Ok(AttnPrecision::Exact),
            "ggml" | "ggml-f16" => Ok(AttnPrecision::GgmlF16),
            _ => Err(format!("unknown attention precision `{s}` (expected exact or ggml)")),
        }
    }
}

/// A cache element type (f32 or f16) with attention kernels.
///
/// # Safety
///
/// Implementors (the `unsafe` impls) promise the type is plain data of `size_of::<Self>()` bytes with no
/// padding, stored in GGUF's little-endian layout of `TY` on this (little-endian) target, so its
/// slices may be viewed as bytes and handed to the `TY` kernels.
unsafe trait Elem: Copy + Send + Sync {
    /// The element's GGML type, whose dot-product kernel reads the cache rows.
    const TY: GgmlType;
}

unsafe impl Elem for f32 {
    const TY: GgmlType = GgmlType::F32;
}

unsafe impl Elem for f16 {
    const TY: GgmlType = GgmlType::F16;
}

// The byte views below hand native f32/f16 memory to kernels that read little-endian GGUF layouts.
#[cfg(target_endian = "big")]
compile_error!("the attention kernels read the KV cache as little-endian bytes");

/// `s` as its bytes.
#[inline]
fn bytes<T: Elem>(s: &[T]) -> &[u8] {
    // SAFETY: `Elem` types are padding-free plain data (see the trait); u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// Causal GQA attention for `T` query tokens at positions `pos0..pos0+T`.
///
/// - `q`: `[T, n_heads, head_dim]`
/// - `kv`: one layer's cache, `[n_kv_heads, max_seq, head_dim]` each, filled up to `pos0 + T`
/// - `out`: `[T, n_heads, head_dim]`
///
/// Query head `h` reads KV head `h / (n_heads / n_kv_heads)` (ggml's broadcast); scores are scaled
/// by `1/sqrt(head_dim)`. Each (token, head) row is computed on its own, by the same code whatever
/// the batch size or thread count, so results are bitwise batch- and thread-invariant.
/// Parallel over (token, head) pairs: call inside `Runtime::install`.
pub fn attention(
    q: &[f32],
    kv: KvView<'_>,
    shape: AttnShape,
    prec: AttnPrecision,
    set: &KernelSet,
    out: &mut [f32],
) {
    let AttnShape { n_heads, n_kv_heads, head_dim: hd, max_seq, .. } = shape;
    assert!(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "heads must be a multiple of kv heads");
    assert_eq!(q.len(), out.len(), "attention q/out shape mismatch");
    assert_eq!(q.len() % (n_heads * hd), 0, "attention q shape");
    let n_tok = q.len() / (n_heads * hd);
    assert!(shape.pos0 + n_tok <= max_seq, "attention beyond cache capacity");
    let need = n_kv_heads * max_seq * hd;
    let one_chunk = prec == AttnPrecision::GgmlF16;
    match kv {
        KvView::F32 { k, v } => {
            assert!(k.len() >= need && v.len() >= need, "cache shape");
            if one_chunk {
                run(q, shape, out, |qh, n_ctx, kvh, o, _| {
                    online_f32(qh, rows(k, kvh, n_ctx, shape), rows(v, kvh, n_ctx, shape), hd, o)
                });
            } else {
                let kern = exact_kernels::<f32>(set);
                run_blocks(q, shape, out, |b, n_ctx, kvh, os, sc| {
                    exact_block(
                        b,
                        rows(k, kvh, n_ctx, shape),
                        rows(v, kvh, n_ctx, shape),
                        hd,
                        os,
                        sc,
                        kern,
                    )
                });
            }
        }
        KvView::F16 { k, v } => {
            assert!(k.len() >= need && v.len() >= need, "cache shape");
            if one_chunk {
                run(q, shape, out, |qh, n_ctx, kvh, o, _| {
                    ggml_one_chunk_f16(
                        qh,
                        rows(k, kvh, n_ctx, shape),
                        rows(v, kvh, n_ctx, shape),
                        hd,
                        o,
                    )
                });
            } else {
                let kern = exact_kernels::<f16>(set);
                run_blocks(q, shape, out, |b, n_ctx, kvh, os, sc| {
                    exact_block(
                        b,
                        rows(k, kvh, n_ctx, shape),
                        rows(v, kvh, n_ctx, shape),
                        hd,
                        os,
                        sc,
                        kern,
                    )
                });
            }
        }
    }
}

/// The first `n_ctx` cached rows of KV head `kvh`: `[n_ctx, head_dim]`.
#[inline]
fn rows<T>(c: &[T], kvh: usize, n_ctx: usize, s: AttnShape) -> &[T] {
    &c[kvh * s.max_seq * s.head_dim..(kvh * s.max_seq + n_ctx) * s.head_dim]
}

/// Runs `f(q_row, n_ctx, kv_head, out_row, scores_scratch)` for every (token, head) pair in parallel.
fn run<F>(q: &[f32], s: AttnShape, out: &mut [f32], f: F)
where
    F: Fn(&[f32], usize, usize, &mut [f32], &mut Vec<f32>) + Send + Sync,
{
    let hd = s.head_dim;
    let group = s.n_heads / s.n_kv_heads;
    out.par_chunks_mut(hd).enumerate().for_each_init(
        || Vec::with_capacity(s.pos0 + 1), // scores scratch: [n_ctx]
        |scores: &mut Vec<f32>, (idx, o)| {
            let (t, h) = (idx / s.n_heads, idx % s.n_heads);
            let n_ctx = s.pos0 + t + 1; // causal: positions 0..=pos0+t
            f(&q[idx * hd..(idx + 1) * hd], n_ctx, h / group, o, scores);
        },
    );
}

/// Most tokens in one work item of the exact path: the tokens of a verification pass (1 +
/// `MAX_DRAFT`) share one item, a prefill chunk is cut in blocks of this many so that the items
/// outnumber the threads, and an item's scores (`[tokens, heads, n_ctx]`) stay a few MB at the
/// deepest contexts. Longer blocks buy nothing: with 64, passes over 48 and 100 tokens at depth
/// 1500 took as long or longer (their matrix products dominate; `cargo bench --bench e2e --
/// --verify 3,48,100 --depth 1500`).
const MAX_BLOCK_TOKENS: usize = 16;

/// Runs `f(block, n_ctx, kv_head, out_rows, scores_scratch)` in parallel for every block of
/// consecutive tokens and every run of consecutive query heads that share a KV head
/// (`out_rows`: `[tokens, heads, hd]`; `n_ctx`: the rows the block's last token sees), so that
/// each cached row is read once for all of them while it is in L1: the tokens of a pass see
/// the same cached rows (Qwen2.5-1.5B: 6 query heads per KV head, ~1300 cached rows during
/// nl2sql; a verification pass over 4 tokens read them four times before). Runs are whole
/// groups unless that leaves fewer work items than threads with one token per item, then the
/// largest divisor of the group that does not; blocks are as long as the items still outnumber
/// the threads. Which heads and tokens share a call changes no arithmetic: each (token, head)
/// row is computed as on its own.
fn run_blocks<F>(q: &[f32], s: AttnShape, out: &mut [f32], f: F)
where
    F: Fn(Block<'_>, usize, usize, &mut [f32], &mut Vec<f32>) + Send + Sync,
{
    let hd = s.head_dim;
    let group = s.n_heads / s.n_kv_heads;
    let n_tok = out.len() / (s.n_heads * hd);
    let threads = rayon::current_num_threads();
    let heads = (1..=group)
        .rev()
        .find(|&d| group.is_multiple_of(d) && n_tok * s.n_kv_heads * (group / d) >= threads)
        .unwrap_or(1);
    let runs = s.n_heads / heads; // runs of `heads` query heads
    let tokens = (1..=n_tok.clamp(1, MAX_BLOCK_TOKENS))
        .rev()
        .find(|&b| n_tok.div_ceil(b) * runs >= threads)
        .unwrap_or(1);
    let run_len = heads * hd;
    if tokens == 1 {
        // One token per item: its rows are contiguous in `out`, written in place.
        out.par_chunks_mut(run_len).enumerate().for_each_init(
            Vec::new, // scores scratch: [heads, n_ctx]
            |scores: &mut Vec<f32>, (idx, o)| {
                let (t, r) = (idx / runs, idx % runs);
                let b = Block {
                    q: &q[t * s.n_heads * hd..(t + 1) * s.n_heads * hd],
                    h0: r * heads,
                    heads,
                    n_heads: s.n_heads,
                    ctx0: s.pos0 + t + 1, // causal: positions 0..=pos0+t
                };
                f(b, s.pos0 + t + 1, r * heads / group, o, scores);
            },
        );
        return;
    }
    let mut by_run = vec![0.0f32; runs * n_tok * run_len]; // [runs, n_tok, heads, hd]
    by_run
        .par_chunks_mut(n_tok * run_len)
        .enumerate()
        .flat_map(|(r, c)| {
            c.par_chunks_mut(tokens * run_len).enumerate().map(move |(i, o)| (r, i, o))
        })
        .for_each_init(
            Vec::new, // scores scratch: [tokens, heads, n_ctx]
            |scores: &mut Vec<f32>, (r, i, o)| {
                let (t0, tb) = (i * tokens, o.len() / run_len);
                let b = Block {
                    q: &q[t0 * s.n_heads * hd..(t0 + tb) * s.n_heads * hd],
                    h0: r * heads,
                    heads,
                    n_heads: s.n_heads,
                    ctx0: s.pos0 + t0 + 1, // causal: the first token sees 0..=pos0+t0
                };
                f(b, s.pos0 + t0 + tb, r * heads / group, o, scores);
            },
        );
    for (r, rows) in by_run.chunks_exact(n_tok * run_len).enumerate() {
        for (t, row) in rows.chunks_exact(run_len).enumerate() {
            let at = (t * s.n_heads + r * heads) * hd;
            out[at..at + run_len].copy_from_slice(row);
        }
    }
}

/// The query rows of one work item of the exact path: consecutive tokens, and in each the
/// `heads` consecutive query heads from `h0` that share one KV head.
#[derive(Clone, Copy)]
struct Block<'a> {
    /// The block's tokens' whole query rows: `[tokens, n_heads, hd]`.
    q: &'a [f32],
    /// First query head of the run.
    h0: usize,
    /// Query heads in the run.
    heads: usize,
    /// Query heads per token (the row stride of `q`).
    n_heads: usize,
    /// Cached rows the block's first token sees; token `t` of the block sees `ctx0 + t`.
    ctx0: usize,
}

/// Cached rows per block of the weighted V sum: a block of values (32 x 128 f32 = 16 KiB) stays
/// in L1 while every query head of the run uses it.
const ROW_BLOCK: usize = 32;

/// `1/sqrt(head_dim)`, computed in f32 as llama.cpp's `kq_scale` is.
#[inline]
fn kq_scale(hd: usize) -> f32 {
    1.0 / (hd as f32).sqrt()
}

/// Exact mode for a block of query rows `b` that share one KV head: f32 scores, plain softmax,
/// f32 weighted V sum, into `os` (`[tokens, heads, hd]`). `kh`, `vh`: `[n_ctx, hd]`, the rows
/// the block's last token sees; token `t` of the block sees the first `b.ctx0 + t`.
///
/// The scores use the kernel tier's batch dot product of the cache's type (`dot_batch`,
/// `KernelSet::vec_dot_batch`): each cached key is read (and widened from f16) once for every
/// (token, head) row of the block that sees it, in independent accumulators, and each score is
/// bitwise the tier's single score dot product (`KernelSet::score_dot`, the contract's sixteen
/// lanes), so batched and sequential decoding stay bitwise equal (a few per cent faster than one
/// call per (key, head) pair at depth 1200: docs/performance.md). The values are visited in
/// blocks of [`ROW_BLOCK`] rows, every row of the block per block; each row's weighted sum
/// (which accumulates block after block, lane by lane in row order, the last block cut at the
/// rows its token sees) is bitwise that of a head of a token alone.
fn exact_block<T: Elem>(
    b: Block<'_>,
    kh: &[T],
    vh: &[T],
    hd: usize,
    os: &mut [f32],
    scores: &mut Vec<f32>,
    k: ExactKernels,
) {
    let scale = kq_scale(hd);
    let n = kh.len() / hd; // rows the last token sees
    let heads = b.heads;
    let tokens = os.len() / (heads * hd);
    debug_assert_eq!(n, b.ctx0 + tokens - 1, "the block's rows");
    scores.clear();
    scores.resize(tokens * heads * n, 0.0); // [tokens, heads, n]; row (t, h) uses its first ctx0 + t
    let qb = bytes(b.q);
    let token_bytes = b.n_heads * hd * 4;
    let mut row = [0.0f32; MAX_BATCH]; // one key's scores for up to MAX_BATCH heads
    for (j, kr) in kh.chunks_exact(hd).enumerate() {
        let kb = bytes(kr);
        // The tokens that see row j: those with ctx0 + t > j.
        for t in (j + 1).saturating_sub(b.ctx0)..tokens {
            let at = t * token_bytes + b.h0 * hd * 4;
            for h0 in (0..heads).step_by(MAX_BATCH) {
                let h1 = (h0 + MAX_BATCH).min(heads);
                let out = &mut row[..h1 - h0];
                (k.dot_batch)(hd, kb, &qb[at + h0 * hd * 4..at + h1 * hd * 4], hd * 4, out);
                for (h, &s) in (h0..h1).zip(out.iter()) {
                    scores[(t * heads + h) * n + j] = s * scale;
                }
            }
        }
    }
    for (r, s) in scores.chunks_exact_mut(n).enumerate() {
        (k.softmax)(&mut s[..b.ctx0 + r / heads]);
    }
    os.fill(0.0);
    for j0 in (0..n).step_by(ROW_BLOCK) {
        let j1 = (j0 + ROW_BLOCK).min(n);
        for t in 0..tokens {
            let seen = b.ctx0 + t;
            if j0 >= seen {
                continue;
            }
            let jt = j1.min(seen);
            let block = bytes(&vh[j0 * hd..jt * hd]);
            for h in 0..heads {
                let r = t * heads + h;
                // o += Σ_j p_j · v_j, bitwise the same on every tier
                (k.wsum)(hd, &scores[r * n + j0..r * n + jt], block, &mut os[r * hd..(r + 1) * hd]);
            }
        }
    }
}

/// The kernel tier's exact-mode attention kernels for one cache element type.
#[derive(Clone, Copy)]
struct ExactKernels {
    /// Scores: a cache row · several query rows (each bitwise the single score dot product).
    dot_batch: VecDotBatchFn,
    /// Softmax of a row of scores.
    softmax: crate::kernels::SoftmaxFn,
    /// Weighted sum of the value rows.
    wsum: WeightedSumFn,
}

/// The exact-mode kernels of `set`'s tier for a `T` cache.
fn exact_kernels<T: Elem>(set: &KernelSet) -> ExactKernels {
    let missing = "every tier has F32 and F16 attention kernels";
    ExactKernels {
        dot_batch: set.vec_dot_batch(T::TY).expect(missing),
        softmax: set.softmax,
        wsum: set.weighted_sum(T::TY).expect(missing),
    }
}

/// ggml's one-chunk flash attention for one query row over an f32 cache: f32 dot, online softmax
/// (rescale the accumulator when a new maximum appears), f32 accumulator, divide by the sum at the end.
fn online_f32(qh: &[f32], kh: &[f32], vh: &[f32], hd: usize, o: &mut [f32]) {
    let scale = kq_scale(hd);
    let (mut m, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    o.fill(0.0);
    for (kr, vr) in kh.chunks_exact(hd).zip(vh.chunks_exact(hd)) {
        let s = qh.iter().zip(kr).map(|(a, b)| a * b).sum::<f32>() * scale;
        let (mut ms, mut vs) = (1.0f32, 1.0f32);
        if s > m {
            ms = math::exp(m - s);
            m = s;
            o.iter_mut().for_each(|a| *a *= ms);
        } else {
            vs = math::exp(s - m);
        }
        for (a, &x) in o.iter_mut().zip(vr) {
            *a = x.mul_add(vs, *a);
        }
        sum = sum * ms + vs;
    }
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    o.iter_mut().for_each(|a| *a *= inv);
}

/// ggml's one-chunk flash attention for one query row over an f16 cache: Q rounded to f16, f16·f16
/// dot in f32, online softmax, and the `Σ p·V` accumulator kept in f16 (`ggml_vec_scale_f16` on a
/// new maximum, `ggml_vec_mad_f16` per key), widened and divided by the f32 sum at the end.
fn ggml_one_chunk_f16(qh: &[f32], kh: &[f16], vh: &[f16], hd: usize, o: &mut [f32]) {
    let scale = kq_scale(hd);
    let mut q16 = vec![f16::ZERO; hd]; // [hd]
    h16::to_f16(&mut q16, qh);
    let mut acc = vec![f16::ZERO; hd]; // [hd] the f16 VKQ accumulator
    let (mut m, mut sum) = (f32::NEG_INFINITY, 0.0f32);
    for (kr, vr) in kh.chunks_exact(hd).zip(vh.chunks_exact(hd)) {
        let s = h16::dot_f16(&q16, kr) * scale;
        let (mut ms, mut vs) = (1.0f32, 1.0f32);
        if s > m {
            ms = math::exp(m - s);
            m = s;
            h16::scale_f16(&mut acc, ms);
        } else {
            vs = math::exp(s - m);
        }
        h16::mad_f16(&mut acc, vr, vs);
        sum = sum * ms + vs;
    }
    h16::to_f32(o, &acc);
    let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
    o.iter_mut().for_each(|a| *a *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive per-head attention in f64 with explicit loops.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        nh: usize,
        nkv: usize,
        hd: usize,
        max_seq: usize,
        pos0: usize,
    ) -> Vec<f32> {
        let n_tok = q.len() / (nh * hd);
        let mut out = vec![0.0f32; q.len()];
        for t in 0..n_tok {
            for h in 0..nh {
                let kvh = h * nkv / nh;
                let n = pos0 + t + 1;
                let mut s: Vec<f64> = (0..n)
                    .map(|p| {
                        (0..hd)
                            .map(|d| {
                                q[(t * nh + h) * hd + d] as f64
                                    * k[(kvh * max_seq + p) * hd + d] as f64
                            })
                            .sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for x in s.iter_mut() {
                    *x = (*x - m).exp() / z;
                }
                for d in 0..hd {
                    out[(t * nh + h) * hd + d] = (0..n)
                        .map(|p| s[p] * v[(kvh * max_seq + p) * hd + d] as f64)
                        .sum::<f64>() as f32;
                }
            }
        }
        out
    }

    /// Runs `attention` on f32 `k`/`v` stored as `dtype` (`true` = f16) in mode `prec`.
    fn run_mode(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        s: AttnShape,
        f16_cache: bool,
        prec: AttnPrecision,
    ) -> Vec<f32> {
        let mut out = vec![0.0; q.len()];
        let rt = crate::platform::runtime::Runtime::new(2).unwrap();
        if f16_cache {
            let (mut k16, mut v16) = (vec![f16::ZERO; k.len()], vec![f16::ZERO; v.len()]);
            h16::to_f16(&mut k16, k);
            h16::to_f16(&mut v16, v);
            rt.install(|| {
                attention(
                    q,
                    KvView::F16 { k: &k16, v: &v16 },
                    s,
                    prec,
                    crate::kernels::kernels(),
                    &mut out,
                )
            });
        } else {
            rt.install(|| {
                attention(q, KvView::F32 { k, v }, s, prec, crate::kernels::kernels(), &mut out)
            });
        }
        out
    }

    /// `x` rounded to f16 and back.
    fn r16(x: &[f32]) -> Vec<f32> {
        x.iter().map(|&v| f16::from_f32(v).to_f32()).collect()
    }

    #[test]
    fn gqa_causal_matches_naive_in_every_mode() {
        let (nh, nkv, hd, max_seq, pos0, n_tok) = (6, 2, 8, 16, 3, 4);
        let f = |i: usize, s: f32| ((i as f32) * s).sin();
        let q: Vec<f32> = (0..n_tok * nh * hd).map(|i| f(i, 0.31)).collect();
        let k: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.17)).collect();
        let v: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.23)).collect();
        let s = AttnShape { n_heads: nh, n_kv_heads: nkv, head_dim: hd, max_seq, pos0 };
        let want = naive(&q, &k, &v, nh, nkv, hd, max_seq, pos0);
        let want16 = naive(&q, &r16(&k), &r16(&v), nh, nkv, hd, max_seq, pos0);
        // (f16 cache, mode, reference, tolerance): the f16 one-chunk path rounds Q and the
        // accumulator to f16 (relative step 2^-11), so it only matches to ~1e-3 on values of size ~1.
        let cases = [
            (false, AttnPrecision::Exact, &want, 1e-5),
            (false, AttnPrecision::GgmlF16, &want, 1e-5),
            (true, AttnPrecision::Exact, &want16, 1e-5),
            (true, AttnPrecision::GgmlF16, &want16, 4e-3),
        ];
        for (c16, prec, reference, tol) in cases {
            let out = run_mode(&q, &k, &v, s, c16, prec);
            for i in 0..out.len() {
                assert!(
                    (out[i] - reference[i]).abs() < tol,
                    "{c16} {prec:?} {i}: {} vs {}",
                    out[i],
                    reference[i]
                );
            }
        }
        // The f16 one-chunk path really differs from exact arithmetic on the same cache.
        let g = run_mode(&q, &k, &v, s, true, AttnPrecision::GgmlF16);
        assert!(g.iter().zip(&want16).any(|(a, b)| a != b as &f32));
    }

    #[test]
    fn grouped_heads_are_bitwise_each_head_alone() {
        // 6 query heads on one KV head, 75 cached rows (blocks of 32, 32, 11): one thread runs
        // the 6 heads in one call, eight threads one head per call; same bits, both cache types.
        let (nh, nkv, hd, max_seq, pos0) = (6, 1, 136, 80, 74);
        let f = |i: usize, s: f32| ((i as f32) * s).sin();
        let q: Vec<f32> = (0..nh * hd).map(|i| f(i, 0.31)).collect();
        let k: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.17)).collect();
        let v: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.23)).collect();
        let s = AttnShape { n_heads: nh, n_kv_heads: nkv, head_dim: hd, max_seq, pos0 };
        let (k16, v16) = (r16(&k), r16(&v));
        let (mut k16h, mut v16h) = (vec![f16::ZERO; k.len()], vec![f16::ZERO; v.len()]);
        h16::to_f16(&mut k16h, &k16);
        h16::to_f16(&mut v16h, &v16);
        for view in [KvView::F32 { k: &k, v: &v }, KvView::F16 { k: &k16h, v: &v16h }] {
            let on = |threads: usize| {
                let mut out = vec![0.0; q.len()];
                let rt = crate::platform::runtime::Runtime::new(threads).unwrap();
                rt.install(|| {
                    attention(
                        &q,
                        view,
                        s,
                        AttnPrecision::Exact,
                        crate::kernels::kernels(),
                        &mut out,
                    )
                });
                out.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(on(1), on(8));
        }
    }

    /// The block of one token's query rows `qs` (`[heads, hd]`), which sees `n_ctx` cached rows.
    fn alone(qs: &[f32], hd: usize, n_ctx: usize) -> Block<'_> {
        let heads = qs.len() / hd;
        Block { q: qs, h0: 0, heads, n_heads: heads, ctx0: n_ctx }
    }

    /// The kernel sets of every tier this CPU has, and the portable one.
    fn every_tier() -> Vec<&'static KernelSet> {
        let features = crate::kernels::cpu::cpu_features();
        let mut sets: Vec<&KernelSet> = crate::kernels::Tier::available(features)
            .into_iter()
            .map(|t| KernelSet::for_tier(t).unwrap())
            .collect();
        sets.push(KernelSet::portable());
        sets
    }

    /// `x` stored as f16.
    fn halves(x: &[f32]) -> Vec<f16> {
        let mut h = vec![f16::ZERO; x.len()];
        h16::to_f16(&mut h, x);
        h
    }

    /// The exact path as it was before its scores were batched over heads: one `score_dot` per
    /// (key, head) pair, plain softmax, the tier's weighted sum per head.
    fn exact_pairwise<T: Elem>(
        qs: &[f32],
        kh: &[T],
        vh: &[T],
        hd: usize,
        set: &KernelSet,
    ) -> Vec<f32> {
        let (dot, wsum) = (set.score_dot(T::TY).unwrap(), set.weighted_sum(T::TY).unwrap());
        let n = kh.len() / hd;
        let mut out = vec![0.0f32; qs.len()];
        for (qh, o) in qs.chunks_exact(hd).zip(out.chunks_exact_mut(hd)) {
            let mut s: Vec<f32> = kh
                .chunks_exact(hd)
                .map(|kr| dot(hd, bytes(kr), bytes(qh)) * kq_scale(hd))
                .collect();
            (set.softmax)(&mut s);
            for j0 in (0..n).step_by(ROW_BLOCK) {
                let j1 = (j0 + ROW_BLOCK).min(n);
                wsum(hd, &s[j0..j1], bytes(&vh[j0 * hd..j1 * hd]), o);
            }
        }
        out
    }

    #[test]
    fn batched_scores_are_bitwise_one_dot_per_pair_on_every_tier() {
        // 10 query heads on one KV head (more than MAX_BATCH: two calls per key), 75 cached rows,
        // a head size with a tail beyond the sixteen lanes; f32 and f16 caches; every tier here.
        let (nh, hd, n) = (10, 136, 75);
        let f = |i: usize, s: f32| ((i as f32) * s).sin();
        let q: Vec<f32> = (0..nh * hd).map(|i| f(i, 0.31)).collect();
        let k: Vec<f32> = (0..n * hd).map(|i| f(i, 0.17)).collect();
        let v: Vec<f32> = (0..n * hd).map(|i| f(i, 0.23)).collect();
        let (k16, v16) = (halves(&k), halves(&v));
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        for set in every_tier() {
            let mut scratch = Vec::new();
            let mut out = vec![0.0f32; q.len()];
            let b = alone(&q, hd, n);
            exact_block(b, &k, &v, hd, &mut out, &mut scratch, exact_kernels::<f32>(set));
            assert_eq!(
                bits(&out),
                bits(&exact_pairwise(&q, &k, &v, hd, set)),
                "{} f32",
                set.name()
            );
            exact_block(b, &k16, &v16, hd, &mut out, &mut scratch, exact_kernels::<f16>(set));
            assert_eq!(
                bits(&out),
                bits(&exact_pairwise(&q, &k16, &v16, hd, set)),
                "{} f16",
                set.name()
            );
        }
    }

    #[test]
    fn token_blocks_are_bitwise_each_token_alone_on_every_tier() {
        // A block of 5 tokens (6 query heads on one KV head, a head size with a tail beyond the
        // sixteen lanes) after 70 cached rows: the tokens see 71..75 rows, so the last V block
        // (rows 64..) is cut differently for each. Every row equals its token alone, f32 and f16
        // caches, every tier here.
        let (nh, hd, pos0, tokens) = (6, 136, 70, 5);
        let n = pos0 + tokens;
        let f = |i: usize, s: f32| ((i as f32) * s).sin();
        let q: Vec<f32> = (0..tokens * nh * hd).map(|i| f(i, 0.31)).collect();
        let k: Vec<f32> = (0..n * hd).map(|i| f(i, 0.17)).collect();
        let v: Vec<f32> = (0..n * hd).map(|i| f(i, 0.23)).collect();
        let (k16, v16) = (halves(&k), halves(&v));
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        fn check<T: Elem>(
            q: &[f32],
            k: &[T],
            v: &[T],
            (nh, hd, pos0): (usize, usize, usize),
            kern: ExactKernels,
        ) -> (Vec<f32>, Vec<f32>) {
            let tokens = q.len() / (nh * hd);
            let mut scratch = Vec::new();
            // Heads 2..5 of each token, as a run of a group split in two.
            let (h0, heads) = (2, 4);
            let b = Block { q, h0, heads, n_heads: nh, ctx0: pos0 + 1 };
            let mut block = vec![0.0f32; tokens * heads * hd];
            exact_block(b, k, v, hd, &mut block, &mut scratch, kern);
            let mut each = Vec::new();
            for t in 0..tokens {
                let seen = pos0 + t + 1;
                let qs = &q[(t * nh + h0) * hd..(t * nh + h0 + heads) * hd];
                let mut o = vec![0.0f32; heads * hd];
                let b = alone(qs, hd, seen);
                exact_block(b, &k[..seen * hd], &v[..seen * hd], hd, &mut o, &mut scratch, kern);
                each.extend(o);
            }
            (block, each)
        }
        for set in every_tier() {
            let (b, a) = check(&q, &k, &v, (nh, hd, pos0), exact_kernels::<f32>(set));
            assert_eq!(bits(&b), bits(&a), "{} f32", set.name());
            let (b, a) = check(&q, &k16, &v16, (nh, hd, pos0), exact_kernels::<f16>(set));
            assert_eq!(bits(&b), bits(&a), "{} f16", set.name());
        }
    }

    #[test]
    fn rows_do_not_depend_on_batch_size() {
        // Every mode, both cache types: each row of a 70-query batch (more than ggml's 64-row tile)
        // is bitwise the row computed alone at its position.
        let (nh, nkv, hd, max_seq, n_tok) = (4, 2, 8, 80, 70);
        let f = |i: usize, s: f32| ((i as f32) * s).sin();
        let q: Vec<f32> = (0..n_tok * nh * hd).map(|i| f(i, 0.31)).collect();
        let k: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.17)).collect();
        let v: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.23)).collect();
        let row = nh * hd;
        for c16 in [false, true] {
            for prec in [AttnPrecision::Exact, AttnPrecision::GgmlF16] {
                let s = AttnShape { n_heads: nh, n_kv_heads: nkv, head_dim: hd, max_seq, pos0: 0 };
                let batch = run_mode(&q, &k, &v, s, c16, prec);
                for t in [0, 1, 37, 63, 64, 69] {
                    let s1 = AttnShape { pos0: t, ..s };
                    let one = run_mode(&q[t * row..(t + 1) * row], &k, &v, s1, c16, prec);
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&batch[t * row..(t + 1) * row]),
                        bits(&one),
                        "{c16} {prec:?} row {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn single_position_returns_value() {
        // With one visible position the softmax weight is 1 and the output is V itself.
        let (hd, max_seq) = (4, 2);
        let q = vec![1.0f32, 2.0, 3.0, 4.0];
        let k = vec![0.5f32; max_seq * hd];
        let v = vec![9.0f32, 8.0, 7.0, 6.0, 0.0, 0.0, 0.0, 0.0];
        let s = AttnShape { n_heads: 1, n_kv_heads: 1, head_dim: hd, max_seq, pos0: 0 };
        for c16 in [false, true] {
            for prec in [AttnPrecision::Exact, AttnPrecision::GgmlF16] {
                assert_eq!(
                    run_mode(&q, &k, &v, s, c16, prec),
                    vec![9.0, 8.0, 7.0, 6.0],
                    "{c16} {prec:?}"
                );
            }
        }
    }
}
