-- TurboInfer 0.2.0 -> 0.3.0. Run by ALTER EXTENSION turboinfer UPDATE (TO '0.3.0') once the 0.3.0
-- library and scripts are installed. Each object is the exact SQL pgrx generates for 0.3.0
-- (cargo pgrx schema pg15 --features pg15), so an updated database and a fresh
-- CREATE EXTENSION turboinfer end up with the same objects (scripts/test-install.sh checks it).
\echo Use "ALTER EXTENSION turboinfer UPDATE TO '0.3.0'" to load this file. \quit

-- Approved examples (src/pg/examples.rs): the store, its privileges, nl2sql_learn and
-- nl2sql_forget; turboinfer_embed; nl2sql_tables; turboinfer_prewarm; the schema cache's COMMENT
-- event trigger; two columns of turboinfer_stat (the batch worker); the background preparation's
-- event trigger and request function. 0.3.0 drops nothing else of
-- 0.2.0 and changes nothing else.

CREATE  FUNCTION "nl2sql_example_relations"(
	"sql" TEXT /* Text */
) RETURNS oid[] /* Vec < pg_sys :: Oid > */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_example_relations_wrapper';

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

-- nl2sql_forget(id): removes an example the caller can see (needs DELETE on nl2sql_examples);
-- true when it was there.
CREATE FUNCTION nl2sql_forget(example_id bigint) RETURNS boolean
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE sql
AS $$
WITH gone AS (DELETE FROM @extschema@.nl2sql_examples e WHERE e.id OPERATOR(pg_catalog.=) example_id RETURNING 1)
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 FROM gone
$$;

CREATE  FUNCTION "nl2sql_learn"(
	"question" TEXT, /* Text */
	"sql" TEXT /* Text */
) RETURNS bigint /* i64 */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_learn_wrapper';

-- Sentence embeddings (src/pg/embed.rs): turboinfer_embed(text, encoder).
CREATE  FUNCTION "turboinfer_embed"(
	"text" TEXT, /* & str */
	"encoder" TEXT DEFAULT 'all-minilm-l6-v2' /* & str */
) RETURNS real[] /* Vec < f32 > */
STRICT STABLE SECURITY INVOKER PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_embed_wrapper';

-- Schema linking (src/pg/linking.rs): the tables nl2sql() would show for a question.
CREATE  FUNCTION "nl2sql_tables"(
	"question" TEXT, /* Option < Text > */
	"schemas" TEXT[] DEFAULT NULL /* Option < TextArray > */
) RETURNS TABLE (
	"position" INT,  /* i32 */
	"table_name" TEXT,  /* String */
	"similarity" real,  /* Option < f32 > */
	"chosen_by" TEXT  /* String */
)
VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_tables_wrapper';

-- Prewarm (src/pg/linking.rs): a first question's slow part done ahead.
CREATE  FUNCTION "turboinfer_prewarm"(
	"schemas" TEXT[] DEFAULT NULL /* Option < TextArray > */
) RETURNS jsonb /* Jsonb */
VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_prewarm_wrapper';

-- The schema cache (src/pg/catalog_cache.rs): what tells every backend that a comment changed.
CREATE  FUNCTION "turboinfer_catalog_changed"(
	"classid" oid, /* pg_sys :: Oid */
	"objid" oid /* pg_sys :: Oid */
) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_catalog_changed_wrapper';

-- Comments have no system cache: this trigger tells every backend's schema cache
-- (src/pg/catalog_cache.rs) that a relation's or column's comment changed. It fires for every
-- role that runs COMMENT, so it runs as the extension's owner (SECURITY DEFINER, fixed
-- search_path) and calls the one function it needs, which nobody else may call: revoking
-- EXECUTE on this extension's functions from PUBLIC can never make a COMMENT fail.
CREATE FUNCTION turboinfer_comment_changed() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT classid, objid FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP
        PERFORM @extschema@.turboinfer_catalog_changed(c.classid, c.objid);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER turboinfer_comment_changed ON ddl_command_end
    WHEN TAG IN ('COMMENT') EXECUTE FUNCTION turboinfer_comment_changed();
REVOKE EXECUTE ON FUNCTION turboinfer_comment_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION turboinfer_catalog_changed(pg_catalog.oid, pg_catalog.oid) FROM PUBLIC;

-- turboinfer_stat gains batch_calls and batch_wait_ms (src/pg/stat.rs): the calls the batch
-- worker served and their wait for its passes. A function's result columns cannot change in
-- place: the view and the function are made again (as pg_stat_statements' upgrades do), with
-- the privileges 0.2.0 gave them.
DROP VIEW turboinfer_stat;
DROP FUNCTION turboinfer_stat();
CREATE  FUNCTION "turboinfer_stat"() RETURNS TABLE (
	"dbid" oid,  /* Option < pg_sys :: Oid > */
	"userid" oid,  /* Option < pg_sys :: Oid > */
	"calls" bigint,  /* i64 */
	"errors" bigint,  /* i64 */
	"errors_by_sqlstate" jsonb,  /* Jsonb */
	"repairs" bigint,  /* i64 */
	"cache_hits_memory" bigint,  /* i64 */
	"cache_hits_file" bigint,  /* i64 */
	"cache_misses" bigint,  /* i64 */
	"prompt_tokens" bigint,  /* i64 */
	"generated_tokens" bigint,  /* i64 */
	"forward_passes" bigint,  /* i64 */
	"total_ms" double precision,  /* f64 */
	"prefill_ms" double precision,  /* f64 */
	"decode_ms" double precision,  /* f64 */
	"validate_ms" double precision,  /* f64 */
	"batch_calls" bigint,  /* i64 */
	"batch_wait_ms" double precision,  /* f64 */
	"scope" TEXT,  /* String */
	"stats_reset" timestamp with time zone  /* Option < pgrx :: datum :: TimestampWithTimeZone > */
)
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_stat_wrapper';

CREATE VIEW turboinfer_stat AS
SELECT s.dbid, d.datname, s.userid, r.rolname, s.calls, s.errors, s.errors_by_sqlstate,
       s.repairs, s.cache_hits_memory, s.cache_hits_file, s.cache_misses, s.prompt_tokens,
       s.generated_tokens, s.forward_passes, s.total_ms, s.prefill_ms, s.decode_ms,
       s.validate_ms, s.batch_calls, s.batch_wait_ms, s.scope, s.stats_reset
FROM turboinfer_stat() s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.userid;
GRANT SELECT ON turboinfer_stat TO PUBLIC;

-- The background preparation (src/pg/prepare/).
CREATE  FUNCTION "turboinfer_prepare_request"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_prepare_request_wrapper';

-- Background preparation (src/pg/prepare/): after DDL that changes what nl2sql() shows, a
-- background worker prepares the schema prefix of the role that made the change, with its
-- search_path (turboinfer.background_prepare). The function is C: it reads the caller's role
-- and search_path and resolves no name; an event trigger's function needs no EXECUTE privilege,
-- so nobody may call it directly.
CREATE FUNCTION turboinfer_schema_changed() RETURNS event_trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'turboinfer_schema_changed';
CREATE EVENT TRIGGER turboinfer_schema_changed ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE', 'DROP TABLE', 'CREATE TABLE AS', 'SELECT INTO',
        'CREATE VIEW', 'ALTER VIEW', 'DROP VIEW',
        'CREATE MATERIALIZED VIEW', 'ALTER MATERIALIZED VIEW', 'DROP MATERIALIZED VIEW',
        'CREATE FOREIGN TABLE', 'ALTER FOREIGN TABLE', 'DROP FOREIGN TABLE', 'IMPORT FOREIGN SCHEMA',
        'CREATE SCHEMA', 'ALTER SCHEMA', 'DROP SCHEMA', 'COMMENT', 'GRANT', 'REVOKE',
        'ALTER TYPE', 'DROP TYPE', 'ALTER DOMAIN', 'DROP DOMAIN', 'DROP OWNED',
        'CREATE EXTENSION', 'ALTER EXTENSION', 'DROP EXTENSION')
    EXECUTE FUNCTION turboinfer_schema_changed();
REVOKE EXECUTE ON FUNCTION turboinfer_schema_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION turboinfer_prepare_request() FROM PUBLIC;

-- Last: the updated extension's first preparation (src/pg/prepare/).
SELECT @extschema@.turboinfer_prepare_request();
