//! The model object and its forward pass (llama / qwen2 / qwen3 decoder blocks).

use super::packed::{self, PackStatus, PackedError, PackedFile};
use super::readahead::Readahead;
use super::weights::{Matrix, ReadFrom, Weights};
use super::{Config, FfnHook, KvCache, ModelError, ModelOptions};
use crate::gguf::GgufFile;
use crate::kernels::KernelSet;
use crate::ops::{self, AttnShape, RopeTable, SharedActs};
use crate::platform::fallible::try_zeroed;
use crate::platform::runtime::Runtime;
use crate::quant;
use std::path::Path;
use std::sync::Arc;

/// Which positions of a batch get logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last token's (prompt processing, decoding).
    Last,
    /// Every token's (scoring, speculative verification, tests).
    All,
}

impl Logits {
    /// How many of a batch of `n_tokens` get logits (a [`SeqStep::logits`]).
    pub fn rows(self, n_tokens: usize) -> usize {
        match self {
            Logits::Last => 1,
            Logits::All => n_tokens,
        }
    }
}

/// One sequence's share of a batched pass ([`Model::forward_batch`]).
#[derive(Debug)]
pub struct SeqStep<'a> {
    /// The sequence's KV cache; the step's tokens go at positions `cache.len()..`.
    pub cache: &'a mut KvCache,
    /// The new tokens (at least one).
    pub tokens: &'a [u32],
    /// How many of the last tokens get logits: 1 to decode, `tokens.len()` to check drafts,
    /// 0 for a prompt chunk whose logits nobody reads (no LM head rows for it).
    pub logits: usize,
    /// The LM head rows (token ids, ascending) its logits are for: `None` for the whole
    /// vocabulary; a caller that only reads some tokens' logits (vocabulary pruning) gets
    /// `[logits, rows.len()]`, bitwise those entries of the full rows.
    pub rows: Option<&'a [u32]>,
}

/// Which part of a layer one pool entry runs (see `Model::hidden_seqs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Half {
    /// The attention block.
    Attention,
    /// The feed-forward block.
    Ffn,
    /// Both (a decode step runs whole).
    Both,
}

/// Read-ahead depth of a new model, in stages (layers): 8. The first call of the 1.5B model on
/// a cold page cache (`benches/coldstart.py`, 2026-11-29, medians of 5): 1.62 s without
/// read-ahead, 1.35 s with 2, 1.30 s with 4, 1.32 s with 8, 1.39 s with the whole pass at once
/// (warm: 1.09 s); 8 was the faster of 4 and 8 in two runs of three; the 0.5B 1.08 → 0.95 s. On
/// a warm cache the advice costs ~7 ms, once per model.
pub const DEFAULT_READAHEAD: usize = 8;

/// A loaded model: config plus weights borrowed from a shared mapping of the GGUF file.
pub struct Model {
    file: Arc<GgufFile>,
    cfg: Config,
    w: Weights,
    opts: ModelOptions,
    /// The FFN hook (a replacement or observer of the dense FFN), if attached.
    ffn_hook: Option<Arc<dyn FfnHook>>,
    /// The packed weights file the matrices' packed ranges point into, if attached.
    packed: Option<Arc<PackedFile>>,
    /// Whether packed weights are in use, or why not.
    pack_status: PackStatus,
    /// The kernel tier every pass runs on (the process's by default; every tier gives the same
    /// bits, the numeric contract of `quant::contract`).
    kernels: &'static KernelSet,
    /// The byte ranges each stage of a pass reads, advised ahead on a cold page cache.
    readahead: Readahead,
    /// How many stages ahead of the one computing are advised (0: none; see `readahead`).
    readahead_depth: usize,
    /// Bytes of weights the model may keep resident; a pass that reads more streams them
    /// (see `readahead`). `None`: no limit.
    weight_budget: Option<usize>,
}

impl std::fmt::Debug for Model {
    /// Short summary (the weights themselves are not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("path", &self.file.path()).field("config", &self.cfg).finish()
    }
}

impl Model {
    /// Opens and validates the GGUF file at `path`, and attaches its packed weights file
    /// (`<path>.kx16`) when there is a valid one (see [`Model::attach_default_pack`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Model, ModelError> {
        let mut m = Model::from_gguf(Arc::new(GgufFile::open(path)?))?;
        m.attach_default_pack();
        Ok(m)
    }

    /// Builds a model over an already opened file (shared, e.g. with the tokenizer), on the
    /// process's kernel tier (`kernels::try_kernels`).
    pub fn from_gguf(file: Arc<GgufFile>) -> Result<Model, ModelError> {
        Model::from_gguf_on(file, crate::kernels::try_kernels()?)
    }

    /// [`Model::from_gguf`] on the kernel tier of `set` (tests compare tiers in one process).
    pub fn from_gguf_on(file: Arc<GgufFile>, set: &'static KernelSet) -> Result<Model, ModelError> {
        let cfg = Config::from_gguf(&file)?;
        let w = {
            // The norms and biases are a few KiB each, scattered between the matrices: read
            // just them (queued together), not a read-ahead window around each.
            let _scattered = file.scattered();
            for t in file.tensors().iter().filter(|t| t.dims.len() == 1) {
                file.will_need(t.offset as usize..(t.offset + t.size) as usize);
            }
            Weights::load(&file, &cfg, set)?
        };
        let mut m = Model {
            file,
            cfg,
            readahead: Readahead::default(),
            w,
            opts: ModelOptions::default(),
            ffn_hook: None,
            packed: None,
            pack_status: PackStatus::None,
            kernels: set,
            readahead_depth: DEFAULT_READAHEAD,
            weight_budget: None,
        };
        m.plan_reads();
        Ok(m)
    }

    /// After the matrices' sources changed (load, pack attached or detached): the ranges each
    /// stage of a pass reads, none advised yet; and the token embeddings, when no pass reads
    /// them whole (the LM head is their packed copy, or another matrix), marked as read a row
    /// at a time (no read-around: each new token's row is one page, not a window).
    fn plan_reads(&mut self) {
        self.readahead = Readahead::new(&self.w);
        let e = match self.w.token_embd.reads_from() {
            ReadFrom::Gguf(r) | ReadFrom::Pack(r) => r,
        };
        let whole = self.w.output.reads_from() == ReadFrom::Gguf(e.clone());
        self.file.random_access(e, !whole);
    }

    /// Sets how many stages (layers; the LM head is the stage after the last) ahead of the one
    /// computing a pass asks the kernel to read (0: none). Each stage is advised once per model
    /// (a later pass over resident pages pays nothing); results never change.
    pub fn set_readahead(&mut self, depth: usize) {
        self.readahead_depth = depth;
    }

    /// The read-ahead depth in stages (see [`Model::set_readahead`]).
    pub fn readahead(&self) -> usize {
        self.readahead_depth
    }

    /// Stages advised so far and stages in a pass (layers plus the LM head), and the bytes of
    /// the weights one pass reads.
    pub fn readahead_progress(&self) -> (usize, usize, usize) {
        (self.readahead.advised(), self.readahead.len(), self.readahead.bytes())
    }

    /// Sets the bytes of weights this model may keep resident (`None`: no limit). When one pass
    /// reads more than that, every pass streams the weights: each stage is advised ahead (as
    /// many stages as fit in the budget beside the one computing, at least one, at most
    /// [`Model::set_readahead`]'s depth) and given back to the kernel as soon as it is computed.
    /// Results never change.
    pub fn set_weight_budget(&mut self, bytes: Option<usize>) {
        self.weight_budget = bytes;
    }

    /// The weight budget (see [`Model::set_weight_budget`]).
    pub fn weight_budget(&self) -> Option<usize> {
        self.weight_budget
    }

    /// True when passes stream the weights (a budget smaller than what one pass reads).
    pub fn streams_weights(&self) -> bool {
        self.weight_budget.is_some_and(|b| self.readahead.bytes() > b)
    }

    /// Advises the stages up to `stage + depth` not yet advised (see `readahead`).
    fn read_ahead(&self, stage: usize) {
        let pack = self.packed.as_deref().map(|p| &**p);
        let (depth, per_pass) = match self.weight_budget.filter(|_| self.streams_weights()) {
            Some(b) => (self.readahead_depth.max(1).min(self.readahead.depth_within(b)), true),
            None => (self.readahead_depth, false),
        };
        self.readahead.enter(stage, depth, per_pass, &self.file, pack);
    }

    /// Gives stage `stage`'s weights back to the kernel when streaming (see `readahead`).
    fn drop_behind(&self, stage: usize) {
        if self.streams_weights() {
            self.readahead.leave(stage, &self.file, self.packed.as_deref().map(|p| &**p));
        }
    }

    /// The kernel tier the passes run on.
    pub fn kernels(&self) -> &'static KernelSet {
        self.kernels
    }

    /// The hyper-parameters.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The underlying GGUF file.
    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }

    /// The validated weights.
    pub fn weights(&self) -> &Weights {
        &self.w
    }

    /// The numeric options in effect.
    pub fn options(&self) -> ModelOptions {
        self.opts
    }

    /// Replaces the numeric options (affects later `forward` calls and caches made by `new_cache`;
    /// an existing cache keeps its element type).
    pub fn set_options(&mut self, opts: ModelOptions) {
        self.opts = opts;
    }

    /// Builder form of `set_options`.
    pub fn with_options(mut self, opts: ModelOptions) -> Model {
        self.opts = opts;
        self
    }

    /// Attaches (or with `None` detaches) an FFN hook, e.g. a sparse FFN executor or a
    /// calibration recorder.
    pub fn set_ffn_hook(&mut self, hook: Option<Arc<dyn FfnHook>>) {
        self.ffn_hook = hook;
    }

    /// The attached FFN hook.
    pub fn ffn_hook(&self) -> Option<&Arc<dyn FfnHook>> {
        self.ffn_hook.as_ref()
    }

    /// Points every packable matrix at its packed copy in `pack`, which must have been made from
    /// this model's file. All or nothing: on error the model stays as it was. Returns the number
    /// of matrices now packed (the LM head counts once even when tied to the embeddings).
    pub fn attach_packed(&mut self, pack: Arc<PackedFile>) -> Result<usize, ModelError> {
        let stale = |reason: String| PackedError::Stale { path: pack.path().to_path_buf(), reason };
        if !pack.matches(&self.file) {
            return Err(
                stale(format!("it was not made from {}", self.file.path().display())).into()
            );
        }
        let mut ranges = Vec::new();
        for m in self.w.matmul_matrices() {
            let Some(e) = pack.entry(&m.name) else {
                ranges.push(None);
                continue;
            };
            let bad = |reason: String| PackedError::BadEntry {
                path: pack.path().to_path_buf(),
                name: m.name.clone(),
                reason,
            };
            if !crate::kernels::packed::packable(m.ty, m.rows, m.cols) {
                return Err(bad(format!(
                    "matrix {} [{}x{}] is not packable",
                    m.ty, m.rows, m.cols
                ))
                .into());
            }
            // Bounds were validated at open; the length must still be this matrix's.
            if e.len != m.byte_len() as u64
                || e.offset.checked_add(e.len).is_none_or(|end| end > pack.len())
            {
                return Err(bad(format!(
                    "{} bytes at {}, the matrix has {}",
                    e.len,
                    e.offset,
                    m.byte_len()
                ))
                .into());
            }
            ranges.push(Some(e.offset as usize..(e.offset + e.len) as usize));
        }
        let mut n = 0;
        for (m, r) in self.w.matmul_matrices_mut().into_iter().zip(ranges) {
            n += r.is_some() as usize;
            m.set_packed(r);
        }
        let bytes = self
            .w
            .matmul_matrices()
            .iter()
            .filter_map(|m| m.packed_range())
            .map(|r| r.len() as u64)
            .sum();
        self.pack_status =
            PackStatus::Attached { path: pack.path().to_path_buf(), matrices: n, bytes };
        self.packed = Some(pack);
        self.plan_reads();
        Ok(n)
    }

    /// Detaches the packed weights file (the model runs unpacked, with the same results).
    pub fn detach_packed(&mut self) {
        for m in self.w.matmul_matrices_mut() {
            m.set_packed(None);
        }
        self.packed = None;
        self.pack_status = PackStatus::None;
        self.plan_reads();
    }

    /// The load policy for packed weights: opens `<model file>.kx16` if it exists and attaches
    /// it. Absent: runs unpacked silently. Present but unusable (truncated, corrupt, stale, other
    /// version, unreadable): runs unpacked and records why in [`Model::pack_status`]. Never fails.
    pub fn attach_default_pack(&mut self) -> &PackStatus {
        let path = packed::sidecar_path(self.file.path());
        self.detach_packed();
        let res = PackedFile::open(&path, &self.file)
            .map_err(ModelError::from)
            .and_then(|p| self.attach_packed(Arc::new(p)));
        match res {
            Ok(_) => {}
            Err(ModelError::Packed(PackedError::Missing { .. })) => {}
            Err(e) => self.pack_status = PackStatus::Ignored { path, reason: e.to_string() },
        }
        &self.pack_status
    }

    /// The attached packed weights file, if any.
    pub fn packed(&self) -> Option<&Arc<PackedFile>> {
        self.packed.as_ref()
    }

    /// Whether packed weights are in use, or why not (`Display`: `kx16 (N matrices)` | `none` |
    /// `ignored: <reason>`).
    pub fn pack_status(&self) -> &PackStatus {
        &self.pack_status
    }

    /// Number of matrices with a packed copy attached (0 when unpacked).
    pub fn packed_matrices(&self) -> usize {
        self.w.matmul_matrices().iter().filter(|m| m.packed_range().is_some()).count()
    }

    /// Bytes of the attached packed matrices.
    pub fn packed_bytes(&self) -> u64 {
        self.w
            .matmul_matrices()
            .iter()
            .filter_map(|m| m.packed_range())
            .map(|r| r.len() as u64)
            .sum()
    }

    /// A fresh KV cache for up to `n_ctx` positions (clamped to the training context), of the
    /// element type in `options().kv_dtype`. Panics when the memory cannot be had (tools and
    /// tests; the server uses [`Model::try_new_cache`]).
    pub fn new_cache(&self, n_ctx: usize) -> KvCache {
        KvCache::with_dtype(&self.cfg, n_ctx, self.opts.kv_dtype)
    }

    /// [`Model::new_cache`] that fails with `ModelError::OutOfMemory` instead of aborting.
    pub fn try_new_cache(&self, n_ctx: usize) -> Result<KvCache, ModelError> {
        KvCache::try_with_dtype(&self.cfg, n_ctx, self.opts.kv_dtype)
    }

    /// Bytes of the KV cache [`Model::new_cache`] makes for `n_ctx` positions.
    pub fn kv_cache_bytes(&self, n_ctx: usize) -> usize {
        KvCache::bytes_for(&self.cfg, n_ctx, self.opts.kv_dtype)
    }

    /// Upper estimate of the transient buffers of one forward pass of `n_tok` tokens with
    /// `n_out` rows of logits over `n_ctx` cache positions: the residual stream and block
    /// buffers, the quantized activations, the matmul outputs before their transpose, the logits
    /// and the attention scores of every worker thread (`threads`). The weights are mapped from
    /// the model file and are not counted.
    pub fn scratch_bytes(&self, n_tok: usize, n_out: usize, n_ctx: usize, threads: usize) -> usize {
        let c = &self.cfg;
        let n_ctx = KvCache::capacity_for(c, n_ctx);
        let widest = c.dim.max(c.q_dim()).max(c.ffn_dim);
        let floats = n_tok * (3 * c.dim + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.ffn_dim) // x h proj, q att, k v, gate up
            + n_tok * widest // a matmul's [rows, n_tok] output before the transpose
            + n_out * c.dim // final-normed hidden states
            + 2 * n_out * c.vocab_size // logits and the LM head's matmul output
            + threads.max(1) * n_ctx; // attention scores
                                      // Quantized activations: at most ~1.1 bytes per f32 input (8-bit blocks plus scales);
                                      // 2 bytes per value bounds every supported activation type.
        floats * 4 + 2 * n_tok * widest
    }

    /// Runs `tokens` at positions `cache.len()..` through the network, appends their keys and
    /// values to `cache`, and returns logits `[n_out, vocab]` (`n_out` = 1 for `Last`, `tokens.len()`
    /// for `All`). A batch is processed layer by layer, so each weight row is read once per batch.
    pub fn forward(
        &self,
        rt: &Runtime,
        cache: &mut KvCache,
        tokens: &[u32],
        which: Logits,
    ) -> Result<Vec<f32>, ModelError> {
        self.forward_checked(rt, cache, tokens, which, &mut || true)
    }

    /// [`Model::forward`] that, for a batch of more than one token, calls `between_layers` on the
    /// calling thread before each half layer (attention, then feed-forward; each half runs in
    /// the pool; a single-token pass runs whole, unchecked: its caller checks between tokens):
    /// when it returns false the pass stops with [`ModelError::Interrupted`] and `cache` is as
    /// before the call (its length only advances at the end). This bounds the time between
    /// cancellation checks by half a layer instead of a whole pass, which at long contexts is
    /// hundreds of milliseconds for a prefill batch (and more on the scalar tier).
    pub fn forward_checked(
        &self,
        rt: &Runtime,
        cache: &mut KvCache,
        tokens: &[u32],
        which: Logits,
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        let logits = which.rows(tokens.len());
        self.forward_batch(rt, &mut [SeqStep { cache, tokens, logits, rows: None }], between_layers)
    }

    /// The full LM head over final-normed hidden states `hn` (`[n_out, dim]`): logits
    /// `[n_out, vocab]`, then the check that the mapped files did not change under the pass.
    fn lm_head(&self, rt: &Runtime, hn: &[f32]) -> Result<Vec<f32>, ModelError> {
        let vocab = self.cfg.vocab_size;
        self.read_ahead(self.cfg.n_layers);
        rt.install(|| {
            let mut logits =
                try_zeroed(hn.len() / self.cfg.dim * vocab).map_err(ModelError::oom("logits"))?; // [n_out, vocab]
            mul(
                &self.file,
                self.packed.as_deref(),
                &self.w.output,
                &mut SharedActs::new(hn, self.cfg.dim, self.kernels),
                &mut logits,
            )?;
            self.drop_behind(self.cfg.n_layers);
            Ok(logits)
        })
        .and_then(|l| self.unchanged().map(|()| l))
    }

    /// One decoding step of several sequences in one pass: `tokens[i]` is the next token of the
    /// sequence whose cache is `caches[i]`; appends each token's keys and values to its own cache
    /// and returns the logits `[caches.len(), vocab]`. [`Model::forward_batch`] with one token
    /// and its logits per sequence.
    pub fn forward_seqs(
        &self,
        rt: &Runtime,
        caches: &mut [&mut KvCache],
        tokens: &[u32],
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        assert_eq!(tokens.len(), caches.len(), "one token per sequence");
        let mut steps: Vec<SeqStep<'_>> = caches
            .iter_mut()
            .zip(tokens.chunks(1))
            .map(|(cache, t)| SeqStep { cache, tokens: t, logits: 1, rows: None })
            .collect();
        self.forward_batch(rt, &mut steps, between_layers)
    }

    /// One pass over several sequences, each with its own number of new tokens (a prompt chunk
    /// of one caller beside a decode step or a draft check of another: continuous batching).
    /// Appends each step's keys and values to its own cache and returns the logits of the last
    /// `steps[i].logits` tokens of each step, in step order: `[Σ logits, vocab]` (a step with
    /// `rows` has `[logits, rows.len()]` in its place). The weights are
    /// read once for all the sequences (a decode step is bound by reading them), and each
    /// sequence's logits are bitwise those of [`Model::forward`] on that sequence alone (rows
    /// of a batch are computed independently: the engine's batch = sequential property).
    /// `between_layers` as in [`Model::forward_checked`]. Every input is checked before any
    /// cache changes; on an error or an interruption no cache has advanced.
    pub fn forward_batch(
        &self,
        rt: &Runtime,
        steps: &mut [SeqStep<'_>],
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        if steps.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        let vocab = self.cfg.vocab_size;
        for s in steps.iter() {
            if s.tokens.is_empty() {
                return Err(ModelError::EmptyBatch);
            }
            if s.logits > s.tokens.len() {
                return Err(ModelError::LogitsRows { asked: s.logits, tokens: s.tokens.len() });
            }
            s.cache.check_shape(&self.cfg)?;
            s.cache.check_room(s.tokens.len())?;
            let rows = s.rows.unwrap_or_default();
            if let Some(&id) = s.tokens.iter().chain(rows).find(|&&t| t as usize >= vocab) {
                return Err(ModelError::TokenOutOfRange { id, vocab });
            }
        }
        let hn = self.hidden_seqs(rt, steps, between_layers)?;
        if hn.is_empty() {
            // No step asked for logits: no LM head (its matrix is not even read).
            return self.unchanged().map(|()| Vec::new());
        }
        if steps.iter().all(|s| s.rows.is_none()) {
            return self.lm_head(rt, &hn); // [Σ logits, vocab]
        }
        // Each step's own head over its hidden rows (a row's logits do not depend on the
        // other rows of the product: the same bits as one head over all of them).
        let dim = self.cfg.dim;
        let mut out = Vec::new();
        let mut at = 0;
        for s in steps.iter().filter(|s| s.logits > 0) {
            let h = &hn[at * dim..(at + s.logits) * dim]; // [logits, dim]
            at += s.logits;
            out.extend(match s.rows {
                Some(rows) => self.lm_head_rows(rt, h, rows)?, // [logits, rows.len()]
                None => self.lm_head(rt, h)?,                  // [logits, vocab]
            });
        }
        Ok(out)
    }

    /// Err when the model or pack file changed under its mapping since it was opened (see
    /// `fileio::mapguard`): checked after every pass, whose results are then not to be trusted.
    fn unchanged(&self) -> Result<(), ModelError> {
        if self.file.changed() {
            return Err(ModelError::FileChanged { path: self.file.path().to_path_buf() });
        }
        match self.packed.as_deref() {
            Some(p) if p.changed() => Err(ModelError::FileChanged { path: p.path().to_path_buf() }),
            _ => Ok(()),
        }
    }

    /// [`Model::forward`] with an LM head restricted to the vocabulary rows in `rows` (ascending
    /// token ids): returns `[n_out, rows.len()]`, each value bitwise equal to the same entry of
    /// the full logits (same kernels, same quantized activations), while reading only those rows
    /// of the output matrix.
    pub fn forward_rows(
        &self,
        rt: &Runtime,
        cache: &mut KvCache,
        tokens: &[u32],
        which: Logits,
        rows: &[u32],
    ) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        cache.check_shape(&self.cfg)?;
        cache.check_room(tokens.len())?;
        let vocab = self.cfg.vocab_size;
        if let Some(&id) = tokens.iter().chain(rows).find(|&&t| t as usize >= vocab) {
            return Err(ModelError::TokenOutOfRange { id, vocab });
        }
        let hn = self.hidden(rt, cache, tokens, which, &mut || true)?;
        self.lm_head_rows(rt, &hn, rows)
    }

    /// The LM head restricted to the vocabulary `rows` (valid ids) over final-normed hidden
    /// states `hn` (`[n_out, dim]`): logits `[n_out, rows.len()]`, then the check that the
    /// mapped files did not change under the pass.
    fn lm_head_rows(&self, rt: &Runtime, hn: &[f32], rows: &[u32]) -> Result<Vec<f32>, ModelError> {
        rt.install(|| {
            let mut logits = try_zeroed(hn.len() / self.cfg.dim * rows.len())
                .map_err(ModelError::oom("logits"))?; // [n_out, rows.len()]
            let mut acts = SharedActs::new(hn, self.cfg.dim, self.kernels);
            let (a, arb) = acts.get(self.w.output.act_ty)?;
            ops::matmul_rows(
                self.w.output.rows(&self.file),
                a,
                arb,
                hn.len() / self.cfg.dim,
                rows,
                &mut logits,
            );
            self.drop_behind(self.cfg.n_layers);
            Ok(logits)
        })
        .and_then(|l| self.unchanged().map(|()| l))
    }

    /// The network up to the LM head (inputs validated): appends the tokens' keys and values to
    /// `cache` and returns the final-normed hidden states `[n_out, dim]`. Each layer runs in the
    /// pool; for a batch, `between_layers` runs before each half on the calling thread (false: stop,
    /// see [`Model::forward_checked`]).
    fn hidden(
        &self,
        rt: &Runtime,
        cache: &mut KvCache,
        tokens: &[u32],
        which: Logits,
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        let logits = which.rows(tokens.len());
        self.hidden_seqs(rt, &mut [SeqStep { cache, tokens, logits, rows: None }], between_layers)
    }

    /// [`Model::hidden`] over several sequences in one pass (inputs validated), each step's
    /// tokens at its own cache's positions; the weights are read once for all of them. Returns
    /// the final-normed hidden states of the last `logits` tokens of each step
    /// (`[Σ logits, dim]`). Every value is bitwise what the sequence alone would give (rows of a
    /// batch are computed independently).
    fn hidden_seqs(
        &self,
        rt: &Runtime,
        steps: &mut [SeqStep<'_>],
        between_layers: &mut dyn FnMut() -> bool,
    ) -> Result<Vec<f32>, ModelError> {
        let c = &self.cfg;
        let f = &*self.file;
        let pk = self.packed.as_deref();
        // Where each step's tokens sit in the batch.
        let spans: Vec<std::ops::Range<usize>> = steps
            .iter()
            .scan(0, |at, s| {
                let r = *at..*at + s.tokens.len();
                *at = r.end;
                Some(r)
            })
            .collect();
        let tokens: Vec<u32> = steps.iter().flat_map(|s| s.tokens.iter().copied()).collect();
        let n = tokens.len();
        let (dim, qd, kvd, hd) = (c.dim, c.q_dim(), c.kv_dim(), c.head_dim);

        let scratch =
            |len: usize| try_zeroed::<f32>(len).map_err(ModelError::oom("forward-pass scratch"));
        let mut x = scratch(n * dim)?; // [n, dim] residual stream
        let embd = &self.w.token_embd;
        let deq = quant::dequantize_row_fn(embd.ty).expect("checked at load");
        for (row, &id) in x.chunks_exact_mut(dim).zip(&tokens) {
            deq(embd.row_bytes_of(f, id as usize), row);
        }

        // Each sequence's rotary table at its own positions.
        let ropes: Vec<RopeTable> = steps
            .iter()
            .map(|s| {
                let at = s.cache.len();
                RopeTable::new(at..at + s.tokens.len(), c.n_rot, c.rope_theta)
            })
            .collect();
        let mut h = scratch(n * dim)?; // [n, dim] normalised input of a sub-block
        let mut q = scratch(n * qd)?; // [n, n_heads, head_dim]
        let mut k = scratch(n * kvd)?; // [n, n_kv_heads, head_dim]
        let mut v = scratch(n * kvd)?; // [n, n_kv_heads, head_dim]
        let mut att = scratch(n * qd)?; // [n, n_heads, head_dim]
        let mut proj = scratch(n * dim)?; // [n, dim] block output before the residual add
        let mut gate = scratch(n * c.ffn_dim)?; // [n, ffn_dim]
        let mut up = scratch(n * c.ffn_dim)?; // [n, ffn_dim]

        // One layer's work (in the pool): its attention block, its feed-forward block, or both.
        let mut layer =
            |l: usize, lw: &super::LayerWeights, half: Half| -> Result<(), ModelError> {
                if half != Half::Ffn {
                    // Attention block.
                    norm_rows(&mut h, &x, &lw.attn_norm, c.rms_eps);
                    let mut acts = SharedActs::new(&h, dim, self.kernels);
                    mul(f, pk, &lw.wq, &mut acts, &mut q)?;
                    mul(f, pk, &lw.wk, &mut acts, &mut k)?;
                    mul(f, pk, &lw.wv, &mut acts, &mut v)?;
                    add_bias(&mut q, lw.bq.as_deref());
                    add_bias(&mut k, lw.bk.as_deref());
                    add_bias(&mut v, lw.bv.as_deref());
                    if let Some(w) = &lw.q_norm {
                        ops::rmsnorm_chunks_in_place(&mut q, w, c.rms_eps);
                    }
                    if let Some(w) = &lw.k_norm {
                        ops::rmsnorm_chunks_in_place(&mut k, w, c.rms_eps);
                    }
                    for ((step, rope), rows) in steps.iter_mut().zip(&ropes).zip(&spans) {
                        let cache = &mut *step.cache;
                        let rows = rows.clone(); // this sequence's tokens in the batch
                        for t in 0..rows.len() {
                            let r = rows.start + t;
                            rope.apply(t, &mut q[r * qd..(r + 1) * qd], hd, c.rope_mode);
                            rope.apply(t, &mut k[r * kvd..(r + 1) * kvd], hd, c.rope_mode);
                        }
                        let (kr, qr) =
                            (rows.start * kvd..rows.end * kvd, rows.start * qd..rows.end * qd);
                        cache.store(l, &k[kr.clone()], &v[kr]);
                        let shape = AttnShape {
                            n_heads: c.n_heads,
                            n_kv_heads: c.n_kv_heads,
                            head_dim: hd,
                            max_seq: cache.capacity(),
                            pos0: cache.len(),
                        };
                        ops::attention(
                            &q[qr.clone()],
                            cache.layer(l),
                            shape,
                            self.opts.attn_precision,
                            self.kernels,
                            &mut att[qr],
                        );
                    }
                    mul(f, pk, &lw.wo, &mut SharedActs::new(&att, qd, self.kernels), &mut proj)?;
                    add_in_place(&mut x, &proj);
                }
                if half != Half::Attention {
                    // Feed-forward block (SwiGLU).
                    norm_rows(&mut h, &x, &lw.ffn_norm, c.rms_eps);
                    let done_sparse = match &self.ffn_hook {
                        Some(hook) => hook.run(l, f, lw, &h, &mut proj)?,
                        None => false,
                    };
                    if !done_sparse {
                        let mut acts = SharedActs::new(&h, dim, self.kernels);
                        mul(f, pk, &lw.w_gate, &mut acts, &mut gate)?;
                        mul(f, pk, &lw.w_up, &mut acts, &mut up)?;
                        self.kernels.swiglu(&mut gate, &up);
                        if let Some(hook) = &self.ffn_hook {
                            hook.observe(l, &h, &gate);
                        }
                        mul(
                            f,
                            pk,
                            &lw.w_down,
                            &mut SharedActs::new(&gate, c.ffn_dim, self.kernels),
                            &mut proj,
                        )?;
                    }
                    add_in_place(&mut x, &proj);
                }
                Ok(())
            };
        if n == 1 {
            // A decode step: one pool entry for the whole pass (a pass is a few tens of ms;
            // the decode loop checks between tokens, and a pool entry per layer would cost
            // more than the check gains here).
            rt.install(|| {
                self.w.layers.iter().enumerate().try_for_each(|(l, lw)| {
                    self.read_ahead(l);
                    layer(l, lw, Half::Both)?;
                    self.drop_behind(l);
                    Ok::<(), ModelError>(())
                })
            })?;
        } else {
            // A batch: a check before each half layer (on a slow kernel tier a whole layer of a
            // 64-token chunk at a deep context can take a few hundred ms).
            for (l, lw) in self.w.layers.iter().enumerate() {
                self.read_ahead(l);
                for half in [Half::Attention, Half::Ffn] {
                    if !between_layers() {
                        return Err(ModelError::Interrupted { layer: l });
                    }
                    rt.install(|| layer(l, lw, half))?;
                }
                self.drop_behind(l);
            }
        }
        for (step, span) in steps.iter_mut().zip(&spans) {
            step.cache.advance(span.len());
        }

        // The rows that get logits: the last `logits` tokens of each step.
        let rows: Vec<usize> =
            steps.iter().zip(&spans).flat_map(|(s, r)| r.end - s.logits..r.end).collect();
        let mut hn = scratch(rows.len() * dim)?; // [n_out, dim]
        for (o, &r) in hn.chunks_exact_mut(dim).zip(&rows) {
            ops::rmsnorm(o, &x[r * dim..(r + 1) * dim], &self.w.output_norm, c.rms_eps);
        }
        Ok(hn)
    }
}

/// `out[t] = rmsnorm(x[t]) * w` for every row.
fn norm_rows(out: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    let d = w.len();
    for (o, xi) in out.chunks_exact_mut(d).zip(x.chunks_exact(d)) {
        ops::rmsnorm(o, xi, w, eps);
    }
}

/// `out = acts · mᵀ` (`[n_tok, m.rows]`), quantizing the activations to `m`'s format once; uses
/// `m`'s packed copy in `pack` when it has one and the kernel tier has a packed kernel.
fn mul(
    file: &GgufFile,
    pack: Option<&PackedFile>,
    m: &Matrix,
    acts: &mut SharedActs<'_>,
    out: &mut [f32],
) -> Result<(), ModelError> {
    let n_tok = acts.n_tok();
    let (a, rb) = acts.get(m.act_ty)?;
    ops::matmul(m.rows_with(file, pack), a, rb, n_tok, out);
    Ok(())
}

/// Adds `bias` (`[width]`) to every row of `x` (`[n, width]`), if there is a bias.
fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            for (v, &bv) in row.iter_mut().zip(b) {
                *v += bv;
            }
        }
    }
}

/// `x += y` elementwise.
fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}
