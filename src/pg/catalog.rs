//! Reads the schema the current role may see, through SPI.
//!
//! Tables, views and materialized views (shown as views) come from `pg_class`, with the rules
//! `information_schema.tables` applies made explicit and restricted to what the role may read:
//! USAGE on the schema, SELECT on the relation or on one of its columns. Their columns come from
//! `pg_attribute`, by relation oid, each only with SELECT on it; nullability is
//! `information_schema.columns`' (NOT NULL, or a NOT NULL domain). The `information_schema`
//! views themselves are not used: joined back to the catalog by name they cost ~1 s at 5,000
//! tables, these queries a third of it, for the same rows. Keys come from `pg_constraint`,
//! restricted to those visible tables and columns (on both sides of a foreign key):
//! `information_schema`'s constraint views only show constraints to roles with a privilege
//! *other than* SELECT, which would hide every key from a read-only role. Comments are read only
//! for those visible objects. Column statistics (`pg_stats`, for the prompt's value notes) are
//! read later, only for the tables a prompt renders (`CatalogStats`): at 5,000 tables reading
//! them all was half of the read, for a prompt that shows a few dozen.
//!
//! The caller's search path decides which schemas are shown (and which one is left unqualified),
//! so it is read first; the catalog queries themselves then run with `search_path` pinned to
//! `pg_catalog, pg_temp` (and every name schema-qualified), so objects in the caller's schemas
//! cannot shadow anything these queries use.
//!
//! What is read is kept in the backend until the catalog changes (`catalog_cache`).

use super::catalog_cache;
use super::encoding::{spi_names, spi_text, spi_text_array, NAMES_PARAM};
use super::gucs;
use crate::nl2sql::{
    Column, ColumnStats, ForeignKey, LazyStats, SchemaInfo, StatsSource, Table, TableKind,
};
use pgrx::prelude::*;
use pgrx::spi::SpiResult;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Histogram bounds kept per column: a few are enough to show a value's format.
const STATS_BOUNDS: usize = 3;

/// Schemas never shown.
const HIDDEN_SCHEMAS: [&str; 3] = ["pg_catalog", "information_schema", "pg_toast"];

/// Reads the schema: the given `schemas`, or the caller's search path when `None`. When the
/// search path shows no table the role may read, every schema the role may use is read instead,
/// and the tables outside the search path are written schema-qualified (the renderer qualifies
/// every table outside `default_schema`), so the returned SQL runs as is in the caller's session.
/// Served from the backend's schema cache (`catalog_cache`) while nothing it depends on changed
/// (shared, not copied); also returns how it was served.
pub fn read_schema_cached(schemas: Option<Vec<String>>) -> (Rc<SchemaInfo>, catalog_cache::Use) {
    let (schema, used, _) = read_schema_keyed(schemas);
    (schema, used)
}

/// [`read_schema_cached`], with what the read was keyed by: the role, the schemas as resolved
/// and the row security setting (a follow-up's conversation is dropped when it changes).
pub fn read_schema_keyed(
    schemas: Option<Vec<String>>,
) -> (Rc<SchemaInfo>, catalog_cache::Use, catalog_cache::Key) {
    let (schemas, explicit) = match schemas {
        Some(list) => (list, true),
        None => {
            // Through the read-only SPI path (`select`): `Spi::get_one` takes the read-write
            // path, which assigns a transaction id (and fails on a hot standby).
            // As UTF-8 JSON (see `encoding`): names in any database encoding.
            let path: Vec<String> = Spi::connect(|c| {
                c.select("SELECT pg_catalog.convert_to(pg_catalog.to_json(pg_catalog.current_schemas(false))::text, 'UTF8')", Some(1), &[])?.first().get_one::<Vec<u8>>()
            })
            .ok()
            .and_then(spi_text_array)
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .filter(|s| !HIDDEN_SCHEMAS.contains(&s.as_str()) && !s.starts_with("pg_temp"))
            .collect();
            (path, false)
        }
    };
    let key = catalog_cache::Key {
        // SAFETY: reads the backend's current user id.
        user: unsafe { pg_sys::GetUserId() }.to_u32(),
        schemas: schemas.clone(),
        explicit,
        row_security: row_security(),
    };
    let (schema, used) = catalog_cache::get_or_read(key.clone(), gucs::SCHEMA_CACHE.get(), || {
        read_uncached(schemas, explicit)
    });
    (schema, used, key)
}

/// The `row_security` setting (whether `pg_stats` hides tables whose row security applies).
fn row_security() -> bool {
    // SAFETY: a NUL-terminated name; the returned string is the setting's current value, read
    // before anything else can change it.
    let v = unsafe { pg_sys::GetConfigOption(c"row_security".as_ptr(), true, false) };
    v.is_null() || unsafe { std::ffi::CStr::from_ptr(v) }.to_bytes() != b"off"
}

/// [`read_schema_cached`] from the catalog: `schemas` (the first one written unqualified), falling back
/// to every readable schema when the list came from the search path and shows nothing.
fn read_uncached(schemas: Vec<String>, explicit: bool) -> SchemaInfo {
    let default_schema = schemas.first().cloned();
    let schemas: Vec<String> =
        schemas.into_iter().filter(|s| !HIDDEN_SCHEMAS.contains(&s.as_str())).collect();
    let mut info = with_pinned_search_path(|| {
        let info = query_schema(&schemas)?;
        if info.tables.is_empty() && !explicit {
            // Nothing readable on the search path: every schema the role may use.
            let all = readable_schemas()?;
            return query_schema(&all);
        }
        Ok(info)
    })
    .unwrap_or_else(|e: pgrx::spi::SpiError| {
        pgrx::error!("turboinfer: reading the schema failed: {e}");
    });
    info.default_schema = default_schema;
    info.normalize();
    info
}

/// SQL condition on the relation `c`: not a member of this extension (the `turboinfer_stat` view
/// is about TurboInfer, not the user's data; the model must not see it).
const NOT_OURS: &str = "NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d \
     JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid \
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
       AND d.objid OPERATOR(pg_catalog.=) c.oid \
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass \
       AND d.deptype OPERATOR(pg_catalog.=) 'e' \
       AND e.extname OPERATOR(pg_catalog.=) 'turboinfer')";

/// Schemas (other than the system ones) where the role has USAGE and may SELECT from at least
/// one relation, by name.
fn readable_schemas() -> SpiResult<Vec<String>> {
    Spi::connect(|client| {
        let rows = client.select(
            &format!("SELECT n.nspname::text, pg_catalog.convert_to(n.nspname::text, 'UTF8') FROM pg_catalog.pg_namespace n \
             WHERE n.nspname::text OPERATOR(pg_catalog.<>) ALL ($1) \
               AND n.nspname::text NOT LIKE 'pg\\_%' \
               AND pg_catalog.has_schema_privilege(n.oid, 'USAGE') \
               AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
                           WHERE c.relnamespace OPERATOR(pg_catalog.=) n.oid \
                             AND c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'v', 'm', 'p', 'f']::\"char\"[]) \
                             AND (pg_catalog.has_table_privilege(c.oid, 'SELECT') \
                                  OR pg_catalog.has_any_column_privilege(c.oid, 'SELECT')) \
                             AND {NOT_OURS}) \
             ORDER BY 1"),
            None,
            &[HIDDEN_SCHEMAS.iter().map(|s| s.to_string()).collect::<Vec<String>>().into()],
        )?;
        let mut out = Vec::new();
        for row in rows {
            if let Some(n) = spi_text(row.get::<Vec<u8>>(2)?) {
                out.push(n);
            }
        }
        Ok(out)
    })
}

/// Runs `f` with `search_path = pg_catalog, pg_temp`, restoring the previous value afterwards
/// (also on error: the GUC nest level is unwound with the (sub)transaction).
fn with_pinned_search_path<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: the same sequence fmgr uses for a function's SET clause.
    let level = unsafe { pg_sys::NewGUCNestLevel() };
    unsafe {
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            c"pg_catalog, pg_temp".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
    }
    let r = f();
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    r
}

/// Appends the columns of `rows` (relation oid, attnum, nullable, then name, type and comment as
/// UTF-8 bytea) to the tables they belong to (`by_oid`: table oid -> index in `tables`), in row
/// order; rows of other relations are skipped. Returns where each went: (relation oid, attnum) ->
/// index in its table's columns.
fn push_columns(
    tables: &mut [Table],
    by_oid: &HashMap<u32, usize>,
    rows: pgrx::spi::SpiTupleTable<'_>,
) -> SpiResult<HashMap<(u32, i16), usize>> {
    let mut at = HashMap::new();
    for row in rows {
        let oid: pg_sys::Oid = row.get(1)?.unwrap_or(pg_sys::InvalidOid);
        let Some(&i) = by_oid.get(&oid.to_u32()) else { continue };
        let attnum: i16 = row.get(2)?.unwrap_or(0);
        at.insert((oid.to_u32(), attnum), tables[i].columns.len());
        tables[i].columns.push(Column {
            name: spi_text(row.get(4)?).unwrap_or_default(),
            nullable: row.get(3)?.unwrap_or(true),
            data_type: spi_text(row.get(5)?).unwrap_or_default(),
            comment: spi_text(row.get(6)?),
            stats: None,
        });
    }
    Ok(at)
}

/// The catalog queries proper.
fn query_schema(schemas: &[String]) -> SpiResult<SchemaInfo> {
    // Every text value is read a second time as UTF-8 bytea (the last columns; `encoding`), and
    // the schema list is passed as UTF-8 JSON: the queries work in any database encoding. The
    // plain text columns stay for ORDER BY (same order as before in every collation).
    let names = NAMES_PARAM;
    Spi::connect(|client| {
        let args = vec![spi_names(schemas).into()];
        // Tables, views and materialized views the role may read: USAGE on the schema, SELECT
        // on the relation or on one of its columns; not another session's temporary schema (as
        // `information_schema.tables`), not this extension's own. The comment by a join (one
        // `obj_description` call per relation costs a lookup each).
        let rows = client.select(
            &format!("SELECT n.nspname::text, c.relname::text, \
                    CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE 'BASE TABLE' END, c.oid, \
                    d.description, \
                    pg_catalog.convert_to(n.nspname::text, 'UTF8'), pg_catalog.convert_to(c.relname::text, 'UTF8'), \
                    pg_catalog.convert_to(d.description, 'UTF8') \
             FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
             LEFT JOIN pg_catalog.pg_description d ON d.objoid OPERATOR(pg_catalog.=) c.oid \
                  AND d.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                  AND d.objsubid OPERATOR(pg_catalog.=) 0 \
             WHERE c.relkind OPERATOR(pg_catalog.=) ANY (ARRAY['r', 'p', 'v', 'f', 'm']::\"char\"[]) \
               AND n.nspname::text OPERATOR(pg_catalog.=) ANY ({names}) \
               AND NOT pg_catalog.pg_is_other_temp_schema(n.oid) \
               AND pg_catalog.has_schema_privilege(n.oid, 'USAGE') \
               AND (pg_catalog.has_table_privilege(c.oid, 'SELECT') \
                    OR pg_catalog.has_any_column_privilege(c.oid, 'SELECT')) \
               AND {NOT_OURS} \
             ORDER BY 1, 2"),
            None,
            &args,
        )?;
        let mut tables: Vec<Table> = Vec::new();
        let mut by_oid: HashMap<u32, usize> = HashMap::new();
        for row in rows {
            let schema = spi_text(row.get(6)?).unwrap_or_default();
            let name = spi_text(row.get(7)?).unwrap_or_default();
            let kind = match row.get::<String>(3)?.as_deref() {
                // A materialized view is queried like a view: shown as one.
                Some("VIEW") | Some("MATERIALIZED VIEW") => TableKind::View,
                _ => TableKind::Table,
            };
            let oid: pg_sys::Oid = row.get(4)?.unwrap_or(pg_sys::InvalidOid);
            let mut t = Table::new(&schema, &name, kind);
            t.comment = spi_text(row.get(8)?);
            by_oid.insert(oid.to_u32(), tables.len());
            tables.push(t);
        }
        // The relations read, as `$1` of the next queries (each matches by oid, not by name).
        let oids: Vec<i64> = by_oid.keys().map(|&o| o as i64).collect();
        let oid_args = vec![oids.into()];
        // Columns the role may read, in ordinal order, with PostgreSQL's own type formatting;
        // nullable as `information_schema.columns` says (NOT NULL, or a NOT NULL domain). SELECT
        // on the table grants every column: checked once per table (`whole`), column by column
        // only without it (a privilege check per column was two thirds of this query's time).
        let rows = client.select(
            "SELECT a.attrelid, a.attnum, \
                    NOT (a.attnotnull OR (t.typtype OPERATOR(pg_catalog.=) 'd' AND t.typnotnull)), \
                    pg_catalog.convert_to(a.attname::text, 'UTF8'), pg_catalog.convert_to(pg_catalog.format_type(a.atttypid, a.atttypmod), 'UTF8'), \
                    pg_catalog.convert_to(d.description, 'UTF8') \
             FROM (SELECT r.oid, pg_catalog.has_table_privilege(r.oid, 'SELECT') AS whole \
                   FROM pg_catalog.unnest($1::pg_catalog.int8[]::pg_catalog.oid[]) r(oid) OFFSET 0) r \
             JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) r.oid \
             JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) a.atttypid \
             LEFT JOIN pg_catalog.pg_description d ON d.objoid OPERATOR(pg_catalog.=) a.attrelid \
                  AND d.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass \
                  AND d.objsubid OPERATOR(pg_catalog.=) a.attnum \
             WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped \
               AND (r.whole OR pg_catalog.has_column_privilege(a.attrelid, a.attnum, 'SELECT')) \
             ORDER BY a.attrelid, a.attnum",
            None,
            &oid_args,
        )?;
        let at = push_columns(&mut tables, &by_oid, rows)?;
        // Primary and foreign keys of those tables, with their column numbers in key order,
        // named here from the columns just read: a key over a column the role cannot see (on
        // either side) is not shown. (Naming them in SQL, one subquery per key and side, took
        // ten times as long at 8,000 keys.)
        let rows = client.select(
            "SELECT k.conrelid, k.contype::text, k.conkey, k.confrelid, k.confkey \
             FROM pg_catalog.pg_constraint k \
             WHERE k.contype OPERATOR(pg_catalog.=) ANY (ARRAY['p', 'f']::\"char\"[]) \
               AND k.conrelid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[]::pg_catalog.oid[]) \
             ORDER BY k.conrelid, k.conname",
            None,
            &oid_args,
        )?;
        // The names of columns `nums` of relation `rel`, if the role sees every one.
        let names = |rel: u32, nums: Vec<i16>| -> Option<Vec<String>> {
            let i = *by_oid.get(&rel)?;
            let col = |n: &i16| at.get(&(rel, *n)).map(|&c| tables[i].columns[c].name.clone());
            nums.iter().map(col).collect()
        };
        let mut primary_keys: Vec<(usize, Vec<String>)> = Vec::new();
        let mut fks: Vec<(usize, Vec<String>, u32, Vec<String>)> = Vec::new();
        for row in rows {
            let rel: pg_sys::Oid = row.get(1)?.unwrap_or(pg_sys::InvalidOid);
            let Some(&i) = by_oid.get(&rel.to_u32()) else { continue };
            let nums: Vec<i16> = row.get(3)?.unwrap_or_default();
            let Some(cols) = names(rel.to_u32(), nums) else { continue };
            if row.get::<String>(2)?.as_deref() == Some("p") {
                primary_keys.push((i, cols));
                continue;
            }
            let target: pg_sys::Oid = row.get(4)?.unwrap_or(pg_sys::InvalidOid);
            let ref_nums: Vec<i16> = row.get(5)?.unwrap_or_default();
            // A foreign key to a table or a column the role cannot see is not shown.
            let Some(ref_cols) = names(target.to_u32(), ref_nums) else { continue };
            fks.push((i, cols, target.to_u32(), ref_cols));
        }
        for (i, cols) in primary_keys {
            tables[i].primary_key = cols;
        }
        for (i, cols, target, ref_cols) in fks {
            let Some(&j) = by_oid.get(&target) else { continue };
            let (ref_schema, ref_table) = (tables[j].schema.clone(), tables[j].name.clone());
            tables[i].foreign_keys.push(ForeignKey {
                columns: cols,
                ref_schema,
                ref_table,
                ref_columns: ref_cols,
            });
        }
        // Their statistics when a prompt first shows them (`CatalogStats`).
        let oids = by_oid
            .iter()
            .map(|(&o, &i)| ((tables[i].schema.clone(), tables[i].name.clone()), o))
            .collect();
        let source = CatalogStats { oids, read: RefCell::new(HashMap::new()) };
        let mut info = SchemaInfo::new(tables, None);
        info.lazy_stats = Some(LazyStats(Rc::new(source)));
        Ok(info)
    })
}

/// The planner statistics of one catalog read's relations, read when a prompt first shows them
/// (`StatsSource`: a prompt over thousands of tables shows a few dozen) and kept with the read,
/// which `catalog_cache` drops when the catalog or the statistics change (ANALYZE).
struct CatalogStats {
    /// (schema, relation) -> the relation's oid.
    oids: HashMap<(String, String), u32>,
    /// Relation oid -> its columns' statistics, for every relation read so far (also those
    /// without any).
    read: RefCell<HashMap<u32, Vec<(String, ColumnStats)>>>,
}

impl StatsSource for CatalogStats {
    fn read(&self, tables: &[&Table]) -> Vec<Vec<(String, ColumnStats)>> {
        let oids: Vec<Option<u32>> = tables
            .iter()
            .map(|t| self.oids.get(&(t.schema.clone(), t.name.clone())).copied())
            .collect();
        let mut missing: Vec<u32> = {
            let read = self.read.borrow();
            oids.iter().flatten().copied().filter(|o| !read.contains_key(o)).collect()
        };
        missing.sort_unstable();
        missing.dedup();
        if !missing.is_empty() {
            let rows = with_pinned_search_path(|| query_stats(&missing)).unwrap_or_else(
                |e: pgrx::spi::SpiError| {
                    pgrx::error!("turboinfer: reading the column statistics failed: {e}")
                },
            );
            let mut read = self.read.borrow_mut();
            for o in &missing {
                read.entry(*o).or_default();
            }
            for (o, column, stats) in rows {
                read.entry(o).or_default().push((column, stats));
            }
        }
        let read = self.read.borrow();
        oids.iter().map(|o| o.and_then(|o| read.get(&o)).cloned().unwrap_or_default()).collect()
    }
}

/// The statistics of the columns of relations `oids` the role may read: (relation oid, column
/// name, statistics).
fn query_stats(oids: &[u32]) -> SpiResult<Vec<(u32, String, ColumnStats)>> {
    Spi::connect(|client| {
        let oids: Vec<i64> = oids.iter().map(|&o| o as i64).collect();
        let oid_args = vec![oids.into()];
        // Planner statistics of the visible columns, for value and format notes. pg_stats
        // itself shows only columns the role may SELECT (and no table whose row security is
        // active for it); the privilege is checked again here so that no value of a column the
        // role cannot read ever reaches the prompt. Only text and integer columns get notes
        // (`values.rs`), so only their statistics are read (their arrays cast to text[] safely).
        // pg_stats is entered once per relation, by its name (the relation name index), and each
        // row finds its column through the (attrelid, attname) index: read for a few dozen
        // relations this costs milliseconds, where a join on the names let the planner read the
        // whole view (~0.5 s at 5,000 tables) and filter after. `OFFSET 0` keeps each step as
        // written.
        let rows = client.select(
            "SELECT r.oid, pg_catalog.convert_to(s.attname::text, 'UTF8'), s.n_distinct::float8, \
                    pg_catalog.convert_to(pg_catalog.to_json((s.most_common_vals::text)::text[])::text, 'UTF8'), \
                    pg_catalog.convert_to(pg_catalog.to_json((s.histogram_bounds::text)::text[])::text, 'UTF8') \
             FROM (SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c \
                   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace \
                   WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int8[]::pg_catalog.oid[]) OFFSET 0) r \
             CROSS JOIN LATERAL (SELECT s.attname, s.n_distinct, s.most_common_vals, s.histogram_bounds \
                                 FROM pg_catalog.pg_stats s \
                                 WHERE s.schemaname OPERATOR(pg_catalog.=) r.nspname \
                                   AND s.tablename OPERATOR(pg_catalog.=) r.relname \
                                   AND NOT s.inherited OFFSET 0) s \
             CROSS JOIN LATERAL (SELECT a.attnum, a.atttypid FROM pg_catalog.pg_attribute a \
                                 WHERE a.attrelid OPERATOR(pg_catalog.=) r.oid \
                                   AND a.attname OPERATOR(pg_catalog.=) s.attname OFFSET 0) a \
             WHERE a.atttypid OPERATOR(pg_catalog.=) ANY (ARRAY['text', 'varchar', 'bpchar', 'int2', 'int4', 'int8']::pg_catalog.regtype[]::pg_catalog.oid[]) \
               AND pg_catalog.has_column_privilege(r.oid, a.attnum, 'SELECT')",
            None,
            &oid_args,
        )?;
        let mut out = Vec::new();
        for row in rows {
            let oid: pg_sys::Oid = row.get(1)?.unwrap_or(pg_sys::InvalidOid);
            let name = spi_text(row.get(2)?).unwrap_or_default();
            let n_distinct: f64 = row.get(3)?.unwrap_or(0.0);
            let common: Vec<String> =
                spi_text_array(row.get(4)?).unwrap_or_default().into_iter().flatten().collect();
            let bounds: Vec<String> = spi_text_array(row.get(5)?)
                .unwrap_or_default()
                .into_iter()
                .flatten()
                .take(STATS_BOUNDS)
                .collect();
            // n_distinct > 0 is an absolute count; < 0 a fraction of the rows (many values).
            let distinct = (n_distinct >= 1.0 && n_distinct <= u32::MAX as f64)
                .then(|| n_distinct.round() as u32);
            out.push((oid.to_u32(), name, ColumnStats { distinct, common, bounds }));
        }
        Ok(out)
    })
}
