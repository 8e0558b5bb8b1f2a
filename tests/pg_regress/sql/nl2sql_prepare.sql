-- Background preparation (src/pg/prepare/): after DDL, the worker "turboinfer prepare" prepares
-- the schema prefix of the role that made the change, with its search_path, and writes the cache
-- file, so that a new session's first question loads the file instead of computing the prefix.
-- The worker reads its settings in its own session: the database's (the small model, a short
-- delay). The project's cluster starts with the preparation off (scripts/cluster.sh): this
-- suite turns it on for its database (the worker's session) and in the sessions where it tests it.
CREATE EXTENSION turboinfer;
SELECT turboinfer_cache_clear() >= 0 AS cleared;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET turboinfer.model = %L', current_database(), 'smollm2-135m');
    EXECUTE format('ALTER DATABASE %I SET turboinfer.prepare_delay = %L', current_database(), '500ms');
    EXECUTE format('ALTER DATABASE %I SET turboinfer.background_prepare = on', current_database());
END $$;
SELECT evtname, evtevent, evtenabled, 'CREATE TABLE' = ANY (evttags) AS create_table,
       'COMMENT' = ANY (evttags) AS comment, 'GRANT' = ANY (evttags) AS grant_
FROM pg_event_trigger WHERE evtname = 'turboinfer_schema_changed';

-- Waits (at most 60 s) until no worker of this database runs and the cache directory holds at
-- least `files` files.
CREATE FUNCTION prepared(files int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..600 LOOP
        PERFORM pg_catalog.pg_stat_clear_snapshot();
        IF NOT EXISTS (SELECT FROM pg_stat_activity
                       WHERE backend_type = 'turboinfer prepare' AND datname = current_database())
           AND (turboinfer_info()->'cache_files'->>'files')::int >= files THEN
            RETURN 'prepared';
        END IF;
        PERFORM pg_sleep(0.1);
    END LOOP;
    RETURN 'timed out';
END $$;

\c
SET turboinfer.background_prepare = on;
SELECT i->'background_prepare'->>'enabled' AS enabled, i->'background_prepare'->>'delay_ms' AS delay_ms
FROM turboinfer_info() i;
SET search_path = prep, public;
-- A migration in one transaction that lasts longer than the delay: the worker waits for it to
-- commit (it holds the request lock), then prepares the schema with every table.
BEGIN;
CREATE SCHEMA prep;
CREATE TABLE prep.users (id integer PRIMARY KEY, name text NOT NULL);
SELECT pg_sleep(1.5);
CREATE TABLE prep.orders (id integer PRIMARY KEY, user_id integer REFERENCES prep.users, amount numeric);
COMMENT ON TABLE prep.orders IS 'one row per order';
COMMIT;
SELECT prepared(1);

-- A new session: the prefix comes from the file; only the question is run.
\c
SET turboinfer.max_new_tokens = 1;
SET search_path = prep, public;
SELECT e->>'cache' AS cache, (e->>'prefill_tokens')::int < (e->>'prompt_tokens')::int AS prefix_skipped,
       e->'tables_shown' AS tables_shown
FROM nl2sql_explain('how many users?') e;

-- Off: nothing starts, and a new session computes the prefix of the changed schema.
SET turboinfer.background_prepare = off;
CREATE TABLE prep.items (id integer PRIMARY KEY, title text);
SELECT pg_sleep(3);
SELECT pg_stat_clear_snapshot();
SELECT count(*) AS workers FROM pg_stat_activity WHERE backend_type = 'turboinfer prepare';
SELECT (turboinfer_info()->'cache_files'->>'files')::int AS files;
\c
SET turboinfer.max_new_tokens = 1;
SET search_path = prep, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;

-- A change rolled back: the DDL's own error path is untouched, the worker prepares the schema
-- as it is (its file is there already) and exits; a new session still loads the file.
SET turboinfer.background_prepare = on;
BEGIN;
CREATE TABLE prep.scratch (id integer);
ROLLBACK;
BEGIN;
CREATE TABLE prep.scratch (id integer);
SELECT 1/0;
ROLLBACK;
SELECT pg_sleep(1);
SELECT prepared(2);
SELECT to_regclass('prep.scratch') IS NULL AS rolled_back;
\c
SET turboinfer.max_new_tokens = 1;
SET search_path = prep, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;

-- Any role's DDL fires the trigger (no EXECUTE needed), but nobody may call the functions.
CREATE ROLE prep_user;
GRANT USAGE, CREATE ON SCHEMA prep TO prep_user;
SET turboinfer.background_prepare = on;
SET ROLE prep_user;
CREATE TABLE prep.mine (id integer PRIMARY KEY, note text);
SELECT turboinfer_prepare_request();
RESET ROLE;
SELECT pg_sleep(1);
SELECT prepared(2);

-- Clean up (no preparation for the drops).
SET turboinfer.background_prepare = off;
RESET search_path;
DROP SCHEMA prep CASCADE;
DROP FUNCTION prepared(int);
DROP ROLE prep_user;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I RESET turboinfer.model', current_database());
    EXECUTE format('ALTER DATABASE %I RESET turboinfer.prepare_delay', current_database());
    EXECUTE format('ALTER DATABASE %I RESET turboinfer.background_prepare', current_database());
END $$;
SELECT turboinfer_cache_clear() >= 2 AS cleared;
DROP EXTENSION turboinfer;
