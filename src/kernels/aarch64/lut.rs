//! LUT GEMV for the `Q2_K×32` layout (`kernels::lut`) with NEON `tbl` (every aarch64 CPU).
//!
//! The arithmetic of the x86 kernel (`kernels::x86::lut`) on 128-bit vectors: the 32 rows are two
//! vectors of index bytes; per quad and plane `tbl` looks up the table's low and high bytes;
//! `lo0 + 2·lo1` widens into u16 (`uaddw` / `umlal` by 2), the high bytes (`[-2, 1]`) sum in i8
//! and join as `hi << 8` (`sshll` by 8); each sub-block's sums `S` times its scales into exact i32
//! (`smlal`), the mins times the activation's `bsums` likewise. The float work, two FMAs per row and
//! super-block, is the reference's (`quant::contract::chain`).

use std::arch::aarch64::*;

use super::isa::{f16_at, f32_at, load_u8};
use crate::kernels::lut::{LUT_BLOCK, LUT_ROWS, OFF_DMIN, OFF_IDX, OFF_SCALES, PLANE, TABLE_BYTES};
use crate::quant::block_bytes::Q8_K as Q8K_BYTES;
use crate::quant::contract::chain;
use crate::quant::q8k_layout::BSUMS;
use crate::quant::QK_K;

/// `lut::LutGemvFn` on NEON (the aarch64 baseline).
pub(crate) fn gemv(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    assert!(
        w.len() >= nb * LUT_BLOCK
            && act.len() >= nb * Q8K_BYTES
            && tables.len() >= nb * TABLE_BYTES,
        "LUT GEMV operand sizes"
    );
    // SAFETY: NEON is part of the aarch64 baseline; every read is within the sizes asserted above.
    unsafe { gemv_neon(nb, w.as_ptr(), act.as_ptr(), tables.as_ptr(), out) }
}

/// Safety: `w` holds `nb` packed super-blocks, `a` `nb` Q8_K blocks, `t` their tables.
#[target_feature(enable = "neon")]
unsafe fn gemv_neon(
    nb: usize,
    w: *const u8,
    a: *const u8,
    t: *const u8,
    out: &mut [f32; LUT_ROWS],
) {
    let m4 = vdupq_n_u8(15);
    let two = vdup_n_u8(2);
    let mut acc = [0.0f32; LUT_ROWS];
    for b in 0..nb {
        let x = w.add(b * LUT_BLOCK);
        let y = a.add(b * Q8K_BYTES);
        let tb = t.add(b * TABLE_BYTES);
        // Rows 4q..4q+4 in lane group q.
        let mut isum = [vdupq_n_s32(0); 8];
        let mut summs = [vdupq_n_s32(0); 8];
        for g in 0..QK_K / 16 {
            // Per half (rows 0-15, 16-31): u16 low-byte sums of rows 0-7 and 8-15, i8 high bytes.
            let mut lo = [[vdupq_n_u16(0); 2]; 2];
            let mut hi8 = [vdupq_n_s8(0); 2];
            for j in 2 * g..2 * g + 2 {
                for nib in 0..2 {
                    let k = 2 * j + nib;
                    let tlo = load_u8(tb.add(32 * k));
                    let thi = load_u8(tb.add(32 * k + 16));
                    for (h, (lo, hi8)) in lo.iter_mut().zip(hi8.iter_mut()).enumerate() {
                        let v0 = load_u8(x.add(OFF_IDX + 32 * j + 16 * h));
                        let v1 = load_u8(x.add(OFF_IDX + PLANE + 32 * j + 16 * h));
                        let (i0, i1) = if nib == 0 {
                            (vandq_u8(v0, m4), vandq_u8(v1, m4))
                        } else {
                            (vshrq_n_u8::<4>(v0), vshrq_n_u8::<4>(v1))
                        };
                        let (l0, l1) = (vqtbl1q_u8(tlo, i0), vqtbl1q_u8(tlo, i1));
                        let (h0, h1) = (
                            vreinterpretq_s8_u8(vqtbl1q_u8(thi, i0)),
                            vreinterpretq_s8_u8(vqtbl1q_u8(thi, i1)),
                        );
                        lo[0] = vmlal_u8(vaddw_u8(lo[0], vget_low_u8(l0)), vget_low_u8(l1), two);
                        lo[1] = vmlal_high_u8(vaddw_high_u8(lo[1], l0), l1, vdupq_n_u8(2));
                        *hi8 = vaddq_s8(*hi8, vaddq_s8(h0, vaddq_s8(h1, h1)));
                    }
                }
            }
            let sm_at = |h: usize| load_u8(x.add(OFF_SCALES + LUT_ROWS * g + 16 * h));
            let bsum = std::ptr::read_unaligned(y.add(BSUMS + 2 * g) as *const i16);
            for h in 0..2 {
                let sm = sm_at(h);
                let sc = vandq_u8(sm, m4);
                let mn = vshrq_n_u8::<4>(sm);
                for o in 0..2 {
                    // Rows 16h + 8o .. + 8.
                    let (hi, s8, m8) = if o == 0 {
                        (vget_low_s8(hi8[h]), vget_low_u8(sc), vget_low_u8(mn))
                    } else {
                        (vget_high_s8(hi8[h]), vget_high_u8(sc), vget_high_u8(mn))
                    };
                    let s = vaddq_s16(vreinterpretq_s16_u16(lo[h][o]), vshll_n_s8::<8>(hi));
                    let s16 = vreinterpretq_s16_u16(vmovl_u8(s8));
                    let m16 = vreinterpretq_s16_u16(vmovl_u8(m8));
                    let q = 4 * h + 2 * o;
                    isum[q] = vmlal_s16(isum[q], vget_low_s16(s), vget_low_s16(s16));
                    isum[q + 1] = vmlal_high_s16(isum[q + 1], s, s16);
                    summs[q] = vmlal_n_s16(summs[q], vget_low_s16(m16), bsum);
                    summs[q + 1] = vmlal_high_n_s16(summs[q + 1], m16, bsum);
                }
            }
        }
        let (mut is, mut ms) = ([0i32; LUT_ROWS], [0i32; LUT_ROWS]);
        for q in 0..8 {
            vst1q_s32(is.as_mut_ptr().add(4 * q), isum[q]);
            vst1q_s32(ms.as_mut_ptr().add(4 * q), summs[q]);
        }
        let dy = f32_at(y);
        for r in 0..LUT_ROWS {
            acc[r] = chain(acc[r], is[r], f16_at(x.add(2 * r)) * dy);
            acc[r] = chain(acc[r], ms[r], -(f16_at(x.add(OFF_DMIN + 2 * r)) * dy));
        }
    }
    *out = acc;
}
