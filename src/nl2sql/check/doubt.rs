//! Doubts: statements that PostgreSQL accepts but that a DBA reading them would send back,
//! because what they compute can hardly be what anyone asked for. Parse analysis (in the
//! PostgreSQL glue) reports what the statement does with the catalog's columns as
//! [`QueryFacts`]; [`review`] weighs them against the keys the catalog declares and returns an
//! *advisory* [`Rejection`]: the engine then asks the model once for a better statement and
//! keeps the doubted one when the repair does no better. A doubt never makes an answer fail.
//!
//! The shapes, each about SQL, none about a particular schema:
//! - **Groups nobody can tell apart**: the top query aggregates with a GROUP BY, but none of its
//!   grouping expressions is in the result (one row per group, unlabeled). Asked for one figure,
//!   a small model often adds a GROUP BY on a key: the answer then has one row per key. When
//!   every hidden grouping expression is a key column and the top query has no HAVING, LIMIT,
//!   OFFSET, DISTINCT or window function, the doubt comes with its fix: the GROUP BY removed
//!   (the aggregates once over the same rows), used when the fixed statement passes without
//!   doubt (no model round). Otherwise the model chooses between removing it and returning it.
//! - **Arithmetic on identifiers**: SUM or AVG over a primary-key or foreign-key column (also
//!   inside arithmetic, casts, CASE results). Identifiers are labels, not quantities.
//! - **A result column repeated**: the top query returns the same expression twice (a small
//!   model writes a column again where the question asked for another one).
//! - **A column compared with itself**: `a.x = a.x` holds on every row (a join that joins nothing).
//! - **Keys of different tables compared**: `a.x = b.y` where the catalog says `x` identifies
//!   rows of one table and `y` rows of another (a single-column primary key identifies its own
//!   table's rows; a single-column foreign key those of the table it references).
//! - **A ratio of integers**: `a / b` with integer operands and a divisor that is not a constant
//!   truncates (`3 / 4` is 0), which a rate or share never means. This doubt comes with its fix
//!   ([`Rejection::fix`]): `1.0 *` written before the dividend, so the division is exact; the
//!   engine uses it when the fixed statement passes without doubt (no model round). Both fixes
//!   of one statement are made together.

use crate::nl2sql::check::rejection::Rejection;
use crate::nl2sql::schema::render::Renderer;
use crate::nl2sql::schema::tables::{SchemaInfo, Table};
use crate::nl2sql::sql::lexer::{self, Kind};

/// A column of a base table, as parse analysis resolved it (names as the catalog spells them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnRef {
    pub schema: String,
    pub table: String,
    pub column: String,
}

impl ColumnRef {
    pub fn new(schema: &str, table: &str, column: &str) -> ColumnRef {
        ColumnRef { schema: schema.into(), table: table.into(), column: column.into() }
    }
}

/// What a statement does with the catalog's columns, as far as the doubts need it. Positions
/// (`at`) are byte offsets in the statement where parse analysis located a name, when it did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryFacts {
    /// The top query aggregates, has a GROUP BY, and returns none of its grouping expressions:
    /// those expressions (the column for plain columns, else `None`).
    pub hidden_groups: Option<Vec<Option<ColumnRef>>>,
    /// Where the first hidden grouping expression is written.
    pub group_at: Option<usize>,
    /// With `hidden_groups`: the top query has no HAVING, LIMIT, OFFSET, DISTINCT or window
    /// function, so without its GROUP BY it computes its aggregates once over the same rows.
    pub ungroupable: bool,
    /// Columns whose values SUM or AVG adds up (the aggregate's name, the column, where the
    /// column is written), at any level.
    pub measured: Vec<(String, ColumnRef, Option<usize>)>,
    /// Equalities between plain columns of two range-table entries, at any level.
    pub equalities: Vec<(ColumnRef, ColumnRef)>,
    /// Columns compared with themselves (`a.x = a.x`, always true but for NULLs), at any level.
    pub self_compared: Vec<ColumnRef>,
    /// The top query's result columns whose expression an earlier column returns: the result
    /// name, and for a plain column its name and where it is written.
    pub repeated_outputs: Vec<(String, Option<(String, usize)>)>,
    /// The base tables the statement reads (schema, table), at any level, each once.
    pub tables: Vec<(String, String)>,
    /// Divisions of two integers by a divisor that is not a constant, at any level.
    pub integer_divisions: Vec<Division>,
    /// A text column compared for equality with a string constant (`c = 'value'`), at any
    /// level, each pair once: the values the verdict looks for in their columns.
    pub value_filters: Vec<(ColumnRef, String)>,
    /// Tables the top query (without DISTINCT) inner-joins, on either side of the join, and uses
    /// nowhere but in the ON condition of their own join: each row they join to is repeated once per matching row
    /// unless the columns they are joined on are unique (the verdict asks the catalog).
    pub unused_joins: Vec<UnusedJoin>,
    /// Equalities between columns of two entries of one base table at the same query level (a
    /// table joined with itself: `e.manager_id = m.id`, or `a.code = b.code`), at any level.
    /// Correlated subqueries are not counted (their columns are of another level).
    pub self_joins: Vec<(ColumnRef, ColumnRef)>,
    /// Base-table columns tested with `IS NOT NULL` at a query level without outer joins (no
    /// join there can make them NULL), at any level, each once: the verdict asks the catalog
    /// whether they are declared NOT NULL (the test then filters nothing).
    pub not_null_tests: Vec<ColumnRef>,
}

/// A table joined and used only in its join's ON condition ([`QueryFacts::unused_joins`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedJoin {
    pub schema: String,
    pub table: String,
    /// Its columns the ON condition names, each once.
    pub columns: Vec<String>,
}

/// Where an integer division is written: its dividend's first token and its `/` operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Division {
    pub dividend_at: Option<usize>,
    pub operator_at: Option<usize>,
}

/// What is written before a dividend to make its division exact: `1.0 * a / b` is numeric
/// (`*` and `/` bind equally and from the left, so it reads `(1.0 * a) / b` whatever `a` is: the
/// dividend's first token starts an operand at least as tight as `*`, or a parenthesised one).
const EXACT: &str = "1.0 * ";

/// Longest excerpt of a dividend quoted in a doubt.
const MAX_EXCERPT_CHARS: usize = 60;

/// Farthest a column's name may start after the position of its reference (`alias.` and quotes
/// before it; names are at most 63 bytes, NAMEDATALEN − 1).
const MAX_QUALIFIER_BYTES: usize = 140;

/// The span of `word` written at `at` (a qualified reference starts with its qualifier).
fn word_at(sql: &str, at: usize, word: &str) -> Option<(usize, usize)> {
    crate::nl2sql::check::statement::word_positions(sql, word)
        .into_iter()
        .find(|&p| p >= at && p - at <= MAX_QUALIFIER_BYTES)
        .map(|p| (p, p + word.len()))
}

/// Most doubts reported in one message (the first ones are enough for a repair).
const MAX_DOUBTS: usize = 3;

/// The advisory rejection for the facts of statement `sql` over the catalog `schema`, or `None`
/// when nothing is doubtful. Tables not in `schema` (not shown to the model) count as having no
/// keys. The checks run in the order of [`CHECKS`].
pub fn review(facts: &QueryFacts, schema: &SchemaInfo, sql: &str) -> Option<Rejection> {
    let mut r = Review {
        schema,
        sql,
        renderer: Renderer::new(schema),
        doubts: Vec::new(),
        facts_out: Vec::new(),
        span: None,
        edits: Vec::new(),
        fixed_what: Vec::new(),
    };
    for check in CHECKS {
        check(&mut r, facts);
    }
    let mut fix = None;
    if !r.edits.is_empty() && !r.fixed_what.is_empty() {
        // A clause removed at the end leaves the blanks before it.
        fix = apply_edits(sql, r.edits)
            .map(|fixed| Box::new((fixed.trim_end().to_string(), r.fixed_what.join("; "))));
    }
    if r.doubts.is_empty() {
        return None;
    }
    r.doubts.truncate(MAX_DOUBTS);
    Some(Rejection {
        message: format!("the query runs, but {}", r.doubts.join("; and ")),
        sqlstate: None,
        hint: None,
        facts: r.facts_out,
        advisory: true,
        span: r.span.and_then(|(a, b)| Some((u32::try_from(a).ok()?, u32::try_from(b).ok()?))),
        fix,
    })
}

/// The checks of a review, in order: each adds its doubts, the facts a repair round shows, the
/// word it is about and the engine's own fix as edits.
const CHECKS: [fn(&mut Review<'_>, &QueryFacts); 6] = [
    hidden_groups,
    repeated_outputs,
    summed_keys,
    self_compared,
    mismatched_identifiers,
    integer_divisions,
];

/// What the checks of one review gather.
struct Review<'a> {
    /// The catalog's tables.
    schema: &'a SchemaInfo,
    /// The statement.
    sql: &'a str,
    /// Names tables as the prompt does.
    renderer: Renderer<'a>,
    /// What looks wrong, one clause each.
    doubts: Vec<String>,
    /// The facts a repair round shows.
    facts_out: Vec<String>,
    /// The word a repair must not write again at the same place: the first doubt's, when located.
    span: Option<(usize, usize)>,
    /// The engine's own fix, as edits of `sql`: `(start, end, text)` replaces `start..end`.
    edits: Vec<(usize, usize, &'static str)>,
    /// What the fix does, one clause per edit kind.
    fixed_what: Vec<String>,
}

impl Review<'_> {
    /// A column as the prompt names it (`table.column`).
    fn name(&self, c: &ColumnRef) -> String {
        format!("{}.{}", self.renderer.table_name(&c.schema, &c.table), c.column)
    }
}

/// Grouped by expressions the statement does not return (one unlabeled row per group); groups
/// that are a table's rows, unlabeled, are removed (the figure over all rows).
fn hidden_groups(r: &mut Review<'_>, facts: &QueryFacts) {
    let Some(groups) = &facts.hidden_groups else { return };
    let (schema, sql) = (r.schema, r.sql);
    let listed: Vec<String> = groups.iter().flatten().map(|c| r.name(c)).collect();
    let what =
        if listed.is_empty() { "its GROUP BY expressions".to_string() } else { listed.join(", ") };
    r.doubts.push(format!(
        "it groups by {what} without returning {}: the result has one unlabeled row per group",
        if listed.len() == 1 { "it" } else { "them" }
    ));
    r.facts_out.push(
        "If the question asks for one overall figure, remove the GROUP BY; if it asks for a figure per group, return the grouping columns too."
            .to_string(),
    );
    // The GROUP keyword: written again at the same place only after a changed select list.
    let group_kw = facts.group_at.and_then(|at| {
        let p = crate::nl2sql::check::statement::word_positions(sql, "group")
            .into_iter()
            .rfind(|&p| p < at)?;
        Some((p, p + "group".len()))
    });
    r.span = r.span.or(group_kw);
    // Groups that are the rows of a table (a key), unlabeled: one figure per row of it is
    // what nobody asks for; the figure over all rows is the fix (no model round).
    let keyed = groups.iter().all(|g| g.as_ref().is_some_and(|c| identified(schema, c).is_some()));
    if let (true, true, Some((p, _))) = (facts.ungroupable, keyed, group_kw) {
        if let Some(end) = group_clause_end(sql, p) {
            r.edits.push((p, end, ""));
            r.fixed_what.push(format!("GROUP BY {} removed", listed.join(", ")));
        }
    }
}

/// The same expression returned more than once.
fn repeated_outputs(r: &mut Review<'_>, facts: &QueryFacts) {
    if facts.repeated_outputs.is_empty() {
        return;
    }
    let names: Vec<&str> = facts.repeated_outputs.iter().map(|(n, _)| n.as_str()).collect();
    r.doubts.push(format!("it returns the same expression more than once ({})", names.join(", ")));
    r.facts_out.push("Return each column the question asks for once.".to_string());
    let sql = r.sql;
    r.span = r.span.or_else(|| {
        let (column, at) = facts.repeated_outputs.iter().find_map(|(_, c)| c.as_ref())?;
        word_at(sql, *at, column)
    });
}

/// Identifiers added up (`SUM(id)`), and the quantities of the tables read instead.
fn summed_keys(r: &mut Review<'_>, facts: &QueryFacts) {
    let (schema, sql) = (r.schema, r.sql);
    let mut summed_keys = false;
    for (agg, c, at) in &facts.measured {
        if let Some(k) = key_of(schema, c) {
            let d = format!(
                "{}({}) adds up identifiers ({} is {k})",
                agg.to_uppercase(),
                r.name(c),
                c.column
            );
            if push_new(&mut r.doubts, d) {
                summed_keys = true;
                r.span = r.span.or_else(|| word_at(sql, (*at)?, &c.column));
            }
        }
    }
    if summed_keys {
        // The quantities of every table the statement reads: the right one is often in another.
        let mut measures: Vec<String> = Vec::new();
        for (sch, tab) in &facts.tables {
            if let Some(t) = table(schema, &ColumnRef::new(sch, tab, "")) {
                for col in t.columns.iter().filter(|col| is_quantity(t, col)) {
                    let m = format!(
                        "{}.{} {}",
                        r.renderer.table_name(&t.schema, &t.name),
                        col.name,
                        col.data_type
                    );
                    push_new(&mut measures, m);
                }
            }
        }
        r.facts_out.push(if measures.is_empty() {
            "Count rows with COUNT, or sum a quantity column.".to_string()
        } else {
            format!("Count rows with COUNT, or sum a quantity column: {}.", measures.join(", "))
        });
    }
}

/// A column compared with itself.
fn self_compared(r: &mut Review<'_>, facts: &QueryFacts) {
    for c in &facts.self_compared {
        let d = format!("{0} = {0} compares a column with itself (true on every row)", r.name(c));
        push_new(&mut r.doubts, d);
    }
}

/// Identifiers of different tables compared, and the foreign keys to join on instead.
fn mismatched_identifiers(r: &mut Review<'_>, facts: &QueryFacts) {
    let schema = r.schema;
    let mut mismatched: Vec<(String, String)> = Vec::new();
    for (a, b) in &facts.equalities {
        let (Some(ea), Some(eb)) = (entity(schema, a), entity(schema, b)) else { continue };
        if ea != eb {
            let d = format!(
                "{} = {} compares identifiers of different tables ({} identifies {} rows, {} identifies {} rows)",
                r.name(a),
                r.name(b),
                a.column,
                r.renderer.table_name(&ea.0, &ea.1),
                b.column,
                r.renderer.table_name(&eb.0, &eb.1),
            );
            r.doubts.push(d);
            mismatched.push((a.table.clone(), b.table.clone()));
        }
    }
    if mismatched.is_empty() {
        return;
    }
    let mut paths: Vec<String> = Vec::new();
    for (ta, tb) in &mismatched {
        for t in schema.tables.iter().filter(|t| &t.name == ta || &t.name == tb) {
            for fk in &t.foreign_keys {
                let p = format!(
                    "{}.{} references {}.{}",
                    r.renderer.table_name(&t.schema, &t.name),
                    fk.columns.join(", "),
                    r.renderer.table_name(&fk.ref_schema, &fk.ref_table),
                    fk.ref_columns.join(", ")
                );
                push_new(&mut paths, p);
            }
        }
    }
    r.facts_out.push(if paths.is_empty() {
        "Join each table on the column that references the other.".to_string()
    } else {
        format!("Join on the foreign keys: {}.", paths.join("; "))
    });
}

/// Integers divided (the fraction cut to a whole number); made exact by the engine when every
/// division is located, else no fix at all (the model round sees every doubt).
fn integer_divisions(r: &mut Review<'_>, facts: &QueryFacts) {
    if facts.integer_divisions.is_empty() {
        return;
    }
    let sql = r.sql;
    let shown: Vec<String> = facts.integer_divisions.iter().map(|d| excerpt(sql, d)).collect();
    r.doubts.push(format!(
        "{} divides integers: the fraction is cut to a whole number (3 / 4 = 0)",
        shown.join(", ")
    ));
    r.facts_out
        .push("For a rate, share or average, make the division exact: 1.0 * a / b.".to_string());
    match exact_divisions(&facts.integer_divisions, sql) {
        Some(at) => {
            r.edits.extend(at.into_iter().map(|a| (a, a, EXACT)));
            r.fixed_what.push(format!("{EXACT}written before {}", shown.join(", ")));
        }
        // One part of the fix missing: no fix (the model round sees every doubt).
        None => r.edits.clear(),
    }
}

/// The division `d` as written, from its dividend to its operator (`count(x) / …`), or "a
/// division" when parse analysis did not locate it.
fn excerpt(sql: &str, d: &Division) -> String {
    let (Some(a), Some(o)) = (d.dividend_at, d.operator_at) else {
        return "a division".to_string();
    };
    let Some(text) = sql.get(a..=o) else { return "a division".to_string() };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > MAX_EXCERPT_CHARS {
        let head: String = text.chars().take(MAX_EXCERPT_CHARS).collect();
        format!("{head}… / …")
    } else {
        format!("{text} …")
    }
}

/// Where [`EXACT`] goes to make every division exact: before each located dividend, or `None`
/// when one is not located. Positions are the server's byte offsets: they equal this string's
/// only over ASCII text (every server encoding is ASCII below 128), so a dividend after other
/// characters is not fixed.
fn exact_divisions(divisions: &[Division], sql: &str) -> Option<Vec<usize>> {
    let mut at: Vec<usize> = divisions
        .iter()
        .map(|d| d.dividend_at.filter(|&a| a < sql.len() && sql[..a].is_ascii()))
        .collect::<Option<_>>()?;
    // `a / b / c`: both divisions start at `a`; one `1.0 *` makes both exact.
    at.sort_unstable();
    at.dedup();
    Some(at)
}

/// Clause keywords that end a GROUP BY list at its own parenthesis depth.
const AFTER_GROUP_BY: &[&str] = &[
    "having",
    "order",
    "limit",
    "offset",
    "window",
    "fetch",
    "union",
    "intersect",
    "except",
    "for",
];

/// The end of the GROUP BY clause whose GROUP keyword is at byte `group` of `sql` (ASCII before
/// it, `GROUP BY` as written there): the next clause keyword at the same depth, a `)` closing
/// that depth, a `;`, or the end of the statement (trailing blanks included). Strings, quoted
/// names and comments are skipped.
fn group_clause_end(sql: &str, group: usize) -> Option<usize> {
    if !sql.get(..group)?.is_ascii() {
        return None;
    }
    let after = &sql[group + "group".len()..];
    let by = after.trim_start();
    if !by.get(..2)?.eq_ignore_ascii_case("by") || after.len() == by.len() {
        return None;
    }
    let start = sql.len() - by.len() + 2;
    let mut depth = 0usize;
    for t in lexer::lex(sql).filter(|t| t.start >= start && !t.is_comment()) {
        if t.is("(") {
            depth += 1;
        } else if t.is(")") || t.is(";") {
            if depth == 0 {
                return Some(t.start);
            }
            depth -= usize::from(t.is(")"));
        } else if depth == 0
            && t.kind == Kind::Ident
            && AFTER_GROUP_BY.iter().any(|w| t.text.eq_ignore_ascii_case(w))
        {
            return Some(t.start);
        }
    }
    Some(sql.len())
}

/// `sql` with `edits` made (`(start, end, text)`: `start..end` replaced by `text`), or `None`
/// when two overlap or one is not on character boundaries.
fn apply_edits(sql: &str, mut edits: Vec<(usize, usize, &str)>) -> Option<String> {
    edits.sort_unstable_by_key(|e| (e.0, e.1));
    if edits.windows(2).any(|w| w[0].1 > w[1].0) {
        return None;
    }
    let mut out = sql.to_string();
    for (start, end, text) in edits.into_iter().rev() {
        if !(out.is_char_boundary(start) && out.is_char_boundary(end) && start <= end) {
            return None;
        }
        out.replace_range(start..end, text);
    }
    Some(out)
}

/// Appends `item` unless `list` has it; true when appended.
fn push_new(list: &mut Vec<String>, item: String) -> bool {
    let new = !list.contains(&item);
    if new {
        list.push(item);
    }
    new
}

/// The table of `c` in `schema`.
fn table<'a>(schema: &'a SchemaInfo, c: &ColumnRef) -> Option<&'a Table> {
    schema.tables.iter().find(|t| t.schema == c.schema && t.name == c.table)
}

/// The table whose rows `c` identifies, `(schema, table, referenced)`: its own for a
/// single-column primary key, the referenced one for a single-column foreign key (a column that
/// is both counts as a reference).
fn identified(schema: &SchemaInfo, c: &ColumnRef) -> Option<(String, String, bool)> {
    let t = table(schema, c)?;
    if let Some(fk) =
        t.foreign_keys.iter().find(|fk| fk.columns.len() == 1 && fk.columns[0] == c.column)
    {
        return Some((fk.ref_schema.clone(), fk.ref_table.clone(), true));
    }
    (t.primary_key.len() == 1 && t.primary_key[0] == c.column)
        .then(|| (t.schema.clone(), t.name.clone(), false))
}

/// [`identified`] without how.
fn entity(schema: &SchemaInfo, c: &ColumnRef) -> Option<(String, String)> {
    identified(schema, c).map(|(s, t, _)| (s, t))
}

/// "the key of t" / "a reference to t" when `c` is a single-column key.
fn key_of(schema: &SchemaInfo, c: &ColumnRef) -> Option<String> {
    let (s, t, referenced) = identified(schema, c)?;
    let name = Renderer::new(schema).table_name(&s, &t);
    Some(if referenced { format!("a reference to {name}") } else { format!("the key of {name}") })
}

/// A numeric column of `t` that is no key: something SUM or AVG can mean.
fn is_quantity(t: &Table, col: &crate::nl2sql::schema::tables::Column) -> bool {
    let ty = col.data_type.to_ascii_lowercase();
    let numeric = [
        "numeric",
        "decimal",
        "real",
        "double precision",
        "integer",
        "bigint",
        "smallint",
        "money",
    ]
    .iter()
    .any(|n| ty.starts_with(n));
    let key = t.primary_key.contains(&col.name)
        || t.foreign_keys.iter().any(|fk| fk.columns.contains(&col.name));
    numeric && !key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::{Column, ForeignKey, TableKind};

    fn col(name: &str, ty: &str) -> Column {
        Column { name: name.into(), data_type: ty.into(), nullable: true, ..Column::default() }
    }

    /// customers(id pk, name, state); sales(id pk, customer_id → customers, price numeric, qty int).
    fn shop() -> SchemaInfo {
        let mut c = Table::new("public", "customers", TableKind::Table);
        c.columns = vec![col("id", "integer"), col("name", "text"), col("state", "text")];
        c.primary_key = vec!["id".into()];
        let mut s = Table::new("public", "sales", TableKind::Table);
        s.columns = vec![
            col("id", "integer"),
            col("customer_id", "integer"),
            col("price", "numeric(10,2)"),
            col("qty", "integer"),
        ];
        s.primary_key = vec!["id".into()];
        s.foreign_keys = vec![ForeignKey {
            columns: vec!["customer_id".into()],
            ref_schema: "public".into(),
            ref_table: "customers".into(),
            ref_columns: vec!["id".into()],
        }];
        SchemaInfo::new(vec![c, s], Some("public"))
    }

    fn c(t: &str, col: &str) -> ColumnRef {
        ColumnRef::new("public", t, col)
    }

    fn t(table: &str) -> (String, String) {
        ("public".into(), table.into())
    }

    #[test]
    fn nothing_doubtful_in_ordinary_queries() {
        let sql = "SELECT c.name, sum(s.price), avg(s.qty) FROM sales s JOIN customers c ON c.id = s.customer_id GROUP BY c.name";
        let facts = QueryFacts {
            measured: vec![
                ("sum".into(), c("sales", "price"), Some(18)),
                ("avg".into(), c("sales", "qty"), Some(31)),
            ],
            equalities: vec![(c("sales", "customer_id"), c("customers", "id"))],
            tables: vec![t("sales"), t("customers")],
            ..QueryFacts::default()
        };
        assert_eq!(review(&facts, &shop(), sql), None);
        assert_eq!(review(&QueryFacts::default(), &shop(), sql), None);
        // Non-key columns compared, or a column of a table the schema does not show: no opinion.
        let facts = QueryFacts {
            equalities: vec![
                (c("sales", "qty"), c("customers", "id")),
                (c("sales", "id"), c("elsewhere", "id")),
            ],
            ..QueryFacts::default()
        };
        assert_eq!(review(&facts, &shop(), sql), None);
    }

    /// `sql` grouped by `s.customer_id` (a foreign key), which its result does not show.
    fn grouped_by_customer(sql: &str, ungroupable: bool) -> QueryFacts {
        QueryFacts {
            hidden_groups: Some(vec![Some(c("sales", "customer_id"))]),
            group_at: sql.find("s.customer_id"),
            ungroupable,
            ..QueryFacts::default()
        }
    }

    #[test]
    fn hidden_groups_are_doubted_with_advice_and_the_group_keyword_located() {
        let sql = "SELECT count(*) FROM sales s\nGROUP BY s.customer_id";
        let facts = grouped_by_customer(sql, false);
        let r = review(&facts, &shop(), sql).expect("doubted");
        assert!(r.advisory);
        assert!(
            r.message.contains("groups by sales.customer_id without returning it"),
            "{}",
            r.message
        );
        assert!(r.facts[0].contains("remove the GROUP BY"));
        assert_eq!(r.span.map(|(a, b)| &sql[a as usize..b as usize]), Some("GROUP"));
        assert_eq!(r.span.map(|(a, _)| a as usize), sql.find("GROUP"));
        let facts = QueryFacts { hidden_groups: Some(vec![None]), ..QueryFacts::default() };
        let r = review(&facts, &shop(), sql).unwrap();
        assert!(r.message.contains("its GROUP BY expressions"));
        assert_eq!(r.span, None, "not located");
    }

    #[test]
    fn a_group_by_on_an_unreturned_key_is_removed_by_the_fix() {
        let sql = "SELECT count(*), sum(s.price) FROM sales s WHERE s.qty > 1\nGROUP BY s.customer_id\nORDER BY 1";
        let keyed = grouped_by_customer(sql, true);
        let r = review(&keyed, &shop(), sql).expect("doubted");
        let (fixed, note) = *r.fix.expect("fixed");
        assert_eq!(fixed, "SELECT count(*), sum(s.price) FROM sales s WHERE s.qty > 1\nORDER BY 1");
        assert_eq!(note, "GROUP BY sales.customer_id removed");
        // With integer divisions too: both edits.
        let sql2 = "SELECT count(*) / count(s.qty) FROM sales s GROUP BY s.id";
        let facts = QueryFacts {
            hidden_groups: Some(vec![Some(c("sales", "id"))]),
            group_at: sql2.find("s.id"),
            ungroupable: true,
            integer_divisions: vec![Division { dividend_at: Some(7), operator_at: Some(16) }],
            ..QueryFacts::default()
        };
        let (fixed, _) = *review(&facts, &shop(), sql2).unwrap().fix.unwrap();
        assert_eq!(fixed, "SELECT 1.0 * count(*) / count(s.qty) FROM sales s");
        // Not a key, or HAVING / LIMIT / DISTINCT / windows at the top: the model decides.
        let plain =
            QueryFacts { hidden_groups: Some(vec![Some(c("sales", "qty"))]), ..keyed.clone() };
        assert_eq!(review(&plain, &shop(), sql).unwrap().fix, None);
        let limited = QueryFacts { ungroupable: false, ..keyed };
        assert_eq!(review(&limited, &shop(), sql).unwrap().fix, None);
    }

    #[test]
    fn group_by_clauses_end_at_the_next_clause_of_their_level() {
        fn end(sql: &str) -> Option<&str> {
            let g = sql.to_ascii_lowercase().find("group").unwrap();
            group_clause_end(sql, g).map(|e| &sql[g..e])
        }
        assert_eq!(end("SELECT 1 FROM t GROUP BY a, b"), Some("GROUP BY a, b"));
        assert_eq!(end("SELECT 1 FROM t group by a HAVING x"), Some("group by a "));
        assert_eq!(
            end("SELECT 1 FROM t GROUP BY f(a, (b)), 'order' ORDER BY 1"),
            Some("GROUP BY f(a, (b)), 'order' ")
        );
        assert_eq!(
            end("SELECT 1 FROM t GROUP BY \"limit\" -- order\n LIMIT 1"),
            Some("GROUP BY \"limit\" -- order\n ")
        );
        assert_eq!(end("(SELECT 1 FROM t GROUP BY a) UNION SELECT 2"), Some("GROUP BY a"));
        assert_eq!(end("SELECT 1 FROM t GROUP BY a;"), Some("GROUP BY a"));
        assert_eq!(end("SELECT 1 FROM t GROUP BY a_order LIMIT 2"), Some("GROUP BY a_order "));
        assert_eq!(end("SELECT 1 FROM t GROUPBY a"), None);
    }

    #[test]
    fn group_by_ends_are_not_read_in_strings_or_comments() {
        fn end(sql: &str) -> Option<&str> {
            group_clause_end(sql, sql.find("GROUP").unwrap()).map(|e| &sql[..e])
        }
        let sql =
            "SELECT 1 FROM t GROUP BY a, E'\\' limit', $x$ order $x$ /* /* */ having */ LIMIT 1";
        assert_eq!(end(sql), Some(&sql[..sql.rfind("LIMIT").unwrap()]));
        assert_eq!(
            end("SELECT 1 FROM t GROUP BY order$x"),
            Some("SELECT 1 FROM t GROUP BY order$x")
        );
        assert_eq!(end("SELECT 1 FROM t GROUP BY 'é"), Some("SELECT 1 FROM t GROUP BY 'é"));
    }

    #[test]
    fn repeated_outputs_are_doubted() {
        let sql = "SELECT s.name, s.price, s.name FROM sales s";
        let facts = QueryFacts {
            repeated_outputs: vec![("name".into(), Some(("name".into(), 24)))],
            ..QueryFacts::default()
        };
        let r = review(&facts, &shop(), sql).expect("doubted");
        assert_eq!(
            r.message,
            "the query runs, but it returns the same expression more than once (name)"
        );
        assert_eq!(r.facts, vec!["Return each column the question asks for once."]);
        assert_eq!(r.span, Some((26, 30)), "the second name, after its qualifier");
    }

    #[test]
    fn sums_of_keys_are_doubted_and_quantities_suggested() {
        let sql = "SELECT c.state, SUM(s.customer_id) FROM sales s JOIN customers c ON c.id = s.customer_id GROUP BY c.state";
        let at = sql.find("s.customer_id");
        let facts = QueryFacts {
            measured: vec![
                ("sum".into(), c("sales", "customer_id"), at),
                ("sum".into(), c("sales", "customer_id"), at),
            ],
            tables: vec![t("customers"), t("sales")],
            ..QueryFacts::default()
        };
        let r = review(&facts, &shop(), sql).expect("doubted");
        assert_eq!(r.message.matches("adds up identifiers").count(), 1, "{}", r.message);
        assert!(r.message.contains("customer_id is a reference to customers"), "{}", r.message);
        assert_eq!(
            r.facts,
            vec!["Count rows with COUNT, or sum a quantity column: sales.price numeric(10,2), sales.qty integer."]
        );
        let (a, b) = r.span.map(|(a, b)| (a as usize, b as usize)).expect("located");
        assert_eq!((a, &sql[a..b]), (at.unwrap() + 2, "customer_id"));
        let facts = QueryFacts {
            measured: vec![("avg".into(), c("customers", "id"), None)],
            tables: vec![t("customers")],
            ..QueryFacts::default()
        };
        let r = review(&facts, &shop(), sql).unwrap();
        assert!(r
            .message
            .contains("AVG(customers.id) adds up identifiers (id is the key of customers)"));
        assert_eq!(r.facts, vec!["Count rows with COUNT, or sum a quantity column."]);
    }

    #[test]
    fn keys_of_different_tables_compared_are_doubted() {
        let facts = QueryFacts {
            equalities: vec![(c("sales", "id"), c("customers", "id"))],
            ..QueryFacts::default()
        };
        let r = review(&facts, &shop(), "").expect("doubted");
        assert!(
            r.message.contains("sales.id = customers.id compares identifiers of different tables"),
            "{}",
            r.message
        );
        assert_eq!(
            r.facts,
            vec!["Join on the foreign keys: sales.customer_id references customers.id."]
        );
        // A reference compared with the key it references is the join the catalog declares.
        let facts = QueryFacts {
            equalities: vec![(c("customers", "id"), c("sales", "customer_id"))],
            ..QueryFacts::default()
        };
        assert_eq!(review(&facts, &shop(), ""), None);
    }

    #[test]
    fn a_column_compared_with_itself_is_doubted() {
        let facts =
            QueryFacts { self_compared: vec![c("sales", "customer_id")], ..QueryFacts::default() };
        let r = review(&facts, &shop(), "").expect("doubted");
        assert_eq!(
            r.message,
            "the query runs, but sales.customer_id = sales.customer_id compares a column with itself (true on every row)"
        );
    }

    /// The facts of the divisions written `a / b` in `sql` at the given dividends.
    fn divisions(sql: &str, dividends: &[&str]) -> QueryFacts {
        let integer_divisions = dividends
            .iter()
            .map(|d| {
                let a = sql.find(d).expect("dividend in sql");
                Division { dividend_at: Some(a), operator_at: sql[a..].find('/').map(|o| a + o) }
            })
            .collect();
        QueryFacts { integer_divisions, ..QueryFacts::default() }
    }

    #[test]
    fn integer_ratios_are_doubted_and_made_exact() {
        let sql = "SELECT c.state, count(DISTINCT s.customer_id) / count(*) AS share FROM sales s JOIN customers c ON c.id = s.customer_id GROUP BY c.state";
        let r = review(&divisions(sql, &["count(DISTINCT"]), &shop(), sql).expect("doubted");
        assert!(r.advisory);
        assert_eq!(
            r.message,
            "the query runs, but count(DISTINCT s.customer_id) / … divides integers: the fraction is cut to a whole number (3 / 4 = 0)"
        );
        assert_eq!(
            r.facts,
            vec!["For a rate, share or average, make the division exact: 1.0 * a / b."]
        );
        let (fixed, note) = *r.fix.expect("fixed");
        assert_eq!(fixed, sql.replace("count(DISTINCT", "1.0 * count(DISTINCT"));
        assert_eq!(note, "1.0 * written before count(DISTINCT s.customer_id) / …");
        // Parenthesised dividends and chained divisions: one `1.0 *` each place, values unchanged.
        let sql = "SELECT (a - b) / n, x / y / z FROM t";
        let (fixed, _) =
            *review(&divisions(sql, &["a - b", "x / y", "x"]), &shop(), sql).unwrap().fix.unwrap();
        assert_eq!(fixed, "SELECT (1.0 * a - b) / n, 1.0 * x / y / z FROM t");
    }

    #[test]
    fn integer_ratios_are_not_fixed_where_positions_are_unsure() {
        // Not located: doubted, no fix.
        let facts = QueryFacts {
            integer_divisions: vec![Division { dividend_at: None, operator_at: None }],
            ..QueryFacts::default()
        };
        let r = review(&facts, &shop(), "SELECT a / b FROM t").unwrap();
        assert!(r.message.contains("a division divides integers"), "{}", r.message);
        assert_eq!(r.fix, None);
        // After a non-ASCII character the server's byte offsets may not be this string's.
        let sql = "SELECT 'é', a / b FROM t";
        let r = review(&divisions(sql, &["a /"]), &shop(), sql).unwrap();
        assert_eq!(r.fix, None);
        // A long dividend is quoted in part.
        let sql = format!("SELECT ({}) / b FROM t", "a + ".repeat(30) + "a");
        let r = review(&divisions(&sql, &["a + a"]), &shop(), &sql).unwrap();
        let quoted = format!("but {}… / … divides integers", "a + ".repeat(15));
        assert!(r.message.contains(&quoted), "{}", r.message);
    }
}
