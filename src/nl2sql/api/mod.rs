//! Room `api`: what a caller plugs into a call (`hooks.rs`: validator, executor, progress,
//! linker), what it gets back (`outcome.rs`: the answer, its attempts and counters), and the
//! conversation a client carries between calls (`carried.rs`: the token of `nl2sql_converse`),
//! and the verdict on an accepted answer (`verdict.rs`: sure, or unsure because ...).

pub mod carried;
pub(crate) mod hooks;
pub(crate) mod outcome;
pub mod verdict;
