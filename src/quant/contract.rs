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
//!      `lane = fma(quad_sum, d_w·d_a, lane)`, the lanes folded by [`fold16`]; Q4_1/Q5_1 also keep
//!      two offset chains, `off[b mod 2] = fma(m_w, s_a, off[b mod 2])`, added after the fold as
//!      `fold16(lanes) + (off[0] + off[1])`. This is what the SIMD kernels compute natively: a
//!      4-byte dot product (`vpdpbusd`, `maddubs`+`madd`, NEON `sdot`) gives a quad's sum per i32
//!      lane, eight per block; a 512-bit register holds two blocks, an AVX2 tier alternates two
//!      registers, a NEON tier four. (A lane per block would need a horizontal sum per block:
//!      measured 1.2-2.4× slower on SmolLM2 and the 0.5B model.)
//!   3. *Sixteen element lanes* (f32/f16/bf16 rows against f32 vectors, attention scores): element
//!      `j` of every whole group of 16 goes to lane `j mod 16`, `lane = lane + w·a` (product rounded,
//!      then the sum: no FMA, so the scalar tier on a CPU without FMA needs no library call per
//!      element), the lanes folded by [`fold16`], then the remaining `n mod 16` products added one by
//!      one. An 8-lane tier keeps two registers.
//! - **Folds are trees**: [`fold16`] adds lane `l + 8` to lane `l`, then [`fold8`] adds `l + 4`, then
//!   `l + 2`, then lane 1 to lane 0.
//! - Products of two scales (`d_w·d_a`) are rounded f32 multiplications; `fma` is IEEE fused
//!   multiply-add (one rounding): the instruction, or in the baseline x86-64 build of the scalar
//!   tier an exact emulation from f64 arithmetic ([`fma`]).
//!
//! Everything else in the forward pass is scalar code that all tiers share (norms, RoPE, softmax,
//! SiLU, the residual adds) with the engine's own elementary functions (`crate::math`), and the
//! attention weighted sum, whose order (`kernels::WeightedSumFn`) is the plain row-by-row one.

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

/// The sixteen quad lanes and two offset chains of the 32-element formats (shape 2 above).
#[derive(Debug, Default, Clone, Copy)]
pub struct QuadLanes {
    lanes: [f32; ELEMENT_LANES],
    off: [f32; 2],
}

impl QuadLanes {
    /// Adds block `b`'s eight exact quad sums scaled by `scale` (= `d_w · d_a`, already rounded).
    #[inline(always)]
    pub fn add(&mut self, b: usize, quads: [i32; 8], scale: f32) {
        let lanes = &mut self.lanes[8 * (b % 2)..8 * (b % 2) + 8];
        for (l, &q) in lanes.iter_mut().zip(&quads) {
            *l = fma(q as f32, scale, *l);
        }
    }

    /// Adds block `b`'s offset term `m · s` (Q4_1/Q5_1: the weight block's minimum times the
    /// activation block's scaled sum) to its parity's chain.
    #[inline(always)]
    pub fn add_offset(&mut self, b: usize, m: f32, s: f32) {
        let l = &mut self.off[b % 2];
        *l = fma(m, s, *l);
    }

    /// `fold16(lanes) + (off[0] + off[1])`.
    #[inline(always)]
    pub fn finish(self) -> f32 {
        fold16(self.lanes) + (self.off[0] + self.off[1])
    }
}

/// The eight quad sums of a 32-element block: quad `q` is `Σ_{i in 4q..4q+4} w[i] · a[i]` of the
/// weight codes `w` and the activation codes `a` (i8 as bytes), exact (at most 4 · 128 · 128 in
/// magnitude, so also exact as an f32). Plain loops over arrays, which the compiler vectorizes.
#[inline(always)]
pub fn quad_sums<W: Copy + Into<i32>>(w: &[W; 32], a: &[u8; 32]) -> [i32; 8] {
    let mut p = [0i32; 32];
    for ((p, &w), &a) in p.iter_mut().zip(w).zip(a) {
        *p = w.into() * a as i8 as i32;
    }
    let mut q = [0i32; 8];
    for (q, p) in q.iter_mut().zip(p.chunks_exact(4)) {
        *q = p[0] + p[1] + p[2] + p[3];
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
        // One ulp away from zero when the exact value lies beyond s, else towards it.
        let step = if (e > 0.0) == (s > 0.0) { bits.wrapping_add(1) } else { bits.wrapping_sub(1) };
        let odd = if e != 0.0 && bits & 1 == 0 { f64::from_bits(step) } else { s };
        odd as f32
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

    /// Quad lanes: block b's quads land in the lanes of its parity; offsets in two chains.
    #[test]
    fn quad_lanes_accumulate_per_parity() {
        let mut q = QuadLanes::default();
        for b in 0..3 {
            q.add(b, [1, 2, 3, 4, 5, 6, 7, 8], (b + 1) as f32);
        }
        q.add_offset(0, 2.0, 0.5);
        q.add_offset(1, 1.0, 0.25);
        // Even lanes: (1 + 3) * k, odd lanes: 2 * k, for quad k = 1..8.
        let mut lanes = [0.0f32; 16];
        for k in 0..8 {
            lanes[k] = 4.0 * (k + 1) as f32;
            lanes[8 + k] = 2.0 * (k + 1) as f32;
        }
        assert_eq!(q.finish(), fold16(lanes) + (1.0 + 0.25));
        // Weights 0..32 against activations of 1: quad q sums 4q..4q+3.
        let w: [i32; 32] = std::array::from_fn(|i| i as i32);
        assert_eq!(quad_sums(&w, &[1u8; 32]), [6, 22, 38, 54, 70, 86, 102, 118]);
        // i8 activations: 0xFF is -1.
        assert_eq!(quad_sums(&[1i8; 32], &[0xFFu8; 32]), [-4; 8]);
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
