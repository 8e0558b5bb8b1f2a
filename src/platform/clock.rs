//! The one wall-clock helper for the millisecond timings the engine reports.

use std::time::Instant;

/// Milliseconds elapsed since `t` (fractional: phases are often shorter than one).
pub fn ms_since(t: Instant) -> f64 {
    // 1000 ms per second.
    t.elapsed().as_secs_f64() * 1000.0
}
