//! Every setting of the extension, as data: one [`Setting`] per `turboinfer.*` name.
//!
//! Both the registration (`gucs::register`, one loop over [`SETTINGS`]) and the settings section
//! of `docs/sql-reference.md` (rendered and compared by `tests/settings_docs.rs`) come from this
//! table, so a name, type, default, bounds, context or unit is stated here and nowhere else.
//! Plain Rust on purpose: the docs test compiles this file without PostgreSQL; the variable behind
//! each row and its check hook are the glue's business (`gucs.rs`).

use crate::embed::DEFAULT_ENCODER;
use crate::nl2sql;
use std::ffi::CStr;

/// One setting: what PostgreSQL is told (`name`, `kind`, `context`, `unit`, `short`, `long`, as
/// `pg_settings` shows them) and what the reference docs add (`ceiling`, `default_note`, `doc`).
#[derive(Debug)]
pub struct Setting {
    /// The full name, `turboinfer.` included.
    pub name: &'static CStr,
    /// Type, boot value and bounds.
    pub kind: Kind,
    /// Who may set it and when (PostgreSQL's `GucContext`).
    pub context: Context,
    /// The unit of an integer setting, if any (`pg_settings.unit`).
    pub unit: Option<Unit>,
    /// The setting that caps it for non-superusers (checked by the glue's check hooks and again
    /// when a call uses it).
    pub ceiling: Option<&'static Setting>,
    /// `pg_settings.short_desc`.
    pub short: &'static CStr,
    /// `pg_settings.extra_desc`.
    pub long: &'static CStr,
    /// What the default means, shown after it in the docs ("= cores").
    #[allow(dead_code, reason = "read by the docs test (tests/settings_docs.rs) only")]
    pub default_note: Option<&'static str>,
    /// The reference docs' "what it does" cell (Markdown).
    #[allow(dead_code, reason = "read by the docs test (tests/settings_docs.rs) only")]
    pub doc: &'static str,
}

/// A setting's type with its boot value and bounds.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Bool {
        default: bool,
    },
    Int {
        default: i32,
        min: i32,
        max: i32,
    },
    Real {
        default: f64,
        min: f64,
        max: f64,
    },
    /// A string; `None` boots as the empty string.
    Text {
        default: Option<&'static CStr>,
    },
    /// One of `values`, in the order of the glue's enum (`gucs.rs` checks it at compile time).
    Enum {
        default: &'static str,
        values: &'static [&'static str],
    },
}

/// PostgreSQL's `GucContext`s the settings use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `PGC_USERSET`: anyone, any time.
    Userset,
    /// `PGC_SUSET`: superusers (and `postgresql.conf`, `ALTER SYSTEM`/`ROLE`/`DATABASE`).
    Suset,
    /// `PGC_POSTMASTER`: `postgresql.conf` or the command line, read at server start; defined
    /// only while the library is preloaded (`shared_preload_libraries`).
    Postmaster,
}

/// Units of integer settings (`GUC_UNIT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Megabytes: `SET x = '2GB'` is 2048.
    Mb,
    /// Milliseconds: `SET x = '1s'` is 1000.
    Ms,
}

/// A `&'static CStr` of a `&'static str` constant, made at compile time (a NUL inside fails the
/// build): the boot value of a string setting that the engine names as a `&str`.
macro_rules! c_str {
    ($s:expr) => {{
        const BYTES: [u8; $s.len() + 1] = nul_terminated($s);
        match CStr::from_bytes_with_nul(&BYTES) {
            Ok(c) => c,
            Err(_) => panic!("a NUL inside a string setting's default"),
        }
    }};
}

/// The default model's name, the boot value of `turboinfer.model` (what `turboinfer-fetch-model`
/// installs without arguments), so that a cluster where nothing is set uses that model if it is
/// installed.
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-1.5b";
const DEFAULT_MODEL_C: &CStr = c_str!(DEFAULT_MODEL);
/// The boot value of `turboinfer.schema_encoder`: the encoder `turboinfer_embed()` defaults to.
const DEFAULT_ENCODER_C: &CStr = c_str!(DEFAULT_ENCODER);

/// Most worker threads accepted: more than the cores only adds contention.
pub const MAX_THREADS: i32 = 256;
/// Default of `turboinfer.max_concurrent`: one generation at a time. `turboinfer.threads = 0`
/// gives that one generation every core, so a second one at once only shares the same cores
/// (more threads than cores, each caller slower); one at a time keeps the total and lets the
/// first callers finish first.
const DEFAULT_MAX_CONCURRENT: i32 = 1;
/// Most slots accepted (a lock per slot is tried while waiting).
const MAX_MAX_CONCURRENT: i32 = 1024;
/// Default of `turboinfer.batch_memory_mb`: nine sequences of 4,096 positions of the 1.5B model
/// (224 MB each, f32): eight callers at once and a ninth sequence for sampled candidates or a
/// caller's schema prefix kept warm.
const DEFAULT_BATCH_MEMORY_MB: i32 = 2048;
/// Fewest MB accepted for the batch worker's caches: a floor against a value meant in another
/// unit, not a fit (the worker logs at start how many sequences its budget holds).
const MIN_BATCH_MEMORY_MB: i32 = 64;
/// Largest size in MB accepted by the memory settings (1 TiB): far beyond any realistic set of
/// KV caches, prefixes or weights.
const MAX_MB: i32 = 1 << 20;
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
const MAX_CONTEXT: i32 = 131_072;
/// Most repair rounds accepted: each costs a prefill of the repair turn and a full answer; past
/// a few rounds a small model repeats its mistakes.
const MAX_REPAIR_ROUNDS: i32 = 5;
/// Most candidates: each is a prefill of its shared prefix plus a decode of its tail (and, with
/// execution, one read-only run); past 8 the branches are at positions the model was sure of.
const MAX_CANDIDATES: i32 = 8;
/// Most samples: each holds its own copy of the question's cache rows (for the 1.5B model 28
/// layers × 2 × 256 floats = 57 KB per position: ~110 MB for a 1,500-token prompt and its answer).
const MAX_SAMPLES: i32 = 8;
/// More examples than this would not fit `nl2sql::examples::TOKEN_BUDGET` anyway.
const MAX_EXAMPLES: i32 = 8;
/// `turboinfer.schema_tokens` bound: the largest context a model here has (the engine caps the
/// budget at the context anyway).
const MAX_SCHEMA_TOKENS: i32 = MAX_CONTEXT;
/// `turboinfer.follow_up_turns` default: the conversations people have with a database run a
/// few turns ("how many orders?", "by region?", "only the completed ones"); four earlier turns
/// fit `nl2sql::DEFAULT_FOLLOW_UP_TOKENS` with answers of ~200 tokens.
const DEFAULT_FOLLOW_UP_TURNS: i32 = 4;
/// `turboinfer.follow_up_turns` bound: more turns than fit any token budget here.
const MAX_FOLLOW_UP_TURNS: i32 = 32;
/// `turboinfer.follow_up_tokens` lower bound: one short turn (a question and a one-line SELECT).
const MIN_FOLLOW_UP_TOKENS: i32 = 64;
/// `turboinfer.refusal_margin` bounds (±): log-odds of 20 are a probability ratio of e^20 ≈ 5e8,
/// far beyond any margin a model was measured at (the default model's is -2.1).
const MAX_REFUSAL_MARGIN: f64 = 20.0;
/// Default cache file budget: a schema prefix of 1000 tokens is 24 MB (0.5B model, f32 KV) to
/// 56 MB (1.5B), so 1 GiB keeps a few dozen schemas/roles/models without filling a small disk.
const DEFAULT_CACHE_MAX_MB: i32 = 1024;
/// Highest sparsity accepted: calibration needs a non-empty active set per level, and beyond 95%
/// skipped neurons even the oracle selection (docs/sparse-ffn.md) loses most of the model's accuracy.
pub const MAX_SPARSITY: f64 = 0.95;
/// Largest `turboinfer.progress` accepted: one hour, far beyond any prefill.
const MAX_PROGRESS_MS: i32 = 3_600_000;

/// `s` with a NUL appended (`N` = its length + 1), for [`c_str!`].
const fn nul_terminated<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    assert!(b.len() + 1 == N, "N must be the length + 1");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        out[i] = b[i];
        i += 1;
    }
    out
}

/// Superuser only, so that users cannot point the server at another file.
pub const MODEL: Setting = Setting {
    name: c"turboinfer.model",
    kind: Kind::Text { default: Some(DEFAULT_MODEL_C) },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Model used by nl2sql(): a fetched model name or a .gguf path inside /var/lib/turboinfer/models.",
    long: c"Superuser only. Default: qwen2.5-coder-1.5b (installed by turboinfer-fetch-model without arguments); empty: no model.",
    default_note: None,
    doc: "model name or `.gguf` path inside `/var/lib/turboinfer/models`; `''` = no model",
};

pub const THREADS: Setting = Setting {
    name: c"turboinfer.threads",
    kind: Kind::Int { default: 0, min: 0, max: MAX_THREADS },
    context: Context::Userset,
    unit: None,
    ceiling: Some(&THREADS_LIMIT),
    short: c"Worker threads for inference in each backend (0 = one per CPU core, at most turboinfer.threads_limit).",
    long: c"Takes effect at the next call; the pool is rebuilt when the value changes. Non-superusers may not exceed turboinfer.threads_limit.",
    default_note: None,
    doc: "worker threads per backend; 0 = the cores (at most `threads_limit`) divided by `max_concurrent`",
};

pub const THREADS_LIMIT: Setting = Setting {
    name: c"turboinfer.threads_limit",
    kind: Kind::Int { default: 0, min: 0, max: MAX_THREADS },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Most worker threads a non-superuser may set in turboinfer.threads (0 = the number of CPU cores).",
    long: c"Superuser only. Also the thread count of turboinfer.threads = 0.",
    default_note: Some("= cores"),
    doc: "most `turboinfer.threads` a non-superuser may set",
};

pub const MAX_CONCURRENT: Setting = Setting {
    name: c"turboinfer.max_concurrent",
    kind: Kind::Int { default: DEFAULT_MAX_CONCURRENT, min: 0, max: MAX_MAX_CONCURRENT },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Most nl2sql() generations running at once in the whole server (0 = no limit).",
    long: c"Superuser only. Other callers wait in arrival order (cancellable); turboinfer_info() shows who holds and who waits. With turboinfer.threads = 0 each generation gets the cores divided by this value.",
    default_note: None,
    doc: "most generations (`nl2sql`, `nl2sql_explain`, `turboinfer_bench`, `turboinfer_calibrate`) running at once in the server; others wait in arrival order, cancellable; 0 = no limit. Calls the batch worker serves take no slot",
};

/// Read at server start: the worker is registered while the library is preloaded.
pub const BATCH_WORKER: Setting = Setting {
    name: c"turboinfer.batch_worker",
    kind: Kind::Bool { default: false },
    context: Context::Postmaster,
    unit: None,
    ceiling: None,
    short: c"With turboinfer in shared_preload_libraries: one background worker owns the model and runs the forward passes of every backend's nl2sql() calls in batches.",
    long: c"Takes effect at server start. Off: each backend maps the model and computes by itself. turboinfer_info() shows the worker under batch_worker.",
    default_note: None,
    doc: "with `turboinfer` in `shared_preload_libraries`: one background worker owns the model (`turboinfer.model`, `turboinfer.context_tokens`, `turboinfer.threads` as the configuration file sets them) and runs every backend's forward passes in batches; a call whose model, context or sparsity differs computes in its backend",
};

pub const BATCH_MEMORY_MB: Setting = Setting {
    name: c"turboinfer.batch_memory_mb",
    kind: Kind::Int { default: DEFAULT_BATCH_MEMORY_MB, min: MIN_BATCH_MEMORY_MB, max: MAX_MB },
    context: Context::Postmaster,
    unit: Some(Unit::Mb),
    ceiling: None,
    short: c"Memory for the batch worker's KV caches, in MB (least recently used sequences are evicted and recomputed).",
    long: c"Takes effect at server start. Each sequence takes the KV cache of turboinfer.context_tokens positions (224 MB for the 1.5B model at 4096).",
    default_note: None,
    doc: "the batch worker's KV caches; the least recently used sequence is evicted and recomputed from its tokens when they are full (224 MB a sequence for the 1.5B model at 4096 positions). The caches of sessions that ended stay until the room is needed (evicted before any live one): a new session asking about the same schema copies its prompt prefix from them instead of computing it",
};

pub const MAX_NEW_TOKENS: Setting = Setting {
    name: c"turboinfer.max_new_tokens",
    kind: Kind::Int {
        default: nl2sql::DEFAULT_MAX_NEW_TOKENS as i32,
        min: 1,
        max: MAX_NEW_TOKENS_MAX,
    },
    context: Context::Userset,
    unit: None,
    ceiling: Some(&MAX_NEW_TOKENS_LIMIT),
    short: c"Most tokens nl2sql() generates per answer.",
    long: c"Non-superusers may not exceed turboinfer.max_new_tokens_limit.",
    default_note: None,
    doc: "most tokens per answer; an answer cut off there is rejected, never returned truncated",
};

pub const MAX_NEW_TOKENS_LIMIT: Setting = Setting {
    name: c"turboinfer.max_new_tokens_limit",
    kind: Kind::Int { default: DEFAULT_MAX_NEW_TOKENS_LIMIT, min: 1, max: MAX_NEW_TOKENS_MAX },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Most tokens per answer a non-superuser may set in turboinfer.max_new_tokens.",
    long: c"Superuser only.",
    default_note: None,
    doc: "most `turboinfer.max_new_tokens` a non-superuser may set",
};

pub const CONTEXT_TOKENS: Setting = Setting {
    name: c"turboinfer.context_tokens",
    kind: Kind::Int { default: nl2sql::DEFAULT_CONTEXT_TOKENS as i32, min: MIN_CONTEXT, max: MAX_CONTEXT },
    context: Context::Userset,
    unit: None,
    ceiling: Some(&CONTEXT_TOKENS_LIMIT),
    short: c"KV cache positions per backend: schema prompt + question + answer + repair.",
    long: c"Larger schemas need more; the model's training context is the upper bound. Non-superusers may not exceed turboinfer.context_tokens_limit.",
    default_note: None,
    doc: "KV cache positions: schema prompt + question + answer + repair; the model's trained context caps it",
};

pub const CONTEXT_TOKENS_LIMIT: Setting = Setting {
    name: c"turboinfer.context_tokens_limit",
    kind: Kind::Int { default: DEFAULT_CONTEXT_TOKENS_LIMIT, min: MIN_CONTEXT, max: MAX_CONTEXT },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Most KV cache positions a non-superuser may set in turboinfer.context_tokens.",
    long: c"Superuser only. Each position costs 24 KiB (0.5B model) to 56 KiB (1.5B) of backend memory.",
    default_note: None,
    doc: "most `turboinfer.context_tokens` a non-superuser may set",
};

pub const REPAIR_ROUNDS: Setting = Setting {
    name: c"turboinfer.repair_rounds",
    kind: Kind::Int { default: nl2sql::DEFAULT_REPAIR_ROUNDS as i32, min: 0, max: MAX_REPAIR_ROUNDS },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Most repair rounds nl2sql() runs after PostgreSQL rejects an answer (0 = none).",
    long: c"Each round shows the model the server's error and the catalog facts it needs (real columns, closest names).",
    default_note: None,
    doc: "repair rounds after PostgreSQL rejects an answer",
};

pub const REPAIR_TOKENS: Setting = Setting {
    name: c"turboinfer.repair_tokens",
    kind: Kind::Int { default: nl2sql::DEFAULT_REPAIR_TOKENS as i32, min: 0, max: MAX_NEW_TOKENS_MAX },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Tokens an answer and its repairs may decode before nl2sql() stops repairing it (0 = no limit).",
    long: c"Once reached, no further repair round and no branch to rescue a rejected answer; the engine's own rewrites still run. An answer cut off at turboinfer.max_new_tokens is not counted.",
    default_note: None,
    doc: "the repair budget: decoded tokens after which no repair round or rescue branch starts (0 = none)",
};

pub const CANDIDATES: Setting = Setting {
    name: c"turboinfer.candidates",
    kind: Kind::Int { default: nl2sql::DEFAULT_CANDIDATES as i32, min: 1, max: MAX_CANDIDATES },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Candidate answers nl2sql() weighs per question (1 = the model's first answer only).",
    long: c"Extra candidates branch off the first answer where the model was least sure; they are decoded when the first answer is rejected, or always with turboinfer.candidate_execution.",
    default_note: None,
    doc: "candidate answers per question: the first answer plus branches off it where the model was least sure; branches are decoded when the first answer ends rejected (the most likely valid one is returned) or, with `candidate_execution`, always",
};

pub const RESULT_CHECK: Setting = Setting {
    name: c"turboinfer.result_check",
    kind: Kind::Bool { default: false },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Run each valid answer read-only once (caller's privileges, 100 rows, 1 s): one that fails on the data is repaired; one that returns no rows or only NULLs gets one repair round.",
    long: c"An empty answer is kept when the repair does no better. Off (the default), with turboinfer.candidate_execution off too: nl2sql() never executes anything.",
    default_note: None,
    doc: "run each valid answer once, read-only, as `nl2sql_run` does (caller's privileges, rolled back, 1 s, 100 rows): an answer that fails on the data (SQLSTATE class 22: a bad cast, a format pattern, a division by zero) is rejected with the server's error and repaired; one that returns no rows or only NULLs gets one repair round (told which of its joins match no pair of rows) and is kept when the repair does no better. Off: nl2sql executes nothing (with `candidate_execution` off too)",
};

pub const SAMPLES: Setting = Setting {
    name: c"turboinfer.samples",
    kind: Kind::Int { default: nl2sql::DEFAULT_SAMPLES as i32, min: 0, max: MAX_SAMPLES },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Sampled candidate answers nl2sql() decodes together per question (0 = none).",
    long: c"Drawn at temperature 0.7 from fixed seeds (the same question gets the same samples), decoded in one batch, weighed with the other candidates: with turboinfer.candidate_execution the result most candidates agree on wins.",
    default_note: None,
    doc: "sampled answers per question, decoded together in one batch per step (temperature 0.7, fixed seeds: the same question gets the same samples) and weighed with the candidates: with `candidate_execution`, each one a vote; each holds a copy of the question's KV cache rows",
};

pub const EXAMPLES: Setting = Setting {
    name: c"turboinfer.examples",
    kind: Kind::Int { default: nl2sql::DEFAULT_EXAMPLES as i32, min: 0, max: MAX_EXAMPLES },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Approved examples (nl2sql_learn) nl2sql() shows per question, the most similar ones (0 = none).",
    long: c"Only examples over relations the caller may read, within the schemas being searched; at most 768 prompt tokens of them.",
    default_note: None,
    doc: "approved examples (`nl2sql_learn`) shown per question: the most similar ones the caller may see, within the schemas searched, at most 768 prompt tokens; 0 = none",
};

pub const SCHEMA_ENCODER: Setting = Setting {
    name: c"turboinfer.schema_encoder",
    kind: Kind::Text { default: Some(DEFAULT_ENCODER_C) },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Sentence encoder (a directory in the models directory) that chooses the tables nl2sql() shows when the schema does not fit the context.",
    long: c"Tables are ranked by the similarity of their names, columns and comments to the question, each followed by the tables its foreign keys reference. Empty, or not installed: by the question's words. Install with turboinfer-fetch-model all-minilm-l6-v2.",
    default_note: None,
    doc: "the sentence encoder (a directory in the models directory) that ranks the tables of a schema too large for the prompt, fused with the question's words; `''` (or not installed): by words only",
};

pub const SCHEMA_CACHE: Setting = Setting {
    name: c"turboinfer.schema_cache",
    kind: Kind::Bool { default: true },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Keep the schema nl2sql() read from the catalog until the catalog changes.",
    long: c"Any DDL, GRANT/REVOKE, role membership change, ANALYZE or COMMENT in the database makes the next call read it again. Off: read on every call.",
    default_note: None,
    doc: "keep the schema read from the catalog in the backend until the catalog changes: any DDL, GRANT/REVOKE, role membership change, ANALYZE or COMMENT in the database (or a change to roles in the cluster) makes the next call read it again (5,000 tables: ~1 s per call → under 1 ms); off: read on every call",
};

pub const SCHEMA_TOKENS: Setting = Setting {
    name: c"turboinfer.schema_tokens",
    kind: Kind::Int { default: nl2sql::DEFAULT_SCHEMA_TOKENS as i32, min: 0, max: MAX_SCHEMA_TOKENS },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Most prompt tokens of schema nl2sql() shows when not every table fits the context (0 = up to the context).",
    long: c"The tables most likely meant, whole, up to this many tokens: a larger value shows more tables and prefills longer.",
    default_note: None,
    doc: "most prompt tokens of tables when the whole schema does not fit the context; 0 = as many as the context holds (a longer prompt, prefilled on every question)",
};

pub const FOLLOW_UP_TURNS: Setting = Setting {
    name: c"turboinfer.follow_up_turns",
    kind: Kind::Int { default: DEFAULT_FOLLOW_UP_TURNS, min: 1, max: MAX_FOLLOW_UP_TURNS },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Most earlier turns of the session's conversation a follow-up question is asked after.",
    long: c"nl2sql(question, follow_up => true): the newest turns, within turboinfer.follow_up_tokens.",
    default_note: None,
    doc: "most earlier turns (answered questions and their SQL) a follow-up (`follow_up => true`) is asked after, the newest kept; the session keeps no more",
};

pub const FOLLOW_UP_TOKENS: Setting = Setting {
    name: c"turboinfer.follow_up_tokens",
    kind: Kind::Int {
        default: nl2sql::DEFAULT_FOLLOW_UP_TOKENS as i32,
        min: MIN_FOLLOW_UP_TOKENS,
        max: MAX_SCHEMA_TOKENS,
    },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Most prompt tokens of the earlier turns a follow-up question is asked after.",
    long: c"The oldest turns beyond it are left out of the prompt.",
    default_note: None,
    doc: "most prompt tokens of a follow-up's earlier turns; the oldest beyond it are left out of the prompt",
};

pub const CANDIDATE_EXECUTION: Setting = Setting {
    name: c"turboinfer.candidate_execution",
    kind: Kind::Bool { default: false },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Run candidate answers read-only (caller's privileges, row limit, short timeout) and prefer the result most agree on.",
    long: c"Off: nl2sql() never executes anything. On: each valid candidate runs in a read-only subtransaction that is rolled back.",
    default_note: None,
    doc: "run each valid candidate read-only (as `nl2sql_run` does: caller's privileges, rolled back, 1000 rows, 1 s each) and return the one whose result most candidates share; off: nl2sql never executes anything",
};

pub const REFUSAL: Setting = Setting {
    name: c"turboinfer.refusal",
    kind: Kind::Enum { default: "auto", values: &["auto", "on", "off"] },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Refuse questions the visible schema cannot answer (ERROR P0002, no_data_found) instead of writing a query: auto, on or off.",
    long: c"Before decoding, the model judges whether the tables it was shown hold the data the question asks about. auto: with the margin measured for the loaded model (the default model has one), no check for other models, and no check turn when the answer surely opens a SQL block and two question words are in the schema; on: every model and every question, with turboinfer.refusal_margin; off: always write a query.",
    default_note: None,
    doc: "refuse a question the visible tables cannot answer (ERROR `P0002`) instead of writing a query; `auto`: with the margin measured for the loaded model (the default model has one; other models are not checked), skipping the check's turn when the answer surely opens a SQL block and two question words are in the schema; `on`: every model and every question, with `refusal_margin`; `off`: never",
};

/// What an unsure answer does (`nl2sql::verdict`): a NOTICE by default, so that an interactive
/// user reads the reasons and an application runs on; `error` for an application that would
/// rather not run an unsure query.
pub const UNSURE: Setting = Setting {
    name: c"turboinfer.unsure",
    kind: Kind::Enum { default: "notice", values: &["notice", "error", "ignore"] },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"What an answer the verdict marks unsure does: notice (a NOTICE with the reasons), error (ERROR P0004 instead of the answer) or ignore.",
    long: c"The verdict (nl2sql_explain's verdict) weighs a repair, a doubt left, executed candidates that disagree, a question with no word in the schema, dates, a subquery, and for nl2sql_run an empty result.",
    default_note: None,
    doc: "what an answer the verdict marks unsure does (`nl2sql_explain`'s `verdict`: a repair, a doubt left, executed candidates that disagree, no question word in the schema, dates, a subquery, and for `nl2sql_run` an empty result); `notice`: `nl2sql` and `nl2sql_run` raise a NOTICE with the reasons and answer; `error`: they raise ERROR `P0004` with the reasons and the query instead of answering; `ignore`: no message (`nl2sql_explain` reports the verdict whatever the setting)",
};

/// How sure the model must be before nl2sql refuses with `turboinfer.refusal = on` (see
/// `nl2sql::refusal`): a refusal needs `log p(no) - log p(yes)` above this value (and above it
/// minus `refusal::NO_MATCH_ALLOWANCE` when no word of the question is in the schema).
pub const REFUSAL_MARGIN: Setting = Setting {
    name: c"turboinfer.refusal_margin",
    kind: Kind::Real { default: nl2sql::refusal::DEFAULT_MARGIN as f64, min: -MAX_REFUSAL_MARGIN, max: MAX_REFUSAL_MARGIN },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"With turboinfer.refusal = on: how sure the model must be that the schema cannot answer before nl2sql() refuses (log-odds of no against yes).",
    long: c"Higher: fewer refusals (more off-topic questions get a query); lower: more refusals (more real questions refused). The default is the default model's measured margin.",
    default_note: None,
    doc: "with `refusal = on`: the log-odds of the model's \"no\" against its \"yes\" above which it refuses (0.9 lower when no word of the question is in the schema); higher refuses less",
};

pub const SPECULATION: Setting = Setting {
    name: c"turboinfer.speculation",
    kind: Kind::Bool { default: true },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Speculative decoding in nl2sql(): SQL-template and prompt-lookup drafts verified in one batched pass.",
    long: c"The generated SQL is the same as without it; only the number of forward passes changes.",
    default_note: None,
    doc: "speculative decoding: the same SQL with fewer forward passes",
};

pub const CACHE_DIR: Setting = Setting {
    name: c"turboinfer.cache_dir",
    kind: Kind::Text { default: None },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Directory of the schema-prefix KV cache files shared by all backends.",
    long: c"Superuser only. Empty: turboinfer_cache in the data directory; relative paths are relative to the data directory. Created with mode 0700.",
    default_note: Some("= `$PGDATA/turboinfer_cache`"),
    doc: "directory of the schema-prefix cache files shared by all backends; relative to the data directory",
};

pub const CACHE_MAX_MB: Setting = Setting {
    name: c"turboinfer.cache_max_mb",
    kind: Kind::Int { default: DEFAULT_CACHE_MAX_MB, min: 0, max: MAX_MB },
    context: Context::Suset,
    unit: Some(Unit::Mb),
    ceiling: None,
    short: c"Size limit of the schema-prefix KV cache files; least recently used files are evicted first.",
    long: c"Superuser only. 0 disables the cache files (each backend keeps its own prefix in memory).",
    default_note: None,
    doc: "size limit of the cache files, least recently used evicted; 0 = no cache files",
};

/// Superuser only (or `ALTER DATABASE`/`ALTER ROLE ... SET`): a preparation is model work of
/// the server's (a whole prefill on `turboinfer.threads` cores), started by any role's DDL, so
/// whether it happens is the administrator's choice, not the DDL session's. Not `PGC_SIGHUP`:
/// then it could not be turned off for one database.
pub const BACKGROUND_PREPARE: Setting = Setting {
    name: c"turboinfer.background_prepare",
    kind: Kind::Bool { default: true },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"After DDL that changes what nl2sql() shows (and CREATE EXTENSION), a background worker prepares the schema prefix and writes its cache file.",
    long: c"Superuser only. The worker (backend_type turboinfer prepare) waits turboinfer.prepare_delay without schema changes, then does what turboinfer_prewarm() does as the role that made the change, with its search_path.",
    default_note: None,
    doc: "after DDL that changes what nl2sql() shows (CREATE/ALTER/DROP TABLE, VIEW, SCHEMA, COMMENT, GRANT, ...) and after `CREATE EXTENSION`, one background worker per database (`pg_stat_activity.backend_type` `turboinfer prepare`) waits `turboinfer.prepare_delay` without changes, then does what `turboinfer_prewarm()` does as the role that made the change, with its `search_path`, writes the cache file and exits ([kv-cache.md](kv-cache.md#background-preparation)); read by the DDL session and by the worker",
};

/// Why 5 s: a migration tool's statements follow each other within milliseconds and a person's
/// DDL within seconds, so 5 idle seconds usually mean the change is complete (one preparation,
/// not one per statement), while the prefix is still ready long before a typical first question
/// after a deploy. 0 prepares as soon as the changing transactions ended.
pub const PREPARE_DELAY: Setting = Setting {
    name: c"turboinfer.prepare_delay",
    kind: Kind::Int { default: 5_000, min: 0, max: 3_600_000 },
    context: Context::Suset,
    unit: Some(Unit::Ms),
    ceiling: None,
    short: c"How long the background preparation waits without schema changes before it reads the catalog.",
    long: c"Superuser only. Each change seen (a DDL transaction still open, or a new one) restarts the wait.",
    default_note: Some("= 5 s"),
    doc: "how long the background preparation (`turboinfer.background_prepare`) waits without schema changes before it reads the catalog; a DDL transaction still open, or a new one, restarts the wait",
};

/// Superuser only: streaming makes every forward pass of the backend read the model from disk
/// again, a load on the server's storage that only an administrator should choose.
pub const WEIGHT_BUDGET_MB: Setting = Setting {
    name: c"turboinfer.weight_budget_mb",
    kind: Kind::Int { default: 0, min: 0, max: MAX_MB },
    context: Context::Suset,
    unit: Some(Unit::Mb),
    ceiling: None,
    short: c"Memory a backend's model may keep its weights in; a model that reads more per forward pass streams them from disk, a few layers at a time.",
    long: c"Superuser only. 0 (default): no limit, the weights stay in the page cache. For models larger than the memory they may use: each layer is asked for ahead of the pass and given back once computed. Answers never change.",
    default_note: None,
    doc: "memory a backend's model may keep its weights in; a model that reads more per forward pass streams them (each layer asked for ahead, given back once computed: [performance.md](performance.md#a-model-larger-than-the-memory-it-may-use)); the same answers; 0 = no limit",
};

pub const SPARSITY: Setting = Setting {
    name: c"turboinfer.sparsity",
    kind: Kind::Real { default: 0.0, min: 0.0, max: MAX_SPARSITY },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"Sparse FFN in nl2sql(): fraction of FFN neurons skipped per token (0 = off, the dense FFN).",
    long: c"Must be a level calibrated in the model's sidecar (turboinfer_calibrate()); answers may change, see docs/sparse-ffn.md.",
    default_note: None,
    doc: "experimental sparse FFN level; must be a calibrated level; off by default ([docs/sparse-ffn.md](sparse-ffn.md))",
};

pub const SPARSE_SELECTOR: Setting = Setting {
    name: c"turboinfer.sparse_selector",
    kind: Kind::Enum { default: "predictor", values: &["predictor", "gate"] },
    context: Context::Userset,
    unit: None,
    ceiling: None,
    short: c"How the sparse FFN chooses each token's active neurons: predictor (calibrated low-rank predictor) or gate (exact gate, top 1 - sparsity).",
    long: c"gate is more accurate and computes every gate row; see docs/sparse-ffn.md.",
    default_note: None,
    doc: "how the sparse FFN picks active neurons",
};

pub const SPARSE_DIR: Setting = Setting {
    name: c"turboinfer.sparse_dir",
    kind: Kind::Text { default: None },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Directory of the sparse FFN sidecars written by turboinfer_calibrate() and searched first by nl2sql().",
    long: c"Superuser only. Empty: turboinfer_sparse in the data directory; relative paths are relative to the data directory. Created with mode 0700. <model>.sparse next to the model file is searched second.",
    default_note: Some("= `$PGDATA/turboinfer_sparse`"),
    doc: "where `turboinfer_calibrate()` writes sidecars and nl2sql looks first",
};

/// Superuser only, like pg_stat_statements.track and log_statement: a role that could turn it on
/// could fill the server log with its questions.
pub const LOG_QUERIES: Setting = Setting {
    name: c"turboinfer.log_queries",
    kind: Kind::Enum { default: "off", values: &["off", "debug5", "debug4", "debug3", "debug2", "debug1", "info", "notice", "warning", "log"] },
    context: Context::Suset,
    unit: None,
    ceiling: None,
    short: c"Logs each nl2sql()/nl2sql_explain()/nl2sql_run() call once at this level: question, generated SQL, outcome (ok or SQLSTATE and message), repair rounds; the time in the DETAIL.",
    long: c"Superuser only. off (default), debug5 to debug1, info, notice, warning or log. The prompt (which holds sample values) is never logged.",
    default_note: None,
    doc: "logs each call once at that level: question, SQL, outcome (`ok` or SQLSTATE and message), repair rounds; the time in the DETAIL; never the prompt",
};

/// Off by default: NOTICEs reach every client (application drivers log them as noise), and
/// whether one appears would depend on the server's load; a DBA turns it on for interactive
/// sessions (SET, or ALTER ROLE ... SET turboinfer.progress = '1s'). Anyone may set it: it only
/// adds messages to the caller's own session.
pub const PROGRESS: Setting = Setting {
    name: c"turboinfer.progress",
    kind: Kind::Int { default: -1, min: -1, max: MAX_PROGRESS_MS },
    context: Context::Userset,
    unit: Some(Unit::Ms),
    ceiling: None,
    short: c"After this long into an nl2sql call, a schema prefill that is computed (not cached) reports its progress in NOTICEs, at most once a second, and when done (-1 = never).",
    long: c"0 reports from the start. The elapsed time is in each NOTICE's DETAIL.",
    default_note: Some("off"),
    doc: "after this long into a call, a schema prefill that is computed reports `schema prefill 1024/3100 tokens (33 %)` NOTICEs, at most one a second, and a last one when done (`turboinfer_calibrate()` likewise); elapsed time in the DETAIL",
};

/// Every setting, in the order of the reference docs.
pub const SETTINGS: &[&Setting] = &[
    &MODEL,
    &THREADS,
    &THREADS_LIMIT,
    &MAX_CONCURRENT,
    &BATCH_WORKER,
    &BATCH_MEMORY_MB,
    &MAX_NEW_TOKENS,
    &MAX_NEW_TOKENS_LIMIT,
    &CONTEXT_TOKENS,
    &CONTEXT_TOKENS_LIMIT,
    &REPAIR_ROUNDS,
    &REPAIR_TOKENS,
    &CANDIDATES,
    &RESULT_CHECK,
    &SAMPLES,
    &EXAMPLES,
    &SCHEMA_ENCODER,
    &SCHEMA_CACHE,
    &SCHEMA_TOKENS,
    &FOLLOW_UP_TURNS,
    &FOLLOW_UP_TOKENS,
    &CANDIDATE_EXECUTION,
    &REFUSAL,
    &REFUSAL_MARGIN,
    &UNSURE,
    &SPECULATION,
    &CACHE_DIR,
    &CACHE_MAX_MB,
    &BACKGROUND_PREPARE,
    &PREPARE_DELAY,
    &WEIGHT_BUDGET_MB,
    &SPARSITY,
    &SPARSE_SELECTOR,
    &SPARSE_DIR,
    &LOG_QUERIES,
    &PROGRESS,
];
