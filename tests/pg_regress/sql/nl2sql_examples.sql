-- Approved examples: nl2sql_learn(question, sql) stores a question -> SQL pair that someone has
-- checked; nl2sql() shows the most similar ones to the model as earlier exchanges, after the
-- cached schema prefix; nl2sql_forget(id) removes one. PostgreSQL privileges decide who may add
-- (INSERT on nl2sql_examples), forget (DELETE) and see (SELECT on every relation the example
-- reads, through row-level security).
CREATE EXTENSION turboinfer;

-- The SQL surface.
SELECT p.proname, pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result,
       p.provolatile, p.proisstrict, p.proparallel, p.prosecdef
FROM pg_proc p WHERE p.proname IN ('nl2sql_learn', 'nl2sql_forget', 'nl2sql_example_relations') ORDER BY 1;
SELECT c.relacl, c.relrowsecurity, (SELECT string_agg(polname || ':' || polcmd::text, ', ' ORDER BY polname)
                                    FROM pg_policy WHERE polrelid = c.oid) AS policies
FROM pg_class c WHERE c.oid = 'nl2sql_examples'::regclass;
SELECT extconfig::regclass[] AS dumped_by_pg_dump FROM pg_extension WHERE extname = 'turboinfer';
SHOW turboinfer.examples;
SET turboinfer.examples = 9;

CREATE SCHEMA shop;
SET search_path = shop, public;
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country text NOT NULL);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer NOT NULL REFERENCES customers,
                     amount numeric(10,2) NOT NULL, status char(1) NOT NULL);
COMMENT ON COLUMN orders.status IS 'P paid, R refunded';
INSERT INTO customers VALUES (1, 'Ada', 'FR'), (2, 'Bob', 'JP'), (3, 'Cy', 'FR');
INSERT INTO orders VALUES (1, 1, 10, 'P'), (2, 1, 20, 'R'), (3, 2, 5, 'R'), (4, 3, 7, 'P');
CREATE TABLE payroll (id integer PRIMARY KEY, salary numeric NOT NULL);
CREATE SEQUENCE tickets;

-- The tiny model and a one-token answer: only the prompt matters in this part.
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.refusal = off;
-- The prompt of a database without examples, to compare with later.
CREATE TEMP TABLE before AS
SELECT e->>'prompt' AS prompt, e->'examples' AS examples
FROM nl2sql_explain('What is the refunded amount per country?') e;
SELECT examples FROM before;

-- Learning: the SQL is validated and run read-only as the caller, then stored with the
-- relations it reads (a trailing semicolon and blanks are dropped).
SELECT nl2sql_learn('Refunded amount per country',
  $$SELECT c.country, SUM(o.amount) AS refunded FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'R' GROUP BY c.country ;  $$) > 0 AS learned;
SELECT nl2sql_learn('Total salaries', 'SELECT SUM(salary) FROM payroll') > 0 AS learned;
SELECT question, sql, relations, added_by = current_user AS by_me, added_at <= now() AS dated
FROM nl2sql_examples ORDER BY id;
SELECT nl2sql_example_relations('SELECT * FROM orders o WHERE EXISTS (SELECT FROM customers c WHERE c.id = o.customer_id) UNION ALL TABLE orders')::regclass[] AS relations;
-- Refused, each with its SQLSTATE, and nothing stored.
SELECT nl2sql_learn('Delete the refunds', $$DELETE FROM orders WHERE status = 'R'$$);
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql_learn('Two statements', 'SELECT 1; SELECT 2');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql_learn('A wrong column', 'SELECT total FROM orders');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql_learn('A side effect', $$SELECT nextval('tickets')$$);
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql_learn('Fails when run', 'SELECT 1 / (SELECT count(*) - 4 FROM orders)');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql_learn('   ', 'SELECT 1');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS stored FROM nl2sql_examples;
SELECT is_called FROM tickets;

-- The similar example goes into the prompt, after the schema prefix (the same fingerprint), as
-- an earlier exchange; the most similar one last.
SELECT e->'examples' @> jsonb_build_array(jsonb_build_object('id', (SELECT min(id) FROM nl2sql_examples))) AS shown,
       jsonb_array_length(e->'examples') AS n,
       e->>'fingerprint' = (SELECT e2->>'fingerprint' FROM nl2sql_explain('How many customers?') e2) AS same_prefix,
       strpos(e->>'prompt', E'Refunded amount per country<|im_end|>\n<|im_start|>assistant\n```sql\nSELECT c.country') > 0 AS as_exchange,
       right(e->>'prompt', 80) AS prompt_end
FROM nl2sql_explain('What is the refunded amount per country?') e;
-- turboinfer.examples = 0, or a question that shares no word with any example: the prompt of a
-- database without examples, character for character.
SET turboinfer.examples = 0;
SELECT (SELECT prompt FROM before) = e->>'prompt' AS same_prompt, e->'examples' AS examples
FROM nl2sql_explain('What is the refunded amount per country?') e;
RESET turboinfer.examples;
SELECT e->'examples' AS examples, strpos(e->>'prompt', '```sql') = 0 AS no_example
FROM nl2sql_explain('How many customers are there?') e;

-- Privileges. A reader of customers and orders only: sees the example over them, not the one
-- over payroll (nor is it ever shown to the model for them); may neither add nor forget.
CREATE ROLE ex_reader;
GRANT USAGE ON SCHEMA shop TO ex_reader;
GRANT SELECT ON customers, orders TO ex_reader;
SET ROLE ex_reader;
SELECT question FROM nl2sql_examples ORDER BY id;
SELECT e->'examples' AS examples FROM nl2sql_explain('What are the total salaries?') e;
SELECT nl2sql_learn('Count orders', 'SELECT count(*) FROM orders');
\echo :LAST_ERROR_SQLSTATE
SELECT nl2sql_forget((SELECT min(id) FROM nl2sql_examples));
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT id AS salaries_id FROM nl2sql_examples WHERE question = 'Total salaries' \gset
-- A teacher: may add and forget, still only over what it may read.
CREATE ROLE ex_teacher;
GRANT USAGE ON SCHEMA shop TO ex_teacher;
GRANT SELECT ON customers, orders TO ex_teacher;
GRANT INSERT, DELETE ON nl2sql_examples TO ex_teacher;
SET ROLE ex_teacher;
SELECT nl2sql_learn('Number of orders per status', 'SELECT status, count(*) FROM orders GROUP BY status') > 0 AS learned;
SELECT nl2sql_learn('Highest salary', 'SELECT max(salary) FROM payroll');
\echo :LAST_ERROR_SQLSTATE
-- A direct INSERT must record exactly the relations its SQL reads, as its own role.
INSERT INTO nl2sql_examples (question, sql, relations) VALUES ('Orders', 'SELECT * FROM orders', '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO nl2sql_examples (question, sql, relations) VALUES ('Salaries', 'SELECT * FROM payroll', '{}');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO nl2sql_examples (question, sql, relations, added_by) VALUES ('Orders', 'SELECT * FROM orders', '{orders}', 'postgres');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO nl2sql_examples (question, sql, relations)
VALUES ('All orders', 'SELECT * FROM orders', nl2sql_example_relations('SELECT * FROM orders')::regclass[])
RETURNING question, relations, added_by;
UPDATE nl2sql_examples SET sql = 'SELECT 1';
\echo :LAST_ERROR_SQLSTATE
-- Forgetting: true for an example it can see, false for one it cannot (it stays).
SELECT nl2sql_forget((SELECT max(id) FROM nl2sql_examples));
SELECT nl2sql_forget(:salaries_id);
RESET ROLE;
SELECT nl2sql_forget(id) AS forgotten_by_owner FROM nl2sql_examples WHERE question = 'Total salaries';
SELECT question, added_by FROM nl2sql_examples ORDER BY id;
-- An example over a relation dropped since is shown to nobody.
CREATE TABLE gone (n integer);
SELECT nl2sql_learn('Count of gone', 'SELECT count(*) FROM gone') > 0 AS learned;
DROP TABLE gone;
SELECT e->'examples' AS examples FROM nl2sql_explain('What is the count of gone?') e;
SET ROLE ex_reader;
SELECT count(*) AS visible_to_reader FROM nl2sql_examples WHERE question = 'Count of gone';
RESET ROLE;
-- The dropped table's OID is cleared (0, shown as '-'): no relation created later, here or in a
-- restored copy of this database, can take its place.
SELECT relations FROM nl2sql_examples WHERE question = 'Count of gone';
-- Also when the role that drops it may not change the store (the event trigger's function is
-- SECURITY DEFINER), and the other relations of the example stay as they were.
CREATE TABLE gone_too (n integer);
ALTER TABLE gone_too OWNER TO ex_reader;
SELECT nl2sql_learn('Orders and gone_too', 'SELECT count(*) FROM orders, gone_too') > 0 AS learned;
SET ROLE ex_reader;
DROP TABLE gone_too;
RESET ROLE;
SELECT relations FROM nl2sql_examples WHERE question = 'Orders and gone_too';

-- What the examples are for: a convention the model cannot guess (status 'R' means refunded).
-- Qwen2.5-Coder 0.5B, greedy: without an example it writes its own guess; with one stored
-- question about something else (paid orders), the database's convention.
DELETE FROM nl2sql_examples;
SET turboinfer.model = 'qwen2.5-coder-0.5b';
RESET turboinfer.max_new_tokens;
SET turboinfer.examples = 0;
SELECT nl2sql('How many orders were refunded?') AS without_examples;
RESET turboinfer.examples;
SELECT nl2sql_learn('How many orders were paid?', $$SELECT count(*) FROM orders WHERE status = 'P'$$) > 0 AS learned;
SELECT nl2sql('How many orders were refunded?') AS with_examples;
SELECT jsonb_array_length(e->'examples') AS n, e->'examples'->0->'similarity' AS similarity,
       (e->'examples'->0->>'id')::bigint = (SELECT id FROM nl2sql_examples) AS the_paid_one
FROM nl2sql_explain('How many orders were refunded?') e;
SELECT * FROM nl2sql_run('How many orders were refunded?');

RESET turboinfer.refusal;
RESET turboinfer.model;
RESET search_path;
DROP SCHEMA shop CASCADE;
DROP EXTENSION turboinfer;
DROP ROLE ex_reader;
DROP ROLE ex_teacher;
