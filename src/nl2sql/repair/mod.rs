//! Room `repair`: what follows a rejection: the catalog facts a repair round shows the model
//! (`feedback.rs`) and the engine's own rewrites of the statement (`fixes.rs`).

pub mod feedback;
pub mod fixes;
