//! 256-bit K-quant kernels (AVX2 and AVX-VNNI tiers; Q2_K on every x86 tier): Q2_K, Q4_K and Q6_K
//! against Q8_K activations.
//!
//! Codes are decoded once per weight block into unsigned bytes, multiplied with the activation bytes
//! by `maddubs` (u8×i8 pairs summed to i16: at most 2·63·127, no saturation), then weighted by the
//! sub-block scales with an i16×i16→i32 pair dot (`madd` or `vpdpwssd`). The whole super-block sum is
//! exact in i32; one convert and FMA by `d_w*d_a` per super-block. Offsets (Q4_K mins, Q6_K's -32) are
//! applied through the activation's 16-element sums `bsums`, also exactly. Each block's sums are
//! reduced to one i32 and accumulated in scalar order (the Q4_K and Q6_K references of `crate::quant`, the contract's super-block chain),
//! so these kernels equal the packed ones bit for bit.

use std::arch::x86_64::*;

use super::isa::{f16_at, f32_at, hsum256_i32, hsum8x256_i32, load256, u32_at, Dot256};
use crate::quant::{block_bytes, q8k_layout};

/// Bytes of a Q8_K activation super-block.
pub(crate) const Q8K_BYTES: usize = block_bytes::Q8_K;
/// Offset of `qs` in a Q8_K block.
pub(crate) const Q8K_QS: usize = q8k_layout::QS;
/// Offset of `bsums` in a Q8_K block.
pub(crate) const Q8K_BSUMS: usize = q8k_layout::BSUMS;
/// Bytes of a Q2_K super-block.
pub(crate) const Q2K_BYTES: usize = block_bytes::Q2_K;
/// Bytes of a Q4_K super-block.
pub(crate) const Q4K_BYTES: usize = block_bytes::Q4_K;
/// Bytes of a Q6_K super-block.
pub(crate) const Q6K_BYTES: usize = block_bytes::Q6_K;

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K super-block from its 12 packed bytes at `p`,
/// as 8 bytes each (byte j = sub-block j), using whole-u32 bit operations on the packing.
#[inline(always)]
pub(crate) unsafe fn q4k_scales_mins(p: *const u8) -> (u64, u64) {
    let (u0, u1, u2) = (u32_at(p), u32_at(p.add(4)), u32_at(p.add(8)));
    // Sub-blocks 0..4: the low 6 bits of bytes 0..4 (scales) and 4..8 (mins).
    let sc_lo = u0 & 0x3f3f_3f3f;
    let mn_lo = u1 & 0x3f3f_3f3f;
    // Sub-blocks 4..8: low 4 bits from bytes 8..12 (scale: low nibble, min: high nibble), top 2 bits
    // from the spare top bits of bytes 0..4 (scales) and 4..8 (mins).
    let sc_hi = (u2 & 0x0f0f_0f0f) | (((u0 >> 6) & 0x0303_0303) << 4);
    let mn_hi = ((u2 >> 4) & 0x0f0f_0f0f) | (((u1 >> 6) & 0x0303_0303) << 4);
    (sc_lo as u64 | (sc_hi as u64) << 32, mn_lo as u64 | (mn_hi as u64) << 32)
}

/// Q4_K × Q8_K for `B` (at most 8) activation vectors at `a + k*stride`, `nb` super-blocks.
///
/// Safety: `w` holds `nb` Q4_K blocks, every vector `nb` Q8_K blocks, `out` B floats; CPU has
/// AVX2/FMA/F16C and the features of `D`.
#[inline(always)]
pub(crate) unsafe fn q4_k<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm256_set1_epi8(0x0F);
    // One vector: a scalar accumulator; a batch: lane k of `acc` for vector k.
    let (mut acc1, mut acc) = (0.0f32, _mm256_setzero_ps());
    for i in 0..nb {
        let x = w.add(i * Q4K_BYTES);
        let (d, dmin) = (f16_at(x), f16_at(x.add(2)));
        let (sc, mn) = q4k_scales_mins(x.add(4));
        // [8] i32, lane j = scale j in both i16 halves (a ready i16 broadcast source).
        let s32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(sc as i64));
        let sdup = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
        // [16] i16 mins, min j at positions 2j and 2j+1 (one per 16-element activation sum).
        let m8 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mn as i64));
        let mins = _mm256_set_m128i(_mm_unpackhi_epi16(m8, m8), _mm_unpacklo_epi16(m8, m8));
        let mut isum = [_mm256_setzero_si256(); B];
        for c in 0..4 {
            let qv = load256(x.add(16 + 32 * c));
            let lo = _mm256_and_si256(qv, m4); // sub-block 2c
            let hi = _mm256_and_si256(_mm256_srli_epi16(qv, 4), m4); // sub-block 2c+1
            let s0 = _mm256_permutevar8x32_epi32(sdup, _mm256_set1_epi32(2 * c as i32));
            let s1 = _mm256_permutevar8x32_epi32(sdup, _mm256_set1_epi32(2 * c as i32 + 1));
            for (k, isum) in isum.iter_mut().enumerate() {
                let y = a.add(k * stride + i * Q8K_BYTES + Q8K_QS + 64 * c);
                *isum = D::dpwssd(*isum, _mm256_maddubs_epi16(lo, load256(y)), s0);
                *isum = D::dpwssd(*isum, _mm256_maddubs_epi16(hi, load256(y.add(32))), s1);
            }
        }
        // [8] i32 per vector: Σ_j m[j] · (bsums[2j] + bsums[2j+1]) once its lanes are summed.
        let mterm = |k: usize| {
            let y = a.add(k * stride + i * Q8K_BYTES);
            _mm256_madd_epi16(load256(y.add(Q8K_BSUMS)), mins)
        };
        let dy = |k: usize| f32_at(a.add(k * stride + i * Q8K_BYTES));
        chain2::<B>(&isum, mterm, (d, dmin), dy, (a, stride, i), (&mut acc1, &mut acc));
    }
    store_lanes::<B>(acc, acc1, out);
}

/// `[8]` f32: lane `k < B` the scale `d_a` of Q8_K block `i` of vector `k` (at `a + k*stride`), the
/// other lanes 0.
///
/// Safety: every vector `k < B` holds block `i`.
#[inline(always)]
unsafe fn act_scales<const B: usize>(a: *const u8, stride: usize, i: usize) -> __m256 {
    let g = |k: usize| if k < B { f32_at(a.add(k * stride + i * Q8K_BYTES)) } else { 0.0 };
    _mm256_setr_ps(g(0), g(1), g(2), g(3), g(4), g(5), g(6), g(7))
}

/// Writes the `B` results: `acc1` for one vector, else lanes `0..B` of `acc`.
///
/// Safety: `out` holds `B` floats.
#[inline(always)]
unsafe fn store_lanes<const B: usize>(acc: __m256, acc1: f32, out: *mut f32) {
    if B == 1 {
        *out = acc1;
    } else {
        let mut lanes = [0.0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
        std::ptr::copy_nonoverlapping(lanes.as_ptr(), out, B);
    }
}

/// The block-exact order of the Q4_K / Q2_K references (`quant::contract`, super-block chain)
/// (shared with the packed kernels): per vector `acc = fma(isum, d·d_a, acc)`, then
/// `acc = fma(msum, -(dmin·d_a), acc)`, `isum[k]` and `mterm(k)` summed over their lanes. One
/// vector accumulates in `acc1`; a batch's vectors are the lanes of `acc`, every lane doing
/// exactly those two fused operations, and the sums are reduced together (`hsum8x256_i32`).
///
/// Safety: `(a, stride, i)`: every vector `k < B` holds Q8_K block `i`; CPU has AVX2/FMA.
#[inline(always)]
unsafe fn chain2<const B: usize>(
    isum: &[__m256i; B],
    mterm: impl Fn(usize) -> __m256i,
    (d, dmin): (f32, f32),
    dy1: impl Fn(usize) -> f32,
    (a, stride, i): (*const u8, usize, usize),
    (acc1, acc): (&mut f32, &mut __m256),
) {
    if B == 1 {
        // [I, M, I, M] from one pair of horizontal adds.
        let h = _mm256_hadd_epi32(isum[0], mterm(0));
        let h = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        let h = _mm_hadd_epi32(h, h);
        let (isum0, msum0) = (_mm_cvtsi128_si32(h), _mm_extract_epi32::<1>(h));
        let dy = dy1(0);
        *acc1 = (isum0 as f32).mul_add(d * dy, *acc1);
        *acc1 = (msum0 as f32).mul_add(-(dmin * dy), *acc1);
        return;
    }
    let dy = act_scales::<B>(a, stride, i);
    let (fi, fm) = if B <= 4 {
        // Lanes 0..4 the isums, 4..8 the msums, of up to four vectors at once.
        let mut v = [_mm256_setzero_si256(); 8];
        for k in 0..B {
            v[k] = isum[k];
            v[4 + k] = mterm(k);
        }
        let f = _mm256_cvtepi32_ps(hsum8x256_i32(v));
        (f, _mm256_permute2f128_ps::<0x01>(f, f))
    } else {
        let (mut vi, mut vm) = ([_mm256_setzero_si256(); 8], [_mm256_setzero_si256(); 8]);
        for k in 0..B {
            vi[k] = isum[k];
            vm[k] = mterm(k);
        }
        (_mm256_cvtepi32_ps(hsum8x256_i32(vi)), _mm256_cvtepi32_ps(hsum8x256_i32(vm)))
    };
    // Lanes at and beyond B: 0 · finite, never read.
    let ddy = _mm256_mul_ps(_mm256_set1_ps(d), dy);
    let mdy = _mm256_xor_ps(_mm256_mul_ps(_mm256_set1_ps(dmin), dy), _mm256_set1_ps(-0.0));
    *acc = _mm256_fmadd_ps(fi, ddy, *acc);
    *acc = _mm256_fmadd_ps(fm, mdy, *acc);
}

/// Q2_K × Q8_K for `B` activation vectors: per half of 128 elements, the 32 code bytes give four
/// pieces of 32 codes (bits `2j`), piece `j` covering 16-element groups `8h+2j` and `8h+2j+1`;
/// codes (0..=3) times activation bytes by `maddubs` (at most 2·3·127), weighted by the 4-bit
/// scales with an i16 pair dot; the mins (4-bit) through the activation's `bsums`.
///
/// Safety: as `q4_k`, with 84-byte Q2_K blocks.
#[inline(always)]
pub(crate) unsafe fn q2_k<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0x0F);
    let (mut acc1, mut acc) = (0.0f32, _mm256_setzero_ps());
    for i in 0..nb {
        let x = w.add(i * Q2K_BYTES);
        let (d, dmin) = (f16_at(x.add(80)), f16_at(x.add(82)));
        let sm = _mm_loadu_si128(x as *const __m128i); // [16] scale | min << 4
        let sc8 = _mm_and_si128(sm, m4);
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4)); // [16] i16
        let mut isum = [_mm256_setzero_si256(); B];
        for h in 0..2 {
            // [8] i32, lane j = scale 8h+j in both i16 halves.
            let s32 = _mm256_cvtepu8_epi32(if h == 0 { sc8 } else { _mm_srli_si128(sc8, 8) });
            let sdup = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
            let q = load256(x.add(16 + 32 * h));
            for j in 0..4 {
                let e = match j {
                    0 => _mm256_and_si256(q, m3),
                    1 => _mm256_and_si256(_mm256_srli_epi16(q, 2), m3),
                    2 => _mm256_and_si256(_mm256_srli_epi16(q, 4), m3),
                    _ => _mm256_and_si256(_mm256_srli_epi16(q, 6), m3),
                };
                let (g0, g1) = (2 * j as i32, 2 * j as i32 + 1);
                let sv = _mm256_permutevar8x32_epi32(
                    sdup,
                    _mm256_setr_epi32(g0, g0, g0, g0, g1, g1, g1, g1),
                );
                for (k, isum) in isum.iter_mut().enumerate() {
                    let y = a.add(k * stride + i * Q8K_BYTES + Q8K_QS + 128 * h + 32 * j);
                    *isum = D::dpwssd(*isum, _mm256_maddubs_epi16(e, load256(y)), sv);
                }
            }
        }
        // [8] i32 per vector: Σ_g min[g] · bsums[g] once its lanes are summed.
        let mterm = |k: usize| {
            let y = a.add(k * stride + i * Q8K_BYTES);
            _mm256_madd_epi16(load256(y.add(Q8K_BSUMS)), mins)
        };
        let dy = |k: usize| f32_at(a.add(k * stride + i * Q8K_BYTES));
        chain2::<B>(&isum, mterm, (d, dmin), dy, (a, stride, i), (&mut acc1, &mut acc));
    }
    store_lanes::<B>(acc, acc1, out);
}

/// Q6_K × Q8_K for `B` activation vectors; codes are used unsigned (0..64) and the -32 offset is
/// subtracted as `32 * Σ_g scale_g * bsum_g`.
///
/// Safety: as `q4_k`, with 210-byte Q6_K blocks.
#[inline(always)]
pub(crate) unsafe fn q6_k<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm256_set1_epi8(0x0F);
    let m30 = _mm256_set1_epi8(0x30);
    // One vector: a scalar accumulator; a batch: lane k of `acc` for vector k.
    let (mut acc1, mut acc) = (0.0f32, _mm256_setzero_ps());
    for i in 0..nb {
        let x = w.add(i * Q6K_BYTES);
        let d = f16_at(x.add(208));
        let sc8 = _mm_loadu_si128(x.add(192) as *const __m128i); // [16] i8 scales
        let sc16 = _mm256_cvtepi8_epi16(sc8); // [16] i16, for the offset term
        let mut isum = [_mm256_setzero_si256(); B];
        for h in 0..2 {
            // [8] i32, lane j = scale 8h+j in both i16 halves.
            let s32 = _mm256_cvtepi8_epi32(if h == 0 { sc8 } else { _mm_srli_si128(sc8, 8) });
            let sdup = _mm256_or_si256(
                _mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)),
                _mm256_slli_epi32(s32, 16),
            );
            let ql = x.add(64 * h);
            let qh = load256(x.add(128 + 32 * h));
            let (l0, l1) = (load256(ql), load256(ql.add(32)));
            // Elements 32p..32p+32 of the half, p = 0..4 (see the layout in quant/q6_k.rs).
            let e = [
                _mm256_or_si256(
                    _mm256_and_si256(l0, m4),
                    _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(l1, m4),
                    _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                    _mm256_and_si256(qh, m30),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                    _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30),
                ),
            ];
            // Piece p covers 16-element groups 2p (low 128 bits) and 2p+1 (high 128 bits).
            let sv = [
                _mm256_permutevar8x32_epi32(sdup, _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)),
                _mm256_permutevar8x32_epi32(sdup, _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3)),
                _mm256_permutevar8x32_epi32(sdup, _mm256_setr_epi32(4, 4, 4, 4, 5, 5, 5, 5)),
                _mm256_permutevar8x32_epi32(sdup, _mm256_setr_epi32(6, 6, 6, 6, 7, 7, 7, 7)),
            ];
            for (k, isum) in isum.iter_mut().enumerate() {
                let y = a.add(k * stride + i * Q8K_BYTES + Q8K_QS + 128 * h);
                for p in 0..4 {
                    *isum =
                        D::dpwssd(*isum, _mm256_maddubs_epi16(e[p], load256(y.add(32 * p))), sv[p]);
                }
            }
        }
        // [8] i32 per vector, the block's total once its lanes are summed; 32 (= 1 << 5): the
        // code midpoint removed from every element.
        let total = |k: usize| {
            let y = a.add(k * stride + i * Q8K_BYTES);
            let off = _mm256_madd_epi16(load256(y.add(Q8K_BSUMS)), sc16);
            _mm256_sub_epi32(isum[k], _mm256_slli_epi32(off, 5))
        };
        // The block-exact order of the Q6_K reference (`quant::contract`, super-block chain) (shared with the packed kernels):
        // `acc = fma(total, d·d_a, acc)` per vector, a batch's vectors in the lanes of `acc`.
        if B == 1 {
            let s = hsum256_i32(total(0));
            acc1 = (s as f32).mul_add(d * f32_at(a.add(i * Q8K_BYTES)), acc1);
        } else {
            let mut v = [_mm256_setzero_si256(); 8];
            for (k, v) in v.iter_mut().enumerate().take(B) {
                *v = total(k);
            }
            let f = _mm256_cvtepi32_ps(hsum8x256_i32(v));
            let ddy = _mm256_mul_ps(_mm256_set1_ps(d), act_scales::<B>(a, stride, i));
            acc = _mm256_fmadd_ps(f, ddy, acc);
        }
    }
    store_lanes::<B>(acc, acc1, out);
}
