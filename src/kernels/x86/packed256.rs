//! 256-bit `Q4_K×16` kernel (the AVX-VNNI and AVX2 tiers; `x86/mod.rs` says why not Q6_K): a
//! packed group (`kernels::packed`) as two halves of eight rows, each row in one i32 lane, against
//! Q8_K activations. Without VNNI (AVX2) the sums go through `sub_blocks_i16` (i16 sums, then one
//! `madd` by the scale).
//!
//! The arithmetic of `packed512`, on the 32 bytes of each 64-byte unit that belong to the half:
//! one `vpdpbusd` per nibble half and activation vector, with the four
//! matching activation bytes broadcast; each weight block is decoded once for up to two vectors
//! (more would spill the sixteen registers).
//! Sub-block sums are exact i32 (at most 32·15·127), weighted by their 6-bit scales with `mullo`;
//! the mins go through the activation's 16-element sums with `dpwssd`. Per super-block and lane the
//! float work is exactly the Q4_K reference (`quant::contract`)'s: two FMAs with `d·d_a` and `-(dmin·d_a)`.

use std::arch::x86_64::*;

use super::isa::{f32_at, lane_ctrl128, load256, Dot256};
use super::kquant256::{Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use crate::kernels::packed::PACKED_BLOCK;

/// The i32 at `p` broadcast to all eight lanes.
#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m256i {
    _mm256_set1_epi32(std::ptr::read_unaligned(p as *const i32))
}

/// `vpshufb` control taking byte `j` (0..4) of every u32 lane to its low byte, other bytes zero;
/// with `pair`, also to its third byte (the lane becomes the i16 pair `(b, b)`).
#[inline(always)]
unsafe fn byte_ctrl(j: usize, pair: bool) -> __m256i {
    _mm256_broadcastsi128_si256(lane_ctrl128(pair as usize, j))
}

/// Packed Q4_K×16 × Q8_K for `B` vectors at `a + t*stride`: `out[16t + r]` for row `r` of the group.
///
/// Safety: `w` holds `nb` packed blocks, every vector `nb` Q8_K blocks, `out` `16*B` floats; CPU has
/// AVX2/FMA/F16C and the features of `D`.
#[inline(always)]
pub(crate) unsafe fn q4_k_x16<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    for h in 0..2 {
        half::<D, B>(nb, w, h, a, stride, out.add(8 * h));
    }
}

/// Rows `8h..8h+8` of the packed group at `w` (bytes `32h..32h+32` of every 64-byte unit, f16 scales
/// `16h` bytes into their 32-byte arrays): `out[16t + i]` for row `8h+i`.
///
/// Safety: as `q4_k_x16`.
#[inline(always)]
unsafe fn half<D: Dot256, const B: usize>(
    nb: usize,
    w: *const u8,
    h: usize,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm256_set1_epi8(0x0F);
    let (k3f, k0f, k03) = (
        _mm256_set1_epi32(0x3f3f_3f3f),
        _mm256_set1_epi32(0x0f0f_0f0f),
        _mm256_set1_epi32(0x0303_0303),
    );
    let mut acc = [_mm256_setzero_ps(); B]; // [B] × [8 rows] f32
    for b in 0..nb {
        let x = w.add(b * PACKED_BLOCK + 32 * h); // this half of every 64-byte unit
        let y = |t: usize| a.add(t * stride + b * Q8K_BYTES);
        // Lane i: row 8h+i's 12 scale bytes as three u32s, decoded as in `q4k_scales_mins`.
        let (u0, u1, u2) = (load256(x.add(64)), load256(x.add(128)), load256(x.add(192)));
        let sc_lo = _mm256_and_si256(u0, k3f); // bytes: sc[0..4]
        let sc_hi = _mm256_or_si256(
            _mm256_and_si256(u2, k0f),
            _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(u0), k03)),
        );
        let mut isum = [_mm256_setzero_si256(); B];
        for c in 0..4 {
            let src = if c < 2 { sc_lo } else { sc_hi };
            if !D::ONE_INSTRUCTION_DPBUSD {
                sub_blocks_i16::<D, B>(x, c, src, &y, &mut isum);
                continue;
            }
            // Scales of sub-blocks 2c (low nibbles) and 2c+1 (high nibbles), one i32 per row.
            let s_lo = _mm256_shuffle_epi8(src, byte_ctrl((2 * c) % 4, false));
            let s_hi = _mm256_shuffle_epi8(src, byte_ctrl((2 * c + 1) % 4, false));
            // `ch` independent accumulator chains per vector and nibble half (the integer sums are
            // exact, so splitting them changes nothing): one chain of 8 dependent dot instructions
            // (~5 cycles each) per 64 elements would bound a 1-vector pass by latency, not throughput.
            let ch = if B == 1 {
                4
            } else if B == 2 {
                2
            } else {
                1
            };
            let mut lo_acc = [[_mm256_setzero_si256(); 4]; B];
            let mut hi_acc = [[_mm256_setzero_si256(); 4]; B];
            for (g, k) in (0..8).map(|g| (g, g % 4)) {
                // Code bytes 32c+4g..+4 of every row: elements 64c+4g.. (low) and 64c+32+4g.. (high).
                let wv = load256(x.add(256 + 64 * (8 * c + g)));
                let lo = _mm256_and_si256(wv, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(wv), m4);
                for t in 0..B {
                    let q = y(t).add(Q8K_QS + 64 * c + 4 * g);
                    lo_acc[t][k % ch] = D::dpbusd(lo_acc[t][k % ch], lo, bcast(q));
                    hi_acc[t][k % ch] = D::dpbusd(hi_acc[t][k % ch], hi, bcast(q.add(32)));
                }
            }
            for t in 0..B {
                let (mut l, mut h) = (lo_acc[t][0], hi_acc[t][0]);
                for k in 1..ch {
                    l = _mm256_add_epi32(l, lo_acc[t][k]);
                    h = _mm256_add_epi32(h, hi_acc[t][k]);
                }
                let s = _mm256_add_epi32(_mm256_mullo_epi32(l, s_lo), _mm256_mullo_epi32(h, s_hi));
                isum[t] = _mm256_add_epi32(isum[t], s);
            }
        }
        // Mins: Σ_j m[j] · (bsums[2j] + bsums[2j+1]), the pair (m, m) against the two i16 sums.
        let mn_lo = _mm256_and_si256(u1, k3f);
        let mn_hi = _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi32::<4>(u2), k0f),
            _mm256_slli_epi32::<4>(_mm256_and_si256(_mm256_srli_epi32::<6>(u1), k03)),
        );
        let mut msum = [_mm256_setzero_si256(); B];
        for j in 0..8 {
            let mp = _mm256_shuffle_epi8(if j < 4 { mn_lo } else { mn_hi }, byte_ctrl(j % 4, true));
            for (t, m) in msum.iter_mut().enumerate() {
                *m = D::dpwssd(*m, mp, bcast(y(t).add(Q8K_BSUMS + 4 * j)));
            }
        }
        let d = _mm256_cvtph_ps(_mm_loadu_si128(x.sub(16 * h) as *const __m128i)); // [8] d
        let dmin = _mm256_cvtph_ps(_mm_loadu_si128(x.sub(16 * h).add(32) as *const __m128i)); // [8] dmin
        for t in 0..B {
            let dy = f32_at(y(t));
            acc[t] = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(isum[t]),
                _mm256_mul_ps(d, _mm256_set1_ps(dy)),
                acc[t],
            );
            acc[t] = _mm256_fmadd_ps(
                _mm256_cvtepi32_ps(msum[t]),
                _mm256_mul_ps(dmin, _mm256_set1_ps(-dy)),
                acc[t],
            );
        }
    }
    for (t, acc) in acc.iter().enumerate() {
        _mm256_storeu_ps(out.add(16 * t), *acc);
    }
}

/// Sub-blocks `2c` (low nibbles) and `2c+1` (high nibbles) of `half`'s block at `x` added to
/// `isum`, without a one-instruction `vpdpbusd` (the AVX2 tier): per sub-block and vector the
/// eight `maddubs` of four codes of eight rows are summed in i16 first, then weighted by the
/// sub-block's scale in one `madd` against the pair `(sc, sc)` of each row (scale bytes `src`):
/// nine multiplies per 256 code-byte products instead of sixteen (`maddubs` + `madd` each).
/// Exact: a `maddubs` lane is two products of a code (at most 15) and an activation byte
/// (magnitude at most 128), at most 3840 in magnitude, and eight of them at most 30720 < 32767;
/// so every row's integer sum is the `vpdpbusd` path's.
///
/// Safety: as `q4_k_x16`; `y(t)` is vector `t`'s Q8_K block of this super-block.
#[inline(always)]
unsafe fn sub_blocks_i16<D: Dot256, const B: usize>(
    x: *const u8,
    c: usize,
    src: __m256i,
    y: &impl Fn(usize) -> *const u8,
    isum: &mut [__m256i; B],
) {
    let m4 = _mm256_set1_epi8(0x0F);
    let s_lo = _mm256_shuffle_epi8(src, byte_ctrl((2 * c) % 4, true));
    let s_hi = _mm256_shuffle_epi8(src, byte_ctrl((2 * c + 1) % 4, true));
    let mut lo16 = [_mm256_setzero_si256(); B]; // [B] × [8 rows × 2] i16
    let mut hi16 = [_mm256_setzero_si256(); B];
    for g in 0..8 {
        // Code bytes 32c+4g..+4 of every row: elements 64c+4g.. (low) and 64c+32+4g.. (high).
        let wv = load256(x.add(256 + 64 * (8 * c + g)));
        let lo = _mm256_and_si256(wv, m4);
        let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(wv), m4);
        for t in 0..B {
            let q = y(t).add(Q8K_QS + 64 * c + 4 * g);
            lo16[t] = _mm256_add_epi16(lo16[t], _mm256_maddubs_epi16(lo, bcast(q)));
            hi16[t] = _mm256_add_epi16(hi16[t], _mm256_maddubs_epi16(hi, bcast(q.add(32))));
        }
    }
    for t in 0..B {
        isum[t] = D::dpwssd(D::dpwssd(isum[t], lo16[t], s_lo), hi16[t], s_hi);
    }
}
