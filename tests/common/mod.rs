//! Shared helpers of the integration tests: where the real models and llama.cpp fixtures are.
#![allow(dead_code)]

use std::path::PathBuf;

/// Default directory of the GGUF models on this machine.
const DEFAULT_MODELS_DIR: &str = "/var/lib/turboinfer/models";

/// Path of model `name` (e.g. `smollm2-135m`) as `$TURBOINFER_MODELS_DIR/<name>.gguf`, or `None`
/// (after printing `skipping: ...`) when it is absent and not listed in
/// `$TURBOINFER_REQUIRE_MODELS`; panics when it is absent but required.
pub fn model_path(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("TURBOINFER_MODELS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(DEFAULT_MODELS_DIR));
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

/// Directory of the llama.cpp reference fixtures: `$TURBOINFER_FIXTURES_DIR`, default
/// `<crate root>/../shared/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("TURBOINFER_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures"))
}

/// The parsed llama.cpp fixture of model `name`: the `*.llamacpp.json` file whose name is `name`
/// followed by `.` or `-` (e.g. `qwen2.5-coder-0.5b-instruct-q4_k_m.llamacpp.json`). Panics if absent.
pub fn fixture(name: &str) -> serde_json::Value {
    let dir = fixtures_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("fixtures dir {}: {e}", dir.display()));
    let mut found = None;
    for e in entries {
        let file_name = e.expect("read fixtures dir").file_name().to_string_lossy().into_owned();
        if let Some(rest) = file_name.strip_prefix(name) {
            if (rest.starts_with('.') || rest.starts_with('-')) && file_name.ends_with(".llamacpp.json") {
                found = Some(dir.join(file_name));
            }
        }
    }
    let path = found.unwrap_or_else(|| panic!("no llama.cpp fixture for {name} in {}", dir.display()));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A JSON array of integers as token ids.
pub fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().expect("id array").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

/// The three models of this machine, smallest first.
pub const MODELS: [&str; 3] = ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"];
