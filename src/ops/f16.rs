//! Half-precision (IEEE binary16) vector helpers with ggml's CPU rounding points.
//!
//! ggml keeps an f16 KV cache and, in its CPU flash attention, rounds some intermediate vectors to
//! f16. These helpers reproduce where the rounding happens: arithmetic is done in f32 and only the
//! stored result is rounded (round-to-nearest-even, as F16C's `vcvtps2ph` with mode 0 does).

pub use half::f16;

/// Converts `src` to f16 into `dst` (same length), round-to-nearest-even.
pub fn to_f16(dst: &mut [f16], src: &[f32]) {
    assert_eq!(dst.len(), src.len(), "to_f16 length mismatch");
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = f16::from_f32(s);
    }
}

/// Converts `src` to f32 into `dst` (same length); exact.
pub fn to_f32(dst: &mut [f32], src: &[f16]) {
    assert_eq!(dst.len(), src.len(), "to_f32 length mismatch");
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s.to_f32();
    }
}

/// Dot product of two f16 vectors: products of the exact f32 widenings, summed in f32 (ggml's
/// `ggml_vec_dot_f16` sums in f32 SIMD lanes; products of two f16 values are exact in f32, so only
/// the summation order differs, a difference far below the f16 input rounding).
#[inline]
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    assert_eq!(a.len(), b.len(), "dot_f16 length mismatch");
    a.iter().zip(b).map(|(x, y)| x.to_f32() * y.to_f32()).sum()
}

/// `y = f16(y + x·v)` elementwise (ggml's `ggml_vec_mad_f16`: widen, fused multiply-add in f32,
/// round the result back to f16).
#[inline]
pub fn mad_f16(y: &mut [f16], x: &[f16], v: f32) {
    assert_eq!(y.len(), x.len(), "mad_f16 length mismatch");
    for (a, &b) in y.iter_mut().zip(x) {
        *a = f16::from_f32(b.to_f32().mul_add(v, a.to_f32()));
    }
}

/// `y = f16(y·v)` elementwise (ggml's `ggml_vec_scale_f16`).
#[inline]
pub fn scale_f16(y: &mut [f16], v: f32) {
    for a in y.iter_mut() {
        *a = f16::from_f32(a.to_f32() * v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rounding() {
        let src = [0.0f32, 1.0, -2.5, 65504.0, 1.0 + 1.0 / 4096.0];
        let mut h = [f16::ZERO; 5];
        to_f16(&mut h, &src);
        let mut back = [0.0f32; 5];
        to_f32(&mut back, &h);
        assert_eq!(&back[..4], &src[..4]);
        // 1 + 2^-12 is halfway between 1 and 1 + 2^-10's neighbour below: ties round to even (1.0).
        assert_eq!(back[4], 1.0);
    }

    #[test]
    fn dot_mad_scale() {
        let a: Vec<f16> = [1.0f32, 2.0, 3.0].iter().map(|&x| f16::from_f32(x)).collect();
        let b: Vec<f16> = [0.5f32, -1.0, 2.0].iter().map(|&x| f16::from_f32(x)).collect();
        assert_eq!(dot_f16(&a, &b), 0.5 - 2.0 + 6.0);
        let mut y = a.clone();
        mad_f16(&mut y, &b, 2.0);
        assert_eq!(y.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), vec![2.0, 0.0, 7.0]);
        scale_f16(&mut y, 0.5);
        assert_eq!(y.iter().map(|v| v.to_f32()).collect::<Vec<_>>(), vec![1.0, 0.0, 3.5]);
        // The accumulator is rounded after every step: 2048 + 1 is not representable in f16.
        let mut acc = vec![f16::from_f32(2048.0)];
        mad_f16(&mut acc, &[f16::ONE], 1.0);
        assert_eq!(acc[0].to_f32(), 2048.0);
    }
}
