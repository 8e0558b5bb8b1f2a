//! The scalar tier: the reference kernels of `crate::quant`, plus a batch form that loops over vectors.

use super::table::{KernelSet, TypeKernels};
use super::tier::Tier;
use super::vector;
use crate::quant::{self, bytes, GgmlType};

/// Batch dot product for the weight type with GGUF id `ID`: the reference `vec_dot` once per vector.
fn batch<const ID: u32>(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]) {
    let ty = GgmlType::from_id(ID).expect("scalar batch instantiated for a known type");
    let dot = quant::vec_dot_fn(ty).expect("scalar batch instantiated for a type with a vec_dot");
    let ab = quant::row_size(quant::activation_type(ty), n).expect("n is a whole number of blocks");
    for (k, o) in out.iter_mut().enumerate() {
        *o = dot(n, w, &acts[k * stride..k * stride + ab]);
    }
}

/// Reference kernels for the weight type with GGUF id `ID`.
macro_rules! reference {
    ($ty:ident) => {
        TypeKernels {
            vec_dot: |n, w, a| match quant::vec_dot_fn(GgmlType::$ty) {
                Some(f) => f(n, w, a),
                None => unreachable!(),
            },
            vec_dot_batch: batch::<{ GgmlType::$ty.id() }>,
        }
    };
}

/// Scalar F32 "quantizer" (a copy to little-endian bytes).
fn quant_f32(x: &[f32], d: &mut [u8]) {
    (quant::quantize_row_fn(GgmlType::F32).expect("F32 quantizer exists"))(x, d)
}
/// Scalar Q8_0 quantizer.
fn quant_q8_0(x: &[f32], d: &mut [u8]) {
    (quant::quantize_row_fn(GgmlType::Q8_0).expect("Q8_0 quantizer exists"))(x, d)
}
/// Scalar Q8_1 quantizer.
fn quant_q8_1(x: &[f32], d: &mut [u8]) {
    (quant::quantize_row_fn(GgmlType::Q8_1).expect("Q8_1 quantizer exists"))(x, d)
}
/// Scalar Q8_K quantizer.
fn quant_q8_k(x: &[f32], d: &mut [u8]) {
    (quant::quantize_row_fn(GgmlType::Q8_K).expect("Q8_K quantizer exists"))(x, d)
}

/// Reference weighted sum (`WeightedSumFn`) of rows of `S`-byte elements decoded by `conv`:
/// `out[d] += p[j] * v[j][d]` row by row, from `out`'s values.
fn wsum<const S: usize>(
    hd: usize,
    p: &[f32],
    v: &[u8],
    out: &mut [f32],
    conv: impl Fn(&[u8]) -> f32,
) {
    assert_eq!(out.len(), hd, "weighted sum output length");
    assert!(v.len() >= p.len() * hd * S, "weighted sum rows too short");
    for (&pj, row) in p.iter().zip(v.chunks_exact(hd * S)) {
        for (o, x) in out.iter_mut().zip(row.chunks_exact(S)) {
            *o += pj * conv(x);
        }
    }
}

/// Reference weighted sum of f32 rows.
fn wsum_f32(hd: usize, p: &[f32], v: &[u8], out: &mut [f32]) {
    wsum::<4>(hd, p, v, out, bytes::f32_at)
}

/// Reference weighted sum of f16 rows.
fn wsum_f16(hd: usize, p: &[f32], v: &[u8], out: &mut [f32]) {
    wsum::<2>(hd, p, v, out, bytes::f16_at)
}

/// The scalar table.
pub(crate) static SET: KernelSet = KernelSet {
    tier: Tier::Scalar,
    f32: reference!(F32),
    f16: reference!(F16),
    bf16: reference!(BF16),
    q4_0: reference!(Q4_0),
    q4_1: reference!(Q4_1),
    q5_0: reference!(Q5_0),
    q5_1: reference!(Q5_1),
    q8_0: reference!(Q8_0),
    q4_k: reference!(Q4_K),
    q6_k: reference!(Q6_K),
    q8_k: reference!(Q8_K),
    quant_q8_0,
    quant_q8_1,
    quant_q8_k,
    quant_f32,
    wsum_f32,
    wsum_f16,
    packed_q4_k: None,
    packed_q6_k: None,
    axpy: vector::axpy_body,
    axpy_q8_0: vector::axpy_q8_0_body,
    axpy4_q8_0: vector::axpy4_q8_0_body,
    dot_f32: vector::dot_f32,
    swiglu: super::elementwise::swiglu,
    softmax: super::elementwise::softmax_in_place,
};
