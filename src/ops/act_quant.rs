//! Activations quantized once per input and shared by every matrix that reads that input.

use crate::kernels::{act_row, KernelSet};
use crate::quant::{GgmlType, QuantError};
use rayon::prelude::*;

/// A batch of f32 input rows plus its quantized forms, made lazily, one per activation type.
///
/// Q, K and V read the same normalised input, as do the FFN gate and up projections: the first
/// matrix to ask for a format pays for the quantization, the others reuse the bytes.
#[derive(Debug)]
pub struct SharedActs<'a> {
    x: &'a [f32], // [n_tok, cols]
    cols: usize,
    /// The kernel tier whose quantizers run.
    set: &'static KernelSet,
    quantized: Vec<(GgmlType, usize, Vec<u8>)>, // (type, row_bytes, [n_tok, row_bytes])
}

impl<'a> SharedActs<'a> {
    /// Wraps `x` (`[n_tok, cols]`), to be quantized with the quantizers of `set`.
    pub fn new(x: &'a [f32], cols: usize, set: &'static KernelSet) -> SharedActs<'a> {
        assert!(cols > 0 && x.len().is_multiple_of(cols), "activation shape");
        SharedActs { x, cols, set, quantized: Vec::new() }
    }

    /// Number of rows (tokens).
    pub fn n_tok(&self) -> usize {
        self.x.len() / self.cols
    }

    /// The rows quantized to `ty` as the kernels read them (`[n_tok, row_bytes]`, `kernels::act_row`)
    /// and `row_bytes`, quantizing on first use
    /// (rows in parallel; call inside `Runtime::install`).
    pub fn get(&mut self, ty: GgmlType) -> Result<(&[u8], usize), QuantError> {
        if let Some(i) = self.quantized.iter().position(|e| e.0 == ty) {
            let e = &self.quantized[i];
            return Ok((&e.2, e.1));
        }
        // The dispatched (SIMD) quantizer; bit-identical to `quant::quantize_row_fn(ty)`.
        let f = self.set.quantize(ty).ok_or(QuantError::Unsupported { ty, op: "quantize" })?;
        let rb = act_row::act_row_bytes(ty, self.cols)?;
        let mut buf = vec![0u8; rb * self.n_tok()]; // [n_tok, rb]: blocks, then f32 scales
        buf.par_chunks_mut(rb)
            .zip(self.x.par_chunks(self.cols))
            .for_each(|(d, s)| act_row::quantize_with(f, ty, s, d));
        self.quantized.push((ty, rb, buf));
        let e = self.quantized.last().expect("just pushed");
        Ok((&e.2, e.1))
    }
}
