//! The extension's informational SQL functions: version and CPU features.

use crate::kernels::cpu::cpu_features;
use pgrx::prelude::*;

/// `turboinfer_version()`: the version of the loaded library (the crate version).
///
/// STABLE like PostgreSQL's own `version()`: the answer depends on the installed binary, so it must
/// not be constant-folded into stored expressions; it has no arguments, so STRICT is moot.
#[pg_extern(stable, parallel_safe)]
fn turboinfer_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// `turboinfer_cpu_features()`: every SIMD feature known on this architecture and whether this
/// server's CPU (and OS) supports it. The engine's kernels dispatch on the same answer.
///
/// STABLE, not IMMUTABLE: a physical replica on another machine can give a different answer.
#[pg_extern(stable, parallel_safe)]
fn turboinfer_cpu_features(
) -> TableIterator<'static, (name!(feature, String), name!(detected, bool))> {
    TableIterator::new(cpu_features().list().into_iter().map(|(name, on)| (name.to_string(), on)))
}
