-- TurboInfer 0.1.0 -> 0.2.0. Run by ALTER EXTENSION turboinfer UPDATE (TO '0.2.0') once the 0.2.0
-- library and scripts are installed. Each object is the exact SQL pgrx generates for 0.2.0
-- (cargo pgrx schema pg15 --features pg15), so an updated database and a fresh
-- CREATE EXTENSION turboinfer end up with the same objects (scripts/test-install.sh checks it).
\echo Use "ALTER EXTENSION turboinfer UPDATE TO '0.2.0'" to load this file. \quit

-- 0.2.0 drops nothing from 0.1.0's SQL: the C symbols nl2sql_explain_wrapper and
-- nl2sql_explain_schemas_wrapper that the library no longer exports were never named by the
-- 0.1.0 install script (they served databases created by builds older than 0.1.0).

-- nl2sql_run(question, row_limit): the answer's rows, run read-only (src/pg/run.rs).
CREATE  FUNCTION "nl2sql_run"(
	"question" TEXT, /* Text */
	"row_limit" INT DEFAULT 100 /* i32 */
) RETURNS SETOF jsonb /* JsonbText */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_run_wrapper';

-- turboinfer_stat: counters of the nl2sql family per (database, role) (src/pg/stat.rs).
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
	"scope" TEXT,  /* String */
	"stats_reset" timestamp with time zone  /* Option < pgrx :: datum :: TimestampWithTimeZone > */
)
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_stat_wrapper';

CREATE  FUNCTION "turboinfer_stat_reset"() RETURNS timestamp with time zone /* pgrx :: datum :: TimestampWithTimeZone */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'turboinfer_stat_reset_wrapper';

-- The readable form of turboinfer_stat(): database and role names next to their OIDs (NULL
-- names for a dropped database or role, and for the overflow row).
CREATE VIEW turboinfer_stat AS
SELECT s.dbid, d.datname, s.userid, r.rolname, s.calls, s.errors, s.errors_by_sqlstate,
       s.repairs, s.cache_hits_memory, s.cache_hits_file, s.cache_misses, s.prompt_tokens,
       s.generated_tokens, s.forward_passes, s.total_ms, s.prefill_ms, s.decode_ms,
       s.validate_ms, s.scope, s.stats_reset
FROM turboinfer_stat() s
LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid
LEFT JOIN pg_catalog.pg_roles r ON r.oid = s.userid;
GRANT SELECT ON turboinfer_stat TO PUBLIC;
REVOKE EXECUTE ON FUNCTION turboinfer_stat_reset() FROM PUBLIC;

-- nl2sql_review(sql): nl2sql_check, plus the doubts about a statement that passes it
-- (src/pg/validate.rs, src/nl2sql/doubt.rs).
CREATE  FUNCTION "nl2sql_review"(
	"sql" TEXT /* super :: encoding :: Text */
) RETURNS TEXT /* Option < super :: encoding :: TextOut > */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_review_wrapper';
