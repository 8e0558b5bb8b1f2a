//! Activation functions of the feed-forward block.

/// SiLU (swish): `x * sigmoid(x)`, with the engine's `exp` (`ops::math`).
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + super::math::exp(-x))
}

/// SwiGLU in place: `gate[i] = silu(gate[i]) * up[i]`.
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    assert_eq!(gate.len(), up.len(), "swiglu length mismatch");
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
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
}
