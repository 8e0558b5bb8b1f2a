//! Helpers that read a SQL statement's text: a word's positions outside quotes and comments,
//! the FROM items (table and alias) and the shown table each stands for. Used by the repair
//! feedback and rewrites (`repair/`), the doubts (`doubt.rs`) and the PostgreSQL glue's result
//! check (`pg/result_check.rs`).

use crate::nl2sql::schema::tables::{SchemaInfo, Table};
use crate::nl2sql::sql::lexer::{self, Kind, Token};

/// Byte offset of the first case-insensitive occurrence of `needle` in `hay`.
pub(crate) fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    hay.to_lowercase().find(&needle.to_lowercase()).filter(|&p| hay.is_char_boundary(p))
}

/// Byte offsets of the case-insensitive occurrences of `word` as a whole word (not inside a
/// longer identifier): a plain text search, strings and comments included, so that an error
/// located by name is where earlier versions located it.
pub fn word_positions(hay: &str, word: &str) -> Vec<usize> {
    let lower = hay.to_lowercase();
    let w = word.to_lowercase();
    if w.is_empty() || lower.len() != hay.len() {
        return Vec::new();
    }
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    lower
        .match_indices(&w)
        .map(|(p, _)| p)
        .filter(|&p| {
            !ident(lower[..p].chars().next_back()) && !ident(lower[p + w.len()..].chars().next())
        })
        .collect()
}

/// The first whole-word occurrence of `word`.
pub(crate) fn find_word(hay: &str, word: &str) -> Option<usize> {
    word_positions(hay, word).into_iter().next()
}

/// The first occurrence of `needle` in `hay` that starts outside string constants.
pub(crate) fn outside_quotes(hay: &str, needle: &str) -> Option<usize> {
    let in_string = in_string(hay);
    hay.char_indices().map(|(i, _)| i).find(|&i| hay[i..].starts_with(needle) && !in_string(i))
}

/// Whether a byte offset of `sql` is inside a string constant (its quotes included).
pub(crate) fn in_string(sql: &str) -> impl Fn(usize) -> bool + '_ {
    let toks: Vec<Token> = lexer::lex(sql).collect();
    move |p| lexer::token_at(&toks, p).is_some_and(|t| t.kind == Kind::String)
}

/// One FROM/JOIN item of a statement: the table as written and the alias it gets (the table's
/// own name when none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromItem {
    /// Lowercased (unless quoted) name parts, e.g. `["sales", "orders"]`.
    pub table: Vec<String>,
    /// The name the rest of the statement uses for it.
    pub alias: String,
}

/// The table references of `sql`'s FROM and JOIN clauses (every level; sub-selects in
/// parentheses are skipped as tables but their own FROM items are found), in order.
pub fn from_items(sql: &str) -> Vec<FromItem> {
    let toks: Vec<Token> = lexer::lex(sql).filter(|t| !t.is_comment()).collect();
    // An unquoted word lowercased (PostgreSQL folds it).
    let word =
        |t: Option<&Token>| t.filter(|t| t.kind == Kind::Ident).map(|t| t.text.to_lowercase());
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let starts = word(toks.get(i)).is_some_and(|w| w == "from" || w == "join")
            || (toks[i].is(",") && in_from_list(&toks[..i]));
        i += 1;
        if !starts {
            continue;
        }
        // A table name: ident ( . ident )*
        let mut parts = Vec::new();
        while let Some(t) =
            toks.get(i).filter(|t| matches!(t.kind, Kind::Ident | Kind::QuotedIdent))
        {
            let name = match word(Some(t)) {
                Some(w) if is_clause_word(&w) => break,
                Some(w) => w,
                None => t.name().unwrap_or_default().into_owned(),
            };
            parts.push(name);
            i += 1;
            if toks.get(i).is_some_and(|t| t.is(".")) {
                i += 1;
            } else {
                break;
            }
        }
        if parts.is_empty() {
            continue;
        }
        // Optional [AS] alias.
        if word(toks.get(i)).is_some_and(|w| w == "as") {
            i += 1;
        }
        let alias = match toks.get(i) {
            Some(t) if t.kind == Kind::QuotedIdent => {
                i += 1;
                t.name().unwrap_or_default().into_owned()
            }
            Some(t) if t.kind == Kind::Ident && !is_clause_word(&t.text.to_lowercase()) => {
                i += 1;
                t.text.to_lowercase()
            }
            _ => parts.last().cloned().unwrap_or_default(),
        };
        out.push(FromItem { table: parts, alias });
    }
    out
}

/// True when a `,` at the end of `before` separates FROM items: the nearest clause keyword
/// before it at the same parenthesis depth is FROM (or a JOIN's ON/USING).
pub(crate) fn in_from_list(before: &[Token]) -> bool {
    let mut depth = 0i32;
    for t in before.iter().rev() {
        if t.is(")") {
            depth += 1;
        } else if t.is("(") {
            if depth == 0 {
                return false;
            }
            depth -= 1;
        } else if t.kind == Kind::Ident && depth == 0 {
            let w = t.text.to_lowercase();
            if is_clause_word(&w) {
                return w == "from" || w == "on" || w == "using" || w == "join";
            }
        }
    }
    false
}

/// Words that end a table reference or start another clause (never an alias).
pub(crate) fn is_clause_word(w: &str) -> bool {
    const WORDS: &[&str] = &[
        "select",
        "from",
        "where",
        "group",
        "order",
        "having",
        "limit",
        "offset",
        "join",
        "inner",
        "left",
        "right",
        "full",
        "cross",
        "outer",
        "natural",
        "on",
        "using",
        "union",
        "intersect",
        "except",
        "window",
        "lateral",
        "fetch",
        "for",
        "with",
        "as",
        "and",
        "or",
        "not",
        "when",
        "then",
        "else",
        "end",
        "case",
        "returning",
        "values",
    ];
    WORDS.contains(&w)
}

/// The table of `shown` a FROM item refers to (schema-qualified or not; case as PostgreSQL folds).
pub(crate) fn resolve<'a>(item: &FromItem, shown: &'a SchemaInfo) -> Option<&'a Table> {
    let name = item.table.last()?;
    let schema = (item.table.len() >= 2).then(|| &item.table[item.table.len() - 2]);
    shown
        .tables
        .iter()
        .filter(|t| &t.name == name || t.name.to_lowercase() == *name)
        .find(|t| schema.is_none_or(|s| &t.schema == s || t.schema.to_lowercase() == *s))
}

/// The table `qualifier` stands for in the statement: an alias, or a table's own name.
pub(crate) fn table_for<'a>(
    qualifier: &str,
    froms: &[FromItem],
    shown: &'a SchemaInfo,
) -> Option<&'a Table> {
    let q = qualifier.to_lowercase();
    froms
        .iter()
        .find(|f| f.alias == qualifier || f.alias == q)
        .and_then(|f| resolve(f, shown))
        .or_else(|| shown.tables.iter().find(|t| t.name == qualifier || t.name.to_lowercase() == q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_items_with_aliases() {
        let f = from_items("SELECT c.name FROM customers AS c JOIN public.orders o ON o.customer_id = c.id, audit.events WHERE x IN (SELECT 1 FROM \"Orders\" z)");
        let got: Vec<(String, String)> =
            f.iter().map(|i| (i.table.join("."), i.alias.clone())).collect();
        assert_eq!(
            got,
            [
                ("customers".into(), "c".into()),
                ("public.orders".into(), "o".into()),
                ("audit.events".into(), "events".into()),
                ("Orders".into(), "z".into())
            ]
        );
        // Sub-selects in FROM are not tables; keywords are not aliases.
        let f = from_items(
            "SELECT * FROM (SELECT id FROM orders) s JOIN customers WHERE 1 = 1 GROUP BY 1",
        );
        let got: Vec<(String, String)> =
            f.iter().map(|i| (i.table.join("."), i.alias.clone())).collect();
        assert_eq!(
            got,
            [("orders".into(), "orders".into()), ("customers".into(), "customers".into())]
        );
    }

    #[test]
    fn from_items_skip_what_postgresql_skips() {
        let items = |sql: &str| -> Vec<(Vec<String>, String)> {
            from_items(sql).into_iter().map(|f| (f.table, f.alias)).collect()
        };
        let t = |name: &str, alias: &str| (vec![name.to_string()], alias.to_string());
        // Nested comments, E'' and dollar-quoted strings hide their words.
        assert_eq!(
            items("SELECT 1 FROM a /* x /* FROM b */ FROM c */ JOIN d ON E'\\' FROM e' = $$ FROM f $$"),
            vec![t("a", "a"), t("d", "d")]
        );
        // U&"" names are decoded; a non-ASCII digit starting a token once looped forever.
        assert_eq!(items(r#"SELECT ² FROM U&"d\0061ta" x"#), vec![t("data", "x")]);
        assert_eq!(items("SELECT 1 FROM café AS ç"), vec![t("café", "ç")]);
        // Cut mid-statement: what was written is read.
        assert_eq!(items("SELECT 1 FROM \"Ab"), vec![t("Ab", "Ab")]);
    }
}
