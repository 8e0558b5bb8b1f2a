-- The same answers on every kernel tier, in a server: `make installcheck-tiers` runs this suite
-- again with the server restarted on each other tier the CPU has (TURBOINFER_KERNELS), against
-- this one expected file. tests/tiers.rs proves the logits bitwise equal in a plain process; this
-- proves what only a backend shows: the whole call (schema prompt, prefix cache, speculative
-- drafts verified in batches, validation) gives the same SQL, token for token and pass for pass,
-- whatever tier the server runs. The answers of the 0.5B model are printed in full on purpose: a
-- change to the prompt or the decoder moves them, and the new expected file must then hold on
-- every tier too.
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'qwen2.5-coder-0.5b';
CREATE SCHEMA tiers;
SET search_path = tiers, public;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/fixtures/small_shop.sql

CREATE TEMP TABLE questions (n int, q text);
INSERT INTO questions VALUES
  (1, 'How many users are there?'),
  (2, 'What is the total amount of the paid orders?'),
  (3, 'List the emails of users who have never placed an order.');

-- Every answer in full, with the work it took (deterministic: the same bits give the same drafts,
-- acceptances and passes).
CREATE TEMP TABLE answers AS SELECT n, nl2sql_explain(q) AS e FROM questions;
SELECT n, e->>'sql' AS sql FROM answers ORDER BY n;
SELECT n, (e->>'valid')::bool AS valid, e->'generated_tokens' AS generated, e->'forward_passes' AS passes,
       e->'draft_tokens' AS drafted, e->'accepted_tokens' AS accepted, jsonb_array_length(e->'attempts') AS attempts
FROM answers ORDER BY n;

-- Asked again: the schema prefix comes from this backend's cache, and the answer is the same.
SELECT a.n, x->>'cache' AS cache, x->>'sql' = a.e->>'sql' AS same_sql
FROM answers a, LATERAL nl2sql_explain((SELECT q FROM questions WHERE n = a.n)) x
WHERE a.n = 1;

-- The answers run (read-only, the caller's rights) and give the same rows on every tier.
SELECT * FROM nl2sql_run('How many users are there?');

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA tiers CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
