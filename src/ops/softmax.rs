//! Softmax and log-softmax over a vector (with the engine's own `exp`/`ln`, `ops::math`).

use super::math;

/// Numerically stable softmax in place (subtracts the maximum first). Sum is accumulated in f64.
pub fn softmax_in_place(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f64;
    for v in x.iter_mut() {
        *v = super::math::exp(*v - max);
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

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

    #[test]
    fn softmax_sums_to_one_and_orders() {
        let mut x = vec![1.0f32, 2.0, 3.0, 1000.0];
        softmax_in_place(&mut x);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[3] > 0.999);
        let mut y = vec![0.0f32, (2.0f32).ln()];
        softmax_in_place(&mut y);
        assert!((y[0] - 1.0 / 3.0).abs() < 1e-6 && (y[1] - 2.0 / 3.0).abs() < 1e-6);
    }

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
