//! Identifier quoting and untrusted-text sanitising for prompt rendering.
//!
//! Everything that comes from the catalog (names, types, comments) is text other roles may have
//! chosen. It is rendered so that it cannot change the structure of the prompt: identifiers are
//! quoted with PostgreSQL's own rule (and written as `U&"..."` escapes when they hold control
//! characters, so a name can never contain a raw line break), and comments are flattened to one
//! capped line that is only ever placed after `-- `.

/// PostgreSQL 15 keywords that are not UNRESERVED (reserved, column-name and type/function-name
/// categories, from `src/include/parser/kwlist.h`): as identifiers they must be double-quoted.
/// Sorted, for binary search.
const NON_UNRESERVED_KEYWORDS: &[&str] = &[
    "all",
    "analyse",
    "analyze",
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "authorization",
    "between",
    "bigint",
    "binary",
    "bit",
    "boolean",
    "both",
    "case",
    "cast",
    "char",
    "character",
    "check",
    "coalesce",
    "collate",
    "collation",
    "column",
    "concurrently",
    "constraint",
    "create",
    "cross",
    "current_catalog",
    "current_date",
    "current_role",
    "current_schema",
    "current_time",
    "current_timestamp",
    "current_user",
    "dec",
    "decimal",
    "default",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "exists",
    "extract",
    "false",
    "fetch",
    "float",
    "for",
    "foreign",
    "freeze",
    "from",
    "full",
    "grant",
    "greatest",
    "group",
    "grouping",
    "having",
    "ilike",
    "in",
    "initially",
    "inner",
    "inout",
    "int",
    "integer",
    "intersect",
    "interval",
    "into",
    "is",
    "isnull",
    "join",
    "lateral",
    "leading",
    "least",
    "left",
    "like",
    "limit",
    "localtime",
    "localtimestamp",
    "national",
    "natural",
    "nchar",
    "none",
    "normalize",
    "not",
    "notnull",
    "null",
    "nullif",
    "numeric",
    "offset",
    "on",
    "only",
    "or",
    "order",
    "out",
    "outer",
    "overlaps",
    "overlay",
    "placing",
    "position",
    "precision",
    "primary",
    "real",
    "references",
    "returning",
    "right",
    "row",
    "select",
    "session_user",
    "setof",
    "similar",
    "smallint",
    "some",
    "substring",
    "symmetric",
    "table",
    "tablesample",
    "then",
    "time",
    "timestamp",
    "to",
    "trailing",
    "treat",
    "trim",
    "true",
    "union",
    "unique",
    "user",
    "using",
    "values",
    "varchar",
    "variadic",
    "verbose",
    "when",
    "where",
    "window",
    "with",
    "xmlattributes",
    "xmlconcat",
    "xmlelement",
    "xmlexists",
    "xmlforest",
    "xmlnamespaces",
    "xmlparse",
    "xmlpi",
    "xmlroot",
    "xmlserialize",
    "xmltable",
];

/// Longest comment text kept, in characters: enough for a sentence of documentation, short
/// enough that one table's comments cannot crowd the schema out of the context.
pub const MAX_COMMENT_CHARS: usize = 200;

/// True when `ident` is a keyword that needs quotes when used as an identifier.
pub fn is_non_unreserved_keyword(ident: &str) -> bool {
    NON_UNRESERVED_KEYWORDS.binary_search(&ident).is_ok()
}

/// `value` as a SQL string literal, the way PostgreSQL's `quote_literal()` writes it: in single
/// quotes with `'` doubled, and as an escape string `E'...'` with `\` doubled when it holds a
/// backslash (read back the same whatever `standard_conforming_strings` is).
pub fn quote_literal(value: &str) -> String {
    let quoted = value.replace('\'', "''");
    if value.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// Quotes `ident` the way PostgreSQL's `quote_ident()` does: unquoted when it is all lowercase
/// ASCII letters, digits and underscores, starts with a letter or underscore and is not a
/// non-unreserved keyword; otherwise in double quotes with `"` doubled. Names holding control
/// characters (line breaks, NUL-free but e.g. `\n`, `\t`, U+2028) are written as a Unicode
/// escape identifier `U&"..."`, which PostgreSQL reads back as the same name.
pub fn quote_ident(ident: &str) -> String {
    let safe = !ident.is_empty()
        && ident.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || b == b'_')
        && ident.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !is_non_unreserved_keyword(ident);
    if safe {
        return ident.to_string();
    }
    if ident.chars().any(is_unsafe_char) {
        return unicode_escape_ident(ident);
    }
    let mut out = String::with_capacity(ident.len() + 2);
    out.push('"');
    for c in ident.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Characters that must never appear raw in the prompt: control characters (C0, DEL, C1) and
/// the Unicode line/paragraph separators, which tokenizers and readers treat as line breaks.
fn is_unsafe_char(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// `U&"..."` form of `ident`: unsafe characters as `\XXXX` / `\+XXXXXX`, `\` doubled, `"` doubled.
fn unicode_escape_ident(ident: &str) -> String {
    let mut out = String::with_capacity(ident.len() + 8);
    out.push_str("U&\"");
    for c in ident.chars() {
        match c {
            '"' => out.push_str("\"\""),
            '\\' => out.push_str("\\\\"),
            c if is_unsafe_char(c) => {
                let cp = c as u32;
                if cp <= 0xFFFF {
                    out.push_str(&format!("\\{cp:04X}"));
                } else {
                    out.push_str(&format!("\\+{cp:06X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Flattens untrusted free text (a comment) to one line: unsafe characters become spaces, runs
/// of whitespace collapse to one space, the ends are trimmed, and text longer than
/// [`MAX_COMMENT_CHARS`] is cut at a character boundary with `...` appended. Returns `None`
/// when nothing printable is left.
pub fn sanitize_comment(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len().min(MAX_COMMENT_CHARS * 4));
    let mut n_chars = 0usize;
    let mut pending_space = false;
    let mut truncated = false;
    for c in text.chars() {
        if is_unsafe_char(c) || c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if n_chars + usize::from(pending_space) + 1 > MAX_COMMENT_CHARS {
            truncated = true;
            break;
        }
        if pending_space {
            out.push(' ');
            n_chars += 1;
            pending_space = false;
        }
        out.push(c);
        n_chars += 1;
    }
    if out.is_empty() {
        return None;
    }
    if truncated {
        out.push_str("...");
    }
    Some(out)
}

/// Cleans the user's question: unsafe characters and whitespace runs become single spaces and
/// the ends are trimmed (the question is one line of the prompt).
pub fn sanitize_question(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in text.chars() {
        if is_unsafe_char(c) || c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_literal_as_postgres_writes_it() {
        assert_eq!(quote_literal("Germany"), "'Germany'");
        assert_eq!(quote_literal("O'Neil"), "'O''Neil'");
        assert_eq!(quote_literal(r"a\b'c"), r"E'a\\b''c'");
        assert_eq!(quote_literal(""), "''");
    }

    #[test]
    fn keyword_table_is_sorted_and_complete_enough() {
        assert!(NON_UNRESERVED_KEYWORDS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(NON_UNRESERVED_KEYWORDS.len(), 151);
        for k in
            ["select", "user", "order", "group", "table", "integer", "left", "values", "timestamp"]
        {
            assert!(is_non_unreserved_keyword(k), "{k}");
        }
        // Unreserved keywords are fine as bare identifiers.
        for k in ["name", "comment", "data", "key", "year", "position_x", "status"] {
            assert!(!is_non_unreserved_keyword(k), "{k}");
        }
    }

    #[test]
    fn quote_ident_matches_postgres() {
        // Expected values checked with SELECT quote_ident(...) on PostgreSQL 15.
        let cases = [
            ("users", "users"),
            ("order_items", "order_items"),
            ("_x1", "_x1"),
            ("Users", "\"Users\""),
            ("user", "\"user\""),
            ("order", "\"order\""),
            ("1abc", "\"1abc\""),
            ("a b", "\"a b\""),
            ("a\"b", "\"a\"\"b\""),
            ("caf\u{e9}", "\"caf\u{e9}\""),
            ("a$b", "\"a$b\""),
            ("", "\"\""),
            ("name", "name"),
        ];
        for (input, want) in cases {
            assert_eq!(quote_ident(input), want, "{input:?}");
        }
    }

    #[test]
    fn control_characters_use_unicode_escapes() {
        assert_eq!(quote_ident("a\nb"), "U&\"a\\000Ab\"");
        assert_eq!(quote_ident("x\"\\\ty"), "U&\"x\"\"\\\\\\0009y\"");
        assert_eq!(quote_ident("p\u{2028}q"), "U&\"p\\2028q\"");
        // No raw line break survives in any quoted form.
        for s in ["a\r\nb", "\u{85}", "z\u{2029}"] {
            let q = quote_ident(s);
            assert!(!q.chars().any(is_unsafe_char), "{q:?}");
        }
    }

    #[test]
    fn comments_are_flattened_and_capped() {
        assert_eq!(
            sanitize_comment("  Registered\ncustomers\r\n\tof the shop. ").as_deref(),
            Some("Registered customers of the shop.")
        );
        assert_eq!(
            sanitize_comment("a\u{2028}### Question\u{0}x").as_deref(),
            Some("a ### Question x")
        );
        assert_eq!(sanitize_comment(" \n\t "), None);
        assert_eq!(sanitize_comment(""), None);
        let long = "\u{e9}".repeat(500);
        let s = sanitize_comment(&long).unwrap();
        assert_eq!(s.chars().count(), MAX_COMMENT_CHARS + 3);
        assert!(s.ends_with("..."));
        let exact = "x".repeat(MAX_COMMENT_CHARS);
        assert_eq!(sanitize_comment(&exact).unwrap(), exact);
    }

    #[test]
    fn question_is_one_line() {
        assert_eq!(sanitize_question("  how many\nusers?\u{0}  "), "how many users?");
        assert_eq!(sanitize_question(" \t\n"), "");
    }
}
