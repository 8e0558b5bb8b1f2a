-- turboinfer.candidates / turboinfer.candidate_execution: extra candidate answers branch off the
-- first one; they are executed only when candidate_execution is on, and then read-only (a
-- subtransaction that is always rolled back, transaction_read_only), each under a short timer.
-- Qwen2.5-Coder 0.5B (the smallest test model whose answers on this schema are SQL).
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'qwen2.5-coder-0.5b';

-- Defaults: one candidate, nothing executed.
SELECT name, setting, context FROM pg_settings
WHERE name IN ('turboinfer.candidates', 'turboinfer.candidate_execution') ORDER BY 1;
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

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA probe CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
