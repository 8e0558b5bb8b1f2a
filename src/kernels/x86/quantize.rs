//! AVX2 activation quantizers (Q8_0, Q8_1, Q8_K), bit-identical to the scalar references in
//! `crate::quant` including their rounding modes (Q8_0/Q8_1: half away from zero; Q8_K: half to even),
//! their saturation, and NaN/infinity handling. Used by every x86 tier.

use std::arch::x86_64::*;

use super::isa::hsum256_i32;
use crate::quant::{block_bytes, QK, QK_K};

/// `|v|` per lane.
#[inline(always)]
unsafe fn abs_ps(v: __m256) -> __m256 {
    _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff)))
}

/// Largest lane (no lane is NaN here).
#[inline(always)]
unsafe fn hmax(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_movehdup_ps(m));
    _mm_cvtss_f32(m)
}

/// Running `max(|v|, acc)`; `vmaxps` returns its second operand when either is NaN, so NaN lanes
/// are skipped exactly as `f32::max` / `>` skip them in the reference.
#[inline(always)]
unsafe fn amax_step(v: __m256, acc: __m256) -> __m256 {
    _mm256_max_ps(abs_ps(v), acc)
}

/// Rounds to an integer-valued f32 with Rust's `f32::round` (ties away from zero), then saturates
/// to the i8 range and maps NaN to 0, as `(v).round() as i8` does.
#[inline(always)]
unsafe fn round_away_i8(x: __m256) -> __m256 {
    let t = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(x);
    // x - trunc(x) is exact; |fraction| >= 0.5 rounds one step away from zero.
    let frac = abs_ps(_mm256_sub_ps(x, t));
    let up = _mm256_cmp_ps::<_CMP_GE_OQ>(frac, _mm256_set1_ps(0.5));
    let sign = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(i32::MIN)));
    let step = _mm256_and_ps(up, _mm256_or_ps(sign, _mm256_set1_ps(1.0)));
    let r = _mm256_add_ps(t, step);
    // i8 saturation (-128..=127), then NaN -> 0 (vmaxps returns -128 for NaN, masked off here).
    let r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0)), _mm256_set1_ps(127.0));
    _mm256_and_ps(r, _mm256_cmp_ps::<_CMP_ORD_Q>(x, x))
}

/// Rounds half to even and maps like the Q8_K reference's `(r as i32).min(127) as i8`: values above
/// 127 (incl. +inf) give 127, NaN gives 0, and -inf (the only value below -128 that can occur, when
/// the scale overflowed) saturates to `i32::MIN`, whose low byte is 0.
#[inline(always)]
unsafe fn round_even_q8k(x: __m256) -> __m256 {
    let r = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(x);
    // False for NaN and for anything below -128: both become 0 (tested before `vminps`, which
    // would turn NaN into 127).
    let keep = _mm256_cmp_ps::<_CMP_GE_OQ>(r, _mm256_set1_ps(-128.0));
    _mm256_and_ps(_mm256_min_ps(r, _mm256_set1_ps(127.0)), keep)
}

/// Packs four vectors of 8 integer-valued i32 (all in i8 range) into 32 bytes in element order.
#[inline(always)]
unsafe fn pack_i8(q: [__m256i; 4]) -> __m256i {
    let a = _mm256_packs_epi32(q[0], q[1]);
    let b = _mm256_packs_epi32(q[2], q[3]);
    let p = _mm256_packs_epi16(a, b);
    // packs works per 128-bit lane; restore element order of the eight 4-byte groups.
    _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// f32 -> f16 bits, round to nearest even (as `half::f16::from_f32`).
#[inline(always)]
unsafe fn f16_bits(v: f32) -> [u8; 2] {
    let h = _mm_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm_set_ss(v));
    (_mm_extract_epi16::<0>(h) as u16).to_le_bytes()
}

/// Q8_0 (`SUM = false`, 34-byte blocks) or Q8_1 (`SUM = true`, 36-byte blocks with the scaled sum).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_or_1<const SUM: bool>(x: &[f32], dst: &mut [u8]) {
    let (bytes, qs) = if SUM { (36, 4) } else { (34, 2) };
    for (xb, b) in x.chunks_exact(QK).zip(dst.chunks_exact_mut(bytes)) {
        let p = xb.as_ptr();
        let v = [
            _mm256_loadu_ps(p),
            _mm256_loadu_ps(p.add(8)),
            _mm256_loadu_ps(p.add(16)),
            _mm256_loadu_ps(p.add(24)),
        ];
        let mut am = _mm256_setzero_ps();
        for &vi in &v {
            am = amax_step(vi, am);
        }
        // 127: symmetric i8 range, as in the reference.
        let d = hmax(am) / 127.0;
        let id = _mm256_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
        let q = v.map(|vi| _mm256_cvtps_epi32(round_away_i8(_mm256_mul_ps(vi, id))));
        _mm256_storeu_si256(b.as_mut_ptr().add(qs) as *mut __m256i, pack_i8(q));
        b[0..2].copy_from_slice(&f16_bits(d));
        if SUM {
            let s = hsum256_i32(_mm256_add_epi32(
                _mm256_add_epi32(q[0], q[1]),
                _mm256_add_epi32(q[2], q[3]),
            ));
            b[2..4].copy_from_slice(&f16_bits(s as f32 * d));
        }
    }
}

/// Q8_K super-blocks (292 bytes: f32 d, 256 i8, 16 i16 sums).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_k(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.chunks_exact(QK_K).zip(dst.chunks_exact_mut(block_bytes::Q8_K)) {
        let p = xb.as_ptr();
        let mut am = _mm256_setzero_ps();
        for j in 0..QK_K / 8 {
            am = amax_step(_mm256_loadu_ps(p.add(8 * j)), am);
        }
        let amax = hmax(am);
        if amax == 0.0 {
            b.fill(0);
            continue;
        }
        // The first element of largest magnitude fixes the sign of the scale (as the reference's `>` scan).
        let target = _mm256_set1_ps(amax);
        let mut first = 0;
        for j in 0..QK_K / 8 {
            let m = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(
                abs_ps(_mm256_loadu_ps(p.add(8 * j))),
                target,
            ));
            if m != 0 {
                first = 8 * j + m.trailing_zeros() as usize;
                break;
            }
        }
        // -127: the largest magnitude maps to exactly -127 (symmetric range).
        let iscale = -127.0f32 / xb[first];
        let iv = _mm256_set1_ps(iscale);
        for c in 0..QK_K / 32 {
            let q: [__m256i; 4] = std::array::from_fn(|t| {
                _mm256_cvtps_epi32(round_even_q8k(_mm256_mul_ps(
                    _mm256_loadu_ps(p.add(32 * c + 8 * t)),
                    iv,
                )))
            });
            _mm256_storeu_si256(b.as_mut_ptr().add(4 + 32 * c) as *mut __m256i, pack_i8(q));
            // 16-element sums: groups 2c (vectors 0, 1) and 2c+1 (vectors 2, 3).
            let s0 = hsum256_i32(_mm256_add_epi32(q[0], q[1])) as i16;
            let s1 = hsum256_i32(_mm256_add_epi32(q[2], q[3])) as i16;
            b[260 + 4 * c..262 + 4 * c].copy_from_slice(&s0.to_le_bytes());
            b[262 + 4 * c..264 + 4 * c].copy_from_slice(&s1.to_le_bytes());
        }
        b[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

/// Checks a quantizer call: whole blocks, destination exactly sized.
fn check(x: &[f32], dst: &[u8], block: usize, bytes: usize) {
    assert!(
        x.len().is_multiple_of(block) && dst.len() == x.len() / block * bytes,
        "quantizer buffer sizes"
    );
}

/// Q8_0 quantizer (AVX2).
pub(crate) fn quant_q8_0(x: &[f32], dst: &mut [u8]) {
    check(x, dst, QK, 34);
    // SAFETY: only reachable through x86 kernel tables, which are handed out on CPUs with AVX2/FMA/F16C.
    unsafe { q8_0_or_1::<false>(x, dst) }
}

/// Q8_1 quantizer (AVX2).
pub(crate) fn quant_q8_1(x: &[f32], dst: &mut [u8]) {
    check(x, dst, QK, 36);
    // SAFETY: as `quant_q8_0`.
    unsafe { q8_0_or_1::<true>(x, dst) }
}

/// Q8_K quantizer (AVX2).
pub(crate) fn quant_q8_k(x: &[f32], dst: &mut [u8]) {
    check(x, dst, QK_K, block_bytes::Q8_K);
    // SAFETY: as `quant_q8_0`.
    unsafe { q8_k(x, dst) }
}
