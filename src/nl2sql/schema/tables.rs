//! The schema model nl2sql shows the language model: tables and views with their columns, keys
//! and comments, as read from the catalog by the caller (the PostgreSQL glue reads it through
//! the catalog, so it only contains what the current role may see).

use std::borrow::Cow;
use std::rc::Rc;

pub use crate::nl2sql::schema::values::ColumnStats;

/// What kind of relation a [`Table`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TableKind {
    /// An ordinary, partitioned or foreign table.
    Table,
    /// A view (rendered as `CREATE VIEW name (columns...)`: the model may read it, not its body).
    View,
}

/// One column of a table or view.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Column {
    pub name: String,
    /// The type as PostgreSQL formats it (`integer`, `numeric(10,2)`, `character varying(20)`).
    pub data_type: String,
    pub nullable: bool,
    /// The column's comment (untrusted text; sanitised when rendered).
    pub comment: Option<String>,
    /// The planner's statistics of the column, when the role may read them (values and formats
    /// the prompt notes, see `values.rs`).
    pub stats: Option<ColumnStats>,
}

/// A foreign key: `columns` of this table reference `ref_columns` of `ref_schema.ref_table`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForeignKey {
    pub columns: Vec<String>,
    pub ref_schema: String,
    pub ref_table: String,
    pub ref_columns: Vec<String>,
}

/// A table or view as shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Table {
    pub schema: String,
    pub name: String,
    pub kind: TableKind,
    /// In ordinal position order.
    pub columns: Vec<Column>,
    /// Primary-key columns in key order (empty when there is none).
    pub primary_key: Vec<String>,
    pub foreign_keys: Vec<ForeignKey>,
    /// The table's comment (untrusted text; sanitised when rendered).
    pub comment: Option<String>,
}

impl Table {
    /// A table with no columns, keys or comment yet.
    pub fn new(schema: &str, name: &str, kind: TableKind) -> Table {
        Table {
            schema: schema.to_string(),
            name: name.to_string(),
            kind,
            columns: Vec::new(),
            primary_key: Vec::new(),
            foreign_keys: Vec::new(),
            comment: None,
        }
    }

    /// Appends a column (builder style, for callers and tests).
    pub fn column(mut self, name: &str, data_type: &str, nullable: bool) -> Table {
        self.columns.push(Column {
            name: name.to_string(),
            data_type: data_type.to_string(),
            nullable,
            ..Column::default()
        });
        self
    }

    /// Sets the primary key's columns, in key order (builder style).
    pub fn with_primary_key(mut self, columns: &[&str]) -> Table {
        self.primary_key = columns.iter().map(|c| c.to_string()).collect();
        self
    }

    /// Adds a foreign key: `columns` reference `ref_columns` of `ref_schema.ref_table`
    /// (builder style).
    pub fn with_foreign_key(
        mut self,
        columns: &[&str],
        ref_schema: &str,
        ref_table: &str,
        ref_columns: &[&str],
    ) -> Table {
        let names = |v: &[&str]| v.iter().map(|c| c.to_string()).collect();
        self.foreign_keys.push(ForeignKey {
            columns: names(columns),
            ref_schema: ref_schema.to_string(),
            ref_table: ref_table.to_string(),
            ref_columns: names(ref_columns),
        });
        self
    }

    /// `schema.name` unquoted, for reports.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// True when this table is `schema.name`.
    pub fn is(&self, schema: &str, name: &str) -> bool {
        self.schema == schema && self.name == name
    }
}

/// One approved example (`examples.rs`), as the caller may see it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Example {
    /// The store's identifier (what `nl2sql_explain` reports and `nl2sql_forget` takes).
    pub id: i64,
    /// The question, as asked.
    pub question: String,
    /// The approved statement (validated when it was stored, shown as stored).
    pub sql: String,
}

/// Every table the model may see, plus how to name them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SchemaInfo {
    pub tables: Vec<Table>,
    /// Tables in this schema are rendered without a schema prefix (the first schema of the
    /// search path, so the generated SQL resolves the same way); others are qualified.
    pub default_schema: Option<String>,
    /// The approved examples the caller may see (`examples.rs`), in the store's order; empty for
    /// a database without any. Not part of the schema prefix: the chosen ones go after it.
    pub examples: Vec<Example>,
    /// Set by whoever read these tables when it promises that every schema carrying the same
    /// stamp has exactly these tables (the PostgreSQL glue: one stamp per catalog read, never
    /// reused in the process), so work derived from the tables can be kept by stamp
    /// (`link::Linker`). `None`: no promise. [`SchemaInfo::normalize`] clears it.
    pub stamp: Option<u64>,
    /// Where the columns' statistics come from when the tables were read without them (the
    /// glue, for a big schema: see [`StatsSource`]); `None`: `Column::stats` is all there is.
    pub lazy_stats: Option<LazyStats>,
}

/// Reads the planner statistics of tables' columns when a prompt first renders them. The
/// PostgreSQL glue reads every table's name, columns and keys (schema linking ranks them all)
/// but the statistics only of the few dozen a prompt shows: at 5,000 tables, `pg_stats` for all
/// of them was half of a first call's catalog read. Called on the thread that plans the
/// prompt; an implementation keeps what it read (the same table is asked for again).
pub trait StatsSource {
    /// [table of `tables`] its columns' statistics by column name (a column without is absent).
    fn read(&self, tables: &[&Table]) -> Vec<Vec<(String, ColumnStats)>>;
}

/// A [`StatsSource`], shared by the copies of the schema it belongs to. Equal only to itself;
/// not hashed (it adds nothing the tables do not already identify).
#[derive(Clone)]
pub struct LazyStats(pub Rc<dyn StatsSource>);

impl std::fmt::Debug for LazyStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LazyStats")
    }
}

impl PartialEq for LazyStats {
    fn eq(&self, other: &LazyStats) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LazyStats {}

impl std::hash::Hash for LazyStats {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl SchemaInfo {
    /// A schema of `tables` whose unqualified names live in `default_schema`.
    pub fn new(tables: Vec<Table>, default_schema: Option<&str>) -> SchemaInfo {
        SchemaInfo {
            tables,
            default_schema: default_schema.map(str::to_string),
            examples: Vec::new(),
            stamp: None,
            lazy_stats: None,
        }
    }

    /// Has the lazy statistics of tables `indices` read in one go (the source keeps them), so
    /// that [`SchemaInfo::table_with_stats`] finds them; nothing without a source.
    pub fn prefetch_stats(&self, indices: &[usize]) {
        if let Some(LazyStats(source)) = &self.lazy_stats {
            let tables: Vec<&Table> = indices.iter().map(|&i| &self.tables[i]).collect();
            source.read(&tables);
        }
    }

    /// Table `i` with its columns' statistics: as read, or from the lazy source.
    pub fn table_with_stats(&self, i: usize) -> Cow<'_, Table> {
        let t = &self.tables[i];
        let Some(LazyStats(source)) = &self.lazy_stats else { return Cow::Borrowed(t) };
        let read = source.read(&[t]).pop().unwrap_or_default();
        if read.is_empty() {
            return Cow::Borrowed(t);
        }
        let mut t = t.clone();
        for (name, stats) in read {
            if let Some(c) = t.columns.iter_mut().find(|c| c.name == name) {
                c.stats = Some(stats);
            }
        }
        Cow::Owned(t)
    }

    /// The tables `indices` (ascending) as a schema of their own, with their statistics read
    /// (no lazy source left), the same default schema and no examples.
    pub fn subset_with_stats(&self, indices: &[usize]) -> SchemaInfo {
        self.prefetch_stats(indices);
        SchemaInfo {
            tables: indices.iter().map(|&i| self.table_with_stats(i).into_owned()).collect(),
            ..SchemaInfo::new(Vec::new(), self.default_schema.as_deref())
        }
    }

    /// Sorts tables by (schema, name) and foreign keys by their columns, so that catalog read
    /// order never changes the rendering (and therefore the fingerprint).
    pub fn normalize(&mut self) {
        self.stamp = None;
        self.tables.sort_by(|a, b| (&a.schema, &a.name).cmp(&(&b.schema, &b.name)));
        self.tables.dedup_by(|a, b| a.schema == b.schema && a.name == b.name);
        for t in &mut self.tables {
            t.foreign_keys.sort_by(|a, b| {
                (&a.columns, &a.ref_schema, &a.ref_table, &a.ref_columns).cmp(&(
                    &b.columns,
                    &b.ref_schema,
                    &b.ref_table,
                    &b.ref_columns,
                ))
            });
            t.foreign_keys.dedup();
        }
    }

    /// Whether [`SchemaInfo::normalize`] would change nothing (a schema read from the catalog
    /// is normalized once and then reused: checking is far cheaper than copying it).
    pub fn is_normalized(&self) -> bool {
        fn fk_key(f: &ForeignKey) -> (&Vec<String>, &String, &String, &Vec<String>) {
            (&f.columns, &f.ref_schema, &f.ref_table, &f.ref_columns)
        }
        self.tables.windows(2).all(|w| (&w[0].schema, &w[0].name) < (&w[1].schema, &w[1].name))
            && self
                .tables
                .iter()
                .all(|t| t.foreign_keys.windows(2).all(|w| fk_key(&w[0]) < fk_key(&w[1])))
    }

    /// Index of `schema.name` among the tables.
    pub fn find(&self, schema: &str, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t.is(schema, name))
    }

    /// Indices of the tables linked to table `i` by a foreign key in either direction, ascending.
    pub fn fk_neighbours(&self, i: usize) -> Vec<usize> {
        let t = &self.tables[i];
        let mut out: Vec<usize> = t
            .foreign_keys
            .iter()
            .filter_map(|fk| self.find(&fk.ref_schema, &fk.ref_table))
            .collect();
        for (j, other) in self.tables.iter().enumerate() {
            if other
                .foreign_keys
                .iter()
                .any(|fk| fk.ref_schema == t.schema && fk.ref_table == t.name)
            {
                out.push(j);
            }
        }
        out.retain(|&j| j != i);
        out.sort_unstable();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// users <- orders -> (nothing); products standalone.
    fn shop() -> SchemaInfo {
        let users = Table::new("public", "users", TableKind::Table).column("id", "integer", false);
        let mut orders =
            Table::new("public", "orders", TableKind::Table).column("user_id", "integer", false);
        orders.foreign_keys.push(ForeignKey {
            columns: vec!["user_id".into()],
            ref_schema: "public".into(),
            ref_table: "users".into(),
            ref_columns: vec!["id".into()],
        });
        let products = Table::new("public", "products", TableKind::Table);
        SchemaInfo::new(vec![users, products, orders], Some("public"))
    }

    #[test]
    fn normalize_sorts_and_dedups() {
        let mut s = shop();
        let dup = s.tables[0].clone();
        s.tables.push(dup);
        s.normalize();
        let names: Vec<_> = s.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["orders", "products", "users"]);
    }

    #[test]
    fn is_normalized_exactly_when_normalize_changes_nothing() {
        let mut s = shop();
        assert!(!s.is_normalized());
        s.normalize();
        assert!(s.is_normalized());
        // A duplicate, or foreign keys out of order, is not normalized.
        let mut d = s.clone();
        d.tables.push(d.tables[2].clone());
        assert!(!d.is_normalized());
        let mut f = s.clone();
        let fk = f.tables[0].foreign_keys[0].clone();
        f.tables[0].foreign_keys.push(ForeignKey { columns: vec!["a".into()], ..fk });
        assert!(!f.is_normalized());
        f.normalize();
        assert!(f.is_normalized());
    }

    #[test]
    fn neighbours_in_both_directions() {
        let mut s = shop();
        s.normalize();
        let (o, p, u) = (
            s.find("public", "orders").unwrap(),
            s.find("public", "products").unwrap(),
            s.find("public", "users").unwrap(),
        );
        assert_eq!(s.fk_neighbours(o), vec![u]);
        assert_eq!(s.fk_neighbours(u), vec![o]);
        assert!(s.fk_neighbours(p).is_empty());
        assert_eq!(s.find("other", "users"), None);
    }
}
