//! The stages of answering a question (`Engine::run_with` runs them in order, each once):
//! 0. `question`: the question's prefill after the schema prefix, with the refusal check
//!    (`refusal.rs`) first; a refused question ends here;
//! 1. `repair_loop`: the first answer, then while it is rejected (or doubted) and rounds remain,
//!    the engine's own rewrite (`rewrite`) or a repair round (`repair_turn`) and a fresh answer;
//! 2. `branches`: candidate answers branched off the first one and sampled ones (`samples`,
//!    decoded together), and the choice among them.
//!
//! Every later stage is `run(&mut CallState, &mut Answer)`: it works through the call's shared state
//! ([`CallState`]: the cache, the decoder, the caller's hooks, the counters) and leaves what it
//! settled in the [`Answer`]. A new stage is one file here and one line in the pipeline.

mod answer;
pub mod branches;
mod call;
pub mod question;
pub mod repair_loop;
mod repair_turn;
mod rewrite;
mod samples;

pub use answer::Answer;
pub use call::CallState;
pub use repair_turn::REPAIR_RESERVE_TOKENS;
