//! Shared helpers for integration tests: where the real models and the llama.cpp fixtures live.
#![allow(dead_code)]

use std::path::PathBuf;

/// Default directory of the real models on this machine.
const DEFAULT_MODELS_DIR: &str = "/var/lib/turboinfer/models";

/// The path of model `name` (`<dir>/<name>.gguf`, dir from `$TURBOINFER_MODELS_DIR`), or `None` after
/// printing `skipping: …` when it is absent. Panics instead when `$TURBOINFER_REQUIRE_MODELS`
/// (comma-separated names) lists `name`, so CI can insist on real-model coverage.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("TURBOINFER_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MODELS_DIR));
    let path = dir.join(format!("{name}.gguf"));
    if path.is_file() {
        return Some(path);
    }
    let required = std::env::var("TURBOINFER_REQUIRE_MODELS").unwrap_or_default();
    if required.split(',').map(str::trim).any(|r| r == name) {
        panic!("required model {name} not found at {}", path.display());
    }
    eprintln!("skipping: {name} not found at {}", path.display());
    None
}

/// Directory of the llama.cpp reference fixtures (`$TURBOINFER_FIXTURES_DIR`, default
/// `<crate root>/../shared/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("TURBOINFER_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared").join("fixtures"))
}
