//! `Format`: everything the engine knows of one tensor format, implemented once in the format's own
//! file (`q4_0.rs`, …): block geometry, the reference dequantizer and dot product, the activation
//! type it is dotted with, and (activation formats) the quantizer. `quant::info` is the one table
//! built from these; `GgmlType`'s sizes, `quant::block_bytes` and the `*_fn` accessors read it, and
//! every kernel tier (`crate::kernels`) fills one slot per format that has a dot product.

use super::{DequantizeFn, GgmlType, QuantizeFn, VecDotFn};

/// One tensor format.
pub(crate) trait Format {
    /// Its GGUF type.
    const TYPE: GgmlType;
    /// Elements per block (1 for the float formats).
    const ELEMENTS: usize;
    /// Bytes per block (per element for the float formats).
    const BYTES: usize;
    /// The format a weight row of it is dotted with (ggml's `vec_dot_type`).
    const ACTIVATION: GgmlType;
    /// The reference dequantizer.
    const DEQUANTIZE: DequantizeFn;
    /// The reference dot product against `ACTIVATION`, if the format can be a weight.
    const VEC_DOT: Option<VecDotFn>;
    /// The quantizer into this format, if it is an activation format.
    const QUANTIZE: Option<QuantizeFn>;
}

/// A format's entry in `quant::info`: the `Format` constants as values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Info {
    pub(crate) elements: usize,
    pub(crate) bytes: usize,
    pub(crate) activation: GgmlType,
    pub(crate) dequantize: DequantizeFn,
    pub(crate) vec_dot: Option<VecDotFn>,
    pub(crate) quantize: Option<QuantizeFn>,
}

/// `F`'s entry.
pub(crate) const fn info<F: Format>() -> Info {
    Info {
        elements: F::ELEMENTS,
        bytes: F::BYTES,
        activation: F::ACTIVATION,
        dequantize: F::DEQUANTIZE,
        vec_dot: F::VEC_DOT,
        quantize: F::QUANTIZE,
    }
}
