//! Shared helpers for integration tests: where the real models and the llama.cpp fixtures live.
#![allow(dead_code)]

use std::path::PathBuf;

/// Default directory of the model files (`$TURBOINFER_MODELS_DIR` overrides it).
pub const DEFAULT_MODELS_DIR: &str = "/var/lib/turboinfer/models";

/// True when `$TURBOINFER_REQUIRE_MODELS` (comma-separated model names) lists `name`.
pub fn model_required(name: &str) -> bool {
    std::env::var("TURBOINFER_REQUIRE_MODELS")
        .map(|v| v.split(',').any(|n| n.trim() == name))
        .unwrap_or(false)
}

/// Path of model `name` (e.g. `"smollm2-135m"` -> `<dir>/smollm2-135m.gguf`), or `None` after
/// printing a skip notice when it is absent. Panics when it is absent but required.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("TURBOINFER_MODELS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_MODELS_DIR));
    let path = dir.join(format!("{name}.gguf"));
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
    std::env::var_os("TURBOINFER_FIXTURES_DIR").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("shared").join("fixtures")
    })
}

/// The fixture file of model `name` (`<fixtures>/<file>.llamacpp.json`).
pub fn fixture_path(name: &str) -> PathBuf {
    let file = match name {
        "qwen2.5-coder-0.5b" => "qwen2.5-coder-0.5b-instruct-q4_k_m",
        "qwen2.5-coder-1.5b" => "qwen2.5-coder-1.5b-instruct-q4_k_m",
        other => other,
    };
    fixtures_dir().join(format!("{file}.llamacpp.json"))
}

/// The parsed fixture of model `name`, or `None` (with a skip notice, or a panic when the model
/// is required) when the file is absent.
pub fn load_fixture(name: &str) -> Option<serde_json::Value> {
    let path = fixture_path(name);
    match std::fs::read_to_string(&path) {
        Ok(s) => Some(
            serde_json::from_str(&s)
                .unwrap_or_else(|e| panic!("fixture {} is not JSON: {e}", path.display())),
        ),
        Err(e) if model_required(name) => {
            panic!("required fixture {} unreadable: {e}", path.display())
        }
        Err(_) => {
            println!("skipping: fixture for {name} not found at {}", path.display());
            None
        }
    }
}

/// The parsed fixture of model `name`; panics when it is absent (callers have already found the model).
pub fn fixture(name: &str) -> serde_json::Value {
    let path = fixture_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("fixture {} is not JSON: {e}", path.display()))
}

/// A JSON array of integers as token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().expect("id array").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

/// The three models of this machine, smallest first.
pub const MODELS: [&str; 3] = ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"];
