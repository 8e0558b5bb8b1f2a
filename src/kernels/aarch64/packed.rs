//! Packed `Q4_K×16` row groups (`kernels::packed`) with `smmla` (i8mm tier): two activation
//! vectors (tokens) against the sixteen rows of a group.
//!
//! Shape: the packed layout keeps bytes `4q..4q+4` of the sixteen rows side by side, so two
//! consecutive units `q`, `q+1` zipped as u32 (`zip1`/`zip2`) give eight consecutive code bytes of
//! two rows: `smmla`'s 2×8 operand. With the two tokens' eight activation bytes as the other
//! operand, one `smmla` adds `[t0·r, t0·r', t1·r, t1·r']` (8-byte sums) to a row pair's i32
//! lanes; per sub-block (32 elements: four `smmla`) the lanes are weighted by the two rows'
//! scales (`mla`), giving each (row, token) its exact integer `isum` (Q4_K's `msum` from the
//! `bsums`, `kquant::min_term`). Per super-block and row pair, the float work is the contract's
//! chain in the four lanes: `fmla` by `[d_r·d_t0, d_r'·d_t0, d_r·d_t1, d_r'·d_t1]` (Q4_K: then by
//! `-(dmin·d_a)`), each lane exactly the reference's `fma`. Work per super-block, 16 rows × 2
//! tokens: 256 `smmla` where `sdot` needs 512; about 2,600 instructions in all (81 per row and
//! token, against 143 for one vector and 95 per vector for two in the unpacked dotprod kernel).
//!
//! Q6_K stays unpacked: a `Q6_K×16` kernel of the same shape (commit 06e5639, bitwise the
//! reference) took about 175 instructions per row and token, more than the unpacked `sdot`
//! kernel's 125 for two vectors (its per-row group scales cost more than `smmla` saves). The
//! counts are from the disassembly; speed on ARM hardware is not measured yet.

use std::arch::aarch64::*;

use super::isa::{f16_at, f32_at, load_u8, smmla, u32_at};
use super::kquant::{min_term, Q8K_BYTES, Q8K_QS};
use crate::kernels::packed::PACKED_BLOCK;

/// Offset of the code bytes in a packed Q4_K block.
const Q4X_QS: usize = 256;

/// The two tokens' eight activation bytes at offset `o` of their Q8_K blocks `y0`, `y1`: the
/// `smmla` operand of two 8-byte rows.
#[inline(always)]
unsafe fn tokens(y0: *const u8, y1: *const u8, o: usize) -> int8x16_t {
    vcombine_s8(vld1_s8(y0.add(o) as *const i8), vld1_s8(y1.add(o) as *const i8))
}

/// Units `q` and `q + 1` (64 bytes apart) of rows `4g..4g+4` at `p` (unit `q`'s rows at `p + 16g`),
/// as two row pairs of eight bytes: `[rows 4g, 4g+1]`, `[rows 4g+2, 4g+3]`.
#[inline(always)]
unsafe fn row_pairs(p: *const u8, g: usize) -> [uint8x16_t; 2] {
    let l = vreinterpretq_u32_u8(load_u8(p.add(16 * g)));
    let m = vreinterpretq_u32_u8(load_u8(p.add(64 + 16 * g)));
    [vreinterpretq_u8_u32(vzip1q_u32(l, m)), vreinterpretq_u8_u32(vzip2q_u32(l, m))]
}

/// `[a, b, a, b]` as i32 lanes: a per-row value for the lanes `[t0·r, t0·r', t1·r, t1·r']`.
#[inline(always)]
unsafe fn per_row_i32(a: i32, b: i32) -> int32x4_t {
    let v = [a, b, a, b];
    vld1q_s32(v.as_ptr())
}

/// `[a·t0, b·t0, a·t1, b·t1]` as f32 lanes (each a rounded f32 product, as the reference's scales).
#[inline(always)]
unsafe fn per_lane_scale(a: f32, b: f32, t: [f32; 2]) -> float32x4_t {
    let r = [a, b, a, b];
    let t = [t[0], t[0], t[1], t[1]];
    vmulq_f32(vld1q_f32(r.as_ptr()), vld1q_f32(t.as_ptr()))
}

/// Writes the lanes `[t0·r, t0·r', t1·r, t1·r']` of row pair `p` (rows `2p`, `2p+1`).
#[inline(always)]
unsafe fn store_pair(acc: float32x4_t, p: usize, out0: *mut f32, out1: *mut f32) {
    let mut l = [0.0f32; 4];
    vst1q_f32(l.as_mut_ptr(), acc);
    *out0.add(2 * p) = l[0];
    *out0.add(2 * p + 1) = l[1];
    *out1.add(2 * p) = l[2];
    *out1.add(2 * p + 1) = l[3];
}

/// The scales and mins of row `r` of packed Q4_K block `pb` (`kquant::q4k_scales_mins` from the
/// three interleaved u32s).
#[inline(always)]
unsafe fn q4x_scales_mins(pb: *const u8, r: usize) -> ([u8; 8], [u8; 8]) {
    let mut b = [0u8; 12];
    for (i, part) in b.chunks_exact_mut(4).enumerate() {
        part.copy_from_slice(&u32_at(pb.add(64 + 64 * i + 4 * r)).to_le_bytes());
    }
    super::kquant::q4k_scales_mins(b.as_ptr())
}

/// Q4_K×16 · two Q8_K vectors: `out0[r]`, `out1[r]` = the reference dot of row `r` with `a0`, `a1`.
///
/// Safety: `w` holds `nb` packed blocks, `a0`/`a1` `nb` Q8_K blocks each, `out0`/`out1` 16 floats;
/// the CPU has i8mm.
#[inline(always)]
pub(crate) unsafe fn q4_k_x16(
    nb: usize,
    w: *const u8,
    a0: *const u8,
    a1: *const u8,
    out0: *mut f32,
    out1: *mut f32,
) {
    let mut acc = [vdupq_n_f32(0.0); 8]; // row pair p: rows 2p, 2p+1
    for b in 0..nb {
        let pb = w.add(b * PACKED_BLOCK);
        let (y0, y1) = (a0.add(b * Q8K_BYTES), a1.add(b * Q8K_BYTES));
        let dy = [f32_at(y0), f32_at(y1)];
        for g in 0..4 {
            let sm: [([u8; 8], [u8; 8]); 4] =
                std::array::from_fn(|i| q4x_scales_mins(pb, 4 * g + i));
            let mut isum = [vdupq_n_s32(0); 2];
            for c in 0..4 {
                let mut s = [[vdupq_n_s32(0); 2]; 2]; // [pair][low/high nibbles]
                for t in 0..4 {
                    let u = 4 * c + t; // code bytes 8u..8u+8 of every row
                    let act_lo = tokens(y0, y1, Q8K_QS + 64 * c + 8 * t);
                    let act_hi = tokens(y0, y1, Q8K_QS + 64 * c + 32 + 8 * t);
                    let pairs = row_pairs(pb.add(Q4X_QS + 64 * 2 * u), g);
                    for (s, p) in s.iter_mut().zip(pairs) {
                        let lo = vreinterpretq_s8_u8(vandq_u8(p, vdupq_n_u8(0x0F)));
                        let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(p));
                        s[0] = smmla(s[0], act_lo, lo);
                        s[1] = smmla(s[1], act_hi, hi);
                    }
                }
                for (i, isum) in isum.iter_mut().enumerate() {
                    let (ra, rb) = (&sm[2 * i].0, &sm[2 * i + 1].0);
                    for (h, &s) in s[i].iter().enumerate() {
                        let j = 2 * c + h;
                        let sc = per_row_i32(ra[j] as i32, rb[j] as i32);
                        *isum = vmlaq_s32(*isum, s, sc);
                    }
                }
            }
            for (i, isum) in isum.iter().enumerate() {
                let (r, r1) = (4 * g + 2 * i, 4 * g + 2 * i + 1);
                let (mr, mr1) = (sm[2 * i].1, sm[2 * i + 1].1);
                let msum =
                    [min_term(y0, mr), min_term(y0, mr1), min_term(y1, mr), min_term(y1, mr1)];
                let d = per_lane_scale(f16_at(pb.add(2 * r)), f16_at(pb.add(2 * r1)), dy);
                let dmin =
                    per_lane_scale(f16_at(pb.add(32 + 2 * r)), f16_at(pb.add(32 + 2 * r1)), dy);
                let p = &mut acc[2 * g + i];
                *p = vfmaq_f32(*p, vcvtq_f32_s32(*isum), d);
                *p = vfmaq_f32(*p, vcvtq_f32_s32(vld1q_s32(msum.as_ptr())), vnegq_f32(dmin));
            }
        }
    }
    for (p, acc) in acc.iter().enumerate() {
        store_pair(*acc, p, out0, out1);
    }
}
