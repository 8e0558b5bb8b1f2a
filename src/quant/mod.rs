//! Quantization formats: block layouts, scalar reference dequantization and dot products.

mod types;

pub use types::{GgmlType, QK, QK_K};
