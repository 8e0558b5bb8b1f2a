//! F16: IEEE-754 half precision, 2 little-endian bytes per element. Dotted with f32 activations.

use super::bytes::{f16_at, f16_to_f32};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per element.
pub(crate) const SIZE: usize = 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct F16;

impl Format for F16 {
    const TYPE: GgmlType = GgmlType::F16;
    const ELEMENTS: usize = 1;
    const BYTES: usize = SIZE;
    const ACTIVATION: GgmlType = GgmlType::F32;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Decodes `dst.len()` f16 values from `src` (`src.len() == 2 * dst.len()`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len() * SIZE);
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(SIZE)) {
        *o = f16_at(b);
    }
}

/// Dot product of an f16 weight row with f32 activations, `n` elements each.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n * SIZE && act.len() == n * 4);
    super::contract::dot_f32_act::<SIZE>(n, w, act, |b| f16_to_f32(u16::from_le_bytes(*b)))
}
