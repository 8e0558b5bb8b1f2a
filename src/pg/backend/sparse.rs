//! The sparse FFN state of a backend: the sidecar of the loaded model (found in
//! `turboinfer.sparse_dir`, then next to the model; opened once and reopened when the file
//! changes) and the hook attached to the engine for the level a call asks for
//! (`turboinfer.sparsity` or the explain argument).

use super::{FileId, Loaded};
use crate::pg::gucs;
use crate::sparse::{
    sidecar, Selector, Sidecar, SparseConfig, SparseError, SparseFfn, SparseHook, Summary,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A requested level matches a calibrated one within this distance: levels are stored as f32
/// (0.3 reads back as 0.30000001) and settings are float8; 1e-4 still tells 3-decimal levels apart.
pub const LEVEL_TOLERANCE: f64 = 1e-4;

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

/// Detaches any hook and forgets the opened sidecar (its mapping goes once no hook holds it).
pub fn forget(loaded: &mut Loaded) {
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
