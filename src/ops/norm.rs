//! RMS normalisation (`ggml_rms_norm` followed by the elementwise weight multiply).

/// `out[i] = x[i] / sqrt(mean(x²) + eps) * w[i]`, for one vector of length `w.len()`.
///
/// The sum of squares is accumulated in f64, as ggml does (`ggml_float`), so long rows do not
/// lose precision.
pub fn rmsnorm(out: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    assert!(out.len() == x.len() && x.len() == w.len(), "rmsnorm length mismatch");
    let sum: f64 = x.iter().map(|&v| (v as f64) * (v as f64)).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0 / (mean + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = v * scale * g;
    }
}

/// In-place RMS normalisation of every `w.len()`-long chunk of `x` (e.g. per-head QK-norm).
pub fn rmsnorm_chunks_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    assert!(x.len().is_multiple_of(w.len()), "rmsnorm_chunks length mismatch");
    let mut tmp = vec![0.0f32; w.len()]; // [chunk]
    for chunk in x.chunks_exact_mut(w.len()) {
        rmsnorm(&mut tmp, chunk, w, eps);
        chunk.copy_from_slice(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_formula() {
        let x = [1.0f32, -2.0, 3.0, 0.5];
        let w = [1.0f32, 0.5, 2.0, -1.0];
        let mut out = [0.0f32; 4];
        rmsnorm(&mut out, &x, &w, 1e-5);
        let ms = (1.0 + 4.0 + 9.0 + 0.25) / 4.0;
        let s = 1.0 / (ms + 1e-5f64).sqrt();
        for i in 0..4 {
            let want = (x[i] as f64 * s * w[i] as f64) as f32;
            assert!((out[i] - want).abs() < 1e-6, "{i}: {} vs {want}", out[i]);
        }
    }

    #[test]
    fn chunks_normalise_independently() {
        let mut x = vec![1.0f32, 1.0, 10.0, 10.0]; // two chunks of 2
        rmsnorm_chunks_in_place(&mut x, &[1.0, 1.0], 0.0);
        for v in x {
            assert!((v - 1.0).abs() < 1e-6);
        }
    }
}
