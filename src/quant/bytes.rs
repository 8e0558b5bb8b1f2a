//! Little-endian field readers/writers shared by the block formats.

use half::{bf16, f16};

/// Reads the f16 stored little-endian at `b[0..2]` as f32.
#[inline(always)]
pub(crate) fn f16_at(b: &[u8]) -> f32 {
    f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// Writes `v` rounded to f16 (round-to-nearest-even, as `GGML_FP32_TO_FP16`) into `b[0..2]`.
#[inline(always)]
pub(crate) fn put_f16(b: &mut [u8], v: f32) {
    b[..2].copy_from_slice(&f16::from_f32(v).to_le_bytes());
}

/// Reads the bf16 stored little-endian at `b[0..2]` as f32.
#[inline(always)]
pub(crate) fn bf16_at(b: &[u8]) -> f32 {
    bf16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// Reads the f32 stored little-endian at `b[0..4]`.
#[inline(always)]
pub(crate) fn f32_at(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads the u32 stored little-endian at `b[0..4]`.
#[inline(always)]
pub(crate) fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads the i16 stored little-endian at `b[0..2]`.
#[inline(always)]
pub(crate) fn i16_at(b: &[u8]) -> i16 {
    i16::from_le_bytes([b[0], b[1]])
}

/// Dot product of two f32 slices with 8 independent accumulators (lets the compiler vectorize).
#[inline(always)]
pub(crate) fn dot_f32_lanes(n: usize, mut w_at: impl FnMut(usize) -> f32, mut x_at: impl FnMut(usize) -> f32) -> f32 {
    // 8 lanes: one AVX2 register of f32; the final reduction order differs from a serial sum only by rounding.
    let mut acc = [0.0f32; 8];
    let full = n / 8 * 8;
    let mut i = 0;
    while i < full {
        for l in 0..8 {
            acc[l] += w_at(i + l) * x_at(i + l);
        }
        i += 8;
    }
    let mut tail = 0.0f32;
    for k in full..n {
        tail += w_at(k) * x_at(k);
    }
    acc.iter().sum::<f32>() + tail
}
