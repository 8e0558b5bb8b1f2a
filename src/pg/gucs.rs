//! The extension's settings (GUCs), registered when the library is loaded.

use crate::generate::kv_file::KvFileDir;
use crate::nl2sql::model_path::{self, MODELS_DIR};
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// `turboinfer.model`: a fetched model's name or a path inside the models directory. Its default
/// is [`DEFAULT_MODEL`] (what `turboinfer-fetch-model` installs without arguments), so that a
/// cluster where nothing is set uses that model if it is installed; `''` means no model.
pub static MODEL: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(DEFAULT_MODEL_C));
/// The default model's name (the boot value of `turboinfer.model`).
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-1.5b";
const DEFAULT_MODEL_C: &CStr = c"qwen2.5-coder-1.5b";
/// `turboinfer.threads`: worker threads (0 = one per available CPU).
pub static THREADS: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `turboinfer.max_new_tokens`: most tokens generated per answer.
pub static MAX_NEW_TOKENS: GucSetting<i32> =
    GucSetting::<i32>::new(crate::nl2sql::DEFAULT_MAX_NEW_TOKENS as i32);
/// `turboinfer.repair_rounds`: most repair rounds after a rejected answer.
pub static REPAIR_ROUNDS: GucSetting<i32> =
    GucSetting::<i32>::new(crate::nl2sql::DEFAULT_REPAIR_ROUNDS as i32);
/// Most repair rounds accepted: each costs a prefill of the repair turn and a full answer; past
/// a few rounds a small model repeats its mistakes.
const MAX_REPAIR_ROUNDS: i32 = 5;
/// `turboinfer.candidates`: answers weighed per question (1 = the greedy answer only).
pub static CANDIDATES: GucSetting<i32> =
    GucSetting::<i32>::new(crate::nl2sql::DEFAULT_CANDIDATES as i32);
/// Most candidates: each is a prefill of its shared prefix plus a decode of its tail (and, with
/// execution, one read-only run); past 8 the branches are at positions the model was sure of.
const MAX_CANDIDATES: i32 = 8;
/// `turboinfer.examples`: approved examples shown per question (`nl2sql::examples`).
pub static EXAMPLES: GucSetting<i32> =
    GucSetting::<i32>::new(crate::nl2sql::DEFAULT_EXAMPLES as i32);
/// More examples than this would not fit `nl2sql::examples::TOKEN_BUDGET` anyway.
const MAX_EXAMPLES: i32 = 8;
/// `turboinfer.samples`: sampled candidate answers decoded together (0 = none).
pub static SAMPLES: GucSetting<i32> = GucSetting::<i32>::new(crate::nl2sql::DEFAULT_SAMPLES as i32);
/// Most samples: each holds its own copy of the question's cache rows (for the 1.5B model 28
/// layers × 2 × 256 floats = 57 KB per position: ~110 MB for a 1,500-token prompt and its answer).
const MAX_SAMPLES: i32 = 8;
/// `turboinfer.schema_encoder`: the sentence encoder that picks the tables when a schema does not
/// fit the context (`nl2sql::link`); empty: by the question's words.
pub static SCHEMA_ENCODER: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"all-minilm-l6-v2"));
/// `turboinfer.schema_tokens`: most prompt tokens of schema when not every table fits (0 = up to
/// the context).
pub static SCHEMA_TOKENS: GucSetting<i32> =
    GucSetting::<i32>::new(crate::nl2sql::DEFAULT_SCHEMA_TOKENS as i32);
/// `turboinfer.candidate_execution`: run candidate answers read-only and prefer the result most
/// of them agree on.
pub static CANDIDATE_EXECUTION: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `turboinfer.result_check`: run each valid answer read-only once; a data exception is a
/// rejection, an empty result a doubt (one repair round, the answer kept when the repair does
/// no better). Off by default: nl2sql() executes nothing unless asked to.
pub static RESULT_CHECK: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `turboinfer.refusal`: refuse a question the visible schema cannot answer (ERROR P0002)
/// instead of writing a query for it.
pub static REFUSAL: GucSetting<Refusal> = GucSetting::<Refusal>::new(Refusal::Auto);

/// The values of `turboinfer.refusal`.
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Refusal {
    /// The check with the margin measured for the loaded model; none for a model without one.
    #[name = c"auto"]
    Auto,
    /// The check for every model, with `turboinfer.refusal_margin`.
    #[name = c"on"]
    On,
    /// No check: every question gets a query.
    #[name = c"off"]
    Off,
}

impl Refusal {
    /// The engine's mode (`on` with the current `turboinfer.refusal_margin`).
    pub fn mode(self) -> crate::nl2sql::refusal::RefusalMode {
        use crate::nl2sql::refusal::RefusalMode;
        match self {
            Refusal::Auto => RefusalMode::Auto,
            Refusal::On => RefusalMode::Margin(REFUSAL_MARGIN.get() as f32),
            Refusal::Off => RefusalMode::Off,
        }
    }
}

/// `turboinfer.refusal_margin`: how sure the model must be before nl2sql refuses with
/// `turboinfer.refusal = on` (see `nl2sql::refusal`): a refusal needs `log p(no) - log p(yes)`
/// above this value (and above it minus `refusal::NO_MATCH_ALLOWANCE` when no word of the
/// question is in the schema).
pub static REFUSAL_MARGIN: GucSetting<f64> =
    GucSetting::<f64>::new(crate::nl2sql::refusal::DEFAULT_MARGIN as f64);
/// `turboinfer.context_tokens`: KV cache positions (prompt + answer + repair).
pub static CONTEXT_TOKENS: GucSetting<i32> = GucSetting::<i32>::new(4096);
/// `turboinfer.threads_limit`: most worker threads a non-superuser may ask for (0 = the CPU
/// cores); also what `turboinfer.threads = 0` means for everyone.
pub static THREADS_LIMIT: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `turboinfer.context_tokens_limit`: most KV positions a non-superuser may ask for.
pub static CONTEXT_TOKENS_LIMIT: GucSetting<i32> =
    GucSetting::<i32>::new(DEFAULT_CONTEXT_TOKENS_LIMIT);
/// `turboinfer.max_new_tokens_limit`: most tokens per answer a non-superuser may ask for.
pub static MAX_NEW_TOKENS_LIMIT: GucSetting<i32> =
    GucSetting::<i32>::new(DEFAULT_MAX_NEW_TOKENS_LIMIT);
/// `turboinfer.speculation`: speculative decoding in nl2sql() (same answers, fewer passes).
pub static SPECULATION: GucSetting<bool> = GucSetting::<bool>::new(true);
/// `turboinfer.cache_dir`: directory of the cross-backend schema-prefix cache files (empty =
/// `turboinfer_cache` in the data directory; a relative path is relative to the data directory).
pub static CACHE_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// `turboinfer.cache_max_mb`: size limit of the cache files, least recently used evicted first
/// (0 = no cache files).
pub static CACHE_MAX_MB: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_CACHE_MAX_MB);

/// `turboinfer.weight_budget_mb`: memory a backend's model may keep its weights in; a model that
/// reads more per forward pass streams them (0 = no limit, the page cache decides).
pub static WEIGHT_BUDGET_MB: GucSetting<i32> = GucSetting::<i32>::new(0);

/// `turboinfer.sparsity`: sparse FFN target level in nl2sql() (0 = off, the dense FFN).
pub static SPARSITY: GucSetting<f64> = GucSetting::<f64>::new(0.0);
/// `turboinfer.sparse_selector`: how the sparse FFN picks a token's active neurons.
pub static SPARSE_SELECTOR: GucSetting<SparseSelector> =
    GucSetting::<SparseSelector>::new(SparseSelector::Predictor);

/// Values of `turboinfer.sparse_selector` (the engine's `sparse::Selector`).
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum SparseSelector {
    /// The sidecar's low-rank predictor: skips gate, up and down of the neurons it rules out.
    #[name = c"predictor"]
    Predictor,
    /// The exact gate: every gate row computed, up and down only for the top (1 - sparsity).
    #[name = c"gate"]
    Gate,
}

impl SparseSelector {
    /// The engine's selector.
    pub fn engine(self) -> crate::sparse::Selector {
        match self {
            SparseSelector::Predictor => crate::sparse::Selector::Predictor,
            SparseSelector::Gate => crate::sparse::Selector::Gate,
        }
    }
}

/// `turboinfer.sparse_dir`: directory of the sparse FFN sidecars the server writes (empty =
/// `turboinfer_sparse` in the data directory; a relative path is relative to the data directory).
pub static SPARSE_DIR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// `turboinfer.max_concurrent`: most generations running at once in the whole server (0 = no
/// limit); the other callers wait in arrival order (`slots`).
pub static MAX_CONCURRENT: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_MAX_CONCURRENT);
/// Default of `turboinfer.max_concurrent`: one generation at a time. `turboinfer.threads = 0`
/// gives that one generation every core, so a second one at once only shares the same cores
/// (more threads than cores, each caller slower); one at a time keeps the total and lets the
/// first callers finish first.
const DEFAULT_MAX_CONCURRENT: i32 = 1;
/// Most slots accepted (a lock per slot is tried while waiting).
const MAX_MAX_CONCURRENT: i32 = 1024;

/// `turboinfer.batch_worker`: with the library preloaded, a background worker runs every
/// backend's forward passes in batches (`worker`). Read at server start.
pub static BATCH_WORKER: GucSetting<bool> = GucSetting::<bool>::new(false);
/// `turboinfer.batch_memory_mb`: the batch worker's KV caches (`worker`). 2048 MB holds nine
/// sequences of 4,096 positions of the 1.5B model (224 MB each, f32): eight callers at once
/// and a ninth sequence for sampled candidates or a caller's schema prefix kept warm.
pub static BATCH_MEMORY_MB: GucSetting<i32> = GucSetting::<i32>::new(2048);

/// `turboinfer.schema_cache`: keep the schema read from the catalog in the backend until the
/// catalog changes (`catalog_cache`).
pub static SCHEMA_CACHE: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `turboinfer.log_queries`: the level at which each call of the nl2sql family is logged once
/// (question, SQL, outcome, repair rounds, time), or `off`.
pub static LOG_QUERIES: GucSetting<LogQueries> = GucSetting::<LogQueries>::new(LogQueries::Off);

/// Values of `turboinfer.log_queries`: `off` or a message level, as for log_min_messages.
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum LogQueries {
    #[name = c"off"]
    Off,
    #[name = c"debug5"]
    Debug5,
    #[name = c"debug4"]
    Debug4,
    #[name = c"debug3"]
    Debug3,
    #[name = c"debug2"]
    Debug2,
    #[name = c"debug1"]
    Debug1,
    #[name = c"info"]
    Info,
    #[name = c"notice"]
    Notice,
    #[name = c"warning"]
    Warning,
    #[name = c"log"]
    Log,
}

impl LogQueries {
    /// The message level, `None` for `off`.
    pub fn level(self) -> Option<pgrx::PgLogLevel> {
        use pgrx::PgLogLevel as L;
        Some(match self {
            LogQueries::Off => return None,
            LogQueries::Debug5 => L::DEBUG5,
            LogQueries::Debug4 => L::DEBUG4,
            LogQueries::Debug3 => L::DEBUG3,
            LogQueries::Debug2 => L::DEBUG2,
            LogQueries::Debug1 => L::DEBUG1,
            LogQueries::Info => L::INFO,
            LogQueries::Notice => L::NOTICE,
            LogQueries::Warning => L::WARNING,
            LogQueries::Log => L::LOG,
        })
    }
}

/// `turboinfer.progress`: after how many ms of a call a cold schema prefill reports its progress
/// in NOTICEs (-1 = never, the default: see [`register`]).
pub static PROGRESS: GucSetting<i32> = GucSetting::<i32>::new(-1);
/// Largest `turboinfer.progress` accepted: one hour, far beyond any prefill.
const MAX_PROGRESS_MS: i32 = 3_600_000;

/// When progress NOTICEs start (ms into a call), `None` when off.
pub fn progress_after_ms() -> Option<f64> {
    let v = PROGRESS.get();
    (v >= 0).then_some(f64::from(v))
}

/// `turboinfer.schema_tokens` bound: the largest context a model here has (the engine caps the
/// budget at the context anyway).
const MAX_SCHEMA_TOKENS: i32 = 131_072;

/// The encoder `turboinfer.schema_encoder` names, or `None` when empty (tables by words).
pub fn schema_encoder() -> Option<String> {
    let name = SCHEMA_ENCODER.get().map(|c| c.to_string_lossy().trim().to_string());
    name.filter(|n| !n.is_empty())
}

/// Most worker threads accepted: more than the cores only adds contention.
const MAX_THREADS: i32 = 256;
/// Generation budget bounds: at least one token; 8192 is far beyond any single query.
const MAX_NEW_TOKENS_MAX: i32 = 8192;
/// Default ceiling of `turboinfer.max_new_tokens` for non-superusers: 2.7x the default budget
/// (384), more than any query of the test and benchmark suites needs, while one answer stays
/// around a minute of CPU at the 1.5B model's ~60 ms per decoded token.
const DEFAULT_MAX_NEW_TOKENS_LIMIT: i32 = 1024;
/// Default ceiling of `turboinfer.context_tokens` for non-superusers: twice the default (4096),
/// and at most 448 MiB of f32 KV cache per backend with the 1.5B model (56 KiB per position).
const DEFAULT_CONTEXT_TOKENS_LIMIT: i32 = 8192;
/// Context bounds: 256 positions fit a tiny schema; 131072 is the largest training context of
/// the supported model families (the model's own limit clamps it further).
const MIN_CONTEXT: i32 = 256;
const MAX_CONTEXT: i32 = 131072;
/// Default cache file budget: a schema prefix of 1000 tokens is 24 MB (0.5B model, f32 KV) to
/// 56 MB (1.5B), so 1 GiB keeps a few dozen schemas/roles/models without filling a small disk.
const DEFAULT_CACHE_MAX_MB: i32 = 1024;
/// Largest budget accepted (1 TiB): far beyond any realistic set of prefixes.
const MAX_CACHE_MAX_MB: i32 = 1 << 20;
/// Largest weight budget accepted (1 TiB), as for the cache files.
const MAX_WEIGHT_BUDGET_MB: i32 = 1 << 20;
/// Directory used when `turboinfer.cache_dir` is empty, inside the data directory.
const DEFAULT_CACHE_SUBDIR: &str = "turboinfer_cache";
/// Directory used when `turboinfer.sparse_dir` is empty, inside the data directory.
const DEFAULT_SPARSE_SUBDIR: &str = "turboinfer_sparse";
/// Highest sparsity accepted: calibration needs a non-empty active set per level, and beyond 95%
/// skipped neurons even the oracle selection (docs/sparse-ffn.md) loses most of the model's accuracy.
pub const MAX_SPARSITY: f64 = 0.95;

/// Registers every setting (called from `_PG_init`).
pub fn register() {
    // SAFETY: the check hook only reads the proposed value and sets GUC message strings.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"turboinfer.model",
            c"Model used by nl2sql(): a fetched model name or a .gguf path inside /var/lib/turboinfer/models.",
            c"Superuser only. Default: qwen2.5-coder-1.5b (installed by turboinfer-fetch-model without arguments); empty: no model.",
            &MODEL,
            GucContext::Suset,
            GucFlags::default(),
            Some(check_model),
            None,
            None,
        );
    }
    // SAFETY: the check hooks only read the proposed value and the ceilings, call superuser()
    // inside a transaction, and set GUC message strings.
    unsafe {
        GucRegistry::define_int_guc_with_hooks(
            c"turboinfer.threads",
            c"Worker threads for inference in each backend (0 = one per CPU core, at most turboinfer.threads_limit).",
            c"Takes effect at the next call; the pool is rebuilt when the value changes. Non-superusers may not exceed turboinfer.threads_limit.",
            &THREADS,
            0,
            MAX_THREADS,
            GucContext::Userset,
            GucFlags::default(),
            Some(check_threads),
            None,
            None,
        );
        GucRegistry::define_int_guc_with_hooks(
            c"turboinfer.max_new_tokens",
            c"Most tokens nl2sql() generates per answer.",
            c"Non-superusers may not exceed turboinfer.max_new_tokens_limit.",
            &MAX_NEW_TOKENS,
            1,
            MAX_NEW_TOKENS_MAX,
            GucContext::Userset,
            GucFlags::default(),
            Some(check_max_new_tokens),
            None,
            None,
        );
        GucRegistry::define_int_guc_with_hooks(
            c"turboinfer.context_tokens",
            c"KV cache positions per backend: schema prompt + question + answer + repair.",
            c"Larger schemas need more; the model's training context is the upper bound. Non-superusers may not exceed turboinfer.context_tokens_limit.",
            &CONTEXT_TOKENS,
            MIN_CONTEXT,
            MAX_CONTEXT,
            GucContext::Userset,
            GucFlags::default(),
            Some(check_context_tokens),
            None,
            None,
        );
    }
    GucRegistry::define_int_guc(
        c"turboinfer.threads_limit",
        c"Most worker threads a non-superuser may set in turboinfer.threads (0 = the number of CPU cores).",
        c"Superuser only. Also the thread count of turboinfer.threads = 0.",
        &THREADS_LIMIT,
        0,
        MAX_THREADS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.max_concurrent",
        c"Most nl2sql() generations running at once in the whole server (0 = no limit).",
        c"Superuser only. Other callers wait in arrival order (cancellable); turboinfer_info() shows who holds and who waits. With turboinfer.threads = 0 each generation gets the cores divided by this value.",
        &MAX_CONCURRENT,
        0,
        MAX_MAX_CONCURRENT,
        GucContext::Suset,
        GucFlags::default(),
    );
    // Server-start settings exist only while the library is being preloaded: PostgreSQL makes
    // defining a PGC_POSTMASTER variable later (a backend loading the library) a FATAL error.
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        GucRegistry::define_bool_guc(
            c"turboinfer.batch_worker",
            c"With turboinfer in shared_preload_libraries: one background worker owns the model and runs the forward passes of every backend's nl2sql() calls in batches.",
            c"Takes effect at server start. Off: each backend maps the model and computes by itself. turboinfer_info() shows the worker under batch_worker.",
            &BATCH_WORKER,
            GucContext::Postmaster,
            GucFlags::default(),
        );
        GucRegistry::define_int_guc(
            c"turboinfer.batch_memory_mb",
            c"Memory for the batch worker's KV caches, in MB (least recently used sequences are evicted and recomputed).",
            c"Takes effect at server start. Each sequence takes the KV cache of turboinfer.context_tokens positions (224 MB for the 1.5B model at 4096).",
            &BATCH_MEMORY_MB,
            64,
            1 << 20,
            GucContext::Postmaster,
            GucFlags::UNIT_MB,
        );
    }
    GucRegistry::define_int_guc(
        c"turboinfer.max_new_tokens_limit",
        c"Most tokens per answer a non-superuser may set in turboinfer.max_new_tokens.",
        c"Superuser only.",
        &MAX_NEW_TOKENS_LIMIT,
        1,
        MAX_NEW_TOKENS_MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.context_tokens_limit",
        c"Most KV cache positions a non-superuser may set in turboinfer.context_tokens.",
        c"Superuser only. Each position costs 24 KiB (0.5B model) to 56 KiB (1.5B) of backend memory.",
        &CONTEXT_TOKENS_LIMIT,
        MIN_CONTEXT,
        MAX_CONTEXT,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.repair_rounds",
        c"Most repair rounds nl2sql() runs after PostgreSQL rejects an answer (0 = none).",
        c"Each round shows the model the server's error and the catalog facts it needs (real columns, closest names).",
        &REPAIR_ROUNDS,
        0,
        MAX_REPAIR_ROUNDS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.candidates",
        c"Candidate answers nl2sql() weighs per question (1 = the model's first answer only).",
        c"Extra candidates branch off the first answer where the model was least sure; they are decoded when the first answer is rejected, or always with turboinfer.candidate_execution.",
        &CANDIDATES,
        1,
        MAX_CANDIDATES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.examples",
        c"Approved examples (nl2sql_learn) nl2sql() shows per question, the most similar ones (0 = none).",
        c"Only examples over relations the caller may read, within the schemas being searched; at most 768 prompt tokens of them.",
        &EXAMPLES,
        0,
        MAX_EXAMPLES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"turboinfer.schema_encoder",
        c"Sentence encoder (a directory in the models directory) that chooses the tables nl2sql() shows when the schema does not fit the context.",
        c"Tables are ranked by the similarity of their names, columns and comments to the question, each followed by the tables its foreign keys reference. Empty, or not installed: by the question's words. Install with turboinfer-fetch-model all-minilm-l6-v2.",
        &SCHEMA_ENCODER,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.schema_tokens",
        c"Most prompt tokens of schema nl2sql() shows when not every table fits the context (0 = up to the context).",
        c"The tables most likely meant, whole, up to this many tokens: a larger value shows more tables and prefills longer.",
        &SCHEMA_TOKENS,
        0,
        MAX_SCHEMA_TOKENS,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.samples",
        c"Sampled candidate answers nl2sql() decodes together per question (0 = none).",
        c"Drawn at temperature 0.7 from fixed seeds (the same question gets the same samples), decoded in one batch, weighed with the other candidates: with turboinfer.candidate_execution the result most candidates agree on wins.",
        &SAMPLES,
        0,
        MAX_SAMPLES,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"turboinfer.candidate_execution",
        c"Run candidate answers read-only (caller's privileges, row limit, short timeout) and prefer the result most agree on.",
        c"Off: nl2sql() never executes anything. On: each valid candidate runs in a read-only subtransaction that is rolled back.",
        &CANDIDATE_EXECUTION,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"turboinfer.result_check",
        c"Run each valid answer read-only once (caller's privileges, 100 rows, 1 s): one that fails on the data is repaired; one that returns no rows or only NULLs gets one repair round.",
        c"An empty answer is kept when the repair does no better. Off (the default), with turboinfer.candidate_execution off too: nl2sql() never executes anything.",
        &RESULT_CHECK,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"turboinfer.refusal",
        c"Refuse questions the visible schema cannot answer (ERROR P0002, no_data_found) instead of writing a query: auto, on or off.",
        c"Before decoding, the model judges whether the tables it was shown hold the data the question asks about. auto: with the margin measured for the loaded model (the default model has one), no check for other models; on: every model, with turboinfer.refusal_margin; off: always write a query.",
        &REFUSAL,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"turboinfer.refusal_margin",
        c"With turboinfer.refusal = on: how sure the model must be that the schema cannot answer before nl2sql() refuses (log-odds of no against yes).",
        c"Higher: fewer refusals (more off-topic questions get a query); lower: more refusals (more real questions refused). The default is the default model's measured margin.",
        &REFUSAL_MARGIN,
        -20.0,
        20.0,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"turboinfer.speculation",
        c"Speculative decoding in nl2sql(): SQL-template and prompt-lookup drafts verified in one batched pass.",
        c"The generated SQL is the same as without it; only the number of forward passes changes.",
        &SPECULATION,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"turboinfer.schema_cache",
        c"Keep the schema nl2sql() read from the catalog until the catalog changes.",
        c"Any DDL, GRANT/REVOKE, role membership change, ANALYZE or COMMENT in the database makes the next call read it again. Off: read on every call.",
        &SCHEMA_CACHE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"turboinfer.sparsity",
        c"Sparse FFN in nl2sql(): fraction of FFN neurons skipped per token (0 = off, the dense FFN).",
        c"Must be a level calibrated in the model's sidecar (turboinfer_calibrate()); answers may change, see docs/sparse-ffn.md.",
        &SPARSITY,
        0.0,
        MAX_SPARSITY,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"turboinfer.sparse_selector",
        c"How the sparse FFN chooses each token's active neurons: predictor (calibrated low-rank predictor) or gate (exact gate, top 1 - sparsity).",
        c"gate is more accurate and computes every gate row; see docs/sparse-ffn.md.",
        &SPARSE_SELECTOR,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"turboinfer.sparse_dir",
        c"Directory of the sparse FFN sidecars written by turboinfer_calibrate() and searched first by nl2sql().",
        c"Superuser only. Empty: turboinfer_sparse in the data directory; relative paths are relative to the data directory. Created with mode 0700. <model>.sparse next to the model file is searched second.",
        &SPARSE_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"turboinfer.cache_dir",
        c"Directory of the schema-prefix KV cache files shared by all backends.",
        c"Superuser only. Empty: turboinfer_cache in the data directory; relative paths are relative to the data directory. Created with mode 0700.",
        &CACHE_DIR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"turboinfer.cache_max_mb",
        c"Size limit of the schema-prefix KV cache files; least recently used files are evicted first.",
        c"Superuser only. 0 disables the cache files (each backend keeps its own prefix in memory).",
        &CACHE_MAX_MB,
        0,
        MAX_CACHE_MAX_MB,
        GucContext::Suset,
        GucFlags::UNIT_MB,
    );
    // SUSET: streaming makes every forward pass of the backend read the model from disk again,
    // a load on the server's storage that only an administrator should choose.
    GucRegistry::define_int_guc(
        c"turboinfer.weight_budget_mb",
        c"Memory a backend's model may keep its weights in; a model that reads more per forward pass streams them from disk, a few layers at a time.",
        c"Superuser only. 0 (default): no limit, the weights stay in the page cache. For models larger than the memory they may use: each layer is asked for ahead of the pass and given back once computed. Answers never change.",
        &WEIGHT_BUDGET_MB,
        0,
        MAX_WEIGHT_BUDGET_MB,
        GucContext::Suset,
        GucFlags::UNIT_MB,
    );
    // SUSET like pg_stat_statements.track and log_statement: a role that could turn it on could
    // fill the server log with its questions.
    GucRegistry::define_enum_guc(
        c"turboinfer.log_queries",
        c"Logs each nl2sql()/nl2sql_explain()/nl2sql_run() call once at this level: question, generated SQL, outcome (ok or SQLSTATE and message), repair rounds; the time in the DETAIL.",
        c"Superuser only. off (default), debug5 to debug1, info, notice, warning or log. The prompt (which holds sample values) is never logged.",
        &LOG_QUERIES,
        GucContext::Suset,
        GucFlags::default(),
    );
    // Off by default: NOTICEs reach every client (application drivers log them as noise), and
    // whether one appears would depend on the server's load; a DBA turns it on for interactive
    // sessions (SET, or ALTER ROLE ... SET turboinfer.progress = '1s'). USERSET: it only adds
    // messages to the caller's own session.
    GucRegistry::define_int_guc(
        c"turboinfer.progress",
        c"After this long into an nl2sql call, a schema prefill that is computed (not cached) reports its progress in NOTICEs, at most once a second, and when done (-1 = never).",
        c"0 reports from the start. The elapsed time is in each NOTICE's DETAIL.",
        &PROGRESS,
        -1,
        MAX_PROGRESS_MS,
        GucContext::Userset,
        GucFlags::UNIT_MS,
    );
    register_removed();
    // Every turboinfer.* name not defined above is now an error (a mistyped SET, ALTER SYSTEM,
    // ALTER DATABASE/ROLE ... SET), and placeholders already set under the prefix (e.g. from
    // postgresql.conf) are reported with a WARNING and removed.
    // SAFETY: a NUL-terminated static string; called from _PG_init, after the definitions.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"turboinfer".as_ptr()) };
}

// ---- Removed settings (0.3.0) -------------------------------------------------------------
// Settings of mechanisms removed in 0.3.0 (issue #64, docs/nl2sql.md "The ledger"). Each stays
// registered under its old name and type, hidden (not in SHOW ALL, pg_settings or the sample
// file), so that a configuration that sets it still loads: postgresql.conf, ALTER SYSTEM,
// ALTER DATABASE/ROLE ... SET and a session's SET. Without this, MarkGUCPrefixReserved (below
// in `register`) would drop a postgresql.conf value with a WARNING about a reserved prefix, but
// turn a session's or a preloading server's ALTER DATABASE/ROLE SET into an ERROR. The value is
// ignored; the first assignment in a process (other than the default) WARNS that it has no
// effect.

/// The removed settings' names (each registered as a bool, as it was).
const REMOVED: [&CStr; 2] = [c"turboinfer.vocab_pruning", c"turboinfer.schema_constraints"];
/// Their values, ignored (in the order of [`REMOVED`]).
static REMOVED_VALUES: [GucSetting<bool>; 2] =
    [GucSetting::<bool>::new(false), GucSetting::<bool>::new(false)];
/// Whether the WARNING of each was given in this process (in the order of [`REMOVED`]).
static REMOVED_WARNED: [std::sync::atomic::AtomicBool; 2] =
    [std::sync::atomic::AtomicBool::new(false), std::sync::atomic::AtomicBool::new(false)];

/// The check hook of the removed setting at `$index` of [`REMOVED`] (a check hook is not told
/// the setting's name, so each has its own).
macro_rules! removed_check_hook {
    ($hook:ident, $index:expr) => {
        #[pgrx::pg_guard]
        unsafe extern "C-unwind" fn $hook(
            _newval: *mut bool,
            _extra: *mut *mut std::ffi::c_void,
            source: pg_sys::GucSource::Type,
        ) -> bool {
            warn_removed($index, source);
            true
        }
    };
}
removed_check_hook!(check_removed_0, 0);
removed_check_hook!(check_removed_1, 1);

/// Registers the removed settings as hidden placeholders (see the block's comment).
fn register_removed() {
    let hooks: [pg_sys::GucBoolCheckHook; 2] = [Some(check_removed_0), Some(check_removed_1)];
    for ((name, value), hook) in REMOVED.into_iter().zip(&REMOVED_VALUES).zip(hooks) {
        // SAFETY: the check hook only reads the source and emits a WARNING (no ERROR, no
        // catalog access).
        unsafe {
            GucRegistry::define_bool_guc_with_hooks(
                name,
                c"Removed in 0.3.0; has no effect.",
                c"",
                value,
                GucContext::Userset,
                GucFlags::NO_SHOW_ALL,
                hook,
                None,
                None,
            );
        }
    }
}

/// The WARNING of the removed setting `REMOVED[index]`, once per process, for any assignment
/// but the boot value.
fn warn_removed(index: usize, source: pg_sys::GucSource::Type) {
    use std::sync::atomic::Ordering;
    if source > pg_sys::GucSource::PGC_S_DYNAMIC_DEFAULT
        && !REMOVED_WARNED[index].swap(true, Ordering::Relaxed)
    {
        let name = REMOVED[index].to_string_lossy();
        pgrx::warning!("{name} was removed in 0.3.0 and has no effect");
    }
}
// ---- End of the removed settings -----------------------------------------------------------

/// `turboinfer.batch_memory_mb` in bytes.
pub fn batch_memory_bytes() -> usize {
    usize::try_from(BATCH_MEMORY_MB.get()).unwrap_or(2048) << 20
}

/// `turboinfer.weight_budget_mb` in bytes (`None`: no limit).
pub fn weight_budget() -> Option<usize> {
    usize::try_from(WEIGHT_BUDGET_MB.get()).ok().filter(|&mb| mb > 0).map(|mb| mb << 20)
}

/// The cache file directory and its limit from the settings (`None` when disabled).
pub fn kv_file_dir() -> Option<KvFileDir> {
    let mb = u64::try_from(CACHE_MAX_MB.get()).unwrap_or(0);
    if mb == 0 {
        return None;
    }
    let setting = CACHE_DIR.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
    let setting =
        if setting.trim().is_empty() { DEFAULT_CACHE_SUBDIR.to_string() } else { setting };
    let path = PathBuf::from(setting);
    let dir = if path.is_absolute() { path } else { data_directory().join(path) };
    Some(KvFileDir::new(dir, mb * 1024 * 1024))
}

/// The sparse sidecar directory from `turboinfer.sparse_dir` (resolved like the cache directory).
pub fn sparse_dir() -> PathBuf {
    let setting = SPARSE_DIR.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
    in_data_directory(if setting.trim().is_empty() { DEFAULT_SPARSE_SUBDIR } else { &setting })
}

/// `path` if absolute, else relative to the data directory.
pub fn in_data_directory(path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() {
        p
    } else {
        data_directory().join(p)
    }
}

/// The server's data directory.
fn data_directory() -> PathBuf {
    // SAFETY: DataDir is set by the postmaster before any backend runs and never changes; it is a
    // NUL-terminated C string. A null pointer (not expected in a backend) falls back to ".",
    // which is the data directory as well (backends run with it as working directory).
    unsafe {
        let p = pg_sys::DataDir;
        if p.is_null() {
            PathBuf::from(".")
        } else {
            PathBuf::from(CStr::from_ptr(p).to_string_lossy().into_owned())
        }
    }
}

/// The current `turboinfer.model` value ("" when set to no model).
pub fn model_setting() -> String {
    MODEL.get().map(|c| c.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Whether `turboinfer.model` names the default model ([`DEFAULT_MODEL`]): what
/// `nl2sql_explain()` and `turboinfer_info()` report as `model_default`.
pub fn model_is_default() -> bool {
    let s = model_setting();
    let s = s.trim();
    s == DEFAULT_MODEL || s.strip_suffix(".gguf") == Some(DEFAULT_MODEL)
}

/// Check hook of `turboinfer.model`: refuses values that resolve outside the models directory
/// (the file itself is only checked when it is loaded: it may be fetched later).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_model(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
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
            let hint = CString::new(format!(
                "Use a model name (e.g. qwen2.5-coder-0.5b) or a path inside {MODELS_DIR}."
            ))
            .unwrap_or_default();
            pg_sys::GUC_check_errhint_string = pg_sys::pstrdup(hint.as_ptr());
            false
        }
    }
}

/// A resource setting that has a superuser-set ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Threads,
    MaxNewTokens,
    ContextTokens,
}

impl Resource {
    /// The setting's name.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Threads => "turboinfer.threads",
            Resource::MaxNewTokens => "turboinfer.max_new_tokens",
            Resource::ContextTokens => "turboinfer.context_tokens",
        }
    }

    /// The name of its ceiling.
    pub fn limit_name(self) -> &'static str {
        match self {
            Resource::Threads => "turboinfer.threads_limit",
            Resource::MaxNewTokens => "turboinfer.max_new_tokens_limit",
            Resource::ContextTokens => "turboinfer.context_tokens_limit",
        }
    }

    /// The current value of the setting.
    fn value(self) -> i32 {
        match self {
            Resource::Threads => THREADS.get(),
            Resource::MaxNewTokens => MAX_NEW_TOKENS.get(),
            Resource::ContextTokens => CONTEXT_TOKENS.get(),
        }
    }

    /// The ceiling in force (`turboinfer.threads_limit = 0` is the number of CPU cores).
    pub fn limit(self) -> i32 {
        match self {
            Resource::Threads => match THREADS_LIMIT.get() {
                0 => i32::try_from(cpu_cores()).unwrap_or(MAX_THREADS).min(MAX_THREADS),
                n => n,
            },
            Resource::MaxNewTokens => MAX_NEW_TOKENS_LIMIT.get(),
            Resource::ContextTokens => CONTEXT_TOKENS_LIMIT.get(),
        }
    }
}

/// A non-superuser asks for more of a resource than its ceiling allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitExceeded {
    pub resource: Resource,
    pub value: i32,
    pub limit: i32,
}

impl LimitExceeded {
    /// The ERROR's message.
    pub fn message(&self) -> String {
        format!("turboinfer: permission denied to set {} to {}", self.resource.name(), self.value)
    }

    /// The ERROR's detail.
    pub fn detail(&self) -> String {
        format!("{} is {}; only superusers may exceed it.", self.resource.limit_name(), self.limit)
    }

    /// The ERROR's hint.
    pub fn hint(&self) -> String {
        format!(
            "Use at most {}, or ask a superuser to raise {} (e.g. ALTER ROLE ... SET {} = {}).",
            self.limit,
            self.resource.limit_name(),
            self.resource.limit_name(),
            self.value
        )
    }
}

/// CPU cores available to this process (what `turboinfer.threads = 0` would use without a limit).
fn cpu_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// `value` for `resource` against its ceiling: superusers are never limited.
fn over_limit(resource: Resource, value: i32) -> Result<(), LimitExceeded> {
    let limit = resource.limit();
    // SAFETY: superuser() reads the current user's catalog entry; callers are in a transaction.
    if value <= limit || unsafe { pg_sys::superuser() } {
        Ok(())
    } else {
        Err(LimitExceeded { resource, value, limit })
    }
}

/// Checks every resource setting against its ceiling when a call uses them: a value set before
/// the ceiling was lowered, or set where the check hooks do not refuse (postgresql.conf,
/// ALTER ROLE/DATABASE values applied at login, connection options), is refused here.
pub fn check_limits() -> Result<(), LimitExceeded> {
    for r in [Resource::Threads, Resource::MaxNewTokens, Resource::ContextTokens] {
        over_limit(r, r.value())?;
    }
    Ok(())
}

/// The worker threads to run with: `turboinfer.threads`, or for 0 the CPU cores capped by
/// `turboinfer.threads_limit`, divided among the `turboinfer.max_concurrent` generations that may
/// run at once (at least one thread). Refuses a value above the ceiling for non-superusers.
pub fn threads() -> Result<usize, LimitExceeded> {
    let value = THREADS.get();
    over_limit(Resource::Threads, value)?;
    let n =
        if value == 0 { Resource::Threads.limit() / max_concurrent().max(1) as i32 } else { value };
    Ok(usize::try_from(n).unwrap_or(1).max(1))
}

/// `turboinfer.max_concurrent` (0 = no limit).
pub fn max_concurrent() -> u32 {
    u32::try_from(MAX_CONCURRENT.get()).unwrap_or(0)
}

/// Shared body of the resource check hooks: a non-superuser's SET (or ALTER ROLE/DATABASE SET,
/// checked with source PGC_S_TEST) above the ceiling fails with SQLSTATE 42501. Values from
/// non-interactive sources, or outside a transaction (no catalog access for superuser()), pass
/// here and are checked when used ([`check_limits`]).
unsafe fn check_resource(
    resource: Resource,
    newval: *mut i32,
    source: pg_sys::GucSource::Type,
) -> bool {
    if newval.is_null()
        || source < pg_sys::GucSource::PGC_S_INTERACTIVE
        || !pg_sys::IsTransactionState()
    {
        return true;
    }
    match over_limit(resource, *newval) {
        Ok(()) => true,
        Err(e) => {
            pg_sys::GUC_check_errcode(pgrx::PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE as i32);
            pg_sys::GUC_check_errmsg_string = pstrdup_str(&e.message());
            pg_sys::GUC_check_errdetail_string = pstrdup_str(&e.detail());
            pg_sys::GUC_check_errhint_string = pstrdup_str(&e.hint());
            false
        }
    }
}

/// `s` copied into the current memory context (what the GUC message strings must be).
unsafe fn pstrdup_str(s: &str) -> *mut std::ffi::c_char {
    let c = CString::new(s.replace('\0', " ")).unwrap_or_default();
    pg_sys::pstrdup(c.as_ptr())
}

/// Check hook of `turboinfer.threads` (see [`check_resource`]).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_threads(
    newval: *mut i32,
    _extra: *mut *mut std::ffi::c_void,
    source: pg_sys::GucSource::Type,
) -> bool {
    check_resource(Resource::Threads, newval, source)
}

/// Check hook of `turboinfer.max_new_tokens` (see [`check_resource`]).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_max_new_tokens(
    newval: *mut i32,
    _extra: *mut *mut std::ffi::c_void,
    source: pg_sys::GucSource::Type,
) -> bool {
    check_resource(Resource::MaxNewTokens, newval, source)
}

/// Check hook of `turboinfer.context_tokens` (see [`check_resource`]).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_context_tokens(
    newval: *mut i32,
    _extra: *mut *mut std::ffi::c_void,
    source: pg_sys::GucSource::Type,
) -> bool {
    check_resource(Resource::ContextTokens, newval, source)
}
