//! Q6_K: super-blocks of 256 elements, 210 bytes (ggml `block_q6_K`), 16 sub-blocks of 16:
//! ```text
//! [0..128)    ql      u8×128  low 4 bits of the 6-bit codes
//! [128..192)  qh      u8×64   high 2 bits of the codes, four per byte
//! [192..208)  scales  i8×16   signed 8-bit sub-block scales
//! [208..210)  d       f16     super-scale
//! value = d * scales[g] * (code - 32)
//! ```
//! Each half h (0..2) of 128 elements uses ql[64h..64h+64], qh[32h..32h+32], scales[8h..8h+8]; within a
//! half, for l in 0..32, element l takes ql[l] low / qh[l] bits 0-1, element l+32 takes ql[l+32] low /
//! bits 2-3, l+64 takes ql[l] high / bits 4-5, l+96 takes ql[l+32] high / bits 6-7; scale index
//! (within the half) is l/16 + {0,2,4,6}. Dotted with Q8_K activations.

use super::bytes::{f16_at, f32_at};
use super::contract::chain;
use super::{q8_k, QK_K};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = QK_K / 2 + QK_K / 4 + QK_K / 16 + 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q6_K;

impl Format for Q6_K {
    const TYPE: GgmlType = GgmlType::Q6_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 256 signed codes (code - 32, in -32..=31) of one super-block in element order.
#[inline(always)]
fn codes(b: &[u8], out: &mut [i8; QK_K]) {
    for h in 0..2 {
        let ql = &b[64 * h..64 * h + 64];
        let qh = &b[128 + 32 * h..128 + 32 * h + 32];
        let o = &mut out[128 * h..128 * h + 128];
        for l in 0..32 {
            // 32: midpoint of the 6-bit range, making the code signed.
            o[l] = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i8 - 32;
            o[l + 32] = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            o[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            o[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
}

/// Dequantizes whole Q6_K super-blocks (`dequantize_row_q6_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    let mut q = [0i8; QK_K];
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f16_at(&b[208..210]);
        codes(b, &mut q);
        // Element e belongs to 16-wide sub-block e/16, whose scale is scales[e/16]
        // (the half/offset arithmetic of the layout collapses to this).
        for g in 0..QK_K / 16 {
            let ds = d * b[192 + g] as i8 as f32;
            for k in 16 * g..16 * g + 16 {
                y[k] = ds * q[k] as f32;
            }
        }
    }
}

/// Dot product of a Q6_K row with Q8_K activations, the contract's super-block chain
/// (`contract::chain`): per super-block the exact `total = Σ_g scales[g] · Σ_{i in g} (code_i - 32) · q8_i`
/// (16-element groups g), then `acc = fma(total, d·d_a, acc)`.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * q8_k::BLOCK);
    let mut q = [0i8; QK_K];
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ q8_k::BLOCK }>().0) {
        codes(x, &mut q);
        let q8 = &y[q8_k::QS..q8_k::BSUMS];
        let mut total = 0i32;
        let sums = q8_k::group_sums(&q, q8);
        for (g, &s) in sums.iter().enumerate() {
            total += x[192 + g] as i8 as i32 * s;
        }
        acc = chain(acc, total, f16_at(&x[208..210]) * f32_at(y));
    }
    acc
}
