//! Byte-level BPE tokenizer built from the GGUF vocabulary.
