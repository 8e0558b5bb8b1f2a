//! Q5_0: blocks of 32 elements, 22 bytes (ggml `block_q5_0`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..6)   qh  u32 LE bit j = 5th (high) bit of element j
//! [6..22)  qs  u8×16  low 4 bits: element j (<16) = low nibble of qs[j], element j+16 = high nibble
//! value = d * (5-bit code - 16)
//! ```
//! Dotted with Q8_0 activations.

use super::bytes::f16_at;
use super::contract::{quad_dot, quad_sums, Arith, BlockTerms, Portable, QuadBlock};
use super::{q8_0, QK};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};
use crate::fileio::le;

/// Bytes per block.
pub(crate) const BLOCK: usize = 2 + 4 + QK / 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q5_0;

impl Format for Q5_0 {
    const TYPE: GgmlType = GgmlType::Q5_0;
    const ELEMENTS: usize = QK;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_0;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 32 signed 5-bit codes (-16..=15) of a block in element order.
#[inline(always)]
fn codes(b: &[u8; BLOCK]) -> [i8; QK] {
    let qh = le::u32_at(b, 2).expect("inside the block");
    let mut v = [0i8; QK];
    for j in 0..QK / 2 {
        // Mask tests rather than variable shifts: per lane the masks are constants, so this vectorizes.
        let h0 = if qh & (1 << j) != 0 { 0x10 } else { 0 };
        let h1 = if qh & (1 << (j + 16)) != 0 { 0x10 } else { 0 };
        // 16: midpoint of the 5-bit range, making the code signed.
        v[j] = ((b[6 + j] & 0x0F) | h0) as i8 - 16;
        v[j + QK / 2] = ((b[6 + j] >> 4) | h1) as i8 - 16;
    }
    v
}

/// Dequantizes whole Q5_0 blocks (`dequantize_row_q5_0`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK>().0) {
        let d = f16_at(b);
        for (o, &c) in y.iter_mut().zip(&codes(b)) {
            *o = c as f32 * d;
        }
    }
}

/// Dot product of a Q5_0 row with Q8_0 activations: per block the exact integer sums of its quads, in
/// the contract's sixteen quad lanes (`contract::quad_dot`).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * q8_0::BLOCK);
    let (w, a) = (w.as_chunks::<BLOCK>().0, act.as_chunks::<{ q8_0::BLOCK }>().0);
    quad_dot::<Portable, Q5_0>(w, a, |i| q8_0::scales::<Portable>(&a[i]))
}

/// The format as the contract's dot product sees it.
impl QuadBlock for Q5_0 {
    type W = [u8; BLOCK];
    type A = [u8; q8_0::BLOCK];
    const OFFSETS: bool = false;

    #[inline(always)]
    fn terms<F: Arith>(x: &Self::W, y: &Self::A) -> BlockTerms {
        // Unpack to signed codes in element order, then one i8×i8 dot (the shape that vectorizes well).
        let v = codes(x);
        let q8: &[u8; QK] = y[2..].try_into().expect("32 quants");
        let quads = quad_sums(&v, q8);
        BlockTerms { quads, d: F::f16_at(x), m: 0.0 }
    }
}
