//! Shared helpers for integration tests: where the real models and llama.cpp fixtures live.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Directory holding the real model files (`$TURBOINFER_MODELS_DIR`, default `/var/lib/turboinfer/models`).
pub fn models_dir() -> PathBuf {
    std::env::var_os("TURBOINFER_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/turboinfer/models"))
}

/// True when `$TURBOINFER_REQUIRE_MODELS` (comma-separated model names) lists `name`.
pub fn model_required(name: &str) -> bool {
    std::env::var("TURBOINFER_REQUIRE_MODELS")
        .map(|v| v.split(',').any(|n| n.trim() == name))
        .unwrap_or(false)
}

/// Path of model `name` (e.g. `smollm2-135m`, file `<models dir>/<name>.gguf`) if it exists.
/// When absent: prints `skipping: <name> not found at <path>` and returns `None`, unless
/// `$TURBOINFER_REQUIRE_MODELS` lists it, in which case it panics (the test fails).
pub fn model_path(name: &str) -> Option<PathBuf> {
    let path = models_dir().join(format!("{name}.gguf"));
    if path.is_file() {
        return Some(path);
    }
    if model_required(name) {
        panic!("required model {name} not found at {} (TURBOINFER_REQUIRE_MODELS)", path.display());
    }
    println!("skipping: {name} not found at {}", path.display());
    None
}

/// Directory of the llama.cpp reference fixtures (`$TURBOINFER_FIXTURES_DIR`, default
/// `<crate root>/../shared/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("TURBOINFER_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"))
}
