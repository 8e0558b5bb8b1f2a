//! The extension's settings (GUCs): the variable behind each row of the table (`gucs/table.rs`,
//! where every name, type, default, bound, context and description is stated), the check hooks,
//! the one loop that registers them when the library is loaded, and the accessors the rest of the
//! glue reads them through.

mod table;

use crate::generate::kv_file::KvFileDir;
use crate::nl2sql::model_path::{self, MODELS_DIR};
use pgrx::guc::{GucContext, GucEnum, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use table::{Context, Kind, Setting, Unit, MAX_THREADS, SETTINGS};
pub use table::{DEFAULT_MODEL, MAX_SPARSITY};

/// Declares the variable (a `GucSetting` static named like its row of `table`, booting with the
/// row's default) of each setting, and [`VARIABLES`], the list [`register`] defines, in the
/// table's order. `NAME: Int(check_hook)`, `NAME: Text`, `NAME: Enum(Type::Variant)` (the
/// variant must be the row's default: checked at compile time, as every row's type is).
macro_rules! variables {
    ($($id:ident: $kind:ident $(($($arg:tt)*))?,)*) => {
        $(variables!(@static $id $kind ($($($arg)*)?));)*
        /// The variable of each row of [`SETTINGS`], in its order (checked at compile time).
        const VARIABLES: &[(&Setting, Variable)] =
            &[$((&table::$id, variables!(@variable $id $kind ($($($arg)*)?))),)*];
    };
    (@static $id:ident Bool ()) => {
        #[doc = concat!("The value of `table::", stringify!($id), "`.")]
        pub static $id: GucSetting<bool> = GucSetting::<bool>::new(bool_default(&table::$id));
    };
    (@static $id:ident Int ($($check:ident)?)) => {
        #[doc = concat!("The value of `table::", stringify!($id), "`.")]
        pub static $id: GucSetting<i32> = GucSetting::<i32>::new(int_range(&table::$id).0);
    };
    (@static $id:ident Real ()) => {
        #[doc = concat!("The value of `table::", stringify!($id), "`.")]
        pub static $id: GucSetting<f64> = GucSetting::<f64>::new(real_range(&table::$id).0);
    };
    (@static $id:ident Text ($($check:ident)?)) => {
        #[doc = concat!("The value of `table::", stringify!($id), "`.")]
        pub static $id: GucSetting<Option<CString>> =
            GucSetting::<Option<CString>>::new(text_default(&table::$id));
    };
    (@static $id:ident Enum ($ty:ident :: $default:ident)) => {
        #[doc = concat!("The value of `table::", stringify!($id), "`.")]
        pub static $id: GucSetting<$ty> = GucSetting::<$ty>::new($ty::$default);
        const _: () = check_enum(&table::$id, $ty::$default as i32, <$ty as GucEnum>::CONFIG_ENUM_ENTRY);
    };
    (@variable $id:ident Bool ()) => { Variable::Bool(&$id) };
    (@variable $id:ident Int ($($check:ident)?)) => {
        Variable::Int(&$id, int_range(&table::$id), variables!(@hook $($check)?))
    };
    (@variable $id:ident Real ()) => { Variable::Real(&$id, real_range(&table::$id)) };
    (@variable $id:ident Text ($($check:ident)?)) => {
        Variable::Text(&$id, variables!(@hook $($check)?))
    };
    (@variable $id:ident Enum ($($default:tt)*)) => {
        Variable::Enum(|row, context, flags| {
            GucRegistry::define_enum_guc(row.name, row.short, row.long, &$id, context, flags)
        })
    };
    (@hook) => { None };
    (@hook $check:ident) => { Some($check) };
}

variables! {
    MODEL: Text(check_model),
    THREADS: Int(check_threads),
    THREADS_LIMIT: Int,
    MAX_CONCURRENT: Int,
    BATCH_WORKER: Bool,
    BATCH_MEMORY_MB: Int,
    MAX_NEW_TOKENS: Int(check_max_new_tokens),
    MAX_NEW_TOKENS_LIMIT: Int,
    CONTEXT_TOKENS: Int(check_context_tokens),
    CONTEXT_TOKENS_LIMIT: Int,
    REPAIR_ROUNDS: Int,
    REPAIR_TOKENS: Int,
    CANDIDATES: Int,
    RESULT_CHECK: Bool,
    SAMPLES: Int,
    EXAMPLES: Int,
    SCHEMA_ENCODER: Text,
    SCHEMA_CACHE: Bool,
    SCHEMA_TOKENS: Int,
    FOLLOW_UP_TURNS: Int,
    FOLLOW_UP_TOKENS: Int,
    CANDIDATE_EXECUTION: Bool,
    REFUSAL: Enum(Refusal::Auto),
    REFUSAL_MARGIN: Real,
    UNSURE: Enum(Unsure::Notice),
    SPECULATION: Bool,
    CACHE_DIR: Text,
    CACHE_MAX_MB: Int,
    BACKGROUND_PREPARE: Bool,
    PREPARE_DELAY: Int,
    WEIGHT_BUDGET_MB: Int,
    SPARSITY: Real,
    SPARSE_SELECTOR: Enum(SparseSelector::Predictor),
    SPARSE_DIR: Text,
    LOG_QUERIES: Enum(LogQueries::Off),
    PROGRESS: Int,
}

/// A setting's variable, with what PostgreSQL needs besides the row's strings.
enum Variable {
    Bool(&'static GucSetting<bool>),
    /// The variable, its bounds and its check hook.
    Int(&'static GucSetting<i32>, (i32, i32, i32), pg_sys::GucIntCheckHook),
    /// The variable and its bounds.
    Real(&'static GucSetting<f64>, (f64, f64, f64)),
    Text(&'static GucSetting<Option<CString>>, pg_sys::GucStringCheckHook),
    /// Defines an enum setting (generic over the Rust enum, hence a function).
    Enum(fn(&'static Setting, GucContext, GucFlags)),
}

impl Variable {
    /// Defines the setting of `row` with this variable.
    fn define(&self, row: &'static Setting) {
        let context = match row.context {
            Context::Userset => GucContext::Userset,
            Context::Suset => GucContext::Suset,
            Context::Postmaster => GucContext::Postmaster,
        };
        let flags = match row.unit {
            None => GucFlags::default(),
            Some(Unit::Mb) => GucFlags::UNIT_MB,
            Some(Unit::Ms) => GucFlags::UNIT_MS,
        };
        let (name, short, long) = (row.name, row.short, row.long);
        match *self {
            Variable::Bool(v) => GucRegistry::define_bool_guc(name, short, long, v, context, flags),
            // SAFETY: the check hooks are #[pg_guard]ed; they only read the proposed value (and
            // for the resource settings the ceilings, calling superuser() inside a transaction)
            // and set GUC message strings.
            Variable::Int(v, (_, min, max), check) => unsafe {
                GucRegistry::define_int_guc_with_hooks(
                    name, short, long, v, min, max, context, flags, check, None, None,
                )
            },
            Variable::Real(v, (_, min, max)) => {
                GucRegistry::define_float_guc(name, short, long, v, min, max, context, flags)
            }
            // SAFETY: as for the integer settings' hooks.
            Variable::Text(v, check) => unsafe {
                GucRegistry::define_string_guc_with_hooks(
                    name, short, long, v, context, flags, check, None, None,
                )
            },
            Variable::Enum(define) => define(row, context, flags),
        }
    }
}

/// Registers every setting (called from `_PG_init`).
pub fn register() {
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    let preloading = unsafe { pg_sys::process_shared_preload_libraries_in_progress };
    for (row, variable) in VARIABLES {
        // Server-start settings exist only while the library is being preloaded: PostgreSQL
        // makes defining a PGC_POSTMASTER variable later (a backend loading the library) a FATAL
        // error.
        if row.context == Context::Postmaster && !preloading {
            continue;
        }
        variable.define(row);
    }
    register_removed();
    // Every turboinfer.* name not defined above is now an error (a mistyped SET, ALTER SYSTEM,
    // ALTER DATABASE/ROLE ... SET), and placeholders already set under the prefix (e.g. from
    // postgresql.conf) are reported with a WARNING and removed.
    // (On PostgreSQL 14, placeholders are only reported: see compat::reserve_setting_prefix.)
    super::compat::reserve_setting_prefix(c"turboinfer");
}

// The compile-time checks that tie the variables to the table: same rows in the same order (so
// that no row goes unregistered), and each variable of its row's type (the `*_default`/`*_range`
// functions below fail the build otherwise).
const _: () = {
    assert!(
        VARIABLES.len() == SETTINGS.len(),
        "a row of the table has no variable, or one too many"
    );
    let mut i = 0;
    while i < SETTINGS.len() {
        assert!(
            same(VARIABLES[i].0.name, SETTINGS[i].name),
            "variables! is not in the table's order"
        );
        i += 1;
    }
};

/// Whether two C strings are equal (at compile time).
const fn same(a: &CStr, b: &CStr) -> bool {
    same_bytes(a.to_bytes(), b.to_bytes())
}

/// Whether two byte strings are equal (at compile time).
const fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The boot value of a boolean row.
const fn bool_default(row: &Setting) -> bool {
    match row.kind {
        Kind::Bool { default } => default,
        _ => panic!("not a boolean setting"),
    }
}

/// The boot value and bounds of an integer row.
const fn int_range(row: &Setting) -> (i32, i32, i32) {
    match row.kind {
        Kind::Int { default, min, max } => (default, min, max),
        _ => panic!("not an integer setting"),
    }
}

/// The boot value and bounds of a real row.
const fn real_range(row: &Setting) -> (f64, f64, f64) {
    match row.kind {
        Kind::Real { default, min, max } => (default, min, max),
        _ => panic!("not a real setting"),
    }
}

/// The boot value of a string row.
const fn text_default(row: &Setting) -> Option<&'static CStr> {
    match row.kind {
        Kind::Text { default } => default,
        _ => panic!("not a string setting"),
    }
}

/// Checks an enum row against its Rust enum: the same value names in the same order (the
/// ordinals PostgreSQL stores), and the static's boot variant (`ordinal`) is the row's default.
const fn check_enum(row: &Setting, ordinal: i32, entries: *const pg_sys::config_enum_entry) {
    let Kind::Enum { default, values } = row.kind else { panic!("not an enum setting") };
    let mut i = 0;
    while i < values.len() {
        // SAFETY: the derive's array ends with an entry whose name is null; it is read only up
        // to there (a shorter array fails the assertion at its terminator).
        let entry = unsafe { &*entries.add(i) };
        assert!(!entry.name.is_null(), "the enum has fewer values than the row");
        // SAFETY: a NUL-terminated name from the derive's C string literal.
        let name = unsafe { CStr::from_ptr(entry.name) };
        let same_value = same_bytes(name.to_bytes(), values[i].as_bytes());
        assert!(entry.val == i as i32 && same_value, "the enum's values differ from the row's");
        i += 1;
    }
    // SAFETY: as above: `values.len()` entries were there, so the terminator or one more is.
    assert!(unsafe { (*entries.add(i)).name.is_null() }, "the enum has more values than the row");
    let boot = values[ordinal as usize].as_bytes();
    assert!(
        same_bytes(boot, default.as_bytes()),
        "the static's boot variant is not the row's default"
    );
}

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

/// The values of `turboinfer.unsure`: what an answer the verdict marks unsure does.
#[derive(pgrx::PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum Unsure {
    /// A NOTICE with the reasons; the answer is returned.
    #[name = c"notice"]
    Notice,
    /// An ERROR (P0004) with the reasons and the query, instead of the answer.
    #[name = c"error"]
    Error,
    /// Nothing: the answer is returned without a message.
    #[name = c"ignore"]
    Ignore,
}

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

/// When progress NOTICEs start (ms into a call), `None` when off.
pub fn progress_after_ms() -> Option<f64> {
    let v = PROGRESS.get();
    (v >= 0).then_some(f64::from(v))
}

/// The encoder `turboinfer.schema_encoder` names, or `None` when empty (tables by words).
pub fn schema_encoder() -> Option<String> {
    let name = SCHEMA_ENCODER.get().map(|c| c.to_string_lossy().trim().to_string());
    name.filter(|n| !n.is_empty())
}

/// Directory used when `turboinfer.cache_dir` is empty, inside the data directory.
const DEFAULT_CACHE_SUBDIR: &str = "turboinfer_cache";
/// Directory used when `turboinfer.sparse_dir` is empty, inside the data directory.
const DEFAULT_SPARSE_SUBDIR: &str = "turboinfer_sparse";

/// `turboinfer.context_tokens` (its bounds keep it positive).
pub fn context_tokens() -> usize {
    usize::try_from(CONTEXT_TOKENS.get()).unwrap_or(crate::nl2sql::DEFAULT_CONTEXT_TOKENS)
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
    let mb = usize::try_from(BATCH_MEMORY_MB.get());
    mb.unwrap_or(int_range(&table::BATCH_MEMORY_MB).0 as usize) << 20
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
        self.row().name.to_str().unwrap_or_default()
    }

    /// The name of its ceiling.
    pub fn limit_name(self) -> &'static str {
        self.row().ceiling.map_or("", |c| c.name.to_str().unwrap_or_default())
    }

    /// The setting's row of the table (its ceiling is the row's `ceiling`).
    fn row(self) -> &'static Setting {
        match self {
            Resource::Threads => &table::THREADS,
            Resource::MaxNewTokens => &table::MAX_NEW_TOKENS,
            Resource::ContextTokens => &table::CONTEXT_TOKENS,
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
