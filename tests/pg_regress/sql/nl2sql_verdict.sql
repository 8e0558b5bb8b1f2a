-- The verdict of an answer (src/nl2sql/verdict.rs, src/pg/verdict.rs): sure, or unsure with
-- reasons a user can act on. nl2sql_explain reports it (`verdict`); nl2sql raises a NOTICE for
-- an unsure answer; nl2sql_run does too, once it knows the rows (none is one more reason);
-- turboinfer.unsure = error makes both raise ERROR P0004 instead of answering, ignore silences
-- them. The figures behind it (answer_logprob, the refusal check's) are in the explain report.
CREATE EXTENSION turboinfer;
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country text);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers,
                     amount numeric(10,2), status text, ordered_at date);
INSERT INTO customers VALUES (1, 'Ann', 'France'), (2, 'Bob', 'Spain'), (3, 'Cy', 'France');
INSERT INTO orders VALUES (1, 1, 10.00, 'shipped', '2024-01-03'), (2, 1, 25.50, 'pending', '2024-02-11'),
                          (3, 2, 7.25, 'shipped', '2024-02-20'), (4, 3, 40.00, 'cancelled', '2024-03-01');
RESET turboinfer.model;
SHOW turboinfer.unsure;
-- A plain question: sure, no reason; nl2sql answers without a NOTICE.
SELECT e->>'sql' AS sql, e->'verdict' AS verdict, e->'answer_logprob' IS NOT NULL AS scored
FROM nl2sql_explain('How many orders are there?') e;
SELECT nl2sql('How many orders are there?');
-- Sure when run too: it returns rows.
SELECT * FROM nl2sql_run('How many orders are there?');
-- A question whose query computes with dates: unsure, with the reason and what to do.
SELECT e->>'sql' AS sql, e->'verdict'->'sure' AS sure,
       jsonb_path_query_array(e->'verdict', '$.reasons[*].code') AS reasons
FROM nl2sql_explain('How many orders were placed in each month of 2024?') e;
SELECT nl2sql('How many orders were placed in each month of 2024?');
-- A value no row of its column holds: nl2sql_explain looks up, as the caller, the values the
-- query compares text columns with (value_not_found) ...
SELECT e->>'sql' AS sql, e->'verdict'->'sure' AS sure,
       jsonb_path_query_array(e->'verdict', '$.reasons[*].code') AS reasons
FROM nl2sql_explain('List the names of the customers from Germany') e;
-- ... nl2sql_run too, and it knows the rows: none is one more reason.
SELECT * FROM nl2sql_run('List the names of the customers from Germany');
-- A count over no match is one row (0): the missing value is what tells.
SELECT * FROM nl2sql_run('How many customers are from Germany?');
-- A value that is there: no such reason.
SELECT e->>'sql' AS sql, jsonb_path_query_array(e->'verdict', '$.reasons[*].code') AS reasons
FROM nl2sql_explain('How many customers are from France?') e;
-- Looked up as the caller: under row-level security that hides those rows from a role, the
-- value is not there for it.
CREATE ROLE verdict_reader;
GRANT SELECT ON customers, orders TO verdict_reader;
ALTER TABLE customers ENABLE ROW LEVEL SECURITY;
CREATE POLICY spain_only ON customers FOR SELECT TO verdict_reader USING (country = 'Spain');
SET ROLE verdict_reader;
SELECT e->>'sql' AS sql, jsonb_path_query_array(e->'verdict', '$.reasons[*].code') AS reasons
FROM nl2sql_explain('How many customers are from France?') e;
RESET ROLE;
DROP POLICY spain_only ON customers;
ALTER TABLE customers DISABLE ROW LEVEL SECURITY;
REVOKE ALL ON customers, orders FROM verdict_reader;
DROP ROLE verdict_reader;
-- Joins the catalog can judge: a table joined on its unique key and not used (the join only
-- drops rows: needless_join), a table joined with itself (self_join: which side is which?).
-- Approved examples of the very questions make the model write those joins.
SELECT nl2sql_learn('Which customers live in the same country as Ann?',
  $$SELECT c2.name FROM customers c1 JOIN customers c2 ON c2.country = c1.country WHERE c1.name = 'Ann' AND c2.id <> c1.id$$) > 0 AS learned;
SELECT nl2sql_learn('List the amounts of the orders of known customers',
  $$SELECT o.amount FROM orders o JOIN customers c ON c.id = o.customer_id$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query(e->'verdict', '$.reasons[*] ? (@.code == "self_join")') AS reason
FROM nl2sql_explain('Which customers live in the same country as Ann?') e;
SELECT e->>'sql' AS sql, jsonb_path_query(e->'verdict', '$.reasons[*] ? (@.code == "needless_join")') AS reason
FROM nl2sql_explain('List the amounts of the orders of known customers') e;
-- A condition that mixes AND and OR without parentheses (and_or: AND binds first).
-- (Here it is even what the question means: the reason asks to check, not that it is wrong.)
SELECT nl2sql_learn('Names of the customers in France, or in Spain and called Bob',
  $$SELECT name FROM customers WHERE country = 'France' OR country = 'Spain' AND name = 'Bob'$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query(e->'verdict', '$.reasons[*] ? (@.code == "and_or")') AS reason
FROM nl2sql_explain('Names of the customers in France, or in Spain and called Bob') e;
-- The same join written the other way round (the unused table on the join's left side).
SELECT nl2sql_learn('Amounts of the orders placed by customers',
  $$SELECT o.amount FROM customers c JOIN orders o ON c.id = o.customer_id$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query(e->'verdict', '$.reasons[*] ? (@.code == "needless_join")') AS reason
FROM nl2sql_explain('Amounts of the orders placed by customers') e;
-- A number of the question nowhere in the query (number_not_used): "the 2 largest" without
-- LIMIT 2. A date of the question written as the query writes it counts as there.
SELECT nl2sql_learn('List the 2 largest orders',
  $$SELECT id, amount FROM orders ORDER BY amount DESC$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query(e->'verdict', '$.reasons[*] ? (@.code == "number_not_used")') AS reason
FROM nl2sql_explain('List the 2 largest orders') e;
SELECT nl2sql_learn('Orders placed on Feb 11, 2024',
  $$SELECT id FROM orders WHERE ordered_at = '2024-02-11'$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query_array(e->'verdict', '$.reasons[*].code') AS reasons
FROM nl2sql_explain('Orders placed on Feb 11, 2024') e;
-- IS NOT NULL on a column declared NOT NULL filters nothing (filters_nothing: the catalog
-- answers); on a column that may be NULL, or after an outer join, it is a filter.
SELECT nl2sql_learn('Which customers have a name?',
  $$SELECT id FROM customers WHERE name IS NOT NULL$$) > 0 AS learned;
SELECT nl2sql_learn('Which customers have a country?',
  $$SELECT id FROM customers WHERE country IS NOT NULL$$) > 0 AS learned;
SELECT nl2sql_learn('Which customers have placed orders?',
  $$SELECT DISTINCT c.id FROM customers c LEFT JOIN orders o ON o.customer_id = c.id WHERE o.id IS NOT NULL$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query(e->'verdict', '$.reasons[*] ? (@.code == "filters_nothing")') AS reason
FROM nl2sql_explain('Which customers have a name?') e;
SELECT e->>'sql' AS sql, jsonb_path_exists(e->'verdict', '$.reasons[*] ? (@.code == "filters_nothing")') AS filters_nothing
FROM nl2sql_explain('Which customers have a country?') e;
SELECT e->>'sql' AS sql, jsonb_path_exists(e->'verdict', '$.reasons[*] ? (@.code == "filters_nothing")') AS filters_nothing
FROM nl2sql_explain('Which customers have placed orders?') e;
-- The unused table on a join's left side is no reason when a COUNT(*) counts its rows:
-- orders per customer.
SELECT nl2sql_learn('How many orders has each customer placed?',
  $$SELECT c.name, COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.name$$) > 0 AS learned;
SELECT e->>'sql' AS sql, jsonb_path_query_array(e->'verdict', '$.reasons[*].code') AS reasons
FROM nl2sql_explain('How many orders has each customer placed?') e;
SELECT count(nl2sql_forget(id)) AS forgotten FROM nl2sql_examples;
-- turboinfer.unsure = error: ERROR P0004 instead of the answer, the query in the DETAIL.
SET turboinfer.unsure = error;
SELECT nl2sql('How many orders were placed in each month of 2024?');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nl2sql_run('List the names of the customers from Germany');
\echo :LAST_ERROR_SQLSTATE
-- A sure answer is returned as always.
SELECT nl2sql('How many orders are there?');
-- nl2sql_explain reports the verdict whatever the setting, and raises nothing.
SELECT e->'verdict'->'sure' AS sure FROM nl2sql_explain('How many orders were placed in each month of 2024?') e;
-- ignore: the answer without a message.
SET turboinfer.unsure = ignore;
SELECT nl2sql('How many orders were placed in each month of 2024?');
SELECT * FROM nl2sql_run('List the names of the customers from Germany');
RESET turboinfer.unsure;
-- A value that is not one of the setting's.
SET turboinfer.unsure = maybe;
-- No accepted answer, no verdict: a refused question.
SELECT e->>'refused' AS refused, e->'verdict' AS verdict FROM nl2sql_explain('Who painted the Mona Lisa?') e;
DROP TABLE orders, customers;
DROP EXTENSION turboinfer;
