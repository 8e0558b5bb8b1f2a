//! The sparse FFN's axpy kernels (`kernels::vector`) compiled with AVX2+FMA: the reference
//! bodies, inlined into `#[target_feature]` functions (same operations, same order, so the
//! results are bitwise the scalar tier's). Its dot product is the tier's F32 dot (`x86::mod`).

use crate::kernels::vector;

/// AVX2+FMA build of `axpy_body`.
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_t(y: &mut [f32], a: f32, x: &[f32]) {
    vector::axpy_body(y, a, x)
}
/// AVX2+FMA build of `axpy_q8_0_body`.
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy_q8_0_t(y: &mut [f32], a: f32, q: &[u8]) {
    vector::axpy_q8_0_body(y, a, q)
}
/// AVX2+FMA build of `axpy4_q8_0_body`.
#[target_feature(enable = "avx2,fma")]
unsafe fn axpy4_q8_0_t(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
    vector::axpy4_q8_0_body(y, a, q)
}
/// Safe wrapper; only in the tables of tiers that need AVX2 and FMA.
pub(crate) fn axpy4_q8_0(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
    // SAFETY: only the x86 tiers' tables hold this function, and `KernelSet::for_tier` hands
    // those out only on CPUs with AVX2 and FMA.
    unsafe { axpy4_q8_0_t(y, a, q) }
}
/// Safe wrapper; only in the tables of tiers that need AVX2 and FMA.
pub(crate) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    // SAFETY: only the x86 tiers' tables hold this function, and `KernelSet::for_tier` hands
    // those out only on CPUs with AVX2 and FMA.
    unsafe { axpy_t(y, a, x) }
}
/// Safe wrapper; only in the tables of tiers that need AVX2 and FMA.
pub(crate) fn axpy_q8_0(y: &mut [f32], a: f32, q: &[u8]) {
    // SAFETY: as above.
    unsafe { axpy_q8_0_t(y, a, q) }
}
