//! The active vocabulary: the tokens a SQL answer over one schema and question can plausibly
//! use, so the LM head computes logits for those rows only (`Model::forward_rows`).
//!
//! Two parts. The schema-independent [`VocabBase`] (built once per tokenizer): every token made
//! only of "safe" characters (ASCII digits, punctuation, whitespace), every short letter piece
//! (so any new name can still be spelled), SQL keywords and functions in their usual spellings,
//! code fences and the end-of-generation tokens. The per-call [`ActiveVocab`] adds the tokens of
//! the prompt itself (schema DDL, comments, question) and of every identifier and question word
//! in the spellings the pre-tokenizer produces next to spaces, dots, parentheses and quotes.

use super::schema::SchemaInfo;
use crate::tokenizer::{Tokenizer, TokenizerError};

/// Longest letter run (after an optional one-character lead such as a space or dot) of the
/// short pieces kept for spelling: two letters make every word spellable in a handful of tokens
/// while adding only ~4.5k of Qwen's 152k tokens (three letters would add ~15k).
const SHORT_LETTERS: usize = 2;

/// SQL keywords, clauses and the PostgreSQL functions an analytic query uses, lowercase.
pub(super) const SQL_WORDS: &[&str] = &[
    "select",
    "from",
    "where",
    "and",
    "or",
    "not",
    "in",
    "is",
    "null",
    "as",
    "on",
    "join",
    "inner",
    "left",
    "right",
    "full",
    "outer",
    "cross",
    "natural",
    "using",
    "group",
    "by",
    "order",
    "having",
    "limit",
    "offset",
    "asc",
    "desc",
    "nulls",
    "first",
    "last",
    "distinct",
    "all",
    "any",
    "some",
    "exists",
    "between",
    "like",
    "ilike",
    "similar",
    "to",
    "case",
    "when",
    "then",
    "else",
    "end",
    "union",
    "intersect",
    "except",
    "with",
    "recursive",
    "lateral",
    "true",
    "false",
    "unknown",
    "cast",
    "interval",
    "date",
    "time",
    "timestamp",
    "timestamptz",
    "zone",
    "at",
    "over",
    "partition",
    "window",
    "rows",
    "range",
    "preceding",
    "following",
    "unbounded",
    "current",
    "row",
    "filter",
    "within",
    "fetch",
    "next",
    "only",
    "values",
    "default",
    "escape",
    "collate",
    "array",
    "integer",
    "int",
    "bigint",
    "smallint",
    "numeric",
    "decimal",
    "real",
    "double",
    "precision",
    "float",
    "text",
    "varchar",
    "char",
    "character",
    "varying",
    "boolean",
    "bool",
    "json",
    "jsonb",
    "uuid",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "round",
    "floor",
    "ceil",
    "ceiling",
    "abs",
    "coalesce",
    "nullif",
    "greatest",
    "least",
    "extract",
    "date_trunc",
    "date_part",
    "now",
    "current_date",
    "current_timestamp",
    "current_time",
    "localtimestamp",
    "age",
    "to_char",
    "to_date",
    "to_timestamp",
    "lower",
    "upper",
    "length",
    "char_length",
    "substring",
    "substr",
    "trim",
    "ltrim",
    "rtrim",
    "concat",
    "replace",
    "position",
    "split_part",
    "left",
    "right",
    "string_agg",
    "array_agg",
    "bool_and",
    "bool_or",
    "every",
    "stddev",
    "variance",
    "percentile_cont",
    "percentile_disc",
    "mode",
    "row_number",
    "rank",
    "dense_rank",
    "ntile",
    "lag",
    "lead",
    "first_value",
    "last_value",
    "generate_series",
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "second",
    "week",
    "quarter",
    "dow",
    "doy",
    "epoch",
    "days",
    "months",
    "years",
    "hours",
    "minutes",
    "weeks",
    "isodow",
    "isoyear",
    "decade",
    "century",
    "microseconds",
    "milliseconds",
    "timezone",
    "for",
    "no",
    "do",
    "if",
    "sql",
    "postgresql",
    "rollup",
    "cube",
    "grouping",
    "sets",
    "ordinality",
    "materialized",
    "escape",
    "isnull",
    "notnull",
    "unnest",
    "string_to_array",
    "array_length",
    "cardinality",
    "make_date",
    "make_interval",
    "date_bin",
    "justify_days",
    "initcap",
    "regexp_replace",
    "regexp_match",
    "starts_with",
    "format",
    "power",
    "sqrt",
    "exp",
    "ln",
    "log",
    "mod",
    "sign",
    "trunc",
    "random",
    "width_bucket",
    "corr",
    "median",
];

/// Leads the pre-tokenizer glues to the first letter of a word (`[^\r\n\p{L}\p{N}]?\p{L}+`):
/// each identifier is tokenized after each of them.
const LEADS: &[&str] =
    &["", " ", ".", "(", "\"", " \"", ",", "'", " '", "%", "_", "\n", "\t", "    "];

/// The schema-independent part of an active vocabulary (sorted, distinct ids).
#[derive(Debug, Clone)]
pub struct VocabBase {
    ids: Vec<u32>,
    vocab: usize,
}

impl VocabBase {
    /// Scans the vocabulary once: safe-character tokens, short letter pieces, SQL words, fences,
    /// end tokens.
    pub fn new(tok: &Tokenizer) -> Result<VocabBase, TokenizerError> {
        let vocab = tok.vocab_size();
        let mut ids: Vec<u32> = (0..vocab as u32)
            .filter(|&id| !tok.is_special(id) && base_piece(tok.piece(id)))
            .collect();
        ids.extend_from_slice(tok.eog_ids());
        for name in ["<|im_end|>", "<|endoftext|>"] {
            ids.extend(tok.token_id(name));
        }
        for w in SQL_WORDS {
            for form in spellings(w) {
                add_words(tok, &form, &mut ids)?;
            }
        }
        for fence in ["```", "```sql", "```sql\n", "\n```", "```\n", "sql\n"] {
            ids.extend(tok.encode(fence, false)?);
        }
        ids.sort_unstable();
        ids.dedup();
        Ok(VocabBase { ids, vocab })
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when empty (never, for a real vocabulary).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The tokens one nl2sql call computes logits for: sorted, distinct ids plus a membership bitmap.
#[derive(Debug, Clone)]
pub struct ActiveVocab {
    ids: Vec<u32>,
    /// Bit `id` set when `id` is in the set; `[ceil(vocab / 64)]`.
    bits: Vec<u64>,
}

impl ActiveVocab {
    /// `base` plus the prompt's own tokens (`prompt_ids`: schema prefix and question), every
    /// table, schema and column name of `schema` and every word of `question` in the spellings
    /// that occur in SQL (after a space, a dot, a parenthesis, a quote; lower, upper and
    /// capitalized for question words, which may be literals).
    pub fn build(
        base: &VocabBase,
        tok: &Tokenizer,
        schema: &SchemaInfo,
        prompt_ids: &[u32],
        question: &str,
    ) -> Result<ActiveVocab, TokenizerError> {
        let mut ids = base.ids.clone();
        ids.extend(prompt_ids.iter().copied().filter(|&id| !tok.is_special(id)));
        let mut names: Vec<&str> = Vec::new();
        for t in &schema.tables {
            names.push(&t.schema);
            names.push(&t.name);
            names.extend(t.columns.iter().map(|c| c.name.as_str()));
        }
        names.sort_unstable();
        names.dedup();
        for n in names {
            for lead in LEADS {
                ids.extend(tok.encode(&format!("{lead}{n}"), false)?);
                ids.extend(tok.encode(&format!("{lead}{n}\""), false)?);
            }
        }
        for w in question
            .split(|c: char| c.is_whitespace() || c == '?' || c == ',')
            .filter(|w| !w.is_empty())
        {
            let w = w.trim_matches(|c: char| c == '"' || c == '\'' || c == '.' || c == '!');
            for form in spellings(w) {
                add_words(tok, &form, &mut ids)?;
                ids.extend(tok.encode(&format!("'{form}'"), false)?);
                ids.extend(tok.encode(&format!("'%{form}%'"), false)?);
            }
        }
        Ok(ActiveVocab::from_ids(ids, base.vocab))
    }

    /// A set of exactly `ids` (any order, duplicates allowed; ids `>= vocab` are dropped).
    pub fn from_ids(mut ids: Vec<u32>, vocab: usize) -> ActiveVocab {
        ids.retain(|&id| (id as usize) < vocab);
        ids.sort_unstable();
        ids.dedup();
        let mut bits = vec![0u64; vocab.div_ceil(64)];
        for &id in &ids {
            bits[id as usize / 64] |= 1 << (id % 64);
        }
        ActiveVocab { ids, bits }
    }

    /// The token ids, ascending (the rows to compute).
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.bits.get(id as usize / 64).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }
}

/// True for a piece kept in every active vocabulary: non-empty ASCII made only of digits,
/// punctuation and whitespace (numbers, operators, parentheses, newlines, indentation), or an
/// optional one-character lead (space, dot, underscore, parenthesis, quote) and at most
/// [`SHORT_LETTERS`] ASCII letters.
fn base_piece(b: &[u8]) -> bool {
    if b.is_empty() || !b.iter().all(|&c| c.is_ascii_graphic() || c.is_ascii_whitespace()) {
        return false;
    }
    if !b.iter().any(u8::is_ascii_alphabetic) {
        return true;
    }
    let body = match b[0] {
        b' ' | b'.' | b'_' | b'(' | b'"' | b'\'' => &b[1..],
        _ => b,
    };
    !body.is_empty() && body.len() <= SHORT_LETTERS && body.iter().all(u8::is_ascii_alphabetic)
}

/// `w` lowercase, UPPERCASE and Capitalized (distinct forms only).
fn spellings(w: &str) -> Vec<String> {
    let lower = w.to_lowercase();
    let upper = w.to_uppercase();
    let mut cap: String = lower.chars().take(1).flat_map(char::to_uppercase).collect();
    cap.extend(lower.chars().skip(1));
    let mut out = vec![w.to_string(), lower, upper, cap];
    out.sort();
    out.dedup();
    out.retain(|s| !s.is_empty());
    out
}

/// Adds the tokens of `w` alone, after a space, a dot, a parenthesis, a newline and an
/// underscore (`order_count`, `total_revenue`: aliases are built from such words).
fn add_words(tok: &Tokenizer, w: &str, ids: &mut Vec<u32>) -> Result<(), TokenizerError> {
    for lead in ["", " ", ".", "(", "\n", "_"] {
        ids.extend(tok.encode(&format!("{lead}{w}"), false)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_pieces() {
        for s in ["(", " ", "\n\n", "123", ");", " >=", " o", ".id", "_n", "AS", "ab"] {
            assert!(base_piece(s.as_bytes()), "{s:?}");
        }
        for s in ["", "abc", " orders", "é", "a1", "\u{1}"] {
            assert!(!base_piece(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn spellings_are_distinct() {
        assert_eq!(spellings("France"), vec!["FRANCE", "France", "france"]);
        assert_eq!(spellings("x"), vec!["X", "x"]);
    }

    #[test]
    fn membership() {
        let v = ActiveVocab::from_ids(vec![70, 3, 3, 64, 200], 100);
        assert_eq!(v.ids(), &[3, 64, 70]);
        assert!(v.contains(3) && v.contains(64) && !v.contains(4) && !v.contains(200));
    }
}
