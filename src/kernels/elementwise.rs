//! The element-wise loops that the kernel tiers compile for their instruction sets: SwiGLU of the
//! feed-forward block and the softmax of attention scores. These are the scalar references
//! (`KernelSet::swiglu`, `KernelSet::softmax` of every tier run these same operations, so the same
//! bits: the engine's own `exp`, `crate::kernels::math`, no libm).

use crate::kernels::math;

/// SiLU (swish): `x * sigmoid(x)`, with the engine's `exp` (`crate::kernels::math`).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + math::exp(-x))
}

/// SwiGLU in place: `gate[i] = silu(gate[i]) * up[i]` (a loop that vectorizes).
#[inline]
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu length mismatch");
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// Numerically stable softmax in place (subtracts the maximum first). Sum is accumulated in f64,
/// in element order. The exponentials are one loop of their own, which vectorizes.
#[inline]
pub fn softmax_in_place(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for v in x.iter_mut() {
        *v = math::exp(*v - max);
    }
    let mut sum = 0.0f64;
    for &v in x.iter() {
        sum += v as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_values() {
        assert_eq!(silu(0.0), 0.0);
        assert!((silu(1.0) - 0.731_058_6).abs() < 1e-6);
        assert!((silu(-1.0) + 0.268_941_4).abs() < 1e-6);
        // Large negative inputs go to zero without NaN (exp overflows to inf, x/inf = -0).
        assert_eq!(silu(-200.0), 0.0);
        assert!((silu(50.0) - 50.0).abs() < 1e-4);
    }

    #[test]
    fn swiglu_multiplies() {
        let mut g = vec![1.0f32, 0.0, -1.0];
        swiglu(&mut g, &[2.0, 5.0, 3.0]);
        assert!((g[0] - 2.0 * 0.731_058_6).abs() < 1e-6);
        assert_eq!(g[1], 0.0);
        assert!((g[2] + 3.0 * 0.268_941_4).abs() < 1e-6);
    }

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
}
