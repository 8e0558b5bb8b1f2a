//! 512-bit kernels for the 32-element block formats (AVX-512 tiers): two consecutive blocks per
//! register, halving the per-block instruction count of `blocks32` (which handles an odd last block).
//!
//! Lanes 0..32 of a register hold block `b`, lanes 32..64 block `b+1`, in element order, matching a
//! pair of Q8_0/Q8_1 activation blocks loaded as two 32-byte halves. Integer dots are exact as in
//! `blocks32`; each half of a 512-bit partial sum goes to its block's slot of the group buffer, and
//! the groups of 8 blocks enter the contract's block lanes through `blocks32::apply_group`, so these
//! kernels are bitwise the 256-bit ones (and the scalar reference).

use std::arch::x86_64::*;

use super::blocks32::{self, apply_group, Parts, SymBlock, GROUP, Q4_0, Q5_0, Q8_0};
use super::isa::{fold8, load256, u32_at, Dot256, Dot512};
use crate::quant::block_bytes;

/// Bytes of a Q8_0 activation block.
const Q8_0_BYTES: usize = block_bytes::Q8_0;
/// Bytes of a Q8_1 activation block.
const Q8_1_BYTES: usize = block_bytes::Q8_1;

/// 32 bytes at `p` and 32 bytes at `p + gap` as one register.
#[inline(always)]
unsafe fn load_pair(p: *const u8, gap: usize) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load256(p)), load256(p.add(gap)))
}

/// The 4-bit codes of the 16 packed bytes at `p` and at `p + gap`, element order per block.
#[inline(always)]
unsafe fn nibbles_pair(p: *const u8, gap: usize) -> __m512i {
    let a = _mm256_broadcastsi128_si256(_mm_loadu_si128(p as *const __m128i));
    let b = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.add(gap) as *const __m128i));
    let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b);
    // 128-bit lanes 1 and 3 (i16 lanes 8..16 and 24..32) take the high nibbles.
    let v = _mm512_mask_srli_epi16::<4>(v, 0xFF00_FF00, v);
    _mm512_and_si512(v, _mm512_set1_epi8(0x0F))
}

/// A signed-code weight format decoded two blocks at a time.
pub(crate) trait SymPair: SymBlock {
    /// The 64 signed codes of the blocks at `p` and `p + BYTES`.
    unsafe fn codes2(p: *const u8) -> __m512i;
}

impl SymPair for Q4_0 {
    #[inline(always)]
    unsafe fn codes2(p: *const u8) -> __m512i {
        // 8: the 4-bit midpoint.
        _mm512_sub_epi8(nibbles_pair(p.add(2), Self::BYTES), _mm512_set1_epi8(8))
    }
}

impl SymPair for Q5_0 {
    #[inline(always)]
    unsafe fn codes2(p: *const u8) -> __m512i {
        let high = u32_at(p.add(2)) as u64 | (u32_at(p.add(2 + Self::BYTES)) as u64) << 32;
        let nib = nibbles_pair(p.add(6), Self::BYTES);
        // (nibble | 16*bit) - 16: subtract 16 where the 5th bit is clear.
        _mm512_mask_sub_epi8(nib, !high, nib, _mm512_set1_epi8(16))
    }
}

impl SymPair for Q8_0 {
    #[inline(always)]
    unsafe fn codes2(p: *const u8) -> __m512i {
        load_pair(p.add(2), Self::BYTES)
    }
}

/// Parks a 512-bit partial sum of blocks `slot`, `slot + 1` (one per 256-bit half) in `parts`.
#[inline(always)]
unsafe fn park(p: &mut [__m256i; GROUP], slot: usize, v: __m512i) {
    p[slot] = _mm512_castsi512_si256(v);
    p[slot + 1] = _mm512_extracti64x4_epi64::<1>(v);
}

/// Signed-code blocks × Q8_0 for `B` vectors, two blocks per step; an odd last block goes through
/// the 256-bit code. Contract block lanes, as `blocks32::sym`.
///
/// Safety: as `blocks32::sym`, plus AVX-512 F/BW/VL and the features of `D`/`D2`.
#[inline(always)]
pub(crate) unsafe fn sym<T: SymPair, D: Dot512, D2: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [_mm256_setzero_ps(); B];
    let mut parts: Parts<B> = [[_mm256_setzero_si256(); GROUP]; B];
    let mut i0 = 0;
    while i0 < nb {
        let count = (nb - i0).min(GROUP);
        let (x, y) = (w.add(i0 * T::BYTES), a.add(i0 * Q8_0_BYTES));
        for j in 0..count / 2 {
            let q = T::codes2(x.add(2 * j * T::BYTES));
            // Signed × signed via |q| · (y negated where q < 0).
            let neg = _mm512_movepi8_mask(q);
            let aq = _mm512_abs_epi8(q);
            for (k, parts) in parts.iter_mut().enumerate() {
                let yv = load_pair(y.add(k * stride + 2 * j * Q8_0_BYTES + 2), Q8_0_BYTES);
                let s = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
                park(parts, 2 * j, D::dpbusd(_mm512_setzero_si512(), aq, s));
            }
        }
        if count % 2 == 1 {
            let b = count - 1;
            blocks32::sym_block::<T, D2, B>(
                x.add(b * T::BYTES),
                y.add(b * Q8_0_BYTES),
                stride,
                b,
                &mut parts,
            );
        }
        apply_group::<B>(&mut parts, count, x, T::BYTES, y, Q8_0_BYTES, stride, None, &mut acc);
        i0 += GROUP;
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = fold8(*acc);
    }
}

/// Q4_1 × Q8_1 for `B` vectors, two blocks per step. Contract block lanes, as `blocks32::q4_1`.
///
/// Safety: as `blocks32::q4_1`, plus AVX-512 F/BW/VL and the features of `D`/`D2`.
#[inline(always)]
pub(crate) unsafe fn q4_1<D: Dot512, D2: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    /// Bytes of a Q4_1 block.
    const W: usize = block_bytes::Q4_1;
    let mut acc = [_mm256_setzero_ps(); B];
    let mut parts: Parts<B> = [[_mm256_setzero_si256(); GROUP]; B];
    let mut i0 = 0;
    while i0 < nb {
        let count = (nb - i0).min(GROUP);
        let (x, y) = (w.add(i0 * W), a.add(i0 * Q8_1_BYTES));
        for j in 0..count / 2 {
            let u = nibbles_pair(x.add(2 * j * W + 4), W);
            for (k, parts) in parts.iter_mut().enumerate() {
                let yv = load_pair(y.add(k * stride + 2 * j * Q8_1_BYTES + 4), Q8_1_BYTES);
                park(parts, 2 * j, D::dpbusd(_mm512_setzero_si512(), u, yv));
            }
        }
        if count % 2 == 1 {
            let b = count - 1;
            blocks32::q4_1_block::<D2, B>(
                x.add(b * W),
                y.add(b * Q8_1_BYTES),
                stride,
                b,
                &mut parts,
            );
        }
        // The offset term: m at byte 2 of a Q4_1 block, s at byte 2 of a Q8_1 block.
        apply_group::<B>(&mut parts, count, x, W, y, Q8_1_BYTES, stride, Some((2, 2)), &mut acc);
        i0 += GROUP;
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = fold8(*acc);
    }
}
