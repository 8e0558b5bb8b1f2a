//! Q5_1: blocks of 32 elements, 24 bytes (ggml `block_q5_1`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..4)   m   f16    offset (block minimum)
//! [4..8)   qh  u32 LE bit j = 5th (high) bit of element j
//! [8..24)  qs  u8×16  low 4 bits: element j (<16) = low nibble of qs[j], element j+16 = high nibble
//! value = d * (5-bit code) + m
//! ```
//! Dotted with Q8_1 activations (offset folded in through the activation block's `s`).

use super::bytes::f16_at;
use super::contract::{quad_dot, quad_sums, Arith, BlockTerms, Portable, QuadBlock};
use super::{q8_1, QK};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};
use crate::fileio::le;

/// Bytes per block.
pub(crate) const BLOCK: usize = 2 + 2 + 4 + QK / 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q5_1;

impl Format for Q5_1 {
    const TYPE: GgmlType = GgmlType::Q5_1;
    const ELEMENTS: usize = QK;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_1;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 32 unsigned 5-bit codes (0..=31) of a block in element order.
#[inline(always)]
fn codes(b: &[u8; BLOCK]) -> [u8; QK] {
    let qh = le::u32_at(b, 4).expect("inside the block");
    let mut v = [0u8; QK];
    for j in 0..QK / 2 {
        // Mask tests rather than variable shifts: per lane the masks are constants, so this vectorizes.
        let h0 = if qh & (1 << j) != 0 { 0x10 } else { 0 };
        let h1 = if qh & (1 << (j + 16)) != 0 { 0x10 } else { 0 };
        v[j] = (b[8 + j] & 0x0F) | h0;
        v[j + QK / 2] = (b[8 + j] >> 4) | h1;
    }
    v
}

/// Dequantizes whole Q5_1 blocks (`dequantize_row_q5_1`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK>().0) {
        let d = f16_at(&b[0..2]);
        let m = f16_at(&b[2..4]);
        for (o, &c) in y.iter_mut().zip(&codes(b)) {
            *o = c as f32 * d + m;
        }
    }
}

/// Dot product of a Q5_1 row with Q8_1 activations: as Q4_1 (`contract::quad_dot`).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * q8_1::BLOCK);
    let (w, a) = (w.as_chunks::<BLOCK>().0, act.as_chunks::<{ q8_1::BLOCK }>().0);
    quad_dot::<Portable, Q5_1>(w, a, |i| q8_1::scales::<Portable>(&a[i]))
}

/// The format as the contract's dot product sees it.
impl QuadBlock for Q5_1 {
    type W = [u8; BLOCK];
    type A = [u8; q8_1::BLOCK];
    const OFFSETS: bool = true;

    #[inline(always)]
    fn terms<F: Arith>(x: &Self::W, y: &Self::A) -> BlockTerms {
        // Unpack to codes in element order, then one u8×i8 dot (the shape that vectorizes well).
        let v = codes(x);
        let q8: &[u8; QK] = y[4..].try_into().expect("32 quants");
        let quads = quad_sums(&v, q8);
        BlockTerms { quads, d: F::f16_at(&x[0..2]), m: F::f16_at(&x[2..4]) }
    }
}
