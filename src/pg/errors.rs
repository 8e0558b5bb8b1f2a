//! The one place that maps every module's errors to SQLSTATEs: each error type converts into
//! pgrx's `ErrorReport` (SQLSTATE, message, detail, hint), and [`report`] raises it. Messages
//! name server paths only for superusers ([`shown_path`]).

use super::backend::sparse::{round_level, Failure};
use super::backend::LoadError;
use super::encoding::for_message;
use super::gucs;
use super::readonly::RunError;
use crate::embed::{EmbedError, DEFAULT_ENCODER};
use crate::model::ModelError;
use crate::nl2sql::model_path::{ModelPathError, MODELS_DIR};
use crate::nl2sql::Nl2SqlError;
use crate::serve::ServeError;
use crate::sparse::SparseError;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::path::{Path, PathBuf};

/// An ERROR with SQLSTATE `code`, `message`, optional detail and hint (made safe for the
/// database encoding: `encoding::for_message`).
pub fn error_report(
    code: PgSqlErrorCode,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
) -> ErrorReport {
    let mut r = ErrorReport::new(code, for_message(message), "nl2sql");
    if let Some(d) = detail {
        r = r.set_detail(for_message(d));
    }
    if let Some(h) = hint {
        r = r.set_hint(for_message(h));
    }
    r
}

/// Raises `e` as an ERROR. Never returns.
pub fn report(e: impl Into<ErrorReport>) -> ! {
    e.into().report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Raises an ERROR with SQLSTATE `code`, `message`, optional detail and hint ([`error_report`]).
pub fn raise(
    code: PgSqlErrorCode,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
) -> ! {
    report(error_report(code, message, detail, hint))
}

/// Raises a failure of `readonly::run_read_only`: a statement refused before running is SQLSTATE
/// 25006 (read_only_sql_transaction: it is not a plain read-only query); an ERROR the statement
/// raised while running is re-raised as it was (its SQLSTATE, message, detail and hint).
pub fn report_run(e: RunError) -> ! {
    match e {
        RunError::Refused { sql, reason } => raise(
            PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
            "nl2sql_run: refused to run a statement that is not a plain read-only query".into(),
            Some(format!("SQL: {sql}\nreason: {}", reason.message)),
            Some("Only one SELECT (WITH ... SELECT, VALUES, TABLE) without data-modifying parts is run.".into()),
        ),
        RunError::Failed(caught) => caught.rethrow(),
    }
}

/// The HINT of a missing or unset model: the fetch command and how to choose another model.
fn fetch_hint() -> String {
    let set = "or set turboinfer.model to an installed model (as a superuser: SET, or ALTER SYSTEM/DATABASE/ROLE ... SET)";
    if gucs::model_setting().trim().is_empty() {
        format!("RESET turboinfer.model to use the default model ({}), {set}. Install models with: turboinfer-fetch-model [NAME] (as root).", gucs::DEFAULT_MODEL)
    } else if gucs::model_is_default() {
        format!("Install the default model with: turboinfer-fetch-model (as root; make fetch-model in a source tree), {set}.")
    } else {
        format!("Install models with: turboinfer-fetch-model NAME (as root; --list shows the names), {set}.")
    }
}

impl From<LoadError> for ErrorReport {
    /// A model loading failure.
    fn from(e: LoadError) -> ErrorReport {
        let fetch = fetch_hint();
        match e {
            LoadError::Path(ModelPathError::NotConfigured) => error_report(
                PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "turboinfer: no model is configured".into(),
                Some("turboinfer.model is empty.".into()),
                Some(fetch.clone()),
            ),
            LoadError::Path(ModelPathError::Missing(p)) => error_report(
                PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
                format!("turboinfer: model file \"{p}\" not found"),
                Some(format!(
                    "turboinfer.model = '{}'{} resolves inside {MODELS_DIR}.",
                    gucs::model_setting(),
                    if gucs::model_is_default() { " (the default)" } else { "" }
                )),
                Some(fetch.clone()),
            ),
            LoadError::Path(other) => error_report(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("turboinfer: {other}"), None, Some(fetch.clone())),
            LoadError::Engine(p, e) => error_report(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                format!("turboinfer: cannot load model \"{}\"", p.display()),
                Some(e.to_string()),
                Some("The file is not a usable GGUF model (truncated, corrupt or unsupported); fetch it again with make fetch-model.".into()),
            ),
            LoadError::Runtime(m) => error_report(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("turboinfer: cannot start worker threads: {m}"), None, None),
            LoadError::Limit(e) => e.into(),
        }
    }
}

impl From<EmbedError> for ErrorReport {
    /// An encoder failure of `turboinfer_embed` (paths shown to superusers only).
    fn from(e: EmbedError) -> ErrorReport {
        let fetch = format!(
            "Install the encoder with: turboinfer-fetch-model {DEFAULT_ENCODER} (as root; make fetch-model MODEL={DEFAULT_ENCODER} in a source tree)."
        );
        match e {
            EmbedError::BadName(n) => error_report(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("turboinfer_embed: encoder name {n:?} is not a plain name"),
                Some("An encoder is named by its directory inside the models directory: letters, digits, '.', '_' and '-'.".into()),
                None,
            ),
            EmbedError::Missing { name, dir } => error_report(
                PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
                format!("turboinfer_embed: encoder \"{name}\" is not installed"),
                Some(format!("Looked for the directory {}.", shown_path(&dir))),
                Some(fetch),
            ),
            EmbedError::OutOfMemory(a) => error_report(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("turboinfer_embed: out of memory loading the encoder ({a})"),
                None,
                None,
            ),
            EmbedError::Io { path, source } => error_report(
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!("turboinfer_embed: cannot read {}: {source}", shown_path(Path::new(&path))),
                None,
                Some(fetch),
            ),
            EmbedError::Format(m) => error_report(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                "turboinfer_embed: the encoder's files are not usable".into(),
                Some(m),
                Some(fetch),
            ),
            EmbedError::Tokenizer(m) => error_report(
                PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                "turboinfer_embed: the encoder's tokenizer failed".into(),
                Some(m),
                Some(fetch),
            ),
        }
    }
}

impl From<gucs::LimitExceeded> for ErrorReport {
    /// A resource setting above its ceiling: SQLSTATE 42501 (insufficient_privilege), as for a
    /// superuser-only setting: the value is valid, the role may not use it.
    fn from(e: gucs::LimitExceeded) -> ErrorReport {
        error_report(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            e.message(),
            Some(e.detail()),
            Some(e.hint()),
        )
    }
}

/// The SQLSTATE of an answer PostgreSQL still rejected after the repair rounds (42000,
/// syntax_error_or_access_rule_violation): nl2sql() raises it, turboinfer_stat counts it.
pub const INVALID_SQL: PgSqlErrorCode =
    PgSqlErrorCode::ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION;

/// The SQLSTATE of a refused question, "this database cannot answer that" (P0002, PL/pgSQL's
/// `no_data_found`: catchable as `EXCEPTION WHEN no_data_found`): nl2sql() raises it,
/// turboinfer_stat counts it.
pub const REFUSED: PgSqlErrorCode = PgSqlErrorCode::ERRCODE_NO_DATA_FOUND;

/// The HINT of an out-of-memory ERROR.
const OOM_HINT: &str =
    "Lower turboinfer.context_tokens (the KV cache grows with it), or give the server more memory.";

impl From<Nl2SqlError> for ErrorReport {
    /// An engine failure.
    fn from(e: Nl2SqlError) -> ErrorReport {
        match e {
            Nl2SqlError::EmptyQuestion => error_report(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, "nl2sql: the question is empty".into(), None, Some("Ask a question about the data, e.g. nl2sql('how many users?').".into())),
            Nl2SqlError::QuestionTooLong { chars, max } => error_report(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("nl2sql: the question is too long ({chars} characters, limit {max})"),
                None,
                Some("Ask a shorter question.".into()),
            ),
            Nl2SqlError::NoTables => error_report(
                PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
                "nl2sql: no tables or views are visible".into(),
                Some("Only tables and views in the search path (or the given schemas) that the current role may SELECT from are shown to the model.".into()),
                Some("Check search_path, pass schemas explicitly (nl2sql(question, ARRAY['myschema'])) or GRANT SELECT.".into()),
            ),
            Nl2SqlError::ContextTooSmall { needed, available } => error_report(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("nl2sql: the context is too small ({needed} tokens needed, {available} available)"),
                None,
                Some("Raise turboinfer.context_tokens or lower turboinfer.max_new_tokens.".into()),
            ),
            Nl2SqlError::InvalidSql { sql, message } => error_report(
                INVALID_SQL,
                "nl2sql: the model did not produce a valid query".into(),
                Some(format!("SQL: {sql}\nreason: {message}")),
                Some("Rephrase the question, or use a larger model (turboinfer.model).".into()),
            ),
            Nl2SqlError::Cancelled => error_report(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, "nl2sql: cancelled".into(), None, None),
            Nl2SqlError::Refused { reason } => error_report(
                REFUSED,
                "nl2sql: this database cannot answer that question".into(),
                Some(format!("Refused before writing a query: {reason}.")),
                Some("Ask about the data in the tables you can see (nl2sql_explain() lists them), name other schemas in nl2sql(question, schemas), or SET turboinfer.refusal = off to get a query anyway.".into()),
            ),
            Nl2SqlError::UnsupportedModel(m) => error_report(PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, format!("turboinfer: {m}"), None, None),
            Nl2SqlError::OutOfMemory { what, bytes, plan } => error_report(
                PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY,
                format!("turboinfer: out of memory allocating the {what} ({bytes} bytes)"),
                Some(format!(
                    "turboinfer.context_tokens gives {} KV cache positions: this call needs about {} MiB ({} bytes of KV cache, {} bytes of scratch) besides the mapped model.",
                    plan.positions,
                    plan.total_bytes().div_ceil(1 << 20),
                    plan.kv_cache_bytes,
                    plan.scratch_bytes
                )),
                Some(OOM_HINT.into()),
            ),
            Nl2SqlError::Model(ModelError::OutOfMemory { what, bytes }) => {
                error_report(PgSqlErrorCode::ERRCODE_OUT_OF_MEMORY, format!("turboinfer: out of memory allocating the {what} ({bytes} bytes)"), None, Some(OOM_HINT.into()))
            }
            Nl2SqlError::Model(ModelError::FileChanged { path }) => error_report(
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!("turboinfer: the model file {} changed while this call was reading it", path.display()),
                Some("It was overwritten or truncated in place; the answer was discarded and the next call loads the file again.".into()),
                Some("Replace a model (or its .kx16 pack) by rename: copy the new file next to it under a temporary name, then mv it over the old name.".into()),
            ),
            Nl2SqlError::Model(ModelError::ContextFull { needed, capacity }) => error_report(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("nl2sql: the context is full ({needed} positions needed, {capacity} available)"),
                None,
                Some("Raise turboinfer.context_tokens.".into()),
            ),
            Nl2SqlError::Embed(e) => e.into(),
            // The batch worker exited or restarted during the call (terminated, or failed): like
            // a backend terminated by an administrator, class 57.
            Nl2SqlError::Transport(m) => error_report(
                PgSqlErrorCode::ERRCODE_OPERATOR_INTERVENTION,
                format!("turboinfer: {m}"),
                None,
                Some("turboinfer_info()->'batch_worker' shows the worker; the server log says why it exited.".into()),
            ),
            Nl2SqlError::Serve(ServeError::OverBudget { budget, fits, n_ctx }) => error_report(
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES,
                format!("turboinfer: the batch worker's KV memory ({budget} bytes) holds {fits} sequences of {n_ctx} positions; this call needs more at once"),
                None,
                Some("Raise turboinfer.batch_memory_mb (server start), or lower turboinfer.samples.".into()),
            ),
            Nl2SqlError::Serve(ServeError::ContextFull { needed, n_ctx, .. }) => error_report(
                PgSqlErrorCode::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                format!("nl2sql: the context is full ({needed} positions needed, {n_ctx} available in the batch worker)"),
                None,
                Some("Raise turboinfer.context_tokens in the server's configuration (read by the worker at start).".into()),
            ),
            other => error_report(PgSqlErrorCode::ERRCODE_INTERNAL_ERROR, format!("turboinfer: {other}"), None, None),
        }
    }
}

/// Why a call cannot run at sparsity `target`.
pub struct SparseFailure {
    /// What went wrong.
    pub failure: Failure,
    /// The sparsity the call asked for.
    pub target: f64,
}

/// How to make a sidecar, for hints.
const CALIBRATE_HINT: &str = "As a superuser: SELECT * FROM turboinfer_calibrate(levels => '{0.3,0.5}'); (or the CLI: turboinfer calibrate -m MODEL.gguf --out MODEL.gguf.sparse). SET turboinfer.sparsity = 0 turns the sparse FFN off.";

impl From<SparseFailure> for ErrorReport {
    /// A sparse FFN that cannot run at the requested level.
    fn from(SparseFailure { failure, target }: SparseFailure) -> ErrorReport {
        match failure {
            Failure::Missing { searched } => error_report(
                PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
                format!("turboinfer: sparsity {target} needs a sparse FFN sidecar, and the model has none"),
                Some(searched_detail(&searched)),
                Some(CALIBRATE_HINT.into()),
            ),
            Failure::Uncalibrated { path, levels } => {
                let list = levels.iter().map(|&l| round_level(l).to_string()).collect::<Vec<_>>();
                let mut with: Vec<f64> =
                    levels.iter().map(|&l| round_level(l)).chain([target]).collect();
                with.sort_by(f64::total_cmp);
                error_report(
                    PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("turboinfer: sparsity {target} is not a calibrated level"),
                    Some(format!("The sidecar \"{}\" has the levels {}.", shown_path(&path), list.join(", "))),
                    Some(format!(
                        "Use one of {} (0 = off), or calibrate this level as a superuser: SELECT * FROM turboinfer_calibrate(levels => '{{{}}}');",
                        list.join(", "),
                        with.iter().map(f64::to_string).collect::<Vec<_>>().join(",")
                    )),
                )
            }
            Failure::Open { path, error } => {
                let (code, hint) = match &error {
                    SparseError::Io { .. } => (PgSqlErrorCode::ERRCODE_IO_ERROR, "Check the file's permissions, or recalibrate."),
                    SparseError::ModelMismatch { .. } | SparseError::ShapeMismatch { .. } => (
                        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                        "The sidecar belongs to another model file: recalibrate for this one (turboinfer_calibrate()), or SET turboinfer.sparsity = 0.",
                    ),
                    SparseError::Unsupported { .. } => (PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED, "SET turboinfer.sparsity = 0."),
                    _ => (
                        PgSqlErrorCode::ERRCODE_DATA_CORRUPTED,
                        "The file is damaged or not a sidecar: recalibrate to replace it (turboinfer_calibrate()), or SET turboinfer.sparsity = 0.",
                    ),
                };
                error_report(
                    code,
                    format!(
                        "turboinfer: cannot use the sparse FFN sidecar \"{}\"",
                        shown_path(&path)
                    ),
                    Some(shown_error(&path, &error)),
                    Some(hint.into()),
                )
            }
        }
    }
}

/// A failure of `turboinfer_calibrate()` (calibrating or writing the sidecar).
pub struct CalibrateFailure(pub SparseError);

impl From<CalibrateFailure> for ErrorReport {
    /// Cancellation, too little text, an unwritable sidecar directory, or an engine error.
    fn from(CalibrateFailure(e): CalibrateFailure) -> ErrorReport {
        match e {
            SparseError::Cancelled => error_report(
                PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
                "turboinfer_calibrate: cancelled".into(),
                None,
                None,
            ),
            SparseError::Calibration(m) => error_report(
                PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("turboinfer_calibrate: {m}"),
                None,
                Some("Give more text (corpus => ARRAY['/path/file.txt']) or more tokens.".into()),
            ),
            SparseError::Io { path, source } => error_report(
                PgSqlErrorCode::ERRCODE_IO_ERROR,
                format!("turboinfer_calibrate: cannot write \"{}\": {source}", path.display()),
                None,
                Some("Check turboinfer.sparse_dir.".into()),
            ),
            other => error_report(
                PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
                format!("turboinfer_calibrate: {other}"),
                None,
                None,
            ),
        }
    }
}

/// `p` for messages: the full path for superusers, the file name for others (the data
/// directory's location is superuser information).
pub fn shown_path(p: &Path) -> String {
    // SAFETY: superuser() only reads the current user's catalog entry.
    if unsafe { pg_sys::superuser() } {
        p.display().to_string()
    } else {
        p.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    }
}

/// Where a sidecar was looked for: the paths for superusers, the file name and the two places
/// for other roles.
fn searched_detail(searched: &[PathBuf]) -> String {
    if searched.first().is_some_and(|p| shown_path(p) == p.display().to_string()) {
        format!(
            "Looked for {}.",
            searched
                .iter()
                .map(|p| format!("\"{}\"", p.display()))
                .collect::<Vec<_>>()
                .join(" and ")
        )
    } else {
        let name = searched.first().map(|p| shown_path(p)).unwrap_or_default();
        format!("Looked for \"{name}\" in turboinfer.sparse_dir and next to the model file.")
    }
}

/// `error` (about the sidecar at `path`) for the current user: the engine's message names the
/// full path, so other roles get a path-free description.
pub fn shown_error(path: &Path, error: &SparseError) -> String {
    if shown_path(path) == path.display().to_string() {
        error.to_string()
    } else {
        error_kind(error).to_string()
    }
}

/// A path-free description of `e` (for roles that may not see server paths).
fn error_kind(e: &SparseError) -> &'static str {
    match e {
        SparseError::Io { .. } => "The file cannot be read.",
        SparseError::BadMagic { .. } => "The file is not a turboinfer sparse sidecar (bad magic).",
        SparseError::Version { .. } => "The file has another format version.",
        SparseError::Corrupt { .. } => "The file is corrupt.",
        SparseError::ModelMismatch { .. } => "The sidecar was calibrated for a different model.",
        SparseError::ShapeMismatch { .. } => "The sidecar's shape does not match the model.",
        _ => "The sidecar cannot be used.",
    }
}
