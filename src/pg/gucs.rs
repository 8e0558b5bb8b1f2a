//! The extension's settings (GUCs), registered when the library is loaded.

use crate::nl2sql::model_path::{self, MODELS_DIR};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};
use std::path::Path;

/// `turboinfer.model`: a fetched model's name or a path inside the models directory.
pub static MODEL: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// `turboinfer.threads`: worker threads (0 = one per available CPU).
pub static THREADS: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `turboinfer.max_new_tokens`: most tokens generated per answer.
pub static MAX_NEW_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(128);
/// `turboinfer.context_tokens`: KV cache positions (prompt + answer + repair).
pub static CONTEXT_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(4096);
/// `turboinfer.cache_dir`: directory for the cross-backend prefix cache file (empty = off).
pub static CACHE_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// `turboinfer.vocab_pruning`: LM head over the active vocabulary only.
pub static VOCAB_PRUNING: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `turboinfer.schema_constraints`: table and column names limited to the visible schema.
pub static SCHEMA_CONSTRAINTS: GucSetting<bool> = GucSetting::<bool>::new(false);

/// Most worker threads accepted: more than the cores only adds contention.
const MAX_THREADS: i32 = 256;
/// Generation budget bounds: at least one token; 8192 is far beyond any single query.
const MAX_NEW_TOKENS_LIMIT: i32 = 8192;
/// Context bounds: 256 positions fit a tiny schema; 131072 is the largest training context of
/// the supported model families (the model's own limit clamps it further).
const MIN_CONTEXT: i32 = 256;
const MAX_CONTEXT: i32 = 131072;

/// Registers every setting (called from `_PG_init`).
pub fn register() {
    // SAFETY: the check hook only reads the proposed value and sets GUC message strings.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"turboinfer.model",
            c"Model used by nl2sql(): a fetched model name or a .gguf path inside /var/lib/turboinfer/models.",
            c"Superuser only. Install models with: make fetch-model MODEL=qwen2.5-coder-0.5b",
            &MODEL,
            GucContext::Suset,
            GucFlags::default(),
            Some(check_model),
            None,
            None,
        );
    }
    GucRegistry::define_int_guc(
        c"turboinfer.threads",
        c"Worker threads for inference in each backend (0 = one per CPU core).",
        c"Takes effect at the next call; the pool is rebuilt when the value changes.",
        &THREADS,
        0,
        MAX_THREADS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.max_new_tokens",
        c"Most tokens nl2sql() generates per answer.",
        c"",
        &MAX_NEW_TOKENS,
        1,
        MAX_NEW_TOKENS_LIMIT,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.context_tokens",
        c"KV cache positions per backend: schema prompt + question + answer + repair.",
        c"Larger schemas need more; the model's training context is the upper bound.",
        &CONTEXT_TOKENS,
        MIN_CONTEXT,
        MAX_CONTEXT,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"turboinfer.vocab_pruning",
        c"Compute logits only for the tokens SQL over this schema and question can use.",
        c"Faster decoding; the answer changes only when the model's favourite token lies outside that set.",
        &VOCAB_PRUNING,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"turboinfer.schema_constraints",
        c"While nl2sql() writes a table or column name, allow only names of the visible schema.",
        c"",
        &SCHEMA_CONSTRAINTS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"turboinfer.cache_dir",
        c"Directory for the cross-backend schema-prefix cache file (empty: per-backend cache only).",
        c"Superuser only.",
        &CACHE_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
}

/// The current `turboinfer.model` value ("" when unset).
pub fn model_setting() -> String {
    MODEL.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Check hook of `turboinfer.model`: refuses values that resolve outside the models directory
/// (the file itself is only checked when it is loaded: it may be fetched later).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_model(newval: *mut *mut std::ffi::c_char, _extra: *mut *mut std::ffi::c_void, _source: pg_sys::GucSource::Type) -> bool {
    if newval.is_null() || (*newval).is_null() {
        return true;
    }
    let value = CStr::from_ptr(*newval).to_string_lossy().into_owned();
    if value.trim().is_empty() {
        return true;
    }
    match model_path::resolve(&value, Path::new(MODELS_DIR)) {
        Ok(_) => true,
        Err(e) => {
            let detail = CString::new(e.to_string()).unwrap_or_default();
            pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(detail.as_ptr());
            let hint = CString::new(format!("Use a model name (e.g. qwen2.5-coder-0.5b) or a path inside {MODELS_DIR}.")).unwrap_or_default();
            pg_sys::GUC_check_errhint_string = pg_sys::pstrdup(hint.as_ptr());
            false
        }
    }
}
