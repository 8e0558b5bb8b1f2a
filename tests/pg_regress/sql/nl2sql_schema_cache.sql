-- The schema nl2sql() reads from the catalog is kept in the backend until the catalog changes
-- (turboinfer.schema_cache): DDL, GRANT/REVOKE, ANALYZE and COMMENT (through the extension's
-- event trigger) make the next call read it again, a rolled-back change too. nl2sql_explain's
-- schema_cache says how the schema was served (miss: read and kept; hit: kept; off: read, not
-- kept), its fingerprint identifies the schema text the model was shown.
CREATE EXTENSION turboinfer;
CREATE SCHEMA cache;
SET search_path = cache, public;
CREATE TABLE orders (id int PRIMARY KEY, amount numeric, placed_at date);
CREATE TABLE customers (id int PRIMARY KEY, name text);
-- The smallest model, one token per answer: only the schema matters here.
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.refusal = off;
SET turboinfer.repair_rounds = 0;
SET turboinfer.candidates = 1;
SHOW turboinfer.schema_cache;
-- Each call's schema text, by step.
CREATE TEMP TABLE seen (step text PRIMARY KEY, fingerprint text);
CREATE FUNCTION ask(step text, OUT schema_cache text, OUT tables jsonb) LANGUAGE plpgsql AS $$
DECLARE
    e jsonb := nl2sql_explain('How many orders are there?');
BEGIN
    INSERT INTO seen VALUES (step, e->>'fingerprint');
    schema_cache := e->>'schema_cache';
    tables := e->'tables_shown';
END $$;
-- A step where nothing changed: served from the cache. Not only DDL invalidates: autovacuum's
-- updates of the system catalogs do too (the cache re-reads on any invalidation it cannot rule
-- out), so a few tries; a cache that never serves fails here.
CREATE FUNCTION kept(step text, OUT kept boolean, OUT tables jsonb) LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR i IN 1..5 LOOP
        SELECT * INTO r FROM ask(step || ' ' || i);
        EXIT WHEN r.schema_cache = 'hit';
    END LOOP;
    kept := r.schema_cache = 'hit';
    tables := r.tables;
END $$;
CREATE FUNCTION same(a text, b text) RETURNS boolean LANGUAGE sql AS $$
    SELECT x.fingerprint = y.fingerprint FROM seen x, seen y WHERE x.step = a AND y.step = b $$;
-- Read once, then kept.
SELECT * FROM ask('first');
SELECT * FROM kept('again');
SELECT same('first', 'again 1');
-- A new column: read again, a different schema text; then kept.
ALTER TABLE orders ADD COLUMN status text;
SELECT * FROM ask('column');
SELECT same('first', 'column');
SELECT * FROM kept('column again');
-- A comment: the event trigger tells every backend.
COMMENT ON COLUMN orders.amount IS 'in euros';
SELECT * FROM ask('comment');
SELECT same('column', 'comment');
-- A dropped table, planner statistics.
DROP TABLE customers;
SELECT * FROM ask('drop');
INSERT INTO orders SELECT g, g * 10, date '2026-01-01' + g, 'open' FROM generate_series(1, 50) g;
ANALYZE orders;
SELECT * FROM ask('analyze');
-- A change rolled back: read with it inside the transaction, without it after.
BEGIN;
ALTER TABLE orders ADD COLUMN note text;
SELECT * FROM ask('inside');
SELECT same('inside', 'analyze');
ROLLBACK;
SELECT * FROM ask('rolled back');
SELECT same('rolled back', 'analyze');
-- Another role: its own entry, with what it may read; a GRANT shows more.
CREATE ROLE nl2sql_cache_reader;
GRANT USAGE ON SCHEMA cache TO nl2sql_cache_reader;
GRANT SELECT ON orders TO nl2sql_cache_reader;
CREATE TABLE returns (id int PRIMARY KEY, order_id int REFERENCES orders, reason text);
GRANT EXECUTE ON FUNCTION ask(text) TO nl2sql_cache_reader;
GRANT ALL ON seen TO nl2sql_cache_reader;
SET ROLE nl2sql_cache_reader;
SELECT * FROM ask('reader');
SELECT * FROM kept('reader again');
RESET ROLE;
GRANT SELECT ON returns TO nl2sql_cache_reader;
SET ROLE nl2sql_cache_reader;
SELECT * FROM ask('reader granted');
-- Only the event trigger may send the invalidation.
SELECT turboinfer_catalog_changed('pg_class'::regclass, 'cache.orders'::regclass);
RESET ROLE;
-- A role that owns a table comments on it: the trigger runs, whoever comments.
GRANT CREATE ON SCHEMA cache TO nl2sql_cache_reader;
SET ROLE nl2sql_cache_reader;
CREATE TABLE cache.reader_notes (id int);
RESET ROLE;
SELECT * FROM ask('notes');
SELECT * FROM kept('notes again');
SET ROLE nl2sql_cache_reader;
COMMENT ON TABLE cache.reader_notes IS 'scratch';
RESET ROLE;
SELECT * FROM ask('notes comment');
-- Setting off, or a transaction that reads an older catalog: read every time, not kept.
SET turboinfer.schema_cache = off;
SELECT * FROM ask('off');
RESET turboinfer.schema_cache;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM ask('repeatable read');
COMMIT;
-- Kept through both (with kept()'s retries: autovacuum may have analyzed a table meanwhile).
SELECT * FROM kept('after');
SELECT * FROM kept('after again');
-- turboinfer_cache_clear() forgets it.
SELECT turboinfer_cache_clear() >= 0 AS cleared;
SELECT * FROM ask('cleared');
-- The trigger belongs to the extension.
SELECT evtname, evtevent, evttags, evtenabled FROM pg_event_trigger;
SET client_min_messages = warning;
DROP SCHEMA cache CASCADE;
RESET client_min_messages;
DROP OWNED BY nl2sql_cache_reader;
DROP ROLE nl2sql_cache_reader;
DROP EXTENSION turboinfer;
SELECT count(*) AS triggers_left FROM pg_event_trigger;
