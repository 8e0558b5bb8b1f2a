//! LUT GEMV for the `Q4_0×32` layout (`kernels::lut_q4_0`) on x86: AVX2 (every x86 SIMD tier) and
//! AVX-512 BW lookups, one driver.
//!
//! Per quad and 32 rows, AVX2: four `vpshufb` lookups of the table's low bytes and four of its high
//! bytes (one per plane; the table broadcast to both 128-bit lanes, the 32 rows' 4-bit indices as
//! the control); AVX-512: the same count per two quads (the tables of quads `k` and `k + 2` in the
//! two 256-bit halves, one 64-byte load of indices). Low bytes of planes 0/1 and 2/3 are
//! interleaved and `maddubs`ed with (1, 2) and (4, −8) into 16-bit lanes; high bytes (`[-2, 1]`)
//! are summed `h0 + 2·h1 + 4·h2 − 8·h3` in bytes (`[-22, 23]`) and added as `hi·256`. The 16-bit
//! quad sum (`|S| ≤ 4096`; every partial sum stays within ±7,700) is exact.
//!
//! Row order: unpacking bytes to words within 128-bit lanes leaves the `A` vector with rows 0-7 |
//! 16-23 and `B` with 8-15 | 24-31; each 128-bit half widens (`vpmovsxwd`) to eight rows in order.
//! Float work per quad and eight rows: convert, multiply by `d_w·d_a`, add to the quad's lane
//! (`quant::contract` shape 2; no FMA); the sixteen lanes of each row are folded at the end by the
//! contract's tree, lane registers added vertically.

use std::arch::x86_64::*;

use super::isa::load256;
use super::lut::{prefetch_block, table, table2};
use crate::kernels::lut_q4_0::{LUT_BLOCK, LUT_ROWS, OFF_IDX, PLANE, TABLE_BYTES};
use crate::kernels::Tier;
use crate::quant::block_bytes::Q8_0 as Q80;

/// Software prefetch distance: sixteen packed blocks (9.2 KB) ahead, about `lut::PREFETCH`.
const PREFETCH: usize = 16 * LUT_BLOCK;

/// Checks the operand sizes and that the CPU has `tier`.
fn check(tier: Tier, nb: usize, w: &[u8], act: &[u8], tables: &[u8]) {
    assert!(
        w.len() >= nb * LUT_BLOCK && act.len() >= nb * Q80 && tables.len() >= nb * TABLE_BYTES,
        "LUT GEMV operand sizes"
    );
    assert!(tier.supported(crate::kernels::cpu::cpu_features()), "the {tier} tier is missing");
}

/// `lut::LutGemvFn` for `Q4_0×32` on AVX2 (every x86 SIMD tier).
pub(crate) fn gemv(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    check(Tier::Avx2, nb, w, act, tables);
    // SAFETY: the CPU has AVX2, FMA and F16C (the AVX2 tier's requirements, checked above); every
    // read is within the sizes checked above; `out` holds 32 floats.
    unsafe { gemv_avx2(nb, w.as_ptr(), act.as_ptr(), tables.as_ptr(), out.as_mut_ptr()) }
}

/// `lut::LutGemvFn` for `Q4_0×32` with 512-bit lookups (the AVX-512 tiers).
pub(crate) fn gemv512(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    check(Tier::Avx512, nb, w, act, tables);
    // SAFETY: the CPU has the AVX-512 tier's features (checked above), which include AVX2, FMA and
    // F16C; reads within the sizes checked; `out` holds 32 floats.
    unsafe { gemv_avx512(nb, w.as_ptr(), act.as_ptr(), tables.as_ptr(), out.as_mut_ptr()) }
}

/// `maddubs` weights (1, 2): plane 0's low byte once, plane 1's twice.
const W12: i16 = 0x0201;
/// `maddubs` weights (4, −8): planes 2 and 3 (the sign bit of the two's complement code).
const W48: i16 = 0xF804u16 as i16;

/// How a kernel computes the quad sums of the 32 rows for four quads `4h..4h+4` (`h` 0 or 1):
/// per quad `[A, B]`, 16-bit lanes, rows 0-7 | 16-23 and 8-15 | 24-31.
trait QuadSums {
    /// Safety: `x` a packed block, `t` its activation block's tables, `h < 2`; the CPU has the
    /// implementation's features.
    unsafe fn sums(x: *const u8, t: *const u8, h: usize) -> [[__m256i; 2]; 4];
}

/// Eight 256-bit lookups per quad (every x86 SIMD tier).
struct Lookup256;
/// Eight 512-bit lookups per two quads (AVX-512 BW).
struct Lookup512;

/// `h0 + 2·h1 + 4·h2 − 8·h3` in bytes (Horner: ((−h3·2 + h2)·2 + h1)·2 + h0).
macro_rules! high_sum {
    ($add:ident, $sub:ident, $h:expr) => {{
        let h = $h;
        let t = $sub(h[2], $add(h[3], h[3]));
        let t = $add(h[1], $add(t, t));
        $add(h[0], $add(t, t))
    }};
}

impl QuadSums for Lookup256 {
    #[inline(always)]
    unsafe fn sums(x: *const u8, tb: *const u8, h: usize) -> [[__m256i; 2]; 4] {
        let zero = _mm256_setzero_si256();
        let m4 = _mm256_set1_epi8(15);
        let (w12, w48) = (_mm256_set1_epi16(W12), _mm256_set1_epi16(W48));
        let mut out = [[zero; 2]; 4];
        for jj in 0..2 {
            let j = 2 * h + jj;
            let v: [__m256i; 4] =
                std::array::from_fn(|p| load256(x.add(OFF_IDX + PLANE * p + 32 * j)));
            for nib in 0..2 {
                let k = 2 * j + nib;
                let idx: [__m256i; 4] = std::array::from_fn(|p| {
                    if nib == 0 {
                        _mm256_and_si256(v[p], m4)
                    } else {
                        _mm256_and_si256(_mm256_srli_epi16(v[p], 4), m4)
                    }
                });
                let (tlo, thi) = (table(tb, k, false), table(tb, k, true));
                let l: [__m256i; 4] = std::array::from_fn(|p| _mm256_shuffle_epi8(tlo, idx[p]));
                let hh: [__m256i; 4] = std::array::from_fn(|p| _mm256_shuffle_epi8(thi, idx[p]));
                let hi8 = high_sum!(_mm256_add_epi8, _mm256_sub_epi8, hh);
                let lo_a = _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_unpacklo_epi8(l[0], l[1]), w12),
                    _mm256_maddubs_epi16(_mm256_unpacklo_epi8(l[2], l[3]), w48),
                );
                let lo_b = _mm256_add_epi16(
                    _mm256_maddubs_epi16(_mm256_unpackhi_epi8(l[0], l[1]), w12),
                    _mm256_maddubs_epi16(_mm256_unpackhi_epi8(l[2], l[3]), w48),
                );
                out[2 * jj + nib] = [
                    _mm256_add_epi16(lo_a, _mm256_unpacklo_epi8(zero, hi8)),
                    _mm256_add_epi16(lo_b, _mm256_unpackhi_epi8(zero, hi8)),
                ];
            }
        }
        out
    }
}

impl QuadSums for Lookup512 {
    #[inline(always)]
    unsafe fn sums(x: *const u8, tb: *const u8, h: usize) -> [[__m256i; 2]; 4] {
        let zero = _mm512_setzero_si512();
        let m4 = _mm512_set1_epi8(15);
        let (w12, w48) = (_mm512_set1_epi16(W12), _mm512_set1_epi16(W48));
        // Quad pairs 2h (low half) and 2h + 1 (high half) of each plane.
        let v: [__m512i; 4] = std::array::from_fn(|p| {
            _mm512_loadu_si512(x.add(OFF_IDX + PLANE * p + 64 * h) as *const _)
        });
        let mut out = [[_mm256_setzero_si256(); 2]; 4];
        for nib in 0..2 {
            // Low nibbles: quads 4h (low half) and 4h + 2 (high half); high nibbles: 4h+1, 4h+3.
            let (k0, k1) = (4 * h + nib, 4 * h + 2 + nib);
            let idx: [__m512i; 4] = std::array::from_fn(|p| {
                if nib == 0 {
                    _mm512_and_si512(v[p], m4)
                } else {
                    _mm512_and_si512(_mm512_srli_epi16(v[p], 4), m4)
                }
            });
            let (tlo, thi) = (table2(tb, k0, k1, false), table2(tb, k0, k1, true));
            let l: [__m512i; 4] = std::array::from_fn(|p| _mm512_shuffle_epi8(tlo, idx[p]));
            let hh: [__m512i; 4] = std::array::from_fn(|p| _mm512_shuffle_epi8(thi, idx[p]));
            let hi8 = high_sum!(_mm512_add_epi8, _mm512_sub_epi8, hh);
            let lo_a = _mm512_add_epi16(
                _mm512_maddubs_epi16(_mm512_unpacklo_epi8(l[0], l[1]), w12),
                _mm512_maddubs_epi16(_mm512_unpacklo_epi8(l[2], l[3]), w48),
            );
            let lo_b = _mm512_add_epi16(
                _mm512_maddubs_epi16(_mm512_unpackhi_epi8(l[0], l[1]), w12),
                _mm512_maddubs_epi16(_mm512_unpackhi_epi8(l[2], l[3]), w48),
            );
            let a = _mm512_add_epi16(lo_a, _mm512_unpacklo_epi8(zero, hi8));
            let b = _mm512_add_epi16(lo_b, _mm512_unpackhi_epi8(zero, hi8));
            let halves =
                |v: __m512i| (_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
            let ((a0, a1), (b0, b1)) = (halves(a), halves(b));
            out[nib] = [a0, b0];
            out[2 + nib] = [a1, b1];
        }
        out
    }
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

/// Safety: `w` holds `nb` packed blocks, `a` `nb` Q8_0 blocks, `t` their tables, `out` 32 floats;
/// the CPU has AVX2, FMA, F16C and `S`'s features.
#[inline(always)]
unsafe fn gemv_with<S: QuadSums>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    t: *const u8,
    out: *mut f32,
) {
    // lanes[l][g]: contract lane l (0..16) of rows 8g..8g+8.
    let mut lanes = [[_mm256_setzero_ps(); 4]; 16];
    for b in 0..nb {
        let x = w.add(b * LUT_BLOCK);
        let tb = t.add(b * TABLE_BYTES);
        prefetch_block::<LUT_BLOCK>(x, PREFETCH);
        let da = _mm256_set1_ps(crate::quant::bytes::f16_at(std::slice::from_raw_parts(
            a.add(b * Q80),
            2,
        )));
        // d_w·d_a of rows 8g..8g+8.
        let scale: [__m256; 4] = std::array::from_fn(|g| {
            _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(x.add(16 * g) as *const __m128i)), da)
        });
        let par = 8 * (b % 2);
        for h in 0..2 {
            for (kk, [sa, sb]) in S::sums(x, tb, h).into_iter().enumerate() {
                let k = 4 * h + kk;
                // Rows 0-7, 8-15, 16-23, 24-31 as i32.
                let rows = [
                    _mm256_cvtepi16_epi32(_mm256_castsi256_si128(sa)),
                    _mm256_cvtepi16_epi32(_mm256_castsi256_si128(sb)),
                    _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(sa)),
                    _mm256_cvtepi16_epi32(_mm256_extracti128_si256::<1>(sb)),
                ];
                for g in 0..4 {
                    let p = _mm256_mul_ps(_mm256_cvtepi32_ps(rows[g]), scale[g]);
                    lanes[par + k][g] = _mm256_add_ps(lanes[par + k][g], p);
                }
            }
        }
    }
    // `contract::fold16` on every row at once: lane l + 8 onto l, then l + 4, l + 2, 1 onto 0.
    let rows: [__m256; 4] = std::array::from_fn(|g| {
        let l = |i: usize| _mm256_add_ps(lanes[i][g], lanes[i + 8][g]);
        let x: [__m256; 4] = std::array::from_fn(|i| _mm256_add_ps(l(i), l(i + 4)));
        let y = [_mm256_add_ps(x[0], x[2]), _mm256_add_ps(x[1], x[3])];
        _mm256_add_ps(y[0], y[1])
    });
    for (g, r) in rows.into_iter().enumerate() {
        _mm256_storeu_ps(out.add(8 * g), r);
    }
}
