//! Causal grouped-query attention over an f32 KV cache.

use super::softmax::softmax_in_place;
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

/// Causal GQA attention for `T` query tokens at positions `pos0..pos0+T`.
///
/// - `q`: `[T, n_heads, head_dim]`
/// - `k`, `v`: one layer's cache, `[n_kv_heads, max_seq, head_dim]`, filled up to `pos0 + T`
/// - `out`: `[T, n_heads, head_dim]`
///
/// Query head `h` reads KV head `h / (n_heads / n_kv_heads)` (ggml's broadcast); scores are scaled
/// by `1/sqrt(head_dim)`. Parallel over (token, head) pairs: call inside `Runtime::install`.
pub fn attention(q: &[f32], k: &[f32], v: &[f32], shape: AttnShape, out: &mut [f32]) {
    let AttnShape { n_heads, n_kv_heads, head_dim: hd, max_seq, pos0 } = shape;
    assert!(n_kv_heads > 0 && n_heads % n_kv_heads == 0, "heads must be a multiple of kv heads");
    assert_eq!(q.len(), out.len(), "attention q/out shape mismatch");
    assert_eq!(q.len() % (n_heads * hd), 0, "attention q shape");
    let n_tok = q.len() / (n_heads * hd);
    assert!(pos0 + n_tok <= max_seq, "attention beyond cache capacity");
    assert!(k.len() >= n_kv_heads * max_seq * hd && v.len() >= n_kv_heads * max_seq * hd, "cache shape");
    let group = n_heads / n_kv_heads;
    let scale = 1.0 / (hd as f32).sqrt();

    out.par_chunks_mut(hd).enumerate().for_each_init(
        || Vec::with_capacity(pos0 + n_tok), // scores scratch: [n_ctx]
        |scores: &mut Vec<f32>, (idx, o)| {
            let (t, h) = (idx / n_heads, idx % n_heads);
            let kvh = h / group;
            let n_ctx = pos0 + t + 1; // causal: positions 0..=pos0+t
            let qh = &q[idx * hd..(idx + 1) * hd];
            let kh = &k[kvh * max_seq * hd..(kvh * max_seq + n_ctx) * hd]; // [n_ctx, hd]
            let vh = &v[kvh * max_seq * hd..(kvh * max_seq + n_ctx) * hd]; // [n_ctx, hd]
            scores.clear();
            scores.extend(kh.chunks_exact(hd).map(|kr| dot(qh, kr) * scale));
            softmax_in_place(scores);
            o.fill(0.0);
            for (&p, vr) in scores.iter().zip(vh.chunks_exact(hd)) {
                for (acc, &x) in o.iter_mut().zip(vr) {
                    *acc += p * x;
                }
            }
        },
    );
}

/// Plain f32 dot product.
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive per-head attention in f64 with explicit loops.
    #[allow(clippy::too_many_arguments)]
    fn naive(q: &[f32], k: &[f32], v: &[f32], nh: usize, nkv: usize, hd: usize, max_seq: usize, pos0: usize) -> Vec<f32> {
        let n_tok = q.len() / (nh * hd);
        let mut out = vec![0.0f32; q.len()];
        for t in 0..n_tok {
            for h in 0..nh {
                let kvh = h * nkv / nh;
                let n = pos0 + t + 1;
                let mut s: Vec<f64> = (0..n)
                    .map(|p| {
                        (0..hd).map(|d| q[(t * nh + h) * hd + d] as f64 * k[(kvh * max_seq + p) * hd + d] as f64).sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                for x in s.iter_mut() {
                    *x = (*x - m).exp() / z;
                }
                for d in 0..hd {
                    out[(t * nh + h) * hd + d] = (0..n).map(|p| s[p] * v[(kvh * max_seq + p) * hd + d] as f64).sum::<f64>() as f32;
                }
            }
        }
        out
    }

    #[test]
    fn gqa_causal_matches_naive() {
        let (nh, nkv, hd, max_seq, pos0, n_tok) = (6, 2, 8, 16, 3, 4);
        let f = |i: usize, s: f32| ((i as f32) * s).sin();
        let q: Vec<f32> = (0..n_tok * nh * hd).map(|i| f(i, 0.31)).collect();
        let k: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.17)).collect();
        let v: Vec<f32> = (0..nkv * max_seq * hd).map(|i| f(i, 0.23)).collect();
        let mut out = vec![0.0; q.len()];
        let rt = crate::runtime::Runtime::new(2).unwrap();
        rt.install(|| attention(&q, &k, &v, AttnShape { n_heads: nh, n_kv_heads: nkv, head_dim: hd, max_seq, pos0 }, &mut out));
        let want = naive(&q, &k, &v, nh, nkv, hd, max_seq, pos0);
        for i in 0..out.len() {
            assert!((out[i] - want[i]).abs() < 1e-5, "{i}: {} vs {}", out[i], want[i]);
        }
    }

    #[test]
    fn single_position_returns_value() {
        // With one visible position the softmax weight is 1 and the output is V itself.
        let (hd, max_seq) = (4, 2);
        let q = vec![1.0f32, 2.0, 3.0, 4.0];
        let k = vec![0.5f32; max_seq * hd];
        let v = vec![9.0f32, 8.0, 7.0, 6.0, 0.0, 0.0, 0.0, 0.0];
        let mut out = vec![0.0; 4];
        attention(&q, &k, &v, AttnShape { n_heads: 1, n_kv_heads: 1, head_dim: hd, max_seq, pos0: 0 }, &mut out);
        assert_eq!(out, vec![9.0, 8.0, 7.0, 6.0]);
    }
}
