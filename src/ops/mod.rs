//! Numeric kernels of the transformer forward pass, on plain `f32` slices and quantized weight rows.
//!
//! Every function is a scalar reference first: the tests in each file check it against a naive
//! formula. Parallel kernels expect to be called inside `Runtime::install`.

pub mod activation;
pub mod attention;
pub mod matmul;
pub mod norm;
pub mod rope;
pub mod softmax;

pub use activation::{silu, swiglu};
pub use attention::attention;
pub use matmul::{matmul, VecDotFn, WeightRows};
pub use norm::rmsnorm;
pub use rope::{RopeMode, RopeTable};
pub use softmax::{log_softmax, softmax_in_place};
