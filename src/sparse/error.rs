//! The sparse module's error type.

use std::path::PathBuf;

/// Everything that can go wrong calibrating, loading or running the sparse FFN.
#[derive(Debug, thiserror::Error)]
pub enum SparseError {
    #[error("cannot read sparse sidecar {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a turboinfer sparse sidecar (bad magic)")]
    BadMagic { path: PathBuf },
    #[error(
        "sparse sidecar {path} has format version {found}, this build reads version {expected}"
    )]
    Version { path: PathBuf, found: u32, expected: u32 },
    #[error("sparse sidecar {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("sparse sidecar {path} was calibrated for a different model (model key mismatch: sidecar {sidecar}, model {model})")]
    ModelMismatch { path: PathBuf, sidecar: String, model: String },
    #[error("sparse sidecar {path} has shape {found}, the model has {expected}")]
    ShapeMismatch { path: PathBuf, found: String, expected: String },
    #[error("sparsity target {0} is out of range (expected 0 <= s < 1)")]
    BadTarget(f32),
    #[error("sparse FFN needs {what}, which this model does not support: {reason}")]
    Unsupported { what: &'static str, reason: String },
    #[error("calibration cancelled")]
    Cancelled,
    #[error("calibration failed: {0}")]
    Calibration(String),
    #[error(transparent)]
    Quant(#[from] crate::quant::QuantError),
}
