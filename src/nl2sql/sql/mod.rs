//! Room `sql`: SQL text without a schema: the lexer, identifier quoting and question cleaning,
//! the statement extracted from an answer's text.

pub mod ident;
pub mod lexer;
pub mod sqltext;
