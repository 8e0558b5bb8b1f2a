//! Finding the SQL statement in a model's answer: where it starts (after chatter or an opening
//! ``` fence), where it ends (a top-level `;`, the closing fence, a blank line), and whether the
//! answer is complete enough to stop generating.

use crate::nl2sql::sql::lexer::{self, Kind};

/// Words a SQL statement may start with (any kind, so that validation can reject non-queries by
/// name instead of silently dropping them). Compared case-insensitively on a word boundary.
const START_WORDS: &[&str] = &[
    "select", "with", "values", "table", "insert", "update", "delete", "merge", "create", "drop",
    "alter", "truncate", "explain", "show", "grant", "revoke", "copy", "call", "do", "set",
    "begin", "commit",
];

/// The statement found in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The statement, trimmed, without its terminating `;`.
    pub sql: String,
    /// True when the statement's end was seen (`;`, closing fence or blank line), so more
    /// tokens cannot change it.
    pub complete: bool,
}

/// Extracts the first SQL statement of `answer`. The statement is inside the first ``` fence if
/// there is one, else in the whole text; it starts at the first line beginning with a SQL word
/// (or at the start of the fence body / text when no line does), and ends at the first `;`
/// outside quotes and comments, at a blank line, or at the end of the fence.
pub fn extract_sql(answer: &str) -> Extracted {
    let (region, fence_closed) = fenced_region(answer);
    let start = statement_start(region).unwrap_or(0);
    let body = &region[start..];
    let (end, terminated) = statement_end(body);
    let sql = body[..end].trim().to_string();
    Extracted { complete: !sql.is_empty() && (terminated || fence_closed), sql }
}

/// True when generation can stop: the first statement of `answer` has ended.
pub fn answer_complete(answer: &str) -> bool {
    extract_sql(answer).complete
}

/// The body of the first ``` fence (after its language tag line) and whether the fence was
/// closed; the whole text and `false` when there is no fence.
fn fenced_region(answer: &str) -> (&str, bool) {
    let Some(open) = answer.find("```") else {
        return (answer, false);
    };
    let after = &answer[open + 3..];
    // The rest of the opening line is a language tag (```sql); the body starts on the next line.
    match after.find('\n') {
        Some(nl) if !after[..nl].contains("```") => {
            let body = &after[nl + 1..];
            match body.find("```") {
                Some(close) => (&body[..close], true),
                None => (body, false),
            }
        }
        // A one-line fence (```SELECT 1```).
        _ if after.contains("```") => (&after[..after.find("```").unwrap_or(after.len())], true),
        // Still on the opening line (the tag is streaming in): no body yet.
        _ => ("", false),
    }
}

/// Byte offset of the first line of `text` that starts (after indentation) with a SQL start word.
fn statement_start(text: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start().len();
        let rest = &line[indent..];
        if rest.starts_with('(') || START_WORDS.iter().any(|w| starts_with_word(rest, w)) {
            return Some(offset + indent);
        }
        offset += line.len();
    }
    None
}

/// True when `s` starts with `word` (ASCII case-insensitive) followed by a non-identifier char.
fn starts_with_word(s: &str, word: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= word.len()
        && b[..word.len()].eq_ignore_ascii_case(word.as_bytes())
        && b.get(word.len()).is_none_or(|&c| !(c.is_ascii_alphanumeric() || c == b'_'))
}

/// Scans `body` from a statement start: returns the end offset of the statement and whether a
/// terminator (`;` outside quotes/comments, or a blank line) was found. A line holding only a
/// `--` comment counts as blank; a string, quoted name or block comment spanning lines does not
/// end the statement.
fn statement_end(body: &str) -> (usize, bool) {
    let mut line_has_text = false;
    let mut prev_end = 0;
    // The line breaks between tokens (whitespace) end the statement after a line with no text.
    let blank_line_at = |from: usize, to: usize, line_has_text: &mut bool| {
        for (p, _) in body[from..to].match_indices('\n') {
            let i = from + p;
            if !*line_has_text && i > 0 && !body[..i].trim().is_empty() {
                // An empty line after statement text: the statement (and the SQL) is over.
                return Some(i);
            }
            *line_has_text = false;
        }
        None
    };
    for t in lexer::lex(body) {
        if let Some(i) = blank_line_at(prev_end, t.start, &mut line_has_text) {
            return (i, true);
        }
        if t.is(";") {
            return (t.start, true);
        }
        line_has_text |= t.kind != Kind::LineComment;
        prev_end = t.end();
    }
    match blank_line_at(prev_end, body.len(), &mut line_has_text) {
        Some(i) => (i, true),
        None => (body.len(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(a: &str) -> (String, bool) {
        let e = extract_sql(a);
        (e.sql, e.complete)
    }

    #[test]
    fn bare_sql_from_the_small_model() {
        assert_eq!(sql("SELECT count(*) FROM users"), ("SELECT count(*) FROM users".into(), false));
        assert_eq!(sql("SELECT count(*) FROM users;"), ("SELECT count(*) FROM users".into(), true));
        assert_eq!(sql("SELECT 1;\nSELECT 2;"), ("SELECT 1".into(), true));
    }

    #[test]
    fn fenced_sql_from_the_larger_model() {
        assert_eq!(
            sql("```sql\nSELECT COUNT(*) FROM users;\n```"),
            ("SELECT COUNT(*) FROM users".into(), true)
        );
        assert_eq!(
            sql("```sql\nSELECT COUNT(*)\nFROM users\n```\nThis counts."),
            ("SELECT COUNT(*)\nFROM users".into(), true)
        );
        // Fence opened, body still streaming: not complete.
        assert_eq!(sql("```sql\nSELECT COUNT(*)"), ("SELECT COUNT(*)".into(), false));
        assert_eq!(sql("```sql"), ("".into(), false));
        assert_eq!(sql("```"), ("".into(), false));
        assert_eq!(sql("```SELECT 1```"), ("SELECT 1".into(), true));
    }

    #[test]
    fn chatter_before_and_after() {
        let a = "Here is the query:\n\n```sql\nSELECT name FROM users WHERE id = 1;\n```\nIt returns the name.";
        assert_eq!(sql(a), ("SELECT name FROM users WHERE id = 1".into(), true));
        let a = "To count users, run:\nSELECT count(*) FROM users\n\nThis query counts every row.";
        assert_eq!(sql(a), ("SELECT count(*) FROM users".into(), true));
        let a = "  with t as (select 1) select * from t;";
        assert_eq!(sql(a), ("with t as (select 1) select * from t".into(), true));
    }

    #[test]
    fn semicolons_inside_quotes_and_comments_do_not_end_it() {
        let a = "SELECT ';' AS a, \"x;y\" FROM t -- c;\nWHERE b = 'it''s;' /* ; */ AND c = $$;$$ AND d = $q$;$q$;";
        let (s, done) = sql(a);
        assert!(done);
        assert_eq!(s, a.trim_end_matches(';'));
        // Parameters are not dollar quotes.
        assert_eq!(sql("SELECT $1; x"), ("SELECT $1".into(), true));
    }

    #[test]
    fn start_words_need_a_word_boundary() {
        assert_eq!(sql("selection is hard\nSELECT 1;"), ("SELECT 1".into(), true));
        assert_eq!(
            sql("(SELECT 1) UNION (SELECT 2);"),
            ("(SELECT 1) UNION (SELECT 2)".into(), true)
        );
        assert_eq!(sql("DELETE FROM users;"), ("DELETE FROM users".into(), true));
        assert!(!answer_complete("The"));
        assert!(!answer_complete(""));
        assert!(!answer_complete("\n\n"));
    }

    #[test]
    fn statements_end_where_postgresql_ends_them() {
        // Block comments nest: the first `*/` does not end the outer one.
        assert_eq!(
            sql("SELECT 1 /* a /* b */ ; */ + 2; x"),
            ("SELECT 1 /* a /* b */ ; */ + 2".into(), true)
        );
        // A backslash escapes a quote in E'' only; `$` inside an identifier opens no dollar quote.
        assert_eq!(sql(r"SELECT E'\';' AS a; x"), (r"SELECT E'\';' AS a".into(), true));
        assert_eq!(sql(r"SELECT '\'; x"), (r"SELECT '\'".into(), true));
        assert_eq!(sql("SELECT a$$b; x"), ("SELECT a$$b".into(), true));
        assert_eq!(sql("SELECT $a$ ; $ $a$; x"), ("SELECT $a$ ; $ $a$".into(), true));
        // Cut inside a string, dollar quote, quoted name or comment: not complete.
        for cut in
            ["SELECT 'a;", "SELECT $$a;", "SELECT \"a;", "SELECT /* a; /* */", "SELECT E'\\';"]
        {
            assert_eq!(sql(cut), (cut.into(), false), "{cut}");
        }
        // `--` at the end of the input, and multi-byte text anywhere.
        assert_eq!(sql("SELECT 'é' -- ünïcode"), ("SELECT 'é' -- ünïcode".into(), false));
        assert_eq!(sql("SELECT 'é' AS \"ü\";"), ("SELECT 'é' AS \"ü\"".into(), true));
    }
}
