-- Follow-up questions (src/pg/conversation.rs): a question asked with follow_up => true is
-- answered after the session's earlier answered questions and their SQL, whose cache rows the
-- previous call left (reused_tokens: not prefilled again). A question asked without it starts
-- the conversation again. Only answered questions enter; the conversation is dropped when the
-- role, the schemas searched or the schema shown to the model change, and by DISCARD ALL; a
-- cancelled call leaves it as it was.
CREATE EXTENSION turboinfer;
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country text);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers,
                     amount numeric(10,2), status text, ordered_at date);
INSERT INTO customers VALUES (1, 'Ann', 'France'), (2, 'Bob', 'Spain'), (3, 'Cy', 'France');
INSERT INTO orders VALUES (1, 1, 10.00, 'shipped', '2024-01-03'), (2, 1, 25.50, 'pending', '2024-02-11'),
                          (3, 2, 7.25, 'shipped', '2024-02-20'), (4, 3, 40.00, 'cancelled', '2024-03-01');
RESET turboinfer.model;
SHOW turboinfer.follow_up_turns;
SHOW turboinfer.follow_up_tokens;
-- A follow-up with nothing before it in this session: answered on its own, with a NOTICE.
SELECT e->'follow_up' AS follow_up FROM nl2sql_explain('How many customers are there?', follow_up => true) e;
-- A conversation: the first question, then two follow-ups, each after the turns before it.
SELECT nl2sql('How many orders are there?');
SELECT e->>'sql' AS sql, jsonb_array_length(e->'follow_up'->'turns') AS turns,
       e->'follow_up'->'turns'->0->>'question' AS first_turn,
       (e->'follow_up'->>'reused_tokens')::int > 0 AS rows_reused, e->>'refusal_check' IS NULL AS not_checked
FROM nl2sql_explain('by status?', follow_up => true) e;
SELECT nl2sql('only the shipped ones', follow_up => true);
-- nl2sql_run answers a follow-up the same way and runs it read-only.
SELECT * FROM nl2sql_run('and their total amount?', follow_up => true);
-- The earlier turns are in the prompt as finished exchanges.
SELECT position('by status?' IN e->>'prompt') > 0 AS in_prompt, jsonb_array_length(e->'follow_up'->'turns') AS turns
FROM nl2sql_explain('how many are there?', follow_up => true) e;
-- A follow-up is asked after the newest turboinfer.follow_up_turns turns.
SET turboinfer.follow_up_turns = 2;
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('what is the largest amount?', follow_up => true) e;
RESET turboinfer.follow_up_turns;
-- Without follow_up the conversation starts again.
SELECT nl2sql('How many customers are there?');
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns, e->>'sql' AS sql
FROM nl2sql_explain('in France?', follow_up => true) e;
-- A refused question in the middle enters nothing: the next follow-up follows the turns before.
SELECT nl2sql('Who painted the Mona Lisa?');
\echo :LAST_ERROR_SQLSTATE
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('list their names', follow_up => true) e;
-- Cancelled mid-turn (statement_timeout interrupts the call between forward passes): the
-- conversation is as it was, and usable (its rows are computed again).
SET statement_timeout = '50ms';
SELECT nl2sql('sorted by name', follow_up => true);
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns, e->>'sql' AS sql
FROM nl2sql_explain('sorted by name', follow_up => true) e;
-- Another role: the conversation is dropped (what one role was shown never reaches another's
-- prompt), with a NOTICE; that role's own questions start its own.
CREATE ROLE follow_up_reader;
GRANT SELECT ON customers, orders TO follow_up_reader;
SET ROLE follow_up_reader;
SELECT e->'follow_up' AS follow_up FROM nl2sql_explain('how many of them are in Spain?', follow_up => true) e;
SELECT nl2sql('How many customers are there?');
RESET ROLE;
SELECT e->'follow_up'->>'dropped' AS dropped FROM nl2sql_explain('and in France?', follow_up => true) e;
-- The schema changed since the turns were asked: dropped, with a NOTICE.
SELECT nl2sql('How many orders are there?');
ALTER TABLE orders ADD COLUMN note text;
SELECT e->'follow_up' AS follow_up FROM nl2sql_explain('by status?', follow_up => true) e;
-- Another search path: dropped.
CREATE SCHEMA other;
SET search_path = other, public;
SELECT e->'follow_up'->>'dropped' AS dropped FROM nl2sql_explain('only the shipped ones', follow_up => true) e;
RESET search_path;
-- DISCARD ALL (what a session-mode pooler runs before the next client) forgets it.
SELECT nl2sql('How many orders are there?');
DISCARD ALL;
SELECT e->'follow_up'->>'dropped' AS dropped FROM nl2sql_explain('by status?', follow_up => true) e;
DROP SCHEMA other;
DROP TABLE orders, customers;
DROP ROLE follow_up_reader;
DROP EXTENSION turboinfer;
