//! The process-wide kernel selection (`kernels()`), made once from the CPU features and
//! `TURBOINFER_KERNELS`: the one place that knows every implementation (`scalar`, `x86`, `aarch64`).

use std::sync::OnceLock;

use super::table::KernelSet;
use super::tier::{parse_override, KernelError, Tier};
use crate::cpu::{cpu_features, CpuFeatures};

/// Environment variable forcing a tier (`scalar|avx2|avxvnni|avx512|avx512vnni|neon|dotprod|i8mm`); a tier the CPU lacks is an error.
pub const OVERRIDE_ENV: &str = "TURBOINFER_KERNELS";

/// `OVERRIDE_ENV` value forcing the scalar tier's portable table ([`KernelSet::portable`]) on a
/// CPU that would get its F16C table: what a CPU without F16C runs, for tests and benchmarks.
pub const PORTABLE_OVERRIDE: &str = "scalar-portable";

impl KernelSet {
    /// The table of `tier`, or an error if this CPU cannot run it.
    pub fn for_tier(tier: Tier) -> Result<&'static KernelSet, KernelError> {
        Self::for_tier_with(tier, cpu_features())
    }

    /// The scalar tier's portable table: the reference code built for the baseline instruction
    /// set, what the scalar tier is on an x86-64 CPU without F16C and on aarch64. Its bits are
    /// every tier's; only its speed differs from `for_tier(Tier::Scalar)`.
    pub fn portable() -> &'static KernelSet {
        &super::scalar::SET
    }

    /// The table's name as `TURBOINFER_KERNELS` takes it: its tier's, or [`PORTABLE_OVERRIDE`]
    /// for the portable scalar table where this CPU's scalar tier is another.
    pub fn name(&self) -> &'static str {
        let portable = KernelSet::portable();
        let scalar = KernelSet::for_tier(Tier::Scalar).ok();
        if std::ptr::eq(self, portable) && !scalar.is_some_and(|s| std::ptr::eq(s, portable)) {
            PORTABLE_OVERRIDE
        } else {
            self.tier().name()
        }
    }

    /// The table of `tier` if `features` (which must describe this CPU) support it.
    fn for_tier_with(
        tier: Tier,
        features: &CpuFeatures,
    ) -> Result<&'static KernelSet, KernelError> {
        tier.check(features)?;
        Ok(match tier {
            Tier::Scalar => super::scalar::for_cpu(features),
            #[cfg(target_arch = "x86_64")]
            Tier::Avx2 => &super::x86::AVX2,
            #[cfg(target_arch = "x86_64")]
            Tier::AvxVnni => &super::x86::AVX_VNNI,
            #[cfg(target_arch = "x86_64")]
            Tier::Avx512 => &super::x86::AVX512,
            #[cfg(target_arch = "x86_64")]
            Tier::Avx512Vnni => &super::x86::AVX512_VNNI,
            #[cfg(target_arch = "aarch64")]
            Tier::Neon => &super::aarch64::NEON,
            #[cfg(target_arch = "aarch64")]
            Tier::Dotprod => &super::aarch64::DOTPROD,
            #[cfg(target_arch = "aarch64")]
            Tier::I8mm => &super::aarch64::I8MM,
            _ => unreachable!("Tier::check refuses the other architecture's tiers"),
        })
    }
}

/// The process-wide selection (the `OVERRIDE_ENV` tier if set, else the best supported), made once.
static SELECTED: OnceLock<Result<&'static KernelSet, KernelError>> = OnceLock::new();

/// The kernel table for this process, or the error of an invalid `TURBOINFER_KERNELS` override.
pub fn try_kernels() -> Result<&'static KernelSet, KernelError> {
    SELECTED
        .get_or_init(|| {
            let f = cpu_features();
            let tier = match std::env::var(OVERRIDE_ENV) {
                Ok(s) if s.trim() == PORTABLE_OVERRIDE => return Ok(KernelSet::portable()),
                Ok(s) if !s.trim().is_empty() => parse_override(&s, f)?,
                _ => Tier::best(f),
            };
            KernelSet::for_tier_with(tier, f)
        })
        .clone()
}

/// The kernel table for this process. Panics with the reason if `TURBOINFER_KERNELS` asks for an
/// unknown tier or one this CPU lacks; call `try_kernels()` at start-up to report that as an error.
pub fn kernels() -> &'static KernelSet {
    match try_kernels() {
        Ok(k) => k,
        Err(e) => panic!("{OVERRIDE_ENV}: {e}"),
    }
}

/// The lookup-table GEMV kernels (`kernels::lut`) this CPU can run, by name, the scalar reference
/// first. Not part of a `KernelSet`: the forward pass does not use them (`docs/performance.md`).
pub fn lut_kernels() -> Vec<(&'static str, super::lut::LutGemvFn)> {
    let mut v: Vec<(&'static str, super::lut::LutGemvFn)> =
        vec![("scalar", super::lut::gemv_scalar)];
    #[cfg(target_arch = "x86_64")]
    {
        let f = crate::cpu::cpu_features();
        if Tier::Avx2.supported(f) {
            v.push(("avx2", super::x86::lut::gemv));
        }
        if Tier::Avx512.supported(f) {
            v.push(("avx512", super::x86::lut::gemv512));
        }
    }
    // NEON is the aarch64 baseline.
    #[cfg(target_arch = "aarch64")]
    v.push(("neon", super::aarch64::lut::gemv));
    v
}
