//! Model weights: references into the mapped GGUF file, validated against the config at load.

use super::PackedFile;
use super::{Config, ModelError};
use crate::gguf::{GgufFile, TensorInfo};
use crate::kernels::{KernelSet, TypeKernels};
use crate::ops::{PackedKernel, PackedRows, WeightRows};
use crate::quant::{self, GgmlType};
use std::ops::Range;

/// A 2-D weight matrix whose quantized rows stay in the mapping (never copied or dequantized).
#[derive(Clone)]
pub struct Matrix {
    pub name: String,
    pub ty: GgmlType,
    /// Output features (`dims[1]`).
    pub rows: usize,
    /// Input features (`dims[0]`, the dot-product length).
    pub cols: usize,
    pub row_bytes: usize,
    /// The format input activations must be quantized to before dotting with these rows.
    pub act_ty: GgmlType,
    /// Byte range of the tensor inside the file.
    range: Range<usize>,
    /// The kernels for `ty` of the model's tier.
    kernels: TypeKernels,
    /// The tier's kernel for the packed layout of `ty`, if it has one (for Q2_K, the lookup-table
    /// kernel where it is measured faster: `KernelSet::lut`).
    packed_kernel: Option<PackedKernel>,
    /// Byte range of the same matrix in the `Q4_K×16` / `Q6_K×16` / `Q2_K×32` layout inside the
    /// model's packed weights file (`Model::attach_packed`), if attached.
    packed: Option<Range<usize>>,
}

impl std::fmt::Debug for Matrix {
    /// Short summary (the weights themselves are not printed).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Matrix({} {} [{}x{}])", self.name, self.ty, self.rows, self.cols)
    }
}

impl Matrix {
    /// The rows as a kernel argument, borrowing from `file` (the file this matrix was loaded from).
    pub fn rows<'a>(&self, file: &'a GgufFile) -> WeightRows<'a> {
        WeightRows {
            data: &file.bytes()[self.range.clone()],
            rows: self.rows,
            cols: self.cols,
            row_bytes: self.row_bytes,
            kernels: self.kernels,
            packed: None,
        }
    }

    /// The rows as a kernel argument, with the packed layout too when this matrix has a range in
    /// `pack` (the file attached to the model) and the kernel tier has a packed kernel.
    pub fn rows_with<'a>(
        &self,
        file: &'a GgufFile,
        pack: Option<&'a PackedFile>,
    ) -> WeightRows<'a> {
        let mut w = self.rows(file);
        if let (Some(r), Some(p), Some(kernel)) = (&self.packed, pack, self.packed_kernel) {
            w.packed = Some(PackedRows { data: &p.bytes()[r.clone()], kernel });
        }
        w
    }

    /// The byte range of this matrix in the attached packed file, if any.
    pub fn packed_range(&self) -> Option<Range<usize>> {
        self.packed.clone()
    }

    /// Sets (or clears) the packed range (checked by `Model::attach_packed`).
    pub(super) fn set_packed(&mut self, r: Option<Range<usize>>) {
        self.packed = r;
    }

    /// Where a pass reads this matrix: its packed copy when one is attached and the tier has a
    /// kernel for it (as [`Matrix::rows_with`] decides), else the model file. A Q2_K matrix with
    /// the lookup-table kernel is read from the pack by one-token passes (decoding) only; prompt
    /// batches dot it unpacked from the model file (`ops::matmul`), so on a Q2_K model with a
    /// pack both copies end up in the page cache.
    pub fn reads_from(&self) -> ReadFrom {
        match (&self.packed, self.packed_kernel) {
            (Some(r), Some(_)) => ReadFrom::Pack(r.clone()),
            _ => ReadFrom::Gguf(self.range.clone()),
        }
    }

    /// Byte length of the matrix (the same packed or not).
    pub fn byte_len(&self) -> usize {
        self.range.len()
    }

    /// Row `r`'s raw bytes (`r < rows`, checked by the caller).
    pub fn row_bytes_of<'a>(&self, file: &'a GgufFile, r: usize) -> &'a [u8] {
        let start = self.range.start + r * self.row_bytes;
        &file.bytes()[start..start + self.row_bytes]
    }
}

/// The byte range a pass reads a matrix from, and in which file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadFrom {
    /// The model's GGUF file.
    Gguf(Range<usize>),
    /// The attached packed weights file.
    Pack(Range<usize>),
}

/// One transformer block's weights.
#[derive(Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,      // [dim]
    pub wq: Matrix,               // [q_dim rows, dim cols]
    pub wk: Matrix,               // [kv_dim, dim]
    pub wv: Matrix,               // [kv_dim, dim]
    pub wo: Matrix,               // [dim, q_dim]
    pub bq: Option<Vec<f32>>,     // [q_dim]
    pub bk: Option<Vec<f32>>,     // [kv_dim]
    pub bv: Option<Vec<f32>>,     // [kv_dim]
    pub q_norm: Option<Vec<f32>>, // [head_dim]
    pub k_norm: Option<Vec<f32>>, // [head_dim]
    pub ffn_norm: Vec<f32>,       // [dim]
    pub w_gate: Matrix,           // [ffn_dim, dim]
    pub w_up: Matrix,             // [ffn_dim, dim]
    pub w_down: Matrix,           // [dim, ffn_dim]
}

/// All weights of a model.
#[derive(Debug)]
pub struct Weights {
    /// Token embeddings `[vocab rows, dim cols]`; rows are dequantized one at a time on lookup.
    pub token_embd: Matrix,
    pub output_norm: Vec<f32>, // [dim]
    /// LM head `[vocab, dim]` (the embedding matrix itself when tied).
    pub output: Matrix,
    pub layers: Vec<LayerWeights>,
}

/// Looks up `name` and checks its dims.
fn tensor<'a>(
    file: &'a GgufFile,
    name: &str,
    dims: &[usize],
) -> Result<&'a TensorInfo, ModelError> {
    let t = file.tensor(name).ok_or_else(|| ModelError::MissingTensor(name.to_string()))?.info;
    let want: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    if t.dims != want {
        return Err(ModelError::ShapeMismatch {
            name: name.to_string(),
            expected: want,
            found: t.dims.clone(),
        });
    }
    Ok(t)
}

/// Loads matrix `name` of `rows` rows by `cols` columns (ggml dims `[cols, rows]`).
fn matrix(
    file: &GgufFile,
    set: &'static KernelSet,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Matrix, ModelError> {
    let t = tensor(file, name, &[cols, rows])?;
    let unsupported = |what| ModelError::UnsupportedType { name: name.to_string(), ty: t.ty, what };
    let kernels = set.get(t.ty).ok_or_else(|| unsupported("multiply (no dot product)"))?;
    let act_ty = quant::activation_type(t.ty);
    set.quantize(act_ty).ok_or_else(|| unsupported("multiply (no activation quantizer)"))?;
    // The activation row must exist for this length too (e.g. Q8_K needs multiples of 256).
    quant::row_size(act_ty, cols).map_err(|_| unsupported("multiply at this row length"))?;
    let row_bytes =
        quant::row_size(t.ty, cols).map_err(|_| unsupported("store at this row length"))?;
    if row_bytes.checked_mul(rows) != Some(t.size as usize) {
        return Err(ModelError::ShapeMismatch {
            name: name.into(),
            expected: vec![cols as u64, rows as u64],
            found: t.dims.clone(),
        });
    }
    let start = t.offset as usize;
    Ok(Matrix {
        name: name.to_string(),
        ty: t.ty,
        rows,
        cols,
        row_bytes,
        act_ty,
        range: start..start + t.size as usize,
        kernels,
        packed_kernel: set
            .packed(t.ty)
            .map(PackedKernel::Rows16)
            .or_else(|| set.lut(t.ty).map(PackedKernel::Lut32)),
        packed: None,
    })
}

/// Loads a 1-D tensor `name` of `n` elements converted to f32 (norm weights, biases).
fn vector(file: &GgufFile, name: &str, n: usize) -> Result<Vec<f32>, ModelError> {
    let t = tensor(file, name, &[n])?;
    let mut out = vec![0.0f32; n];
    quant::dequantize_row(t.ty, file.data_of(t), &mut out).map_err(|_| {
        ModelError::UnsupportedType { name: name.to_string(), ty: t.ty, what: "convert to f32" }
    })?;
    Ok(out)
}

/// Loads `name` only if the file has it.
fn opt_vector(file: &GgufFile, name: &str, n: usize) -> Result<Option<Vec<f32>>, ModelError> {
    if file.tensor(name).is_none() {
        return Ok(None);
    }
    vector(file, name, n).map(Some)
}

impl LayerWeights {
    /// The seven matrices of the block, mutably (attaching packed ranges).
    pub(super) fn matrices_mut(&mut self) -> [&mut Matrix; 7] {
        [
            &mut self.wq,
            &mut self.wk,
            &mut self.wv,
            &mut self.wo,
            &mut self.w_gate,
            &mut self.w_up,
            &mut self.w_down,
        ]
    }

    /// The seven matrices of the block.
    pub fn matrices(&self) -> [&Matrix; 7] {
        [&self.wq, &self.wk, &self.wv, &self.wo, &self.w_gate, &self.w_up, &self.w_down]
    }
}

impl Weights {
    /// Every matrix the forward pass multiplies with (layers, then the LM head), mutably.
    pub(super) fn matmul_matrices_mut(&mut self) -> Vec<&mut Matrix> {
        let mut v: Vec<&mut Matrix> =
            self.layers.iter_mut().flat_map(|l| l.matrices_mut()).collect();
        v.push(&mut self.output);
        v
    }

    /// Every matrix the forward pass multiplies with (layers, then the LM head).
    pub fn matmul_matrices(&self) -> Vec<&Matrix> {
        let mut v: Vec<&Matrix> = self.layers.iter().flat_map(|l| l.matrices()).collect();
        v.push(&self.output);
        v
    }

    /// Finds and validates every tensor the config calls for, with the kernels of `set`.
    pub fn load(
        file: &GgufFile,
        cfg: &Config,
        set: &'static KernelSet,
    ) -> Result<Weights, ModelError> {
        let (dim, qd, kvd, ffn, hd) =
            (cfg.dim, cfg.q_dim(), cfg.kv_dim(), cfg.ffn_dim, cfg.head_dim);
        let token_embd = matrix(file, set, "token_embd.weight", cfg.vocab_size, dim)?;
        if quant::dequantize_row_fn(token_embd.ty).is_none() {
            return Err(ModelError::UnsupportedType {
                name: token_embd.name,
                ty: token_embd.ty,
                what: "dequantize (embedding lookup)",
            });
        }
        let output = if cfg.tied_embeddings {
            token_embd.clone()
        } else {
            matrix(file, set, "output.weight", cfg.vocab_size, dim)?
        };
        let output_norm = vector(file, "output_norm.weight", dim)?;
        let mut layers = Vec::with_capacity(cfg.n_layers);
        for i in 0..cfg.n_layers {
            let n = |s: &str| format!("blk.{i}.{s}");
            let bias = |s: &str, len: usize| -> Result<Option<Vec<f32>>, ModelError> {
                if cfg.qkv_bias {
                    vector(file, &n(s), len).map(Some)
                } else {
                    opt_vector(file, &n(s), len)
                }
            };
            let qk_norm = |s: &str| -> Result<Option<Vec<f32>>, ModelError> {
                if cfg.qk_norm {
                    vector(file, &n(s), hd).map(Some)
                } else {
                    Ok(None)
                }
            };
            layers.push(LayerWeights {
                attn_norm: vector(file, &n("attn_norm.weight"), dim)?,
                wq: matrix(file, set, &n("attn_q.weight"), qd, dim)?,
                wk: matrix(file, set, &n("attn_k.weight"), kvd, dim)?,
                wv: matrix(file, set, &n("attn_v.weight"), kvd, dim)?,
                wo: matrix(file, set, &n("attn_output.weight"), dim, qd)?,
                bq: bias("attn_q.bias", qd)?,
                bk: bias("attn_k.bias", kvd)?,
                bv: bias("attn_v.bias", kvd)?,
                q_norm: qk_norm("attn_q_norm.weight")?,
                k_norm: qk_norm("attn_k_norm.weight")?,
                ffn_norm: vector(file, &n("ffn_norm.weight"), dim)?,
                w_gate: matrix(file, set, &n("ffn_gate.weight"), ffn, dim)?,
                w_up: matrix(file, set, &n("ffn_up.weight"), ffn, dim)?,
                w_down: matrix(file, set, &n("ffn_down.weight"), dim, ffn)?,
            });
        }
        Ok(Weights { token_embd, output_norm, output, layers })
    }
}
