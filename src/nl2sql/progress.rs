//! What an nl2sql call is doing, reported to its caller.

/// What the engine is doing, reported before every forward pass (the caller may cancel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// About to run prompt tokens `done..done+chunk` of `total`.
    Prefill { done: usize, total: usize },
    /// `generated` tokens generated so far in this attempt.
    Decode { generated: usize },
}
