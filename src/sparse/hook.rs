//! What the model's FFN block calls into (the sparse module's `model::FfnHook`): a sparse
//! executor, or a recorder of dense activations (calibration).

use super::ffn::SparseFfn;
use crate::gguf::GgufFile;
use crate::model::{FfnHook, LayerWeights, ModelError};
use half::f16;
use std::sync::Mutex;

/// The sparse module's FFN hook.
#[derive(Debug)]
pub enum SparseHook {
    /// Run the FFN sparsely.
    Sparse(SparseFfn),
    /// Run it densely and record inputs and activations.
    Record(Recorder),
}

impl SparseHook {
    /// The sparse hook behind a model's `hook`, if it is one.
    pub fn of(hook: &dyn FfnHook) -> Option<&SparseHook> {
        (hook as &dyn std::any::Any).downcast_ref::<SparseHook>()
    }
}

impl FfnHook for SparseHook {
    /// A sparse executor computes the FFN (a `SparseError` becomes `ModelError::FfnHook`); a
    /// recorder leaves it to the dense path.
    fn run(
        &self,
        l: usize,
        file: &GgufFile,
        lw: &LayerWeights,
        h: &[f32],
        out: &mut [f32],
    ) -> Result<bool, ModelError> {
        match self {
            SparseHook::Sparse(s) => {
                s.forward(l, file, lw, h, out).map_err(|e| ModelError::FfnHook(Box::new(e)))
            }
            SparseHook::Record(_) => Ok(false),
        }
    }

    /// A recorder only observes; a sparse executor is batch-invariant only when it also runs
    /// batches token by token (`SparseConfig::batches`), since batches are dense otherwise.
    fn batch_invariant(&self) -> bool {
        match self {
            SparseHook::Sparse(s) => s.config.batches,
            SparseHook::Record(_) => true,
        }
    }

    /// A recorder records the rows; a sparse executor ignores them.
    fn observe(&self, l: usize, h: &[f32], act: &[f32]) {
        if let SparseHook::Record(r) = self {
            r.record(l, h, act);
        }
    }
}

/// One layer's recorded rows.
#[derive(Debug, Default)]
pub struct LayerRecord {
    /// `[n, dim]` FFN inputs (normed).
    pub h: Vec<f32>,
    /// `[n, ffn_dim]` activations, f16 to halve the memory of the largest buffer.
    pub a: Vec<f16>,
    pub n: usize,
}

/// Records up to `max_tokens` tokens per layer.
#[derive(Debug)]
pub struct Recorder {
    dim: usize,
    max_tokens: usize,
    layers: Vec<Mutex<LayerRecord>>,
}

impl Recorder {
    /// A recorder for `n_layers` layers of FFN input width `dim`.
    pub fn new(n_layers: usize, dim: usize, max_tokens: usize) -> Recorder {
        Recorder {
            dim,
            max_tokens,
            layers: (0..n_layers).map(|_| Mutex::new(LayerRecord::default())).collect(),
        }
    }

    /// Appends the rows of layer `l` (`h`: `[n, dim]`, `act`: `[n, ffn]`) up to `max_tokens`.
    fn record(&self, l: usize, h: &[f32], act: &[f32]) {
        let Some(m) = self.layers.get(l) else { return };
        let mut r = m.lock().unwrap_or_else(|e| e.into_inner());
        let n = h.len() / self.dim;
        let k = self.max_tokens.saturating_sub(r.n).min(n);
        if k == 0 {
            return;
        }
        let da = act.len() / n;
        r.h.extend_from_slice(&h[..k * self.dim]);
        r.a.extend(act[..k * da].iter().map(|&x| f16::from_f32(x)));
        r.n += k;
    }

    /// Tokens recorded in layer 0.
    pub fn tokens(&self) -> usize {
        self.layers.first().map_or(0, |m| m.lock().unwrap_or_else(|e| e.into_inner()).n)
    }

    /// Takes layer `l`'s rows out of the recorder.
    pub fn take(&self, l: usize) -> LayerRecord {
        std::mem::take(&mut *self.layers[l].lock().unwrap_or_else(|e| e.into_inner()))
    }
}
