//! Q8_K: super-blocks of 256 elements, 292 bytes (ggml `block_q8_K`); activation format of the K-quants:
//! ```text
//! [0..4)      d      f32      scale
//! [4..260)    qs     i8×256   value_j = d * qs[j]
//! [260..292)  bsums  i16×16   bsums[g] = sum(qs[16g..16g+16])  (lets Q4_K apply its mins per 16 values)
//! ```

use super::bytes::{f32_at, i16_at};
use super::QK_K;
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = 4 + QK_K + QK_K / 16 * 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q8_K;

impl Format for Q8_K {
    const TYPE: GgmlType = GgmlType::Q8_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = Some(quantize);
}
/// Offset of `qs` in a block.
pub(crate) const QS: usize = 4;
/// Offset of `bsums` in a block.
pub(crate) const BSUMS: usize = 4 + QK_K;

/// Dequantizes whole Q8_K super-blocks (`dequantize_row_q8_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f32_at(b);
        for (o, &q) in y.iter_mut().zip(&b[QS..BSUMS]) {
            *o = d * q as i8 as f32;
        }
    }
}

/// Quantizes `x` (a multiple of 256 long) as `quantize_row_q8_K_ref` does: the element of largest
/// magnitude maps to exactly -127 (`iscale = -127/max`), rounding is to nearest-even (`nearest_int`),
/// codes are clamped to <= 127, `d = 1/iscale` is stored as f32, and the 16-element sums are filled in.
pub(crate) fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.as_chunks::<QK_K>().0.iter().zip(dst.as_chunks_mut::<BLOCK>().0) {
        let mut max = 0.0f32;
        let mut amax = 0.0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            // All zero (or all NaN, which `>` never selects): an all-zero block.
            b.fill(0);
            continue;
        }
        // -127 rather than ±128 keeps the range symmetric (ggml made this change for its AVX paths).
        let iscale = -127.0f32 / max;
        for (q, &v) in b[QS..BSUMS].iter_mut().zip(xb) {
            // round_ties_even equals ggml's `nearest_int` (the 1.5*2^23 magic-number trick) for |v| < 2^22;
            // `as i32` saturates, so out-of-range/NaN input degrades instead of wrapping.
            let v = ((v * iscale).round_ties_even() as i32).min(127);
            *q = v as i8 as u8;
        }
        for g in 0..QK_K / 16 {
            let s: i32 = b[QS + 16 * g..QS + 16 * g + 16].iter().map(|&q| q as i8 as i32).sum();
            b[BSUMS + 2 * g..BSUMS + 2 * g + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

/// The `bsums[g]` field of a Q8_K block.
#[inline(always)]
pub(crate) fn bsum(b: &[u8], g: usize) -> i32 {
    i16_at(&b[BSUMS + 2 * g..]) as i32
}

/// The exact integer sums `Σ code_i · q8_i` over each 16-element group `g` of one super-block:
/// `codes` are a K-quant block's unpacked weight codes, `q8` the Q8_K block's `qs` (Q2_K, Q3_K and
/// Q6_K weigh each group by its own scale; Q4_K/Q5_K each pair of groups). Built from
/// `contract::quad_sums` (the multiply-add shape the compiler vectorizes).
#[inline(always)]
pub(crate) fn group_sums<T: Copy + Into<i32>>(codes: &[T; QK_K], q8: &[u8]) -> [i32; QK_K / 16] {
    let mut g = [0i32; QK_K / 16];
    for (c, (w, a)) in codes.as_chunks::<32>().0.iter().zip(q8.as_chunks::<32>().0).enumerate() {
        let q = super::contract::quad_sums(w, a);
        g[2 * c] = (q[0] + q[1]) + (q[2] + q[3]);
        g[2 * c + 1] = (q[4] + q[5]) + (q[6] + q[7]);
    }
    g
}

/// Dot product of a Q8_K row with Q8_K activations (not a ggml pairing, but makes Q8_K usable as
/// weights), the contract's super-block chain: `acc = fma(Σ q_w·q_a, d_w·d_a, acc)`.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * BLOCK);
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ BLOCK }>().0) {
        let codes: &[u8; QK_K] = x[QS..BSUMS].try_into().expect("256 codes");
        let codes: [i8; QK_K] = codes.map(|c| c as i8);
        let sumi = group_sums(&codes, &y[QS..BSUMS]).iter().sum();
        acc = super::contract::chain(acc, sumi, f32_at(x) * f32_at(y));
    }
    acc
}
