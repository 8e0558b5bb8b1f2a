//! Q4_1: blocks of 32 elements, 20 bytes (ggml `block_q4_1`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..4)   m   f16    offset (block minimum)
//! [4..20)  qs  u8×16  element j (<16) = low nibble of qs[j], element j+16 = high nibble
//! value = d * nibble + m
//! ```
//! Dotted with Q8_1 activations: sum(w*a) = d_w*d_a*sum(q_w*q_a) + m_w * (d_a*sum(q_a)) = … + m_w*s_a.

use super::bytes::f16_at;
use super::contract::{quad_dot, quad_sums, Arith, BlockTerms, Portable, QuadBlock};
use super::{q8_1, QK};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per block.
pub(crate) const BLOCK: usize = 4 + QK / 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q4_1;

impl Format for Q4_1 {
    const TYPE: GgmlType = GgmlType::Q4_1;
    const ELEMENTS: usize = QK;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_1;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Dequantizes whole Q4_1 blocks (`dequantize_row_q4_1`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK>().0) {
        let d = f16_at(&b[0..2]);
        let m = f16_at(&b[2..4]);
        let qs = &b[4..BLOCK];
        for j in 0..QK / 2 {
            y[j] = (qs[j] & 0x0F) as f32 * d + m;
            y[j + QK / 2] = (qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// Dot product of a Q4_1 row with Q8_1 activations: per block the exact integer dot and the offset
/// term `m_w · s_a`, in the contract's sixteen quad lanes (`contract::quad_dot`).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * q8_1::BLOCK);
    let (w, a) = (w.as_chunks::<BLOCK>().0, act.as_chunks::<{ q8_1::BLOCK }>().0);
    quad_dot::<Portable, Q4_1>(w, a, |i| q8_1::scales::<Portable>(&a[i]))
}

/// The format as the contract's dot product sees it.
impl QuadBlock for Q4_1 {
    type W = [u8; BLOCK];
    type A = [u8; q8_1::BLOCK];
    const OFFSETS: bool = true;

    #[inline(always)]
    fn terms<F: Arith>(x: &Self::W, y: &Self::A) -> BlockTerms {
        let qs = &x[4..BLOCK];
        let q8 = &y[4..q8_1::BLOCK];
        // Element e < 16 is the low nibble of qs[e], element e >= 16 the high nibble of qs[e - 16].
        let mut v = [0u8; QK];
        for j in 0..QK / 2 {
            v[j] = qs[j] & 0x0F;
            v[j + QK / 2] = qs[j] >> 4;
        }
        let q8: &[u8; QK] = q8.try_into().expect("32 quants");
        let quads = quad_sums(&v, q8);
        BlockTerms { quads, d: F::f16_at(&x[0..2]), m: F::f16_at(&x[2..4]) }
    }
}
