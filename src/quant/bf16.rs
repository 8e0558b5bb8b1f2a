//! BF16: the top 16 bits of an f32 (1 sign, 8 exponent, 7 mantissa), 2 little-endian bytes per element.
//! Dotted with f32 activations.

use super::bytes::bf16_at;
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per element.
pub(crate) const SIZE: usize = 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct BF16;

impl Format for BF16 {
    const TYPE: GgmlType = GgmlType::BF16;
    const ELEMENTS: usize = 1;
    const BYTES: usize = SIZE;
    const ACTIVATION: GgmlType = GgmlType::F32;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Decodes `dst.len()` bf16 values from `src` (`src.len() == 2 * dst.len()`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    debug_assert_eq!(src.len(), dst.len() * SIZE);
    for (o, b) in dst.iter_mut().zip(src.chunks_exact(SIZE)) {
        *o = bf16_at(b);
    }
}

/// Dot product of a bf16 weight row with f32 activations, `n` elements each.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n * SIZE && act.len() == n * 4);
    super::contract::dot_f32_act::<SIZE>(n, w, act, |b| bf16_at(b))
}
