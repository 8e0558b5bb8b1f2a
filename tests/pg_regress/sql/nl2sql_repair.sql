-- A wrong column is repaired: the real Qwen2.5-Coder-0.5B model first names a column on a table
-- that lacks it; PostgreSQL's analysis rejects it (42703), the repair round shows the model the
-- catalog facts (which table has the column), and a later round answers with a query that runs.
CREATE EXTENSION turboinfer;
CREATE SCHEMA hr;
CREATE TABLE hr.dept (dept_no integer PRIMARY KEY, dname text NOT NULL, loc text);
CREATE TABLE hr.emp (emp_no integer PRIMARY KEY, ename text NOT NULL, job text, sal numeric, dept_no integer REFERENCES hr.dept);
INSERT INTO hr.dept VALUES (10, 'ACCOUNTING', 'NEW YORK'), (20, 'RESEARCH', 'DALLAS'), (30, 'SALES', 'CHICAGO');
INSERT INTO hr.emp VALUES (1, 'KING', 'PRESIDENT', 5000, 10), (2, 'SMITH', 'CLERK', 800, 20), (3, 'ALLEN', 'SALESMAN', 1600, 30), (4, 'WARD', 'SALESMAN', 1250, 30);
SET search_path = hr, public;
SET turboinfer.model = 'qwen2.5-coder-0.5b';

SELECT e->'attempts'->0->>'sqlstate' AS first_error,
       e->'attempts'->0->>'feedback' LIKE '%The column dname is in: dept%' AS facts_shown,
       (e->>'repair_rounds')::int BETWEEN 1 AND 2 AS repaired_in_bounds,
       e->>'valid' AS valid,
       nl2sql_check(e->>'sql') IS NULL AS checks
FROM nl2sql_explain('How many employees does each department have? Show the department name.') e;

-- The repaired answer runs as is.
SELECT nl2sql('How many employees does each department have? Show the department name.') AS q \gset
SELECT * FROM (:q) answer ORDER BY 1;

-- No repair rounds and one candidate: the same question ends with the first error.
SET turboinfer.repair_rounds = 0;
SET turboinfer.candidates = 1;
SELECT nl2sql('How many employees does each department have? Show the department name.');
-- No repair rounds, the default candidates: a branch off the rejected first answer, taken at a
-- token the model was unsure of, joins dept and is valid.
RESET turboinfer.candidates;
SELECT nl2sql('How many employees does each department have? Show the department name.');
SELECT c->>'branch_at' IS NOT NULL AS branch, c->>'error' IS NULL AS valid, (c->>'chosen')::boolean AS chosen
FROM nl2sql_explain('How many employees does each department have? Show the department name.') e,
     jsonb_array_elements(e->'candidates') c;

-- The repair budget: a budget the first answer uses up stops the repair rounds and the branch
-- (two rounds and a branch are allowed): no model round is decoded. The engine's own rewrite,
-- which decodes nothing, still runs (the first question's missing column is joined in).
RESET turboinfer.repair_rounds;
SET turboinfer.repair_tokens = 1;
SELECT e->'attempts'->0->>'sqlstate' AS first_error,
       jsonb_array_length(e->'attempts') AS attempts,
       e->'attempts'->1->>'rewritten' IS NOT NULL AS rewritten,
       jsonb_array_length(e->'candidates') AS candidates,
       e->'repair_budget'->>'tokens' AS budget,
       (e->'repair_budget'->>'decoded')::int = (e->'attempts'->0->>'generated_tokens')::int AS decoded_first_only,
       e->'repair_budget'->>'reached' AS reached,
       e->>'valid' AS valid
FROM (VALUES ('How many employees does each department have? Show the department name.'),
             ('Show employee names and their manager names.')) v(q),
     LATERAL nl2sql_explain(q) e;
-- The default budget (200) lets the rounds run.
RESET turboinfer.repair_tokens;
SELECT e->'repair_budget'->>'tokens' AS budget,
       (e->>'repair_rounds')::int >= 1 AS repaired
FROM nl2sql_explain('Show employee names and their manager names.') e;
-- Out of range: an ERROR (22023), the setting unchanged.
SET turboinfer.repair_tokens = -1;
SHOW turboinfer.repair_tokens;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA hr CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
