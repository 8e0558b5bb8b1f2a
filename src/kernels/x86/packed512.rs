//! 512-bit `Q4_K×16` kernel (AVX-512 BW and AVX512-VNNI tiers): the sixteen rows of a packed group
//! (`kernels::packed`) in the sixteen i32 lanes, against Q8_K activations.
//!
//! Per 64-byte code vector (four codes of each row in each nibble half), one `dpbusd` per nibble
//! half and activation vector with the four matching activation bytes broadcast to every lane: no
//! shuffles, no horizontal sums, and each weight block is decoded once for up to four vectors.
//! Sub-block sums are exact i32 (at most 32·15·127), weighted by their 6-bit scales with `mullo`;
//! the mins go through the activation's 16-element sums with `dpwssd`. Per super-block and lane the
//! float work is exactly the Q4_K reference (`quant::contract`)'s: two FMAs with `d·d_a` and `-(dmin·d_a)`.

use std::arch::x86_64::*;

use super::isa::{f32_at, lane_ctrl128, load256, Dot512};
use super::kquant256::{Q8K_BSUMS, Q8K_BYTES, Q8K_QS};
use crate::kernels::packed::{PACKED_BLOCK, PACKED_BLOCK_Q6K, Q6X_QH, Q6X_QL, Q6X_SCALES};

/// Software prefetch distance: four packed blocks (9.2 KB) ahead, into L1 (`_MM_HINT_T0`). The
/// distance itself (2, 4 or 8 blocks) made no measurable difference. Prefetching into L2 (`T1`)
/// instead was tried (2026-11-27: the Q6_K kernel's stream in the kernel bench went from 10.9 to
/// 19–22 GB/s on one thread) and undone (2026-11-28): end to end, one thread, the 1.5B model
/// decoded at 28.5 tok/s with `T1`, 30.1 with `T1` for Q6_K only and 32.2 with `T0` (three
/// alternating runs each, `cargo bench --bench e2e -- MODEL --pp 1 --tg 48 -t 1`); with two
/// threads, at depth 0 and at 750, the two were the same (37 and 40 tok/s medians of five runs).
const PREFETCH: usize = 4 * PACKED_BLOCK;
/// About the same distance for packed Q6_K blocks (10 KB).
const PREFETCH_Q6K: usize = 3 * PACKED_BLOCK_Q6K;
/// `vpternlog` truth table of `(A & B) | C`.
const AND_OR: i32 = 0xEA;

/// 64 unaligned bytes at `p`.
#[inline(always)]
unsafe fn load512(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p as *const _)
}

/// The i32 at `p` broadcast to all sixteen lanes.
#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m512i {
    _mm512_set1_epi32(std::ptr::read_unaligned(p as *const i32))
}

/// `vpshufb` control taking byte `j` (0..4) of every u32 lane to its low byte, other bytes zero;
/// with `pair`, also to its third byte (the lane becomes the i16 pair `(b, b)`).
#[inline(always)]
unsafe fn byte_ctrl(j: usize, pair: bool) -> __m512i {
    _mm512_broadcast_i32x4(lane_ctrl128(pair as usize, j))
}

/// Packed Q4_K×16 × Q8_K for `B` vectors at `a + t*stride`: `out[16t + r]` for row `r` of the group.
///
/// Safety: `w` holds `nb` packed blocks, every vector `nb` Q8_K blocks, `out` `16*B` floats; CPU has
/// AVX-512 F/BW/VL, AVX2/FMA/F16C and the features of `D`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // [t][k] accumulators read clearer indexed
pub(crate) unsafe fn q4_k_x16<D: Dot512, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let (k3f, k0f, k03) = (
        _mm512_set1_epi32(0x3f3f_3f3f),
        _mm512_set1_epi32(0x0f0f_0f0f),
        _mm512_set1_epi32(0x0303_0303),
    );
    let mut acc = [_mm512_setzero_ps(); B]; // [B] × [16 rows] f32
    for b in 0..nb {
        let x = w.add(b * PACKED_BLOCK);
        let y = |t: usize| a.add(t * stride + b * Q8K_BYTES);
        // Lane r: row r's 12 scale bytes as three u32s, decoded as in `q4k_scales_mins`.
        for l in 0..4 {
            _mm_prefetch::<_MM_HINT_T0>(x.wrapping_add(PREFETCH + 64 * l) as *const i8);
        }
        let (u0, u1, u2) = (load512(x.add(64)), load512(x.add(128)), load512(x.add(192)));
        let sc_lo = _mm512_and_si512(u0, k3f); // bytes: sc[0..4]
        let sc_hi = _mm512_or_si512(
            _mm512_and_si512(u2, k0f),
            _mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(u0), k03)),
        );
        let mut isum = [_mm512_setzero_si512(); B];
        for c in 0..4 {
            // Scales of sub-blocks 2c (low nibbles) and 2c+1 (high nibbles), one i32 per row.
            let src = if c < 2 { sc_lo } else { sc_hi };
            let s_lo = _mm512_shuffle_epi8(src, byte_ctrl((2 * c) % 4, false));
            let s_hi = _mm512_shuffle_epi8(src, byte_ctrl((2 * c + 1) % 4, false));
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
            let mut lo_acc = [[_mm512_setzero_si512(); 4]; B];
            let mut hi_acc = [[_mm512_setzero_si512(); 4]; B];
            for (g, k) in (0..8).map(|g| (g, g % 4)) {
                // Code bytes 32c+4g..+4 of every row: elements 64c+4g.. (low) and 64c+32+4g.. (high).
                let wv = load512(x.add(256 + 64 * (8 * c + g)));
                // Streaming from memory: ask for the same line `PREFETCH` ahead (hardware prefetch
                // alone left single-thread reads at ~60% of the plain-sum bandwidth).
                _mm_prefetch::<_MM_HINT_T0>(
                    x.wrapping_add(PREFETCH + 256 + 64 * (8 * c + g)) as *const i8
                );
                let lo = _mm512_and_si512(wv, m4);
                let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(wv), m4);
                for t in 0..B {
                    let q = y(t).add(Q8K_QS + 64 * c + 4 * g);
                    lo_acc[t][k % ch] = D::dpbusd_bcast(lo_acc[t][k % ch], lo, q);
                    hi_acc[t][k % ch] = D::dpbusd_bcast(hi_acc[t][k % ch], hi, q.add(32));
                }
            }
            for t in 0..B {
                let (mut l, mut h) = (lo_acc[t][0], hi_acc[t][0]);
                for k in 1..ch {
                    l = _mm512_add_epi32(l, lo_acc[t][k]);
                    h = _mm512_add_epi32(h, hi_acc[t][k]);
                }
                let s = _mm512_add_epi32(_mm512_mullo_epi32(l, s_lo), _mm512_mullo_epi32(h, s_hi));
                isum[t] = _mm512_add_epi32(isum[t], s);
            }
        }
        // Mins: Σ_j m[j] · (bsums[2j] + bsums[2j+1]), the pair (m, m) against the two i16 sums.
        let mn_lo = _mm512_and_si512(u1, k3f);
        let mn_hi = _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi32::<4>(u2), k0f),
            _mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(u1), k03)),
        );
        let mut msum = [_mm512_setzero_si512(); B];
        for j in 0..8 {
            let mp = _mm512_shuffle_epi8(if j < 4 { mn_lo } else { mn_hi }, byte_ctrl(j % 4, true));
            for (t, m) in msum.iter_mut().enumerate() {
                *m = D::dpwssd(*m, mp, bcast(y(t).add(Q8K_BSUMS + 4 * j)));
            }
        }
        let d = _mm512_cvtph_ps(load256(x)); // [16] d
        let dmin = _mm512_cvtph_ps(load256(x.add(32))); // [16] dmin
        for t in 0..B {
            let dy = f32_at(y(t));
            acc[t] = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(isum[t]),
                _mm512_mul_ps(d, _mm512_set1_ps(dy)),
                acc[t],
            );
            acc[t] = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(msum[t]),
                _mm512_mul_ps(dmin, _mm512_set1_ps(-dy)),
                acc[t],
            );
        }
    }
    for (t, acc) in acc.iter().enumerate() {
        _mm512_storeu_ps(out.add(16 * t), *acc);
    }
}

/// `vpshufb` control moving byte `j` (0..4) of every u32 lane to its top byte (an `srai` by 24 then
/// sign-extends it), or with `pair` bytes `j`, `j+1` to the top bytes of the lane's two i16 halves.
#[inline(always)]
unsafe fn top_ctrl(j: usize, pair: bool) -> __m512i {
    _mm512_broadcast_i32x4(lane_ctrl128(2 + pair as usize, j))
}

/// Packed Q6_K×16 × Q8_K for `B` vectors at `a + t*stride`: `out[16t + r]` for row `r` of the group,
/// bitwise the Q6_K reference (`quant::contract`, super-block chain) (codes unsigned, the -32 offset through `bsums`).
///
/// Safety: `w` holds `nb` packed Q6_K blocks, every vector `nb` Q8_K blocks, `out` `16*B` floats;
/// CPU has AVX-512 F/BW/VL, AVX2/FMA/F16C and the features of `D`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // [t][k] accumulators read clearer indexed
pub(crate) unsafe fn q6_k_x16<D: Dot512, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let m4 = _mm512_set1_epi8(0x0F);
    let m30 = _mm512_set1_epi8(0x30);
    let mut acc = [_mm512_setzero_ps(); B]; // [B] × [16 rows] f32
    for b in 0..nb {
        let x = w.add(b * PACKED_BLOCK_Q6K);
        let y = |t: usize| a.add(t * stride + b * Q8K_BYTES);
        for l in 0..5 {
            // d and the scales: the first 288 bytes (the code units are prefetched as they are read).
            _mm_prefetch::<_MM_HINT_T0>(x.wrapping_add(PREFETCH_Q6K + 64 * l) as *const i8);
        }
        // Lane r: scales 4u..4u+4 of row r.
        let sc = [
            load512(x.add(Q6X_SCALES)),
            load512(x.add(Q6X_SCALES + 64)),
            load512(x.add(Q6X_SCALES + 128)),
            load512(x.add(Q6X_SCALES + 192)),
        ];
        let mut isum = [_mm512_setzero_si512(); B];
        for n in 0..2 {
            for hh in 0..2 {
                // Positions l in 16hh..16hh+16 of half n: sub-blocks 8n + 2k + hh for quarters k = 0..4.
                let mut qa = [[_mm512_setzero_si512(); 4]; B];
                for gg in 0..4 {
                    let g = 4 * hh + gg;
                    let ua = x.add(Q6X_QL + 64 * (16 * n + g)); // ql bytes 64n+4g..: quarters 0 (low), 2 (high)
                    let ub = x.add(Q6X_QL + 64 * (16 * n + 8 + g)); // ql bytes 64n+32+4g..: quarters 1, 3
                    let uh = x.add(Q6X_QH + 64 * (8 * n + g)); // qh bytes 32n+4g..: bit pairs of quarters 0..4
                    for p in [ua, ub, uh] {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(PREFETCH_Q6K) as *const i8);
                    }
                    let (va, vb, vh) = (load512(ua), load512(ub), load512(uh));
                    let q = [
                        _mm512_ternarylogic_epi32::<AND_OR>(
                            _mm512_slli_epi16::<4>(vh),
                            m30,
                            _mm512_and_si512(va, m4),
                        ),
                        _mm512_ternarylogic_epi32::<AND_OR>(
                            _mm512_slli_epi16::<2>(vh),
                            m30,
                            _mm512_and_si512(vb, m4),
                        ),
                        _mm512_ternarylogic_epi32::<AND_OR>(
                            vh,
                            m30,
                            _mm512_and_si512(_mm512_srli_epi16::<4>(va), m4),
                        ),
                        _mm512_ternarylogic_epi32::<AND_OR>(
                            _mm512_srli_epi16::<2>(vh),
                            m30,
                            _mm512_and_si512(_mm512_srli_epi16::<4>(vb), m4),
                        ),
                    ];
                    for t in 0..B {
                        let yq = y(t).add(Q8K_QS + 128 * n + 4 * g);
                        for k in 0..4 {
                            qa[t][k] = D::dpbusd_bcast(qa[t][k], q[k], yq.add(32 * k));
                        }
                    }
                }
                for k in 0..4 {
                    let s = 8 * n + 2 * k + hh;
                    let sv = _mm512_srai_epi32::<24>(_mm512_shuffle_epi8(
                        sc[s / 4],
                        top_ctrl(s % 4, false),
                    ));
                    for t in 0..B {
                        isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(qa[t][k], sv));
                    }
                }
            }
        }
        // Σ_g sc[g] · bsums[g], two groups per i16 pair.
        let mut msum = [_mm512_setzero_si512(); B];
        for p in 0..8 {
            let sp =
                _mm512_srai_epi16::<8>(_mm512_shuffle_epi8(sc[p / 2], top_ctrl(2 * (p % 2), true)));
            for (t, m) in msum.iter_mut().enumerate() {
                *m = D::dpwssd(*m, sp, bcast(y(t).add(Q8K_BSUMS + 4 * p)));
            }
        }
        let d = _mm512_cvtph_ps(load256(x)); // [16] d
        for t in 0..B {
            // 32 (= 1 << 5): the code midpoint.
            let total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32::<5>(msum[t]));
            acc[t] = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(total),
                _mm512_mul_ps(d, _mm512_set1_ps(f32_at(y(t)))),
                acc[t],
            );
        }
    }
    for (t, acc) in acc.iter().enumerate() {
        _mm512_storeu_ps(out.add(16 * t), *acc);
    }
}
