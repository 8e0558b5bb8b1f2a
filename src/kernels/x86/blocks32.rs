//! 256-bit kernels for the 32-element block formats: Q4_0, Q5_0, Q8_0 (signed codes · Q8_0) and
//! Q4_1 (unsigned codes + offset · Q8_1). One 32-byte register holds a block's 32 codes in element
//! order; per block and activation vector: one integer dot (exact: i32 lane `q` is the sum of
//! quad `q`), one convert, a multiply by `d_w*d_a` and an add (unfused) into the accumulator of
//! the block's parity. The activation scales are read as f32 from after the vector's blocks
//! (`kernels::act_row`), not converted from f16 here. That is the numeric contract's sixteen quad lanes
//! (`quant::contract::quad_dot`) in two registers, even blocks in lanes 0..8 and odd ones in
//! 8..16, folded by `fold16` at the end.

use std::arch::x86_64::*;

use super::isa::{f16x8_at, f32x8_at, fold8, load256, u32_at, Dot256};
use crate::quant::block_bytes;

/// Bytes of a Q8_0 activation block (f16 scale + 32 i8); the f32 scales follow a vector's blocks.
const Q8_0_BYTES: usize = block_bytes::Q8_0;
/// Bytes of a Q8_1 activation block (f16 scale, f16 scaled sum, 32 i8); the f32 (scale, sum)
/// pairs follow a vector's blocks.
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

/// One signed-code block's term for `B` Q8_0 vectors: `acc[k] = acc[k] + quads(w·y_k)·(d_w·d_a)`
/// where `acc[k]` is the accumulator of the block's parity.
///
/// Safety: a `T` block at `x`, a Q8_0 block at every `y + k*stride` and its f32 scale at every
/// `s + k*stride`; CPU as `sym`.
#[inline(always)]
pub(crate) unsafe fn sym_block<T: SymBlock, D: Dot256, const B: usize>(
    x: *const u8,
    y: *const u8,
    s: *const u8,
    stride: usize,
    acc: &mut [__m256; B],
) {
    let q = T::codes::<D>(x);
    // Signed × signed via unsigned × signed: |q| · (y with q's sign).
    let aq = _mm256_sign_epi8(q, q);
    let dw = f16x8_at(x);
    for (k, acc) in acc.iter_mut().enumerate() {
        let yq = _mm256_sign_epi8(load256(y.add(k * stride + 2)), q);
        let p = D::dpbusd(_mm256_setzero_si256(), aq, yq);
        let da = f32x8_at(s.add(k * stride));
        *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, da)));
    }
}

/// Batches of more than this many vectors take the blocks of each parity in a pass of their own
/// (`sym`, `q4_1`): the two parities' accumulators of eight vectors (16 registers, 32 for Q4_1
/// with its offset chains) would not fit the 16 vector registers, and spilling them in the
/// block loop made prompt processing up to 1.7× slower on this tier. A second pass over a row
/// reads it from L1/L2 (a row is at most a few KiB); each lane sees the same operations in the
/// same order either way, so the bits do not change.
const INTERLEAVED_MAX: usize = 4;

/// The accumulators of `B` Q8_0 vectors over the blocks `first, first + 2, …` of `nb`.
///
/// Safety: as `sym`.
#[inline(always)]
unsafe fn sym_parity<T: SymBlock, D: Dot256, const B: usize>(
    first: usize,
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
) -> [__m256; B] {
    let mut acc = [_mm256_setzero_ps(); B];
    let s = a.add(nb * Q8_0_BYTES);
    for i in (first..nb).step_by(2) {
        let (x, y) = (w.add(i * T::BYTES), a.add(i * Q8_0_BYTES));
        sym_block::<T, D, B>(x, y, s.add(4 * i), stride, &mut acc);
    }
    acc
}

/// `out[k] = Σ_blocks d_w*d_a[k] * Σ code*q8` for `B` Q8_0 vectors at `a + k*stride`, `nb` blocks,
/// in the contract's quad lanes (even and odd blocks in two accumulators, folded at the end).
///
/// Safety: `w` must hold `nb` blocks, each `a + k*stride` (k < B) a Q8_0 activation row of `nb`
/// blocks (`kernels::act_row`: the blocks, then their f32 scales), `out` B floats,
/// and the CPU must have the features of `D` plus AVX2/FMA/F16C.
#[inline(always)]
pub(crate) unsafe fn sym<T: SymBlock, D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let (even, odd) = if B > INTERLEAVED_MAX {
        (sym_parity::<T, D, B>(0, nb, w, a, stride), sym_parity::<T, D, B>(1, nb, w, a, stride))
    } else {
        let (mut even, mut odd) = ([_mm256_setzero_ps(); B], [_mm256_setzero_ps(); B]);
        let s = a.add(nb * Q8_0_BYTES);
        for i in (0..nb / 2 * 2).step_by(2) {
            let (x, y, s) = (w.add(i * T::BYTES), a.add(i * Q8_0_BYTES), s.add(4 * i));
            sym_block::<T, D, B>(x, y, s, stride, &mut even);
            sym_block::<T, D, B>(x.add(T::BYTES), y.add(Q8_0_BYTES), s.add(4), stride, &mut odd);
        }
        if nb % 2 == 1 {
            let i = nb - 1;
            let (x, y) = (w.add(i * T::BYTES), a.add(i * Q8_0_BYTES));
            sym_block::<T, D, B>(x, y, s.add(4 * i), stride, &mut even);
        }
        (even, odd)
    };
    for k in 0..B {
        *out.add(k) = fold8(_mm256_add_ps(even[k], odd[k]));
    }
}

/// One Q4_1 block's quad sums for `B` Q8_1 vectors into `acc[k]`, the accumulators of the block's
/// parity.
///
/// Safety: a Q4_1 block at `x`, a Q8_1 block at every `y + k*stride` and its f32 scale and sum
/// at every `s + k*stride`; CPU as `q4_1`.
#[inline(always)]
unsafe fn q4_1_block_quads<D: Dot256, const B: usize>(
    x: *const u8,
    y: *const u8,
    s: *const u8,
    stride: usize,
    acc: &mut [__m256; B],
) {
    let dw = f16x8_at(x);
    let u = nibbles(x.add(4));
    for (k, acc) in acc.iter_mut().enumerate() {
        let p = D::dpbusd(_mm256_setzero_si256(), u, load256(y.add(k * stride + 4)));
        let da = f32x8_at(s.add(k * stride));
        *acc = _mm256_add_ps(*acc, _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dw, da)));
    }
}

/// One Q4_1 block's offset terms `m_w · s_a` for `B` Q8_1 vectors into `off[k]` (lane 0 is used;
/// all lanes are equal), the chains of the block's parity.
///
/// Safety: as `q4_1_block_quads`.
#[inline(always)]
unsafe fn q4_1_block_offsets<const B: usize>(
    x: *const u8,
    s: *const u8,
    stride: usize,
    off: &mut [__m256; B],
) {
    let m = f16x8_at(x.add(2));
    for (k, off) in off.iter_mut().enumerate() {
        *off = _mm256_add_ps(*off, _mm256_mul_ps(m, f32x8_at(s.add(k * stride + 4))));
    }
}

/// One Q4_1 block's terms for `B` Q8_1 vectors: the quad sums into `acc[k]` and `m_w · s_a` into
/// `off[k]`, both of the block's parity.
///
/// Safety: as `q4_1_block_quads`.
#[inline(always)]
pub(crate) unsafe fn q4_1_block<D: Dot256, const B: usize>(
    x: *const u8,
    y: *const u8,
    s: *const u8,
    stride: usize,
    acc: &mut [__m256; B],
    off: &mut [__m256; B],
) {
    q4_1_block_quads::<D, B>(x, y, s, stride, acc);
    q4_1_block_offsets::<B>(x, s, stride, off);
}

/// The quad-lane accumulators (`quads`) or the offset chains (`!quads`) of `B` Q8_1 vectors over
/// the Q4_1 blocks `first, first + 2, …`: one pass over the row.
///
/// Safety: as `q4_1`.
#[inline(always)]
unsafe fn q4_1_parity<D: Dot256, const B: usize>(
    quads: bool,
    first: usize,
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
) -> [__m256; B] {
    const W: usize = block_bytes::Q4_1;
    let mut acc = [_mm256_setzero_ps(); B];
    let s = a.add(nb * Q8_1_BYTES);
    for i in (first..nb).step_by(2) {
        let (x, y, s) = (w.add(i * W), a.add(i * Q8_1_BYTES), s.add(8 * i));
        if quads {
            q4_1_block_quads::<D, B>(x, y, s, stride, &mut acc);
        } else {
            q4_1_block_offsets::<B>(x, s, stride, &mut acc);
        }
    }
    acc
}

/// Q4_1 × Q8_1: `Σ d_w*d_a * Σ nibble*q8 + m_w * s_a` per block, for `B` vectors, in the
/// contract's quad lanes and two offset chains (`quant::contract::quad_dot`). Up to two vectors in one pass
/// (eight accumulators); more in four (quads and offsets of each parity: `INTERLEAVED_MAX`).
///
/// Safety: as `sym`, with 20-byte Q4_1 weight blocks and Q8_1 activation rows (36-byte blocks,
/// then their f32 scale and sum pairs).
#[inline(always)]
pub(crate) unsafe fn q4_1<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    const W: usize = block_bytes::Q4_1;
    let (even, odd, off_e, off_o) = if B > INTERLEAVED_MAX / 2 {
        (
            q4_1_parity::<D, B>(true, 0, nb, w, a, stride),
            q4_1_parity::<D, B>(true, 1, nb, w, a, stride),
            q4_1_parity::<D, B>(false, 0, nb, w, a, stride),
            q4_1_parity::<D, B>(false, 1, nb, w, a, stride),
        )
    } else {
        let (mut even, mut odd) = ([_mm256_setzero_ps(); B], [_mm256_setzero_ps(); B]);
        let (mut off_e, mut off_o) = ([_mm256_setzero_ps(); B], [_mm256_setzero_ps(); B]);
        let s = a.add(nb * Q8_1_BYTES);
        for i in (0..nb / 2 * 2).step_by(2) {
            let (x, y, s) = (w.add(i * W), a.add(i * Q8_1_BYTES), s.add(8 * i));
            q4_1_block::<D, B>(x, y, s, stride, &mut even, &mut off_e);
            let (x, y, s) = (x.add(W), y.add(Q8_1_BYTES), s.add(8));
            q4_1_block::<D, B>(x, y, s, stride, &mut odd, &mut off_o);
        }
        if nb % 2 == 1 {
            let i = nb - 1;
            let (x, y, s) = (w.add(i * W), a.add(i * Q8_1_BYTES), s.add(8 * i));
            q4_1_block::<D, B>(x, y, s, stride, &mut even, &mut off_e);
        }
        (even, odd, off_e, off_o)
    };
    for k in 0..B {
        let offsets = _mm256_cvtss_f32(off_e[k]) + _mm256_cvtss_f32(off_o[k]);
        *out.add(k) = fold8(_mm256_add_ps(even[k], odd[k])) + offsets;
    }
}
