//! Kernel tiers (instruction-set levels), their CPU requirements, and the `TURBOINFER_KERNELS` override parser.

use crate::kernels::cpu::CpuFeatures;

/// An instruction-set level with its own kernel table, from slowest to fastest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// Portable scalar reference code (`crate::quant`); runs everywhere.
    Scalar,
    /// x86-64 AVX2 + FMA + F16C, 256-bit `maddubs`/`madd` integer dots.
    Avx2,
    /// x86-64 AVX2 + AVX-VNNI: 256-bit `vpdpbusd`/`vpdpwssd` without AVX-512.
    AvxVnni,
    /// x86-64 AVX-512 F/BW/VL: 512-bit K-quant kernels, mask-register bit expansion.
    Avx512,
    /// x86-64 AVX-512 + AVX512-VNNI: 512-bit `vpdpbusd`/`vpdpwssd`.
    Avx512Vnni,
    /// aarch64 Advanced SIMD (every aarch64 CPU): 128-bit float lanes, `smull`/`sadalp` integer sums.
    Neon,
    /// aarch64 NEON + `sdot` (Armv8.2+ dot product): one quad sum per i32 lane.
    Dotprod,
    /// aarch64 NEON + `sdot` + `smmla` (Armv8.6+ int8 matrix multiply): 2x2 row-token blocks in
    /// the packed K-quant kernels, the dotprod kernels elsewhere.
    I8mm,
}

/// Why a kernel tier could not be selected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The override names no known tier.
    #[error(
        "unknown kernel tier {0:?} (expected one of: scalar, scalar-portable, avx2, avxvnni, avx512, avx512vnni, neon, dotprod, i8mm)"
    )]
    UnknownTier(String),
    /// The tier needs an instruction-set extension this CPU (or this build's architecture) lacks.
    #[error("kernel tier {tier} is not available on this CPU: missing {missing}")]
    Unsupported { tier: Tier, missing: &'static str },
}

impl std::fmt::Display for Tier {
    /// Writes the tier's override name (`avx512vnni`, …).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Tier {
    /// Every tier: the x86 ones, then the aarch64 ones, each architecture's slowest first.
    pub const ALL: [Tier; 8] = [
        Tier::Scalar,
        Tier::Avx2,
        Tier::AvxVnni,
        Tier::Avx512,
        Tier::Avx512Vnni,
        Tier::Neon,
        Tier::Dotprod,
        Tier::I8mm,
    ];

    /// The tier's name as accepted by `TURBOINFER_KERNELS`.
    pub fn name(self) -> &'static str {
        match self {
            Tier::Scalar => "scalar",
            Tier::Avx2 => "avx2",
            Tier::AvxVnni => "avxvnni",
            Tier::Avx512 => "avx512",
            Tier::Avx512Vnni => "avx512vnni",
            Tier::Neon => "neon",
            Tier::Dotprod => "dotprod",
            Tier::I8mm => "i8mm",
        }
    }

    /// `Ok` if `f` has every extension the tier needs, else the first missing one.
    pub fn check(self, f: &CpuFeatures) -> Result<(), KernelError> {
        let arch_x86 = cfg!(target_arch = "x86_64");
        let arch_arm = cfg!(target_arch = "aarch64");
        // Each tier needs its base tier's extensions plus its own.
        let (base, own): (Option<Tier>, &[(&'static str, bool)]) = match self {
            Tier::Scalar => (None, &[]),
            Tier::Avx2 => {
                (None, &[("x86_64", arch_x86), ("avx2", f.avx2), ("fma", f.fma), ("f16c", f.f16c)])
            }
            Tier::AvxVnni => (Some(Tier::Avx2), &[("avxvnni", f.avxvnni)]),
            Tier::Avx512 => (
                Some(Tier::Avx2),
                &[("avx512f", f.avx512f), ("avx512bw", f.avx512bw), ("avx512vl", f.avx512vl)],
            ),
            Tier::Avx512Vnni => (Some(Tier::Avx512), &[("avx512vnni", f.avx512vnni)]),
            Tier::Neon => (None, &[("aarch64", arch_arm), ("neon", f.neon)]),
            Tier::Dotprod => (Some(Tier::Neon), &[("dotprod", f.dotprod)]),
            Tier::I8mm => (Some(Tier::Dotprod), &[("i8mm", f.i8mm)]),
        };
        if let Some(Err(KernelError::Unsupported { missing, .. })) = base.map(|b| b.check(f)) {
            return Err(KernelError::Unsupported { tier: self, missing });
        }
        match own.iter().find(|(_, have)| !have) {
            Some((missing, _)) => Err(KernelError::Unsupported { tier: self, missing }),
            None => Ok(()),
        }
    }

    /// Whether this CPU can run the tier.
    pub fn supported(self, f: &CpuFeatures) -> bool {
        self.check(f).is_ok()
    }

    /// The fastest tier `f` supports.
    pub fn best(f: &CpuFeatures) -> Tier {
        // Preference order, fastest first: 512-bit VNNI, 512-bit, 256-bit VNNI, 256-bit; on aarch64
        // i8mm, dotprod, NEON (a CPU has tiers of one architecture only).
        [
            Tier::Avx512Vnni,
            Tier::Avx512,
            Tier::AvxVnni,
            Tier::Avx2,
            Tier::I8mm,
            Tier::Dotprod,
            Tier::Neon,
        ]
        .into_iter()
        .find(|t| t.supported(f))
        .unwrap_or(Tier::Scalar)
    }

    /// Every tier `f` supports, slowest first.
    pub fn available(f: &CpuFeatures) -> Vec<Tier> {
        Tier::ALL.into_iter().filter(|t| t.supported(f)).collect()
    }
}

/// Parses a `TURBOINFER_KERNELS` value (case-insensitive, surrounding blanks ignored) and checks that
/// `features` can run it: an unknown name or a tier the CPU lacks is an error, never a silent fallback.
pub fn parse_override(s: &str, features: &CpuFeatures) -> Result<Tier, KernelError> {
    let want = s.trim().to_ascii_lowercase();
    let tier = Tier::ALL
        .into_iter()
        .find(|t| t.name() == want)
        .ok_or_else(|| KernelError::UnknownTier(s.to_string()))?;
    tier.check(features)?;
    Ok(tier)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names round-trip and the override refuses unknown names and missing features.
    #[test]
    fn override_parsing() {
        let none = CpuFeatures::default();
        assert_eq!(parse_override(" Scalar ", &none), Ok(Tier::Scalar));
        assert!(matches!(parse_override("avx3", &none), Err(KernelError::UnknownTier(_))));
        assert!(matches!(
            parse_override("avx2", &none),
            Err(KernelError::Unsupported { tier: Tier::Avx2, .. })
        ));
        assert_eq!(Tier::best(&none), Tier::Scalar);
        if cfg!(target_arch = "x86_64") {
            let avx2 = CpuFeatures { avx2: true, fma: true, f16c: true, ..CpuFeatures::default() };
            assert_eq!(parse_override("AVX2", &avx2), Ok(Tier::Avx2));
            assert_eq!(Tier::best(&avx2), Tier::Avx2);
            let e = parse_override("avx512vnni", &avx2).unwrap_err();
            assert_eq!(e, KernelError::Unsupported { tier: Tier::Avx512Vnni, missing: "avx512f" });
            assert!(e.to_string().contains("missing avx512f"), "{e}");
            // ARM tiers are refused on x86 whatever the feature flags say.
            let arm =
                CpuFeatures { neon: true, dotprod: true, i8mm: true, ..CpuFeatures::default() };
            let e = parse_override("neon", &arm).unwrap_err();
            assert_eq!(e, KernelError::Unsupported { tier: Tier::Neon, missing: "aarch64" });
        }
        if cfg!(target_arch = "aarch64") {
            let neon = CpuFeatures { neon: true, ..CpuFeatures::default() };
            assert_eq!(parse_override("NEON", &neon), Ok(Tier::Neon));
            assert_eq!(Tier::best(&neon), Tier::Neon);
            let e = parse_override("i8mm", &neon).unwrap_err();
            assert_eq!(e, KernelError::Unsupported { tier: Tier::I8mm, missing: "dotprod" });
            let dot = CpuFeatures { dotprod: true, ..neon };
            assert_eq!(Tier::best(&dot), Tier::Dotprod);
            assert_eq!(Tier::best(&CpuFeatures { i8mm: true, ..dot }), Tier::I8mm);
            assert!(matches!(
                parse_override("avx2", &dot),
                Err(KernelError::Unsupported { tier: Tier::Avx2, missing: "x86_64" })
            ));
        }
    }
}
