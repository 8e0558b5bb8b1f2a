//! The instruction-level building blocks of the aarch64 tiers: integer dot products of 16 byte
//! pairs (NEON `smull`+`saddlp`, or `sdot` of the dotprod extension), `smmla` (i8mm), the f16
//! conversion of the scalar reference done on four lanes, and the contract's `fold16` of four
//! 128-bit registers.
//!
//! `sdot` and `smmla` are written as inline assembly: their intrinsics are not stable in Rust. Each
//! `asm!` names its extension (`.arch_extension`), so the assembler accepts it in any function;
//! executing it is still only possible through a tier whose features the CPU was detected to have.

use std::arch::aarch64::*;
use std::arch::asm;

/// An exact integer dot product of 16 signed byte pairs, in the four i32 lanes of a register.
pub(crate) trait IntDot {
    /// `acc` plus the four quad sums of `a·b`: lane `q` += `Σ_{i in 4q..4q+4} a[i]·b[i]` (the
    /// numeric contract's quads, `quant::contract::quad_sums`).
    unsafe fn quads(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
    /// `acc` plus the products `a[i]·b[i]` grouped in any way over the four lanes (only the sum of
    /// the lanes is defined: for the K-quants, whose integer grouping is free).
    unsafe fn sum(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t;
}

/// Baseline NEON: `smull` of the byte halves to i16 products (exact: |p| ≤ 128·128), then pairwise
/// widening adds (`saddlp`/`sadalp`) to i32.
pub(crate) struct Neon;

impl IntDot for Neon {
    #[inline(always)]
    unsafe fn quads(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b)); // elements 0..8
        let p1 = vmull_high_s8(a, b); // elements 8..16
                                      // Pairs, then pairs of pairs: lane q = elements 4q..4q+4.
        vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1)))
    }

    #[inline(always)]
    unsafe fn sum(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        let p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
        let p1 = vmull_high_s8(a, b);
        vpadalq_s16(vpadalq_s16(acc, p0), p1)
    }
}

/// Armv8.2 dot product: one `sdot` gives the four quad sums directly.
pub(crate) struct Sdot;

impl IntDot for Sdot {
    #[inline(always)]
    unsafe fn quads(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        sdot(acc, a, b)
    }

    #[inline(always)]
    unsafe fn sum(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
        sdot(acc, a, b)
    }
}

/// `sdot acc.4s, a.16b, b.16b`: lane `q` += `Σ_{i in 4q..4q+4} a[i]·b[i]`.
///
/// Safety: the CPU must have the dotprod extension.
#[inline(always)]
pub(crate) unsafe fn sdot(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    asm!(
        ".arch_extension dotprod",
        "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

/// `smmla acc.4s, a.16b, b.16b`: `a` is two rows of eight bytes (`a[0..8]`, `a[8..16]`), `b` two
/// columns of eight; lane `2i + j` += `Σ_{t<8} a[8i+t]·b[8j+t]` (row i · column j).
///
/// Safety: the CPU must have the i8mm extension.
#[inline(always)]
pub(crate) unsafe fn smmla(mut acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    asm!(
        ".arch_extension i8mm",
        "smmla {acc:v}.4s, {a:v}.16b, {b:v}.16b",
        acc = inout(vreg) acc,
        a = in(vreg) a,
        b = in(vreg) b,
        options(pure, nomem, nostack, preserves_flags)
    );
    acc
}

/// 16 bytes at `p` as signed bytes.
#[inline(always)]
pub(crate) unsafe fn load_i8(p: *const u8) -> int8x16_t {
    vld1q_s8(p as *const i8)
}

/// 16 bytes at `p`.
#[inline(always)]
pub(crate) unsafe fn load_u8(p: *const u8) -> uint8x16_t {
    vld1q_u8(p)
}

/// The little-endian f32 at `p`.
#[inline(always)]
pub(crate) unsafe fn f32_at(p: *const u8) -> f32 {
    f32::from_le_bytes(std::ptr::read_unaligned(p as *const [u8; 4]))
}

/// The little-endian f16 at `p` as f32 (the scalar reference's conversion).
#[inline(always)]
pub(crate) unsafe fn f16_at(p: *const u8) -> f32 {
    crate::quant::bytes::f16_to_f32(u16::from_le_bytes(std::ptr::read_unaligned(
        p as *const [u8; 2],
    )))
}

/// The little-endian u32 at `p`.
#[inline(always)]
pub(crate) unsafe fn u32_at(p: *const u8) -> u32 {
    u32::from_le_bytes(std::ptr::read_unaligned(p as *const [u8; 4]))
}

/// Four f16 values (as u32 lanes holding the 16 bits) to f32, bit for bit the scalar reference's
/// `quant::bytes::f16_to_f32` (exponent-and-mantissa bits moved up 13, times 2^112; inf/NaN get
/// exponent 255 with the payload kept, so NaNs are not quieted as `fcvtl` would).
#[inline(always)]
pub(crate) unsafe fn f16x4_to_f32(h: uint32x4_t) -> float32x4_t {
    // 2^112 = 2^(127-15): the difference of the f32 and f16 exponent biases.
    const REBIAS: f32 = f32::from_bits((127 + 112) << 23);
    let em = vshlq_n_u32::<13>(vandq_u32(h, vdupq_n_u32(0x7FFF)));
    let sign = vshlq_n_u32::<16>(vandq_u32(h, vdupq_n_u32(0x8000)));
    let scaled = vreinterpretq_u32_f32(vmulq_f32(vreinterpretq_f32_u32(em), vdupq_n_f32(REBIAS)));
    let inf_nan = vcgeq_u32(em, vdupq_n_u32(0x1F << 23));
    let mag = vbslq_u32(inf_nan, vorrq_u32(em, vdupq_n_u32(0x7F80_0000)), scaled);
    vreinterpretq_f32_u32(vorrq_u32(mag, sign))
}

/// The numeric contract's `fold16` of lanes 0..16 held in `l[0]` (lanes 0..4) .. `l[3]` (12..16):
/// lanes `l + 8` onto `l`, then `l + 4`, then `l + 2`, then lane 1 onto lane 0.
#[inline(always)]
pub(crate) unsafe fn fold16(l: [float32x4_t; 4]) -> f32 {
    let x = vaddq_f32(vaddq_f32(l[0], l[2]), vaddq_f32(l[1], l[3]));
    let y = vadd_f32(vget_low_f32(x), vget_high_f32(x));
    vget_lane_f32::<0>(y) + vget_lane_f32::<1>(y)
}
