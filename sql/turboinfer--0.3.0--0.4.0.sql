-- TurboInfer 0.3.0 -> 0.4.0. Run by ALTER EXTENSION turboinfer UPDATE (TO '0.4.0') once the 0.4.0
-- library and scripts are installed. 0.4.0 builds for PostgreSQL 14 to 18 (one library per major,
-- the same SQL objects on each). Its SQL changes: nl2sql, nl2sql_run and nl2sql_explain take a
-- `follow_up` argument, and nl2sql_converse is new (below). scripts/test-install.sh checks, on each tested major, that an
-- updated database and a fresh CREATE EXTENSION turboinfer have the same objects.
\echo Use "ALTER EXTENSION turboinfer UPDATE TO '0.4.0'" to load this file. \quit

-- Follow-up questions (issue #62, src/pg/conversation.rs): nl2sql, nl2sql_run and nl2sql_explain
-- take `follow_up boolean DEFAULT false` as their last argument. A function's arguments cannot
-- change in place: each is dropped and created again as pgrx generates it for 0.4.0 (a view or
-- function that called the old one by its old signature must be recreated: none of the
-- extension's own objects does). Calls written as before mean what they meant.
DROP FUNCTION "nl2sql"(TEXT);
CREATE  FUNCTION "nl2sql"(
	"question" TEXT, /* Text */
	"follow_up" bool DEFAULT false /* bool */
) RETURNS TEXT /* TextOut */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_wrapper';

DROP FUNCTION "nl2sql_run"(TEXT, INT);
CREATE  FUNCTION "nl2sql_run"(
	"question" TEXT, /* Text */
	"row_limit" INT DEFAULT 100, /* i32 */
	"follow_up" bool DEFAULT false /* bool */
) RETURNS SETOF jsonb /* JsonbText */
STRICT VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_run_wrapper';

DROP FUNCTION "nl2sql_explain"(TEXT, TEXT[], double precision);
CREATE  FUNCTION "nl2sql_explain"(
	"question" TEXT, /* Option < Text > */
	"schemas" TEXT[] DEFAULT NULL, /* Option < TextArray > */
	"sparsity" double precision DEFAULT NULL, /* Option < f64 > */
	"follow_up" bool DEFAULT false /* Option < bool > */
) RETURNS jsonb /* Option < Jsonb > */
VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_explain_sparse_wrapper';

-- Conversations carried by the client (issue #80, src/pg/conversation.rs): a follow-up names the
-- conversation it continues with the token returned with the previous answer, so that clients
-- sharing a backend through a pooler never see each other's turns.
CREATE  FUNCTION "nl2sql_converse"(
	"question" TEXT, /* Option < Text > */
	"previous" TEXT DEFAULT NULL /* Option < Text > */
) RETURNS TABLE (
	"sql" TEXT,  /* TextOut */
	"conversation" TEXT,  /* String */
	"follow_up" jsonb  /* Jsonb */
)
VOLATILE SECURITY INVOKER PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'nl2sql_converse_wrapper';
