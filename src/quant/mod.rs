//! Quantization formats: block layouts, scalar reference dequantization and dot products, the
//! activation quantizers (Q8_0/Q8_1/Q8_K) that weights are dotted with, and the weight quantizers
//! into Q4_0 and Q2_K that `turboinfer quantize` makes smaller models with.
//!
//! Weights: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (and Q8_K).
//! Activations: Q8_0, Q8_1, Q8_K, F32.
//!
//! Every format lives in its own file with its block layout documented, and implements `Format`
//! there (geometry, reference dequantizer and dot product, activation type, quantizer): `info` is
//! the one table made from them. The functions here validate lengths and dispatch; the `*_fn`
//! accessors hand out plain function pointers for the hot path (the caller validates once, then
//! calls many times).
//!
//! Accuracy (checked by tests/quant_*.rs):
//! - dequantization is bit-identical to ggml / gguf-py (same f32 operations in the same order);
//! - the Q8_0/Q8_1/Q8_K quantizers are byte-identical to ggml's `quantize_row_q8_*_ref`, the Q4_0
//!   and Q2_K weight quantizers to `quantize_row_q4_0_ref` / `quantize_row_q2_K_ref`;
//! - dot products do ggml's `*_generic` kernels' exact integer block sums and the same f32 operations
//!   in the same order (8 float lanes in the K-quants), so they are bit-identical to ggml's reference
//!   results; against the f64 dot of the dequantized operands they agree to ≤ 1e-4·Σ|w·a| (≈1e-7 measured);
//! - against *unquantized* f32 activations the error is the activation rounding: per element at most
//!   d/2 (d = block max/127) plus, for the f16-scaled Q8_0/Q8_1, 127·|f16(d) − d| (≤ max·(1/254 + 1/2048)
//!   in total); Q4_1/Q5_1 add |m|·|s − f16(d)·Σq| per block from ggml's use of the stored sum `s`.
//!   Observed worst case on real model rows with LLM-like activations: 0.2–0.9% of Σ|w·x|.

mod bf16;
pub(crate) mod bytes;
pub mod contract;
mod format;
mod fp16;
mod fp32;
mod q2_k;
mod q3_k;
pub(crate) mod q4_0;
pub(crate) mod q4_1;
mod q4_k;
pub(crate) mod q5_0;
pub(crate) mod q5_1;
mod q5_k;
mod q6_k;
pub(crate) mod q8_0;
mod q8_1;
mod q8_k;
mod types;
#[cfg(test)]
mod weight_quantize_tests;

pub(crate) use format::{Format, Info};
pub use types::{GgmlType, QK, QK_K};

/// The format table: every format this engine reads, once, each with its implementation.
macro_rules! formats {
    ($($ty:ident => $imp:ty),* $(,)?) => {
        /// The entry of `ty`, or `None` for a type this engine does not read (the integer types,
        /// F64).
        pub(crate) fn info(ty: GgmlType) -> Option<&'static Info> {
            match ty {
                $(GgmlType::$ty => Some(&const { format::info::<$imp>() }),)*
                _ => None,
            }
        }
        // Each implementation is the format it is listed as.
        $(const _: () = assert!(matches!(<$imp as Format>::TYPE, GgmlType::$ty));)*
    };
}

formats! {
    F32 => fp32::F32,
    F16 => fp16::F16,
    BF16 => bf16::BF16,
    Q4_0 => q4_0::Q4_0,
    Q4_1 => q4_1::Q4_1,
    Q5_0 => q5_0::Q5_0,
    Q5_1 => q5_1::Q5_1,
    Q8_0 => q8_0::Q8_0,
    Q8_1 => q8_1::Q8_1,
    Q2_K => q2_k::Q2_K,
    Q3_K => q3_k::Q3_K,
    Q4_K => q4_k::Q4_K,
    Q5_K => q5_k::Q5_K,
    Q6_K => q6_k::Q6_K,
    Q8_K => q8_k::Q8_K,
}

/// Bytes per block of each block format: the one place the kernels and packers take block sizes
/// from (a block holds [`QK`] elements for the 32-element formats, [`QK_K`] for the K formats).
pub(crate) mod block_bytes {
    use super::Format;

    /// Bytes per block of `F` (`Format::BYTES`).
    const fn of<F: Format>() -> usize {
        F::BYTES
    }
    pub(crate) const F16: usize = of::<super::fp16::F16>();
    pub(crate) const F32: usize = of::<super::fp32::F32>();
    pub(crate) const Q2_K: usize = of::<super::q2_k::Q2_K>();
    pub(crate) const Q4_0: usize = of::<super::q4_0::Q4_0>();
    pub(crate) const Q4_1: usize = of::<super::q4_1::Q4_1>();
    pub(crate) const Q4_K: usize = of::<super::q4_k::Q4_K>();
    pub(crate) const Q5_0: usize = of::<super::q5_0::Q5_0>();
    pub(crate) const Q5_1: usize = of::<super::q5_1::Q5_1>();
    pub(crate) const Q6_K: usize = of::<super::q6_k::Q6_K>();
    pub(crate) const Q8_0: usize = of::<super::q8_0::Q8_0>();
    pub(crate) const Q8_1: usize = of::<super::q8_1::Q8_1>();
    pub(crate) const Q8_K: usize = of::<super::q8_k::Q8_K>();

    // The sizes of ggml's C structs (`sizeof(block_q4_0)`, ... in ggml-common.h), which the
    // files on disk and llama.cpp's kernels use: a layout change here fails the build.
    const _: () = assert!(Q4_0 == 18 && Q4_1 == 20 && Q5_0 == 22 && Q8_0 == 34 && Q8_1 == 36);
    const _: () = assert!(Q5_1 == 24);
    const _: () = assert!(Q4_K == 144 && of::<super::q5_k::Q5_K>() == 176 && Q6_K == 210);
    const _: () = assert!(Q2_K == 84 && of::<super::q3_k::Q3_K>() == 110);
    const _: () = assert!(Q8_K == 292);
}

/// Byte layout of a Q8_K activation block (for kernels outside this module).
pub(crate) mod q8k_layout {
    pub(crate) use super::q8_k::{BSUMS, QS};
}

/// Dequantizes a row: `src` holds exactly `ty.row_bytes(dst.len())` bytes; fills all of `dst`.
pub type DequantizeFn = fn(src: &[u8], dst: &mut [f32]);
/// Quantizes a row of f32 activations: `dst` holds exactly `ty.row_bytes(x.len())` bytes.
pub type QuantizeFn = fn(x: &[f32], dst: &mut [u8]);
/// Dot product of one weight row of `n` elements with activations in the weight's activation type;
/// `w` and `act` are exactly `row_bytes(n)` long for their types.
pub type VecDotFn = fn(n: usize, w: &[u8], act: &[u8]) -> f32;

/// Why a quantization call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantError {
    /// The type has no implementation for this operation.
    #[error("{op} is not supported for tensor type {ty}")]
    Unsupported { ty: GgmlType, op: &'static str },
    /// The element count is not a whole number of the type's blocks.
    #[error("{n} elements is not a whole number of {ty} blocks ({block} elements each)")]
    NotBlockMultiple { ty: GgmlType, n: usize, block: usize },
    /// The row's byte size does not fit in memory.
    #[error("a {ty} row of {n} elements is too large")]
    TooLarge { ty: GgmlType, n: usize },
    /// A byte buffer has the wrong length for its element count.
    #[error("{what}: {ty} row of {n} elements needs {expected} bytes, got {got}")]
    WrongLength { what: &'static str, ty: GgmlType, n: usize, expected: usize, got: usize },
}

/// Byte length of a row of `n` elements of `ty`, or an error if `n` is not a whole number of blocks.
pub fn row_size(ty: GgmlType, n: usize) -> Result<usize, QuantError> {
    if !n.is_multiple_of(ty.block_size()) {
        return Err(QuantError::NotBlockMultiple { ty, n, block: ty.block_size() });
    }
    ty.row_bytes(n as u64)
        .and_then(|b| usize::try_from(b).ok())
        .ok_or(QuantError::TooLarge { ty, n })
}

/// Checks that `got` bytes is exactly a row of `n` elements of `ty`.
fn check_len(what: &'static str, ty: GgmlType, n: usize, got: usize) -> Result<(), QuantError> {
    let expected = row_size(ty, n)?;
    if expected != got {
        return Err(QuantError::WrongLength { what, ty, n, expected, got });
    }
    Ok(())
}

/// The unchecked dequantizer for `ty`, or `None` if `ty` cannot be dequantized here.
pub fn dequantize_row_fn(ty: GgmlType) -> Option<DequantizeFn> {
    info(ty).map(|f| f.dequantize)
}

/// Dequantizes `dst.len()` elements stored as `ty` in `src` (`src.len()` must equal `ty.row_bytes(dst.len())`).
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    let f = dequantize_row_fn(ty).ok_or(QuantError::Unsupported { ty, op: "dequantize" })?;
    check_len("source", ty, dst.len(), src.len())?;
    f(src, dst);
    Ok(())
}

/// The activation format a weight type is dotted with (ggml's `vec_dot_type`): Q8_0 for
/// Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1/Q8_1, Q8_K for the K-quants, F32 for everything else
/// (F32/F16/BF16 and the integer types). Whether a dot product exists is `vec_dot_fn(weight).is_some()`.
pub fn activation_type(weight: GgmlType) -> GgmlType {
    info(weight).map_or(GgmlType::F32, |f| f.activation)
}

/// The unchecked activation quantizer for `ty` (Q8_0, Q8_1, Q8_K or F32), or `None`.
pub fn quantize_row_fn(ty: GgmlType) -> Option<QuantizeFn> {
    info(ty).and_then(|f| f.quantize)
}

/// Quantizes f32 activations `x` into `dst` in format `ty` (Q8_0, Q8_1, Q8_K or F32), as ggml's `*_ref` does.
pub fn quantize_row(ty: GgmlType, x: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = quantize_row_fn(ty).ok_or(QuantError::Unsupported { ty, op: "quantize" })?;
    check_len("destination", ty, x.len(), dst.len())?;
    f(x, dst);
    Ok(())
}

/// The unchecked weight quantizer into `ty` (Q4_0 or Q2_K, as ggml's `quantize_row_*_ref`), or
/// `None`. Kept apart from [`quantize_row_fn`]: that one names the activation formats, which the
/// forward pass picks by it, and a weight format must not become one by having a quantizer.
pub fn weight_quantizer(ty: GgmlType) -> Option<QuantizeFn> {
    match ty {
        GgmlType::Q4_0 => Some(q4_0::quantize),
        GgmlType::Q2_K => Some(q2_k::quantize),
        _ => None,
    }
}

/// Quantizes a row of f32 weights `x` into `dst` in format `ty` (see [`weight_quantizer`]).
pub fn quantize_weights(ty: GgmlType, x: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = weight_quantizer(ty).ok_or(QuantError::Unsupported { ty, op: "weight quantize" })?;
    check_len("destination", ty, x.len(), dst.len())?;
    f(x, dst);
    Ok(())
}

/// The unchecked scalar dot product for weight type `weight` against `activation_type(weight)`, or `None`.
pub fn vec_dot_fn(weight: GgmlType) -> Option<VecDotFn> {
    info(weight).and_then(|f| f.vec_dot)
}

/// Checks that `w_len` and `act_len` bytes are exactly a row of `n` elements of `weight` and of
/// its activation type.
pub(crate) fn check_dot_lengths(
    weight: GgmlType,
    n: usize,
    w_len: usize,
    act_len: usize,
) -> Result<(), QuantError> {
    check_len("weights", weight, n, w_len)?;
    check_len("activations", activation_type(weight), n, act_len)
}

/// Scalar reference dot product of one weight row `w` (type `weight`, `n` elements) with activations
/// `act` (already quantized in `activation_type(weight)`).
pub fn vec_dot(weight: GgmlType, n: usize, w: &[u8], act: &[u8]) -> Result<f32, QuantError> {
    let f = vec_dot_fn(weight).ok_or(QuantError::Unsupported { ty: weight, op: "vec_dot" })?;
    check_dot_lengths(weight, n, w.len(), act.len())?;
    Ok(f(n, w, act))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Block sizes in the per-format files agree with the type table.
    #[test]
    fn block_constants_match_type_table() {
        use GgmlType::*;
        assert_eq!(q4_0::BLOCK, Q4_0.type_size());
        assert_eq!(q4_1::BLOCK, Q4_1.type_size());
        assert_eq!(q5_0::BLOCK, Q5_0.type_size());
        assert_eq!(q5_1::BLOCK, Q5_1.type_size());
        assert_eq!(q8_0::BLOCK, Q8_0.type_size());
        assert_eq!(q8_1::BLOCK, Q8_1.type_size());
        assert_eq!(q2_k::BLOCK, Q2_K.type_size());
        assert_eq!(q3_k::BLOCK, Q3_K.type_size());
        assert_eq!(q4_k::BLOCK, Q4_K.type_size());
        assert_eq!(q5_k::BLOCK, Q5_K.type_size());
        assert_eq!(q6_k::BLOCK, Q6_K.type_size());
        assert_eq!(q8_k::BLOCK, Q8_K.type_size());
        assert_eq!(fp32::SIZE, F32.type_size());
        assert_eq!(fp16::SIZE, F16.type_size());
        assert_eq!(bf16::SIZE, BF16.type_size());
    }

    /// Q4_K scale unpacking matches a direct bit-level reading of the packing for all 8 sub-blocks.
    #[test]
    fn q4_k_scale_min_unpacking() {
        // Pick 8 distinct 6-bit scales and mins and pack them by hand per the documented layout.
        let sc: [u8; 8] = [1, 62, 33, 17, 63, 40, 5, 48];
        let m: [u8; 8] = [60, 2, 31, 44, 9, 63, 21, 36];
        let mut q = [0u8; 12];
        for j in 0..4 {
            q[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
            q[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
            q[j + 8] = (sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4);
        }
        for j in 0..8 {
            assert_eq!(q4_k::scale_min(j, &q), (sc[j], m[j]), "sub-block {j}");
        }
    }

    /// Unsupported types and bad lengths are errors, not panics.
    #[test]
    fn errors_instead_of_panics() {
        let mut out = [0f32; 32];
        assert!(matches!(
            dequantize_row(GgmlType::I8, &[0; 32], &mut [0f32; 32]),
            Err(QuantError::Unsupported { .. })
        ));
        assert!(matches!(
            dequantize_row(GgmlType::Q4_0, &[0; 17], &mut out),
            Err(QuantError::WrongLength { .. })
        ));
        assert!(matches!(
            dequantize_row(GgmlType::Q4_0, &[0; 18], &mut out[..31]),
            Err(QuantError::NotBlockMultiple { .. })
        ));
        assert!(matches!(
            quantize_row(GgmlType::Q4_0, &out, &mut [0; 18]),
            Err(QuantError::Unsupported { .. })
        ));
        assert!(vec_dot(GgmlType::Q8_0, 32, &[0; 34], &[0; 33]).is_err());
    }
}
