//! Q8_1: blocks of 32 elements, 36 bytes (ggml `block_q8_1`):
//! ```text
//! [0..2)   d   f16   scale
//! [2..4)   s   f16   d * sum(qs)  (lets Q4_1/Q5_1 fold their offset `m` in with one multiply)
//! [4..36)  qs  i8×32 value_j = d * qs[j]
//! ```
//! The activation format of Q4_1/Q5_1 weights.

use super::bytes::{f16_at, put_f16};
use super::contract::Arith;
use super::QK;
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per block.
pub(crate) const BLOCK: usize = 4 + QK;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q8_1;

impl Format for Q8_1 {
    const TYPE: GgmlType = GgmlType::Q8_1;
    const ELEMENTS: usize = QK;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_1;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = None;
    const QUANTIZE: Option<QuantizeFn> = Some(quantize);
}

/// A block's `(d, s)` as f32, converted by `F`: what a dot product of shape 2 needs of an
/// activation block besides its codes (`contract::quad_dot`).
#[inline(always)]
pub(crate) fn scales<F: Arith>(b: &[u8; BLOCK]) -> (f32, f32) {
    (F::f16_at(&b[0..2]), F::f16_at(&b[2..4]))
}

/// Dequantizes whole Q8_1 blocks (ignores `s`, which is derived).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK>().0) {
        let d = f16_at(b);
        for (o, &q) in y.iter_mut().zip(&b[4..BLOCK]) {
            *o = q as i8 as f32 * d;
        }
    }
}

/// Quantizes `x` into Q8_1 blocks as `quantize_row_q8_1_ref` does: like Q8_0, plus
/// `s = f16(d * sum(qs))` computed with the unrounded f32 `d`.
pub(crate) fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.as_chunks::<QK>().0.iter().zip(dst.as_chunks_mut::<BLOCK>().0) {
        let amax = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        // 127: symmetric i8 range, as in Q8_0.
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in b[4..].iter_mut().zip(xb) {
            let qi = (v * id).round() as i8;
            sum += qi as i32;
            *q = qi as u8;
        }
        put_f16(&mut b[0..2], d);
        put_f16(&mut b[2..4], sum as f32 * d);
    }
}
