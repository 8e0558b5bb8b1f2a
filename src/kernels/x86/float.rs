//! F32 and F16 weight rows against f32 activations, 256-bit (AVX2 tiers) and 512-bit (AVX-512 tiers).

use std::arch::x86_64::*;

use super::isa::{f16_at, f32_at, fold8};

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

/// `out[k] = Σ w[j] · act_k[j]` over `n` elements for `B` f32 vectors at `a + k*stride`, in the
/// numeric contract's sixteen element lanes (`quant::contract::dot16`: lane `l` takes elements
/// `j ≡ l mod 16` of the whole 16-element groups, product then sum, never fused), the 16 lanes kept in
/// two 8-lane registers, folded `l + l+8` and by `fold8`, then the tail products added one by one.
///
/// Safety: `w` holds `n` elements, each vector `n` f32, `out` B floats; CPU has AVX2/FMA/F16C.
#[inline(always)]
pub(crate) unsafe fn dot256<W: FloatW, const B: usize>(
    n: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut lo = [_mm256_setzero_ps(); B]; // lanes 0..8
    let mut hi = [_mm256_setzero_ps(); B]; // lanes 8..16
    let full = n / 16 * 16;
    let mut j = 0;
    while j < full {
        let (w0, w1) = (W::load8(w.add(j * W::SIZE)), W::load8(w.add((j + 8) * W::SIZE)));
        for k in 0..B {
            let x = a.add(k * stride + 4 * j) as *const f32;
            lo[k] = _mm256_add_ps(lo[k], _mm256_mul_ps(w0, _mm256_loadu_ps(x)));
            hi[k] = _mm256_add_ps(hi[k], _mm256_mul_ps(w1, _mm256_loadu_ps(x.add(8))));
        }
        j += 16;
    }
    for k in 0..B {
        let s = fold8(_mm256_add_ps(lo[k], hi[k]));
        *out.add(k) = dot_tail::<W>(s, full, n, w, a.add(k * stride));
    }
}

/// As `dot256` with the 16 lanes in one 512-bit register (bitwise the same results).
///
/// Safety: as `dot256`, plus AVX-512F.
#[inline(always)]
pub(crate) unsafe fn dot512<W: FloatW, const B: usize>(
    n: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [_mm512_setzero_ps(); B]; // lanes 0..16
    let full = n / 16 * 16;
    let mut j = 0;
    while j < full {
        let wv = W::load16(w.add(j * W::SIZE));
        for (k, acc) in acc.iter_mut().enumerate() {
            let x = _mm512_loadu_ps(a.add(k * stride + 4 * j) as *const f32);
            *acc = _mm512_add_ps(*acc, _mm512_mul_ps(wv, x));
        }
        j += 16;
    }
    for (k, acc) in acc.iter().enumerate() {
        let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(*acc)));
        let s = fold8(_mm256_add_ps(_mm512_castps512_ps256(*acc), hi));
        *out.add(k) = dot_tail::<W>(s, full, n, w, a.add(k * stride));
    }
}

/// `s` plus the products of elements `from..n`, one at a time (multiply, then add).
///
/// Safety: as `dot256`, `a` one vector.
#[inline(always)]
unsafe fn dot_tail<W: FloatW>(
    mut s: f32,
    from: usize,
    n: usize,
    w: *const u8,
    a: *const u8,
) -> f32 {
    for t in from..n {
        s += W::one(w.add(t * W::SIZE)) * f32_at(a.add(4 * t));
    }
    s
}

/// `out[d] += Σ_j p[j] · v[j][d]` over `n` rows of `hd` elements at `v` (an attention weighted V
/// sum, from `out`'s values), 8-lane vectors, `A` of them per pass over the rows so the
/// accumulators stay in registers.
/// Multiply then add, never fused: each lane performs exactly the scalar reference's operations in
/// the same order, so the result is bitwise the reference's on every tier.
///
/// Safety: `v` holds `n*hd` elements, `p` n floats, `out` hd floats; CPU has AVX2/F16C.
#[inline(always)]
pub(crate) unsafe fn wsum256<W: FloatW>(
    hd: usize,
    n: usize,
    p: *const f32,
    v: *const u8,
    out: *mut f32,
) {
    /// One pass over the rows for lanes `d0 .. d0 + 8*A`.
    #[inline(always)]
    unsafe fn pass<W: FloatW, const A: usize>(
        hd: usize,
        n: usize,
        p: *const f32,
        v: *const u8,
        out: *mut f32,
        d0: usize,
    ) {
        let mut acc = [_mm256_setzero_ps(); A];
        for (i, acc) in acc.iter_mut().enumerate() {
            *acc = _mm256_loadu_ps(out.add(d0 + 8 * i));
        }
        for j in 0..n {
            let pj = _mm256_set1_ps(*p.add(j));
            let row = v.add((j * hd + d0) * W::SIZE);
            for (i, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_add_ps(*acc, _mm256_mul_ps(pj, W::load8(row.add(8 * i * W::SIZE))));
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            _mm256_storeu_ps(out.add(d0 + 8 * i), *acc);
        }
    }
    let mut d = 0;
    // 8 accumulators (64 lanes) per pass: half of AVX2's 16 registers, the rest for loads/products.
    while d + 64 <= hd {
        pass::<W, 8>(hd, n, p, v, out, d);
        d += 64;
    }
    while d + 8 <= hd {
        pass::<W, 1>(hd, n, p, v, out, d);
        d += 8;
    }
    wsum_tail::<W>(hd, n, p, v, out, d);
}

/// As `wsum256` with 16-lane vectors.
///
/// Safety: as `wsum256`, plus AVX-512F.
#[inline(always)]
pub(crate) unsafe fn wsum512<W: FloatW>(
    hd: usize,
    n: usize,
    p: *const f32,
    v: *const u8,
    out: *mut f32,
) {
    /// One pass over the rows for lanes `d0 .. d0 + 16*A`.
    #[inline(always)]
    unsafe fn pass<W: FloatW, const A: usize>(
        hd: usize,
        n: usize,
        p: *const f32,
        v: *const u8,
        out: *mut f32,
        d0: usize,
    ) {
        let mut acc = [_mm512_setzero_ps(); A];
        for (i, acc) in acc.iter_mut().enumerate() {
            *acc = _mm512_loadu_ps(out.add(d0 + 16 * i));
        }
        for j in 0..n {
            let pj = _mm512_set1_ps(*p.add(j));
            let row = v.add((j * hd + d0) * W::SIZE);
            for (i, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_add_ps(*acc, _mm512_mul_ps(pj, W::load16(row.add(16 * i * W::SIZE))));
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            _mm512_storeu_ps(out.add(d0 + 16 * i), *acc);
        }
    }
    let mut d = 0;
    // 8 accumulators (128 lanes, a whole Qwen head) per pass: a quarter of AVX-512's 32 registers.
    while d + 128 <= hd {
        pass::<W, 8>(hd, n, p, v, out, d);
        d += 128;
    }
    while d + 16 <= hd {
        pass::<W, 1>(hd, n, p, v, out, d);
        d += 16;
    }
    wsum_tail::<W>(hd, n, p, v, out, d);
}

/// Lanes `d0..hd` of the weighted sum, one element at a time (the reference's operations).
///
/// Safety: as `wsum256`.
#[inline(always)]
unsafe fn wsum_tail<W: FloatW>(
    hd: usize,
    n: usize,
    p: *const f32,
    v: *const u8,
    out: *mut f32,
    d0: usize,
) {
    for d in d0..hd {
        let mut s = *out.add(d);
        for j in 0..n {
            s += *p.add(j) * W::one(v.add((j * hd + d) * W::SIZE));
        }
        *out.add(d) = s;
    }
}
