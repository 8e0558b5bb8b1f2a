//! The scalar tier: the reference kernels of `crate::quant`, plus a batch form that loops over vectors.
//!
//! Two tables of the same code: `SET`, portable, and on x86-64 `SET_F16C`, chosen when the CPU has
//! F16C (Intel since Ivy Bridge, AMD since Piledriver). The 32-element formats take two to four f16
//! scales per 32 elements; a baseline x86-64 build has no conversion instruction, so `SET` looks
//! them up in a 256 KiB table (`quant::bytes::F16_TABLE`), and `SET_F16C` compiles the same
//! reference dot products with `vcvtph2ps` (`contract::Instruction`) and AVX's wider registers.
//! Both give the same bits (the conversion is exact; `tests/kernels_parity.rs`).
//!
//! The 32-element formats' kernels take the activation blocks' scales from the f32 copies after
//! the blocks (`act_row`, as the SIMD tiers do), the weight blocks' from the blocks, in the
//! reference's `contract::quad_dot`; the other formats call the reference `quant::vec_dot`.

use super::act_row;
use super::table::{KernelSet, TypeKernels};
use super::tier::Tier;
use super::vector;
use crate::quant::contract::{self, Arith, Portable, QuadBlock};
use crate::quant::{self, bytes, GgmlType};

/// Byte lengths of one dot product over `n` elements.
#[derive(Clone, Copy)]
struct Lengths {
    /// The weight row.
    w: usize,
    /// The activation row as the kernels read it (`act_row`).
    act: usize,
    /// Its ggml blocks, which the reference reads.
    blocks: usize,
}

/// The lengths of a dot product of weight type `ty` over `n` elements; panics unless `n` is a
/// whole number of blocks (the kernel contract, as the SIMD entry points' assertions: never a
/// result from a buffer of the wrong length). From the format table directly, once per call: a
/// decode step calls it once per weight row, and SmolLM2's rows are 18 blocks long, where going
/// through `quant::row_size` three times took 8 % of the scalar tier's decoding time. Inlined, so
/// that with `ty` known where it is called it folds to a few constants.
#[inline(always)]
fn lengths(ty: GgmlType, n: usize) -> Lengths {
    let w = quant::info(ty).expect("scalar kernels exist only for known formats");
    let a = quant::info(w.activation).expect("every weight format has an activation format");
    assert!(
        n.is_multiple_of(w.elements) && a.elements == w.elements,
        "kernel called with {n} elements, not a whole number of {ty} blocks"
    );
    let nb = n / w.elements;
    let size = |bytes: usize| nb.checked_mul(bytes).expect("a row length that fits in memory");
    let blocks = size(a.bytes);
    Lengths { w: size(w.bytes), act: blocks + act_row::scale_bytes(w.activation, n), blocks }
}

/// The blocks of activation row `a`, after panicking unless `w` and `a` are exactly a row of `l`.
fn blocks<'a>(l: Lengths, w: &[u8], a: &'a [u8]) -> &'a [u8] {
    assert!(
        w.len() == l.w && a.len() == l.act,
        "kernel called with a buffer of the wrong length: weights {} (not {}), activations {} (not {})",
        w.len(),
        l.w,
        a.len(),
        l.act
    );
    &a[..l.blocks]
}

/// The reference dot product of weight type `ty` on the blocks of `a`, lengths checked.
fn checked(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let a = blocks(lengths(ty, n), w, a);
    (quant::vec_dot_fn(ty).expect("scalar kernels exist only for types with a dot product"))(
        n, w, a,
    )
}

/// Batch dot product for the weight type with GGUF id `ID`: the reference `vec_dot` once per vector.
fn batch<const ID: u32>(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]) {
    let ty = GgmlType::from_id(ID).expect("scalar batch instantiated for a known type");
    let (l, f) = (lengths(ty, n), quant::vec_dot_fn(ty).expect("a type with a dot product"));
    for (k, o) in out.iter_mut().enumerate() {
        *o = f(n, w, blocks(l, w, &acts[k * stride..k * stride + l.act]));
    }
}

/// The f32 copies of an activation row's block scales (`act_row`), `PER` per block (Q8_0: `d`;
/// Q8_1: `d`, `s`): what the 32-element formats' dot products take their activation scales from,
/// the same values as the blocks' f16 fields without a conversion per weight row (on a CPU without
/// F16C each conversion is a lookup in a 256 KiB table, and a Q4_1 block had four).
#[derive(Clone, Copy)]
struct Side<'a, const PER: usize>(&'a [[u8; 4]]);

impl<'a, const PER: usize> Side<'a, PER> {
    /// The f32 scales of row `a`, whose lengths `blocks` checked.
    #[inline(always)]
    fn of(l: Lengths, a: &'a [u8]) -> Self {
        Self(a[l.blocks..l.act].as_chunks::<4>().0)
    }

    /// Block `i`'s `(d, s)` (`s` 0 for Q8_0).
    #[inline(always)]
    fn at(self, i: usize) -> (f32, f32) {
        let d = f32::from_le_bytes(self.0[PER * i]);
        (d, if PER == 2 { f32::from_le_bytes(self.0[PER * i + 1]) } else { 0.0 })
    }
}

/// The contract's dot product of shape 2 (`contract::quad_dot`) of weight row `w` (blocks of `WB`
/// bytes, format `B`) with activation blocks `a` (`AB` bytes each) and their f32 scales `s`, the
/// weight scales converted by `F`.
#[inline(always)]
fn rows<F: Arith, B, const WB: usize, const AB: usize, const PER: usize>(
    w: &[u8],
    a: &[u8],
    s: Side<'_, PER>,
) -> f32
where
    B: QuadBlock<W = [u8; WB], A = [u8; AB]>,
{
    contract::quad_dot::<F, B>(w.as_chunks::<WB>().0, a.as_chunks::<AB>().0, |i| s.at(i))
}

/// One dot product of the 32-element weight type `ty`: `dot` (`rows` of its format) on the
/// blocks of `a` and their f32 scales, lengths checked.
#[inline(always)]
fn quad_one<const PER: usize>(
    ty: GgmlType,
    n: usize,
    w: &[u8],
    a: &[u8],
    dot: impl Fn(&[u8], Side<'_, PER>) -> f32,
) -> f32 {
    let l = lengths(ty, n);
    dot(blocks(l, w, a), Side::of(l, a))
}

/// `quad_one` once per vector of the batch.
#[inline(always)]
fn quad_batch<const PER: usize>(
    ty: GgmlType,
    (n, w, acts, stride): (usize, &[u8], &[u8], usize),
    out: &mut [f32],
    dot: impl Fn(&[u8], Side<'_, PER>) -> f32,
) {
    let l = lengths(ty, n);
    for (k, o) in out.iter_mut().enumerate() {
        let a = &acts[k * stride..k * stride + l.act];
        *o = dot(blocks(l, w, a), Side::of(l, a));
    }
}

/// Kernels for the 32-element format `$ty` (`quant::$m::$ty`, `$per` activation scales per
/// block), the weight scales converted by `$arith` (`contract::Arith`).
macro_rules! quad {
    ($m:ident, $ty:ident, $per:literal, $arith:ty) => {
        TypeKernels {
            vec_dot: |n, w, a| {
                quad_one::<$per>(GgmlType::$ty, n, w, a, |b, s| {
                    rows::<$arith, quant::$m::$ty, _, _, _>(w, b, s)
                })
            },
            vec_dot_batch: |n, w, acts, stride, out| {
                quad_batch::<$per>(GgmlType::$ty, (n, w, acts, stride), out, |b, s| {
                    rows::<$arith, quant::$m::$ty, _, _, _>(w, b, s)
                })
            },
        }
    };
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
pub(crate) fn for_cpu(features: &crate::kernels::cpu::CpuFeatures) -> &'static KernelSet {
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
    q4_0: quad!(q4_0, Q4_0, 1, Portable),
    q4_1: quad!(q4_1, Q4_1, 2, Portable),
    q5_0: quad!(q5_0, Q5_0, 1, Portable),
    q5_1: quad!(q5_1, Q5_1, 2, Portable),
    q8_0: quad!(q8_0, Q8_0, 1, Portable),
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
    lut_q2_k: None,
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

    /// `quad!` compiled with F16C, the weight scales converted by `vcvtph2ps`.
    macro_rules! f16c {
        ($m:ident, $ty:ident, $per:literal) => {{
            /// One dot product.
            ///
            /// Safety: the CPU must have F16C (`for_cpu` hands this table out only then).
            #[target_feature(enable = "f16c")]
            unsafe fn dot(n: usize, w: &[u8], a: &[u8]) -> f32 {
                quad_one::<$per>(GgmlType::$ty, n, w, a, |b, s| {
                    rows::<Instruction, quant::$m::$ty, _, _, _>(w, b, s)
                })
            }
            /// The batch.
            ///
            /// Safety: as `dot`.
            #[target_feature(enable = "f16c")]
            unsafe fn batch(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]) {
                quad_batch::<$per>(GgmlType::$ty, (n, w, acts, stride), out, |b, s| {
                    rows::<Instruction, quant::$m::$ty, _, _, _>(w, b, s)
                })
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
        q4_0: f16c!(q4_0, Q4_0, 1),
        q4_1: f16c!(q4_1, Q4_1, 2),
        q5_0: f16c!(q5_0, Q5_0, 1),
        q5_1: f16c!(q5_1, Q5_1, 2),
        q8_0: f16c!(q8_0, Q8_0, 1),
        ..SET
    };
}
