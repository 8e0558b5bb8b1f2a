//! Run-time CPU feature detection (filled in by the foundation work).
