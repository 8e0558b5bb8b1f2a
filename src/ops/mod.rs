//! Numeric kernels of the transformer forward pass, on plain `f32` slices and quantized weight rows.
//!
//! Every function is a scalar reference first: the tests in each file check it against a naive
//! formula. Parallel kernels expect to be called inside `Runtime::install`.

pub mod act_quant;
pub mod attention;
pub mod f16;
pub mod matmul;
pub mod norm;
pub mod rope;
pub mod softmax;

pub use crate::kernels::{silu, softmax_in_place, swiglu};
pub use act_quant::SharedActs;
pub use attention::{attention, AttnPrecision, AttnShape, KvView};
pub use matmul::{matmul, matmul_rows, PackedKernel, PackedRows, VecDotFn, WeightRows};
pub use norm::{rmsnorm, rmsnorm_chunks_in_place};
pub use rope::{RopeMode, RopeTable};
pub use softmax::log_softmax;
