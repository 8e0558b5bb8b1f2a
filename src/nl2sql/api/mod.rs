//! Room `api`: what a caller plugs into a call (`hooks.rs`: validator, executor, progress,
//! linker) and what it gets back (`outcome.rs`: the answer, its attempts and counters).

pub(crate) mod hooks;
pub(crate) mod outcome;
