//! Q4_0: blocks of 32 elements, 18 bytes (ggml `block_q4_0`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..18)  qs  u8×16  element j (<16) = low nibble of qs[j], element j+16 = high nibble of qs[j]
//! value = d * (nibble - 8)
//! ```
//! Dotted with Q8_0 activations.

use super::bytes::{f16_at, put_f16};
use super::contract::{quad_dot, quad_sums, Arith, BlockTerms, Portable, QuadBlock};
use super::{q8_0, QK};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per block.
pub(crate) const BLOCK: usize = 2 + QK / 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q4_0;

impl Format for Q4_0 {
    const TYPE: GgmlType = GgmlType::Q4_0;
    const ELEMENTS: usize = QK;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_0;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Dequantizes whole Q4_0 blocks (`dequantize_row_q4_0`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK>().0) {
        let d = f16_at(b);
        let qs = &b[2..BLOCK];
        for j in 0..QK / 2 {
            // 8: the nibble's midpoint, making the 4-bit code signed (-8..=7).
            y[j] = ((qs[j] & 0x0F) as i32 - 8) as f32 * d;
            y[j + QK / 2] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// Quantizes whole blocks of f32 weights to Q4_0 exactly as ggml's `quantize_row_q4_0_ref` (what
/// `llama-quantize` runs without an importance matrix): the block's largest magnitude keeps its sign
/// and becomes code 0 (`d = max / -8`), so the extreme value is exact and the other side of zero gets
/// the 7 remaining steps; the codes are `min(15, trunc(x/d + 8.5))` (8.5: the midpoint 8 plus 0.5,
/// rounding half up by truncation of a non-negative value; 15: `x == -max` would give 16). `d` is
/// stored as f16 but the codes use the unrounded `1/d`, as ggml does. A weight format only: not the
/// table's `QUANTIZE` (activation quantizers), which the forward pass dispatches on.
pub(crate) fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.as_chunks::<QK>().0.iter().zip(dst.as_chunks_mut::<BLOCK>().0) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in xb {
            // Strictly greater: the first of equal magnitudes wins, as in ggml.
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        // -8: the most negative 4-bit code after the midpoint offset.
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(b, d);
        // `as i8` truncates toward zero like C's `(int8_t)` on these non-negative in-range values
        // (and saturates, where C would be undefined, on NaN or infinite input).
        let code = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
        for j in 0..QK / 2 {
            b[2 + j] = code(xb[j]) | (code(xb[j + QK / 2]) << 4);
        }
    }
}

/// Dot product of a Q4_0 row with Q8_0 activations: per block the exact integer sums of its quads, in
/// the contract's sixteen quad lanes (`contract::quad_dot`).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * q8_0::BLOCK);
    let (w, a) = (w.as_chunks::<BLOCK>().0, act.as_chunks::<{ q8_0::BLOCK }>().0);
    quad_dot::<Portable, Q4_0>(w, a, |i| q8_0::scales::<Portable>(&a[i]))
}

/// The format as the contract's dot product sees it.
impl QuadBlock for Q4_0 {
    type W = [u8; BLOCK];
    type A = [u8; q8_0::BLOCK];
    const OFFSETS: bool = false;

    #[inline(always)]
    fn terms<F: Arith>(x: &Self::W, y: &Self::A) -> BlockTerms {
        let qs = &x[2..BLOCK];
        // Unpack to signed codes in element order, then one i8×i8 dot (the shape that vectorizes well).
        let mut v = [0i8; QK];
        for j in 0..QK / 2 {
            v[j] = (qs[j] & 0x0F) as i8 - 8;
            v[j + QK / 2] = (qs[j] >> 4) as i8 - 8;
        }
        let q8: &[u8; QK] = y[2..].try_into().expect("32 quants");
        let quads = quad_sums(&v, q8);
        BlockTerms { quads, d: F::f16_at(x), m: 0.0 }
    }
}
