//! Q2_K: super-blocks of 256 elements, 84 bytes (ggml `block_q2_K`), 16 sub-blocks of 16:
//! ```text
//! [0..16)   scales  u8×16  sub-block g: scale = low nibble, min = high nibble
//! [16..80)  qs      u8×64  2-bit codes: element e sits in byte 32*(e/128) + e%32 at bit 2*((e%128)/32)
//! [80..82)  d       f16    super-scale of the scales
//! [82..84)  dmin    f16    super-scale of the mins
//! value = d*scale[e/16] * code - dmin*min[e/16]   (code 0..=3)
//! ```
//! Dotted with Q8_K activations.

use super::bytes::{f16_at, f32_at};
use super::contract::chain;
use super::{q8_k, QK_K};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = QK_K / 16 + QK_K / 4 + 2 + 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q2_K;

impl Format for Q2_K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 256 codes (0..=3) of a super-block in element order.
#[inline(always)]
fn codes(b: &[u8; BLOCK]) -> [u8; QK_K] {
    let mut v = [0u8; QK_K];
    for h in 0..2 {
        let qs = &b[16 + 32 * h..16 + 32 * h + 32];
        for j in 0..4 {
            for l in 0..32 {
                v[128 * h + 32 * j + l] = (qs[l] >> (2 * j)) & 3;
            }
        }
    }
    v
}

/// Dequantizes whole Q2_K super-blocks (`dequantize_row_q2_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f16_at(&b[80..82]);
        let dmin = f16_at(&b[82..84]);
        let v = codes(b);
        for ((&sc, yg), vg) in
            b[..QK_K / 16].iter().zip(y.chunks_exact_mut(16)).zip(v.chunks_exact(16))
        {
            let (dl, ml) = (d * (sc & 0x0F) as f32, dmin * (sc >> 4) as f32);
            for (o, &c) in yg.iter_mut().zip(vg) {
                *o = dl * c as f32 - ml;
            }
        }
    }
}

/// Dot product of a Q2_K row with Q8_K activations, the contract's super-block chain
/// (`contract::chain`): per super-block the exact `isum = Σ_g scale_g · Σ code·q8` and
/// `summs = Σ_g min_g · bsums[g]`, then `acc = fma(isum, d·d_a, acc)`, `acc = fma(summs, -(dmin·d_a), acc)`.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * q8_k::BLOCK);
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ q8_k::BLOCK }>().0) {
        let v = codes(x);
        let q8 = &y[q8_k::QS..q8_k::BSUMS];
        let (mut isum, mut summs) = (0i32, 0i32);
        let sums = q8_k::group_sums(&v, q8);
        // The first 16 bytes: each group's scale (low nibble) and min (high nibble).
        for (g, &sm) in x[..QK_K / 16].iter().enumerate() {
            isum += (sm & 0x0F) as i32 * sums[g];
            summs += (sm >> 4) as i32 * q8_k::bsum(y, g);
        }
        let dy = f32_at(y);
        acc = chain(acc, isum, f16_at(&x[80..82]) * dy);
        acc = chain(acc, summs, -(f16_at(&x[82..84]) * dy));
    }
    acc
}
