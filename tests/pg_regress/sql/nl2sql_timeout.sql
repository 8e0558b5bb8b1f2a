-- statement_timeout (and pg_cancel_backend, which uses the same interrupt path) stops a long
-- nl2sql() call between two forward passes; the backend stays usable afterwards.
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 2048;
SET turboinfer.context_tokens = 8192;
CREATE SCHEMA big;
SET search_path = big, public;
-- 80 tables of 12 columns (tests/fixtures): thousands of prompt tokens, far more than a second of work.
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/fixtures/wide_schema.sql
SELECT count(*) AS tables FROM information_schema.tables WHERE table_schema = 'big';
SET statement_timeout = '1s';
-- Terse: a server started with RUST_BACKTRACE=1 adds a backtrace DETAIL to re-raised errors.
\set VERBOSITY terse
SELECT nl2sql('list every column of every table');
\set VERBOSITY default
RESET statement_timeout;
-- Still alive, model still loaded.
SELECT (turboinfer_info()->>'loaded')::bool AS loaded;
-- A new backend's first call, stopped at once: it reads the catalog while a worker thread loads
-- the model beside it (backend::load_beside), so the ERROR may come from the catalog read, after
-- the load has finished. The backend stays usable and answers the next call.
\c
SET turboinfer.model = 'smollm2-135m';
CREATE SCHEMA small;
CREATE TABLE small.users (id integer PRIMARY KEY, name text);
SET search_path = big, public;
SET statement_timeout = '5ms';
\set VERBOSITY terse
SELECT nl2sql('list every column of every table');
\set VERBOSITY default
RESET statement_timeout;
SET search_path = small;
SELECT x->>'sql' IS NOT NULL AS answered, x->'timings_ms' ? 'load' AS timed
FROM (SELECT public.nl2sql_explain('how many users are there?')::jsonb AS x) s;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA small CASCADE;
DROP SCHEMA big CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
