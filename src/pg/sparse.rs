//! The sparse FFN in a backend: the sidecar of the loaded model (found in `turboinfer.sparse_dir`,
//! then next to the model; opened once and reopened when the file changes), the hook attached to
//! the engine for the level a call asks for (`turboinfer.sparsity` or the explain argument), and
//! `turboinfer_calibrate()`, which writes a sidecar from SQL.

use super::backend::{self, FileId, Loaded};
use super::gucs;
use super::nl2sql::{raise, raise_load};
use crate::sparse::{
    corpus, sidecar, CalibOptions, Selector, Sidecar, SparseConfig, SparseError, SparseFfn,
    SparseHook, Summary,
};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A requested level matches a calibrated one within this distance: levels are stored as f32
/// (0.3 reads back as 0.30000001) and settings are float8; 1e-4 still tells 3-decimal levels apart.
const LEVEL_TOLERANCE: f64 = 1e-4;
/// Most calibration tokens accepted: the recorder keeps every layer's activations in memory
/// (`tokens * ffn_dim * 2` bytes per layer: 0.5 MB per token on the 1.5B), so 8192 tokens is ~4 GB.
const MAX_CALIB_TOKENS: i32 = 8192;
/// Fewest calibration tokens: the engine refuses to fit from fewer than 16.
const MIN_CALIB_TOKENS: i32 = 16;
/// Highest predictor rank accepted (the engine clamps it to the model width as well).
const MAX_RANK: i32 = 1024;

/// The opened sidecar of a loaded model and the hooks built from it, one per level used.
pub struct SparseCache {
    path: PathBuf,
    id: FileId,
    sidecar: Arc<Sidecar>,
    /// `(level, selector, hook)` for each level and selector a call has used (at most 2 * `MAX_LEVELS`).
    hooks: Vec<(f32, Selector, Arc<SparseHook>)>,
}

/// Why a call cannot run sparsely.
pub enum Failure {
    /// No sidecar at any of the searched paths.
    Missing { searched: Vec<PathBuf> },
    /// The sidecar does not have the requested level.
    Uncalibrated { path: PathBuf, levels: Vec<f32> },
    /// The sidecar is unreadable, corrupt, of another model or another shape.
    Open { path: PathBuf, error: SparseError },
}

/// The sparse FFN a call runs with.
pub struct Active {
    /// The calibrated level in use.
    pub level: f32,
    pub selector: Selector,
    pub path: PathBuf,
    hook: Arc<SparseHook>,
}

impl Active {
    /// The hook's counters since the call started (they are reset by [`prepare`]).
    pub fn summary(&self) -> Summary {
        match &*self.hook {
            SparseHook::Sparse(s) => s.summary(),
            SparseHook::Record(_) => Summary::default(),
        }
    }
}

/// A level as users wrote it (f32 levels printed without their binary tail: 0.3, not 0.30000001).
pub fn round_level(l: f32) -> f64 {
    (l as f64 * 1e6).round() / 1e6
}

/// The sidecar paths of the model at `model`, in search order: the server-writable directory
/// (where `turboinfer_calibrate()` writes), then `<model>.sparse` (the CLI's default).
pub fn candidates(model: &Path) -> Vec<PathBuf> {
    let name = model.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    vec![gucs::sparse_dir().join(format!("{name}.sparse")), sidecar::default_path(model)]
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

/// Detaches any hook and forgets the opened sidecar (its mapping goes once no hook holds it).
fn forget(loaded: &mut Loaded) {
    loaded.engine.set_ffn_hook(None, "");
    loaded.sparse = None;
}

/// The loaded model's sidecar: the cached one while its file is unchanged, else (re)opened and
/// checked against the model.
pub fn sidecar(loaded: &mut Loaded) -> Result<(PathBuf, Arc<Sidecar>), Failure> {
    let searched = candidates(&loaded.path);
    let found = searched
        .iter()
        .find_map(|p| FileId::of(p).ok().filter(|_| p.is_file()).map(|id| (p.clone(), id)));
    let Some((path, id)) = found else {
        forget(loaded);
        return Err(Failure::Missing { searched });
    };
    if let Some(c) = &loaded.sparse {
        if c.path == path && c.id == id {
            return Ok((path, c.sidecar.clone()));
        }
    }
    // Changed or new: drop the old mapping before touching anything (a file rewritten in place
    // must never be read through the old mapping).
    forget(loaded);
    let cfg = loaded.engine.model().config();
    let (n_layers, dim, ffn_dim) = (cfg.n_layers, cfg.dim, cfg.ffn_dim);
    let opened = Sidecar::open(&path, Some(loaded.engine.model().file()))
        .and_then(|sc| sc.check_shape(n_layers, dim, ffn_dim).map(|_| sc));
    let sc = Arc::new(opened.map_err(|error| Failure::Open { path: path.clone(), error })?);
    loaded.sparse =
        Some(SparseCache { path: path.clone(), id, sidecar: sc.clone(), hooks: Vec::new() });
    Ok((path, sc))
}

/// Attaches the sparse FFN at `target` (0 = dense: detaches) with `selector` to the loaded engine
/// for one call, with its counters reset. The hook's tag (sidecar checksum, level, configuration
/// including the selector) keys the schema-prefix cache, so sparse and dense prefixes never mix.
/// On failure the engine is dense.
pub fn prepare(
    loaded: &mut Loaded,
    target: f64,
    selector: Selector,
) -> Result<Option<Active>, Failure> {
    if target <= 0.0 {
        if !loaded.engine.ffn_tag().is_empty() {
            loaded.engine.set_ffn_hook(None, "");
        }
        return Ok(None);
    }
    let (path, sc) = sidecar(loaded)?;
    let levels = sc.spec().levels.clone();
    let Some(level) = levels.iter().copied().find(|&l| (l as f64 - target).abs() < LEVEL_TOLERANCE)
    else {
        loaded.engine.set_ffn_hook(None, "");
        return Err(Failure::Uncalibrated { path, levels });
    };
    let config = SparseConfig { selector, ..SparseConfig::default() };
    let cache = loaded.sparse.as_mut().expect("opened by sidecar()");
    let hook = match cache.hooks.iter().find(|(l, s, _)| *l == level && *s == selector) {
        Some((_, _, h)) => h.clone(),
        None => {
            let ffn = SparseFfn::new(sc.clone(), level, config)
                .map_err(|error| Failure::Open { path: path.clone(), error })?;
            let h = Arc::new(SparseHook::Sparse(ffn));
            cache.hooks.push((level, selector, h.clone()));
            h
        }
    };
    let tag =
        format!("sparse-v1|sidecar={}|level={level}|{config:?}", sidecar::hex(&sc.checksum()));
    let attached = loaded
        .engine
        .model()
        .ffn_hook()
        .is_some_and(|h| std::ptr::addr_eq(Arc::as_ptr(h), Arc::as_ptr(&hook)));
    if !attached || loaded.engine.ffn_tag() != tag {
        loaded.engine.set_ffn_hook(Some(hook.clone()), &tag);
    }
    if let SparseHook::Sparse(s) = &*hook {
        s.reset_stats();
    }
    Ok(Some(Active { level, selector, path, hook }))
}

/// How to make a sidecar, for hints.
const CALIBRATE_HINT: &str = "As a superuser: SELECT * FROM turboinfer_calibrate(levels => '{0.3,0.5}'); (or the CLI: turboinfer calibrate -m MODEL.gguf --out MODEL.gguf.sparse). SET turboinfer.sparsity = 0 turns the sparse FFN off.";

/// Reports a sparse failure at `target`. Never returns.
pub fn raise_failure(f: Failure, target: f64) -> ! {
    match f {
        Failure::Missing { searched } => raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_FILE,
            format!(
                "turboinfer: sparsity {target} needs a sparse FFN sidecar, and the model has none"
            ),
            Some(searched_detail(&searched)),
            Some(CALIBRATE_HINT.into()),
        ),
        Failure::Uncalibrated { path, levels } => {
            let list = levels.iter().map(|&l| round_level(l).to_string()).collect::<Vec<_>>();
            let mut with: Vec<f64> =
                levels.iter().map(|&l| round_level(l)).chain([target]).collect();
            with.sort_by(f64::total_cmp);
            raise(
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
            raise(
                code,
                format!("turboinfer: cannot use the sparse FFN sidecar \"{}\"", shown_path(&path)),
                Some(shown_error(&path, &error)),
                Some(hint.into()),
            )
        }
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

/// The effective sparsity of a call: the argument when given (checked), else the setting.
pub fn target(arg: Option<f64>) -> f64 {
    match arg {
        None => gucs::SPARSITY.get(),
        Some(s) if (0.0..=gucs::MAX_SPARSITY).contains(&s) => s,
        Some(s) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("turboinfer: sparsity {s} is out of range"),
            None,
            Some(format!(
                "Use 0 (off) up to {}, a level calibrated in the model's sidecar.",
                gucs::MAX_SPARSITY
            )),
        ),
    }
}

/// Raises unless the current user is a superuser.
fn require_superuser(what: &str) {
    // SAFETY: superuser() only reads the current user's catalog entry.
    if !unsafe { pg_sys::superuser() } {
        raise(
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("turboinfer: permission denied to {what}"),
            Some("Calibration runs the model for minutes and writes files into the server's data directory.".into()),
            Some("Only superusers may call turboinfer_calibrate().".into()),
        );
    }
}

/// Raises an invalid-argument ERROR about `arg`.
fn bad_arg(arg: &str, message: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("turboinfer_calibrate: {arg} {message}"),
        None,
        None,
    )
}

/// Checks the calibration levels: 1 to `MAX_LEVELS` distinct values in (0, MAX_SPARSITY].
fn check_levels(levels: Option<Vec<f64>>) -> Vec<f32> {
    let Some(mut levels) = levels else { bad_arg("levels", "must not be NULL".into()) };
    levels.sort_by(f64::total_cmp);
    if levels.is_empty() || levels.len() > sidecar::MAX_LEVELS {
        bad_arg("levels", format!("must have 1 to {} elements", sidecar::MAX_LEVELS));
    }
    if let Some(l) = levels.iter().find(|l| !(**l > 0.0 && **l <= gucs::MAX_SPARSITY)) {
        bad_arg(
            "levels",
            format!("contains {l}: each level must be above 0 and at most {}", gucs::MAX_SPARSITY),
        );
    }
    if levels.windows(2).any(|w| w[1] - w[0] < LEVEL_TOLERANCE) {
        bad_arg("levels", "contains duplicates".into());
    }
    levels.iter().map(|&l| l as f32).collect()
}

/// Reads the corpus files (absolute, or relative to the data directory).
fn read_corpus(corpus: Option<Vec<String>>) -> Vec<String> {
    let mut texts = Vec::new();
    for f in corpus.unwrap_or_default() {
        let p = gucs::in_data_directory(&f);
        match corpus::read_texts(&[&p]) {
            Ok(t) => texts.extend(t),
            Err(e) => raise(
                if e.kind() == std::io::ErrorKind::NotFound { PgSqlErrorCode::ERRCODE_UNDEFINED_FILE } else { PgSqlErrorCode::ERRCODE_IO_ERROR },
                format!("turboinfer_calibrate: cannot read corpus file \"{}\": {e}", p.display()),
                None,
                Some("Corpus files are read by the server process: give absolute paths (or paths relative to the data directory) it can read.".into()),
            ),
        }
    }
    texts
}

/// `turboinfer_calibrate(levels, rank, tokens, corpus)`: calibrates the sparse FFN of the model
/// of `turboinfer.model` in this backend (the built-in nl2sql prompts, interleaved with the text
/// of the `corpus` files), writes the sidecar atomically into `turboinfer.sparse_dir` (replacing
/// an older one; backends using it switch at their next call) and reports it. Superuser only;
/// cancellable (pg_cancel_backend, statement_timeout) between forward passes and layers.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe)]
fn turboinfer_calibrate(
    levels: default!(Option<Vec<f64>>, "'{0.3,0.5}'"),
    rank: default!(Option<i32>, 64),
    tokens: default!(Option<i32>, 2048),
    corpus: default!(Option<Vec<String>>, "NULL"),
) -> TableIterator<
    'static,
    (
        name!(sidecar, String),
        name!(model, String),
        name!(levels, Vec<f64>),
        name!(rank, i32),
        name!(tokens, i32),
        name!(layers, i32),
        name!(bytes, i64),
        name!(mean_recall, Vec<f64>),
        name!(seconds, f64),
    ),
> {
    require_superuser("calibrate the sparse FFN");
    let levels = check_levels(levels);
    let Some(rank) = rank.filter(|r| (1..=MAX_RANK).contains(r)) else {
        bad_arg("rank", format!("must be between 1 and {MAX_RANK}"))
    };
    let Some(tokens) = tokens.filter(|t| (MIN_CALIB_TOKENS..=MAX_CALIB_TOKENS).contains(t)) else {
        bad_arg("tokens", format!("must be between {MIN_CALIB_TOKENS} and {MAX_CALIB_TOKENS}"))
    };
    let texts = corpus::interleave(
        crate::nl2sql::calibration::nl2sql_prompts(Some(0)),
        read_corpus(corpus),
    );
    let opts = CalibOptions {
        levels,
        rank: rank as usize,
        max_tokens: tokens as usize,
        ..CalibOptions::default()
    };
    let _slot = super::slots::acquire();
    let t0 = Instant::now();
    let (row, result) = backend::with_backend(|b| {
        let (loaded, _, rt) = b.model_and_runtime().unwrap_or_else(|e| raise_load(e));
        // Interrupts are checked on this (the backend's) thread only; a pending cancel raises the
        // ERROR right here and unwinds, which puts the model's previous hook back.
        let calibrated = loaded.engine.calibrate_sparse(rt, &texts, &opts, &|| {
            pgrx::check_for_interrupts!();
            false
        });
        let name =
            loaded.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let out = gucs::sparse_dir().join(format!("{name}.sparse"));
        let written = calibrated.and_then(|(spec, layers, rep)| {
            let dir = out.parent().expect("a file in a directory");
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| SparseError::Io { path: dir.to_path_buf(), source })?;
            sidecar::write(&out, &spec, &layers)?;
            Ok((spec, rep))
        });
        // The next call reopens whatever file is now there.
        forget(loaded);
        ((out, loaded.path.display().to_string()), written)
    });
    let (out, model) = row;
    let (spec, rep) = result.unwrap_or_else(|e| match e {
        SparseError::Cancelled => raise(
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            "turboinfer_calibrate: cancelled".into(),
            None,
            None,
        ),
        SparseError::Calibration(m) => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            format!("turboinfer_calibrate: {m}"),
            None,
            Some("Give more text (corpus => ARRAY['/path/file.txt']) or more tokens.".into()),
        ),
        SparseError::Io { path, source } => raise(
            PgSqlErrorCode::ERRCODE_IO_ERROR,
            format!("turboinfer_calibrate: cannot write \"{}\": {source}", path.display()),
            None,
            Some("Check turboinfer.sparse_dir.".into()),
        ),
        other => raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            format!("turboinfer_calibrate: {other}"),
            None,
            None,
        ),
    });
    let bytes = std::fs::metadata(&out).map_or(0, |m| m.len() as i64);
    let mean_recall = (0..spec.levels.len())
        .map(|i| {
            let m = rep.recall.iter().map(|r| r[i] as f64).sum::<f64>()
                / rep.recall.len().max(1) as f64;
            (m * 1000.0).round() / 1000.0
        })
        .collect();
    TableIterator::once((
        out.display().to_string(),
        model,
        spec.levels.iter().map(|&l| round_level(l)).collect(),
        spec.rank as i32,
        rep.tokens as i32,
        spec.n_layers as i32,
        bytes,
        mean_recall,
        t0.elapsed().as_secs_f64(),
    ))
}
