//! Catalog-aware repair feedback (the repair round's facts for the model): when the server
//! rejects a generated statement, what a DBA would look up next, in a few lines the model reads
//! before it tries again.
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

use crate::nl2sql::check::rejection::{
    function_name, quoted_after, state, undefined_column, Rejection,
};
use crate::nl2sql::check::statement::{from_items, resolve, table_for, FromItem};
use crate::nl2sql::plan::prompt::MAX_FEEDBACK_CHARS;
use crate::nl2sql::schema::render::Renderer;
use crate::nl2sql::schema::tables::{SchemaInfo, Table};
use crate::nl2sql::sql::ident::quote_ident;

/// Most column names listed for one table (a wide table is cut, with a count of the rest).
const MAX_LISTED_COLUMNS: usize = 40;
/// Most "closest name" suggestions.
const MAX_SUGGESTIONS: usize = 5;

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
pub(crate) mod tests {
    use super::*;
    use crate::nl2sql::schema::tables::{Table, TableKind};

    #[test]
    fn caps_characters() {
        assert_eq!(cap_chars("abc", 5), "abc");
        assert_eq!(cap_chars("ééééé", 2), "éé...");
    }

    pub(crate) fn shop() -> SchemaInfo {
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

    pub(crate) fn rej(state: &str, message: &str) -> Rejection {
        Rejection { message: message.into(), sqlstate: Some(state.into()), ..Rejection::default() }
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
    fn similarity_is_sane() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert!(similarity("cust_id", "customer_id") >= 0.5);
        assert!(similarity("price", "customer_id") < 0.5);
    }
}
