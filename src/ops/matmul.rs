//! Row-parallel matrix × activations over quantized weight rows.

use rayon::prelude::*;

/// A quantized dot product: `(n, weight_row_bytes, activation_row_bytes) -> f32` over `n` elements
/// (the quant module's `vec_dot_fn`; it trusts that both slices hold exactly `n` elements).
pub type VecDotFn = fn(usize, &[u8], &[u8]) -> f32;

/// Rows processed by one rayon task: big enough that task overhead is negligible next to the
/// dot products, small enough that 2–8 threads get many tasks each for load balancing.
const ROW_CHUNK: usize = 16;

/// A weight matrix as quantized rows borrowed from the model file.
#[derive(Clone, Copy)]
pub struct WeightRows<'a> {
    /// `[rows, row_bytes]`
    pub data: &'a [u8],
    pub rows: usize,
    /// Elements per row (the dot-product length).
    pub cols: usize,
    pub row_bytes: usize,
    /// Dot product of one weight row with one activation row of the matching activation type.
    pub dot: VecDotFn,
}

impl std::fmt::Debug for WeightRows<'_> {
    /// Short summary (the weights themselves are not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeightRows").field("rows", &self.rows).field("cols", &self.cols).finish()
    }
}

/// `out[t, r] = dot(w[r], acts[t])` for `n_tok` activation rows.
///
/// - `acts`: `[n_tok, act_row_bytes]`, already quantized to the weight's activation type
/// - `out`: `[n_tok, w.rows]`
///
/// Parallel over weight rows; for each row every token is processed before moving on, so each
/// weight row is read from memory once per batch. Call inside `Runtime::install`.
pub fn matmul(w: WeightRows<'_>, acts: &[u8], act_row_bytes: usize, n_tok: usize, out: &mut [f32]) {
    assert_eq!(w.data.len(), w.rows * w.row_bytes, "weight bytes do not match shape");
    assert_eq!(acts.len(), n_tok * act_row_bytes, "activation bytes do not match shape");
    assert_eq!(out.len(), n_tok * w.rows, "output shape mismatch");
    let (rb, cols, dot) = (w.row_bytes, w.cols, w.dot);
    if n_tok == 1 {
        out.par_chunks_mut(ROW_CHUNK).enumerate().for_each(|(c, o)| {
            let r0 = c * ROW_CHUNK;
            for (i, y) in o.iter_mut().enumerate() {
                let r = r0 + i;
                *y = dot(cols, &w.data[r * rb..(r + 1) * rb], acts);
            }
        });
        return;
    }
    let mut tmp = vec![0.0f32; w.rows * n_tok]; // [rows, n_tok]
    tmp.par_chunks_mut(ROW_CHUNK * n_tok).enumerate().for_each(|(c, o)| {
        let r0 = c * ROW_CHUNK;
        for (i, orow) in o.chunks_exact_mut(n_tok).enumerate() {
            let r = r0 + i;
            let wr = &w.data[r * rb..(r + 1) * rb];
            for (t, y) in orow.iter_mut().enumerate() {
                *y = dot(cols, wr, &acts[t * act_row_bytes..(t + 1) * act_row_bytes]);
            }
        }
    });
    // [rows, n_tok] -> [n_tok, rows]
    out.par_chunks_mut(w.rows).enumerate().for_each(|(t, o)| {
        for (r, y) in o.iter_mut().enumerate() {
            *y = tmp[r * n_tok + t];
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32 dot over little-endian bytes (a test stand-in for a quantized kernel).
    fn dot_f32(n: usize, a: &[u8], b: &[u8]) -> f32 {
        let f = |s: &[u8], i: usize| f32::from_le_bytes(s[4 * i..4 * i + 4].try_into().unwrap());
        (0..n).map(|i| f(a, i) * f(b, i)).sum()
    }

    /// f32 values as little-endian bytes.
    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn batch_and_single_match_naive() {
        let (rows, cols) = (37, 8); // not a multiple of ROW_CHUNK on purpose
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7 % 13) as f32) - 6.0).collect();
        let wb = bytes(&w);
        let wr = WeightRows { data: &wb, rows, cols, row_bytes: cols * 4, dot: dot_f32 };
        let rt = crate::runtime::Runtime::new(2).unwrap();
        for n_tok in [1usize, 3] {
            let x: Vec<f32> = (0..n_tok * cols).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
            let xb = bytes(&x);
            let mut out = vec![0.0; n_tok * rows];
            rt.install(|| matmul(wr, &xb, cols * 4, n_tok, &mut out));
            for t in 0..n_tok {
                for r in 0..rows {
                    let want: f32 = (0..cols).map(|c| w[r * cols + c] * x[t * cols + c]).sum();
                    assert_eq!(out[t * rows + r], want, "t {t} r {r}");
                }
            }
        }
    }
}
