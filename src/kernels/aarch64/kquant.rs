//! The K-quants Q4_K and Q6_K against Q8_K activations, unpacked rows, on 128-bit NEON registers.
//!
//! Shape per super-block (256 elements): the codes are decoded once into 16 registers of 16 bytes
//! (Q4_K: `and`/`ushr` of the nibbles; Q6_K: nibbles `orr` the 2-bit high parts, minus 32); per
//! activation vector, one integer dot per register (`IntDot::sum`: `sdot`, or `smull`+`sadalp`
//! pairs), the sub-block sums weighted by their scales with `mla` in i32 lanes, one `addv`: the
//! block's exact `isum` (any integer grouping is the same number). Q4_K's min term `msum` comes
//! from the activation's 16-element sums `bsums` (`saddlp` pairs, `mul` by the mins, `addv`).
//! Float work is the numeric contract's super-block chain, in scalar registers as the reference
//! does it: `acc = fma(isum, d·d_a, acc)` (Q4_K then `acc = fma(msum, -(dmin·d_a), acc)`), one
//! `fmadd` each.

use std::arch::aarch64::*;

use super::isa::{f16_at, f32_at, load_i8, load_u8, u32_at, IntDot};
use crate::quant::{block_bytes, q8k_layout};

/// Bytes of a Q8_K activation super-block.
pub(crate) const Q8K_BYTES: usize = block_bytes::Q8_K;
/// Offset of `qs` in a Q8_K block.
pub(crate) const Q8K_QS: usize = q8k_layout::QS;
/// Offset of `bsums` in a Q8_K block.
pub(crate) const Q8K_BSUMS: usize = q8k_layout::BSUMS;
/// Bytes of a Q4_K super-block.
const Q4K_BYTES: usize = block_bytes::Q4_K;
/// Bytes of a Q6_K super-block.
const Q6K_BYTES: usize = block_bytes::Q6_K;

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K super-block from its 12 packed bytes at
/// `p` (`quant::q4_k::scale_min` for all eight sub-blocks at once), byte j = sub-block j.
#[inline(always)]
pub(crate) unsafe fn q4k_scales_mins(p: *const u8) -> ([u8; 8], [u8; 8]) {
    let (u0, u1, u2) = (u32_at(p), u32_at(p.add(4)), u32_at(p.add(8)));
    // Sub-blocks 0..4: the low 6 bits of bytes 0..4 (scales) and 4..8 (mins).
    let sc_lo = u0 & 0x3f3f_3f3f;
    let mn_lo = u1 & 0x3f3f_3f3f;
    // Sub-blocks 4..8: low 4 bits from bytes 8..12 (scale: low nibble, min: high nibble), top 2
    // bits from the spare top bits of bytes 0..4 (scales) and 4..8 (mins).
    let sc_hi = (u2 & 0x0f0f_0f0f) | (((u0 >> 6) & 0x0303_0303) << 4);
    let mn_hi = ((u2 >> 4) & 0x0f0f_0f0f) | (((u1 >> 6) & 0x0303_0303) << 4);
    let join = |lo: u32, hi: u32| (lo as u64 | (hi as u64) << 32).to_le_bytes();
    (join(sc_lo, sc_hi), join(mn_lo, mn_hi))
}

/// `Σ_j m[j] · (bsums[2j] + bsums[2j+1])` of the Q8_K block at `y` (Q4_K's min term), exact.
///
/// Safety: a Q8_K block at `y`.
#[inline(always)]
pub(crate) unsafe fn min_term(y: *const u8, m: [u8; 8]) -> i32 {
    let b0 = vld1q_s16(y.add(Q8K_BSUMS) as *const i16); // bsums 0..8
    let b1 = vld1q_s16(y.add(Q8K_BSUMS + 16) as *const i16); // bsums 8..16
    let m = vmovl_u8(vld1_u8(m.as_ptr()));
    let m0 = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(m)));
    let m1 = vreinterpretq_s32_u32(vmovl_high_u16(m));
    let s = vmlaq_s32(vmulq_s32(vpaddlq_s16(b0), m0), vpaddlq_s16(b1), m1);
    vaddvq_s32(s)
}

/// Q4_K × Q8_K for `B` activation vectors at `a + k*stride`, `nb` super-blocks.
///
/// Safety: `w` holds `nb` Q4_K blocks, every vector `nb` Q8_K blocks, `out` B floats; the CPU has
/// the features of `D`.
#[inline(always)]
pub(crate) unsafe fn q4_k<D: IntDot, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [0.0f32; B];
    for i in 0..nb {
        let x = w.add(i * Q4K_BYTES);
        let (d, dmin) = (f16_at(x), f16_at(x.add(2)));
        let (sc, mn) = q4k_scales_mins(x.add(4));
        // codes[2c + h][r]: chunk c's 32 bytes, low (h = 0) or high (h = 1) nibbles, bytes
        // 16r..16r+16: sub-block 2c + h, elements 16r..16r+16.
        let codes: [[int8x16_t; 2]; 8] = std::array::from_fn(|j| {
            std::array::from_fn(|r| {
                let v = load_u8(x.add(16 + 32 * (j / 2) + 16 * r));
                let v = if j % 2 == 0 { vandq_u8(v, vdupq_n_u8(0x0F)) } else { vshrq_n_u8::<4>(v) };
                vreinterpretq_s8_u8(v)
            })
        });
        for (k, acc) in acc.iter_mut().enumerate() {
            let y = a.add(k * stride + i * Q8K_BYTES);
            let q = y.add(Q8K_QS);
            let mut isum = vdupq_n_s32(0);
            for (j, c) in codes.iter().enumerate() {
                let s = D::sum(vdupq_n_s32(0), c[0], load_i8(q.add(32 * j)));
                let s = D::sum(s, c[1], load_i8(q.add(32 * j + 16)));
                isum = vmlaq_n_s32(isum, s, sc[j] as i32);
            }
            let (isum, msum) = (vaddvq_s32(isum), min_term(y, mn));
            let dy = f32_at(y);
            *acc = (isum as f32).mul_add(d * dy, *acc);
            *acc = (msum as f32).mul_add(-(dmin * dy), *acc);
        }
    }
    std::ptr::copy_nonoverlapping(acc.as_ptr(), out, B);
}

/// The 128 signed codes (code - 32) of half `h` of the Q6_K block at `x`, as eight registers: register
/// `g` holds elements `16g..16g+16` of the half, i.e. 16-element group `8h + g` (see quant/q6_k.rs).
///
/// Safety: a Q6_K block at `x`.
#[inline(always)]
pub(crate) unsafe fn q6k_half(x: *const u8, h: usize) -> [int8x16_t; 8] {
    let ql: [uint8x16_t; 4] = std::array::from_fn(|r| load_u8(x.add(64 * h + 16 * r)));
    let qh: [uint8x16_t; 2] = std::array::from_fn(|r| load_u8(x.add(128 + 32 * h + 16 * r)));
    let (m4, m30) = (vdupq_n_u8(0x0F), vdupq_n_u8(0x30));
    // Element l (< 32) of each quarter: low nibble of ql[l] / ql[l+32], high nibble of ql[l] /
    // ql[l+32], with qh[l]'s bits 0-1, 2-3, 4-5, 6-7 as bits 4-5 of the code.
    let lo = |q: uint8x16_t| vandq_u8(q, m4);
    let hi = |q: uint8x16_t| vshrq_n_u8::<4>(q);
    let bits = |q: uint8x16_t, part: usize| match part {
        0 => vandq_u8(vshlq_n_u8::<4>(q), m30),
        1 => vandq_u8(vshlq_n_u8::<2>(q), m30),
        2 => vandq_u8(q, m30),
        _ => vandq_u8(vshrq_n_u8::<2>(q), m30),
    };
    let code = |n: uint8x16_t, b: uint8x16_t| {
        vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(n, b), vdupq_n_u8(32)))
    };
    [
        code(lo(ql[0]), bits(qh[0], 0)),
        code(lo(ql[1]), bits(qh[1], 0)),
        code(lo(ql[2]), bits(qh[0], 1)),
        code(lo(ql[3]), bits(qh[1], 1)),
        code(hi(ql[0]), bits(qh[0], 2)),
        code(hi(ql[1]), bits(qh[1], 2)),
        code(hi(ql[2]), bits(qh[0], 3)),
        code(hi(ql[3]), bits(qh[1], 3)),
    ]
}

/// Q6_K × Q8_K for `B` activation vectors: per super-block the exact
/// `total = Σ_g scales[g] · Σ_{i in g} (code_i - 32) · q8_i`, then `acc = fma(total, d·d_a, acc)`.
///
/// Safety: as `q4_k`, with 210-byte Q6_K blocks.
#[inline(always)]
pub(crate) unsafe fn q6_k<D: IntDot, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [0.0f32; B];
    for i in 0..nb {
        let x = w.add(i * Q6K_BYTES);
        let d = f16_at(x.add(208));
        let codes = [q6k_half(x, 0), q6k_half(x, 1)];
        let sc: [i8; 16] = std::ptr::read_unaligned(x.add(192) as *const [i8; 16]);
        for (k, acc) in acc.iter_mut().enumerate() {
            let y = a.add(k * stride + i * Q8K_BYTES);
            let q = y.add(Q8K_QS);
            let mut total = vdupq_n_s32(0);
            for (g, &s) in sc.iter().enumerate() {
                let c = codes[g / 8][g % 8];
                let sum = D::sum(vdupq_n_s32(0), c, load_i8(q.add(16 * g)));
                total = vmlaq_n_s32(total, sum, s as i32);
            }
            *acc = (vaddvq_s32(total) as f32).mul_add(d * f32_at(y), *acc);
        }
    }
    std::ptr::copy_nonoverlapping(acc.as_ptr(), out, B);
}
