//! Run-time CPU feature detection, done once per process; the SIMD kernels dispatch on it.
//!
//! Detection uses the standard library's `is_x86_feature_detected!` / `is_aarch64_feature_detected!`,
//! which check both the CPU (CPUID / HWCAP) and that the OS saves the wider register state, so a
//! `true` here means the instructions are safe to execute. No `target-cpu=native` is ever used:
//! one binary runs everywhere and picks its kernels at run time.

use std::sync::OnceLock;

/// The instruction-set extensions TurboInfer can use. Fields of the other architecture are `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuFeatures {
    /// x86-64: 256-bit integer and float SIMD.
    pub avx2: bool,
    /// x86-64: fused multiply-add on 128/256-bit vectors.
    pub fma: bool,
    /// x86-64: half-precision <-> single-precision conversion.
    pub f16c: bool,
    /// x86-64: AVX-512 foundation (512-bit registers, mask registers).
    pub avx512f: bool,
    /// x86-64: AVX-512 byte and word instructions.
    pub avx512bw: bool,
    /// x86-64: AVX-512 instructions on 128/256-bit vectors.
    pub avx512vl: bool,
    /// x86-64: AVX-512 VNNI (`vpdpbusd`, int8 dot products on 512-bit vectors).
    pub avx512vnni: bool,
    /// x86-64: VEX-encoded VNNI (int8 dot products on 256-bit vectors, no AVX-512 needed).
    pub avxvnni: bool,
    /// aarch64: Advanced SIMD (always present on aarch64 Linux).
    pub neon: bool,
    /// aarch64: `sdot`/`udot` int8 dot products.
    pub dotprod: bool,
    /// aarch64: `smmla` int8 matrix multiply.
    pub i8mm: bool,
}

/// The process-wide answer, computed on first use.
static FEATURES: OnceLock<CpuFeatures> = OnceLock::new();

/// Returns the features of the CPU this process runs on (detected once, then cached).
pub fn cpu_features() -> &'static CpuFeatures {
    FEATURES.get_or_init(CpuFeatures::detect)
}

impl CpuFeatures {
    /// Queries the CPU and OS for every feature known on the current architecture.
    #[cfg(target_arch = "x86_64")]
    pub fn detect() -> CpuFeatures {
        CpuFeatures {
            avx2: is_x86_feature_detected!("avx2"),
            fma: is_x86_feature_detected!("fma"),
            f16c: is_x86_feature_detected!("f16c"),
            avx512f: is_x86_feature_detected!("avx512f"),
            avx512bw: is_x86_feature_detected!("avx512bw"),
            avx512vl: is_x86_feature_detected!("avx512vl"),
            avx512vnni: is_x86_feature_detected!("avx512vnni"),
            avxvnni: is_x86_feature_detected!("avxvnni"),
            ..CpuFeatures::default()
        }
    }

    /// Queries the CPU and OS for every feature known on the current architecture.
    #[cfg(target_arch = "aarch64")]
    pub fn detect() -> CpuFeatures {
        CpuFeatures {
            neon: std::arch::is_aarch64_feature_detected!("neon"),
            dotprod: std::arch::is_aarch64_feature_detected!("dotprod"),
            i8mm: std::arch::is_aarch64_feature_detected!("i8mm"),
            ..CpuFeatures::default()
        }
    }

    /// On other architectures no SIMD feature is known: everything runs the scalar kernels.
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub fn detect() -> CpuFeatures {
        CpuFeatures::default()
    }

    /// Every feature known for the current architecture, in a fixed order, with its detected value.
    pub fn list(&self) -> Vec<(&'static str, bool)> {
        if cfg!(target_arch = "x86_64") {
            vec![
                ("avx2", self.avx2),
                ("fma", self.fma),
                ("f16c", self.f16c),
                ("avx512f", self.avx512f),
                ("avx512bw", self.avx512bw),
                ("avx512vl", self.avx512vl),
                ("avx512vnni", self.avx512vnni),
                ("avxvnni", self.avxvnni),
            ]
        } else if cfg!(target_arch = "aarch64") {
            vec![("neon", self.neon), ("dotprod", self.dotprod), ("i8mm", self.i8mm)]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached answer is computed once and equals a fresh detection.
    #[test]
    fn detection_is_cached_and_stable() {
        let a = cpu_features();
        let b = cpu_features();
        assert!(std::ptr::eq(a, b), "OnceLock must hand out the same instance");
        assert_eq!(*a, CpuFeatures::detect());
    }

    /// The list has unique names, matches the struct fields, and is non-empty on supported arches.
    #[test]
    fn list_is_consistent() {
        let f = cpu_features();
        let list = f.list();
        let mut names: Vec<&str> = list.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), list.len(), "duplicate feature names in {list:?}");
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            assert!(!list.is_empty());
        }
        let detected = list.iter().filter(|(_, d)| *d).count();
        let fields = [
            f.avx2,
            f.fma,
            f.f16c,
            f.avx512f,
            f.avx512bw,
            f.avx512vl,
            f.avx512vnni,
            f.avxvnni,
            f.neon,
            f.dotprod,
            f.i8mm,
        ];
        assert_eq!(
            detected,
            fields.iter().filter(|b| **b).count(),
            "list() must cover every field"
        );
    }

    /// Architectural implications hold on this machine's answer (a sub-extension needs its base).
    #[test]
    fn implications_hold() {
        let f = cpu_features();
        for (sub, on) in
            [("avx512bw", f.avx512bw), ("avx512vl", f.avx512vl), ("avx512vnni", f.avx512vnni)]
        {
            assert!(!on || f.avx512f, "{sub} detected without avx512f: {f:?}");
        }
        // AVX-512 is a superset of AVX2 on every CPU that ships it.
        assert!(!f.avx512f || f.avx2, "avx512f without avx2: {f:?}");
        assert!(!f.dotprod || f.neon, "dotprod without neon: {f:?}");
        assert!(!f.i8mm || f.neon, "i8mm without neon: {f:?}");
    }

    /// On Linux x86-64, every detected feature is also listed by the kernel in /proc/cpuinfo.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[test]
    fn agrees_with_proc_cpuinfo() {
        let Ok(text) = std::fs::read_to_string("/proc/cpuinfo") else {
            eprintln!("skipping: /proc/cpuinfo not readable");
            return;
        };
        let flags: std::collections::HashSet<&str> = text
            .lines()
            .find(|l| l.starts_with("flags"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.split_whitespace().collect())
            .unwrap_or_default();
        // Kernel spellings differ from Rust's for the VNNI flags.
        let kernel_name = |n: &'static str| -> &'static str {
            match n {
                "avx512vnni" => "avx512_vnni",
                "avxvnni" => "avx_vnni",
                other => other,
            }
        };
        for (name, on) in cpu_features().list() {
            if on {
                assert!(
                    flags.contains(kernel_name(name)),
                    "{name} detected but not in /proc/cpuinfo flags"
                );
            }
        }
    }
}
