//! The 32-element block formats against their 8-bit activations: Q4_0, Q5_0, Q8_0 (signed codes ·
//! Q8_0) and Q4_1, Q5_1 (unsigned codes + offset · Q8_1), in the numeric contract's sixteen quad
//! lanes (`quant::contract::quad_dot`).
//!
//! Shape per block and activation vector: the 32 codes in two 16-byte registers (element order),
//! two integer dots giving the block's eight quad sums in two i32x4 registers (`IntDot::quads`:
//! one `sdot` each, or `smull`+`saddlp`+`addp`), two converts, two `fmul` by `d_w·d_a` and two
//! `fadd` into the lane registers of the block's parity (unfused, as the contract's lanes):
//! lanes 0..8 (registers 0, 1) for even blocks, 8..16 (registers 2, 3) for odd ones. Q4_1/Q5_1 add
//! `m_w · s_a` to the parity's offset chain (a scalar `fmul` and `fadd`). At the end
//! `fold16(lanes) + (off[0] + off[1])`, as the contract's `quad_dot` ends. The activation scales
//! `d_a` (and `s_a`) are read as f32 from after the vector's blocks (`kernels::act_row`).

use std::arch::aarch64::*;

use super::isa::{f16_at, f32_at, load_i8, load_u8, u32_at, IntDot};
use crate::quant::block_bytes;

/// A 32-element weight format.
pub(crate) trait Block32 {
    /// Bytes per block.
    const BYTES: usize;
    /// Whether the format has an offset `m` (Q4_1/Q5_1, dotted with Q8_1) or not (with Q8_0).
    const OFFSET: bool;
    /// The block's 32 codes, elements 0..16 and 16..32 (signed, or unsigned below 128).
    unsafe fn codes(p: *const u8) -> [int8x16_t; 2];
}

/// The 32 nibbles of the 16 bytes at `p`: low nibbles (elements 0..16), high nibbles (16..32).
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> [uint8x16_t; 2] {
    let v = load_u8(p);
    [vandq_u8(v, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(v)]
}

/// `0x10` in byte `j` where bit `j` of the u32 at `p` is set (the 5th code bits of Q5_0/Q5_1),
/// elements 0..16 and 16..32.
#[inline(always)]
unsafe fn fifth_bits(p: *const u8) -> [uint8x16_t; 2] {
    let qh = u32_at(p).to_le_bytes();
    let bit: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    let bit = vld1q_u8(bit.as_ptr());
    let spread = |b0: u8, b1: u8| vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
    let set = |v: uint8x16_t| vandq_u8(vtstq_u8(v, bit), vdupq_n_u8(0x10));
    [set(spread(qh[0], qh[1])), set(spread(qh[2], qh[3]))]
}

/// Q4_0: `d`, 16 bytes of nibbles; code = nibble - 8.
pub(crate) struct Q4_0;
/// Q5_0: `d`, u32 of 5th bits, 16 bytes of nibbles; code = (nibble | bit<<4) - 16.
pub(crate) struct Q5_0;
/// Q8_0: `d`, 32 i8 codes.
pub(crate) struct Q8_0;
/// Q4_1: `d`, `m`, 16 bytes of nibbles; code = nibble.
pub(crate) struct Q4_1;
/// Q5_1: `d`, `m`, u32 of 5th bits, 16 bytes of nibbles; code = nibble | bit<<4.
pub(crate) struct Q5_1;

impl Block32 for Q4_0 {
    const BYTES: usize = block_bytes::Q4_0;
    const OFFSET: bool = false;
    #[inline(always)]
    unsafe fn codes(p: *const u8) -> [int8x16_t; 2] {
        // 8: the 4-bit midpoint.
        nibbles(p.add(2)).map(|v| vreinterpretq_s8_u8(vsubq_u8(v, vdupq_n_u8(8))))
    }
}

impl Block32 for Q5_0 {
    const BYTES: usize = block_bytes::Q5_0;
    const OFFSET: bool = false;
    #[inline(always)]
    unsafe fn codes(p: *const u8) -> [int8x16_t; 2] {
        let (n, h) = (nibbles(p.add(6)), fifth_bits(p.add(2)));
        // 16: the 5-bit midpoint.
        [0, 1].map(|i| vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(n[i], h[i]), vdupq_n_u8(16))))
    }
}

impl Block32 for Q8_0 {
    const BYTES: usize = block_bytes::Q8_0;
    const OFFSET: bool = false;
    #[inline(always)]
    unsafe fn codes(p: *const u8) -> [int8x16_t; 2] {
        [load_i8(p.add(2)), load_i8(p.add(18))]
    }
}

impl Block32 for Q4_1 {
    const BYTES: usize = block_bytes::Q4_1;
    const OFFSET: bool = true;
    #[inline(always)]
    unsafe fn codes(p: *const u8) -> [int8x16_t; 2] {
        nibbles(p.add(4)).map(|v| vreinterpretq_s8_u8(v))
    }
}

impl Block32 for Q5_1 {
    const BYTES: usize = block_bytes::Q5_1;
    const OFFSET: bool = true;
    #[inline(always)]
    unsafe fn codes(p: *const u8) -> [int8x16_t; 2] {
        let (n, h) = (nibbles(p.add(8)), fifth_bits(p.add(4)));
        [0, 1].map(|i| vreinterpretq_s8_u8(vorrq_u8(n[i], h[i])))
    }
}

/// One block's terms for `B` vectors: the quad sums into `lanes[k]` (the two registers of the
/// block's parity) and, for offset formats, `m_w · s_a` into `off[k]`.
///
/// Safety: a `T` block at `x`, an activation block at every `y + k*stride` and its f32 scale (and
/// sum) at every `s + k*stride`.
#[inline(always)]
unsafe fn block<T: Block32, D: IntDot, const B: usize>(
    x: *const u8,
    y: *const u8,
    s: *const u8,
    stride: usize,
    lanes: &mut [[float32x4_t; 2]; B],
    off: &mut [f32; B],
) {
    // Activation codes after the f16 scale (and Q8_1's f16 scaled sum).
    let qs = if T::OFFSET { 4 } else { 2 };
    let c = T::codes(x);
    let dw = f16_at(x);
    for k in 0..B {
        let (y, sa) = (y.add(k * stride), s.add(k * stride));
        let zero = vdupq_n_s32(0);
        let q0 = D::quads(zero, c[0], load_i8(y.add(qs))); // quads 0..4
        let q1 = D::quads(zero, c[1], load_i8(y.add(qs + 16))); // quads 4..8
        let scale = vdupq_n_f32(dw * f32_at(sa));
        lanes[k][0] = vaddq_f32(lanes[k][0], vmulq_f32(vcvtq_f32_s32(q0), scale));
        lanes[k][1] = vaddq_f32(lanes[k][1], vmulq_f32(vcvtq_f32_s32(q1), scale));
        if T::OFFSET {
            off[k] += f16_at(x.add(2)) * f32_at(sa.add(4));
        }
    }
}

/// `out[k]` = the contract's quad-lane dot of the `nb`-block `T` row at `w` with the activation
/// vector at `a + k*stride` (Q8_0 blocks, or Q8_1 for offset formats), `k < B`.
///
/// Safety: `w` holds `nb` blocks, each vector an activation row of `nb` blocks (`kernels::act_row`:
/// the blocks, then their f32 scales), `out` B floats; the CPU has
/// the features of `D`.
#[inline(always)]
pub(crate) unsafe fn dot<T: Block32, D: IntDot, const B: usize>(
    nb: usize,
    w: *const u8,
    a: *const u8,
    stride: usize,
    out: *mut f32,
) {
    let ab = if T::OFFSET { block_bytes::Q8_1 } else { block_bytes::Q8_0 };
    // f32 values per block after the blocks (`kernels::act_row`): d, or d and s.
    let sb = if T::OFFSET { 8 } else { 4 };
    let scales = a.add(nb * ab);
    let zero = vdupq_n_f32(0.0);
    let (mut even, mut odd) = ([[zero; 2]; B], [[zero; 2]; B]);
    let (mut off_e, mut off_o) = ([0.0f32; B], [0.0f32; B]);
    for i in (0..nb / 2 * 2).step_by(2) {
        let (x, y, s) = (w.add(i * T::BYTES), a.add(i * ab), scales.add(i * sb));
        block::<T, D, B>(x, y, s, stride, &mut even, &mut off_e);
        let (x, y, s) = (x.add(T::BYTES), y.add(ab), s.add(sb));
        block::<T, D, B>(x, y, s, stride, &mut odd, &mut off_o);
    }
    if nb % 2 == 1 {
        let i = nb - 1;
        let (x, y, s) = (w.add(i * T::BYTES), a.add(i * ab), scales.add(i * sb));
        block::<T, D, B>(x, y, s, stride, &mut even, &mut off_e);
    }
    for k in 0..B {
        let lanes = super::isa::fold16([even[k][0], even[k][1], odd[k][0], odd[k][1]]);
        *out.add(k) = lanes + (off_e[k] + off_o[k]);
    }
}
