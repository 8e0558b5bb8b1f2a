//! Sparse FFN (PowerInfer-style): per-layer activation predictors calibrated offline, a sidecar file
//! next to the model, and neuron-level sparse SwiGLU execution with dense fallback.
//!
//! Flow: `calibrate` records |silu(gate)*up| over calibration text and fits per-layer thresholds,
//! hot-first neuron orders and low-rank predictors; `sidecar::write` stores them with the
//! neuron-major down projection; `Sidecar::open` maps and validates the file; a `SparseFfn` bound to
//! a level is attached to a model as its `model::FfnHook` (a `SparseHook`).

pub mod calibrate;
pub mod corpus;
mod error;
pub mod ffn;
pub mod hook;
pub mod linalg;
pub mod sidecar;
pub mod stats;

pub use calibrate::{calibrate, calibrate_with, CalibOptions, CalibProgress, CalibReport};
pub use error::SparseError;
pub use ffn::{Selector, SparseConfig, SparseFfn};
pub use hook::{Recorder, SparseHook};
pub use sidecar::{LayerData, Sidecar, SidecarSpec};
pub use stats::{LayerReport, LayerStats, Summary};

use crate::model::Model;
use std::path::Path;
use std::sync::Arc;

/// Opens `sidecar` (checked against `model`'s file and shape) and returns an executor at the level
/// nearest `target` (0 = every neuron active), ready for `Model::set_ffn_hook`.
pub fn load_for(
    model: &Model,
    sidecar: &Path,
    target: f32,
    config: SparseConfig,
) -> Result<Arc<SparseHook>, SparseError> {
    let sc = Sidecar::open(sidecar, Some(model.file()))?;
    let c = model.config();
    sc.check_shape(c.n_layers, c.dim, c.ffn_dim)?;
    Ok(Arc::new(SparseHook::Sparse(SparseFfn::new(Arc::new(sc), target, config)?)))
}
