//! The few instructions that differ between x86 tiers, behind traits, so each kernel body is written
//! once and monomorphised per tier inside that tier's `#[target_feature]` entry point.
//!
//! All functions are `#[inline(always)]` and `unsafe`: they must only be inlined into functions
//! compiled with (and called on CPUs with) the features of the implementing marker type.

use std::arch::x86_64::*;

/// 256-bit integer dot-product primitives.
pub(crate) trait Dot256 {
    /// Whether `dpbusd` is one instruction (VNNI). Without it a four-byte dot costs two multiplies
    /// (`maddubs` + `madd`), and kernels that can sum `maddubs` results in i16 first do so.
    const ONE_INSTRUCTION_DPBUSD: bool;
    /// `acc` plus, per i32 lane, the sum of the 4 byte products `u8(u) * i8(s)`.
    /// (The AVX2 form goes through a saturating i16 pair sum, exact while `|u*s| + |u'*s'| <= 32767`,
    /// i.e. for every pairing here unless both operands are -128/128: our quantizers never emit -128.)
    unsafe fn dpbusd(acc: __m256i, u: __m256i, s: __m256i) -> __m256i;
    /// `acc` plus, per i32 lane, the sum of the 2 products `i16(a) * i16(b)`.
    unsafe fn dpwssd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i;
    /// 32 bytes, byte j = 0xFF if bit j of `bits` is set, else 0.
    unsafe fn expand_bits(bits: u32) -> __m256i;
}

/// AVX2 only: `maddubs` + `madd`, bit expansion by shuffles.
pub(crate) struct Avx2;
/// AVX-512 BW/VL without VNNI: AVX2 dots, mask-register bit expansion.
pub(crate) struct Bw256;
/// AVX512-VNNI on 256-bit vectors (needs AVX512VL).
pub(crate) struct Vnni256;
/// AVX-VNNI (VEX-encoded, no AVX-512).
pub(crate) struct AvxVnni;

/// AVX2 `acc + madd(maddubs(u, s), 1)`.
#[inline(always)]
unsafe fn dpbusd_avx2(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)))
}

/// AVX2 bit expansion: broadcast the 4 bytes, give byte j its source byte j/8, test bit j%8.
#[inline(always)]
unsafe fn expand_bits_avx2(bits: u32) -> __m256i {
    let v = _mm256_set1_epi32(bits as i32);
    // Byte j of the result reads source byte j/8 of the broadcast u32.
    let idx = _mm256_setr_epi8(
        0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3,
        3, 3,
    );
    let b = _mm256_shuffle_epi8(v, idx);
    // Bit j%8 of each byte: OR in every other bit, then a byte is all-ones iff its bit was set.
    let m = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe_u64 as i64);
    _mm256_cmpeq_epi8(_mm256_or_si256(b, m), _mm256_set1_epi64x(-1))
}

impl Dot256 for Avx2 {
    const ONE_INSTRUCTION_DPBUSD: bool = false;
    #[inline(always)]
    unsafe fn dpbusd(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        dpbusd_avx2(acc, u, s)
    }
    #[inline(always)]
    unsafe fn dpwssd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
    }
    #[inline(always)]
    unsafe fn expand_bits(bits: u32) -> __m256i {
        expand_bits_avx2(bits)
    }
}

impl Dot256 for Bw256 {
    const ONE_INSTRUCTION_DPBUSD: bool = false;
    #[inline(always)]
    unsafe fn dpbusd(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        dpbusd_avx2(acc, u, s)
    }
    #[inline(always)]
    unsafe fn dpwssd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
    }
    #[inline(always)]
    unsafe fn expand_bits(bits: u32) -> __m256i {
        _mm256_movm_epi8(bits)
    }
}

impl Dot256 for Vnni256 {
    const ONE_INSTRUCTION_DPBUSD: bool = true;
    #[inline(always)]
    unsafe fn dpbusd(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_epi32(acc, u, s)
    }
    #[inline(always)]
    unsafe fn dpwssd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpwssd_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn expand_bits(bits: u32) -> __m256i {
        _mm256_movm_epi8(bits)
    }
}

impl Dot256 for AvxVnni {
    const ONE_INSTRUCTION_DPBUSD: bool = true;
    #[inline(always)]
    unsafe fn dpbusd(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
        _mm256_dpbusd_avx_epi32(acc, u, s)
    }
    #[inline(always)]
    unsafe fn dpwssd(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        _mm256_dpwssd_avx_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn expand_bits(bits: u32) -> __m256i {
        expand_bits_avx2(bits)
    }
}

/// 512-bit integer dot-product primitives (AVX-512 BW tiers).
pub(crate) trait Dot512 {
    /// `acc` plus, per i32 lane, the sum of the 2 products `i16(a) * i16(b)`.
    unsafe fn dpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i;
    /// `acc` plus, per i32 lane, the sum of the 4 byte products `u8(u) * i8(s)` (same saturation
    /// caveat as `Dot256::dpbusd` for the BW form).
    unsafe fn dpbusd(acc: __m512i, u: __m512i, s: __m512i) -> __m512i;
    /// `dpbusd(acc, u, s)` with `s` the i32 at `p` broadcast to every lane.
    #[inline(always)]
    unsafe fn dpbusd_bcast(acc: __m512i, u: __m512i, p: *const u8) -> __m512i {
        Self::dpbusd(acc, u, _mm512_set1_epi32(std::ptr::read_unaligned(p as *const i32)))
    }
}

/// AVX-512 BW: `madd` + `add`.
pub(crate) struct Bw512;
/// AVX512-VNNI: `vpdpwssd`.
pub(crate) struct Vnni512;

impl Dot512 for Bw512 {
    #[inline(always)]
    unsafe fn dpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi32(acc, _mm512_madd_epi16(a, b))
    }
    #[inline(always)]
    unsafe fn dpbusd(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)))
    }
}

impl Dot512 for Vnni512 {
    #[inline(always)]
    unsafe fn dpwssd(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        _mm512_dpwssd_epi32(acc, a, b)
    }
    #[inline(always)]
    unsafe fn dpbusd(acc: __m512i, u: __m512i, s: __m512i) -> __m512i {
        _mm512_dpbusd_epi32(acc, u, s)
    }
    #[inline(always)]
    unsafe fn dpbusd_bcast(acc: __m512i, u: __m512i, p: *const u8) -> __m512i {
        vpdpbusd_bcast512(acc, u, p)
    }
}

/// One `vpdpbusd` with an embedded `{1to16}` memory broadcast of the i32 at `p`. Written as `asm!`
/// because LLVM hoisted the broadcasts of a whole block ahead of their use and spilled them to the
/// stack (a 64-byte store and reload per instruction: the packed kernel ran 2x slower). `#[inline]`
/// (not `always`, which `target_feature` forbids) still inlines into callers with these features.
#[inline]
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn vpdpbusd_bcast512(mut acc: __m512i, u: __m512i, p: *const u8) -> __m512i {
    std::arch::asm!(
        "vpdpbusd {acc}, {u}, dword ptr [{p}]{{1to16}}",
        acc = inout(zmm_reg) acc,
        u = in(zmm_reg) u,
        p = in(reg) p,
        options(pure, readonly, nostack, preserves_flags)
    );
    acc
}

/// The little-endian f16 at `p`, as f32 (F16C).
///
/// Broadcast-then-convert: `_mm_cvtsi32_si128` lets LLVM emit `vpinsrw` into an arbitrary live
/// register, a false dependency that chained every block on the previous block's FMA (measured 2x slower).
#[inline(always)]
pub(crate) unsafe fn f16_at(p: *const u8) -> f32 {
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(std::ptr::read_unaligned(p as *const i16))))
}

/// The little-endian f16 at `p`, converted and broadcast to 8 f32 lanes.
#[inline(always)]
pub(crate) unsafe fn f16x8_at(p: *const u8) -> __m256 {
    _mm256_cvtph_ps(_mm_set1_epi16(std::ptr::read_unaligned(p as *const i16)))
}

/// The f32 at `p` (unaligned) in all 8 lanes: one `vbroadcastss` from memory.
#[inline(always)]
pub(crate) unsafe fn f32x8_at(p: *const u8) -> __m256 {
    _mm256_set1_ps(std::ptr::read_unaligned(p as *const f32))
}

/// The little-endian f32 at `p`.
#[inline(always)]
pub(crate) unsafe fn f32_at(p: *const u8) -> f32 {
    std::ptr::read_unaligned(p as *const f32)
}

/// The little-endian u32 at `p`.
#[inline(always)]
pub(crate) unsafe fn u32_at(p: *const u8) -> u32 {
    std::ptr::read_unaligned(p as *const u32)
}

/// 32 unaligned bytes at `p`.
#[inline(always)]
pub(crate) unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

/// Sum of the 8 lanes in the numeric contract's tree (`quant::contract::fold8`): lanes `l + 4`
/// onto `l`, then `l + 2`, then lane 1 onto lane 0.
#[inline(always)]
pub(crate) unsafe fn fold8(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Lane `k` = the sum of the 8 i32 lanes of `v[k]`: eight horizontal sums in nine instructions
/// (six `vphaddd`, two lane permutes, one add) instead of seven each. Integer sums, so the grouping
/// does not change them (wrapping, like every i32 sum here, which the kernels' bounds keep exact).
#[inline(always)]
pub(crate) unsafe fn hsum8x256_i32(v: [__m256i; 8]) -> __m256i {
    // h01 = [v0 01, v0 23, v1 01, v1 23 | v0 45, v0 67, v1 45, v1 67] (pair sums), likewise h23..
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    // a = [v0..v3 sums of lanes 0..4 | v0..v3 sums of lanes 4..8], b the same for v4..v7.
    let a = _mm256_hadd_epi32(h01, h23);
    let b = _mm256_hadd_epi32(h45, h67);
    let lo = _mm256_permute2x128_si256::<0x20>(a, b);
    let hi = _mm256_permute2x128_si256::<0x31>(a, b);
    _mm256_add_epi32(lo, hi)
}

/// Sum of the 8 i32 lanes.
#[inline(always)]
pub(crate) unsafe fn hsum256_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}

/// `vpshufb` controls of the packed kernels for one 128-bit lane (four u32 lanes), built at compile
/// time so a kernel loads one from memory even when `j` is not a constant: `[kind][j]`, byte `j`
/// (0..4) of every u32 moved to its low byte (kind 0), to its low byte and third byte (kind 1, the
/// i16 pair `(b, b)`), to its top byte (kind 2, for a sign-extending `srai` by 24), or bytes `j`,
/// `j+1` to the top bytes of its two i16 halves (kind 3, for `srai` by 8); other bytes zeroed.
pub(crate) const LANE_CTRL: [[[i8; 16]; 4]; 4] = lane_ctrl();

/// Builds `LANE_CTRL` (-128: a set top bit makes `vpshufb` write zero).
const fn lane_ctrl() -> [[[i8; 16]; 4]; 4] {
    let mut t = [[[-128i8; 16]; 4]; 4];
    let mut j = 0;
    while j < 4 {
        let mut k = 0;
        while k < 4 {
            let b = (4 * k + j) as i8;
            t[0][j][4 * k] = b;
            t[1][j][4 * k] = b;
            t[1][j][4 * k + 2] = b;
            t[2][j][4 * k + 3] = b;
            if j < 3 {
                t[3][j][4 * k + 1] = b;
                t[3][j][4 * k + 3] = b + 1;
            }
            k += 1;
        }
        j += 1;
    }
    t
}

/// The `LANE_CTRL[kind][j]` control as a 128-bit vector.
#[inline(always)]
pub(crate) unsafe fn lane_ctrl128(kind: usize, j: usize) -> __m128i {
    _mm_loadu_si128(LANE_CTRL[kind][j].as_ptr() as *const __m128i)
}
