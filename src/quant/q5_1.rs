//! Q5_1: blocks of 32 elements, 24 bytes (ggml `block_q5_1`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..4)   m   f16    offset (block minimum)
//! [4..8)   qh  u32 LE bit j = 5th (high) bit of element j
//! [8..24)  qs  u8×16  low 4 bits: element j (<16) = low nibble of qs[j], element j+16 = high nibble
//! value = d * (5-bit code) + m
//! ```
//! Dotted with Q8_1 activations (offset folded in through the activation block's `s`).

use super::bytes::{f16_at, u32_at};
use super::{q8_1, QK};

/// Bytes per block.
pub(crate) const BLOCK: usize = 2 + 2 + 4 + QK / 2;

/// The two unsigned 5-bit codes (elements j and j+16) of a block, j < 16.
#[inline(always)]
fn codes(qh: u32, q: u8, j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) & 1) << 4;
    let h1 = ((qh >> (j + 16)) & 1) << 4;
    (((q & 0x0F) as u32 | h0) as i32, ((q >> 4) as u32 | h1) as i32)
}

/// Dequantizes whole Q5_1 blocks (`dequantize_row_q5_1`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(&b[0..2]);
        let m = f16_at(&b[2..4]);
        let qh = u32_at(&b[4..8]);
        let qs = &b[8..BLOCK];
        for j in 0..QK / 2 {
            let (x0, x1) = codes(qh, qs[j], j);
            y[j] = x0 as f32 * d + m;
            y[j + QK / 2] = x1 as f32 * d + m;
        }
    }
}

/// Dot product of a Q5_1 row with Q8_1 activations (`ggml_vec_dot_q5_1_q8_1` generic).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * q8_1::BLOCK);
    let mut sumf = 0.0f32;
    for (x, y) in w.chunks_exact(BLOCK).zip(act.chunks_exact(q8_1::BLOCK)) {
        let qh = u32_at(&x[4..8]);
        let qs = &x[8..BLOCK];
        let q8 = &y[4..q8_1::BLOCK];
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let (x0, x1) = codes(qh, qs[j], j);
            sumi += x0 * q8[j] as i8 as i32 + x1 * q8[j + QK / 2] as i8 as i32;
        }
        sumf += (f16_at(&x[0..2]) * f16_at(&y[0..2])) * sumi as f32 + f16_at(&x[2..4]) * f16_at(&y[2..4]);
    }
    sumf
}
