//! LUT GEMV for the `Q4_0×32` layout (`kernels::lut_q4_0`) with NEON `tbl` (every aarch64 CPU).
//!
//! The arithmetic of the x86 kernel (`kernels::x86::lut_q4_0`) on 128-bit vectors: the 32 rows
//! are two vectors of index bytes; per quad and plane `tbl` looks up the table's low and high
//! bytes; `l0 + 2·l1 + 4·l2 − 8·l3` widens into 16-bit lanes (`uaddl`, `umlal`, `umlsl`: wrapping
//! u16 arithmetic whose result, `|·| ≤ 7,700`, read as i16 is exact), the high bytes sum likewise
//! in i8 and join as `hi << 8` (`sshll` by 8). The float work is the contract's quad lanes
//! (`quant::contract` shape 2), four rows per register, folded by `fold16` at the end.

use std::arch::aarch64::*;

use super::isa::{f16_at, load_u8};
use crate::kernels::lut_q4_0::{LUT_BLOCK, LUT_ROWS, OFF_IDX, PLANE, TABLE_BYTES};
use crate::quant::block_bytes::Q8_0 as Q80;

/// `lut::LutGemvFn` for `Q4_0×32` on NEON (the aarch64 baseline).
pub(crate) fn gemv(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    assert!(
        w.len() >= nb * LUT_BLOCK && act.len() >= nb * Q80 && tables.len() >= nb * TABLE_BYTES,
        "LUT GEMV operand sizes"
    );
    // SAFETY: NEON is part of the aarch64 baseline; every read is within the sizes asserted above.
    unsafe { gemv_neon(nb, w.as_ptr(), act.as_ptr(), tables.as_ptr(), out) }
}

/// Safety: `w` holds `nb` packed blocks, `a` `nb` Q8_0 blocks, `t` their tables.
#[target_feature(enable = "neon")]
unsafe fn gemv_neon(
    nb: usize,
    w: *const u8,
    a: *const u8,
    t: *const u8,
    out: &mut [f32; LUT_ROWS],
) {
    let m4 = vdupq_n_u8(15);
    // lanes[l][q]: contract lane l (0..16) of rows 4q..4q+4.
    let mut lanes = [[vdupq_n_f32(0.0); 8]; 16];
    for b in 0..nb {
        let x = w.add(b * LUT_BLOCK);
        let tb = t.add(b * TABLE_BYTES);
        let da = f16_at(a.add(b * Q80));
        let mut sc = [0f32; LUT_ROWS];
        for (r, s) in sc.iter_mut().enumerate() {
            *s = f16_at(x.add(2 * r)) * da;
        }
        let scale: [float32x4_t; 8] = std::array::from_fn(|q| vld1q_f32(sc.as_ptr().add(4 * q)));
        let par = 8 * (b % 2);
        for k in 0..8 {
            let (tlo, thi) = (load_u8(tb.add(32 * k)), load_u8(tb.add(32 * k + 16)));
            for h in 0..2 {
                // Rows 16h..16h+16.
                let idx: [uint8x16_t; 4] = std::array::from_fn(|p| {
                    let v = load_u8(x.add(OFF_IDX + PLANE * p + LUT_ROWS * (k / 2) + 16 * h));
                    if k % 2 == 0 {
                        vandq_u8(v, m4)
                    } else {
                        vshrq_n_u8::<4>(v)
                    }
                });
                let l: [uint8x16_t; 4] = std::array::from_fn(|p| vqtbl1q_u8(tlo, idx[p]));
                let hh: [int8x16_t; 4] =
                    std::array::from_fn(|p| vreinterpretq_s8_u8(vqtbl1q_u8(thi, idx[p])));
                // h0 + 2·h1 + 4·h2 − 8·h3 (Horner), in [-22, 23].
                let s = vsubq_s8(hh[2], vaddq_s8(hh[3], hh[3]));
                let s = vaddq_s8(hh[1], vaddq_s8(s, s));
                let hi8 = vaddq_s8(hh[0], vaddq_s8(s, s));
                let lo_lo = vmlsl_u8(
                    vmlal_u8(
                        vmlal_u8(vmovl_u8(vget_low_u8(l[0])), vget_low_u8(l[1]), vdup_n_u8(2)),
                        vget_low_u8(l[2]),
                        vdup_n_u8(4),
                    ),
                    vget_low_u8(l[3]),
                    vdup_n_u8(8),
                );
                let lo_hi = vmlsl_high_u8(
                    vmlal_high_u8(
                        vmlal_high_u8(vmovl_high_u8(l[0]), l[1], vdupq_n_u8(2)),
                        l[2],
                        vdupq_n_u8(4),
                    ),
                    l[3],
                    vdupq_n_u8(8),
                );
                // Rows 16h..16h+8 and 16h+8..16h+16 as exact i16 quad sums.
                let s16 = [
                    vaddq_s16(vreinterpretq_s16_u16(lo_lo), vshll_n_s8::<8>(vget_low_s8(hi8))),
                    vaddq_s16(vreinterpretq_s16_u16(lo_hi), vshll_high_n_s8::<8>(hi8)),
                ];
                for (o, s) in s16.into_iter().enumerate() {
                    for (half, v) in
                        [vmovl_s16(vget_low_s16(s)), vmovl_high_s16(s)].into_iter().enumerate()
                    {
                        let q = 4 * h + 2 * o + half;
                        let p = vmulq_f32(vcvtq_f32_s32(v), scale[q]);
                        lanes[par + k][q] = vaddq_f32(lanes[par + k][q], p);
                    }
                }
            }
        }
    }
    // `contract::fold16` on every row at once: lane l + 8 onto l, then l + 4, l + 2, 1 onto 0.
    let rows: [float32x4_t; 8] = std::array::from_fn(|q| {
        let l = |i: usize| vaddq_f32(lanes[i][q], lanes[i + 8][q]);
        let x: [float32x4_t; 4] = std::array::from_fn(|i| vaddq_f32(l(i), l(i + 4)));
        let y = [vaddq_f32(x[0], x[2]), vaddq_f32(x[1], x[3])];
        vaddq_f32(y[0], y[1])
    });
    for (q, r) in rows.into_iter().enumerate() {
        vst1q_f32(out.as_mut_ptr().add(4 * q), r);
    }
}
