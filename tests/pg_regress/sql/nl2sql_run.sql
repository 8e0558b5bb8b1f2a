-- nl2sql_run(question, row_limit): the SQL of nl2sql(question), run read-only with the caller's
-- privileges in a subtransaction that is always rolled back; each row as one jsonb object.
-- Qwen2.5-Coder 0.5B (the smallest test model whose answers on this schema are right).
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'qwen2.5-coder-0.5b';

-- The SQL surface: STRICT, VOLATILE, PARALLEL UNSAFE, SECURITY INVOKER, SETOF jsonb.
SELECT p.proname, pg_get_function_arguments(p.oid) AS args, p.provolatile, p.proisstrict,
       p.proparallel, p.prosecdef, pg_get_function_result(p.oid) AS result
FROM pg_proc p WHERE p.proname = 'nl2sql_run';

CREATE SCHEMA shop;
SET search_path = shop, public;
CREATE TABLE countries (country_code char(2) PRIMARY KEY, name text NOT NULL UNIQUE, continent text NOT NULL);
CREATE TABLE users (user_id integer PRIMARY KEY, email text NOT NULL UNIQUE, full_name text NOT NULL,
                    country_code char(2) NOT NULL REFERENCES countries, signed_up_at timestamptz NOT NULL);
INSERT INTO countries VALUES ('FR', 'France', 'Europe'), ('JP', 'Japan', 'Asia');
INSERT INTO users SELECT i, 'u' || i || '@example.com', 'User ' || i, CASE WHEN i % 3 = 0 THEN 'JP' ELSE 'FR' END,
                         timestamptz '2024-01-01' + i * interval '1 day'
FROM generate_series(1, 37) i;

-- Rows come back as jsonb objects, column names as keys, values typed as to_jsonb types them.
SELECT nl2sql('how many users?');
SELECT r, jsonb_typeof(r->'count') AS count_type FROM nl2sql_run('how many users?') r;
SELECT * FROM nl2sql_run('list the countries');
SELECT r->>'name' AS name FROM nl2sql_run('list the countries') r ORDER BY 1;
-- Columns with the same name are told apart (country_code, country_code_2).
SELECT * FROM nl2sql_run('select all columns from users joined with countries', 1);
-- No matching row: no rows, no NOTICE.
SELECT count(*) AS rows FROM nl2sql_run('which users live in Germany?');

-- row_limit: the first rows, and a NOTICE saying the result was cut and how to get more.
SELECT * FROM nl2sql_run('list the email of every user', 5);
-- Exactly as many rows as the limit: no NOTICE.
SELECT count(*) AS rows FROM nl2sql_run('list the email of every user', 37);
-- Bad limits: ERROR 22023 before anything is generated; NULL arguments: no rows (STRICT).
SELECT * FROM nl2sql_run('how many users?', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nl2sql_run('how many users?', -1);
SELECT * FROM nl2sql_run('how many users?', 10001);
SELECT count(*) AS rows FROM nl2sql_run('how many users?', NULL);
SELECT count(*) AS rows FROM nl2sql_run(NULL);
-- A question nl2sql() refuses is the same ERROR here.
SELECT * FROM nl2sql_run('  ');

-- Asked to delete, the model writes a query; nothing is deleted, and the transaction the call
-- runs in stays read-write afterwards.
SELECT nl2sql('delete all users from France');
BEGIN;
SELECT count(*) AS rows FROM nl2sql_run('delete all users from France');
SHOW transaction_read_only;
SELECT count(*) AS users FROM users;
COMMIT;

-- A write hidden where validation cannot see it (a view calling a volatile function): the
-- statement runs with transaction_read_only on, so PostgreSQL refuses the INSERT (25006), and
-- nothing it did persists (the setting it changed is rolled back as well).
CREATE SCHEMA audit;
CREATE TABLE audit.log (at timestamptz);
CREATE FUNCTION audit.counted() RETURNS bigint LANGUAGE plpgsql VOLATILE AS
$$BEGIN PERFORM set_config('nl2sql_run.touched', 'yes', false); INSERT INTO audit.log VALUES (now()); RETURN 42; END$$;
CREATE VIEW audit.totals AS SELECT audit.counted() AS total;
SET search_path = audit, public;
SELECT nl2sql('what is the total in totals?');
\set VERBOSITY terse
SELECT * FROM nl2sql_run('what is the total in totals?');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
SELECT count(*) AS logged FROM audit.log;
SELECT coalesce(current_setting('nl2sql_run.touched', true), '') AS touched;

-- Always rolled back, also when the query succeeds: a setting changed by a function the query
-- calls (set_config is allowed read-only) is not kept.
CREATE SCHEMA cfg;
CREATE FUNCTION cfg.flagged() RETURNS text LANGUAGE plpgsql VOLATILE AS
$$BEGIN PERFORM set_config('nl2sql_run.flag', 'set', false); RETURN 'ok'; END$$;
CREATE VIEW cfg.health AS SELECT cfg.flagged() AS status;
SET search_path = cfg, public;
SELECT * FROM nl2sql_run('what is the status in health?');
SELECT coalesce(current_setting('nl2sql_run.flag', true), '') AS flag;

-- The caller's privileges: a role that may read a view whose owner may not read the table
-- under it gets PostgreSQL's permission error (42501) when the statement runs, and no rows.
CREATE SCHEMA priv;
CREATE TABLE priv.secrets (id integer, payload text);
INSERT INTO priv.secrets VALUES (1, 'launch codes');
CREATE ROLE nl2sql_run_owner;
CREATE ROLE nl2sql_run_reader;
GRANT USAGE ON SCHEMA priv TO nl2sql_run_owner, nl2sql_run_reader;
CREATE VIEW priv.payloads AS SELECT id, payload FROM priv.secrets;
ALTER VIEW priv.payloads OWNER TO nl2sql_run_owner;
GRANT SELECT ON priv.payloads TO nl2sql_run_reader;
SET search_path = priv, public;
SET ROLE nl2sql_run_reader;
SELECT nl2sql('list the payloads');
\set VERBOSITY terse
SELECT * FROM nl2sql_run('list the payloads');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
-- The table itself, which the role may not SELECT, is not even shown to the model.
SELECT e->'tables_shown' AS shown FROM nl2sql_explain('list the secrets') e;
RESET ROLE;

-- statement_timeout covers generation and execution (one statement timer): a query that would
-- run for minutes is cancelled (57014) and the session keeps working.
CREATE SCHEMA slow;
CREATE VIEW slow.pairs AS SELECT a.g AS a, b.g AS b FROM generate_series(1, 100000) AS a(g), generate_series(1, 100000) AS b(g);
SET search_path = slow, public;
SELECT nl2sql('how many pairs are there?');
SET statement_timeout = '20s';
-- Generation alone fits in the timeout...
SELECT nl2sql('how many pairs are there?') IS NOT NULL AS generated;
-- ...running the query does not.
\set VERBOSITY terse
SELECT * FROM nl2sql_run('how many pairs are there?');
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY default
RESET statement_timeout;
SET search_path = shop, public;
SELECT * FROM nl2sql_run('how many users?');
SHOW transaction_read_only;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA shop, audit, cfg, priv, slow CASCADE;
RESET client_min_messages;
DROP ROLE nl2sql_run_owner;
DROP ROLE nl2sql_run_reader;
DROP EXTENSION turboinfer;
