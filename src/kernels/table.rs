//! `KernelSet`: one tier's table of dot-product kernels per weight type plus its activation
//! quantizers. The implementations (`scalar`, `x86`) fill it; `select` picks one per process.

use super::packed::PackedDotFn;
use super::tier::Tier;
use crate::quant::{GgmlType, QuantizeFn, VecDotFn};

/// Activation vectors one batch-kernel call applies each decoded weight block to (more are chunked):
/// 8 accumulators per vector still fit the 16 (AVX2) / 32 (AVX-512) vector registers.
pub const MAX_BATCH: usize = 8;

/// One weight row against several quantized activation vectors: `out[k] = dot(w, acts[k*stride ..])`
/// for every `k < out.len()`; each activation vector is `act_row::act_row_bytes(n)` of the
/// activation type (ggml's blocks, then f32 copies of the 32-element formats' scales), and `w` is
/// exactly `row_bytes(n)` of the weight type. Each weight block is decoded once per 8 vectors.
/// Contract: every `out[k]` is bitwise the tier's `vec_dot` of vector `k` (the single-vector kernel
/// is the 1-vector instance of the same generic code, so each vector sees the same float operations
/// in the same order whatever the batch): batched and one-token decoding give identical logits.
pub type VecDotBatchFn = fn(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]);

/// Attention's weighted V sum, accumulated: `out[d] += Σ_j p[j] · v[j][d]` over `p.len()` rows of
/// `hd = out.len()` elements in `v` (F32 or F16 bytes), starting from `out`'s values (zero it for a
/// plain sum). Every tier computes each lane with the reference's operations in the reference's
/// order (multiply, then add, row by row), so all tiers agree bit for bit, and a sum taken over
/// consecutive blocks of rows (each call continuing from the last) is bitwise the one-call sum.
pub type WeightedSumFn = fn(hd: usize, p: &[f32], v: &[u8], out: &mut [f32]);

/// `y += a * x` over `y.len()` elements (`x.len() >= y.len()`).
pub type AxpyFn = fn(y: &mut [f32], a: f32, x: &[f32]);
/// `y += a * dequant(q)`, `q` one Q8_0 row of `y.len()` elements (a multiple of 32).
pub type AxpyQ8Fn = fn(y: &mut [f32], a: f32, q: &[u8]);
/// `y += Σ_k a[k] * dequant(q[k])` for four Q8_0 rows of `y.len()` elements each.
pub type Axpy4Q8Fn = fn(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]);
/// `Σ x[i] * y[i]` of two f32 vectors.
pub type DotF32Fn = fn(x: &[f32], y: &[f32]) -> f32;
/// SwiGLU in place (`kernels::swiglu`): `gate[i] = silu(gate[i]) * up[i]`.
pub type SwigluFn = fn(gate: &mut [f32], up: &[f32]);
/// Softmax in place (`kernels::softmax_in_place`).
pub type SoftmaxFn = fn(x: &mut [f32]);

/// The two kernels of one weight type.
#[derive(Clone, Copy)]
pub struct TypeKernels {
    /// One weight row · one activation vector, exactly `act_row::act_row_bytes(n)` (the result of
    /// `quant::vec_dot_fn` on its blocks).
    pub vec_dot: VecDotFn,
    /// One weight row · 1..N activation vectors (see `VecDotBatchFn`).
    pub vec_dot_batch: VecDotBatchFn,
}

impl std::fmt::Debug for TypeKernels {
    /// Function pointers print as addresses only; nothing useful to show.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TypeKernels")
    }
}

/// A tier's complete kernel table. Obtain one with `kernels()` or `KernelSet::for_tier`.
#[derive(Debug)]
pub struct KernelSet {
    pub(crate) tier: Tier,
    pub(crate) f32: TypeKernels,
    pub(crate) f16: TypeKernels,
    pub(crate) bf16: TypeKernels,
    pub(crate) q4_0: TypeKernels,
    pub(crate) q4_1: TypeKernels,
    pub(crate) q5_0: TypeKernels,
    pub(crate) q5_1: TypeKernels,
    pub(crate) q8_0: TypeKernels,
    pub(crate) q2_k: TypeKernels,
    pub(crate) q3_k: TypeKernels,
    pub(crate) q4_k: TypeKernels,
    pub(crate) q5_k: TypeKernels,
    pub(crate) q6_k: TypeKernels,
    pub(crate) q8_k: TypeKernels,
    pub(crate) quant_q8_0: QuantizeFn,
    pub(crate) quant_q8_1: QuantizeFn,
    pub(crate) quant_q8_k: QuantizeFn,
    pub(crate) quant_f32: QuantizeFn,
    /// Weighted sum of f32 value rows.
    pub(crate) wsum_f32: WeightedSumFn,
    /// Weighted sum of f16 value rows.
    pub(crate) wsum_f16: WeightedSumFn,
    /// Dot products of `Q4_K×16` packed row groups (`kernels::packed`), if this tier has them.
    pub(crate) packed_q4_k: Option<PackedDotFn>,
    /// The lookup-table kernel for Q2_K matrices packed `Q2_K×32` (`kernels::lut`), on the tiers
    /// where it was measured faster than the Q2_K dot product (`kernels::x86`), else `None`.
    pub(crate) lut_q2_k: Option<super::lut::LutKernel>,
    /// Dot products of `Q6_K×16` packed row groups, if this tier has them.
    pub(crate) packed_q6_k: Option<PackedDotFn>,
    /// `y += a * x` (the sparse FFN's vector kernels, `kernels::vector`, are bitwise the same in
    /// every tier).
    pub(crate) axpy: AxpyFn,
    /// `y += a * dequant(q)` over one Q8_0 row.
    pub(crate) axpy_q8_0: AxpyQ8Fn,
    /// `y += Σ a[k] * dequant(q[k])` over four Q8_0 rows.
    pub(crate) axpy4_q8_0: Axpy4Q8Fn,
    /// Dot product of two f32 vectors (the F32 dot product, `score_dot(F32)`, on slices).
    pub(crate) dot_f32: DotF32Fn,
    /// `kernels::swiglu` compiled for this tier (the engine's own `exp`: bitwise the scalar tier's).
    pub(crate) swiglu: SwigluFn,
    /// `kernels::softmax_in_place` compiled for this tier (bitwise the scalar tier's).
    pub(crate) softmax: SoftmaxFn,
}

impl KernelSet {
    /// The tier this table belongs to.
    pub fn tier(&self) -> Tier {
        self.tier
    }

    /// The kernels for weight type `ty` (dotted with `quant::activation_type(ty)`), or `None` if unsupported.
    pub fn get(&self, ty: GgmlType) -> Option<TypeKernels> {
        use GgmlType::*;
        Some(match ty {
            F32 => self.f32,
            F16 => self.f16,
            BF16 => self.bf16,
            Q4_0 => self.q4_0,
            Q4_1 => self.q4_1,
            Q5_0 => self.q5_0,
            Q5_1 => self.q5_1,
            Q8_0 => self.q8_0,
            Q2_K => self.q2_k,
            Q3_K => self.q3_k,
            Q4_K => self.q4_k,
            Q5_K => self.q5_k,
            Q6_K => self.q6_k,
            Q8_K => self.q8_k,
            _ => return None,
        })
    }

    /// The single-vector dot product for weight type `ty`.
    pub fn vec_dot(&self, ty: GgmlType) -> Option<VecDotFn> {
        self.get(ty).map(|k| k.vec_dot)
    }

    /// The batch dot product for weight type `ty`.
    pub fn vec_dot_batch(&self, ty: GgmlType) -> Option<VecDotBatchFn> {
        self.get(ty).map(|k| k.vec_dot_batch)
    }

    /// The attention score dot product of a `ty` (F32 or F16) key row with an f32 query row, or
    /// `None` for other types: the `ty` weight dot product, in the numeric contract's sixteen
    /// element lanes (`quant::contract::dot16`) on every tier.
    pub fn score_dot(&self, ty: GgmlType) -> Option<VecDotFn> {
        match ty {
            GgmlType::F32 => Some(self.f32.vec_dot),
            GgmlType::F16 => Some(self.f16.vec_dot),
            _ => None,
        }
    }

    /// Attention's weighted sum of `ty` (F32 or F16) value rows, or `None` for other types.
    pub fn weighted_sum(&self, ty: GgmlType) -> Option<WeightedSumFn> {
        match ty {
            GgmlType::F32 => Some(self.wsum_f32),
            GgmlType::F16 => Some(self.wsum_f16),
            _ => None,
        }
    }

    /// The kernel for `Q4_K×16` packed matrices (`kernels::packed`), or `None` if this tier has none
    /// (then matrices are dotted unpacked, with the same results).
    pub fn packed_q4_k(&self) -> Option<PackedDotFn> {
        self.packed_q4_k
    }

    /// The kernel for packed matrices of `ty` (Q4_K or Q6_K, `kernels::packed`), or `None`.
    pub fn packed(&self, ty: GgmlType) -> Option<PackedDotFn> {
        match ty {
            GgmlType::Q4_K => self.packed_q4_k,
            GgmlType::Q6_K => self.packed_q6_k,
            _ => None,
        }
    }

    /// The lookup-table kernel for matrices of `ty` packed in their LUT layout (`kernels::lut`),
    /// where it is measured faster on this tier than the dot product (Q2_K on the x86 SIMD tiers:
    /// `kernels::x86`), else `None` (then the matrix is dotted unpacked, with the same results).
    /// Q4_0's LUT kernels (`kernels::lut_q4_0`) were slower than its dot products everywhere.
    pub fn lut(&self, ty: GgmlType) -> Option<super::lut::LutKernel> {
        match ty {
            GgmlType::Q2_K => self.lut_q2_k,
            _ => None,
        }
    }

    /// The activation quantizer producing format `ty` (Q8_0, Q8_1, Q8_K or F32), bit-identical to
    /// `quant::quantize_row_fn(ty)`.
    pub fn quantize(&self, ty: GgmlType) -> Option<QuantizeFn> {
        use GgmlType::*;
        Some(match ty {
            Q8_0 => self.quant_q8_0,
            Q8_1 => self.quant_q8_1,
            Q8_K => self.quant_q8_k,
            F32 => self.quant_f32,
            _ => return None,
        })
    }

    /// `y += a * x` (`x.len() >= y.len()`).
    pub fn axpy(&self, y: &mut [f32], a: f32, x: &[f32]) {
        (self.axpy)(y, a, x)
    }

    /// `y += a * dequant(q)`, `q` one Q8_0 row of `y.len()` elements (a multiple of 32).
    pub fn axpy_q8_0(&self, y: &mut [f32], a: f32, q: &[u8]) {
        debug_assert_eq!(q.len(), super::q8_0_row_bytes(y.len()));
        (self.axpy_q8_0)(y, a, q)
    }

    /// `y += Σ_k a[k] * dequant(q[k])` for four Q8_0 rows of `y.len()` elements each.
    pub fn axpy4_q8_0(&self, y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
        debug_assert!(q.iter().all(|r| r.len() == super::q8_0_row_bytes(y.len())));
        (self.axpy4_q8_0)(y, a, q)
    }

    /// `Σ x[i] * y[i]`.
    pub fn dot_f32(&self, x: &[f32], y: &[f32]) -> f32 {
        (self.dot_f32)(x, y)
    }

    /// SwiGLU in place: `gate[i] = silu(gate[i]) * up[i]` (`gate.len() == up.len()`).
    pub fn swiglu(&self, gate: &mut [f32], up: &[f32]) {
        (self.swiglu)(gate, up)
    }

    /// Softmax in place.
    pub fn softmax(&self, x: &mut [f32]) {
        (self.softmax)(x)
    }
}
