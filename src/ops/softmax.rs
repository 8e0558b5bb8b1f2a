//! Log-softmax over a vector (with the engine's own `exp`/`ln`, `crate::kernels::math`); the
//! softmax itself is a kernel loop (`crate::kernels::softmax_in_place`).

use crate::kernels::math;

/// `log_softmax(x)`: `x[i] - max - ln(sum(exp(x - max)))`, computed in f64 for accuracy.
pub fn log_softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = x.iter().map(|&v| math::exp_f64(v as f64 - max)).sum();
    let lse = max + math::ln_f64(sum);
    x.iter().map(|&v| (v as f64 - lse) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::softmax_in_place;

    #[test]
    fn log_softmax_matches_log_of_softmax() {
        let x = vec![0.5f32, -1.0, 2.0, 0.0];
        let mut p = x.clone();
        softmax_in_place(&mut p);
        let l = log_softmax(&x);
        for i in 0..4 {
            assert!((l[i] - p[i].ln()).abs() < 1e-5);
        }
    }
}
