//! Q4_0: blocks of 32 elements, 18 bytes (ggml `block_q4_0`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..18)  qs  u8×16  element j (<16) = low nibble of qs[j], element j+16 = high nibble of qs[j]
//! value = d * (nibble - 8)
//! ```
//! Dotted with Q8_0 activations.

use super::bytes::f16_at;
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
