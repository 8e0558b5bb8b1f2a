//! Room `base` (the first): what every later room uses: the call's errors, its progress events,
//! its memory plan and its settings (`Options`).

pub(crate) mod error;
pub(crate) mod memory_plan;
pub(crate) mod options;
pub(crate) mod progress;
