//! SQL templates instantiated with the schema's real names: the statements small models write
//! for counts, filters, aggregates, group/order/limit, date ranges, distinct, exists and joins
//! along foreign keys. Names are written as the prompt writes them ([`Renderer::table_name`],
//! [`quote_ident`]), so drafted tokens match what the model copies from the schema.

use crate::nl2sql::schema::render::Renderer;
use crate::nl2sql::schema::tables::{Column, SchemaInfo, Table};
use crate::nl2sql::sql::ident::{is_non_unreserved_keyword, quote_ident};

/// Most instantiated statements: bounds the drafter's memory and build time on large schemas
/// (a 10-table schema needs about 1 500).
pub const MAX_STATEMENTS: usize = 20_000;

/// What a template's placeholders range over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// `{T}` table, `{A}` its alias.
    Table,
    /// + `{C}` any column.
    Column,
    /// + `{N}` a numeric measure column (not a key).
    Measure,
    /// + `{D}` a date/time column.
    Temporal,
    /// + `{X}` a text column.
    Text,
    /// + `{G}` a text column to group by and `{N}` a measure of the same table.
    GroupMeasure,
    /// A foreign key `{T1}.{F1} -> {T2}.{P2}` (aliases `{A1}`, `{A2}`).
    Join,
    /// + `{X2}` a text column of the referenced table.
    JoinText,
}

/// The templates (one statement each, or an opening to be completed with a literal).
const TEMPLATES: &[(Scope, &str)] = &[
    (Scope::Table, "SELECT COUNT(*) FROM {T};"),
    (Scope::Table, "SELECT COUNT(*) AS count FROM {T};"),
    (Scope::Table, "SELECT * FROM {T};"),
    (Scope::Table, "SELECT * FROM {T} LIMIT 10;"),
    (Scope::Table, "SELECT COUNT(*) FROM {T} {A} WHERE {A}."),
    (Scope::Column, "SELECT {C} FROM {T};"),
    (Scope::Column, "SELECT DISTINCT {C} FROM {T};"),
    (Scope::Column, "SELECT COUNT(DISTINCT {C}) FROM {T};"),
    (Scope::Column, "SELECT * FROM {T} WHERE {C} = "),
    (Scope::Column, "SELECT COUNT(*) FROM {T} WHERE {C} = "),
    (Scope::Column, "SELECT * FROM {T} WHERE {C} IS NULL;"),
    (Scope::Column, "SELECT {C}, COUNT(*) FROM {T} GROUP BY {C} ORDER BY COUNT(*) DESC;"),
    (Scope::Column, "SELECT {C}, COUNT(*) AS count FROM {T} GROUP BY {C} ORDER BY count DESC LIMIT "),
    (Scope::Column, "SELECT * FROM {T} ORDER BY {C} DESC LIMIT "),
    (Scope::Measure, "SELECT SUM({N}) FROM {T};"),
    (Scope::Measure, "SELECT AVG({N}) FROM {T};"),
    (Scope::Measure, "SELECT MAX({N}) FROM {T};"),
    (Scope::Measure, "SELECT MIN({N}) FROM {T};"),
    (Scope::Measure, "SELECT * FROM {T} WHERE {N} > "),
    (Scope::Measure, "SELECT * FROM {T} ORDER BY {N} DESC LIMIT "),
    (Scope::Temporal, "SELECT COUNT(*) FROM {T} WHERE {D} >= '"),
    (Scope::Temporal, "SELECT * FROM {T} WHERE {D} BETWEEN '"),
    (Scope::Temporal, "SELECT COUNT(*) FROM {T} WHERE EXTRACT(YEAR FROM {D}) = "),
    (Scope::Temporal, "SELECT DATE_TRUNC('month', {D}) AS month, COUNT(*) FROM {T} GROUP BY month ORDER BY month;"),
    (Scope::Temporal, "SELECT * FROM {T} ORDER BY {D} DESC LIMIT "),
    (Scope::Temporal, "SELECT COUNT(*) FROM {T} WHERE {D} >= NOW() - INTERVAL '"),
    (Scope::Text, "SELECT * FROM {T} WHERE {X} LIKE '"),
    (Scope::Text, "SELECT * FROM {T} WHERE {X} ILIKE '"),
    (Scope::GroupMeasure, "SELECT {G}, SUM({N}) FROM {T} GROUP BY {G};"),
    (Scope::GroupMeasure, "SELECT {G}, AVG({N}) FROM {T} GROUP BY {G};"),
    (Scope::Join, "SELECT * FROM {T1} JOIN {T2} ON {T1}.{F1} = {T2}.{P2};"),
    (Scope::Join, "SELECT * FROM {T1} {A1} JOIN {T2} {A2} ON {A1}.{F1} = {A2}.{P2} WHERE {A2}."),
    (Scope::Join, "SELECT COUNT(*) FROM {T1} {A1} JOIN {T2} {A2} ON {A1}.{F1} = {A2}.{P2} WHERE {A2}."),
    (Scope::Join, "SELECT * FROM {T2} {A2} JOIN {T1} {A1} ON {A2}.{P2} = {A1}.{F1} WHERE {A1}."),
    (Scope::Join, "SELECT {T2}.{P2}, COUNT(*) FROM {T2} JOIN {T1} ON {T2}.{P2} = {T1}.{F1} GROUP BY {T2}.{P2};"),
    (Scope::Join, "SELECT * FROM {T2} {A2} WHERE EXISTS (SELECT 1 FROM {T1} {A1} WHERE {A1}.{F1} = {A2}.{P2});"),
    (Scope::Join, "SELECT * FROM {T2} WHERE {P2} IN (SELECT {F1} FROM {T1});"),
    (Scope::Join, "SELECT * FROM {T2} WHERE {P2} NOT IN (SELECT {F1} FROM {T1});"),
    (Scope::Join, "SELECT * FROM {T2} {A2} LEFT JOIN {T1} {A1} ON {A2}.{P2} = {A1}.{F1} WHERE {A1}.{F1} IS NULL;"),
    (Scope::JoinText, "SELECT {A2}.{X2}, COUNT(*) FROM {T1} {A1} JOIN {T2} {A2} ON {A1}.{F1} = {A2}.{P2} GROUP BY {A2}.{X2} ORDER BY COUNT(*) DESC;"),
    (Scope::JoinText, "SELECT {T2}.{X2}, COUNT({T1}.{F1}) FROM {T2} JOIN {T1} ON {T2}.{P2} = {T1}.{F1} GROUP BY {T2}.{X2};"),
];

/// Column classes, from the type name PostgreSQL reports.
fn is_numeric(c: &Column) -> bool {
    let t = c.data_type.to_ascii_lowercase();
    ["integer", "smallint", "bigint", "numeric", "decimal", "real", "double precision", "money"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// Date and time types.
fn is_temporal(c: &Column) -> bool {
    let t = c.data_type.to_ascii_lowercase();
    t.starts_with("date") || t.starts_with("timestamp") || t.starts_with("time")
}

/// Character types.
fn is_text(c: &Column) -> bool {
    let t = c.data_type.to_ascii_lowercase();
    t.starts_with("text")
        || t.starts_with("character")
        || t.starts_with("varchar")
        || t.starts_with("char")
        || t.starts_with("citext")
}

/// True when `c` is part of `t`'s primary key or one of its foreign keys (an identifier, not a
/// measure).
fn is_key(t: &Table, c: &Column) -> bool {
    t.primary_key.contains(&c.name) || t.foreign_keys.iter().any(|fk| fk.columns.contains(&c.name))
}

/// The conventional alias of table `name`: the initials of its `_`-separated words (`order_items`
/// -> `oi`), made safe (a keyword gets a `1`).
pub fn alias(name: &str) -> String {
    let mut a: String = name
        .split('_')
        .filter_map(|w| w.chars().next())
        .filter(|c| c.is_ascii_alphabetic())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    if a.is_empty() {
        a.push('t');
    }
    if is_non_unreserved_keyword(&a) {
        a.push('1');
    }
    a
}

/// Replaces every `{KEY}` of `pattern` by its value in `vars`.
fn fill(pattern: &str, vars: &[(&str, &str)]) -> String {
    let mut out = pattern.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

/// Every template instantiated over the tables of `schema` (and its foreign keys between them),
/// at most [`MAX_STATEMENTS`].
pub fn instantiate(schema: &SchemaInfo) -> Vec<String> {
    let r = Renderer::new(schema);
    let mut out = Vec::new();
    let push = |s: String, out: &mut Vec<String>| {
        if out.len() < MAX_STATEMENTS {
            out.push(s);
        }
    };
    for (scope, pattern) in TEMPLATES {
        for t in &schema.tables {
            let tn = r.table_name(&t.schema, &t.name);
            let a = alias(&t.name);
            let base = [("T", tn.as_str()), ("A", a.as_str())];
            let cols = |pred: &dyn Fn(&Column) -> bool| -> Vec<String> {
                t.columns.iter().filter(|c| pred(c)).map(|c| quote_ident(&c.name)).collect()
            };
            match scope {
                Scope::Table => push(fill(pattern, &base), &mut out),
                Scope::Column | Scope::Measure | Scope::Temporal | Scope::Text => {
                    let (key, names) = match scope {
                        Scope::Column => ("C", cols(&|_| true)),
                        Scope::Measure => ("N", cols(&|c| is_numeric(c) && !is_key(t, c))),
                        Scope::Temporal => ("D", cols(&is_temporal)),
                        _ => ("X", cols(&|c| is_text(c) && !is_key(t, c))),
                    };
                    for c in &names {
                        push(fill(pattern, &[base[0], base[1], (key, c)]), &mut out);
                    }
                }
                Scope::GroupMeasure => {
                    for g in cols(&|c| is_text(c) && !is_key(t, c)) {
                        for n in cols(&|c| is_numeric(c) && !is_key(t, c)) {
                            push(
                                fill(pattern, &[base[0], base[1], ("G", &g), ("N", &n)]),
                                &mut out,
                            );
                        }
                    }
                }
                Scope::Join | Scope::JoinText => {
                    for fk in t
                        .foreign_keys
                        .iter()
                        .filter(|fk| fk.columns.len() == 1 && fk.ref_columns.len() == 1)
                    {
                        let Some(p) = schema.find(&fk.ref_schema, &fk.ref_table) else { continue };
                        let parent = &schema.tables[p];
                        let t2 = r.table_name(&parent.schema, &parent.name);
                        let mut a2 = alias(&parent.name);
                        if a2 == a {
                            a2.push('2');
                        }
                        let (f1, p2) =
                            (quote_ident(&fk.columns[0]), quote_ident(&fk.ref_columns[0]));
                        let vars = [
                            ("T1", tn.as_str()),
                            ("A1", a.as_str()),
                            ("F1", f1.as_str()),
                            ("T2", t2.as_str()),
                            ("A2", a2.as_str()),
                            ("P2", p2.as_str()),
                        ];
                        if *scope == Scope::Join {
                            push(fill(pattern, &vars), &mut out);
                            continue;
                        }
                        let texts: Vec<String> = parent
                            .columns
                            .iter()
                            .filter(|c| is_text(c) && !is_key(parent, c))
                            .map(|c| quote_ident(&c.name))
                            .collect();
                        for x in &texts {
                            let mut v = vars.to_vec();
                            v.push(("X2", x));
                            push(fill(pattern, &v), &mut out);
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::schema::tables::TableKind;

    /// users <- orders, in schema `shop` (default) and one table in `other`.
    fn schema() -> SchemaInfo {
        let users = Table::new("shop", "users", TableKind::Table)
            .column("user_id", "integer", false)
            .column("full_name", "text", false)
            .column("signed_up_at", "timestamp with time zone", false)
            .with_primary_key(&["user_id"]);
        let orders = Table::new("shop", "orders", TableKind::Table)
            .column("order_id", "integer", false)
            .column("user_id", "integer", false)
            .column("Total", "numeric(10,2)", true)
            .with_primary_key(&["order_id"])
            .with_foreign_key(&["user_id"], "shop", "users", &["user_id"]);
        let logs = Table::new("other", "order", TableKind::Table).column("at", "date", false);
        let mut s = SchemaInfo::new(vec![users, orders, logs], Some("shop"));
        s.normalize();
        s
    }

    #[test]
    fn about_forty_templates() {
        assert!((38..=45).contains(&TEMPLATES.len()), "{}", TEMPLATES.len());
    }

    #[test]
    fn instantiates_with_real_quoted_names() {
        let all = instantiate(&schema());
        let has = |s: &str| all.iter().any(|x| x == s);
        assert!(has("SELECT COUNT(*) FROM users;"), "{all:#?}");
        assert!(has("SELECT COUNT(*) FROM orders;"));
        // The other schema is qualified, a keyword name is quoted, as in the prompt.
        assert!(has("SELECT COUNT(*) FROM other.\"order\";"), "{all:#?}");
        assert!(has("SELECT COUNT(*) FROM other.\"order\" o WHERE o."));
        // Mixed-case columns are quoted; keys are not measures.
        assert!(has("SELECT SUM(\"Total\") FROM orders;"));
        assert!(!all.iter().any(|x| x.contains("SUM(order_id)") || x.contains("SUM(user_id)")));
        // Joins follow the foreign key, with initials as aliases.
        assert!(has("SELECT * FROM orders JOIN users ON orders.user_id = users.user_id;"));
        assert!(has("SELECT * FROM orders o JOIN users u ON o.user_id = u.user_id WHERE u."));
        assert!(has("SELECT u.full_name, COUNT(*) FROM orders o JOIN users u ON o.user_id = u.user_id GROUP BY u.full_name ORDER BY COUNT(*) DESC;"));
        // Dates get range templates; text columns LIKE.
        assert!(has("SELECT COUNT(*) FROM users WHERE signed_up_at >= '"));
        assert!(has("SELECT * FROM users WHERE full_name LIKE '"));
        // No join is invented between unrelated tables.
        assert!(!all.iter().any(|x| x.contains("JOIN other.")));
        // No placeholder is left.
        assert!(all.iter().all(|x| !x.contains('{')), "{:?}", all.iter().find(|x| x.contains('{')));
    }

    #[test]
    fn aliases_are_initials_and_never_keywords() {
        assert_eq!(alias("order_items"), "oi");
        assert_eq!(alias("users"), "u");
        assert_eq!(alias("as_of"), "ao");
        assert_eq!(alias("all_things_lovely"), "atl");
        assert_eq!(alias("a_s"), "as1", "AS is reserved");
        assert_eq!(alias("_1"), "t");
    }
}
