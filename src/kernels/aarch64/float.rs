//! F32 and F16 weight rows against f32 activations (also the attention scores), and attention's
//! weighted V sums, on 128-bit NEON registers.
//!
//! Dots: the numeric contract's sixteen element lanes (`quant::contract::dot16`) in four registers,
//! lane `l` of register `r` being contract lane `4r + l`; per 16 elements and vector four `fmul` and
//! four `fadd` (never `fmla`: the contract's product is rounded before it is added), folded by
//! `isa::fold16`, then the tail products added one by one.

use std::arch::aarch64::*;

use super::isa::{f16_at, f16x4_to_f32, f32_at, fold16};

/// A float weight format: element size and 4-lane loads widened to f32.
pub(crate) trait FloatW {
    /// Bytes per element.
    const SIZE: usize;
    /// 4 elements at `p` as f32.
    unsafe fn load4(p: *const u8) -> float32x4_t;
    /// One element at `p` as f32.
    unsafe fn one(p: *const u8) -> f32;
}

/// F32 weights.
pub(crate) struct F32;
/// F16 weights (the scalar reference's conversion, `isa::f16x4_to_f32`).
pub(crate) struct F16;

impl FloatW for F32 {
    const SIZE: usize = 4;
    #[inline(always)]
    unsafe fn load4(p: *const u8) -> float32x4_t {
        vld1q_f32(p as *const f32)
    }
    #[inline(always)]
    unsafe fn one(p: *const u8) -> f32 {
        f32_at(p)
    }
}

impl FloatW for F16 {
    const SIZE: usize = 2;
    #[inline(always)]
    unsafe fn load4(p: *const u8) -> float32x4_t {
        f16x4_to_f32(vmovl_u16(vld1_u16(p as *const u16)))
    }
    #[inline(always)]
    unsafe fn one(p: *const u8) -> f32 {
        f16_at(p)
    }
}

/// `out[k] = Σ w[j] · act_k[j]` over `n` elements for `B` f32 vectors at `a + k*stride`, in the
/// contract's sixteen element lanes (see the module comment).
///
/// Safety: `w` holds `n` elements, each vector `n` f32, `out` B floats.
#[inline(always)]
pub(crate) unsafe fn dot<W: FloatW, const B: usize>(
    n: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [[vdupq_n_f32(0.0); 4]; B];
    let full = n / 16 * 16;
    let mut j = 0;
    while j < full {
        let wv: [float32x4_t; 4] = std::array::from_fn(|r| W::load4(w.add((j + 4 * r) * W::SIZE)));
        for (k, acc) in acc.iter_mut().enumerate() {
            let x = a.add(k * stride + 4 * j) as *const f32;
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = vaddq_f32(*acc, vmulq_f32(wv[r], vld1q_f32(x.add(4 * r))));
            }
        }
        j += 16;
    }
    for (k, acc) in acc.iter().enumerate() {
        let mut s = fold16(*acc);
        let x = a.add(k * stride);
        for t in full..n {
            s += W::one(w.add(t * W::SIZE)) * f32_at(x.add(4 * t));
        }
        *out.add(k) = s;
    }
}

/// `out[d] += Σ_j p[j] · v[j][d]` over `n` rows of `hd` elements at `v` (from `out`'s values): 4-lane
/// registers, eight per pass over the rows; each lane multiplies then adds in row order, the
/// reference's operations, so the result is bitwise the reference's.
///
/// Safety: `v` holds `n*hd` elements, `p` n floats, `out` hd floats.
#[inline(always)]
pub(crate) unsafe fn wsum<W: FloatW>(
    hd: usize,
    n: usize,
    p: *const f32,
    v: *const u8,
    out: *mut f32,
) {
    /// One pass over the rows for lanes `d0 .. d0 + 4*A`.
    #[inline(always)]
    unsafe fn pass<W: FloatW, const A: usize>(
        hd: usize,
        n: usize,
        p: *const f32,
        v: *const u8,
        out: *mut f32,
        d0: usize,
    ) {
        let mut acc: [float32x4_t; A] = std::array::from_fn(|i| vld1q_f32(out.add(d0 + 4 * i)));
        for j in 0..n {
            let pj = vdupq_n_f32(*p.add(j));
            let row = v.add((j * hd + d0) * W::SIZE);
            for (i, acc) in acc.iter_mut().enumerate() {
                *acc = vaddq_f32(*acc, vmulq_f32(pj, W::load4(row.add(4 * i * W::SIZE))));
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            vst1q_f32(out.add(d0 + 4 * i), *acc);
        }
    }
    let mut d = 0;
    // 8 accumulators (32 lanes) per pass: a quarter of the 32 vector registers.
    while d + 32 <= hd {
        pass::<W, 8>(hd, n, p, v, out, d);
        d += 32;
    }
    while d + 4 <= hd {
        pass::<W, 1>(hd, n, p, v, out, d);
        d += 4;
    }
    for d in d..hd {
        let mut s = *out.add(d);
        for j in 0..n {
            s += *p.add(j) * W::one(v.add((j * hd + d) * W::SIZE));
        }
        *out.add(d) = s;
    }
}
