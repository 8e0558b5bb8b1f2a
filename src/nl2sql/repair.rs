//! Catalog-aware repair feedback: when the server rejects a generated statement, what a DBA would
//! look up next, in a few lines the model reads before it tries again.
//!
//! Given PostgreSQL's error (SQLSTATE, message, hint, plus facts the validator looked up in the
//! catalog), the statement and the tables shown in the prompt, [`feedback`] adds:
//! - undefined column (42703): the real columns of the table the alias stands for, which shown
//!   tables do have the missing column, else the closest column names;
//! - undefined table (42P01): the closest table names as the prompt writes them, or for a
//!   "missing FROM-clause entry" the aliases the statement does declare;
//! - undefined function (42883): the PostgreSQL way for functions of other dialects.
//!
//! Everything here is generic SQL knowledge: no rule names a table, column or value of any
//! particular database.

use super::ident::quote_ident;
use super::lexer::{self, Kind, Token};
use super::render::Renderer;
use super::schema::{SchemaInfo, Table};

/// Most column names listed for one table (a wide table is cut, with a count of the rest).
const MAX_LISTED_COLUMNS: usize = 40;
/// Most "closest name" suggestions.
const MAX_SUGGESTIONS: usize = 5;
/// Longest feedback text, in characters (about 300 tokens): enough for a table's columns and a
/// few suggestions, small enough to fit the repair reserve of the context.
pub const MAX_FEEDBACK_CHARS: usize = 1200;

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
mod state {
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const UNDEFINED_FUNCTION: &str = "42883";
    pub const DUPLICATE_ALIAS: &str = "42712";
    pub const GROUPING_ERROR: &str = "42803";
    pub const SYNTAX_ERROR: &str = "42601";
    pub const AMBIGUOUS_COLUMN: &str = "42702";
}

/// The catalog-aware lines for `rej` on `sql` over the `shown` tables (as `renderer` names them),
/// joined by newlines and capped at [`MAX_FEEDBACK_CHARS`]; empty when there is nothing to add.
pub fn feedback(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> String {
    let renderer = Renderer::new(shown);
    let froms = from_items(sql);
    let mut lines: Vec<String> = Vec::new();
    match rej.sqlstate.as_deref() {
        Some(state::UNDEFINED_COLUMN) => {
            if let Some((qualifier, column)) = undefined_column(&rej.message) {
                column_lines(&mut lines, qualifier.as_deref(), &column, &froms, shown, &renderer);
            }
        }
        Some(state::UNDEFINED_TABLE) => {
            if let Some(q) = quoted_after(&rej.message, "missing FROM-clause entry for table ") {
                missing_from_lines(&mut lines, &q, &froms, shown, &renderer);
            } else if let Some(name) = quoted_after(&rej.message, "relation ") {
                let base = name.rsplit('.').next().unwrap_or(&name).to_string();
                let names: Vec<String> =
                    shown.tables.iter().map(|t| renderer.table_name(&t.schema, &t.name)).collect();
                let close = closest(&base, shown.tables.iter().map(|t| t.name.as_str()), &names);
                if !close.is_empty() {
                    lines.push(format!(
                        "There is no table {name}; the closest tables are: {}.",
                        close.join(", ")
                    ));
                }
            }
        }
        Some(state::UNDEFINED_FUNCTION) => {
            if let Some(f) = function_name(&rej.message) {
                if let Some(advice) = dialect_advice(&f) {
                    lines.push(format!("PostgreSQL has no {f}(): {advice}"));
                }
            }
            if rej.message.starts_with("operator does not exist") {
                lines.push(
                    "Compare values of the same type: cast with ::type (e.g. col::text, col::date), and compare dates with ranges or date_trunc instead of LIKE."
                        .to_string(),
                );
            }
        }
        Some(state::SYNTAX_ERROR) if rej.message.contains("at or near \"`\"") => {
            lines.push("PostgreSQL quotes names with double quotes (\"name\"), never backticks; most names need no quotes.".to_string());
        }
        Some(state::DUPLICATE_ALIAS) => {
            lines.push("Give every table in FROM and JOIN its own alias, and qualify each column with the alias of the table that has it.".to_string());
        }
        _ => {}
    }
    lines.extend(rej.facts.iter().cloned());
    cap_chars(&lines.join("\n"), MAX_FEEDBACK_CHARS)
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

/// Byte offset of the first case-insensitive occurrence of `needle` in `hay`.
fn find_ci(hay: &str, needle: &str) -> Option<usize> {
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
fn find_word(hay: &str, word: &str) -> Option<usize> {
    word_positions(hay, word).into_iter().next()
}

/// The first occurrence of `needle` in `hay` that starts outside string constants.
fn outside_quotes(hay: &str, needle: &str) -> Option<usize> {
    let in_string = in_string(hay);
    hay.char_indices().map(|(i, _)| i).find(|&i| hay[i..].starts_with(needle) && !in_string(i))
}

/// Whether a byte offset of `sql` is inside a string constant (its quotes included).
fn in_string(sql: &str) -> impl Fn(usize) -> bool + '_ {
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
fn in_from_list(before: &[Token]) -> bool {
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
fn is_clause_word(w: &str) -> bool {
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

/// `(qualifier, column)` of an undefined-column message: `column "x" does not exist`,
/// `column t.x does not exist`, `column "x" of relation "t" does not exist`.
fn undefined_column(message: &str) -> Option<(Option<String>, String)> {
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
fn split_qualified(s: &str) -> (Option<String>, String) {
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
fn quoted_after(message: &str, prefix: &str) -> Option<String> {
    let rest = &message[message.find(prefix)? + prefix.len()..];
    let rest = rest.strip_prefix('"')?;
    Some(rest[..rest.find('"')?].to_string())
}

/// `name` without surrounding double quotes.
fn unquote(s: &str) -> String {
    let s = s.trim();
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        s[1..s.len() - 1].replace("\"\"", "\"")
    } else {
        s.to_string()
    }
}

/// The function name of `function f(args) does not exist` (schema prefix removed, lowercased).
fn function_name(message: &str) -> Option<String> {
    let rest = message.strip_prefix("function ")?;
    let name = &rest[..rest.find('(')?];
    Some(unquote(name.rsplit('.').next().unwrap_or(name)).to_lowercase())
}

/// The table of `shown` a FROM item refers to (schema-qualified or not; case as PostgreSQL folds).
fn resolve<'a>(item: &FromItem, shown: &'a SchemaInfo) -> Option<&'a Table> {
    let name = item.table.last()?;
    let schema = (item.table.len() >= 2).then(|| &item.table[item.table.len() - 2]);
    shown
        .tables
        .iter()
        .filter(|t| &t.name == name || t.name.to_lowercase() == *name)
        .find(|t| schema.is_none_or(|s| &t.schema == s || t.schema.to_lowercase() == *s))
}

/// The aliases `sql` declares for tables of `shown`, as `(alias, true, table index)` (the alias
/// already folded as PostgreSQL folds it, so matched exactly): the hints a repair round's
/// constrained decoding starts from (`Constrainer::with_hints`).
pub fn alias_hints(sql: &str, shown: &SchemaInfo) -> Vec<(String, bool, usize)> {
    from_items(sql)
        .iter()
        .filter_map(|f| {
            let t = resolve(f, shown)?;
            let i = shown.tables.iter().position(|x| std::ptr::eq(x, t))?;
            Some((f.alias.clone(), true, i))
        })
        .collect()
}

/// The deterministic repair of a column put on the wrong table: the server says `q.c` does not
/// exist, and exactly one other table among the statement's FROM items has a column `c`, or
/// several that the statement joins on `c` (a DBA reading the statement would requalify it):
/// every `q.c` becomes `alias.c` (the first owner's). Returns the new statement and a note of
/// the change; it still has to pass validation.
pub fn requalified(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    if rej.sqlstate.as_deref() != Some(state::UNDEFINED_COLUMN) {
        return None;
    }
    let (Some(q), column) = undefined_column(&rej.message)? else { return None };
    let froms = from_items(sql);
    let own = table_for(&q, &froms, shown);
    let owners: Vec<(&FromItem, &Table)> = froms
        .iter()
        .filter(|f| !f.alias.eq_ignore_ascii_case(&q))
        .filter_map(|f| resolve(f, shown).map(|t| (f, t)))
        .filter(|(_, t)| own.is_none_or(|o| !std::ptr::eq(o, *t)))
        .filter(|(_, t)| t.columns.iter().any(|c| c.name == column))
        .collect();
    // One owner; or several that the statement joins on this very column (`t.c = d.c`), whose
    // values then agree: the first in FROM order (the preserved side of a LEFT JOIN chain).
    let aliases: Vec<&str> = owners.iter().map(|(f, _)| f.alias.as_str()).collect();
    let &(owner, table) = owners.first()?;
    if owners.len() > 1 && !joined_on(sql, &aliases, &column) {
        return None;
    }
    // Every `q.c` (plain words, outside quotes), rewritten from the end so offsets hold.
    let spans = qualifier_spans(sql, &q, &column);
    let mut out = sql.to_string();
    for span in spans.iter().rev() {
        out.replace_range(span.clone(), &owner.alias);
    }
    let changed = spans.len();
    (changed > 0).then(|| {
        let note = format!(
            "{q}.{column} -> {}.{column} ({column} is a column of {}, {})",
            owner.alias,
            Renderer::new(shown).table_name(&table.schema, &table.name),
            owner.alias
        );
        (out, note)
    })
}

/// The byte spans of qualifier `q` in every `q.column` of `sql` (unquoted words written without
/// blanks around the dot; strings and comments left alone), in order.
fn qualifier_spans(sql: &str, q: &str, column: &str) -> Vec<std::ops::Range<usize>> {
    let toks: Vec<Token> = lexer::lex(sql).collect();
    let column = column.to_lowercase();
    toks.windows(3)
        .filter(|w| {
            w[0].kind == Kind::Ident
                && w[1].is(".")
                && w[2].kind == Kind::Ident
                && w[0].end() == w[1].start
                && w[1].end() == w[2].start
                && w[0].text.eq_ignore_ascii_case(q)
                && w[2].text.to_lowercase() == column
        })
        .map(|w| w[0].start..w[0].end())
        .collect()
}

/// The deterministic repair of an ambiguous column (`column reference "patient_id" is
/// ambiguous`) that every FROM item having it is joined on (`t.patient_id = p.patient_id`, so
/// the values agree): each unqualified use (not a result label after AS, not a function name)
/// is qualified with the first such item in FROM order (the preserved side of a LEFT JOIN
/// chain). Returns the new statement and a note; it still has to pass validation.
pub fn disambiguated(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    if rej.sqlstate.as_deref() != Some(state::AMBIGUOUS_COLUMN) || !sql.is_ascii() {
        return None;
    }
    let column = quoted_after(&rej.message, "column reference ")?;
    let froms = from_items(sql);
    let owners: Vec<&FromItem> = froms
        .iter()
        .filter(|f| resolve(f, shown).is_some_and(|t| t.columns.iter().any(|c| c.name == column)))
        .collect();
    let aliases: Vec<&str> = owners.iter().map(|f| f.alias.as_str()).collect();
    if owners.len() < 2 || !joined_on(sql, &aliases, &column) {
        return None;
    }
    let lower = sql.to_ascii_lowercase();
    let in_string = in_string(sql);
    let bare: Vec<usize> = word_positions(sql, &column)
        .into_iter()
        .filter(|&p| {
            let before = lower[..p].trim_end();
            let after = sql[p + column.len()..].trim_start();
            !in_string(p)
                && !sql[..p].ends_with('.')
                && !sql[..p].ends_with('"')
                && !before.ends_with(" as")
                && !after.starts_with('(')
        })
        .collect();
    if bare.is_empty() {
        return None;
    }
    let qualifier = quote_ident(&owners[0].alias);
    let mut out = sql.to_string();
    for &p in bare.iter().rev() {
        out.insert_str(p, &format!("{qualifier}."));
    }
    let note = format!("{column} -> {qualifier}.{column} (joined on {column}: the values agree)");
    Some((out, note))
}

/// PostgreSQL's reserved key words and those that cannot name a table alias (the
/// `type_func_name` category), lowercased: `FROM inventory_snapshots is` stops the parser at
/// `is`. From the key-words appendix of the PostgreSQL manual (PostgreSQL 15).
#[rustfmt::skip]
const NOT_AN_ALIAS: &[&str] = &[
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "authorization",
    "binary", "both", "case", "cast", "check", "collate", "collation", "column", "concurrently",
    "constraint", "create", "cross", "current_catalog", "current_date", "current_role",
    "current_schema", "current_time", "current_timestamp", "current_user", "default", "deferrable",
    "desc", "distinct", "do", "else", "end", "except", "false", "fetch", "for", "foreign", "freeze",
    "from", "full", "grant", "group", "having", "ilike", "in", "initially", "inner", "intersect",
    "into", "is", "isnull", "join", "lateral", "leading", "left", "like", "limit", "localtime",
    "localtimestamp", "natural", "not", "notnull", "null", "offset", "on", "only", "or", "order",
    "outer", "overlaps", "placing", "primary", "references", "returning", "right", "select",
    "session_user", "similar", "some", "symmetric", "table", "tablesample", "then", "to",
    "trailing", "true", "union", "unique", "user", "using", "variadic", "verbose", "when", "where",
    "window", "with",
];

/// The deterministic repair of a table alias that is a reserved word (`JOIN inventory_snapshots
/// is ON c.id = is.car_id`): the parser reports a syntax error at the word; when the word
/// follows a table name of a FROM or JOIN item and qualifies columns later (`is.`), the alias
/// and each such qualifier become `<word>_` (when that name is free). Returns the new statement
/// and a note; it still has to pass validation.
pub fn dealiased(rej: &Rejection, sql: &str) -> Option<(String, String)> {
    if rej.sqlstate.as_deref() != Some(state::SYNTAX_ERROR) {
        return None;
    }
    let word = quoted_after(&rej.message, "at or near ")?.to_ascii_lowercase();
    if !NOT_AN_ALIAS.contains(&word.as_str()) || !sql.is_ascii() {
        return None;
    }
    let renamed = format!("{word}_");
    if !word_positions(sql, &renamed).is_empty() {
        return None;
    }
    let lower = sql.to_ascii_lowercase();
    let in_string = in_string(sql);
    let at = word_positions(sql, &word);
    // The alias: right after `FROM|JOIN|, <name>[.<name>] [AS]`.
    let defined = at.iter().copied().filter(|&p| !in_string(p)).find(|&p| {
        let mut before = lower[..p].split_whitespace().rev();
        let mut prev = before.next();
        if prev == Some("as") {
            prev = before.next();
        }
        let comma = prev.is_some_and(|n| n.starts_with(','));
        let named = prev.map(|n| n.trim_start_matches(',')).is_some_and(|n| {
            n.split('.').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !is_clause_word(part)
            })
        });
        let opener = before.next();
        named
            && (comma
                || matches!(opener, Some("from" | "join"))
                || opener.is_some_and(|o| o.ends_with(',')))
    })?;
    let uses: Vec<usize> = at
        .iter()
        .copied()
        .filter(|&p| p != defined && !in_string(p) && sql[p + word.len()..].starts_with('.'))
        .collect();
    if uses.is_empty() {
        return None;
    }
    let mut out = sql.to_string();
    let mut spans = uses;
    spans.push(defined);
    spans.sort_unstable();
    for &p in spans.iter().rev() {
        out.replace_range(p..p + word.len(), &renamed);
    }
    Some((out, format!("alias {word} -> {renamed} ({word} is a reserved word)")))
}

/// The deterministic repair of a table the statement uses but does not read: the server says
/// column `c` (or `q.c`) does not exist and no table among the statement's FROM items has it
/// while exactly one other shown table `t` does, or that the FROM clause lacks table `t`
/// (`missing FROM-clause entry for table "t"`, `t` a shown table's name); and `t` is linked to
/// exactly one FROM item by a declared single-column foreign key (either way). Then
/// `JOIN t ON <the key>` is written right after that item, and every `q.c` becomes `t.c`.
/// Returns the new statement and a note; it still has to pass validation.
pub fn joined(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    let froms = from_items(sql);
    let read: Vec<(&FromItem, &Table)> =
        froms.iter().filter_map(|f| resolve(f, shown).map(|t| (f, t))).collect();
    if read.len() != froms.len() {
        return None; // a sub-select, a CTE or an unknown table among the FROM items
    }
    // The table to join, and the column reference to requalify.
    let (table, moved) = match rej.sqlstate.as_deref() {
        Some(state::UNDEFINED_COLUMN) => {
            let (q, column) = undefined_column(&rej.message)?;
            if read.iter().any(|(_, t)| t.columns.iter().any(|c| c.name == column)) {
                return None; // a FROM item has it: `requalified`'s case
            }
            let mut owners =
                shown.tables.iter().filter(|t| t.columns.iter().any(|c| c.name == column));
            let (table, None) = (owners.next()?, owners.next()) else { return None };
            (table, Some((q, column)))
        }
        Some(state::UNDEFINED_TABLE) => {
            let name = quoted_after(&rej.message, "missing FROM-clause entry for table ")?;
            let mut named = shown.tables.iter().filter(|t| t.name == name);
            let (table, None) = (named.next()?, named.next()) else { return None };
            (table, None)
        }
        _ => return None,
    };
    // Its bare name must be free in the statement: it qualifies the joined table's columns.
    if froms.iter().any(|f| f.alias == table.name || f.table.last() == Some(&table.name)) {
        return None;
    }
    let qualifier = quote_ident(&table.name);
    // The declared single-column keys between `from` and `to`, as join conditions.
    let keys = |from: &Table, from_q: &str, to: &Table, to_q: &str| -> Vec<String> {
        from.foreign_keys
            .iter()
            .filter(|fk| {
                fk.columns.len() == 1 && fk.ref_schema == to.schema && fk.ref_table == to.name
            })
            .map(|fk| {
                let (c, r) = (quote_ident(&fk.columns[0]), quote_ident(&fk.ref_columns[0]));
                format!("{from_q}.{c} = {to_q}.{r}")
            })
            .collect()
    };
    let mut links = Vec::new();
    for &(f, t) in &read {
        let alias = quote_ident(&f.alias);
        let mut on = keys(table, &qualifier, t, &alias);
        on.extend(keys(t, &alias, table, &qualifier));
        match on.len() {
            0 => {}
            1 => links.extend(on.into_iter().map(|on| (f, on))),
            _ => return None, // two keys between them: which one is meant is not clear
        }
    }
    let [(item, on)] = links.as_slice() else { return None };
    let at = declared_end(sql, item)?;
    let name = Renderer::new(shown).table_name(&table.schema, &table.name);
    let join = format!(" JOIN {name} ON {on}");
    // Edits from the end so offsets hold: the `q.c` qualifiers after the join, the join, the
    // qualifiers before it.
    let spans = match &moved {
        Some((Some(q), column)) => qualifier_spans(sql, q, column),
        _ => Vec::new(),
    };
    let mut out = sql.to_string();
    for span in spans.iter().rev().filter(|s| s.start >= at) {
        out.replace_range(span.clone(), &qualifier);
    }
    out.insert_str(at, &join);
    for span in spans.iter().rev().filter(|s| s.start < at) {
        out.replace_range(span.clone(), &qualifier);
    }
    let what = match &moved {
        Some((Some(q), column)) => format!("{q}.{column} -> {qualifier}.{column}: "),
        Some((None, column)) => format!("{column}: "),
        None => String::new(),
    };
    Some((out, format!("{what}joined{join}")))
}

/// The byte offset right after the declaration of FROM item `item` in `sql` (its name, and its
/// alias when it has one), the first time it is declared after FROM, JOIN or a comma.
fn declared_end(sql: &str, item: &FromItem) -> Option<usize> {
    let name = item.table.last()?;
    for p in word_positions(sql, name) {
        let mut before = sql[..p].trim_end();
        // A schema qualifier (`schema.` with the name), possibly quoted.
        if let Some(b) = before.strip_suffix('.') {
            before = b
                .trim_end()
                .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == '"')
                .trim_end();
        }
        let lower = before.to_lowercase();
        let opens = lower.ends_with(',')
            || ["from", "join"].iter().any(|k| {
                lower.ends_with(k)
                    && !lower[..lower.len() - k.len()]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
        if !opens {
            continue;
        }
        let mut end = p + name.len();
        if sql[end..].starts_with('"') {
            end += 1;
        }
        if item.alias == *name {
            return Some(end);
        }
        let rest = &sql[end..];
        let after_ws = rest.len() - rest.trim_start().len();
        let mut next = &rest[after_ws..];
        let mut skip = after_ws;
        if next.len() > 2
            && next[..2].eq_ignore_ascii_case("as")
            && next[2..].starts_with(char::is_whitespace)
        {
            let t = next[2..].trim_start();
            skip += next.len() - t.len();
            next = t;
        }
        let alias_len = item.alias.len();
        if next.len() >= alias_len
            && next.is_char_boundary(alias_len)
            && next[..alias_len].eq_ignore_ascii_case(&item.alias)
            && !next[alias_len..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            return Some(end + skip + alias_len);
        }
    }
    None
}

/// True when `sql` joins all of `aliases` on `column` with equalities (`a.c = b.c`, written
/// either way round), so that they hold the same value in every row the join yields.
fn joined_on(sql: &str, aliases: &[&str], column: &str) -> bool {
    // Whitespace collapsed, none around `=`, lowercased (aliases are folded the same way).
    let flat = sql.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = flat.replace(" =", "=").replace("= ", "=");
    let column = column.to_lowercase();
    let equal = |a: &str, b: &str| {
        let written = format!("{a}.{column}={b}.{column}");
        flat.match_indices(&written).any(|(i, _)| {
            let before = flat[..i].chars().next_back();
            let after = flat[i + written.len()..].chars().next();
            !before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '.')
                && !after.is_some_and(|ch| ch.is_alphanumeric() || ch == '_')
        })
    };
    let mut linked = vec![aliases[0]];
    while linked.len() < aliases.len() {
        let next = aliases
            .iter()
            .find(|a| !linked.contains(a) && linked.iter().any(|l| equal(l, a) || equal(a, l)));
        match next {
            Some(a) => linked.push(a),
            None => return false,
        }
    }
    true
}

/// The table `qualifier` stands for in the statement: an alias, or a table's own name.
fn table_for<'a>(qualifier: &str, froms: &[FromItem], shown: &'a SchemaInfo) -> Option<&'a Table> {
    let q = qualifier.to_lowercase();
    froms
        .iter()
        .find(|f| f.alias == qualifier || f.alias == q)
        .and_then(|f| resolve(f, shown))
        .or_else(|| shown.tables.iter().find(|t| t.name == qualifier || t.name.to_lowercase() == q))
}

/// Lines for an undefined column `column` (qualified by `qualifier` when given).
fn column_lines(
    lines: &mut Vec<String>,
    qualifier: Option<&str>,
    column: &str,
    froms: &[FromItem],
    shown: &SchemaInfo,
    renderer: &Renderer,
) {
    let target = qualifier.and_then(|q| table_for(q, froms, shown));
    if let (Some(q), Some(t)) = (qualifier, target) {
        let name = renderer.table_name(&t.schema, &t.name);
        let what = if q.eq_ignore_ascii_case(&t.name) {
            name.clone()
        } else {
            format!("{q} is {name}; it")
        };
        lines.push(format!("{what} has only these columns: {}.", column_list(t)));
    } else if qualifier.is_none() && !froms.is_empty() {
        // Unqualified: the columns of every table in FROM.
        for f in froms {
            if let Some(t) = resolve(f, shown) {
                lines.push(format!(
                    "{} ({}) has columns: {}.",
                    renderer.table_name(&t.schema, &t.name),
                    f.alias,
                    column_list(t)
                ));
            }
        }
    }
    let col = column.to_lowercase();
    let having: Vec<String> = shown
        .tables
        .iter()
        .filter(|t| t.columns.iter().any(|c| c.name == column || c.name.to_lowercase() == col))
        .map(|t| renderer.table_name(&t.schema, &t.name))
        .collect();
    if !having.is_empty() {
        lines.push(format!(
            "The column {} is in: {} (join that table, or use its alias).",
            quote_ident(column),
            having.join(", ")
        ));
        return;
    }
    let mut labels = Vec::new();
    let mut names = Vec::new();
    for t in &shown.tables {
        for c in &t.columns {
            names.push(c.name.as_str());
            labels.push(format!(
                "{}.{}",
                renderer.table_name(&t.schema, &t.name),
                quote_ident(&c.name)
            ));
        }
    }
    let close = closest(column, names.into_iter(), &labels);
    if !close.is_empty() {
        lines.push(format!(
            "No table has a column {}; the closest columns are: {}.",
            quote_ident(column),
            close.join(", ")
        ));
    }
}

/// Lines for `missing FROM-clause entry for table "q"`.
fn missing_from_lines(
    lines: &mut Vec<String>,
    q: &str,
    froms: &[FromItem],
    shown: &SchemaInfo,
    renderer: &Renderer,
) {
    if let Some(t) =
        shown.tables.iter().find(|t| t.name == q || t.name.to_lowercase() == q.to_lowercase())
    {
        lines.push(format!(
            "{q} is used but not in FROM: join {} (columns: {}).",
            renderer.table_name(&t.schema, &t.name),
            column_list(t)
        ));
    } else {
        let declared: Vec<String> =
            froms.iter().map(|f| format!("{} ({})", f.alias, f.table.join("."))).collect();
        if declared.is_empty() {
            lines.push(format!("{q} is not declared in FROM."));
        } else {
            lines.push(format!(
                "{q} is not declared in FROM; the statement declares: {}.",
                declared.join(", ")
            ));
        }
    }
}

/// `a, b, c` of a table's column names (with types), cut at [`MAX_LISTED_COLUMNS`].
fn column_list(t: &Table) -> String {
    let mut s: Vec<String> = t
        .columns
        .iter()
        .take(MAX_LISTED_COLUMNS)
        .map(|c| format!("{} {}", quote_ident(&c.name), c.data_type))
        .collect();
    if t.columns.len() > MAX_LISTED_COLUMNS {
        s.push(format!("... {} more", t.columns.len() - MAX_LISTED_COLUMNS));
    }
    s.join(", ")
}

/// The `labels` of the `names` closest to `word` (at most [`MAX_SUGGESTIONS`], best first,
/// only reasonably close ones).
fn closest<'a>(word: &str, names: impl Iterator<Item = &'a str>, labels: &[String]) -> Vec<String> {
    let w = word.to_lowercase();
    let mut scored: Vec<(f64, usize)> = names
        .enumerate()
        .map(|(i, n)| (similarity(&w, &n.to_lowercase()), i))
        .filter(|&(s, _)| s >= 0.5)
        .collect();
    scored.sort_by(|a, b| {
        b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then(a.1.cmp(&b.1))
    });
    let mut out: Vec<String> = Vec::new();
    for (_, i) in scored {
        if !out.contains(&labels[i]) {
            out.push(labels[i].clone());
        }
        if out.len() == MAX_SUGGESTIONS {
            break;
        }
    }
    out
}

/// 0..1 similarity of two lowercase names: 1 - edit distance / longer length, raised to 0.8
/// when one contains the other (`cust_id` vs `customer_id` style abbreviations score on edit
/// distance; `id` vs `customer_id` on containment).
fn similarity(a: &str, b: &str) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let d = levenshtein(a, b) as f64;
    let longer = a.chars().count().max(b.chars().count()) as f64;
    let s = 1.0 - d / longer;
    if a.len() >= 3 && b.len() >= 3 && (a.contains(b) || b.contains(a)) {
        s.max(0.8)
    } else {
        s
    }
}

/// Edit distance (insertions, deletions, substitutions) between `a` and `b`.
fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// How PostgreSQL does what a function of another SQL dialect does (generic dialect knowledge).
fn dialect_advice(f: &str) -> Option<&'static str> {
    Some(match f {
        "datediff" | "date_diff" | "timestampdiff" => {
            "subtract instead: date2 - date1 gives days for dates; for timestamps use EXTRACT(EPOCH FROM (t2 - t1)) / 86400, or AGE(t2, t1)."
        }
        "dateadd" | "date_add" | "adddate" | "date_sub" | "subdate" | "timestampadd" => "add or subtract an interval: ts + INTERVAL '7 days', CURRENT_DATE - INTERVAL '1 month'.",
        "datepart" | "date_part" | "year" | "month" | "day" | "week" | "quarter" | "dayofweek" | "weekday" | "hour" => {
            "use EXTRACT(YEAR FROM ts) (or MONTH, DAY, DOW, QUARTER) on a date or timestamp; for unix-epoch numbers use EXTRACT(YEAR FROM TO_TIMESTAMP(n))."
        }
        "getdate" | "sysdate" | "curdate" | "today" | "current_date" => "use CURRENT_DATE or NOW().",
        "ifnull" | "isnull" | "nvl" => "use COALESCE(a, b).",
        "iif" | "if" => "use CASE WHEN cond THEN a ELSE b END.",
        "len" | "char_length_b" => "use LENGTH(s).",
        "charindex" | "instr" | "locate" => "use POSITION(sub IN s) or STRPOS(s, sub).",
        "strftime" | "date_format" | "format_date" => "use TO_CHAR(ts, 'YYYY-MM-DD') to format, DATE_TRUNC('month', ts) to round.",
        "str_to_date" | "parse_date" => "use TO_DATE(s, 'YYYY-MM-DD') or TO_TIMESTAMP(s, 'YYYY-MM-DD HH24:MI:SS').",
        "unix_timestamp" => "use EXTRACT(EPOCH FROM ts).",
        "from_unixtime" | "datetime" => "use TO_TIMESTAMP(n) for unix-epoch seconds.",
        "group_concat" | "listagg" => "use STRING_AGG(expr, ', ').",
        "substring_index" => "use SPLIT_PART(s, delimiter, n).",
        "julianday" => "subtract dates directly, or use EXTRACT(EPOCH FROM ts) / 86400.",
        "to_days" => "subtract dates directly (date2 - date1 is a number of days).",
        "extract" => "EXTRACT(field FROM x) needs a date, timestamp or interval: for unix-epoch numbers use EXTRACT(field FROM TO_TIMESTAMP(n)); for text use x::date.",
        "date_trunc" => "DATE_TRUNC('month', x) needs a timestamp or date: cast text with x::timestamp, epoch numbers with TO_TIMESTAMP(n).",
        "round" => "ROUND(x, n) needs numeric: write ROUND(x::numeric, n).",
        _ => return None,
    })
}

/// `s` cut to at most `max` characters.
pub(crate) fn cap_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::schema::{Table, TableKind};

    #[test]
    fn caps_characters() {
        assert_eq!(cap_chars("abc", 5), "abc");
        assert_eq!(cap_chars("ééééé", 2), "éé...");
    }

    fn shop() -> SchemaInfo {
        let customers = Table::new("public", "customers", TableKind::Table)
            .column("id", "integer", false)
            .column("name", "text", true);
        let orders = Table::new("public", "orders", TableKind::Table)
            .column("id", "integer", false)
            .column("customer_id", "integer", true)
            .column("total_price", "numeric", true);
        let events = Table::new("audit", "events", TableKind::Table)
            .column("id", "integer", false)
            .column("happened_at", "timestamp", true);
        let mut s = SchemaInfo::new(vec![customers, orders, events], Some("public"));
        s.normalize();
        s
    }

    fn rej(state: &str, message: &str) -> Rejection {
        Rejection { message: message.into(), sqlstate: Some(state.into()), ..Rejection::default() }
    }

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

    #[test]
    fn alias_hints_resolve_to_table_indices() {
        let s = shop();
        let h = alias_hints("SELECT c.name, o.total_price FROM customers c JOIN orders o ON o.customer_id = c.id JOIN nowhere n ON true", &s);
        let names: Vec<(String, String)> =
            h.iter().map(|(a, _, i)| (a.clone(), s.tables[*i].name.clone())).collect();
        assert_eq!(names, [("c".into(), "customers".into()), ("o".into(), "orders".into())]);
    }

    #[test]
    fn a_column_on_the_wrong_alias_is_requalified_when_one_other_table_has_it_or_joined_ones() {
        let s = shop();
        let rej = |m: &str| rej(state::UNDEFINED_COLUMN, m);
        let sql = "SELECT AVG(c.total_price), C.total_price FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.total_price > 1 AND o.status <> 'c.total_price'";
        let (fixed, note) =
            requalified(&rej("column c.total_price does not exist"), sql, &s).expect("one owner");
        assert_eq!(fixed, "SELECT AVG(o.total_price), o.total_price FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.total_price > 1 AND o.status <> 'c.total_price'");
        assert_eq!(note, "c.total_price -> o.total_price (total_price is a column of orders, o)");
        // No other table has it, two have it, or another error: nothing.
        assert_eq!(requalified(&rej("column c.nothing does not exist"), sql, &s), None);
        let two =
            "SELECT c.total_price FROM customers c JOIN orders o ON true JOIN orders o2 ON true";
        assert_eq!(requalified(&rej("column c.total_price does not exist"), two, &s), None);
        // Two that the statement joins on the column itself hold the same value: the first.
        let joined = "SELECT c.total_price FROM customers c JOIN orders o ON o.customer_id = c.id JOIN orders o2 ON o2.total_price\n = O.total_price";
        let (fixed, _) =
            requalified(&rej("column c.total_price does not exist"), joined, &s).expect("joined");
        assert!(fixed.starts_with("SELECT o.total_price FROM"), "{fixed}");
        // Joined on something else, or the equality belongs to longer names: nothing.
        for other in [
            "SELECT c.total_price FROM customers c JOIN orders o ON true JOIN orders o2 ON o2.id = o.id",
            "SELECT c.total_price FROM customers c JOIN orders o ON true JOIN orders o2 ON xo2.total_price = o.total_price",
        ] {
            assert_eq!(requalified(&rej("column c.total_price does not exist"), other, &s), None);
        }
        assert_eq!(requalified(&rej("column \"total_price\" does not exist"), sql, &s), None);
        let other = Rejection {
            sqlstate: Some("42P01".into()),
            ..rej("column c.total_price does not exist")
        };
        assert_eq!(requalified(&other, sql, &s), None);
    }

    /// customers; orders(customer_id → customers); payments(order_id → orders);
    /// transfers(sender_id, receiver_id → customers); audit.events(order_id → orders).
    fn linked_shop() -> SchemaInfo {
        use crate::nl2sql::ForeignKey;
        let fk = |c: &str, s: &str, t: &str| ForeignKey {
            columns: vec![c.into()],
            ref_schema: s.into(),
            ref_table: t.into(),
            ref_columns: vec!["id".into()],
        };
        let customers = Table::new("public", "customers", TableKind::Table)
            .column("id", "integer", false)
            .column("name", "text", true);
        let mut orders = Table::new("public", "orders", TableKind::Table)
            .column("id", "integer", false)
            .column("customer_id", "integer", true)
            .column("total_price", "numeric", true);
        orders.foreign_keys = vec![fk("customer_id", "public", "customers")];
        let mut payments = Table::new("public", "payments", TableKind::Table)
            .column("id", "integer", false)
            .column("order_id", "integer", true)
            .column("paid_on", "date", true);
        payments.foreign_keys = vec![fk("order_id", "public", "orders")];
        let mut transfers = Table::new("public", "transfers", TableKind::Table)
            .column("id", "integer", false)
            .column("sender_id", "integer", true)
            .column("receiver_id", "integer", true)
            .column("amount", "numeric", true);
        transfers.foreign_keys =
            vec![fk("sender_id", "public", "customers"), fk("receiver_id", "public", "customers")];
        let mut events = Table::new("audit", "events", TableKind::Table)
            .column("id", "integer", false)
            .column("order_id", "integer", true)
            .column("happened_at", "timestamp", true);
        events.foreign_keys = vec![fk("order_id", "public", "orders")];
        let mut s =
            SchemaInfo::new(vec![customers, orders, payments, transfers, events], Some("public"));
        s.normalize();
        s
    }

    #[test]
    fn a_table_used_but_not_read_is_joined_on_its_declared_key() {
        let s = linked_shop();
        let col = |m: &str| rej(state::UNDEFINED_COLUMN, m);
        // An unqualified column only a neighbour has: joined right after the item it references.
        let sql = "SELECT c.name, paid_on FROM orders o JOIN customers c ON c.id = o.customer_id WHERE paid_on > '2024-01-01'";
        let (fixed, note) =
            joined(&col("column \"paid_on\" does not exist"), sql, &s).expect("joined");
        assert_eq!(fixed, "SELECT c.name, paid_on FROM orders o JOIN payments ON payments.order_id = o.id JOIN customers c ON c.id = o.customer_id WHERE paid_on > '2024-01-01'");
        assert_eq!(note, "paid_on: joined JOIN payments ON payments.order_id = o.id");
        // On the wrong alias: requalified to the joined table.
        let sql = "SELECT o.paid_on FROM orders AS o WHERE o.paid_on IS NOT NULL";
        let (fixed, note) =
            joined(&col("column o.paid_on does not exist"), sql, &s).expect("joined");
        assert_eq!(fixed, "SELECT payments.paid_on FROM orders AS o JOIN payments ON payments.order_id = o.id WHERE payments.paid_on IS NOT NULL");
        assert_eq!(
            note,
            "o.paid_on -> payments.paid_on: joined JOIN payments ON payments.order_id = o.id"
        );
        // A table named but not in FROM; the referenced side joined to the referencing one.
        let sql = "SELECT count(*) FROM customers c WHERE orders.total_price > 10";
        let r = rej(state::UNDEFINED_TABLE, "missing FROM-clause entry for table \"orders\"");
        let (fixed, _) = joined(&r, sql, &s).expect("joined");
        assert_eq!(fixed, "SELECT count(*) FROM customers c JOIN orders ON orders.customer_id = c.id WHERE orders.total_price > 10");
        // Outside the default schema: the join names the schema.
        let sql = "SELECT happened_at FROM orders";
        let (fixed, _) =
            joined(&col("column \"happened_at\" does not exist"), sql, &s).expect("joined");
        assert_eq!(
            fixed,
            "SELECT happened_at FROM orders JOIN audit.events ON events.order_id = orders.id"
        );
    }

    #[test]
    fn a_table_is_joined_only_when_the_key_is_clear() {
        let s = linked_shop();
        let col = |m: &str| rej(state::UNDEFINED_COLUMN, m);
        for (sql, message) in [
            // Two keys to customers (sender, receiver).
            ("SELECT sum(amount) FROM customers c", "column \"amount\" does not exist"),
            // No key between payments and customers.
            ("SELECT paid_on FROM customers c", "column \"paid_on\" does not exist"),
            // Linked to two FROM items.
            (
                "SELECT total_price FROM customers c, payments p",
                "column \"total_price\" does not exist",
            ),
            // A FROM item has the column: requalification's case, not this one.
            (
                "SELECT c.total_price FROM customers c JOIN orders o ON o.customer_id = c.id",
                "column c.total_price does not exist",
            ),
            // Several tables have it.
            ("SELECT order_id FROM customers c", "column \"order_id\" does not exist"),
            // A CTE among the FROM items.
            (
                "WITH w AS (SELECT 1) SELECT paid_on FROM orders o, w",
                "column \"paid_on\" does not exist",
            ),
            // The bare name is taken already.
            ("SELECT paid_on FROM orders payments", "column \"paid_on\" does not exist"),
        ] {
            assert_eq!(joined(&col(message), sql, &s), None, "{sql}");
        }
        let sql = "SELECT 1 FROM customers c WHERE x.id = 1";
        let r = rej(state::UNDEFINED_TABLE, "missing FROM-clause entry for table \"x\"");
        assert_eq!(joined(&r, sql, &s), None);
    }

    #[test]
    fn column_on_the_wrong_alias() {
        let sql = "SELECT c.total_price FROM customers c JOIN orders o ON o.customer_id = c.id";
        let text = feedback(&rej("42703", "column c.total_price does not exist"), sql, &shop());
        assert!(
            text.contains("c is customers; it has only these columns: id integer, name text."),
            "{text}"
        );
        assert!(text.contains("The column total_price is in: orders"), "{text}");
    }

    #[test]
    fn unknown_column_gets_close_names() {
        let sql = "SELECT o.cust_id FROM orders o";
        let text = feedback(&rej("42703", "column o.cust_id does not exist"), sql, &shop());
        assert!(text.contains("o is orders; it has only these columns"), "{text}");
        assert!(text.contains("closest columns are: orders.customer_id"), "{text}");
        // Unqualified, quoted form.
        let text = feedback(
            &rej("42703", "column \"happend_at\" does not exist"),
            "SELECT happend_at FROM audit.events",
            &shop(),
        );
        assert!(
            text.contains("audit.events (events) has columns: id integer, happened_at timestamp."),
            "{text}"
        );
        assert!(text.contains("audit.events.happened_at"), "{text}");
    }

    #[test]
    fn tables_and_from_entries() {
        let text = feedback(
            &rej("42P01", "relation \"event\" does not exist"),
            "SELECT * FROM event",
            &shop(),
        );
        assert!(text.contains("closest tables are: audit.events"), "{text}");
        let text = feedback(
            &rej("42P01", "missing FROM-clause entry for table \"orders\""),
            "SELECT orders.id FROM customers c",
            &shop(),
        );
        assert!(
            text.contains("orders is used but not in FROM: join orders (columns: id integer"),
            "{text}"
        );
        let text = feedback(
            &rej("42P01", "missing FROM-clause entry for table \"x\""),
            "SELECT x.id FROM customers c",
            &shop(),
        );
        assert!(text.contains("the statement declares: c (customers)"), "{text}");
    }

    #[test]
    fn functions_of_other_dialects() {
        let text = feedback(
            &rej("42883", "function datediff(unknown, date, date) does not exist"),
            "SELECT 1",
            &shop(),
        );
        assert!(text.starts_with("PostgreSQL has no datediff(): subtract instead"), "{text}");
        let r = Rejection {
            facts: vec!["extract(text, date) exists".into()],
            ..rej("42883", "function pg_catalog.extract(unknown, bigint) does not exist")
        };
        let text = feedback(&r, "SELECT 1", &shop());
        assert!(
            text.contains("TO_TIMESTAMP(n)") && text.ends_with("extract(text, date) exists"),
            "{text}"
        );
        let text = feedback(
            &rej("42883", "operator does not exist: date ~~ unknown"),
            "SELECT 1",
            &shop(),
        );
        assert!(text.contains("cast with ::type"), "{text}");
        assert_eq!(
            feedback(&rej("42601", "syntax error at or near \"x\""), "SELECT 1", &shop()),
            ""
        );
        assert!(feedback(&rej("42601", "syntax error at or near \"`\""), "SELECT `a`", &shop())
            .contains("never backticks"));
    }

    #[test]
    fn an_ambiguous_column_joined_on_is_qualified() {
        let sql = "SELECT ins_type, COUNT(DISTINCT patient_id) AS patient_id FROM outcomes JOIN treatments ON outcomes.treatment_id = treatments.treatment_id JOIN patients ON treatments.patient_id = patients.patient_id GROUP BY ins_type";
        let r = rej("42702", "column reference \"patient_id\" is ambiguous");
        let (fixed, note) = disambiguated(&r, sql, &clinic()).expect("qualified");
        assert_eq!(
            fixed,
            "SELECT ins_type, COUNT(DISTINCT treatments.patient_id) AS patient_id FROM outcomes JOIN treatments ON outcomes.treatment_id = treatments.treatment_id JOIN patients ON treatments.patient_id = patients.patient_id GROUP BY ins_type"
        );
        assert_eq!(
            note,
            "patient_id -> treatments.patient_id (joined on patient_id: the values agree)"
        );
        // Not joined on it: the values may differ, nothing is rewritten.
        let unjoined = "SELECT patient_id FROM treatments JOIN patients ON treatments.doc_id = patients.patient_id";
        assert_eq!(disambiguated(&r, unjoined, &clinic()), None);
    }

    /// outcomes(treatment_id), treatments(treatment_id, patient_id, doc_id), patients(patient_id, ins_type).
    fn clinic() -> SchemaInfo {
        let table = |name: &str, cols: &[&str]| {
            let mut t = Table::new("public", name, crate::nl2sql::TableKind::Table);
            t.columns = cols
                .iter()
                .map(|c| crate::nl2sql::Column {
                    name: (*c).into(),
                    data_type: "integer".into(),
                    ..crate::nl2sql::Column::default()
                })
                .collect();
            t
        };
        SchemaInfo {
            tables: vec![
                table("outcomes", &["treatment_id"]),
                table("treatments", &["treatment_id", "patient_id", "doc_id"]),
                table("patients", &["patient_id", "ins_type"]),
            ],
            ..SchemaInfo::default()
        }
    }

    #[test]
    fn a_reserved_word_alias_is_renamed() {
        let sql = "SELECT c.make, MAX(s.price) FROM cars c JOIN inventory is ON c.id = is.car_id WHERE is.in_stock = FALSE GROUP BY c.make";
        let r = rej("42601", "syntax error at or near \"is\"");
        let (fixed, note) = dealiased(&r, sql).expect("renamed");
        assert_eq!(
            fixed,
            "SELECT c.make, MAX(s.price) FROM cars c JOIN inventory is_ ON c.id = is_.car_id WHERE is_.in_stock = FALSE GROUP BY c.make"
        );
        assert_eq!(note, "alias is -> is_ (is is a reserved word)");
        let listed = "SELECT or.id FROM customers AS c, orders or WHERE or.cid = c.id";
        assert_eq!(
            dealiased(&rej("42601", "syntax error at or near \"or\""), listed).map(|f| f.0),
            Some("SELECT or_.id FROM customers AS c, orders or_ WHERE or_.cid = c.id".into())
        );
        // Not an alias, not used as a qualifier, another error, or the new name taken: nothing.
        for (sql, msg) in [
            ("SELECT a FROM t WHERE x is", "syntax error at or near \"is\""),
            ("SELECT a FROM t is WHERE a > 1", "syntax error at or near \"is\""),
            ("SELECT is.a FROM t is", "syntax error at or near \"FROM\""),
            ("SELECT is.a, is_ FROM t is", "syntax error at or near \"is\""),
        ] {
            assert_eq!(dealiased(&rej("42601", msg), sql), None, "{sql}");
        }
        assert_eq!(dealiased(&rej("42703", "syntax error at or near \"is\""), sql), None);
    }

    #[test]
    fn similarity_is_sane() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert!(similarity("cust_id", "customer_id") >= 0.5);
        assert!(similarity("price", "customer_id") < 0.5);
    }
}
