//! The process-wide kernel selection (`kernels()`), made once from the CPU features and
//! `TURBOINFER_KERNELS`: the one place that knows every implementation (`scalar`, `x86`, `aarch64`).

use std::sync::OnceLock;

use super::table::KernelSet;
use super::tier::{parse_override, KernelError, Tier};
use crate::kernels::cpu::{cpu_features, CpuFeatures};

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

/// The lookup-table GEMV kernels for weights of type `ty` this CPU can run, by name, the scalar
/// reference first: `Q2_K×32` (`kernels::lut`) for Q2_K, `Q4_0×32` (`kernels::lut_q4_0`) for Q4_0,
/// none for other types: every kernel, for the parity tests and the benchmark. The forward pass
/// takes the one its tier's `KernelSet::lut` names.
pub fn lut_kernels(ty: crate::quant::GgmlType) -> Vec<(&'static str, super::lut::LutGemvFn)> {
    use super::{lut, lut_q4_0};
    use crate::quant::GgmlType;
    let q2 = match ty {
        GgmlType::Q2_K => true,
        GgmlType::Q4_0 => false,
        _ => return Vec::new(),
    };
    let scalar: lut::LutGemvFn = if q2 { lut::gemv_scalar } else { lut_q4_0::gemv_scalar };
    let mut v = vec![("scalar", scalar)];
    #[cfg(target_arch = "x86_64")]
    {
        use super::x86;
        let f = crate::kernels::cpu::cpu_features();
        let (k256, k512): (lut::LutGemvFn, lut::LutGemvFn) = if q2 {
            (x86::lut::gemv, x86::lut::gemv512)
        } else {
            (x86::lut_q4_0::gemv, x86::lut_q4_0::gemv512)
        };
        if Tier::Avx2.supported(f) {
            v.push(("avx2", k256));
        }
        if Tier::Avx512.supported(f) {
            v.push(("avx512", k512));
        }
    }
    // NEON is the aarch64 baseline.
    #[cfg(target_arch = "aarch64")]
    v.push(("neon", if q2 { super::aarch64::lut::gemv } else { super::aarch64::lut_q4_0::gemv }));
    v
}
