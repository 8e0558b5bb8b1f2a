//! 512-bit kernels for the 32-element block formats (AVX-512 tiers): two consecutive blocks per
//! register, halving the per-block instruction count of `blocks32` (which handles an odd last block).
//!
//! Lanes 0..32 of a register hold block `b`, lanes 32..64 block `b+1`, in element order, matching a
//! pair of Q8_0/Q8_1 activation blocks loaded as two 32-byte halves. Integer dots are exact as in
//! `blocks32`; the per-block scales `d_w*d_a` are applied as one 16-lane vector `[s_b ×8, s_b+1 ×8]`
//! (`d_a` read as f32 from after the vector's blocks, `kernels::act_row`).
//! With `b` even that is exactly the numeric contract's sixteen quad lanes
//! (`quant::contract::quad_dot`: even blocks in lanes 0..8, odd ones in 8..16); an odd last block
//! goes into the low half, as the 256-bit kernels put it, so every tier gets the same bits.

use std::arch::x86_64::*;

use super::blocks32::{self, SymBlock, Q4_0, Q5_0, Q8_0};
use super::isa::{fold8, load256, u32_at, Dot256, Dot512};
use crate::quant::block_bytes;

/// Bytes of a Q8_0 activation block.
const Q8_0_BYTES: usize = block_bytes::Q8_0;
/// Bytes of a Q8_1 activation block.
const Q8_1_BYTES: usize = block_bytes::Q8_1;

/// The f16 values at `p` and `p + gap`, converted: lanes 0..8 = first, lanes 8..16 = second.
///
/// Packs both halves into one u32 in a general register, converts the pair with one 128-bit
/// `vcvtph2ps`, and spreads it with one `vpermps` (LLVM turned two broadcasts into 6 shuffles).
#[inline(always)]
unsafe fn f16_pair(p: *const u8, gap: usize) -> __m512 {
    let lo = std::ptr::read_unaligned(p as *const u16) as u32;
    let hi = std::ptr::read_unaligned(p.add(gap) as *const u16) as u32;
    let pair = _mm_cvtph_ps(_mm_cvtsi32_si128((lo | hi << 16) as i32));
    let idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(pair))
}

/// The two consecutive f16 at `p` and the two at `p + gap`, converted: `.0` lanes 0..8 = `p[0..2]`,
/// 8..16 = `p[gap..gap + 2]`; `.1` the same of the second f16 of each (Q4_1's `d` and `m`, Q8_1's
/// `d` and `s`).
///
/// Both pairs in one u64, one `vcvtph2ps`, two `vpermps`: half the loads and conversions of two
/// `f16_pair` calls, in the inner loop of every Q4_1 batch (the conversion is exact either way).
#[inline(always)]
unsafe fn f16_pairs2(p: *const u8, gap: usize) -> (__m512, __m512) {
    let lo = std::ptr::read_unaligned(p as *const u32) as u64;
    let hi = std::ptr::read_unaligned(p.add(gap) as *const u32) as u64;
    let four = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi64_si128((lo | hi << 32) as i64)));
    let first = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    let second = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    (_mm512_permutexvar_ps(first, four), _mm512_permutexvar_ps(second, four))
}

/// The two f32 at `p`: lanes 0..8 = first, 8..16 = second (one 64-bit load, one `vpermps`).
#[inline(always)]
unsafe fn f32_pair(p: *const u8) -> __m512 {
    let pair = _mm_castsi128_ps(_mm_loadl_epi64(p as *const __m128i));
    let idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(pair))
}

/// The four f32 at `p`, two (first, second) pairs: `.0` lanes 0..8 = `p[0]`, 8..16 = `p[2]`; `.1`
/// the same of `p[1]` and `p[3]` (Q8_1's f32 `d` and `s` of two consecutive blocks).
#[inline(always)]
unsafe fn f32_pairs2(p: *const u8) -> (__m512, __m512) {
    let four = _mm512_castps128_ps512(_mm_loadu_ps(p as *const f32));
    let first = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    let second = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    (_mm512_permutexvar_ps(first, four), _mm512_permutexvar_ps(second, four))
}

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

/// The low 256 bits of `v` as f32 lanes.
#[inline(always)]
unsafe fn low(v: __m512) -> __m256 {
    _mm512_castps512_ps256(v)
}

/// `v` with its low 256 bits replaced by `lo`.
#[inline(always)]
unsafe fn with_low(v: __m512, lo: __m256) -> __m512 {
    _mm512_castpd_ps(_mm512_insertf64x4::<0>(_mm512_castps_pd(v), _mm256_castps_pd(lo)))
}

/// The contract's `fold16` of the 16 lanes of `v` (high half onto low, then `fold8`).
#[inline(always)]
unsafe fn fold16(v: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    fold8(_mm256_add_ps(low(v), hi))
}

/// Signed-code blocks × Q8_0 for `B` vectors, two blocks per step; an odd last block goes through
/// the 256-bit code into the low (even) half of the accumulator.
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
    let mut acc = [_mm512_setzero_ps(); B];
    let scales = a.add(nb * Q8_0_BYTES);
    for j in 0..nb / 2 {
        let x = w.add(2 * j * T::BYTES);
        let q = T::codes2(x);
        // Signed × signed via |q| · (y negated where q < 0).
        let neg = _mm512_movepi8_mask(q);
        let aq = _mm512_abs_epi8(q);
        let dw = f16_pair(x, T::BYTES);
        for (k, acc) in acc.iter_mut().enumerate() {
            let y = a.add(k * stride + 2 * j * Q8_0_BYTES);
            let yv = load_pair(y.add(2), Q8_0_BYTES);
            let s = _mm512_mask_sub_epi8(yv, neg, _mm512_setzero_si512(), yv);
            let p = D::dpbusd(_mm512_setzero_si512(), aq, s);
            let da = f32_pair(scales.add(k * stride + 2 * j * 4));
            *acc = _mm512_add_ps(*acc, _mm512_mul_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, da)));
        }
    }
    if nb % 2 == 1 {
        let i = nb - 1;
        let mut lo: [__m256; B] = std::array::from_fn(|k| low(acc[k]));
        blocks32::sym_block::<T, D2, B>(
            w.add(i * T::BYTES),
            a.add(i * Q8_0_BYTES),
            scales.add(4 * i),
            stride,
            &mut lo,
        );
        for k in 0..B {
            acc[k] = with_low(acc[k], lo[k]);
        }
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = fold16(*acc);
    }
}

/// Q4_1 × Q8_1 for `B` vectors, two blocks per step (quad lanes and the two offset chains of
/// `quant::contract::quad_dot`, the chains in lanes 0 and 8).
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
    let mut acc = [_mm512_setzero_ps(); B];
    // m_w * s_a summed in vectors whose 8-lane halves are equal; lanes 0 (even blocks) and 8
    // (odd blocks) are used.
    let mut off = [_mm512_setzero_ps(); B];
    let scales = a.add(nb * Q8_1_BYTES);
    for j in 0..nb / 2 {
        let x = w.add(2 * j * W);
        let u = nibbles_pair(x.add(4), W);
        let (dw, m) = f16_pairs2(x, W);
        for k in 0..B {
            let y = a.add(k * stride + 2 * j * Q8_1_BYTES);
            let p = D::dpbusd(_mm512_setzero_si512(), u, load_pair(y.add(4), Q8_1_BYTES));
            let (da, sa) = f32_pairs2(scales.add(k * stride + 2 * j * 8));
            acc[k] =
                _mm512_add_ps(acc[k], _mm512_mul_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, da)));
            off[k] = _mm512_add_ps(off[k], _mm512_mul_ps(m, sa));
        }
    }
    if nb % 2 == 1 {
        let i = nb - 1;
        let mut lo: [__m256; B] = std::array::from_fn(|k| low(acc[k]));
        let mut lo_off: [__m256; B] = std::array::from_fn(|k| low(off[k]));
        blocks32::q4_1_block::<D2, B>(
            w.add(i * W),
            a.add(i * Q8_1_BYTES),
            scales.add(8 * i),
            stride,
            &mut lo,
            &mut lo_off,
        );
        for k in 0..B {
            acc[k] = with_low(acc[k], lo[k]);
            off[k] = with_low(off[k], lo_off[k]);
        }
    }
    for k in 0..B {
        let offsets = _mm512_cvtss_f32(off[k]) + _mm_cvtss_f32(_mm512_extractf32x4_ps::<2>(off[k]));
        *out.add(k) = fold16(acc[k]) + offsets;
    }
}
