-- "This database cannot answer that": a question the visible tables cannot answer gets ERROR
-- P0002 (no_data_found) and no query, before any answer is decoded; a question about the tables
-- is answered exactly as without the check (the check's turn is cut off the KV cache again).
CREATE EXTENSION turboinfer;
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country text, joined date);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers,
                     amount numeric(10,2), ordered_at timestamp);
-- The default model (Qwen2.5-Coder-1.5B) has a measured margin, so the default (auto) checks.
RESET turboinfer.model;
SHOW turboinfer.refusal;
SELECT nl2sql('Who painted the Mona Lisa?');
\echo :LAST_ERROR_SQLSTATE
-- The condition name a PL/pgSQL caller catches.
DO $$
BEGIN
    PERFORM nl2sql('Tell me a joke about databases');
EXCEPTION WHEN no_data_found THEN
    RAISE NOTICE 'refused: %', SQLERRM;
END $$;
-- nl2sql_explain: refused, why, the check's figures; no SQL and no attempt.
SELECT e->>'refused' AS refused, e->>'sql' IS NULL AS no_sql, e->>'valid' AS valid,
       jsonb_array_length(e->'attempts') AS attempts,
       (e->'refusal_check'->>'matched_words')::int AS matched_words,
       (e->'refusal_check'->>'margin')::float > (e->'refusal_check'->>'bar')::float AS above_bar,
       e->>'refusal' LIKE '%the 2 tables it was shown%' AS says_why
FROM nl2sql_explain('Who painted the Mona Lisa?') e;
-- A question about the tables: answered, below the bar.
SELECT e->>'refused' AS refused, e->>'sql' AS sql,
       (e->'refusal_check'->>'margin')::float < (e->'refusal_check'->>'bar')::float AS below_bar
FROM nl2sql_explain('How many customers are there?') e;
-- Two of its words in the schema and an answer that opens with a sure SQL fence: the check's
-- turn is skipped (no margin), and the answer is the one a check on every question gives (on).
SELECT e->>'refused' AS refused, (e->'refusal_check'->>'skipped')::bool AS skipped,
       e->'refusal_check'->'margin' = 'null'::jsonb AS no_margin,
       (e->'refusal_check'->>'matched_words')::int AS matched_words,
       (e->'refusal_check'->>'opening_logprob')::float > -0.4 AS sure_opening, e->>'sql' AS sql
FROM nl2sql_explain('Count orders per customer country, return country and count.') e;
SET turboinfer.refusal = on;
SELECT e->>'refused' AS refused, (e->'refusal_check'->>'skipped')::bool AS skipped,
       (e->'refusal_check'->>'margin')::float < (e->'refusal_check'->>'bar')::float AS below_bar,
       e->>'sql' AS sql
FROM nl2sql_explain('Count orders per customer country, return country and count.') e;
RESET turboinfer.refusal;
-- nl2sql_run refuses the same way: nothing is executed.
SELECT * FROM nl2sql_run('Who painted the Mona Lisa?');
\echo :LAST_ERROR_SQLSTATE
-- Off: no check, a query is written (what it answers is the caller's business).
SET turboinfer.refusal = off;
SELECT e->>'refused' AS refused, e->>'refusal_check' IS NULL AS no_check
FROM nl2sql_explain('Who painted the Mona Lisa?') e;
RESET turboinfer.refusal;
-- A model without a measured margin: auto does not check; on does, with refusal_margin.
SET turboinfer.model = 'qwen2.5-coder-0.5b';
SELECT e->>'refused' AS refused, e->>'refusal_check' IS NULL AS no_check
FROM nl2sql_explain('How many customers are there?') e;
SET turboinfer.refusal = on;
SET turboinfer.refusal_margin = 20;
SELECT e->>'refused' AS refused, e->>'refusal_check' IS NOT NULL AS checked,
       (e->'refusal_check'->>'bar')::float AS bar
FROM nl2sql_explain('How many customers are there?') e;
RESET turboinfer.refusal_margin;
RESET turboinfer.refusal;
RESET turboinfer.model;
-- Bad values are refused when set.
SET turboinfer.refusal = maybe;
SET turboinfer.refusal_margin = 100;
-- turboinfer_stat counts the refusals under their SQLSTATE.
SELECT (errors_by_sqlstate->>'P0002')::int >= 3 AS refusals_counted
FROM turboinfer_stat WHERE datname = current_database() AND rolname = current_user;
DROP TABLE orders, customers;
DROP EXTENSION turboinfer;
