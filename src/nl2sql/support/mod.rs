//! Room `support` (after the engine, not the pipeline): what the PostgreSQL glue and the CLI use
//! around the engine: the built-in benchmark (`bench.rs`), the sparse FFN's calibration prompts
//! (`calibration.rs`), model paths (`model_path.rs`) and prewarming (`prewarm.rs`).

pub mod bench;
#[cfg(feature = "sparse")]
pub mod calibration;
pub mod model_path;
pub(crate) mod prewarm;
