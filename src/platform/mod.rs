//! What the engine asks of the process it runs in, kept in one place because inside a PostgreSQL
//! backend each of them has a rule of its own.
//!
//! - [`runtime`]: the private thread pool all parallel engine work runs inside (never rayon's
//!   global pool; threads created by whoever owns the process).
//! - [`fallible`]: allocation of the large buffers that returns an error instead of aborting the
//!   process (an abort is a restart of the whole server).
//! - [`clock`]: the millisecond timings the engine reports.

pub mod clock;
pub mod fallible;
pub mod runtime;
