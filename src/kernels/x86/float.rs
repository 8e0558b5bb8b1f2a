//! F32 and F16 weight rows against f32 activations, 256-bit (AVX2 tiers) and 512-bit (AVX-512 tiers).

use std::arch::x86_64::*;

use super::isa::{f16_at, f32_at, hsum256};

/// A float weight format: element size and vector loads widened to f32.
pub(crate) trait FloatW {
    /// Bytes per element.
    const SIZE: usize;
    /// 8 elements at `p` as f32.
    unsafe fn load8(p: *const u8) -> __m256;
    /// 16 elements at `p` as f32 (AVX-512 only).
    unsafe fn load16(p: *const u8) -> __m512;
    /// One element at `p` as f32.
    unsafe fn one(p: *const u8) -> f32;
}

/// F32 weights.
pub(crate) struct F32;
/// F16 weights (converted with F16C / AVX-512F).
pub(crate) struct F16;

impl FloatW for F32 {
    const SIZE: usize = 4;
    #[inline(always)]
    unsafe fn load8(p: *const u8) -> __m256 {
        _mm256_loadu_ps(p as *const f32)
    }
    #[inline(always)]
    unsafe fn load16(p: *const u8) -> __m512 {
        _mm512_loadu_ps(p as *const f32)
    }
    #[inline(always)]
    unsafe fn one(p: *const u8) -> f32 {
        f32_at(p)
    }
}

impl FloatW for F16 {
    const SIZE: usize = 2;
    #[inline(always)]
    unsafe fn load8(p: *const u8) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }
    #[inline(always)]
    unsafe fn load16(p: *const u8) -> __m512 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
    }
    #[inline(always)]
    unsafe fn one(p: *const u8) -> f32 {
        f16_at(p)
    }
}

/// `out[k] = Σ w[j] * act_k[j]` over `n` elements with 8-lane FMAs, `B` f32 vectors at `a + k*stride`.
///
/// Safety: `w` holds `n` elements, each vector `n` f32, `out` B floats; CPU has AVX2/FMA/F16C.
#[inline(always)]
pub(crate) unsafe fn dot256<W: FloatW, const B: usize>(n: usize, w: *const u8, a: *const u8, stride: usize, out: *mut f32) {
    let mut acc = [_mm256_setzero_ps(); B];
    let full = n / 8 * 8;
    let mut j = 0;
    while j < full {
        let wv = W::load8(w.add(j * W::SIZE));
        for (k, acc) in acc.iter_mut().enumerate() {
            *acc = _mm256_fmadd_ps(wv, _mm256_loadu_ps(a.add(k * stride + 4 * j) as *const f32), *acc);
        }
        j += 8;
    }
    for (k, acc) in acc.iter().enumerate() {
        let mut s = hsum256(*acc);
        for t in full..n {
            s += W::one(w.add(t * W::SIZE)) * f32_at(a.add(k * stride + 4 * t));
        }
        *out.add(k) = s;
    }
}

/// As `dot256` with 16-lane FMAs.
///
/// Safety: as `dot256`, plus AVX-512F.
#[inline(always)]
pub(crate) unsafe fn dot512<W: FloatW, const B: usize>(n: usize, w: *const u8, a: *const u8, stride: usize, out: *mut f32) {
    let mut acc = [_mm512_setzero_ps(); B];
    let full = n / 16 * 16;
    let mut j = 0;
    while j < full {
        let wv = W::load16(w.add(j * W::SIZE));
        for (k, acc) in acc.iter_mut().enumerate() {
            *acc = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a.add(k * stride + 4 * j) as *const f32), *acc);
        }
        j += 16;
    }
    for (k, acc) in acc.iter().enumerate() {
        let mut s = _mm512_reduce_add_ps(*acc);
        for t in full..n {
            s += W::one(w.add(t * W::SIZE)) * f32_at(a.add(k * stride + 4 * t));
        }
        *out.add(k) = s;
    }
}
