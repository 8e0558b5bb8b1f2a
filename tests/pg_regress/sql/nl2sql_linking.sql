-- Schema linking by meaning: when the schema does not fit the context, nl2sql shows the tables
-- whose names, columns and comments are closest in meaning to the question (the
-- all-MiniLM-L6-v2 encoder, turboinfer.schema_encoder), each followed by the tables its foreign
-- keys reference, up to turboinfer.schema_tokens tokens. The encoder's results are the same on
-- every CPU (tests/embed.rs), so are the tables chosen.
CREATE EXTENSION turboinfer;
CREATE SCHEMA linking;
SET search_path = linking, public;
-- Eight tables of unrelated subjects; no table shares a word with the questions below.
CREATE TABLE carriers (id int PRIMARY KEY, name text, phone text);
CREATE TABLE invoices (id int PRIMARY KEY, customer_ref text, amount_due numeric, due_date date, paid bool);
CREATE TABLE sensor_readings (id int PRIMARY KEY, device_id int, celsius real, taken_at timestamptz);
CREATE TABLE shipments (id int PRIMARY KEY, carrier_id int REFERENCES carriers, shipped_at timestamptz,
                        delivered_at timestamptz, weight_kg real);
CREATE TABLE staff (id int PRIMARY KEY, full_name text, hired_on date, salary numeric, department text);
CREATE TABLE support_tickets (id int PRIMARY KEY, opened_at timestamptz, closed_at timestamptz,
                              priority int, subject text);
CREATE TABLE recipes (id int PRIMARY KEY, title text, cooking_minutes int, servings int);
CREATE TABLE league_matches (id int PRIMARY KEY, home_team text, away_team text, home_goals int,
                             away_goals int);
-- The smallest model, one token per answer, nothing but the plan matters here.
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.refusal = off;
SET turboinfer.repair_rounds = 0;
SET turboinfer.candidates = 1;
SHOW turboinfer.schema_encoder;
SHOW turboinfer.schema_tokens;
CREATE FUNCTION plan(q text, OUT by text, OUT shown jsonb, OUT embedded int, OUT fallback text)
LANGUAGE sql AS $$
  SELECT e->'linking'->>'by', e->'tables_shown', (e->'linking'->>'tables_embedded')::int,
         e->'linking'->>'fallback'
  FROM nl2sql_explain(q, ARRAY['linking']) e $$;
-- Embeddings are kept in the cache directory across sessions (and runs of this suite): start
-- without any.
SELECT turboinfer_cache_clear() >= 0 AS cleared;
-- Everything fits: every table is shown, nothing is linked.
SELECT * FROM plan('Which parcels arrived late, and with which courier?');
-- A context too small for all eight: the shipments and the carriers they reference. The first
-- call embeds the eight tables; the next ones reuse them.
SET turboinfer.context_tokens = 300;
SELECT * FROM plan('Which parcels arrived late, and with which courier?');
SELECT * FROM plan('How many employees joined last year?');
SELECT * FROM plan('Which football club scored the most?');
-- A changed description is embedded again, alone.
COMMENT ON TABLE recipes IS 'dishes from the cookbook';
SELECT * FROM plan('Which dish takes longest to cook?');
-- The similarities of the shown tables, in prompt order.
SELECT jsonb_array_length(e->'linking'->'similarity') AS n,
       (e->'linking'->'similarity'->>1)::float > (e->'linking'->'similarity'->>0)::float AS shipments_closer,
       (e->'linking'->>'ms')::float >= 0 AS timed
FROM nl2sql_explain('Which parcels arrived late, and with which courier?', ARRAY['linking']) e;
-- The schema budget: at most turboinfer.schema_tokens of schema (40: one table; the default,
-- 1536, is more than this context leaves); 0 fills
-- what the context leaves.
SET turboinfer.context_tokens = 420;
SELECT jsonb_array_length(shown) AS tables FROM plan('Which parcels arrived late, and with which courier?');
SET turboinfer.schema_tokens = 40;
SELECT * FROM plan('Which parcels arrived late, and with which courier?');
SET turboinfer.schema_tokens = 0;
SELECT jsonb_array_length(shown) AS tables FROM plan('Which parcels arrived late, and with which courier?');
RESET turboinfer.schema_tokens;
SET turboinfer.context_tokens = 300;
-- Without an encoder, by the question's words (none match here: schema order).
SET turboinfer.schema_encoder = '';
SELECT * FROM plan('Which parcels arrived late, and with which courier?');
SET turboinfer.schema_encoder = 'no-such-encoder';
SELECT * FROM plan('Which parcels arrived late, and with which courier?');
RESET turboinfer.schema_encoder;
-- An encoder that is not installed left the loaded one in place: nothing is embedded again.
SELECT by, embedded FROM plan('Which parcels arrived late, and with which courier?');
-- Only what the caller may read is embedded and shown: without SELECT on shipments a reader
-- gets the carriers and the next closest table.
CREATE ROLE linking_reader;
GRANT USAGE ON SCHEMA linking TO linking_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA linking TO linking_reader;
REVOKE SELECT ON shipments FROM linking_reader;
GRANT EXECUTE ON FUNCTION plan(text) TO linking_reader;
SET ROLE linking_reader;
SELECT * FROM plan('Which parcels arrived late, and with which courier?');
RESET ROLE;
-- nl2sql_tables: the same choice without generating anything, one row per table shown.
SELECT * FROM nl2sql_tables('Which parcels arrived late, and with which courier?', ARRAY['linking']);
SELECT count(*) AS no_rows FROM nl2sql_tables(NULL);
RESET turboinfer.context_tokens;
SELECT count(*) AS tables, min(chosen_by) AS chosen_by, count(similarity) AS similarities
FROM nl2sql_tables('Which parcels arrived late?', ARRAY['linking']);
-- Tables of two schemas: those of the first (the home schema, named unqualified) are offered
-- to the budget first and shown first. Here they do not fit beside the tables ranked ahead of
-- them, so they get half of it, and the other schema's tables follow by rank. Consecutive
-- questions then begin alike, and a call keeps the positions its prompt shares with the
-- previous one ('partial').
CREATE SCHEMA aside;
CREATE TABLE aside.couriers (id int PRIMARY KEY, name text, phone text);
CREATE TABLE aside.parcels (id int PRIMARY KEY, courier_id int REFERENCES aside.couriers,
                            sent_at timestamptz, arrived_at timestamptz);
SET turboinfer.context_tokens = 300;
SELECT e->'tables_shown' AS shown, e->>'cache' AS cache
FROM nl2sql_explain('Which parcels arrived late, and with which courier?', ARRAY['aside', 'linking']) e;
SELECT e->'tables_shown' AS shown, e->>'cache' AS cache,
       (e->>'prefix_reused_tokens')::int > 0 AS kept_some,
       (e->>'prefix_reused_tokens')::int < (e->>'prefix_tokens')::int AS computed_the_rest,
       (e->>'prefill_tokens')::int + (e->>'prefix_reused_tokens')::int = (e->>'prompt_tokens')::int AS adds_up
FROM nl2sql_explain('How many employees joined last year?', ARRAY['aside', 'linking']) e;
SELECT (i->'cache'->>'partial')::int >= 1 AS counted FROM turboinfer_info() i;
-- With room for the home schema beside what ranks ahead of it, it is shown whole, and the other
-- schema adds only the tables ranked closer to the question than every home table (with the
-- tables they reference): none for the parcels; for the employees, staff and the two others
-- the encoder puts above parcels and couriers. The next question's prompt begins with the
-- same home tables.
SET turboinfer.context_tokens = 400;
SELECT e->'tables_shown' AS shown
FROM nl2sql_explain('Which parcels arrived late, and with which courier?', ARRAY['aside', 'linking']) e;
SELECT e->'tables_shown' AS shown, e->>'cache' AS cache,
       (e->>'prefix_reused_tokens')::int > 0 AS kept_some
FROM nl2sql_explain('How many employees joined last year?', ARRAY['aside', 'linking']) e;
-- turboinfer_prewarm on a schema that does not fit also prepares the home schema's prefix
-- alone: the beginning of every question that ranks nothing elsewhere ahead of the home tables.
-- A new backend's first such question reads it from the cache file; one with tables ahead
-- computes its own.
SELECT turboinfer_cache_clear() >= 1 AS cleared;
SELECT p->'fits' AS fits, p->'tables_embedded' AS embedded, p->>'prefix' AS prefix,
       p->'prefix_tables' AS prefix_tables
FROM turboinfer_prewarm(ARRAY['aside', 'linking']) p;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.refusal = off;
SET turboinfer.repair_rounds = 0;
SET turboinfer.candidates = 1;
SET turboinfer.context_tokens = 400;
SELECT e->'tables_shown' AS shown, e->>'cache' AS cache
FROM nl2sql_explain('Which parcels arrived late, and with which courier?', ARRAY['aside', 'linking']) e;
SELECT jsonb_array_length(e->'tables_shown') AS tables, e->>'cache' AS cache
FROM nl2sql_explain('How many employees joined last year?', ARRAY['aside', 'linking']) e;
SET search_path = linking, public;
DROP SCHEMA aside CASCADE;
RESET turboinfer.context_tokens;
-- turboinfer_prewarm: a schema that fits gets its prefix computed and written to a cache file;
-- the next backend reads it from there, the same backend has it in memory.
SELECT turboinfer_cache_clear() >= 0 AS cleared;
SELECT p->'tables' AS tables, p->'fits' AS fits, p->>'prefix' AS prefix, (p->>'prefix_tokens')::int > 0 AS tokens
FROM turboinfer_prewarm(ARRAY['linking']) p;
SELECT p->>'prefix' AS prefix FROM turboinfer_prewarm(ARRAY['linking']) p;
-- One that does not fit gets its tables embedded, into the embeddings file other backends read.
SET turboinfer.context_tokens = 300;
SELECT p->'fits' AS fits, p->>'encoder' AS encoder, p->'tables_embedded' AS embedded
FROM turboinfer_prewarm(ARRAY['linking']) p;
SELECT p->'tables_embedded' AS again FROM turboinfer_prewarm(ARRAY['linking']) p;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.refusal = off;
SET turboinfer.repair_rounds = 0;
SET turboinfer.candidates = 1;
SELECT p->>'prefix' AS prefix_in_a_new_backend FROM turboinfer_prewarm(ARRAY['linking']) p;
SET turboinfer.context_tokens = 300;
SELECT e->'linking'->'tables_embedded' AS embedded_in_a_new_backend, e->'tables_shown' AS shown
FROM nl2sql_explain('Which parcels arrived late, and with which courier?', ARRAY['linking']) e;
-- turboinfer_cache_clear removes the embeddings too.
SELECT turboinfer_cache_clear() >= 1 AS cleared;
SELECT p->'tables_embedded' AS after_clear FROM turboinfer_prewarm(ARRAY['linking']) p;
SET search_path = linking, public;
DROP FUNCTION plan(text);
DROP SCHEMA linking CASCADE;
DROP ROLE linking_reader;
DROP EXTENSION turboinfer;
