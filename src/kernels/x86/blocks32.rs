//! 256-bit kernels for the 32-element block formats: Q4_0, Q5_0, Q8_0 (signed codes · Q8_0) and
//! Q4_1 (unsigned codes + offset · Q8_1). One 32-byte register holds a block's 32 codes in element
//! order; per block and activation vector: one integer dot (exact), one convert, one FMA by `d_w*d_a`.

use std::arch::x86_64::*;

use super::isa::{f16x8_at, hsum256, load256, u32_at, Dot256};
use crate::quant::block_bytes;

/// Bytes of a Q8_0 activation block (f16 scale + 32 i8).
const Q8_0_BYTES: usize = block_bytes::Q8_0;
/// Bytes of a Q8_1 activation block (f16 scale, f16 scaled sum, 32 i8).
const Q8_1_BYTES: usize = block_bytes::Q8_1;

/// The 32 4-bit codes of 16 packed bytes at `p` in element order (low nibbles, then high nibbles).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    let t = _mm_loadu_si128(p as *const __m128i);
    _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F))
}

/// A weight format with signed codes and one f16 scale first in each 32-element block.
pub(crate) trait SymBlock {
    /// Bytes per block.
    const BYTES: usize;
    /// The block's 32 signed codes, element order.
    unsafe fn codes<D: Dot256>(p: *const u8) -> __m256i;
}

/// Q4_0: `d`, 16 bytes of nibbles; code = nibble - 8.
pub(crate) struct Q4_0;
/// Q5_0: `d`, u32 of 5th bits, 16 bytes of nibbles; code = (nibble | bit<<4) - 16.
pub(crate) struct Q5_0;
/// Q8_0: `d`, 32 i8 codes.
pub(crate) struct Q8_0;

impl SymBlock for Q4_0 {
    const BYTES: usize = block_bytes::Q4_0;
    #[inline(always)]
    unsafe fn codes<D: Dot256>(p: *const u8) -> __m256i {
        // 8: the 4-bit midpoint.
        _mm256_sub_epi8(nibbles(p.add(2)), _mm256_set1_epi8(8))
    }
}

impl SymBlock for Q5_0 {
    const BYTES: usize = block_bytes::Q5_0;
    #[inline(always)]
    unsafe fn codes<D: Dot256>(p: *const u8) -> __m256i {
        let high = D::expand_bits(u32_at(p.add(2)));
        // (nibble | 16*bit) - 16 == nibble - 16 where the bit is clear, nibble where it is set.
        _mm256_sub_epi8(nibbles(p.add(6)), _mm256_andnot_si256(high, _mm256_set1_epi8(16)))
    }
}

impl SymBlock for Q8_0 {
    const BYTES: usize = block_bytes::Q8_0;
    #[inline(always)]
    unsafe fn codes<D: Dot256>(p: *const u8) -> __m256i {
        load256(p.add(2))
    }
}

/// `out[k] = Σ_blocks d_w*d_a[k] * Σ code*q8` for `B` Q8_0 vectors at `a + k*stride`, `nb` blocks.
///
/// Safety: `w` must hold `nb` blocks, each `a + k*stride` (k < B) `nb` Q8_0 blocks, `out` B floats,
/// and the CPU must have the features of `D` plus AVX2/FMA/F16C.
#[inline(always)]
pub(crate) unsafe fn sym<T: SymBlock, D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [_mm256_setzero_ps(); B];
    for i in 0..nb {
        let x = w.add(i * T::BYTES);
        let q = T::codes::<D>(x);
        // Signed × signed via unsigned × signed: |q| · (y with q's sign).
        let aq = _mm256_sign_epi8(q, q);
        let dw = f16x8_at(x);
        for (k, acc) in acc.iter_mut().enumerate() {
            let y = a.add(k * stride + i * Q8_0_BYTES);
            let s = _mm256_sign_epi8(load256(y.add(2)), q);
            let p = D::dpbusd(_mm256_setzero_si256(), aq, s);
            *acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, f16x8_at(y)), _mm256_cvtepi32_ps(p), *acc);
        }
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = hsum256(*acc);
    }
}

/// Q4_1 × Q8_1: `Σ d_w*d_a * Σ nibble*q8 + m_w * s_a` per block, for `B` vectors.
///
/// Safety: as `sym`, with 20-byte Q4_1 weight blocks and 36-byte Q8_1 activation blocks.
#[inline(always)]
pub(crate) unsafe fn q4_1<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let mut acc = [_mm256_setzero_ps(); B];
    // m_w * s_a summed in vectors whose 8 lanes are equal (no scalar dependency chain); lane 0 is used.
    let mut summ = [_mm256_setzero_ps(); B];
    for i in 0..nb {
        let x = w.add(i * block_bytes::Q4_1);
        let (dw, m) = (f16x8_at(x), f16x8_at(x.add(2)));
        let u = nibbles(x.add(4));
        for k in 0..B {
            let y = a.add(k * stride + i * Q8_1_BYTES);
            let p = D::dpbusd(_mm256_setzero_si256(), u, load256(y.add(4)));
            acc[k] = _mm256_fmadd_ps(_mm256_mul_ps(dw, f16x8_at(y)), _mm256_cvtepi32_ps(p), acc[k]);
            summ[k] = _mm256_fmadd_ps(m, f16x8_at(y.add(2)), summ[k]);
        }
    }
    for k in 0..B {
        *out.add(k) = hsum256(acc[k]) + _mm256_cvtss_f32(summ[k]);
    }
}
