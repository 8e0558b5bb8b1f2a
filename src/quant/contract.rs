//! The numeric contract: the one order of floating-point operations every dot product follows, on
//! every kernel tier and every CPU. The scalar code of `crate::quant` is its specification; each SIMD
//! tier (`crate::kernels`) reproduces it bit for bit, which `tests/kernels_parity.rs` and
//! `tests/tiers.rs` check. So an answer does not depend on the machine it was computed on.
//!
//! What is free and what is fixed:
//! - **Integer work is free.** Every quantized dot product first forms, per weight block, exact
//!   integer sums (i32, no overflow for any block format); how a tier groups the products (4-byte
//!   `vpdpbusd`, `maddubs` pairs, 8-byte `smmla`) cannot change them.
//! - **Float work is fixed**, by three shapes:
//!   1. *A chain over super-blocks* (K-quants, 256 elements a block): `acc = fma(isum, d_w·d_a, acc)`
//!      block after block (Q4_K/Q5_K/Q2_K add `fma(msum, -(dmin_w·d_a), acc)` after it). A chain
//!      costs one fused multiply-add per 256 elements: nothing to gain from lanes.
//!   2. *Sixteen quad lanes* (32-element formats): the exact integer sum of each quad (four
//!      consecutive elements) `q` of block `b` goes to lane `8·(b mod 2) + q`,
//!      `lane = lane + quad_sum·(d_w·d_a)` (the product rounded, then the sum: no FMA, so that the
//!      scalar tier on an x86 CPU without FMA runs it at full speed: an exact fused multiply-add
//!      from f64 arithmetic cost it 2-3× of its speed, see `docs/numerics.md`), the lanes folded by
//!      [`fold16`]; Q4_1/Q5_1 also keep two offset chains, `off[b mod 2] = off[b mod 2] + m_w·s_a`,
//!      added after the fold as `fold16(lanes) + (off[0] + off[1])`. This is what the SIMD
//!      kernels compute natively: a 4-byte dot product (`vpdpbusd`, `maddubs`+`madd`, NEON
//!      `sdot`) gives a quad's sum per i32 lane, eight per block; a 512-bit register holds two
//!      blocks, an AVX2 tier alternates two registers, a NEON tier four. (A lane per block would need a horizontal sum per block:
//!      measured 1.2-2.4× slower on SmolLM2 and the 0.5B model.)
//!   3. *Sixteen element lanes* (f32/f16/bf16 rows against f32 vectors, attention scores): element
//!      `j` of every whole group of 16 goes to lane `j mod 16`, `lane = lane + w·a` (product rounded,
//!      then the sum: no FMA, so the scalar tier on a CPU without FMA needs no library call per
//!      element), the lanes folded by [`fold16`], then the remaining `n mod 16` products added one by
//!      one. An 8-lane tier keeps two registers.
//! - **Folds are trees**: [`fold16`] adds lane `l + 8` to lane `l`, then [`fold8`] adds `l + 4`, then
//!   `l + 2`, then lane 1 to lane 0.
//! - Products of two scales (`d_w·d_a`) are rounded f32 multiplications; `fma` (shape 1 only, one
//!   per 256 elements) is IEEE fused multiply-add (one rounding): the instruction, or in the
//!   baseline x86-64 build of the scalar tier an exact emulation from f64 arithmetic ([`fma`]).
//!
//! Everything else in the forward pass is scalar code that all tiers share (norms, RoPE, softmax,
//! SiLU, the residual adds) with the engine's own elementary functions (`crate::kernels::math`),
//! and the attention weighted sum, whose order (`kernels::WeightedSumFn`) is the plain row-by-row
//! one.

/// Lanes of the float dot products.
pub const ELEMENT_LANES: usize = 16;

/// The contract's sum of eight lanes: `((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))`, i.e. lanes
/// `l + 4` onto `l`, then `l + 2` onto `l`, then lane 1 onto lane 0.
#[inline(always)]
pub fn fold8(l: [f32; 8]) -> f32 {
    let x = [l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7]];
    let y = [x[0] + x[2], x[1] + x[3]];
    y[0] + y[1]
}

/// The contract's sum of sixteen lanes: lanes `l + 8` onto `l`, then [`fold8`].
#[inline(always)]
pub fn fold16(l: [f32; 16]) -> f32 {
    fold8(std::array::from_fn(|i| l[i] + l[i + 8]))
}

/// Where a piece of code gets its f16 → f32 conversion (of the 32-element formats' two to four
/// scales per block) from. Both routes give the same bits (the conversion is exact); they differ
/// only in speed, and in where they may be used.
pub trait Arith: Default + Copy + std::fmt::Debug {
    /// The f16 stored little-endian at `b[0..2]`, as f32 (exact).
    fn f16_at(b: &[u8]) -> f32;
}

/// The f16 conversion by table lookup (`bytes::F16_TABLE`, the same bits as `bytes::f16_at`).
/// Usable anywhere.
#[derive(Debug, Default, Clone, Copy)]
pub struct Portable;

impl Arith for Portable {
    #[inline(always)]
    fn f16_at(b: &[u8]) -> f32 {
        super::bytes::f16_at_table(b)
    }
}

/// F16C's `vcvtph2ps` (x86-64). Only for code inlined into a function compiled with
/// `#[target_feature(enable = "f16c")]` and reached only on a CPU with F16C (the scalar tier's
/// table `kernels::scalar::SET_F16C`): elsewhere the instruction may be missing. Hence
/// crate-private.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Instruction;

#[cfg(target_arch = "x86_64")]
impl Arith for Instruction {
    #[inline(always)]
    fn f16_at(b: &[u8]) -> f32 {
        use std::arch::x86_64::{_mm_cvtph_ps, _mm_cvtsi32_si128, _mm_cvtss_f32};
        let h = u16::from_le_bytes([b[0], b[1]]);
        // SAFETY: `Instruction` is used only inside functions compiled with F16C that are
        // reached only on a CPU with it (`kernels::scalar::for_cpu`); the operands are
        // registers.
        unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32))) }
    }
}

/// One 32-element weight block's terms in a dot product of shape 2: its eight exact quad sums
/// against the activation block's codes, its scale `d_w`, and for Q4_1/Q5_1 its offset `m_w`
/// (0 otherwise). The activation block's scale `d_a` and sum `s_a` come separately
/// ([`quad_dot`]'s `act`), so that a caller may read them from wherever it keeps them.
#[derive(Debug, Clone, Copy)]
pub struct BlockTerms {
    pub quads: [i32; 8],
    pub d: f32,
    pub m: f32,
}

/// One parity's eight quad lanes and offset chain.
#[derive(Debug, Default, Clone, Copy)]
struct Parity {
    lanes: Lanes8,
    off: f32,
}

impl Parity {
    /// Adds one block's terms, the activation block's `(d_a, s_a)` being `act`: the scale
    /// `d_w·d_a` rounded, then each `quad·scale` rounded and added; with `offsets` also
    /// `off = off + m_w·s_a`.
    #[inline(always)]
    fn add(&mut self, offsets: bool, t: BlockTerms, (d_a, s_a): (f32, f32)) {
        self.lanes.add(&t.quads, t.d * d_a);
        if offsets {
            self.off += t.m * s_a;
        }
    }
}

/// Eight f32 lanes, `lane = lane + quad·scale` (the product rounded, then the sum).
#[cfg(not(target_arch = "x86_64"))]
#[derive(Debug, Default, Clone, Copy)]
struct Lanes8([f32; 8]);

#[cfg(not(target_arch = "x86_64"))]
impl Lanes8 {
    /// `lane[l] = lane[l] + quads[l]·scale`.
    #[inline(always)]
    fn add(&mut self, quads: &[i32; 8], scale: f32) {
        for (l, &q) in self.0.iter_mut().zip(quads) {
            *l += q as f32 * scale;
        }
    }
    /// The lanes.
    #[inline(always)]
    fn get(self) -> [f32; 8] {
        self.0
    }
}

/// Eight f32 lanes in two SSE2 registers (every x86-64 CPU): the same operations as the plain
/// loop, whose vectorization the compiler mixed with the scalar products around it (`d_w·d_a`
/// and `m_w·s_a` packed into one register and shuffled back out, one accumulator stored and
/// reloaded every block): with it the portable scalar table's prefill of SmolLM2 took 1.8× as
/// long as with these registers.
#[cfg(target_arch = "x86_64")]
#[derive(Debug, Clone, Copy)]
struct Lanes8([std::arch::x86_64::__m128; 2]);

#[cfg(target_arch = "x86_64")]
impl Default for Lanes8 {
    fn default() -> Self {
        // SAFETY: SSE2 is in the x86-64 baseline.
        Self(unsafe { [std::arch::x86_64::_mm_setzero_ps(); 2] })
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes8 {
    /// `lane[l] = lane[l] + quads[l]·scale` (`cvtdq2ps` is exact here: a quad sum is at most
    /// 2^16 in magnitude).
    #[inline(always)]
    fn add(&mut self, quads: &[i32; 8], scale: f32) {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is in the x86-64 baseline; the loads are within `quads` (2 × 4 i32).
        unsafe {
            let s = _mm_set1_ps(scale);
            for (h, l) in self.0.iter_mut().enumerate() {
                let q = _mm_loadu_si128(quads.as_ptr().add(4 * h) as *const __m128i);
                *l = _mm_add_ps(*l, _mm_mul_ps(_mm_cvtepi32_ps(q), s));
            }
        }
    }
    /// The lanes.
    #[inline(always)]
    fn get(self) -> [f32; 8] {
        let mut out = [0.0f32; 8];
        // SAFETY: SSE2; the stores are within `out` (2 × 4 f32).
        unsafe {
            std::arch::x86_64::_mm_storeu_ps(out.as_mut_ptr(), self.0[0]);
            std::arch::x86_64::_mm_storeu_ps(out.as_mut_ptr().add(4), self.0[1]);
        }
        out
    }
}

/// A 32-element weight format as the dot product of shape 2 sees it (`quad_dot`).
pub trait QuadBlock {
    /// A weight block's bytes.
    type W;
    /// An activation block's bytes.
    type A;
    /// Whether the format has the offset term (Q4_1/Q5_1).
    const OFFSETS: bool;
    /// One block pair's terms, the weight block's f16 fields converted by `F` (implementations
    /// are `#[inline(always)]`, so that the code compiles with the target features of the
    /// function it ends up in).
    fn terms<F: Arith>(w: &Self::W, a: &Self::A) -> BlockTerms;
}

/// The dot product of shape 2 of the weight blocks `w` with the activation blocks `a` (as many),
/// block `i`'s terms given by `B::terms::<F>(&w[i], &a[i])` (`F`: where the weight block's f16
/// fields are converted) and its activation scale and sum `(d_a, s_a)` by `act(i)` (`s_a` is read
/// only with `OFFSETS`; the values are the activation block's own f16 fields, however a caller
/// keeps them): the sixteen quad lanes (block `b`'s quad `q` into lane `8·(b mod 2) + q`,
/// `lane = lane + quad·(d_w·d_a)`), folded by [`fold16`]; with `OFFSETS` (Q4_1/Q5_1) also the
/// two chains `off[b mod 2] = off[b mod 2] + m_w·s_a`, and the result is
/// `fold16(lanes) + (off[0] + off[1])`. Blocks are taken in pairs, so each parity's lanes have a
/// fixed place (registers, not an indexed array).
#[inline(always)]
pub fn quad_dot<F: Arith, B: QuadBlock>(
    w: &[B::W],
    a: &[B::A],
    act: impl Fn(usize) -> (f32, f32),
) -> f32 {
    debug_assert_eq!(w.len(), a.len());
    let (mut even, mut odd) = (Parity::default(), Parity::default());
    let (wp, ap) = (w.chunks_exact(2), a.chunks_exact(2));
    let (w_last, a_last) = (wp.remainder(), ap.remainder());
    for (i, (x, y)) in wp.zip(ap).enumerate() {
        even.add(B::OFFSETS, B::terms::<F>(&x[0], &y[0]), act(2 * i));
        odd.add(B::OFFSETS, B::terms::<F>(&x[1], &y[1]), act(2 * i + 1));
    }
    if let (Some(x), Some(y)) = (w_last.first(), a_last.first()) {
        even.add(B::OFFSETS, B::terms::<F>(x, y), act(w.len() - 1));
    }
    let (e, o) = (even.lanes.get(), odd.lanes.get());
    let folded = fold16(std::array::from_fn(|l| if l < 8 { e[l] } else { o[l - 8] }));
    if B::OFFSETS {
        folded + (even.off + odd.off)
    } else {
        folded
    }
}

/// The eight quad sums of a 32-element block: quad `q` is `Σ_{i in 4q..4q+4} w[i] · a[i]` of the
/// weight codes `w` and the activation codes `a` (i8 as bytes), exact (at most 4 · 128 · 128 in
/// magnitude, so also exact as an f32). Plain loops over arrays, which the compiler vectorizes.
#[inline(always)]
pub fn quad_sums<W: Copy + Into<i32>>(w: &[W; 32], a: &[u8; 32]) -> [i32; 8] {
    let w16: [i16; 32] = std::array::from_fn(|i| w[i].into() as i16);
    let a16: [i16; 32] = std::array::from_fn(|i| a[i] as i8 as i16);
    pair_quads(&w16, &a16)
}

/// The eight quad sums of two blocks of 8-bit codes widened to i16.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn pair_quads(w: &[i16; 32], a: &[i16; 32]) -> [i32; 8] {
    let p: [i32; 32] = std::array::from_fn(|i| w[i] as i32 * a[i] as i32);
    std::array::from_fn(|q| (p[4 * q] + p[4 * q + 1]) + (p[4 * q + 2] + p[4 * q + 3]))
}

/// The eight quad sums of two blocks of 8-bit codes widened to i16, with SSE2's `pmaddwd` (part of
/// every x86-64 CPU): the compiler turned the plain loop into i32 multiplies and shuffles, 2-3×
/// slower in the scalar tier. Integer sums: any grouping gives the same result.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn pair_quads(w: &[i16; 32], a: &[i16; 32]) -> [i32; 8] {
    use std::arch::x86_64::*;
    let mut q = [0i32; 8];
    // SAFETY: SSE2 is in the x86-64 baseline; every load and store is within the arrays
    // (4 × 8 i16 in, 2 × 4 i32 out), unaligned.
    unsafe {
        let ld = |v: &[i16; 32], k: usize| _mm_loadu_si128(v.as_ptr().add(8 * k) as *const __m128i);
        for h in 0..2 {
            // Pair sums: lane j of `p0` is elements 2j, 2j+1 of the first 8, and so on.
            let p0 = _mm_castsi128_ps(_mm_madd_epi16(ld(w, 2 * h), ld(a, 2 * h)));
            let p1 = _mm_castsi128_ps(_mm_madd_epi16(ld(w, 2 * h + 1), ld(a, 2 * h + 1)));
            // Even pairs plus odd pairs: the four quads of these 16 elements.
            let even = _mm_castps_si128(_mm_shuffle_ps::<0b10_00_10_00>(p0, p1));
            let odd = _mm_castps_si128(_mm_shuffle_ps::<0b11_01_11_01>(p0, p1));
            _mm_storeu_si128(q.as_mut_ptr().add(4 * h) as *mut __m128i, _mm_add_epi32(even, odd));
        }
    }
    q
}

/// One step of the super-block chain (shape 1): `fma(isum, scale, acc)`.
#[inline(always)]
pub fn chain(acc: f32, isum: i32, scale: f32) -> f32 {
    fma(isum as f32, scale, acc)
}

/// `fma(a, b, c)`: `a · b + c` rounded once, bitwise the fused instruction.
///
/// Used by the K-quants' chain (shape 1), one per 256 elements.
///
/// A build for baseline x86-64 (the scalar tier of the shipped library) has no FMA instruction
/// to inline: `f32::mul_add` becomes a call into the runtime's `fmaf` per operation (an indirect
/// call to the instruction on a CPU that has it, a slow software routine on one that has not).
/// There the result is computed from f64 arithmetic instead, inline and vectorizable: the product
/// of two f32 is exact in f64 (24 + 24 bits ≤ 53), the sum's rounding error is recovered exactly
/// (TwoSum, Knuth), the sum is rounded to odd (an inexact f64 with an even last bit steps one ulp
/// towards the exact value), and rounding an f64 rounded to odd to f32 (53 ≥ 24 + 2 bits) gives
/// the correctly rounded result (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums:
/// proved algorithms using rounding to odd", IEEE TC 2008). `tests/kernels_parity.rs` compares it
/// with `f32::mul_add` on random and kernel-shaped operands. Elsewhere `mul_add` is the
/// instruction.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(all(target_arch = "x86_64", not(target_feature = "fma")))]
    {
        let p = a as f64 * b as f64; // exact
        let s = p + c as f64;
        let bv = s - p;
        let e = (p - (s - bv)) + (c as f64 - bv); // s + e = p + c exactly
        let bits = s.to_bits();
        // Branch-free, in operations SSE2 has for two f64 lanes (no 64-bit integer compare), so
        // that a block's eight quad lanes vectorize (3-13 % faster on the 32-element formats
        // than selects on `bits & 1 == 0`): `inc` is 1 when s is inexact and its last bit even
        // (a NaN `e`, from an infinite operand, counts as exact: s is then that infinity); the
        // step is one ulp away from zero when the exact value lies beyond s (e has s's sign),
        // else one ulp towards zero.
        let inc = ((e.abs() > 0.0) as u64) & !bits & 1;
        let towards_zero = ((bits ^ e.to_bits()) >> 63).wrapping_neg(); // all ones, or zero
        let step = (inc ^ towards_zero).wrapping_sub(towards_zero); // +inc or -inc
        f64::from_bits(bits.wrapping_add(step)) as f32
    }
    #[cfg(not(all(target_arch = "x86_64", not(target_feature = "fma"))))]
    {
        a.mul_add(b, c)
    }
}

/// The float dot product of shape 3: `n` weights decoded by `w(j)` against `n` values `a(j)`.
#[inline(always)]
pub fn dot16(n: usize, w: impl Fn(usize) -> f32, a: impl Fn(usize) -> f32) -> f32 {
    let full = n / ELEMENT_LANES * ELEMENT_LANES;
    let mut acc = [0.0f32; ELEMENT_LANES];
    for j0 in (0..full).step_by(ELEMENT_LANES) {
        for (l, acc) in acc.iter_mut().enumerate() {
            *acc += w(j0 + l) * a(j0 + l);
        }
    }
    let mut s = fold16(acc);
    for j in full..n {
        s += w(j) * a(j);
    }
    s
}

/// Dot product of `n` weights (each `S` bytes, decoded by `conv`) with `n` little-endian f32
/// activations in the contract's sixteen element lanes ([`dot16`]); lengths beyond `n` are
/// ignored.
#[inline(always)]
pub(crate) fn dot_f32_act<const S: usize>(
    n: usize,
    w: &[u8],
    act: &[u8],
    conv: impl Fn(&[u8; S]) -> f32,
) -> f32 {
    let n = n.min(w.len() / S).min(act.len() / 4);
    let (w, _) = w[..n * S].as_chunks::<S>();
    let (a, _) = act[..n * 4].as_chunks::<4>();
    dot16(n, |j| conv(&w[j]), |j| f32::from_le_bytes(a[j]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The folds are the documented trees (checked with values whose sums round differently in
    /// other orders: a serial sum of these loses the small terms).
    #[test]
    fn folds_follow_the_documented_tree() {
        let big = 1.0e8f32;
        let l: [f32; 8] = [big, 3.0, 1.0, 1.0, -big, 1.0, 1.0, 1.0];
        // (big + -big) + (1 + 1) = 2, (3 + 1) + (1 + 1) = 6: 8 exactly.
        assert_eq!(fold8(l), 8.0);
        let serial: f32 = l.iter().sum();
        assert_ne!(serial, 8.0, "the example must distinguish the orders");
        let mut l16 = [0.0f32; 16];
        l16[0] = big;
        l16[8] = -big;
        l16[1] = 1.0;
        l16[9] = 2.0;
        assert_eq!(fold16(l16), 3.0);
    }

    /// A test format: the "weight block" is its scale and offset, quads fixed.
    struct Test<const OFFSETS: bool>;
    impl<const O: bool> QuadBlock for Test<O> {
        type W = (f32, f32);
        type A = ();
        const OFFSETS: bool = O;
        fn terms<F: Arith>(&(d, m): &Self::W, _: &()) -> BlockTerms {
            BlockTerms { quads: [1, 2, 3, 4, 5, 6, 7, 8], d, m }
        }
    }

    /// Quad lanes: block b's quads land in the lanes of its parity; offsets in two chains.
    #[test]
    fn quad_lanes_accumulate_per_parity() {
        // Weight (d, m), activations (d, s): block scales 1, 2, 3; offset terms 2·0.5, 1·0.25, 0.
        let blocks = [(0.5, 2.0), (4.0, 1.0), (3.0, 0.0)];
        let act = |i: usize| [(2.0, 0.5), (0.5, 0.25), (1.0, 8.0)][i];
        // Even lanes: (1 + 3) * k, odd lanes: 2 * k, for quad k = 1..8.
        let mut lanes = [0.0f32; 16];
        for k in 0..8 {
            lanes[k] = 4.0 * (k + 1) as f32;
            lanes[8 + k] = 2.0 * (k + 1) as f32;
        }
        let want = fold16(lanes) + (1.0 + 0.25);
        assert_eq!(quad_dot::<Portable, Test<true>>(&blocks, &[(); 3], act), want);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(quad_dot::<Instruction, Test<true>>(&blocks, &[(); 3], act), want);
        assert_eq!(quad_dot::<Portable, Test<false>>(&blocks, &[(); 3], act), fold16(lanes));
        // Weights 0..32 against activations of 1: quad q sums 4q..4q+3.
        let w: [i32; 32] = std::array::from_fn(|i| i as i32);
        assert_eq!(quad_sums(&w, &[1u8; 32]), [6, 22, 38, 54, 70, 86, 102, 118]);
        // i8 activations: 0xFF is -1.
        assert_eq!(quad_sums(&[1i8; 32], &[0xFFu8; 32]), [-4; 8]);
    }

    /// A test format whose one nonzero quad is 5, scale from the "weight block".
    struct Five;
    impl QuadBlock for Five {
        type W = f32;
        type A = ();
        const OFFSETS: bool = false;
        fn terms<F: Arith>(&d: &f32, _: &()) -> BlockTerms {
            BlockTerms { quads: [5, 0, 0, 0, 0, 0, 0, 0], d, m: 0.0 }
        }
    }

    /// Quad lanes are unfused: each `quad · scale` is rounded before it is added.
    #[test]
    fn quad_lanes_round_each_product() {
        let a = 1.0f32 + f32::EPSILON;
        // Blocks 0 and 2 share lane 0: 5·1, then + 5·a. 5·a = 5 + 5ε rounds to 5 + 4ε, and
        // 5 + (5 + 4ε) = 10 + 4ε is half an ulp of 10 above it: 10 (ties to even). Fused,
        // 10 + 5ε would round up to 10 + 8ε.
        let got = quad_dot::<Portable, Five>(&[1.0, 0.0, a], &[(); 3], |_| (1.0, 0.0));
        assert_eq!(got, 10.0);
        assert_eq!(5.0f32.mul_add(a, 5.0), 10.0 + 8.0 * f32::EPSILON, "fused differs");
    }

    /// F16C's conversion is the portable one on every f16 (NaNs: both NaN; F16C quiets a
    /// signalling NaN, which the contract leaves free, as IEEE arithmetic does).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn instruction_f16_is_the_portable_conversion() {
        if !std::arch::is_x86_feature_detected!("f16c") {
            return;
        }
        for h in 0..=u16::MAX {
            let b = h.to_le_bytes();
            let (want, got) = (Portable::f16_at(&b), Instruction::f16_at(&b));
            if want.is_nan() {
                assert!(got.is_nan(), "{h:#06x}");
            } else {
                assert_eq!(got.to_bits(), want.to_bits(), "{h:#06x}");
            }
        }
    }

    /// `dot16` is unfused: each product is rounded before it is added.
    #[test]
    fn dot16_rounds_products_and_adds_the_tail_last() {
        let a = 1.0f32 + f32::EPSILON;
        // a*a = 1 + 2eps + eps², which rounds to 1 + 2eps; fused it would not round.
        let got = dot16(1, |_| a, |_| a);
        assert_eq!(got, 1.0 + 2.0 * f32::EPSILON);
        let n = 35;
        let w = |j: usize| (j as f32 * 0.37).sin();
        let x = |j: usize| (j as f32 * 0.11).cos();
        let mut acc = [0.0f32; 16];
        for j in 0..32 {
            acc[j % 16] += w(j) * x(j);
        }
        let mut want = fold16(acc);
        for j in 32..35 {
            want += w(j) * x(j);
        }
        assert_eq!(dot16(n, w, x).to_bits(), want.to_bits());
    }
}
