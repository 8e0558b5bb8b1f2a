//! Q4_K: super-blocks of 256 elements, 144 bytes (ggml `block_q4_K`), 8 sub-blocks of 32:
//! ```text
//! [0..2)     d       f16     super-scale of the sub-block scales
//! [2..4)     dmin    f16     super-scale of the sub-block mins
//! [4..16)    scales  u8×12   eight 6-bit scales sc[j] and eight 6-bit mins m[j], packed (see `scale_min`)
//! [16..144)  qs      u8×128  4-bit codes; chunk c (0..4) of 32 bytes holds sub-block 2c in its low
//!                            nibbles and sub-block 2c+1 in its high nibbles
//! value = d*sc[j] * code - dmin*m[j]
//! ```
//! Dotted with Q8_K activations.

use super::bytes::{f16_at, f32_at};
use super::contract::{chain, quad_sums};
use super::{q8_k, QK_K};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = 2 + 2 + 12 + QK_K / 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q4_K;

impl Format for Q4_K {
    const TYPE: GgmlType = GgmlType::Q4_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 6-bit scale and min of sub-block `j` (0..8) from the 12 packed bytes `q`
/// (ggml `get_scale_min_k4`): bytes 0..4 hold sc[0..4] in their low 6 bits, bytes 4..8 hold m[0..4];
/// sub-blocks 4..8 take their low 4 bits from bytes 8..12 (scale: low nibble, min: high nibble) and
/// their top 2 bits from the spare top bits of bytes 0..4 (scale) and 4..8 (min).
#[inline(always)]
pub(crate) fn scale_min(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Dequantizes whole Q4_K super-blocks (`dequantize_row_q4_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f16_at(&b[0..2]);
        let dmin = f16_at(&b[2..4]);
        let scales = &b[4..16];
        let qs = &b[16..BLOCK];
        for c in 0..4 {
            let (sc0, m0) = scale_min(2 * c, scales);
            let (sc1, m1) = scale_min(2 * c + 1, scales);
            let (d0, dm0) = (d * sc0 as f32, dmin * m0 as f32);
            let (d1, dm1) = (d * sc1 as f32, dmin * m1 as f32);
            let q = &qs[32 * c..32 * c + 32];
            let out = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                out[l] = d0 * (q[l] & 0x0F) as f32 - dm0;
                out[l + 32] = d1 * (q[l] >> 4) as f32 - dm1;
            }
        }
    }
}

/// Dot product of a Q4_K row with Q8_K activations, the contract's super-block chain
/// (`contract::chain`): per super-block the exact `isum = Σ_j sc[j] · Σ_{i in j} code_i · q8_i` and
/// `msum = Σ_j m[j] · (bsums[2j] + bsums[2j+1])`, then `acc = fma(isum, d·d_a, acc)` and
/// `acc = fma(msum, -(dmin·d_a), acc)`.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * q8_k::BLOCK);
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ q8_k::BLOCK }>().0) {
        let q8 = &y[q8_k::QS..q8_k::BSUMS];
        // Chunk c's low nibbles are sub-block 2c, its high nibbles sub-block 2c + 1.
        let mut sums = [0i32; QK_K / 16];
        for (c, qs) in x[16..BLOCK].as_chunks::<32>().0.iter().enumerate() {
            for (h, codes) in [qs.map(|b| b & 0x0F), qs.map(|b| b >> 4)].iter().enumerate() {
                let j = 2 * c + h;
                let a: &[u8; 32] = q8[32 * j..32 * j + 32].try_into().expect("32 quants");
                let q = quad_sums(codes, a);
                sums[2 * j] = (q[0] + q[1]) + (q[2] + q[3]);
                sums[2 * j + 1] = (q[4] + q[5]) + (q[6] + q[7]);
            }
        }
        acc = add_block(acc, &sums, x, y);
    }
    acc
}

/// `acc` plus one super-block's two chain steps, for the K-quants with a `d, dmin, 12 packed 6-bit
/// scales/mins` header (Q4_K, Q5_K); `sums` are the block's 16-element group sums
/// (`q8_k::group_sums`), `x` the weight block, `y` the Q8_K activation block.
#[inline(always)]
pub(super) fn add_block(acc: f32, sums: &[i32; QK_K / 16], x: &[u8], y: &[u8]) -> f32 {
    let scales = &x[4..16];
    let (mut isum, mut msum) = (0i32, 0i32);
    for j in 0..8 {
        let (sc, m) = scale_min(j, scales);
        isum += sc as i32 * (sums[2 * j] + sums[2 * j + 1]);
        msum += m as i32 * (q8_k::bsum(y, 2 * j) + q8_k::bsum(y, 2 * j + 1));
    }
    let dy = f32_at(y);
    let acc = chain(acc, isum, f16_at(&x[0..2]) * dy);
    chain(acc, msum, -(f16_at(&x[2..4]) * dy))
}
