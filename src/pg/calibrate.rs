//! `turboinfer_calibrate()`: calibrates the sparse FFN of the loaded model from SQL and writes
//! its sidecar.

use super::backend::{self, sparse};
use super::errors::{raise, report, CalibrateFailure};
use super::{gucs, progress, slots};
use crate::sparse::{corpus, sidecar, CalibOptions, SparseError};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::os::unix::fs::DirBuilderExt;
use std::time::Instant;

/// Most calibration tokens accepted: the recorder keeps every layer's activations in memory
/// (`tokens * ffn_dim * 2` bytes per layer: 0.5 MB per token on the 1.5B), so 8192 tokens is ~4 GB.
const MAX_CALIB_TOKENS: i32 = 8192;
/// Fewest calibration tokens: the engine refuses to fit from fewer than 16.
const MIN_CALIB_TOKENS: i32 = 16;
/// Highest predictor rank accepted (the engine clamps it to the model width as well).
const MAX_RANK: i32 = 1024;

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
    if levels.windows(2).any(|w| w[1] - w[0] < sparse::LEVEL_TOLERANCE) {
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
    let _slot = slots::acquire();
    let t0 = Instant::now();
    let (row, result) = backend::with_backend(|b| {
        let (loaded, _, rt) = b.model_and_runtime().unwrap_or_else(|e| report(e));
        // Interrupts are checked on this (the backend's) thread only; a pending cancel raises the
        // ERROR right here and unwinds, which puts the model's previous hook back.
        let progress = std::cell::RefCell::new(progress::Reporter::new());
        let calibrated = loaded.engine.calibrate_sparse(rt, &texts, &opts, &|p| {
            pgrx::check_for_interrupts!();
            progress.borrow_mut().on_calibration(p);
            false
        });
        progress.borrow_mut().finish();
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
        sparse::forget(loaded);
        ((out, loaded.path.display().to_string()), written)
    });
    let (out, model) = row;
    let (spec, rep) = result.unwrap_or_else(|e| report(CalibrateFailure(e)));
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
        spec.levels.iter().map(|&l| sparse::round_level(l)).collect(),
        spec.rank as i32,
        rep.tokens as i32,
        spec.n_layers as i32,
        bytes,
        mean_recall,
        t0.elapsed().as_secs_f64(),
    ))
}
