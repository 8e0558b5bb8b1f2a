//! Building GGUF v3 files: metadata, tensor directory, aligned tensor data.
//!
//! The layout written is the one `llama.cpp`'s `gguf` writer produces and [`parse_header`]
//! accepts:
//!
//! ```text
//! "GGUF" | version u32 = 3 | n_tensors u64 | n_kv u64
//! n_kv ×      { key: string, type: u32, value }
//! n_tensors × { name: string, n_dims: u32, dims: u64 × n_dims, type: u32, offset: u64 }
//! zero padding up to a multiple of the alignment          <- data section starts here
//! n_tensors × { data, zero padding up to a multiple of the alignment }
//! ```
//!
//! Strings are a u64 byte length followed by UTF-8 bytes (no terminator); all integers are
//! little-endian. Tensor offsets are relative to the data section and are multiples of the
//! alignment, which is `general.alignment` when that key is set and [`DEFAULT_ALIGNMENT`] otherwise.
//!
//! Everything the writer accepts is validated when it is added, so a writer that holds its
//! metadata and tensors always produces a file that [`parse_header`] reads back to the same values.
//!
//! ```
//! use turboinfer::gguf::{GgufWriter, MetaValue, parse_header};
//! use turboinfer::quant::GgmlType;
//!
//! let mut w = GgufWriter::new();
//! w.add_metadata("general.architecture", "llama").unwrap();
//! w.add_metadata("llama.block_count", 2u32).unwrap();
//! let row: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
//! w.add_tensor("output_norm.weight", GgmlType::F32, &[3], row).unwrap();
//! let bytes = w.to_bytes().unwrap();
//! let h = parse_header(&bytes).unwrap();
//! assert_eq!(h.metadata["llama.block_count"], MetaValue::U32(2));
//! assert_eq!(h.tensors[0].size, 12);
//! ```
//!
//! [`parse_header`]: super::parse_header

use super::{
    GgufError, MetaArray, MetaValue, DEFAULT_ALIGNMENT, MAX_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_DIMS,
};
use crate::fileio::AtomicFile;
use crate::quant::GgmlType;
use std::borrow::Cow;
use std::collections::HashSet;
use std::io::{BufWriter, Write};
use std::path::Path;

/// The GGUF version this writer produces.
pub const WRITE_VERSION: u32 = 3;
/// Tensor names must be shorter than this many bytes: ggml stores names in a `char[GGML_MAX_NAME]`
/// (64) including the terminating NUL, and llama.cpp refuses longer ones, so we never write them.
pub const MAX_TENSOR_NAME: usize = 63;
/// Largest metadata key length: the GGUF spec limits keys to 65535 bytes (`2^16 - 1`).
pub const MAX_KEY_LEN: usize = 65_535;
/// The metadata key that sets the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// A block of zeros that padding is written from (in chunks, as alignment can reach 1 MiB).
const ZEROS: [u8; 4096] = [0; 4096];

/// One tensor waiting to be written; `data` may borrow from the caller (e.g. from a mapped file).
#[derive(Debug, Clone)]
struct PendingTensor<'a> {
    name: String,
    ty: GgmlType,
    dims: Vec<u64>,
    data: Cow<'a, [u8]>,
}

/// Builds a GGUF v3 file in memory, then writes it to any `Write`, to a `Vec<u8>`, or atomically
/// to a file. Tensor data can be owned (`Vec<u8>`) or borrowed (`&'a [u8]`), so repacking a mapped
/// model does not copy its weights into memory first.
#[derive(Debug, Clone, Default)]
pub struct GgufWriter<'a> {
    /// Key-value pairs in the order they will be written.
    metadata: Vec<(String, MetaValue)>,
    keys: HashSet<String>,
    tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
    alignment: u64,
}

/// Where each part of a file written by a [`GgufWriter`] will land (all offsets absolute).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufLayout {
    /// Bytes of magic, counts, metadata and tensor infos (before the padding).
    pub header_len: u64,
    /// Start of the tensor data section (a multiple of the alignment).
    pub data_offset: u64,
    /// Absolute offset of each tensor's data, in the order the tensors were added.
    pub tensor_offsets: Vec<u64>,
    /// Total file length, including the padding after the last tensor.
    pub file_len: u64,
    pub alignment: u64,
}

/// Rounds `x` up to a multiple of `align` (a power of two).
fn pad_to(x: u64, align: u64) -> u64 {
    x.div_ceil(align) * align
}

/// An "invalid metadata" error for `key`.
fn bad_meta(key: &str, reason: impl Into<String>) -> GgufError {
    GgufError::InvalidMetadata { key: key.to_string(), reason: reason.into() }
}

/// An "invalid tensor" error for `name`.
fn bad_tensor(name: &str, reason: impl Into<String>) -> GgufError {
    GgufError::InvalidTensor { name: name.to_string(), reason: reason.into() }
}

impl<'a> GgufWriter<'a> {
    /// An empty writer: no metadata, no tensors, the default alignment (32).
    pub fn new() -> GgufWriter<'a> {
        GgufWriter { alignment: DEFAULT_ALIGNMENT, ..Default::default() }
    }

    /// Adds a metadata key-value pair (written in insertion order).
    ///
    /// Fails on an empty, over-long or duplicate key, on arrays nested deeper than the reader
    /// accepts, and on a `general.alignment` that is not a `u32` power of two `<= MAX_ALIGNMENT`
    /// (the spec types it as `u32`). Setting `general.alignment` changes the data alignment.
    pub fn add_metadata(
        &mut self,
        key: impl Into<String>,
        value: impl Into<MetaValue>,
    ) -> Result<&mut Self, GgufError> {
        let key = key.into();
        let value = value.into();
        if key.is_empty() {
            return Err(bad_meta(&key, "empty key"));
        }
        if key.len() > MAX_KEY_LEN {
            let shown: String = key.chars().take(64).collect();
            return Err(bad_meta(
                &shown,
                format!("key is {} bytes, more than {MAX_KEY_LEN}", key.len()),
            ));
        }
        if self.keys.contains(&key) {
            return Err(bad_meta(&key, "duplicate key"));
        }
        if let MetaValue::Array(a) = &value {
            if a.depth() > MAX_ARRAY_DEPTH {
                return Err(bad_meta(
                    &key,
                    format!("arrays nested {} deep (at most {MAX_ARRAY_DEPTH})", a.depth()),
                ));
            }
        }
        if key == ALIGNMENT_KEY {
            match value {
                MetaValue::U32(a) if a.is_power_of_two() && a as u64 <= MAX_ALIGNMENT => {
                    self.alignment = a as u64
                }
                _ => {
                    return Err(bad_meta(
                        &key,
                        format!("must be a u32 power of two <= {MAX_ALIGNMENT}, got {value:?}"),
                    ))
                }
            }
        }
        self.keys.insert(key.clone());
        self.metadata.push((key, value));
        Ok(self)
    }

    /// Sets the data alignment by adding `general.alignment` (a `u32` power of two `<= MAX_ALIGNMENT`).
    pub fn set_alignment(&mut self, alignment: u32) -> Result<&mut Self, GgufError> {
        self.add_metadata(ALIGNMENT_KEY, MetaValue::U32(alignment))
    }

    /// Adds a tensor. `dims` are in ggml order (`dims[0]` is the row length) and `data` must be
    /// exactly `ty.row_bytes(dims[0]) * dims[1] * …` bytes.
    ///
    /// Fails on an empty, over-long (>= 64 bytes) or duplicate name, on 0 or more than 4 dims, a
    /// zero dim, a row length that is not a whole number of `ty` blocks, a size that overflows,
    /// or a data length that does not match.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        ty: GgmlType,
        dims: &[u64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<&mut Self, GgufError> {
        let name = name.into();
        let data = data.into();
        if name.is_empty() || name.len() > MAX_TENSOR_NAME {
            return Err(bad_tensor(
                &name,
                format!("name must be 1..={MAX_TENSOR_NAME} bytes, is {}", name.len()),
            ));
        }
        if self.names.contains(&name) {
            return Err(bad_tensor(&name, "duplicate tensor name"));
        }
        if dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(bad_tensor(
                &name,
                format!("{} dimensions (1..={MAX_DIMS} allowed)", dims.len()),
            ));
        }
        if dims.contains(&0) {
            return Err(bad_tensor(&name, format!("zero dimension in {dims:?}")));
        }
        if !dims[0].is_multiple_of(ty.block_size() as u64) {
            return Err(bad_tensor(
                &name,
                format!(
                    "row length {} is not a multiple of the {ty} block size {}",
                    dims[0],
                    ty.block_size()
                ),
            ));
        }
        // `row_bytes` is None here only when the row's byte size overflows u64.
        let size = dims[1..]
            .iter()
            .fold(ty.row_bytes(dims[0]), |acc, &d| acc.and_then(|a| a.checked_mul(d)))
            .ok_or_else(|| bad_tensor(&name, format!("size of {ty} {dims:?} overflows")))?;
        if size != data.len() as u64 {
            return Err(bad_tensor(
                &name,
                format!("{ty} {dims:?} needs {size} bytes of data, got {}", data.len()),
            ));
        }
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor { name, ty, dims: dims.to_vec(), data });
        Ok(self)
    }

    /// The data alignment that will be used (from `general.alignment`, else 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Number of metadata pairs added so far.
    pub fn metadata_len(&self) -> usize {
        self.metadata.len()
    }

    /// Number of tensors added so far.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// The encoded header: magic, version, counts, metadata, tensor infos (no padding).
    fn header_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(1024);
        b.extend_from_slice(b"GGUF");
        b.extend_from_slice(&WRITE_VERSION.to_le_bytes());
        b.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        b.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut b, key);
            b.extend_from_slice(&value.gguf_type_id().to_le_bytes());
            put_value(&mut b, value);
        }
        let mut rel = 0u64;
        for t in &self.tensors {
            put_string(&mut b, &t.name);
            b.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                b.extend_from_slice(&d.to_le_bytes());
            }
            b.extend_from_slice(&t.ty.id().to_le_bytes());
            b.extend_from_slice(&rel.to_le_bytes());
            rel = pad_to(rel + t.data.len() as u64, self.alignment);
        }
        b
    }

    /// Where everything will be placed if the file is written now.
    pub fn layout(&self) -> GgufLayout {
        let header_len = self.header_bytes().len() as u64;
        let data_offset = pad_to(header_len, self.alignment);
        let mut tensor_offsets = Vec::with_capacity(self.tensors.len());
        let mut at = data_offset;
        for t in &self.tensors {
            tensor_offsets.push(at);
            at = pad_to(at + t.data.len() as u64, self.alignment);
        }
        GgufLayout {
            header_len,
            data_offset,
            tensor_offsets,
            file_len: at,
            alignment: self.alignment,
        }
    }

    /// Streams the whole file to `out` (header, padding, tensor data) and returns the bytes written.
    /// Tensor data is written straight from where it lives; nothing big is buffered.
    pub fn write_to(&self, mut out: impl Write) -> Result<u64, GgufError> {
        let header = self.header_bytes();
        let w = |r: std::io::Result<()>| r.map_err(GgufError::Write);
        w(out.write_all(&header))?;
        let mut written = header.len() as u64;
        w(write_zeros(&mut out, pad_to(written, self.alignment) - written))?;
        written = pad_to(written, self.alignment);
        for t in &self.tensors {
            w(out.write_all(&t.data))?;
            written += t.data.len() as u64;
            w(write_zeros(&mut out, pad_to(written, self.alignment) - written))?;
            written = pad_to(written, self.alignment);
        }
        w(out.flush())?;
        Ok(written)
    }

    /// The whole file as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let mut v = Vec::with_capacity(self.layout().file_len as usize);
        self.write_to(&mut v)?;
        Ok(v)
    }

    /// Writes the file to `path` atomically (see [`crate::fileio::atomic`]: temporary file in
    /// the same directory, fsync, rename, directory fsync), so readers never see a half-written
    /// file. Returns the bytes written.
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<u64, GgufError> {
        let path = path.as_ref();
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| GgufError::Io { path: p, source }
        };
        let mut file = AtomicFile::create(path, None, ".tmp").map_err(io(path))?;
        let tmp = file.temp_path().to_path_buf();
        let mut buf = BufWriter::with_capacity(1 << 20, file.file());
        // A failed write names the file it was writing.
        let n = self.write_to(&mut buf).map_err(|e| match e {
            GgufError::Write(source) => io(&tmp)(source),
            other => other,
        })?;
        buf.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
        file.commit().map_err(io(path))?;
        Ok(n)
    }
}

/// Writes `n` zero bytes.
fn write_zeros(out: &mut impl Write, mut n: u64) -> std::io::Result<()> {
    while n > 0 {
        let k = n.min(ZEROS.len() as u64);
        out.write_all(&ZEROS[..k as usize])?;
        n -= k;
    }
    Ok(())
}

/// Appends a GGUF string (u64 length, bytes).
fn put_string(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u64).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// Appends the payload of a value (its type id is written by the caller).
fn put_value(b: &mut Vec<u8>, v: &MetaValue) {
    match v {
        MetaValue::U8(x) => b.push(*x),
        MetaValue::I8(x) => b.push(*x as u8),
        MetaValue::U16(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I16(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::U32(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I32(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F32(x) => b.extend_from_slice(&x.to_bits().to_le_bytes()),
        MetaValue::Bool(x) => b.push(*x as u8),
        MetaValue::String(s) => put_string(b, s),
        MetaValue::Array(a) => put_array(b, a),
        MetaValue::U64(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::I64(x) => b.extend_from_slice(&x.to_le_bytes()),
        MetaValue::F64(x) => b.extend_from_slice(&x.to_bits().to_le_bytes()),
    }
}

/// Appends an array: element type u32, count u64, then the elements (arrays of arrays recurse).
fn put_array(b: &mut Vec<u8>, a: &MetaArray) {
    b.extend_from_slice(&a.element_type_id().to_le_bytes());
    b.extend_from_slice(&(a.len() as u64).to_le_bytes());
    /// Appends each element's little-endian bytes.
    fn each<T: Copy, const N: usize>(b: &mut Vec<u8>, v: &[T], f: impl Fn(T) -> [u8; N]) {
        b.reserve(v.len() * N);
        for &x in v {
            b.extend_from_slice(&f(x));
        }
    }
    match a {
        MetaArray::U8(v) => b.extend_from_slice(v),
        MetaArray::I8(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::U16(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::I16(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::U32(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::I32(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::F32(v) => each(b, v, |x| x.to_bits().to_le_bytes()),
        MetaArray::Bool(v) => each(b, v, |x| [x as u8]),
        MetaArray::String(v) => v.iter().for_each(|s| put_string(b, s)),
        MetaArray::Array(v) => v.iter().for_each(|inner| put_array(b, inner)),
        MetaArray::U64(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::I64(v) => each(b, v, |x| x.to_le_bytes()),
        MetaArray::F64(v) => each(b, v, |x| x.to_bits().to_le_bytes()),
    }
}
