//! SIMD kernel engine: per-CPU-tier tables of dot-product and activation-quantizer function pointers,
//! chosen once at run time from `cpu::cpu_features()` (no compile-time `target-cpu`).
//!
//! Every table entry is a plain safe `fn`. The SIMD bodies are `#[target_feature]` functions that are
//! only reachable through a `KernelSet` built by `KernelSet::for_tier`, which refuses tiers the CPU
//! lacks; so an instruction the CPU does not have is never executed. The scalar reference in
//! `crate::quant` defines the semantics every tier reproduces (integer block sums exact, float
//! accumulation order free).

mod scalar;
mod set;
mod tier;
#[cfg(target_arch = "x86_64")]
mod x86;

pub use set::{kernels, try_kernels, KernelSet, TypeKernels, VecDotBatchFn, WeightedSumFn, MAX_BATCH, OVERRIDE_ENV};
pub use tier::{parse_override, KernelError, Tier};

pub use crate::quant::{QuantizeFn, VecDotFn};
