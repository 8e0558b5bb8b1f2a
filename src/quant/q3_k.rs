//! Q3_K: super-blocks of 256 elements, 110 bytes (ggml `block_q3_K`), 16 sub-blocks of 16:
//! ```text
//! [0..32)    hmask   u8×32  3rd bit of element e: bit e/32 of hmask[e%32]; a CLEAR bit means code − 4
//! [32..96)   qs      u8×64  low 2 bits: element e sits in byte 32*(e/128) + e%32 at bit 2*((e%128)/32)
//! [96..108)  scales  u8×12  sixteen 6-bit scales (biased by 32), packed (see `scale`)
//! [108..110) d       f16    super-scale
//! value = d * (scale[e/16] − 32) * code   (code −4..=3)
//! ```
//! Dotted with Q8_K activations.

use super::bytes::{f16_at, f32_at};
use super::contract::chain;
use super::{q8_k, QK_K};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = QK_K / 8 + QK_K / 4 + 12 + 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q3_K;

impl Format for Q3_K {
    const TYPE: GgmlType = GgmlType::Q3_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// The signed scale (−32..=31) of sub-block `g` (0..16) from the 12 packed bytes `s`: the low 4 bits are
/// a nibble of bytes 0..8 (sub-blocks 0..4 and 8..12 use bytes 0..4, low then high nibble; 4..8 and
/// 12..16 use bytes 4..8), the top 2 bits come from byte 8 + g%4 at bit 2*(g/4).
#[inline(always)]
pub(crate) fn scale(g: usize, s: &[u8]) -> i32 {
    let (k, grp) = (g % 4, g / 4);
    let byte = s[k + 4 * (grp & 1)];
    let low = if grp >= 2 { byte >> 4 } else { byte & 0x0F };
    let high = (s[8 + k] >> (2 * grp)) & 3;
    // 32: the bias that makes the stored 6-bit value signed.
    (low | (high << 4)) as i32 - 32
}

/// Unpacks the 256 signed codes (−4..=3) of a super-block in element order.
#[inline(always)]
fn codes(b: &[u8; BLOCK]) -> [i8; QK_K] {
    let mut v = [0i8; QK_K];
    let hmask = &b[0..32];
    for h in 0..2 {
        let qs = &b[32 + 32 * h..32 + 32 * h + 32];
        for j in 0..4 {
            let m = 1u8 << (4 * h + j);
            for l in 0..32 {
                let low = (qs[l] >> (2 * j)) & 3;
                // 4: weight of the 3rd bit, which ggml stores inverted (set = no subtraction).
                v[128 * h + 32 * j + l] = low as i8 - if hmask[l] & m != 0 { 0 } else { 4 };
            }
        }
    }
    v
}

/// Dequantizes whole Q3_K super-blocks (`dequantize_row_q3_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f16_at(&b[108..110]);
        let v = codes(b);
        for g in 0..QK_K / 16 {
            let dl = d * scale(g, &b[96..108]) as f32;
            for e in 16 * g..16 * g + 16 {
                y[e] = dl * v[e] as f32;
            }
        }
    }
}

/// Dot product of a Q3_K row with Q8_K activations, the contract's super-block chain
/// (`contract::chain`): per super-block the exact `total = Σ_g scale_g · Σ_{i in g} code_i · q8_i`,
/// then `acc = fma(total, d·d_a, acc)`.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * q8_k::BLOCK);
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ q8_k::BLOCK }>().0) {
        let v = codes(x);
        let q8 = &y[q8_k::QS..q8_k::BSUMS];
        let mut total = 0i32;
        let sums = q8_k::group_sums(&v, q8);
        for (g, &s) in sums.iter().enumerate() {
            total += scale(g, &x[96..108]) * s;
        }
        acc = chain(acc, total, f16_at(&x[108..110]) * f32_at(y));
    }
    acc
}
