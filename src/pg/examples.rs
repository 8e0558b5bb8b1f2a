//! Approved examples, PostgreSQL side: the store (table `nl2sql_examples`, one per database),
//! `nl2sql_learn(question, sql)` and `nl2sql_forget(id)`, and reading the examples a caller may
//! see for `nl2sql()` (`nl2sql::examples` chooses among them and places them in the prompt).
//!
//! Privileges are PostgreSQL's own, on the table:
//!
//! * **Seeing** an example: SELECT on `nl2sql_examples` (granted to PUBLIC; revoke it to hide the
//!   store) and, through row-level security, SELECT on every relation the example's SQL reads
//!   (recorded when it was stored, in `relations`) and USAGE on their schemas. A relation
//!   dropped since hides the example: the event trigger `turboinfer_examples_dropped` sets its
//!   OID in `relations` to 0, so that no relation created later (after pg_restore, or OID
//!   wrap-around) can take its place.
//! * **Adding** one: INSERT on the table (granted to nobody: `GRANT INSERT, DELETE ON
//!   nl2sql_examples TO some_role`). `nl2sql_learn` validates the SQL as nl2sql() validates its
//!   own answers (one plain query, no side effects, every relation and column readable by the
//!   caller), runs it read-only, and stores it with the relations it reads; the INSERT policy
//!   recomputes those relations (`nl2sql_example_relations`), so a direct INSERT cannot record
//!   fewer than the SQL reads, nor a SQL the inserting role could not run.
//! * **Forgetting** one: DELETE on the table, for the examples the caller can see.
//! * UPDATE is granted to nobody: an example is forgotten and learned again (where a DBA grants
//!   it, one policy for every command checks the changed row as a new one).
//!
//! The rows are part of `pg_dump` (`pg_extension_config_dump`), like any table of the database.

use super::encoding::{spi_text, Text};
use super::errors::{raise, report, report_run};
use super::{readonly, validate};
use crate::nl2sql::examples::{self, Example};
use crate::nl2sql::{Engine, Rejection, SchemaInfo};
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;
use std::collections::BTreeSet;

/// Most stored examples read per call: ranking them is microseconds, but a store this size is a
/// log of every answer ever confirmed, not a set of approved patterns.
const MAX_READ: i64 = 10_000;

/// A rejection of an example's SQL raised as an ERROR: the server's SQLSTATE when it raised the
/// error (42P01 undefined table, 42501 insufficient privilege, 42601 syntax error, ...), else
/// 25006 (read_only_sql_transaction: it is not one plain read-only query).
fn raise_rejection(function: &str, sql: &str, r: Rejection) -> ! {
    let code = r
        .sqlstate
        .as_deref()
        .map(packed)
        .map_or(PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION, PgSqlErrorCode::from);
    raise(
        code,
        format!("{function}: the example's SQL is not a valid read-only query: {}", r.message),
        Some(format!("SQL: {sql}")),
        r.hint.or_else(|| {
            Some("An example is one SELECT (WITH ... SELECT, VALUES, TABLE) that you can run, without data-modifying parts or functions with side effects.".into())
        }),
    )
}

/// A five-character SQLSTATE packed as PostgreSQL's `MAKE_SQLSTATE` does (six bits per
/// character, the first in the lowest bits); the inverse of `validate::sqlstate`.
fn packed(state: &str) -> i32 {
    state
        .bytes()
        .take(5)
        .enumerate()
        .fold(0, |code, (i, c)| code | ((i32::from(c.wrapping_sub(b'0')) & 0x3f) << (6 * i)))
}

/// `nl2sql_example_relations(sql)`: the relations `sql` reads (sorted by OID, each once), after
/// the validation nl2sql() applies to its own answers, in the caller's session; ERROR when it
/// is not a valid read-only query for the caller. What `nl2sql_learn` records, and what the
/// INSERT policy of `nl2sql_examples` checks a new row's `relations` against.
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker)]
fn nl2sql_example_relations(sql: Text) -> Vec<pg_sys::Oid> {
    let sql = examples::statement(&sql.0);
    validate::relations_read(sql)
        .unwrap_or_else(|r| raise_rejection("nl2sql_example_relations", sql, r))
}

/// `nl2sql_learn(question, sql)`: stores an approved example and returns its id. The question is
/// cleaned as nl2sql() cleans questions (one line; ERROR 22023 when blank or too long); the SQL
/// is validated and run read-only in the caller's session (nothing it does persists; its own
/// ERROR is raised as it was), then stored with the relations it reads. Needs INSERT on
/// `nl2sql_examples`.
#[pg_extern(strict, volatile, parallel_unsafe, security_invoker)]
fn nl2sql_learn(question: Text, sql: Text) -> i64 {
    let q = Engine::clean_question(&question.0).unwrap_or_else(|e| report(e));
    let sql = examples::statement(&sql.0);
    if let Err(r) = validate::validate(sql) {
        raise_rejection("nl2sql_learn", sql, r);
    }
    readonly::run_read_only(sql, 1).unwrap_or_else(|e| report_run(e));
    let Some(table) = store() else {
        raise(
            PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
            "nl2sql_learn: this database has no nl2sql_examples table".into(),
            None,
            Some("ALTER EXTENSION turboinfer UPDATE creates it.".into()),
        )
    };
    // Text goes in as UTF-8 bytes and is converted by the server (`encoding`).
    let insert = format!(
        "INSERT INTO {table} (question, sql, relations) \
         SELECT q, s, {schema}.nl2sql_example_relations(s)::pg_catalog.regclass[] \
         FROM (SELECT pg_catalog.convert_from($1, 'UTF8') AS q, pg_catalog.convert_from($2, 'UTF8') AS s) v \
         RETURNING id",
        schema = table.schema,
        table = table.qualified,
    );
    Spi::connect_mut(|c| {
        c.update(&insert, Some(1), &[q.into_bytes().into(), sql.as_bytes().to_vec().into()])?
            .first()
            .get_one::<i64>()
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| {
        raise(
            PgSqlErrorCode::ERRCODE_INTERNAL_ERROR,
            "nl2sql_learn: the example was not stored".into(),
            None,
            None,
        )
    })
}

/// The store of this database: its quoted schema and qualified name, when the extension's table
/// exists (an extension not yet updated to a version with examples has none).
struct Store {
    schema: String,
    qualified: String,
}

/// The store, when it exists and the caller may SELECT from it (else nl2sql() shows no example).
fn store() -> Option<Store> {
    let row: Option<(Option<String>, Option<String>)> = Spi::connect(|c| {
        let t = c.select(
            "SELECT pg_catalog.quote_ident(n.nspname), \
                    pg_catalog.quote_ident(n.nspname) || '.nl2sql_examples' \
             FROM pg_catalog.pg_extension x \
             JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace \
             JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = 'nl2sql_examples' \
             WHERE x.extname = 'turboinfer' AND pg_catalog.has_table_privilege(c.oid, 'SELECT')",
            Some(1),
            &[],
        )?;
        if t.is_empty() {
            return Ok(None);
        }
        let r = t.first();
        Ok::<_, pgrx::spi::SpiError>(Some((r.get::<String>(1)?, r.get::<String>(2)?)))
    })
    .ok()
    .flatten();
    match row {
        Some((Some(schema), Some(qualified))) => Some(Store { schema, qualified }),
        _ => None,
    }
}

/// The examples the caller may see (row-level security of the store) whose relations all lie
/// in the schemas of `schema`'s tables (the schemas this call searches), in the store's order.
pub fn visible(schema: &SchemaInfo) -> Vec<Example> {
    let Some(table) = store() else { return Vec::new() };
    let searched: BTreeSet<&str> = schema.tables.iter().map(|t| t.schema.as_str()).collect();
    let query = format!(
        "SELECT e.id, pg_catalog.convert_to(e.question, 'UTF8'), pg_catalog.convert_to(e.sql, 'UTF8'), \
                pg_catalog.convert_to(pg_catalog.to_json(ARRAY( \
                    SELECT n.nspname FROM pg_catalog.unnest(e.relations) AS r(oid) \
                    JOIN pg_catalog.pg_class c ON c.oid = r.oid \
                    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace))::text, 'UTF8'), \
                pg_catalog.cardinality(e.relations) \
         FROM {} e ORDER BY e.id LIMIT {MAX_READ}",
        table.qualified
    );
    let rows = Spi::connect(|c| {
        let mut out = Vec::new();
        for row in c.select(&query, None, &[])? {
            let id = row.get::<i64>(1)?;
            let question = spi_text(row.get::<Vec<u8>>(2)?);
            let sql = spi_text(row.get::<Vec<u8>>(3)?);
            let schemas = super::encoding::spi_text_array(row.get::<Vec<u8>>(4)?);
            let count = row.get::<i32>(5)?;
            out.push((id, question, sql, schemas, count));
        }
        Ok::<_, pgrx::spi::SpiError>(out)
    })
    .unwrap_or_default();
    rows.into_iter()
        .filter_map(|(id, question, sql, schemas, count)| {
            let schemas: Vec<String> = schemas?.into_iter().flatten().collect();
            // Every relation still exists (a dropped one has no schema) and is searched.
            let all = usize::try_from(count.unwrap_or(0)).ok()? == schemas.len();
            let searched = schemas.iter().all(|s| searched.contains(s.as_str()));
            (all && searched).then_some(Example { id: id?, question: question?, sql: sql? })
        })
        .collect()
}

pgrx::extension_sql!(
    r#"
-- nl2sql_examples: approved question -> SQL pairs, shown to nl2sql() as worked examples
-- (src/pg/examples.rs). Add with nl2sql_learn(question, sql), remove with nl2sql_forget(id).
CREATE TABLE nl2sql_examples (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    question text NOT NULL CHECK (question <> ''),
    sql text NOT NULL CHECK (sql <> ''),
    relations regclass[] NOT NULL,
    added_by name NOT NULL DEFAULT CURRENT_USER,
    added_at timestamp with time zone NOT NULL DEFAULT now()
);
COMMENT ON TABLE nl2sql_examples IS 'Approved question -> SQL examples nl2sql() shows for similar questions; each visible only to roles that may read every relation in "relations".';
SELECT pg_catalog.pg_extension_config_dump('nl2sql_examples', '');
SELECT pg_catalog.pg_extension_config_dump('nl2sql_examples_id_seq', '');
ALTER TABLE nl2sql_examples ENABLE ROW LEVEL SECURITY;
-- One policy for every command: a role sees, forgets (and, if ever granted UPDATE, changes) only
-- the examples whose every relation it may read; a new or changed row records exactly the
-- relations its SQL reads, as that role.
CREATE POLICY nl2sql_examples_access ON nl2sql_examples
    USING (NOT EXISTS (
        SELECT FROM pg_catalog.unnest(relations) AS r(oid)
        LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.oid
        WHERE c.oid IS NULL
           OR NOT pg_catalog.has_table_privilege(c.oid, 'SELECT')
           OR NOT pg_catalog.has_schema_privilege(c.relnamespace, 'USAGE')))
    WITH CHECK (added_by OPERATOR(pg_catalog.=) CURRENT_USER
        AND relations::pg_catalog.oid[] OPERATOR(pg_catalog.=) @extschema@.nl2sql_example_relations(sql));
REVOKE ALL ON nl2sql_examples FROM PUBLIC;
GRANT SELECT ON nl2sql_examples TO PUBLIC;

-- A dropped relation leaves no OID behind in "relations": it becomes 0 (shown as '-'), so the
-- examples over it stay hidden from everyone, also where a new relation later takes that OID
-- (pg_dump writes a dropped relation's OID as a number, which pg_restore may give to another
-- table; OIDs also wrap around). SECURITY DEFINER (the extension's owner, a superuser): the role
-- that drops a table need not be allowed to change the store. Read first: a DROP that no
-- example names (nearly all) writes nothing and locks no row of the store.
CREATE FUNCTION nl2sql_examples_forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone oid[];
BEGIN
    SELECT pg_catalog.array_agg(d.objid) INTO gone
      FROM pg_catalog.pg_event_trigger_dropped_objects() d
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.objsubid OPERATOR(pg_catalog.=) 0;
    IF gone IS NULL OR NOT EXISTS (SELECT FROM @extschema@.nl2sql_examples e
                                    WHERE e.relations::pg_catalog.oid[] OPERATOR(pg_catalog.&&) gone) THEN
        RETURN;
    END IF;
    UPDATE @extschema@.nl2sql_examples e
       SET relations = ARRAY(SELECT (CASE WHEN r.oid OPERATOR(pg_catalog.=) ANY (gone) THEN 0 ELSE r.oid END)::pg_catalog.regclass
                               FROM pg_catalog.unnest(e.relations::pg_catalog.oid[]) WITH ORDINALITY AS r(oid, n)
                              ORDER BY r.n)
     WHERE e.relations::pg_catalog.oid[] OPERATOR(pg_catalog.&&) gone;
END
$$;
REVOKE ALL ON FUNCTION nl2sql_examples_forget_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER turboinfer_examples_dropped ON sql_drop
    EXECUTE FUNCTION nl2sql_examples_forget_dropped();

-- nl2sql_forget(id): removes an example the caller can see (needs DELETE on nl2sql_examples);
-- true when it was there.
CREATE FUNCTION nl2sql_forget(example_id bigint) RETURNS boolean
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE sql
AS $$
WITH gone AS (DELETE FROM @extschema@.nl2sql_examples e WHERE e.id OPERATOR(pg_catalog.=) example_id RETURNING 1)
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM gone
$$;
"#,
    name = "nl2sql_examples",
    requires = [nl2sql_example_relations],
);
