//! Room `plan`: the prompt of a call (`planner.rs`: `Plan`): the ChatML prompt's parts, the
//! tables chosen when not all fit (`trim.rs` by words, `link.rs` by meaning, `link_store.rs`
//! their embeddings on disk), the approved examples and a follow-up's earlier turns.

pub(crate) mod conversation;
pub mod examples;
pub mod link;
pub mod link_store;
pub(crate) mod planner;
pub mod prompt;
pub mod trim;
