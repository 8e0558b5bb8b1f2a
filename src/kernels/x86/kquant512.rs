//! 512-bit K-quant kernels (AVX-512 BW and AVX512-VNNI tiers): Q4_K and Q6_K against Q8_K.
//!
//! Same arithmetic as `kquant256` (exact i32 super-block sums), but one 64-byte register covers 64
//! consecutive elements, so a 64-byte activation load needs no shuffle: weight bytes are broadcast into
//! both 256-bit halves and each half is shifted by its own amount with a masked shift.

use std::arch::x86_64::*;

use super::isa::{f16_at, f32_at, hsum256_i32, load256, Dot512};
use super::kquant256::{q4k_scales_mins, Q4K_BYTES, Q6K_BYTES, Q8K_BSUMS, Q8K_BYTES, Q8K_QS};

/// 64 unaligned bytes at `p`.
#[inline(always)]
unsafe fn load512(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p as *const _)
}

/// i16 lanes 16..32 (the upper 256 bits) of a 512-bit register, as a mask.
const UPPER_WORDS: __mmask32 = 0xFFFF_0000;
/// i16 lanes 0..16 (the lower 256 bits).
const LOWER_WORDS: __mmask32 = 0x0000_FFFF;
/// `vpternlog` truth table of `(A & B) | C`: bit (a<<2 | b<<1 | c) set for 1,3,5,6,7.
const AND_OR: i32 = 0xEA;

/// Q4_K × Q8_K for `B` activation vectors.
///
/// Safety: `w` holds `nb` Q4_K blocks, every vector `nb` Q8_K blocks, `out` B floats; CPU has
/// AVX-512 F/BW/VL, AVX2/FMA/F16C and the features of `D`.
#[inline(always)]
pub(crate) unsafe fn q4_k<D: Dot512, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let mut acc = [0.0f32; B];
    // Chunk c of 64 elements is sub-blocks 2c (i32 lanes 0..8) and 2c+1 (lanes 8..16).
    let idx = [
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
        _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7),
    ];
    for i in 0..nb {
        let x = w.add(i * Q4K_BYTES);
        let (d, dmin) = (f16_at(x), f16_at(x.add(2)));
        let (sc, mn) = q4k_scales_mins(x.add(4));
        // [8] i32 (in a 512-bit register), lane j = scale j in both i16 halves.
        let s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(sc as i64));
        let sdup = _mm512_zextsi256_si512(_mm256_or_si256(s32, _mm256_slli_epi32(s32, 16)));
        // [16] i16 mins, min j at positions 2j and 2j+1.
        let m8 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64));
        let mins = _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
        let mut isum = [_mm512_setzero_si512(); B];
        for (c, idx) in idx.iter().enumerate() {
            let qb = _mm512_broadcast_i64x4(load256(x.add(16 + 32 * c)));
            // Lower half: low nibbles (sub-block 2c); upper half: high nibbles (2c+1).
            let q = _mm512_and_si512(_mm512_mask_srli_epi16::<4>(qb, UPPER_WORDS, qb), m4);
            let sv = _mm512_permutexvar_epi32(*idx, sdup);
            for (k, isum) in isum.iter_mut().enumerate() {
                let y = a.add(k * stride + i * Q8K_BYTES + Q8K_QS + 64 * c);
                *isum = D::dpwssd(*isum, _mm512_maddubs_epi16(q, load512(y)), sv);
            }
        }
        for k in 0..B {
            let y = a.add(k * stride + i * Q8K_BYTES);
            let dy = f32_at(y);
            let msum = hsum256_i32(_mm256_madd_epi16(load256(y.add(Q8K_BSUMS)), mins));
            // The block-exact order of the Q4_K reference (`quant::contract`, super-block chain) (shared with the packed kernels).
            acc[k] = (_mm512_reduce_add_epi32(isum[k]) as f32).mul_add(d * dy, acc[k]);
            acc[k] = (msum as f32).mul_add(-(dmin * dy), acc[k]);
        }
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = *acc;
    }
}

/// Q6_K × Q8_K for `B` activation vectors (unsigned codes, -32 offset through `bsums`).
///
/// Safety: as `q4_k`, with 210-byte Q6_K blocks.
#[inline(always)]
pub(crate) unsafe fn q6_k<D: Dot512, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let m30 = _mm512_set1_epi8(0x30);
    let mut acc = [0.0f32; B];
    // For 64 consecutive elements starting at group g0: i32 lanes 4j..4j+4 take scale g0+j.
    let idx = [
        _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
        _mm512_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7),
        _mm512_setr_epi32(8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11),
        _mm512_setr_epi32(12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15),
    ];
    for i in 0..nb {
        let x = w.add(i * Q6K_BYTES);
        let d = f16_at(x.add(208));
        let sc8 = _mm_loadu_si128(x.add(192) as *const __m128i); // [16] i8 scales
        let sc16 = _mm256_cvtepi8_epi16(sc8); // [16] i16, for the offset term
        let s32 = _mm512_cvtepi8_epi32(sc8);
        // [16] i32, lane g = scale g in both i16 halves.
        let sdup = _mm512_or_si512(
            _mm512_and_si512(s32, _mm512_set1_epi32(0xFFFF)),
            _mm512_slli_epi32::<16>(s32),
        );
        let mut isum = [_mm512_setzero_si512(); B];
        for h in 0..2 {
            let ql = load512(x.add(64 * h));
            let qhb = _mm512_broadcast_i64x4(load256(x.add(128 + 32 * h)));
            let lo = _mm512_and_si512(ql, m4);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4);
            // High 2 bits moved to bits 4..6: elements 0..32 use qh bits 0-1, 32..64 bits 2-3,
            // 64..96 bits 4-5, 96..128 bits 6-7.
            let hl = _mm512_mask_slli_epi16::<4>(_mm512_slli_epi16::<2>(qhb), LOWER_WORDS, qhb);
            let hh = _mm512_mask_srli_epi16::<2>(qhb, UPPER_WORDS, qhb);
            let e_lo = _mm512_ternarylogic_epi32::<AND_OR>(hl, m30, lo); // elements 0..64 of the half
            let e_hi = _mm512_ternarylogic_epi32::<AND_OR>(hh, m30, hi); // elements 64..128
            let sv_lo = _mm512_permutexvar_epi32(idx[2 * h], sdup);
            let sv_hi = _mm512_permutexvar_epi32(idx[2 * h + 1], sdup);
            for (k, isum) in isum.iter_mut().enumerate() {
                let y = a.add(k * stride + i * Q8K_BYTES + Q8K_QS + 128 * h);
                *isum = D::dpwssd(*isum, _mm512_maddubs_epi16(e_lo, load512(y)), sv_lo);
                *isum = D::dpwssd(*isum, _mm512_maddubs_epi16(e_hi, load512(y.add(64))), sv_hi);
            }
        }
        for k in 0..B {
            let y = a.add(k * stride + i * Q8K_BYTES);
            let off = _mm512_zextsi256_si512(_mm256_madd_epi16(load256(y.add(Q8K_BSUMS)), sc16));
            // 32 (= 1 << 5): the code midpoint removed from every element.
            let s = _mm512_reduce_add_epi32(_mm512_sub_epi32(isum[k], _mm512_slli_epi32::<5>(off)));
            // The block-exact order of the Q6_K reference (`quant::contract`, super-block chain) (shared with the packed kernels).
            acc[k] = (s as f32).mul_add(d * f32_at(y), acc[k]);
        }
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = *acc;
    }
}
