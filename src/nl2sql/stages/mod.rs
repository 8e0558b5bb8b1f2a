//! The stages of answering a question: `Engine::answer` (`engine.rs`) runs them in this order,
//! each once, each `run(&mut CallState)` over the call's state ([`CallState`], `call.rs`: its
//! inputs, the cache, the decoder, the caller's hooks, the counters, the `Answer` so far):
//! 1. `open`: the question cleaned and the KV buffers ready;
//! 2. `plan`: the prompt (`planner.rs`) and the tables it shows;
//! 3. `prefix`: the schema prefix's KV rows (memory, cache file or prefill);
//! 4. `question`: the question's prefill, with the refusal check (`refusal.rs`) first; a refused
//!    question gets no answer from the stages after it;
//! 5. `drafter`: the drafter of the prefix and the question's focus tokens (speculation on);
//! 6. `repair_loop`: the first answer, then while it is rejected (or doubted) and rounds remain,
//!    the engine's own rewrite (`rewrite`) or a repair round (`repair_turn`) and a fresh answer;
//! 7. `branches`: candidate answers branched off the first one and sampled ones (`samples`,
//!    decoded together), and the choice among them;
//! 8. `follow_up`: the rows after the prefix left for the next call's follow-up.
//!
//! A new stage is one file here and one line in `Engine::answer` (and in docs/nl2sql.md's stage
//! table, which `make lint` compares).

mod answer;
pub mod branches;
mod call;
pub mod drafter;
pub mod follow_up;
pub mod open;
pub mod plan;
pub mod prefix;
pub mod question;
pub mod repair_loop;
mod repair_turn;
mod rewrite;
mod samples;

pub use call::{Call, CallState, EngineParts};
