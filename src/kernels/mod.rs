//! SIMD kernel engine: per-CPU-tier tables of dot-product and activation-quantizer function pointers,
//! chosen once at run time from `cpu::cpu_features()` (no compile-time `target-cpu`). `math` holds
//! the engine's own elementary functions (`exp`, `ln`, `sin_cos`, `powf`): the same bits on every
//! CPU.
//!
//! Every table entry is a plain safe `fn`. The SIMD bodies are `#[target_feature]` functions that are
//! only reachable through a `KernelSet` built by `KernelSet::for_tier`, which refuses tiers the CPU
//! lacks; so an instruction the CPU does not have is never executed. The scalar reference in
//! `crate::quant` defines the results every tier reproduces bit for bit (the numeric contract,
//! `quant::contract`: integer block sums exact, every float operation in one fixed order);
//! `vector` holds the reference of the sparse FFN's f32 vector kernels.
//!
//! Activation rows are ggml's blocks plus f32 copies of the 32-element formats' scales (`act_row`).
//!
//! Layers: `table` (the `KernelSet` type) <- the implementations (`scalar`, `x86`, `aarch64`) <- `select`
//! (the one place that picks a tier, from the CPU and `TURBOINFER_KERNELS`).

#[cfg(target_arch = "aarch64")]
mod aarch64;
pub mod act_row;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
mod bounds;
pub mod cpu;
mod elementwise;
mod entry;
pub mod lut;
pub mod lut_q4_0;
pub mod math;
pub mod packed;
mod scalar;
mod select;
mod table;
mod tier;
mod vector;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use elementwise::{silu, softmax_in_place, swiglu};
pub use select::{kernels, lut_kernels, try_kernels, OVERRIDE_ENV, PORTABLE_OVERRIDE};
pub use table::{
    Axpy4Q8Fn, AxpyFn, AxpyQ8Fn, DotF32Fn, KernelSet, SoftmaxFn, SwigluFn, TypeKernels,
    VecDotBatchFn, WeightedSumFn, MAX_BATCH,
};
pub use tier::{parse_override, KernelError, Tier};
pub(crate) use vector::f32_bytes;
pub use vector::q8_0_row_bytes;

pub use crate::quant::{QuantizeFn, VecDotFn};

/// Revision of the numeric contract (`quant::contract`: summation orders, fusions, the elementary
/// functions of `crate::kernels::math`). Results that are stored and reused across processes (the
/// schema KV cache files) are keyed by it together with the crate version, so a build whose
/// arithmetic differs never reuses them; the tier is not part of the key, since every tier computes
/// the same bits (a cache file made on one CPU is valid on another).
/// Bump it with every change that can alter a result bit.
/// 2: attention scores in the SIMD tiers' 16-lane order (`KernelSet::score_dot`).
/// 3: Q4_K in the SIMD tiers is block-exact, packed or not.
/// 4: one contract for every tier: quad lanes, super-block chains, unfused 16-lane float dots,
///    the engine's own exp/sin/cos.
/// 5: the 32-element formats' quad lanes unfused (`lane + quad·scale`, the product rounded).
pub const NUMERICS_REVISION: u32 = 5;

/// The identity of this process's arithmetic: crate version and numerics revision.
pub fn numerics_id() -> String {
    format!("turboinfer {} numerics {NUMERICS_REVISION}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    /// The numerics identity names the revision (cache files of another revision must not
    /// match) and not the tier (every tier computes the same bits).
    #[test]
    fn numerics_id_names_the_revision_not_the_tier() {
        let id = super::numerics_id();
        assert!(id.contains(&format!("numerics {}", super::NUMERICS_REVISION)), "{id}");
        assert!(!id.contains("tier"), "{id}");
    }
}
