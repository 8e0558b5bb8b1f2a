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

-- turboinfer_stat (added at merge)
