//! Room `check`: judging a question and its answers: the refusal check (`refusal.rs`), the
//! validator's verdict (`rejection.rs`), the doubts about a valid statement (`doubt.rs`), the
//! question's numbers an answer leaves out (`numbers.rs`) and the statement helpers they read SQL
//! with (`statement.rs`).

pub mod doubt;
pub mod numbers;
pub mod refusal;
pub mod rejection;
pub mod statement;
