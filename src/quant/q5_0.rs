//! Q5_0: blocks of 32 elements, 22 bytes (ggml `block_q5_0`):
//! ```text
//! [0..2)   d   f16    scale
//! [2..6)   qh  u32 LE bit j = 5th (high) bit of element j
//! [6..22)  qs  u8×16  low 4 bits: element j (<16) = low nibble of qs[j], element j+16 = high nibble
//! value = d * (5-bit code - 16)
//! ```
//! Dotted with Q8_0 activations.

use super::bytes::{f16_at, u32_at};
use super::{q8_0, QK};

/// Bytes per block.
pub(crate) const BLOCK: usize = 2 + 4 + QK / 2;

/// The two signed 5-bit codes (elements j and j+16) of a block, j < 16.
#[inline(always)]
fn codes(qh: u32, q: u8, j: usize) -> (i32, i32) {
    let h0 = ((qh >> j) & 1) << 4;
    let h1 = ((qh >> (j + 16)) & 1) << 4;
    // 16: midpoint of the 5-bit range, making the code signed (-16..=15).
    (((q & 0x0F) as u32 | h0) as i32 - 16, ((q >> 4) as u32 | h1) as i32 - 16)
}

/// Dequantizes whole Q5_0 blocks (`dequantize_row_q5_0`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK).zip(dst.chunks_exact_mut(QK)) {
        let d = f16_at(b);
        let qh = u32_at(&b[2..6]);
        let qs = &b[6..BLOCK];
        for j in 0..QK / 2 {
            let (x0, x1) = codes(qh, qs[j], j);
            y[j] = x0 as f32 * d;
            y[j + QK / 2] = x1 as f32 * d;
        }
    }
}

/// Dot product of a Q5_0 row with Q8_0 activations (`ggml_vec_dot_q5_0_q8_0` generic).
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK * BLOCK && act.len() == n / QK * q8_0::BLOCK);
    let mut sumf = 0.0f32;
    for (x, y) in w.chunks_exact(BLOCK).zip(act.chunks_exact(q8_0::BLOCK)) {
        let qh = u32_at(&x[2..6]);
        let qs = &x[6..BLOCK];
        let q8 = &y[2..q8_0::BLOCK];
        let mut sumi = 0i32;
        for j in 0..QK / 2 {
            let (x0, x1) = codes(qh, qs[j], j);
            sumi += x0 * q8[j] as i8 as i32 + x1 * q8[j + QK / 2] as i8 as i32;
        }
        sumf += (f16_at(x) * f16_at(y)) * sumi as f32;
    }
    sumf
}
