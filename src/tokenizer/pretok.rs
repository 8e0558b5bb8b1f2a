//! Pre-tokenizers named by `tokenizer.ggml.pre`: the regular expressions llama.cpp applies before
//! BPE (each expression splits every piece left by the previous one; matches and the gaps between
//! them both become pieces), followed by the byte-level mapping of each piece.

use super::TokenizerError;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::SplitDelimiterBehavior;

/// The GPT-2 word regex (contractions, letters, digits, other symbols, whitespace); the final
/// `\s+` is implicit in llama.cpp (unmatched runs become pieces) and explicit here.
const GPT2: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Every digit on its own (applied before [`GPT2`] by the SmolLM/StarCoder family).
const SINGLE_DIGITS: &str = r"\p{N}";

/// Qwen2's regex: case-insensitive contractions, letters with one leading non-letter, single
/// digits, punctuation runs swallowing trailing newlines, newline runs, other whitespace.
const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Pre-tokenizer names accepted, grouped as llama.cpp groups them (same regexes within a group).
pub const SUPPORTED: &[&str] = &[
    "qwen2",
    "stablelm2", // QWEN2
    "smollm",
    "starcoder",
    "refact",
    "command-r",
    "codeshell",
    "exaone",
    "minerva", // digits + GPT2
    "gpt2",
    "mpt",
    "olmo",
    "jais", // GPT2
];

/// The regex sequence for a `tokenizer.ggml.pre` value.
pub fn regexes_for(pre: &str) -> Result<&'static [&'static str], TokenizerError> {
    Ok(match pre {
        "qwen2" | "stablelm2" => &[QWEN2],
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva" => {
            &[SINGLE_DIGITS, GPT2]
        }
        "gpt2" | "mpt" | "olmo" | "jais" => &[GPT2],
        other => return Err(TokenizerError::UnsupportedPreTokenizer(other.to_string())),
    })
}

/// Builds the pre-tokenizer: the regex splits (isolated pieces), then byte-level mapping with no
/// prefix space and no regex of its own.
pub fn build(pre: &str) -> Result<Sequence, TokenizerError> {
    let mut steps: Vec<PreTokenizerWrapper> = Vec::new();
    for re in regexes_for(pre)? {
        let split = Split::new(
            SplitPattern::Regex(re.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| TokenizerError::Build(format!("pre-tokenizer regex {re:?}: {e}")))?;
        steps.push(split.into());
    }
    steps.push(ByteLevel::new(false, false, false).into());
    Ok(Sequence::new(steps))
}
