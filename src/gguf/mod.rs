//! GGUF reader over a shared, read-only memory mapping.
//!
//! Everything in the header is validated before use (magic, version, counts, string and array
//! lengths, tensor dims and types, every tensor's byte range inside the file), so a truncated or
//! corrupt file is a typed error, never a panic or a SIGBUS. Tensor data is never copied: views
//! borrow from the mapping, which the page cache shares between processes.

mod reader;
pub mod requantize;
mod value;
mod writer;

#[cfg(test)]
mod requantize_tests;
#[cfg(test)]
mod tests;

pub use reader::parse_header;
pub use value::{type_id, MetaArray, MetaValue};
pub use writer::{
    GgufLayout, GgufWriter, ALIGNMENT_KEY, MAX_KEY_LEN, MAX_TENSOR_NAME, WRITE_VERSION,
};

use crate::fileio::{MapError, MappedFile, Watch};
use crate::quant::GgmlType;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Largest number of dimensions a ggml tensor can have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Alignment of the tensor data section when `general.alignment` is absent (`GGUF_DEFAULT_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Largest accepted `general.alignment`: anything bigger is a corrupt header, not a real layout
/// (real files use 32; 1 MiB leaves room for page- or hugepage-aligned packed files).
pub const MAX_ALIGNMENT: u64 = 1 << 20;
/// Deepest nesting of arrays we follow (GGUF allows nesting; real files use none). Bounds the
/// reader's recursion so a crafted file cannot overflow the stack.
pub const MAX_ARRAY_DEPTH: usize = 4;

/// Everything that can be wrong with a GGUF file.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot open model file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("not a GGUF file (magic bytes {0:02x?}, expected \"GGUF\")")]
    BadMagic([u8; 4]),
    #[error("unsupported GGUF version {0} (supported: 2 and 3)")]
    UnsupportedVersion(u32),
    #[error("GGUF file is truncated: needed {needed} bytes at offset {offset} while reading {what}, file has {file_len}")]
    Truncated { what: &'static str, offset: u64, needed: u64, file_len: u64 },
    #[error("GGUF header is corrupt: {0}")]
    Corrupt(String),
    #[error("GGUF metadata key {key:?} has an unknown value type {ty}")]
    UnknownValueType { key: String, ty: u32 },
    #[error("tensor {name:?} has unknown or unsupported type id {id}")]
    UnknownTensorType { name: String, id: u32 },
    #[error("tensor {name:?} (offset {offset}, {size} bytes) lies outside the file's data section ({data_len} bytes)")]
    TensorOutOfBounds { name: String, offset: u64, size: u64, data_len: u64 },
    #[error("metadata key {0:?} is missing")]
    MissingKey(String),
    #[error("metadata key {key:?} has type {found}, expected {expected}")]
    WrongType { key: String, expected: &'static str, found: &'static str },
    #[error("tensor {0:?} is missing")]
    MissingTensor(String),
    /// A metadata pair given to [`GgufWriter`] that cannot be written as a valid file.
    #[error("cannot write metadata key {key:?}: {reason}")]
    InvalidMetadata { key: String, reason: String },
    /// A tensor given to [`GgufWriter`] that cannot be written as a valid file.
    #[error("cannot write tensor {name:?}: {reason}")]
    InvalidTensor { name: String, reason: String },
    /// Writing a GGUF stream failed (file writes report `Io` with the path instead).
    #[error("writing GGUF data failed: {0}")]
    Write(#[source] std::io::Error),
}

/// Where one tensor lives and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub ty: GgmlType,
    /// ggml order: `dims[0]` is the row length (innermost, contiguous), `dims[1]` the number of rows, …
    pub dims: Vec<u64>,
    /// Absolute byte offset of the tensor's first byte in the file.
    pub offset: u64,
    /// Byte size of the tensor's data (validated: `offset + size <= file length`).
    pub size: u64,
}

impl TensorInfo {
    /// Number of elements.
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().product()
    }

    /// Row length (`dims[0]`).
    pub fn row_len(&self) -> usize {
        self.dims[0] as usize
    }

    /// Number of rows (product of all dims but the first).
    pub fn n_rows(&self) -> usize {
        self.dims[1..].iter().product::<u64>() as usize
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        // Validated at parse time: dims[0] is a whole number of blocks.
        self.ty.row_bytes(self.dims[0]).expect("validated row size") as usize
    }
}

/// The parsed header of a GGUF file: version, metadata and tensor directory.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: HashMap<String, MetaValue>,
    /// Metadata keys in file order (for listing and deterministic output).
    pub metadata_order: Vec<String>,
    pub tensors: Vec<TensorInfo>,
    /// Absolute offset of the tensor data section.
    pub data_offset: u64,
    pub alignment: u64,
}

/// An open GGUF model file: the mapping plus its parsed header.
pub struct GgufFile {
    /// The watched mapping (what [`GgufFile`] dereferences to: path, bytes, length, `changed`).
    map: MappedFile,
    header: GgufHeader,
    by_name: HashMap<String, usize>,
}

/// A GGUF file is a validated mapping plus its parsed header: the mapping's accessors
/// ([`MappedFile::path`], [`MappedFile::bytes`], [`MappedFile::len`], [`MappedFile::changed`])
/// are the file's.
impl std::ops::Deref for GgufFile {
    type Target = MappedFile;

    fn deref(&self) -> &MappedFile {
        &self.map
    }
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path())
            .field("len", &self.len())
            .field("tensors", &self.header.tensors.len())
            .finish()
    }
}

/// A tensor whose data borrows from the mapping.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    pub info: &'a TensorInfo,
    pub data: &'a [u8],
}

impl GgufFile {
    /// Maps `path` read-only and shared, and validates its header and tensor directory.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref().to_path_buf();
        // Non-blocking, regular files only; a symlink is followed (the caller resolved the path).
        // Watched: a fault while parsing (the file truncated meanwhile) reads zeros, a parse error.
        let links = crate::fileio::regular_file::Links::Follow;
        let map = match MappedFile::open(&path, links, 4, &reader::MAGIC, Watch::Yes) {
            Ok(m) => m,
            Err(MapError::Short { len, .. }) => {
                return Err(GgufError::Truncated {
                    what: "magic",
                    offset: 0,
                    needed: 4,
                    file_len: len,
                })
            }
            Err(MapError::Io(source)) => return Err(GgufError::Io { path, source }),
            Err(MapError::Magic { found }) => {
                return Err(GgufError::BadMagic(found.try_into().expect("4 magic bytes")))
            }
        };
        Self::from_map(map)
    }

    /// Parses the header of an existing mapping and indexes tensors by name.
    fn from_map(map: MappedFile) -> Result<GgufFile, GgufError> {
        let header = parse_header(map.bytes())?;
        let mut by_name = HashMap::with_capacity(header.tensors.len());
        for (i, t) in header.tensors.iter().enumerate() {
            if by_name.insert(t.name.clone(), i).is_some() {
                return Err(GgufError::Corrupt(format!("duplicate tensor name {:?}", t.name)));
            }
        }
        Ok(GgufFile { map, header, by_name })
    }

    /// The parsed header.
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    /// A metadata value by key.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.header.metadata.get(key)
    }

    /// A required string value.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.get(key).ok_or_else(|| GgufError::MissingKey(key.to_string()))?;
        v.as_str().ok_or_else(|| GgufError::WrongType {
            key: key.into(),
            expected: "string",
            found: v.type_name(),
        })
    }

    /// A required non-negative integer value (any integer width).
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        let v = self.get(key).ok_or_else(|| GgufError::MissingKey(key.to_string()))?;
        v.as_u64().ok_or_else(|| GgufError::WrongType {
            key: key.into(),
            expected: "unsigned integer",
            found: v.type_name(),
        })
    }

    /// A required numeric value as f64.
    pub fn get_f64(&self, key: &str) -> Result<f64, GgufError> {
        let v = self.get(key).ok_or_else(|| GgufError::MissingKey(key.to_string()))?;
        v.as_f64().ok_or_else(|| GgufError::WrongType {
            key: key.into(),
            expected: "number",
            found: v.type_name(),
        })
    }

    /// A required array value.
    pub fn get_array(&self, key: &str) -> Result<&MetaArray, GgufError> {
        let v = self.get(key).ok_or_else(|| GgufError::MissingKey(key.to_string()))?;
        v.as_array().ok_or_else(|| GgufError::WrongType {
            key: key.into(),
            expected: "array",
            found: v.type_name(),
        })
    }

    /// All tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// A tensor view by name.
    pub fn tensor(&self, name: &str) -> Option<TensorView<'_>> {
        let info = &self.header.tensors[*self.by_name.get(name)?];
        Some(TensorView { info, data: self.data_of(info) })
    }

    /// A tensor view by name, or a `MissingTensor` error.
    pub fn require_tensor(&self, name: &str) -> Result<TensorView<'_>, GgufError> {
        self.tensor(name).ok_or_else(|| GgufError::MissingTensor(name.to_string()))
    }

    /// The bytes of a tensor of this file (its range was validated at open).
    pub fn data_of(&self, info: &TensorInfo) -> &[u8] {
        &self.bytes()[info.offset as usize..(info.offset + info.size) as usize]
    }
}
