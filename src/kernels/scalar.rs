//! The scalar tier: the reference kernels of `crate::quant`, plus a batch form that loops over vectors.
//!
//! Two tables of the same code: `SET`, portable, and on x86-64 `SET_F16C`, chosen when the CPU has
//! F16C (Intel since Ivy Bridge, AMD since Piledriver). The 32-element formats take two to four f16
//! scales per 32 elements; a baseline x86-64 build has no conversion instruction, so `SET` looks
//! them up in a 256 KiB table (`quant::bytes::F16_TABLE`), and `SET_F16C` compiles the same
//! reference dot products with `vcvtph2ps` (`contract::Instruction`) and AVX's wider registers.
//! Both give the same bits (the conversion is exact; `tests/kernels_parity.rs`).

use super::table::{KernelSet, TypeKernels};
use super::tier::Tier;
use super::vector;
use crate::quant::{self, bytes, GgmlType};

/// Panics unless `w` and `a` are exactly a row of `n` elements of `ty` and of its activation
/// type, as the SIMD entry points' assertions do (the kernel contract: never a result from a
/// buffer of the wrong length).
fn lengths(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) {
    if let Err(e) = quant::check_dot_lengths(ty, n, w.len(), a.len()) {
        panic!("kernel called with a buffer of the wrong length: {e}");
    }
}

/// The reference dot product of weight type `ty`, its lengths checked (`lengths`).
fn checked(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    lengths(ty, n, w, a);
    (quant::vec_dot_fn(ty).expect("scalar kernels exist only for types with a dot product"))(
        n, w, a,
    )
}

/// Batch dot product for the weight type with GGUF id `ID`: the reference `vec_dot` once per vector.
fn batch<const ID: u32>(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]) {
    let ty = GgmlType::from_id(ID).expect("scalar batch instantiated for a known type");
    let ab = quant::row_size(quant::activation_type(ty), n).expect("n is a whole number of blocks");
    for (k, o) in out.iter_mut().enumerate() {
        *o = checked(ty, n, w, &acts[k * stride..k * stride + ab]);
    }
}

/// Reference kernels for the weight type with GGUF id `ID`.
macro_rules! reference {
    ($ty:ident) => {
        TypeKernels {
            vec_dot: |n, w, a| checked(GgmlType::$ty, n, w, a),
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

/// The scalar tier's table for this CPU: `SET_F16C` where it has F16C.
pub(crate) fn for_cpu(features: &crate::cpu::CpuFeatures) -> &'static KernelSet {
    #[cfg(target_arch = "x86_64")]
    if features.f16c {
        return &f16c::SET_F16C;
    }
    let _ = features;
    &SET
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
    q2_k: reference!(Q2_K),
    q3_k: reference!(Q3_K),
    q4_k: reference!(Q4_K),
    q5_k: reference!(Q5_K),
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

/// The scalar table compiled with F16C (and so AVX) for the 32-element formats (the only
/// reference code with f16 scales every few elements; the K-quants take one or two per 256).
#[cfg(target_arch = "x86_64")]
pub(crate) use f16c::SET_F16C;

/// The scalar table compiled with F16C (x86-64).
#[cfg(target_arch = "x86_64")]
mod f16c {
    use super::*;
    use crate::quant::contract::Instruction;

    /// Kernels for a 32-element format whose reference dot product is `quant::$m::vec_dot_with::<F>`, dotted with
    /// activations of type `$act`.
    macro_rules! f16c {
        ($m:ident, $ty:ident, $act:ident) => {{
            /// The reference dot product, compiled with F16C.
            ///
            /// Safety: the CPU must have F16C (`for_cpu` hands this table out only then).
            #[target_feature(enable = "f16c")]
            unsafe fn dot(n: usize, w: &[u8], a: &[u8]) -> f32 {
                lengths(GgmlType::$ty, n, w, a);
                quant::$m::vec_dot_with::<Instruction>(n, w, a)
            }
            /// The batch: the reference dot product once per vector.
            ///
            /// Safety: as `dot`.
            #[target_feature(enable = "f16c")]
            unsafe fn batch(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]) {
                let ab = quant::row_size(GgmlType::$act, n).expect("n is a whole number of blocks");
                for (k, o) in out.iter_mut().enumerate() {
                    let a = &acts[k * stride..k * stride + ab];
                    lengths(GgmlType::$ty, n, w, a);
                    *o = quant::$m::vec_dot_with::<Instruction>(n, w, a);
                }
            }
            TypeKernels {
                // SAFETY (both): reachable only through SET_F16C, which `for_cpu` returns only
                // on a CPU with F16C.
                vec_dot: |n, w, a| unsafe { dot(n, w, a) },
                vec_dot_batch: |n, w, acts, stride, out| unsafe { batch(n, w, acts, stride, out) },
            }
        }};
    }

    /// `SET` with the 32-element formats' dot products compiled with F16C.
    pub(crate) static SET_F16C: KernelSet = KernelSet {
        q4_0: f16c!(q4_0, Q4_0, Q8_0),
        q4_1: f16c!(q4_1, Q4_1, Q8_1),
        q5_0: f16c!(q5_0, Q5_0, Q8_0),
        q5_1: f16c!(q5_1, Q5_1, Q8_1),
        q8_0: f16c!(q8_0, Q8_0, Q8_0),
        ..SET
    };
}
