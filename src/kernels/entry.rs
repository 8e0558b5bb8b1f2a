//! `entry!`: the safe entry points of one weight type's SIMD kernel (`vec_dot`, `vec_dot_batch`
//! and their `TypeKernels`), shared by the SIMD tiers (`x86`, `aarch64`): lengths checked
//! (`bounds::check`), then the `#[target_feature]` body for the batch's vector count.

/// Defines module `$name` with safe `vec_dot`/`vec_dot_batch` for kernel `$k::<$g.., B>` compiled
/// with `$feat`; `$qk` elements per block, `$wb`/`$ab` weight/activation bytes per block; batches
/// are cut into chunks of `$maxb` vectors, each run by the instance for its size (`[$($b)+]`,
/// 1 to `$maxb`).
macro_rules! entry {
    ($name:ident, $feat:literal, $maxb:expr, [$($b:literal)+], $qk:expr, $wb:expr, $ab:expr, $($k:ident)::+, [$($g:ty),*]) => {
        pub(crate) mod $name {
            use super::*;
            use crate::kernels::bounds::{check, Geometry};

            /// The kernel for `B` vectors, compiled for this tier.
            #[target_feature(enable = $feat)]
            unsafe fn run<const B: usize>(nb: usize, w: *const u8, a: *const u8, stride: usize, out: *mut f32) {
                $($k)::+::<$($g,)* B>(nb, w, a, stride, out)
            }

            /// One weight row · one activation vector.
            pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
                let nb = check(n, Geometry { qk: $qk, wb: $wb, ab: $ab }, w.len(), act.len(), 0, 1);
                let mut o = [0.0f32; 1];
                // SAFETY: lengths checked above; this fn is only reachable through a KernelSet of a tier
                // whose features (`$feat`) the CPU was detected to have.
                unsafe { run::<1>(nb, w.as_ptr(), act.as_ptr(), 0, o.as_mut_ptr()) };
                o[0]
            }

            /// One weight row · `out.len()` activation vectors `stride` bytes apart.
            pub(crate) fn vec_dot_batch(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]) {
                let nb = check(n, Geometry { qk: $qk, wb: $wb, ab: $ab }, w.len(), acts.len(), stride, out.len());
                for (c, o) in out.chunks_mut($maxb).enumerate() {
                    // SAFETY: every vector of this chunk lies inside `acts` (checked above); features as in `vec_dot`.
                    unsafe {
                        let a = acts.as_ptr().add(c * $maxb * stride);
                        let (w, len, o) = (w.as_ptr(), o.len(), o.as_mut_ptr());
                        match len {
                            $($b => run::<$b>(nb, w, a, stride, o),)+
                            _ => unreachable!("chunks of at most {} vectors", $maxb),
                        }
                    }
                }
            }

            /// The pair as a table entry.
            pub(crate) const KERNELS: crate::kernels::TypeKernels = crate::kernels::TypeKernels { vec_dot, vec_dot_batch };
        }
    };
}

pub(crate) use entry;
