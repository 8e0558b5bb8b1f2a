//! F32: plain little-endian IEEE-754 singles, 4 bytes per element. Also the activation format of F32/F16/BF16.

use super::bytes::f32_at;
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per element.
pub(crate) const SIZE: usize = 4;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct F32;

impl Format for F32 {
    const TYPE: GgmlType = GgmlType::F32;
    const ELEMENTS: usize = 1;
    const BYTES: usize = SIZE;
    const ACTIVATION: GgmlType = GgmlType::F32;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = Some(quantize);
}

/// Decodes `dst.len()` little-endian f32 values from `src` (`src.len() == 4 * dst.len()`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len() * SIZE);
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(SIZE)) {
        *o = f32_at(b);
    }
}

/// Encodes `x` as little-endian f32 bytes into `dst` (`dst.len() == 4 * x.len()`).
pub(crate) fn quantize(x: &[f32], dst: &mut [u8]) {
    debug_assert_eq!(dst.len(), x.len() * SIZE);
    for (b, v) in dst.chunks_exact_mut(SIZE).zip(x) {
        b.copy_from_slice(&v.to_le_bytes());
    }
}

/// Dot product of an f32 weight row with f32 activations, `n` elements each.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n * SIZE && act.len() == n * SIZE);
    super::contract::dot_f32_act::<SIZE>(n, w, act, |b| f32::from_le_bytes(*b))
}
