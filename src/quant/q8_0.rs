//! Q8_0: blocks of 32 elements, 34 bytes (ggml `block_q8_0`):
//! ```text
//! [0..2)   d   f16   scale
//! [2..34)  qs  i8×32 value_j = d * qs[j]
//! ```
//! Both a weight format and the activation format of Q4_0/Q5_0/Q8_0 weights.

use super::bytes::{f16_at, put_f16};
use super::contract::{quad_dot, quad_sums, Arith, BlockTerms, Portable, QuadBlock};
use super::QK;
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per block.
pub(crate) const BLOCK: usize = 2 + QK;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q8_0;

impl Format for Q8_0 {
    const TYPE: GgmlType = GgmlType::Q8_0;
    const ELEMENTS: usize = QK;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_0;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = Some(quantize);
}

/// Dequantizes whole Q8_0 blocks from `src` into `dst` (`dst.len()` a multiple of 32).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK>().0) {
        let d = f16_at(b);
        for (o, &q) in y.iter_mut().zip(&b[2..BLOCK]) {
            *o = q as i8 as f32 * d;
        }
    }
}

/// Quantizes `x` (a multiple of 32 long) into Q8_0 blocks as `quantize_row_q8_0_ref` does:
/// `d = max|x| / 127`, `qs = roundf(x / d)` (ties away from zero).
pub(crate) fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.as_chunks::<QK>().0.iter().zip(dst.as_chunks_mut::<BLOCK>().0) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        // 127 = largest i8 magnitude used symmetrically (-128 is never produced).
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(b, d);
        for (q, &v) in b[2..].iter_mut().zip(xb) {
            // `as i8` saturates (and maps NaN to 0), so hostile input cannot wrap.
            *q = (v * id).round() as i8 as u8;
        }
    }
}

/// A block's `(d, 0)` as f32, `d` converted by `F`: what a dot product of shape 2 needs of an
/// activation block besides its codes (`contract::quad_dot`; Q8_0 has no sum, and the formats it
/// is the activation of have no offset).
#[inline(always)]
pub(crate) fn scales<F: Arith>(b: &[u8; BLOCK]) -> (f32, f32) {
    (F::f16_at(b), 0.0)
}

/// Dot product of a Q8_0 weight row with Q8_0 activations: per block the exact integer sums of its quads, in
/// the contract's sixteen quad lanes (`contract::quad_dot`).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * BLOCK);
    let (w, a) = (w.as_chunks::<BLOCK>().0, act.as_chunks::<{ BLOCK }>().0);
    quad_dot::<Portable, Q8_0>(w, a, |i| scales::<Portable>(&a[i]))
}

/// The format as the contract's dot product sees it.
impl QuadBlock for Q8_0 {
    type W = [u8; BLOCK];
    type A = [u8; BLOCK];
    const OFFSETS: bool = false;

    #[inline(always)]
    fn terms<F: Arith>(x: &Self::W, y: &Self::A) -> BlockTerms {
        let xq: [i8; QK] = std::array::from_fn(|e| x[2 + e] as i8);
        let yq: &[u8; QK] = y[2..].try_into().expect("32 quants");
        let quads = quad_sums(&xq, yq);
        BlockTerms { quads, d: F::f16_at(x), m: 0.0 }
    }
}
