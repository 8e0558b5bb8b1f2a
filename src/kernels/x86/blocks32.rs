//! 256-bit kernels for the 32-element block formats: Q4_0, Q5_0, Q8_0 (signed codes · Q8_0) and
//! Q4_1 (unsigned codes + offset · Q8_1), in the numeric contract's eight block lanes
//! (`quant::contract`, shape 2): block `i` of a row goes to lane `i mod 8`.
//!
//! One 32-byte register holds a block's 32 codes in element order. Per block and activation vector
//! one integer dot (8 exact i32 partial sums) is parked in a group buffer; after every 8 blocks the
//! buffer is reduced to one exact sum per block (`hsum8x256_i32`: lane i = block i) and the group
//! enters the float lanes with one convert, one multiply of the scales (`d_w·d_a`, gathered lane by
//! lane) and one FMA, exactly the scalar reference's `BlockLanes::add` for those 8 blocks.

use std::arch::x86_64::*;

use super::isa::{fold8, hsum8x256_i32, load256, u32_at, Dot256};
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

/// Blocks per group: the contract's block lanes.
pub(crate) const GROUP: usize = crate::quant::contract::BLOCK_LANES;

/// The integer partial sums of one group of blocks for `B` vectors: `[B][GROUP]`, entry `[k][b]`
/// eight i32 lanes whose sum is block `b`'s exact dot with vector `k`.
pub(crate) type Parts<const B: usize> = [[__m256i; GROUP]; B];

/// The f16 values at `p + i*step` for `i < count`, as f32 lanes `i`; lanes `count..8` are 0.
///
/// Safety: `count <= 8` and every read `p + i*step` (`i < count`) is inside one allocation.
#[inline(always)]
pub(crate) unsafe fn f16_lanes(p: *const u8, step: usize, count: usize) -> __m256 {
    let h = |i: usize| {
        if i < count {
            std::ptr::read_unaligned(p.add(i * step) as *const i16)
        } else {
            0
        }
    };
    _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)))
}

/// Adds one group of `count` blocks to the block lanes of every vector: `acc[k] = fma(isum, d_w·d_a,
/// acc[k])` lane by lane, then, for formats with an offset (`off`: the byte offset of the weight
/// block's `m` and of the activation block's `s`), `acc[k] = fma(m_w, s_a, acc[k])`. `x` is the
/// group's first weight block (`wb` bytes each), `a` vector 0's first activation block (`ab` bytes
/// each, vector k at `a + k*stride`). Lanes `count..8` get `fma(0, 0, lane)`, which leaves a lane
/// unchanged (a lane is never -0: it starts at +0, and a sum is -0 only when both terms are).
///
/// Safety: `count` blocks at `x` and at every `a + k*stride`; CPU has AVX2/FMA/F16C.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(crate) unsafe fn apply_group<const B: usize>(
    parts: &mut Parts<B>,
    count: usize,
    x: *const u8,
    wb: usize,
    a: *const u8,
    ab: usize,
    stride: usize,
    off: Option<(usize, usize)>,
    acc: &mut [__m256; B],
) {
    let dw = f16_lanes(x, wb, count);
    let mw = off.map(|(mo, _)| f16_lanes(x.add(mo), wb, count));
    for (k, (acc, parts)) in acc.iter_mut().zip(parts.iter_mut()).enumerate() {
        for p in parts.iter_mut().skip(count) {
            *p = _mm256_setzero_si256();
        }
        let y = a.add(k * stride);
        let isum = _mm256_cvtepi32_ps(hsum8x256_i32(*parts));
        *acc = _mm256_fmadd_ps(isum, _mm256_mul_ps(dw, f16_lanes(y, ab, count)), *acc);
        if let (Some(mw), Some((_, so))) = (mw, off) {
            *acc = _mm256_fmadd_ps(mw, f16_lanes(y.add(so), ab, count), *acc);
        }
    }
}

/// The partial sums of one signed-code block with `B` Q8_0 vectors into `parts[k][slot]`.
///
/// Safety: a `T` block at `x`, a Q8_0 block at every `y + k*stride`; CPU as `sym`.
#[inline(always)]
pub(crate) unsafe fn sym_block<T: SymBlock, D: Dot256, const B: usize>(
    x: *const u8,
    y: *const u8,
    stride: usize,
    slot: usize,
    parts: &mut Parts<B>,
) {
    let q = T::codes::<D>(x);
    // Signed × signed via unsigned × signed: |q| · (y with q's sign).
    let aq = _mm256_sign_epi8(q, q);
    for (k, parts) in parts.iter_mut().enumerate() {
        let s = _mm256_sign_epi8(load256(y.add(k * stride + 2)), q);
        parts[slot] = D::dpbusd(_mm256_setzero_si256(), aq, s);
    }
}

/// `out[k] = Σ_blocks d_w·d_a[k] · Σ code·q8` for `B` Q8_0 vectors at `a + k*stride`, `nb` blocks,
/// in the contract's block lanes.
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
    let mut parts: Parts<B> = [[_mm256_setzero_si256(); GROUP]; B];
    let mut i0 = 0;
    while i0 < nb {
        let count = (nb - i0).min(GROUP);
        let (x, y) = (w.add(i0 * T::BYTES), a.add(i0 * Q8_0_BYTES));
        for b in 0..count {
            sym_block::<T, D, B>(x.add(b * T::BYTES), y.add(b * Q8_0_BYTES), stride, b, &mut parts);
        }
        apply_group::<B>(&mut parts, count, x, T::BYTES, y, Q8_0_BYTES, stride, None, &mut acc);
        i0 += GROUP;
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = fold8(*acc);
    }
}

/// The partial sums of one Q4_1 block with `B` Q8_1 vectors into `parts[k][slot]`.
///
/// Safety: a Q4_1 block at `x`, a Q8_1 block at every `y + k*stride`; CPU as `q4_1`.
#[inline(always)]
pub(crate) unsafe fn q4_1_block<D: Dot256, const B: usize>(
    x: *const u8,
    y: *const u8,
    stride: usize,
    slot: usize,
    parts: &mut Parts<B>,
) {
    let u = nibbles(x.add(4));
    for (k, parts) in parts.iter_mut().enumerate() {
        parts[slot] = D::dpbusd(_mm256_setzero_si256(), u, load256(y.add(k * stride + 4)));
    }
}

/// Q4_1 × Q8_1: per block `d_w·d_a · Σ nibble·q8`, then `m_w · s_a`, for `B` vectors, in the
/// contract's block lanes.
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
    const W: usize = block_bytes::Q4_1;
    let mut acc = [_mm256_setzero_ps(); B];
    let mut parts: Parts<B> = [[_mm256_setzero_si256(); GROUP]; B];
    let mut i0 = 0;
    while i0 < nb {
        let count = (nb - i0).min(GROUP);
        let (x, y) = (w.add(i0 * W), a.add(i0 * Q8_1_BYTES));
        for b in 0..count {
            q4_1_block::<D, B>(x.add(b * W), y.add(b * Q8_1_BYTES), stride, b, &mut parts);
        }
        // The offset term: m at byte 2 of a Q4_1 block, s at byte 2 of a Q8_1 block.
        apply_group::<B>(&mut parts, count, x, W, y, Q8_1_BYTES, stride, Some((2, 2)), &mut acc);
        i0 += GROUP;
    }
    for (k, acc) in acc.iter().enumerate() {
        *out.add(k) = fold8(*acc);
    }
}
