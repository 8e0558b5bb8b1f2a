//! Requantizing a model file (`turboinfer quantize`): the transformer blocks' linear weight
//! matrices (`blk.N.attn_{q,k,v,output}.weight`, `blk.N.ffn_{gate,up,down}.weight`) go row by row
//! through f32 (the source format's reference dequantizer) into the target format's weight
//! quantizer (`quant::weight_quantizer`: Q4_0 or Q2_K, ggml's reference quantizers, so the result
//! is what `llama-quantize --pure` makes of the same file). Every other tensor (embeddings, output
//! head, norms, biases) is kept byte for byte, so is all metadata but `general.file_type`, which
//! becomes llama.cpp's ftype of the target.
//!
//! A block matrix whose rows are not a whole number of the target's blocks (or whose source type
//! has no dequantizer) is kept as it is and listed in the summary, rather than failing the whole
//! file: llama.cpp too leaves such tensors in another type, and a model of mostly-target matrices
//! is still the useful result. No shipped model has one.

use super::{GgufError, GgufHeader, GgufWriter, MetaValue, TensorInfo};
use crate::quant::{self, GgmlType, QuantError};
use std::borrow::Cow;

/// The metadata key llama.cpp reads a file's predominant weight type from (`llama_ftype`).
pub const FILE_TYPE_KEY: &str = "general.file_type";

/// The matrices of a transformer block that are requantized (names after `blk.N.`): every linear
/// layer. Norms and biases are vectors, kept in their precise formats.
const BLOCK_MATRICES: [&str; 7] = [
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
];

/// llama.cpp's `llama_ftype` value of a file whose weights are mostly `ty` (`LLAMA_FTYPE_MOSTLY_*`
/// in llama.h), for the targets this tool makes.
pub fn llama_ftype(ty: GgmlType) -> Option<u32> {
    match ty {
        // LLAMA_FTYPE_MOSTLY_Q4_0
        GgmlType::Q4_0 => Some(2),
        // LLAMA_FTYPE_MOSTLY_Q2_K
        GgmlType::Q2_K => Some(10),
        _ => None,
    }
}

/// Whether `name` is one of a transformer block's linear weight matrices (`blk.<N>.<matrix>`).
pub fn is_block_matrix(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("blk.") else { return false };
    let Some((n, matrix)) = rest.split_once('.') else { return false };
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && BLOCK_MATRICES.contains(&matrix)
}

/// Why a file could not be requantized.
#[derive(Debug, thiserror::Error)]
pub enum RequantizeError {
    /// The target has no weight quantizer or no llama.cpp ftype.
    #[error("cannot quantize to {0}: the targets are q4_0 and q2_k")]
    Target(GgmlType),
    #[error(transparent)]
    Quant(#[from] QuantError),
    #[error(transparent)]
    Gguf(#[from] GgufError),
}

/// What a requantization did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Tensors written in the target type.
    pub requantized: usize,
    /// Tensors copied byte for byte (including `skipped`).
    pub kept: usize,
    /// Block matrices that could not be requantized and were kept, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Tensor data bytes (without padding) of the source and of the result.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Of those, the requantized tensors' bytes before and after, and their element count.
    pub requantized_bytes_in: u64,
    pub requantized_bytes_out: u64,
    pub requantized_elements: u64,
    /// Elements of all tensors.
    pub elements: u64,
}

impl Summary {
    /// Bits per weight of all tensor data.
    pub fn bits_per_weight(&self) -> f64 {
        self.bytes_out as f64 * 8.0 / self.elements.max(1) as f64
    }

    /// Bits per weight of the requantized matrices before and after.
    pub fn requantized_bits(&self) -> (f64, f64) {
        let n = self.requantized_elements.max(1) as f64;
        (self.requantized_bytes_in as f64 * 8.0 / n, self.requantized_bytes_out as f64 * 8.0 / n)
    }
}

/// Why the block matrix `t` cannot be requantized to `target`, or `None` if it can.
fn skip_reason(t: &TensorInfo, target: GgmlType) -> Option<String> {
    if quant::dequantize_row_fn(t.ty).is_none() {
        return Some(format!("source type {} has no dequantizer", t.ty));
    }
    let block = target.block_size() as u64;
    if !t.dims[0].is_multiple_of(block) {
        return Some(format!("row length {} is not a multiple of {block}", t.dims[0]));
    }
    None
}

/// The rows of `t` (its bytes `src`) dequantized and quantized to `target`.
fn requantize_tensor(t: &TensorInfo, src: &[u8], target: GgmlType) -> Result<Vec<u8>, QuantError> {
    let (n, rows) = (t.row_len(), t.n_rows());
    let dequantize = quant::dequantize_row_fn(t.ty)
        .ok_or(QuantError::Unsupported { ty: t.ty, op: "dequantize" })?;
    let quantize = quant::weight_quantizer(target)
        .ok_or(QuantError::Unsupported { ty: target, op: "weight quantize" })?;
    let (in_row, out_row) = (quant::row_size(t.ty, n)?, quant::row_size(target, n)?);
    let mut out = vec![0u8; out_row * rows];
    let mut x = vec![0f32; n];
    for (s, d) in src.chunks_exact(in_row).zip(out.chunks_exact_mut(out_row)) {
        dequantize(s, &mut x);
        quantize(&x, d);
    }
    Ok(out)
}

/// The writer of `header`'s file (whose bytes are `bytes`) with its block matrices requantized to
/// `target`, and what was done. Kept tensors borrow from `bytes`; requantized ones are owned.
/// Tensors and metadata keep their order.
pub fn requantize<'a>(
    header: &GgufHeader,
    bytes: &'a [u8],
    target: GgmlType,
) -> Result<(GgufWriter<'a>, Summary), RequantizeError> {
    let ftype = llama_ftype(target).ok_or(RequantizeError::Target(target))?;
    quant::weight_quantizer(target).ok_or(RequantizeError::Target(target))?;
    let mut w = GgufWriter::new();
    for key in &header.metadata_order {
        let value =
            if key == FILE_TYPE_KEY { MetaValue::U32(ftype) } else { header.metadata[key].clone() };
        w.add_metadata(key.as_str(), value)?;
    }
    if !header.metadata.contains_key(FILE_TYPE_KEY) {
        w.add_metadata(FILE_TYPE_KEY, MetaValue::U32(ftype))?;
    }
    let mut s = Summary::default();
    for t in &header.tensors {
        let src = &bytes[t.offset as usize..(t.offset + t.size) as usize];
        s.bytes_in += t.size;
        s.elements += t.n_elements();
        let reason = is_block_matrix(&t.name).then(|| skip_reason(t, target));
        let (ty, data): (GgmlType, Cow<'a, [u8]>) = match reason {
            Some(None) => {
                let q = requantize_tensor(t, src, target)?;
                s.requantized += 1;
                s.requantized_bytes_in += t.size;
                s.requantized_bytes_out += q.len() as u64;
                s.requantized_elements += t.n_elements();
                (target, Cow::Owned(q))
            }
            Some(Some(why)) => {
                s.skipped.push((t.name.clone(), why));
                s.kept += 1;
                (t.ty, Cow::Borrowed(src))
            }
            None => {
                s.kept += 1;
                (t.ty, Cow::Borrowed(src))
            }
        };
        s.bytes_out += data.len() as u64;
        w.add_tensor(t.name.as_str(), ty, &t.dims, data)?;
    }
    Ok((w, s))
}
