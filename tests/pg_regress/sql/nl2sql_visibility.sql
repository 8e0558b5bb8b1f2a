-- nl2sql_explain(): what the model is shown follows the caller's privileges; the fingerprint
-- follows the schema; the schema prefix is cached per backend. Uses the tiny SmolLM2 model with
-- a one-token budget: only the prompt and the cache matter here, not the answer.
CREATE EXTENSION turboinfer;
-- Start without cache files from earlier runs (the first calls below must compute the prefix).
SELECT turboinfer_cache_clear() >= 0 AS cleared;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;

CREATE SCHEMA vis;
CREATE TABLE vis.users (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE vis.secrets (id integer PRIMARY KEY, user_id integer REFERENCES vis.users, payload text);
COMMENT ON TABLE vis.secrets IS 'launch codes';
-- Materialized views (absent from information_schema) are shown like views, with the same rules.
CREATE MATERIALIZED VIEW vis.user_names AS SELECT id, name FROM vis.users;
CREATE MATERIALIZED VIEW vis.secret_payloads AS SELECT id, payload FROM vis.secrets;
CREATE ROLE nl2sql_reader;
GRANT USAGE ON SCHEMA vis TO nl2sql_reader;
GRANT SELECT ON vis.users TO nl2sql_reader;
GRANT SELECT ON vis.user_names TO nl2sql_reader;
-- SELECT on a materialized view in a schema without USAGE: not shown either.
CREATE SCHEMA novis;
CREATE MATERIALIZED VIEW novis.counts AS SELECT 1 AS n;
GRANT SELECT ON novis.counts TO nl2sql_reader;
SET search_path = vis, public;

-- The superuser sees both tables; first call computes the prefix, the second reuses it.
SELECT e->'tables_shown' AS shown, e->'tables_dropped' AS dropped, e->>'cache' AS cache,
       (e->>'prompt_tokens')::int > 0 AS has_prompt, e->'timings_ms' ?& ARRAY['load', 'schema', 'prefill', 'decode', 'validate'] AS has_timings
FROM nl2sql_explain('how many users?') e;
SELECT e->>'fingerprint' AS fp_all FROM nl2sql_explain('how many users?') e \gset
SELECT e->>'cache' AS cache, e->>'fingerprint' = :'fp_all' AS same_fingerprint, (e->>'prefill_tokens')::int < (e->>'prompt_tokens')::int AS prefix_reused
FROM nl2sql_explain('how many users have a name?') e;

-- A role without SELECT on vis.secrets does not see it (nor its comment) in the prompt; the
-- backend keeps only the positions of the tokens both prompts begin with (partial).
SET ROLE nl2sql_reader;
SELECT e->'tables_shown' AS shown, e->>'cache' AS cache, e->>'fingerprint' <> :'fp_all' AS other_fingerprint
FROM nl2sql_explain('how many users?') e;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;
SELECT e->'tables_shown' AS shown FROM nl2sql_explain('how many users?', ARRAY['vis', 'novis']) e;
RESET ROLE;
-- The superuser sees the materialized view in novis.
SELECT e->'tables_shown' AS shown FROM nl2sql_explain('how many users?', ARRAY['novis']) e;

-- Explicit schemas instead of the search path.
RESET search_path;
SELECT e->'tables_shown' AS shown FROM nl2sql_explain('how many users?', ARRAY['vis']) e;
SELECT e->'tables_shown' AS shown FROM nl2sql_explain('how many users?', ARRAY['pg_catalog', 'vis']) e;
SET search_path = vis, public;

-- Changing the schema changes the fingerprint: the cache holds only the beginning both
-- prompts share (partial).
ALTER TABLE vis.users ADD COLUMN email text;
SELECT e->>'cache' AS cache, e->>'fingerprint' <> :'fp_all' AS changed FROM nl2sql_explain('how many users?') e;
-- So does a comment.
COMMENT ON COLUMN vis.users.email IS 'may be NULL';
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;

-- The answer of a model that cannot write SQL is reported, not returned.
SELECT e->>'valid' AS valid, jsonb_array_length(e->'attempts') AS attempts FROM nl2sql_explain('how many users?') e;

-- The catalog read, line by line: a column of a NOT NULL domain is written NOT NULL (as
-- information_schema.columns has it), a dropped column is gone, a column-level grant shows only
-- the granted columns (and no key over a hidden one, nor a foreign key to one), a view shows its
-- own columns, a text column of few values gets them listed (statistics read for the shown
-- tables only).
CREATE SCHEMA cat;
CREATE DOMAIN cat.code AS text NOT NULL;
CREATE TABLE cat.items (id int PRIMARY KEY, sku cat.code, gone int, label varchar(20), price numeric(8,2));
ALTER TABLE cat.items DROP COLUMN gone;
COMMENT ON COLUMN cat.items.label IS 'shelf label';
CREATE VIEW cat.cheap AS SELECT id, label FROM cat.items WHERE price < 10;
CREATE TABLE cat.hidden_cols (id int PRIMARY KEY, visible text, secret text);
CREATE TABLE cat.tags (id int PRIMARY KEY, item_id int REFERENCES cat.items (id),
                       col_id int REFERENCES cat.hidden_cols (id), kind text);
INSERT INTO cat.tags SELECT i, NULL, NULL, (ARRAY['red', 'blue'])[i % 2 + 1] FROM generate_series(1, 40) i;
ANALYZE cat.tags;
GRANT USAGE ON SCHEMA cat TO nl2sql_reader;
GRANT SELECT (visible, secret) ON cat.hidden_cols TO nl2sql_reader;
GRANT SELECT ON cat.cheap, cat.tags TO nl2sql_reader;
SELECT line FROM nl2sql_explain('how many items?', ARRAY['cat']) e,
     regexp_split_to_table(e->>'prompt', E'\n') line
WHERE line ~ '^(CREATE|-- (items|cheap|hidden_cols|tags))';
SET ROLE nl2sql_reader;
SELECT line FROM nl2sql_explain('how many items?', ARRAY['cat']) e,
     regexp_split_to_table(e->>'prompt', E'\n') line
WHERE line ~ '^(CREATE|-- (items|cheap|hidden_cols|tags))';
RESET ROLE;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA vis, novis, cat CASCADE;
RESET client_min_messages;
DROP OWNED BY nl2sql_reader;
DROP ROLE nl2sql_reader;
DROP EXTENSION turboinfer;
