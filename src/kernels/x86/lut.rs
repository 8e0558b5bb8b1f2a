//! LUT GEMV for the `Q2_K×32` layout (`kernels::lut`) on x86: AVX2 (every x86 SIMD tier) and
//! AVX-512 BW lookups, one driver.
//!
//! Per sub-block of 16 elements (4 quads, 2 index vectors per plane) and 32 rows, AVX2: eight
//! `vpshufb` table lookups for the low bytes and eight for the high bytes (a table broadcast to both
//! 128-bit lanes, the 32 rows' 4-bit indices as the control); AVX-512: four and four, two quads per
//! 512-bit lookup (`Lookup512`). Low bytes of the two planes are
//! interleaved and summed `lo0 + 2·lo1` into 16-bit lanes by `maddubs` with (1, 2); high bytes
//! (`[-2, 1]` each) are summed in bytes (`[-24, 12]` over a sub-block) and added as `hi·256`.
//! The sub-block sums `S` (`|S| ≤ 16·3·127`) of two sub-blocks are interleaved and `madd`ed with
//! their scales into exact i32 `isum`s; the mins go through the activation's `bsums` the same way.
//!
//! Row order in the 32-bit lanes: unpacking bytes to words and words to dwords within 128-bit lanes
//! leaves accumulator `q` (0..4) holding rows `4q..4q+4` in its low half and `16+4q..16+4q+4` in its
//! high half; the f16 scales are loaded in that order and the results stored back in row order.
//! Per super-block and row the float work is the reference's two FMAs (`quant::contract`).

use std::arch::x86_64::*;

use super::isa::load256;
use crate::kernels::lut::{LUT_BLOCK, LUT_ROWS, OFF_DMIN, OFF_IDX, OFF_SCALES, PLANE, TABLE_BYTES};
use crate::kernels::Tier;
use crate::quant::block_bytes::Q8_K as Q8K_BYTES;
use crate::quant::q8k_layout::BSUMS;
use crate::quant::QK_K;

/// Software prefetch distance: four packed super-blocks (10.5 KB) ahead, into L1, every line of the
/// block asked for when the kernel starts the block four before it. As in the packed Q4_K kernel
/// (`packed512::PREFETCH`), hardware prefetch alone does not keep a streaming kernel fed: the
/// forward pass of a Q2_K model read its weights at ~40 % of one thread's read bandwidth without
/// it (`docs/performance.md`, "Lookup-table kernels").
pub(crate) const PREFETCH: usize = 4 * LUT_BLOCK;

/// Asks for every cache line of the packed block `PREFETCH` bytes after `x` (a no-op past the end:
/// prefetches never fault).
#[inline(always)]
pub(crate) unsafe fn prefetch_block<const BYTES: usize>(x: *const u8, ahead: usize) {
    for l in 0..BYTES / 64 {
        _mm_prefetch::<_MM_HINT_T0>(x.wrapping_add(ahead + 64 * l) as *const i8);
    }
}

/// The Q2_K LUT kernel as the forward pass uses it (`KernelSet::lut`): 256-bit lookups.
pub(crate) const Q2_K_LUT: crate::kernels::lut::LutKernel = crate::kernels::lut::LutKernel {
    block: QK_K,
    table_bytes: TABLE_BYTES,
    build_tables: crate::kernels::lut::build_tables,
    gemv,
};

/// Checks the operand sizes and that the CPU has `tier`.
fn check(tier: Tier, nb: usize, w: &[u8], act: &[u8], tables: &[u8]) {
    assert!(
        w.len() >= nb * LUT_BLOCK
            && act.len() >= nb * Q8K_BYTES
            && tables.len() >= nb * TABLE_BYTES,
        "LUT GEMV operand sizes"
    );
    assert!(tier.supported(crate::kernels::cpu::cpu_features()), "the {tier} tier is missing");
}

/// `lut::LutGemvFn` on AVX2 (every x86 SIMD tier).
pub(crate) fn gemv(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    check(Tier::Avx2, nb, w, act, tables);
    // SAFETY: the CPU has AVX2, FMA and F16C (the AVX2 tier's requirements, checked above); every
    // read is within the sizes checked above; `out` holds 32 floats.
    unsafe { gemv_avx2(nb, w.as_ptr(), act.as_ptr(), tables.as_ptr(), out.as_mut_ptr()) }
}

/// `lut::LutGemvFn` with 512-bit lookups (the AVX-512 tiers).
pub(crate) fn gemv512(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    check(Tier::Avx512, nb, w, act, tables);
    // SAFETY: the CPU has the AVX-512 tier's features (checked above), which include AVX2, FMA and
    // F16C; reads within the sizes checked; `out` holds 32 floats.
    unsafe { gemv_avx512(nb, w.as_ptr(), act.as_ptr(), tables.as_ptr(), out.as_mut_ptr()) }
}

/// The table of quad `k` at `t` (low bytes, or high bytes with `high`), in both 128-bit lanes.
#[inline(always)]
pub(super) unsafe fn table(t: *const u8, k: usize, high: bool) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_loadu_si128(
        t.add(32 * k + 16 * high as usize) as *const __m128i
    ))
}

/// The eight f16 at `p` (rows `4q..4q+4`) and `p + 32` (rows `16+4q..`) as f32.
#[inline(always)]
unsafe fn f16_pair(p: *const u8) -> __m256 {
    let lo = _mm_loadl_epi64(p as *const __m128i);
    let hi = _mm_loadl_epi64(p.add(32) as *const __m128i);
    _mm256_cvtph_ps(_mm_unpacklo_epi64(lo, hi))
}

/// Bytes `0..8` (`half` 0: rows 0-7 | 16-23) or `8..16` (rows 8-15 | 24-31) of each 128-bit lane
/// of `v`, zero-extended to 16 bits.
#[inline(always)]
unsafe fn widen(v: __m256i, half: usize) -> __m256i {
    let zero = _mm256_setzero_si256();
    if half == 0 {
        _mm256_unpacklo_epi8(v, zero)
    } else {
        _mm256_unpackhi_epi8(v, zero)
    }
}

/// How a kernel computes a sub-block's sums `S = Σ_quads T[idx0] + 2·T[idx1]` of the 32 rows:
/// `[A, B]`, 16-bit lanes, rows 0-7 | 16-23 and 8-15 | 24-31.
trait SubBlockSums {
    /// Safety: `x` a packed super-block, `t` its activation block's tables, `g < 16`; the CPU has
    /// the implementation's features.
    unsafe fn sums(x: *const u8, t: *const u8, g: usize) -> [__m256i; 2];
}

/// Sixteen 256-bit lookups per sub-block (every x86 SIMD tier).
struct Lookup256;
/// Eight 512-bit lookups per sub-block: one 64-byte load holds both quad pairs of a plane, the
/// tables of two quads sit in the two 256-bit halves (AVX-512 BW).
struct Lookup512;

/// `maddubs` weights (1, 2): plane 0's low byte once, plane 1's twice.
const W12: i16 = 0x0201;

impl SubBlockSums for Lookup256 {
    #[inline(always)]
    unsafe fn sums(x: *const u8, tb: *const u8, g: usize) -> [__m256i; 2] {
        let zero = _mm256_setzero_si256();
        let m4 = _mm256_set1_epi8(15);
        let w12 = _mm256_set1_epi16(W12);
        let (mut lo_a, mut lo_b, mut hi8) = (zero, zero, zero);
        for j in 2 * g..2 * g + 2 {
            let v0 = load256(x.add(OFF_IDX + 32 * j));
            let v1 = load256(x.add(OFF_IDX + PLANE + 32 * j));
            for nib in 0..2 {
                let k = 2 * j + nib;
                let (i0, i1) = if nib == 0 {
                    (_mm256_and_si256(v0, m4), _mm256_and_si256(v1, m4))
                } else {
                    (
                        _mm256_and_si256(_mm256_srli_epi16(v0, 4), m4),
                        _mm256_and_si256(_mm256_srli_epi16(v1, 4), m4),
                    )
                };
                let (tlo, thi) = (table(tb, k, false), table(tb, k, true));
                let (l0, l1) = (_mm256_shuffle_epi8(tlo, i0), _mm256_shuffle_epi8(tlo, i1));
                let (h0, h1) = (_mm256_shuffle_epi8(thi, i0), _mm256_shuffle_epi8(thi, i1));
                lo_a =
                    _mm256_add_epi16(lo_a, _mm256_maddubs_epi16(_mm256_unpacklo_epi8(l0, l1), w12));
                lo_b =
                    _mm256_add_epi16(lo_b, _mm256_maddubs_epi16(_mm256_unpackhi_epi8(l0, l1), w12));
                hi8 = _mm256_add_epi8(hi8, _mm256_add_epi8(h0, _mm256_add_epi8(h1, h1)));
            }
        }
        [
            _mm256_add_epi16(lo_a, _mm256_unpacklo_epi8(zero, hi8)),
            _mm256_add_epi16(lo_b, _mm256_unpackhi_epi8(zero, hi8)),
        ]
    }
}

impl SubBlockSums for Lookup512 {
    #[inline(always)]
    unsafe fn sums(x: *const u8, tb: *const u8, g: usize) -> [__m256i; 2] {
        let m4 = _mm512_set1_epi8(15);
        let w12 = _mm512_set1_epi16(W12);
        // Quad pairs 2g (low half) and 2g + 1 (high half) of each plane.
        let v0 = _mm512_loadu_si512(x.add(OFF_IDX + 64 * g) as *const _);
        let v1 = _mm512_loadu_si512(x.add(OFF_IDX + PLANE + 64 * g) as *const _);
        let (mut lo_a, mut lo_b, mut hi8) =
            (_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512());
        for nib in 0..2 {
            // Low nibbles: quads 4g (low half) and 4g + 2 (high half); high nibbles: 4g+1, 4g+3.
            let (k0, k1) = (4 * g + nib, 4 * g + 2 + nib);
            let (i0, i1) = if nib == 0 {
                (_mm512_and_si512(v0, m4), _mm512_and_si512(v1, m4))
            } else {
                (
                    _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4),
                    _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4),
                )
            };
            let (tlo, thi) = (table2(tb, k0, k1, false), table2(tb, k0, k1, true));
            let (l0, l1) = (_mm512_shuffle_epi8(tlo, i0), _mm512_shuffle_epi8(tlo, i1));
            let (h0, h1) = (_mm512_shuffle_epi8(thi, i0), _mm512_shuffle_epi8(thi, i1));
            lo_a = _mm512_add_epi16(lo_a, _mm512_maddubs_epi16(_mm512_unpacklo_epi8(l0, l1), w12));
            lo_b = _mm512_add_epi16(lo_b, _mm512_maddubs_epi16(_mm512_unpackhi_epi8(l0, l1), w12));
            hi8 = _mm512_add_epi8(hi8, _mm512_add_epi8(h0, _mm512_add_epi8(h1, h1)));
        }
        // The two halves hold the same rows (different quads): add them.
        let fold = |v: __m512i| {
            _mm256_add_epi16(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
        };
        let h = _mm256_add_epi8(_mm512_castsi512_si256(hi8), _mm512_extracti64x4_epi64::<1>(hi8));
        let zero = _mm256_setzero_si256();
        [
            _mm256_add_epi16(fold(lo_a), _mm256_unpacklo_epi8(zero, h)),
            _mm256_add_epi16(fold(lo_b), _mm256_unpackhi_epi8(zero, h)),
        ]
    }
}

/// The tables of quads `k0` (low 256 bits) and `k1` (high 256 bits), low or high bytes, each in
/// both 128-bit lanes of its half.
#[inline(always)]
pub(super) unsafe fn table2(t: *const u8, k0: usize, k1: usize, high: bool) -> __m512i {
    let at = |k: usize| _mm_loadu_si128(t.add(32 * k + 16 * high as usize) as *const __m128i);
    _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(at(k0)), 0xFF00, at(k1))
}

/// AVX2 entry point.
///
/// Safety: as `gemv_with`; the CPU has AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_avx2(nb: usize, w: *const u8, a: *const u8, t: *const u8, out: *mut f32) {
    gemv_with::<Lookup256>(nb, w, a, t, out)
}

/// AVX-512 BW entry point.
///
/// Safety: as `gemv_with`; the CPU has the AVX-512 tier (F, BW, VL) and AVX2, FMA, F16C.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn gemv_avx512(nb: usize, w: *const u8, a: *const u8, t: *const u8, out: *mut f32) {
    gemv_with::<Lookup512>(nb, w, a, t, out)
}

/// Safety: `w` holds `nb` packed super-blocks, `a` `nb` Q8_K blocks, `t` their tables, `out` 32
/// floats; the CPU has AVX2, FMA, F16C and `S`'s features.
#[inline(always)]
unsafe fn gemv_with<S: SubBlockSums>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    t: *const u8,
    out: *mut f32,
) {
    let zero = _mm256_setzero_si256();
    let m4 = _mm256_set1_epi8(15);
    let mut acc = [_mm256_setzero_ps(); 4];
    for b in 0..nb {
        let x = w.add(b * LUT_BLOCK);
        let y = a.add(b * Q8K_BYTES);
        let tb = t.add(b * TABLE_BYTES);
        prefetch_block::<LUT_BLOCK>(x, PREFETCH);
        let mut isum = [zero; 4];
        let mut summs = [zero; 4];
        for g2 in 0..QK_K / 32 {
            // S of sub-blocks 2·g2 and 2·g2 + 1, rows in the A (0-7 | 16-23) and B (8-15 | 24-31)
            // halves of 16-bit lanes.
            let s16 = [S::sums(x, tb, 2 * g2), S::sums(x, tb, 2 * g2 + 1)];
            let sm0 = load256(x.add(OFF_SCALES + 32 * (2 * g2)));
            let sm1 = load256(x.add(OFF_SCALES + 32 * (2 * g2 + 1)));
            let (sc0, sc1) = (_mm256_and_si256(sm0, m4), _mm256_and_si256(sm1, m4));
            let mn0 = _mm256_and_si256(_mm256_srli_epi16(sm0, 4), m4);
            let mn1 = _mm256_and_si256(_mm256_srli_epi16(sm1, 4), m4);
            // bsums of the two sub-blocks as one i16 pair per 32-bit lane.
            let bpair =
                _mm256_set1_epi32(std::ptr::read_unaligned(y.add(BSUMS + 4 * g2) as *const i32));
            let [sa, sb] = s16;
            for (half, (s0, s1)) in sa.into_iter().zip(sb).enumerate() {
                let (c0, c1, n0, n1) =
                    (widen(sc0, half), widen(sc1, half), widen(mn0, half), widen(mn1, half));
                let q = 2 * half;
                isum[q] = _mm256_add_epi32(
                    isum[q],
                    _mm256_madd_epi16(_mm256_unpacklo_epi16(s0, s1), _mm256_unpacklo_epi16(c0, c1)),
                );
                isum[q + 1] = _mm256_add_epi32(
                    isum[q + 1],
                    _mm256_madd_epi16(_mm256_unpackhi_epi16(s0, s1), _mm256_unpackhi_epi16(c0, c1)),
                );
                summs[q] = _mm256_add_epi32(
                    summs[q],
                    _mm256_madd_epi16(_mm256_unpacklo_epi16(n0, n1), bpair),
                );
                summs[q + 1] = _mm256_add_epi32(
                    summs[q + 1],
                    _mm256_madd_epi16(_mm256_unpackhi_epi16(n0, n1), bpair),
                );
            }
        }
        let dy = _mm256_set1_ps(std::ptr::read_unaligned(y as *const f32));
        let sign = _mm256_set1_ps(-0.0);
        for (q, acc) in acc.iter_mut().enumerate() {
            let d = _mm256_mul_ps(f16_pair(x.add(8 * q)), dy);
            let dmin = _mm256_xor_ps(_mm256_mul_ps(f16_pair(x.add(OFF_DMIN + 8 * q)), dy), sign);
            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[q]), d, *acc);
            *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summs[q]), dmin, *acc);
        }
    }
    for (q, acc) in acc.iter().enumerate() {
        _mm_storeu_ps(out.add(4 * q), _mm256_castps256_ps128(*acc));
        _mm_storeu_ps(out.add(16 + 4 * q), _mm256_extractf128_ps(*acc, 1));
    }
}
