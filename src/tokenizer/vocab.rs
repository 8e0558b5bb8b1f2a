//! Reading the tokenizer's metadata (`tokenizer.ggml.*`) out of a GGUF header.

use super::TokenizerError;
use crate::gguf::{MetaArray, MetaValue};
use std::collections::HashMap;

/// Key of the tokenizer family (`"gpt2"` = byte-level BPE).
pub const KEY_MODEL: &str = "tokenizer.ggml.model";
/// Key of the pre-tokenizer name (`"qwen2"`, `"smollm"`, …).
pub const KEY_PRE: &str = "tokenizer.ggml.pre";
/// Key of the token strings, indexed by id.
pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
/// Key of the token types (see [`TokenType`]), indexed by id.
pub const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// Key of the BPE merges, `"left right"`, highest priority first.
pub const KEY_MERGES: &str = "tokenizer.ggml.merges";

/// The kind of a vocabulary entry (`llama_token_type` in GGUF files).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    Undefined,
    /// An ordinary BPE token, spelled in the byte-level alphabet.
    Normal,
    Unknown,
    /// A control token (`<|im_start|>`, `<|endoftext|>`): matched in text only on request.
    Control,
    /// A user-defined added token (`<tool_call>`): always matched in text, like llama.cpp.
    UserDefined,
    /// A padding slot never produced by the tokenizer (`[PAD151665]`).
    Unused,
    Byte,
}

impl TokenType {
    /// Maps the GGUF integer code (0..=6); other codes are treated as undefined.
    pub fn from_code(code: i64) -> TokenType {
        match code {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }

    /// True for the types llama.cpp splits out of text before BPE (control, user-defined, unknown).
    pub fn is_special(self) -> bool {
        matches!(self, TokenType::Control | TokenType::UserDefined | TokenType::Unknown)
    }
}

/// Special token ids and flags from the metadata (ids validated against the vocabulary size).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialIds {
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    pub fim_pad: Option<u32>,
    pub fim_rep: Option<u32>,
    pub fim_sep: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (false when absent).
    pub add_bos: bool,
    /// `tokenizer.ggml.add_eos_token` (false when absent).
    pub add_eos: bool,
}

/// Everything the tokenizer needs from the metadata, validated (token strings borrowed).
#[derive(Debug, Clone)]
pub struct VocabData<'a> {
    pub pre: String,
    /// `[n_vocab]` token strings.
    pub tokens: &'a [String],
    /// `[n_vocab]` token types.
    pub types: Vec<TokenType>,
    /// BPE merges in priority order.
    pub merges: Vec<(String, String)>,
    pub special: SpecialIds,
}

/// Typed access to the metadata map with tokenizer errors.
struct Meta<'a>(&'a HashMap<String, MetaValue>);

impl<'a> Meta<'a> {
    /// A required value.
    fn require(&self, key: &str) -> Result<&'a MetaValue, TokenizerError> {
        self.0.get(key).ok_or_else(|| TokenizerError::MissingKey(key.to_string()))
    }

    /// A required string.
    fn string(&self, key: &str) -> Result<&'a str, TokenizerError> {
        let v = self.require(key)?;
        v.as_str().ok_or_else(|| wrong(key, "string", v.type_name()))
    }

    /// A required array of strings.
    fn strings(&self, key: &str) -> Result<&'a [String], TokenizerError> {
        match self.require(key)? {
            MetaValue::Array(MetaArray::String(v)) => Ok(v),
            MetaValue::Array(_) => Err(wrong(key, "array of strings", "array of non-strings")),
            v => Err(wrong(key, "array of strings", v.type_name())),
        }
    }

    /// An optional token id, validated `< n_vocab`.
    fn token_id(&self, key: &str, n_vocab: usize) -> Result<Option<u32>, TokenizerError> {
        let Some(v) = self.0.get(key) else { return Ok(None) };
        let id = v.as_u64().ok_or_else(|| wrong(key, "unsigned integer", v.type_name()))?;
        if id >= n_vocab as u64 {
            return Err(TokenizerError::InvalidVocab(format!(
                "{key} = {id} is outside the vocabulary of {n_vocab} tokens"
            )));
        }
        Ok(Some(id as u32))
    }

    /// An optional bool (false when absent).
    fn flag(&self, key: &str) -> Result<bool, TokenizerError> {
        match self.0.get(key) {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| wrong(key, "bool", v.type_name())),
        }
    }
}

/// A `WrongType` error.
fn wrong(key: &str, expected: &'static str, found: &'static str) -> TokenizerError {
    TokenizerError::WrongType { key: key.to_string(), expected, found }
}

/// The integer elements of an array of any integer type, widened to i64.
fn integers(key: &str, a: &MetaArray) -> Result<Vec<i64>, TokenizerError> {
    Ok(match a {
        MetaArray::I32(v) => v.iter().map(|&x| x as i64).collect(),
        MetaArray::U32(v) => v.iter().map(|&x| x as i64).collect(),
        MetaArray::I8(v) => v.iter().map(|&x| x as i64).collect(),
        MetaArray::U8(v) => v.iter().map(|&x| x as i64).collect(),
        MetaArray::I16(v) => v.iter().map(|&x| x as i64).collect(),
        MetaArray::U16(v) => v.iter().map(|&x| x as i64).collect(),
        MetaArray::I64(v) => v.clone(),
        // Token type codes are 0..=6: a u64 above i64::MAX is just an unknown code.
        MetaArray::U64(v) => v.iter().map(|&x| x.min(i64::MAX as u64) as i64).collect(),
        _ => return Err(wrong(key, "array of integers", "array of non-integers")),
    })
}

/// Splits a merge rule `"left right"` at its first space after the first character (a byte-level
/// token never contains a literal space, but the first symbol could in principle be one).
fn split_merge(rule: &str) -> Option<(&str, &str)> {
    let first_len = rule.chars().next()?.len_utf8();
    let at = rule[first_len..].find(' ')? + first_len;
    let (l, r) = (&rule[..at], &rule[at + 1..]);
    (!r.is_empty()).then_some((l, r))
}

/// Reads and validates the tokenizer metadata.
pub fn read(meta: &HashMap<String, MetaValue>) -> Result<VocabData<'_>, TokenizerError> {
    let m = Meta(meta);
    let model = m.string(KEY_MODEL)?;
    if model != "gpt2" {
        return Err(TokenizerError::UnsupportedModel(model.to_string()));
    }
    let pre = m.string(KEY_PRE)?.to_string();
    super::pretok::regexes_for(&pre)?;

    let tokens = m.strings(KEY_TOKENS)?;
    let n = tokens.len();
    if n == 0 {
        return Err(TokenizerError::InvalidVocab(format!("{KEY_TOKENS} is empty")));
    }
    if n > u32::MAX as usize {
        return Err(TokenizerError::InvalidVocab(format!("{n} tokens do not fit 32-bit ids")));
    }
    let types = match meta.get(KEY_TOKEN_TYPE) {
        // llama.cpp treats a missing type array as all-normal.
        None => vec![TokenType::Normal; n],
        Some(MetaValue::Array(a)) => {
            let codes = integers(KEY_TOKEN_TYPE, a)?;
            if codes.len() != n {
                return Err(TokenizerError::InvalidVocab(format!(
                    "{KEY_TOKEN_TYPE} has {} entries but {KEY_TOKENS} has {n}",
                    codes.len()
                )));
            }
            codes.into_iter().map(TokenType::from_code).collect()
        }
        Some(v) => return Err(wrong(KEY_TOKEN_TYPE, "array of integers", v.type_name())),
    };

    let rules = m.strings(KEY_MERGES)?;
    let mut merges = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        let (l, r) = split_merge(rule).ok_or_else(|| {
            TokenizerError::InvalidVocab(format!("merge #{i} {rule:?} is not \"left right\""))
        })?;
        merges.push((l.to_string(), r.to_string()));
    }

    let id = |key: &str| m.token_id(key, n);
    let special = SpecialIds {
        bos: id("tokenizer.ggml.bos_token_id")?,
        eos: id("tokenizer.ggml.eos_token_id")?,
        eot: id("tokenizer.ggml.eot_token_id")?,
        eom: id("tokenizer.ggml.eom_token_id")?,
        unk: id("tokenizer.ggml.unknown_token_id")?,
        pad: id("tokenizer.ggml.padding_token_id")?,
        fim_pad: id("tokenizer.ggml.fim_pad_token_id")?,
        fim_rep: id("tokenizer.ggml.fim_rep_token_id")?,
        fim_sep: id("tokenizer.ggml.fim_sep_token_id")?,
        add_bos: m.flag("tokenizer.ggml.add_bos_token")?,
        add_eos: m.flag("tokenizer.ggml.add_eos_token")?,
    };
    Ok(VocabData { pre, tokens, types, merges, special })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_rules_split_at_the_first_inner_space() {
        assert_eq!(split_merge("Ġ t"), Some(("Ġ", "t")));
        assert_eq!(split_merge("ĠĠ ĠĠ"), Some(("ĠĠ", "ĠĠ")));
        assert_eq!(split_merge("  x"), Some((" ", "x")));
        assert_eq!(split_merge("ab"), None);
        assert_eq!(split_merge("a "), None);
        assert_eq!(split_merge(""), None);
    }
}
