//! Q5_K: super-blocks of 256 elements, 176 bytes (ggml `block_q5_K`), 8 sub-blocks of 32:
//! ```text
//! [0..2)     d       f16     super-scale of the sub-block scales
//! [2..4)     dmin    f16     super-scale of the sub-block mins
//! [4..16)    scales  u8×12   eight 6-bit scales and eight 6-bit mins, packed as in Q4_K
//! [16..48)   qh      u8×32   5th bits: bit 2c of qh[l] belongs to element 64c+l, bit 2c+1 to 64c+32+l
//! [48..176)  qs      u8×128  low 4 bits; chunk c (0..4) of 32 bytes holds sub-block 2c in its low
//!                            nibbles and sub-block 2c+1 in its high nibbles
//! value = d*sc[j] * code - dmin*m[j]   (code 0..=31)
//! ```
//! Dotted with Q8_K activations.

use super::bytes::f16_at;
use super::q4_k::{add_block, scale_min};
use super::{q8_k, QK_K};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = 2 + 2 + 12 + QK_K / 8 + QK_K / 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q5_K;

impl Format for Q5_K {
    const TYPE: GgmlType = GgmlType::Q5_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 64 codes (0..=31) of chunk `c` (sub-blocks 2c and 2c+1) in element order.
#[inline(always)]
fn chunk_codes(b: &[u8; BLOCK], c: usize) -> [u8; 64] {
    let qh = &b[16..48];
    let ql = &b[48 + 32 * c..48 + 32 * c + 32];
    let (m0, m1) = (1u8 << (2 * c), 2u8 << (2 * c));
    let mut v = [0u8; 64];
    for l in 0..32 {
        // 16 = the 5th bit's weight.
        v[l] = (ql[l] & 0x0F) + if qh[l] & m0 != 0 { 16 } else { 0 };
        v[l + 32] = (ql[l] >> 4) + if qh[l] & m1 != 0 { 16 } else { 0 };
    }
    v
}

/// Dequantizes whole Q5_K super-blocks (`dequantize_row_q5_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f16_at(&b[0..2]);
        let dmin = f16_at(&b[2..4]);
        let scales = &b[4..16];
        for c in 0..4 {
            let (sc0, m0) = scale_min(2 * c, scales);
            let (sc1, m1) = scale_min(2 * c + 1, scales);
            let (d0, dm0) = (d * sc0 as f32, dmin * m0 as f32);
            let (d1, dm1) = (d * sc1 as f32, dmin * m1 as f32);
            let v = chunk_codes(b, c);
            let out = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                out[l] = d0 * v[l] as f32 - dm0;
                out[l + 32] = d1 * v[l + 32] as f32 - dm1;
            }
        }
    }
}

/// Dot product of a Q5_K row with Q8_K activations: as Q4_K (the contract's super-block chain,
/// `q4_k::add_block`), with 5-bit codes.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * q8_k::BLOCK);
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ q8_k::BLOCK }>().0) {
        let mut codes = [0u8; QK_K];
        for c in 0..4 {
            codes[64 * c..64 * c + 64].copy_from_slice(&chunk_codes(x, c));
        }
        let sums = q8_k::group_sums(&codes, &y[q8_k::QS..q8_k::BSUMS]);
        acc = add_block(acc, &sums, x, y);
    }
    acc
}
