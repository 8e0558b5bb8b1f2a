-- Speculative decoding (turboinfer.speculation) with the Qwen2.5-Coder 0.5B model: the same SQL
-- with it on and off, fewer forward passes than generated tokens with it on, none drafted off.
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'qwen2.5-coder-0.5b';
CREATE SCHEMA spec;
SET search_path = spec, public;
\getenv abs_srcdir PG_ABS_SRCDIR
\i :abs_srcdir/fixtures/small_shop.sql

CREATE TEMP TABLE questions (n int, q text);
INSERT INTO questions VALUES
  (1, 'How many users are there?'),
  (2, 'List the email of users who have never placed an order.'),
  (3, 'Which user placed the most orders?'),
  (4, 'How many orders have status ''paid''?');

SHOW turboinfer.speculation;
SET turboinfer.speculation = off;
CREATE TEMP TABLE plain AS SELECT n, nl2sql_explain(q) AS e FROM questions;
SET turboinfer.speculation = on;
CREATE TEMP TABLE spec AS SELECT n, nl2sql_explain(q) AS e FROM questions;

-- The same SQL and token count either way; the switch is reported.
SELECT p.n, p.e->>'sql' = s.e->>'sql' AS same_sql, p.e->'generated_tokens' = s.e->'generated_tokens' AS same_tokens,
       (p.e->>'speculation')::bool AS plain_spec, (s.e->>'speculation')::bool AS spec_spec
FROM plain p JOIN spec s USING (n) ORDER BY n;

-- Without speculation: one forward pass per token after the first, nothing drafted.
SELECT n, (e->>'forward_passes')::int = (e->>'generated_tokens')::int - jsonb_array_length(e->'attempts') AS one_pass_per_token,
       (e->>'draft_tokens')::int AS drafted, (e->>'accepted_tokens')::int AS accepted
FROM plain ORDER BY n;

-- With speculation: drafts are proposed and partly accepted, and over the questions there are
-- fewer forward passes than generated tokens.
SELECT sum((e->>'forward_passes')::int) < sum((e->>'generated_tokens')::int) AS fewer_passes,
       sum((e->>'draft_tokens')::int) > 0 AS drafted,
       sum((e->>'accepted_tokens')::int) > 0 AS accepted,
       bool_and((e->>'accepted_tokens')::int <= (e->>'draft_tokens')::int) AS accepted_within_drafted,
       bool_and((e->>'acceptance_rate')::float8 BETWEEN 0 AND 1) AS rate_in_range
FROM spec;

RESET turboinfer.speculation;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA spec CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
