//! The validator's verdict on a statement ([`Rejection`]: the server's error or the validator's
//! own reason, or a doubt) and what can be read from it: the SQLSTATEs the engine explains, the
//! names in the server's message, and where in the statement the error points.

use crate::nl2sql::check::statement::{find_ci, find_word, outside_quotes, word_positions};

/// Why the validator refused a statement.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rejection {
    /// The primary message (PostgreSQL's, or the validator's own reason).
    pub message: String,
    /// The five-character SQLSTATE, when the server raised the error.
    pub sqlstate: Option<String>,
    /// The server's hint, if any.
    pub hint: Option<String>,
    /// Facts the validator looked up in the catalog (e.g. a function's real signatures).
    pub facts: Vec<String>,
    /// True for a doubt (`doubt.rs`): the statement is valid and runs, but looks wrong. It is
    /// worth one repair round, and is kept when the repair does no better.
    pub advisory: bool,
    /// The byte span in the statement of the word the rejection is about, when the validator
    /// located it (doubts do); otherwise [`error_span`] reads it off the message.
    pub span: Option<(u32, u32)>,
    /// The statement rewritten so that this rejection goes, and a note of how, when the validator
    /// knows the fix (a doubt about integer division does); it still has to pass validation.
    /// Boxed: a `Rejection` travels in `Result`s.
    pub fix: Option<Box<(String, String)>>,
}

impl From<String> for Rejection {
    fn from(message: String) -> Rejection {
        Rejection { message, ..Rejection::default() }
    }
}

impl From<&str> for Rejection {
    fn from(message: &str) -> Rejection {
        Rejection::from(message.to_string())
    }
}

/// SQLSTATEs the feedback knows how to explain.
pub(crate) mod state {
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const UNDEFINED_FUNCTION: &str = "42883";
    pub const DUPLICATE_ALIAS: &str = "42712";
    pub const GROUPING_ERROR: &str = "42803";
    pub const SYNTAX_ERROR: &str = "42601";
    pub const AMBIGUOUS_COLUMN: &str = "42702";
}

/// The byte span `(start, end)` in `sql` of the word the error of `rej` is about, when it can be
/// located from the message alone (PostgreSQL reports a position, but not through the error
/// data the validator gets): the column after its qualifier, the function name, the operator,
/// the repeated alias, the grouped-by column, the token a syntax error names. A repair is then
/// made to write something else there (`Constrainer::with_ban`).
pub fn error_span(rej: &Rejection, sql: &str) -> Option<(usize, usize)> {
    if let Some((start, end)) = rej.span {
        let (start, end) = (start as usize, end as usize);
        return sql.get(start..end).map(|_| (start, end));
    }
    let msg = rej.message.as_str();
    let span = |start: Option<usize>, word: &str| start.map(|p| (p, p + word.len()));
    match rej.sqlstate.as_deref()? {
        state::UNDEFINED_COLUMN => {
            let (q, c) = undefined_column(msg)?;
            let at = match q {
                Some(q) => find_ci(sql, &format!("{q}.{c}"))
                    .map(|p| p + q.len() + 1)
                    .or_else(|| find_word(sql, &c)),
                None => find_word(sql, &c),
            };
            span(at, &c)
        }
        state::UNDEFINED_TABLE => {
            if let Some(q) = quoted_after(msg, "missing FROM-clause entry for table ") {
                span(find_ci(sql, &format!("{q}.")), &q)
            } else {
                let name = quoted_after(msg, "relation ")?;
                let base = name.rsplit('.').next().unwrap_or(&name);
                span(find_word(sql, base), base)
            }
        }
        state::UNDEFINED_FUNCTION => {
            if let Some(f) = function_name(msg) {
                return span(find_word(sql, &f), &f);
            }
            let rest = msg.strip_prefix("operator does not exist: ")?;
            let op = rest
                .split_whitespace()
                .find(|w| !w.is_empty() && w.chars().all(|c| "+-*/<>=~!@#%^&|`?".contains(c)))?;
            span(outside_quotes(sql, op), op)
        }
        state::DUPLICATE_ALIAS => {
            let alias = quoted_after(msg, "table name ")?;
            // Declarations are occurrences not followed by `.`; the second one is the repeat.
            let mut decls = word_positions(sql, &alias)
                .into_iter()
                .filter(|&p| !sql[p + alias.len()..].trim_start().starts_with('.'));
            span(decls.nth(1), &alias)
        }
        state::GROUPING_ERROR => {
            let col = quoted_after(msg, "column ")?;
            match find_ci(sql, &col) {
                Some(p) => Some((p, p + col.len())),
                None => {
                    let c = col.rsplit('.').next().unwrap_or(&col);
                    span(find_word(sql, c), c)
                }
            }
        }
        state::SYNTAX_ERROR => {
            let near = quoted_after(msg, "at or near ")?;
            span(outside_quotes(sql, &near), &near)
        }
        _ => None,
    }
}

/// `(qualifier, column)` of an undefined-column message: `column "x" does not exist`,
/// `column t.x does not exist`, `column "x" of relation "t" does not exist`.
pub(crate) fn undefined_column(message: &str) -> Option<(Option<String>, String)> {
    let rest = message.strip_prefix("column ")?;
    let end = rest.find(" does not exist")?;
    let subject = &rest[..end];
    if let Some((col, rel)) = subject.split_once(" of relation ") {
        return Some((Some(unquote(rel)), unquote(col)));
    }
    match split_qualified(subject) {
        (Some(q), c) => Some((Some(q), c)),
        (None, c) => Some((None, c)),
    }
}

/// `a.b` -> (Some(a), b); `"x"` -> (None, x). Quotes removed.
pub(crate) fn split_qualified(s: &str) -> (Option<String>, String) {
    let s = s.trim();
    if s.starts_with('"') && s.ends_with('"') && s.len() >= 2 && !s[1..s.len() - 1].contains("\".")
    {
        return (None, unquote(s));
    }
    match s.rsplit_once('.') {
        Some((q, c)) => (Some(unquote(q.rsplit('.').next().unwrap_or(q))), unquote(c)),
        None => (None, unquote(s)),
    }
}

/// The text inside the first pair of double quotes after `prefix` in `message`.
pub(crate) fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

/// `name` without surrounding double quotes.
pub(crate) fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_string()
    }
}

/// The function name of `function f(args) does not exist` (schema prefix removed, lowercased).
pub(crate) fn function_name(message: &str) -> Option<String> {
    let rest = message.strip_prefix("function ")?;
    let name = &rest[..rest.find('(')?];
    Some(unquote(name.rsplit('.').next().unwrap_or(name)).to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rej(state: &str, message: &str) -> Rejection {
        Rejection { message: message.into(), sqlstate: Some(state.into()), ..Rejection::default() }
    }

    #[test]
    fn error_spans() {
        let sql =
            "SELECT c.total_price FROM customers c WHERE c.placed >= '2023' AND x LIKE 'a >= b'";
        assert_eq!(
            error_span(&rej("42703", "column c.total_price does not exist"), sql),
            Some((9, 20))
        );
        assert_eq!(
            error_span(&rej("42883", "operator does not exist: text >= timestamp"), sql),
            Some((53, 55))
        );
        assert_eq!(
            error_span(
                &rej("42883", "function datediff(unknown) does not exist"),
                "SELECT DATEDIFF('d', a)"
            ),
            Some((7, 15))
        );
        assert_eq!(
            error_span(
                &rej("42712", "table name \"t\" specified more than once"),
                "SELECT t.a FROM x t JOIN y t ON t.id = 1"
            ),
            Some((27, 28))
        );
        assert_eq!(
            error_span(
                &rej("42P01", "missing FROM-clause entry for table \"o\""),
                "SELECT o.id FROM customers c"
            ),
            Some((7, 8))
        );
        let grouping = "column \"c.name\" must appear in the GROUP BY clause or be used in an aggregate function";
        assert_eq!(
            error_span(&rej("42803", grouping), "SELECT c.name, count(*) FROM c"),
            Some((7, 13))
        );
        assert_eq!(error_span(&rej("42601", "syntax error at end of input"), "SELECT"), None);
        assert_eq!(error_span(&Rejection::from("nope"), "SELECT 1"), None);
    }
}
