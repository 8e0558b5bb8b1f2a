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
//!   2. *Eight block lanes* (32-element formats): block `i` goes to lane `i mod 8`, each lane
//!      `lane = fma(isum, d_w·d_a, lane)` (Q4_1/Q5_1 then `lane = fma(m_w, s_a, lane)`), the lanes
//!      folded by [`fold8`]. An 8-lane tier keeps one register, a 16-lane tier half of one, a 4-lane
//!      one two; a chain would put a 4-cycle latency on every 32 elements.
//!   3. *Sixteen element lanes* (f32/f16/bf16 rows against f32 vectors, attention scores): element
//!      `j` of every whole group of 16 goes to lane `j mod 16`, `lane = lane + w·a` (product rounded,
//!      then the sum: no FMA, so the scalar tier on a CPU without FMA needs no library call per
//!      element), the lanes folded by [`fold16`], then the remaining `n mod 16` products added one by
//!      one. An 8-lane tier keeps two registers.
//! - **Folds are trees**: [`fold16`] adds lane `l + 8` to lane `l`, then [`fold8`] adds `l + 4`, then
//!   `l + 2`, then lane 1 to lane 0.
//! - Products of two scales (`d_w·d_a`) are rounded f32 multiplications; `fma` is IEEE fused
//!   multiply-add (`f32::mul_add`, one rounding), which every supported CPU has as an instruction
//!   or, in the scalar build on x86-64, through the C library's correctly rounded `fmaf`.
//!
//! Everything else in the forward pass is scalar code that all tiers share (norms, RoPE, softmax,
//! SiLU, the residual adds) with the engine's own elementary functions (`crate::ops::math`), and the
//! attention weighted sum, whose order (`kernels::WeightedSumFn`) is the plain row-by-row one.

/// Lanes of the 32-element block formats' accumulation.
pub const BLOCK_LANES: usize = 8;
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

/// The eight block lanes of the 32-element formats (shape 2 above).
#[derive(Debug, Default, Clone, Copy)]
pub struct BlockLanes([f32; BLOCK_LANES]);

impl BlockLanes {
    /// Adds block `i`'s exact integer sum scaled by `scale` (= `d_w · d_a`, already rounded).
    #[inline(always)]
    pub fn add(&mut self, i: usize, isum: i32, scale: f32) {
        let l = &mut self.0[i % BLOCK_LANES];
        *l = (isum as f32).mul_add(scale, *l);
    }

    /// Adds block `i`'s offset term `m · s` (Q4_1/Q5_1: the weight block's minimum times the
    /// activation block's scaled sum), after its [`BlockLanes::add`].
    #[inline(always)]
    pub fn add_offset(&mut self, i: usize, m: f32, s: f32) {
        let l = &mut self.0[i % BLOCK_LANES];
        *l = m.mul_add(s, *l);
    }

    /// The folded sum.
    #[inline(always)]
    pub fn finish(self) -> f32 {
        fold8(self.0)
    }
}

/// One step of the super-block chain (shape 1): `fma(isum, scale, acc)`.
#[inline(always)]
pub fn chain(acc: f32, isum: i32, scale: f32) -> f32 {
    (isum as f32).mul_add(scale, acc)
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

    /// Block lanes: block i lands in lane i mod 8; the offset term follows the block's own term.
    #[test]
    fn block_lanes_accumulate_per_lane() {
        let mut b = BlockLanes::default();
        for i in 0..10 {
            b.add(i, i as i32, 1.0);
        }
        b.add_offset(9, 2.0, 0.5);
        // Lanes: 0 -> 0+8, 1 -> 1+9+1, others i.
        let want = fold8([8.0, 11.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(b.finish(), want);
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
