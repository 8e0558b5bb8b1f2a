-- turboinfer.candidates / turboinfer.candidate_execution: extra candidate answers branch off the
-- first one; they are executed only when candidate_execution is on, and then read-only (a
-- subtransaction that is always rolled back, transaction_read_only), each under a short timer.
-- turboinfer.result_check (off by default) runs each valid answer the same way once; with both
-- off nl2sql() never executes anything.
-- Qwen2.5-Coder 0.5B (the smallest test model whose answers on this schema are SQL).
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'qwen2.5-coder-0.5b';

-- Defaults: one candidate, nothing executed.
SELECT name, setting, context FROM pg_settings
WHERE name IN ('turboinfer.candidates', 'turboinfer.candidate_execution', 'turboinfer.result_check')
ORDER BY 1;
SET turboinfer.candidates = 0;
SET turboinfer.candidates = 9;

-- A view whose function announces every call and tries to write: validation cannot see inside
-- views, so only execution would call it.
CREATE SCHEMA probe;
SET search_path = probe, public;
CREATE TABLE probe.calls (at timestamptz);
CREATE FUNCTION probe.visits() RETURNS bigint LANGUAGE plpgsql VOLATILE AS
$$BEGIN RAISE NOTICE 'probe.visits() ran'; INSERT INTO probe.calls VALUES (now()); RETURN 7; END$$;
CREATE VIEW probe.site_stats AS SELECT probe.visits() AS visits;

-- Off (the default): no NOTICE, whatever the number of candidates; a valid first answer is
-- returned without decoding branches.
SELECT nl2sql('how many visits are in site_stats?');
SET turboinfer.candidates = 3;
SELECT e->>'sql' AS sql, jsonb_array_length(e->'candidates') AS candidates
FROM nl2sql_explain('how many visits are in site_stats?') e;
SELECT count(*) AS calls FROM probe.calls;

-- On: every valid candidate runs (the NOTICEs), read-only: the INSERT is refused, so the
-- candidate does not vote, and nothing persists; the caller's transaction stays read-write.
SET turboinfer.candidate_execution = on;
BEGIN;
SELECT c->>'branch_at' IS NOT NULL AS branch, (c->>'error') IS NULL AS valid,
       (c->>'executed')::boolean AS executed, (c->>'chosen')::boolean AS chosen
FROM nl2sql_explain('how many visits are in site_stats?') e, jsonb_array_elements(e->'candidates') c;
SHOW transaction_read_only;
COMMIT;
SELECT count(*) AS calls FROM probe.calls;

-- A candidate that would run for minutes is stopped by its own timer (it does not vote) and
-- the answer still comes back, well inside the session's statement_timeout.
CREATE VIEW probe.pairs AS
SELECT a.g AS a, b.g AS b FROM generate_series(1, 100000) AS a(g), generate_series(1, 100000) AS b(g);
SET statement_timeout = '120s';
SELECT c->>'branch_at' IS NOT NULL AS branch, (c->>'error') IS NULL AS valid,
       (c->>'executed')::boolean AS executed
FROM nl2sql_explain('how many rows does pairs have?') e, jsonb_array_elements(e->'candidates') c;
RESET statement_timeout;

-- Results that agree: the answer is one of the candidates, executed.
CREATE TABLE probe.users (user_id integer PRIMARY KEY, full_name text NOT NULL);
INSERT INTO probe.users SELECT i, 'User ' || i FROM generate_series(1, 12) i;
SELECT (e->>'sql') = (SELECT c->>'sql' FROM jsonb_array_elements(e->'candidates') c
                      WHERE (c->>'chosen')::boolean) AS answer_is_the_chosen_candidate,
       (SELECT bool_and((c->>'executed')::boolean) FROM jsonb_array_elements(e->'candidates') c
        WHERE c->>'error' IS NULL) AS all_valid_executed
FROM nl2sql_explain('how many users are there?') e;

-- Many candidate runs in one session: the backend's timer is registered once and reused
-- (PostgreSQL has 10 user timeout slots; an eleventh registration would end the session).
SELECT count(DISTINCT a) AS distinct_answers, count(*) AS answers
FROM generate_series(1, 11) g, LATERAL nl2sql('how many users are there?') a;

-- Sampled answers (turboinfer.samples), decoded together in one batch per step: never run while
-- execution is off (no NOTICE, no call); with it, run read-only like every candidate; the same
-- samples on every call (fixed seeds).
SET turboinfer.samples = 2;
SET turboinfer.candidate_execution = off;
SELECT nl2sql('how many visits are in site_stats?') IS NOT NULL AS answered;
SET turboinfer.candidate_execution = on;
SELECT count(*) FILTER (WHERE c->>'sample' IS NOT NULL) AS samples,
       bool_and((c->>'executed')::boolean) FILTER (WHERE c->>'error' IS NULL) AS valid_ones_executed
FROM nl2sql_explain('how many users are there?') e, jsonb_array_elements(e->'candidates') c;
SELECT jsonb_path_query_array(nl2sql_explain('how many users are there?'), '$.candidates[*].sql')
     = jsonb_path_query_array(nl2sql_explain('how many users are there?'), '$.candidates[*].sql')
       AS same_samples;
SELECT count(*) AS calls FROM probe.calls;
RESET turboinfer.samples;
RESET turboinfer.candidate_execution;

-- The result check: the answer runs once, read-only; the view's function runs (its NOTICE), its
-- INSERT is refused, so the run gives no verdict and nothing persists.
SET turboinfer.result_check = on;
RESET turboinfer.candidates;
SELECT nl2sql('how many visits are in site_stats?') IS NOT NULL AS answered;
SELECT count(*) AS calls FROM probe.calls;
-- An answer over a table with no rows returns nothing: it is doubted, repaired once, and kept
-- when the repair returns nothing either (an empty result can be right); the answer is valid.
CREATE TABLE probe.refunds (refund_id integer PRIMARY KEY, amount numeric NOT NULL);
SELECT e->'attempts'->0->>'error' AS first_doubt,
       jsonb_array_length(e->'attempts') >= 2 AS repaired,
       e->>'valid' AS valid, e->>'sql' = e->'attempts'->0->>'sql' AS first_answer_kept
FROM nl2sql_explain('list every refund') e;
RESET turboinfer.result_check;
SELECT jsonb_array_length(e->'attempts') AS attempts, e->>'valid' AS valid
FROM nl2sql_explain('list every refund') e;
SET turboinfer.result_check = on;
-- A statement that plans but fails on the data (here a division by zero inside a view) is
-- rejected with the server's error, as its caller would have got it, and repaired like any other.
CREATE SCHEMA ledger;
CREATE TABLE ledger.calls (at timestamptz);
CREATE VIEW ledger.shares AS SELECT 1 / (count(*) - count(*)) AS share FROM ledger.calls;
SET search_path = ledger, public;
SELECT e->'attempts'->0->>'sqlstate' AS first_error, e->'attempts'->0->>'error' AS message,
       e->>'valid' AS valid
FROM nl2sql_explain('what is the share in shares?') e;
-- An empty result whose join matches no pair of rows: the doubt names that join, and the repair
-- may not write the side that is not a primary key at the same place again.
CREATE TABLE ledger.customers (customer_id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE ledger.orders (order_id integer PRIMARY KEY, customer_id integer NOT NULL);
INSERT INTO ledger.customers VALUES (1, 'Ann'), (2, 'Bob');
INSERT INTO ledger.orders VALUES (10, 7), (11, 8);
SELECT e->'attempts'->0->>'feedback' LIKE 'No row of orders has a customer_id equal to the customer_id of a row of customers: the join orders.customer_id = customers.customer_id matches nothing.%' AS join_named,
       e->'attempts'->1->>'sql' <> e->'attempts'->0->>'sql' AS repaired_differently,
       e->>'valid' AS valid
FROM nl2sql_explain('list each order with the name of its customer') e;
SET search_path = probe, public;
RESET turboinfer.result_check;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA probe CASCADE;
DROP SCHEMA ledger CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
