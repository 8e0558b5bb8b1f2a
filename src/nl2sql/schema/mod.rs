//! Room `schema`: the model of the database the caller may read (`tables.rs`: tables, columns,
//! keys, statistics, examples) and its rendering to the prompt's compact DDL (`render.rs`).

pub(crate) mod render;
pub(crate) mod tables;
pub(crate) mod values;
