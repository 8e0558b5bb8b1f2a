-- Conversations that never cross clients (src/pg/conversation.rs, issue #80).
-- 1. nl2sql_converse(question, previous): the client carries its conversation as a token; the
--    server keeps nothing, so two clients sharing a backend (a pooler) each follow their own turns.
-- 2. The session's conversation (follow_up => true) changes with the transaction: a call that
--    does not return its answer (rolled back, failed afterwards, cancelled while nl2sql_run
--    executes its SQL) enters nothing.
-- 3. The resets a pooler runs between clients besides DISCARD ALL (RESET ALL, SET SESSION
--    AUTHORIZATION) end the session's conversation.
CREATE EXTENSION turboinfer;
CREATE TABLE customers (id integer PRIMARY KEY, name text NOT NULL, country text);
CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer REFERENCES customers,
                     amount numeric(10,2), status text, ordered_at date);
INSERT INTO customers VALUES (1, 'Ann', 'France'), (2, 'Bob', 'Spain'), (3, 'Cy', 'France');
INSERT INTO orders VALUES (1, 1, 10.00, 'shipped', '2024-01-03'), (2, 1, 25.50, 'pending', '2024-02-11'),
                          (3, 2, 7.25, 'shipped', '2024-02-20'), (4, 3, 40.00, 'cancelled', '2024-03-01');
RESET turboinfer.model;

-- 1. Two clients' conversations interleaved in one backend, each carried by its own token.
SELECT sql, left(conversation, 5) AS token, follow_up FROM nl2sql_converse('How many orders are there?');
SELECT conversation AS client_a FROM nl2sql_converse('How many orders are there?') \gset
SELECT conversation AS client_b FROM nl2sql_converse('How many customers are there?') \gset
SELECT sql, jsonb_path_query_array(follow_up, '$.turns[*].question') AS turns
FROM nl2sql_converse('by status?', :'client_a');
SELECT sql, jsonb_path_query_array(follow_up, '$.turns[*].question') AS turns, conversation AS client_b
FROM nl2sql_converse('in France?', :'client_b') \gset
\echo :sql
\echo :turns
-- Client B's next follow-up follows its two turns; client A's token is unchanged by B's calls.
SELECT jsonb_path_query_array(follow_up, '$.turns[*].question') AS turns
FROM nl2sql_converse('list their names', :'client_b');
SELECT jsonb_path_query_array(follow_up, '$.turns[*].question') AS turns
FROM nl2sql_converse('only the shipped ones', :'client_a');
-- Nothing of either entered the session's own conversation.
SELECT e->'follow_up'->>'dropped' AS dropped FROM nl2sql_explain('by status?', follow_up => true) e;
-- A token is bound to what its turns were asked under: another role's call does not follow it.
CREATE ROLE converse_reader;
GRANT SELECT ON customers, orders TO converse_reader;
SET ROLE converse_reader;
SELECT follow_up FROM nl2sql_converse('by status?', :'client_a');
RESET ROLE;
-- Another search path: not followed either.
CREATE SCHEMA other;
SET search_path = other, public;
SELECT follow_up->>'dropped' AS dropped FROM nl2sql_converse('by status?', :'client_a');
RESET search_path;
-- A value that is not a token: ERROR 22023, nothing generated.
SELECT * FROM nl2sql_converse('by status?', 'not a token');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nl2sql_converse('by status?', 'tic1.e30');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM nl2sql_converse('by status?', 'tic1.' || repeat('A', 300000));
\echo :LAST_ERROR_SQLSTATE
-- A NULL question gives no rows; a refused question raises its error (P0002) and returns no
-- token. (A follow-up is not refusal-checked: "by region?" is no question on its own.)
SELECT count(*) FROM nl2sql_converse(NULL);
SELECT * FROM nl2sql_converse('Who painted the Mona Lisa?');
\echo :LAST_ERROR_SQLSTATE

-- 2. The session's conversation follows the transaction.
SELECT nl2sql('How many orders are there?');
BEGIN;
SELECT nl2sql('How many customers are there?');
-- Inside the transaction the follow-up sees the new turn ...
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('in France?', follow_up => true) e;
ROLLBACK;
-- ... rolled back, none of it entered: the conversation is the one before.
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('by status?', follow_up => true) e;
-- A savepoint rolled back takes back only what it recorded.
BEGIN;
SELECT nl2sql('How many orders are there?');
SAVEPOINT s;
SELECT nl2sql('only the shipped ones', follow_up => true);
ROLLBACK TO SAVEPOINT s;
COMMIT;
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('by status?', follow_up => true) e;
-- A call whose statement fails after the answer (the client never gets it) enters nothing (the
-- turns are the first question and the follow-up nl2sql_explain just answered).
SELECT nl2sql('How many customers are there?'), 1 / 0;
\echo :LAST_ERROR_SQLSTATE
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('what is the largest amount?', follow_up => true) e;
-- nl2sql_run cancelled while it executes the SQL (here a row-security function raising 57014,
-- as statement_timeout would) enters nothing either.
CREATE FUNCTION converse_cancel() RETURNS boolean LANGUAGE plpgsql AS
$$BEGIN RAISE EXCEPTION 'canceling statement due to user request' USING ERRCODE = '57014'; END$$;
ALTER TABLE customers ENABLE ROW LEVEL SECURITY;
CREATE POLICY converse_cancel ON customers USING (converse_cancel());
SET ROLE converse_reader;
SELECT nl2sql('How many orders are there?');
SELECT * FROM nl2sql_run('How many customers are there?');
\echo :LAST_ERROR_SQLSTATE
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('by status?', follow_up => true) e;
RESET ROLE;
DROP POLICY converse_cancel ON customers;
ALTER TABLE customers DISABLE ROW LEVEL SECURITY;

-- 3. Pool resets other than DISCARD ALL end the session's conversation.
SELECT nl2sql('How many orders are there?');
RESET ALL;
SELECT e->'follow_up'->>'dropped' AS dropped FROM nl2sql_explain('by status?', follow_up => true) e;
SELECT nl2sql('How many orders are there?');
SET SESSION AUTHORIZATION DEFAULT;
SELECT e->'follow_up'->>'dropped' AS dropped FROM nl2sql_explain('by status?', follow_up => true) e;
-- A RESET ALL that is rolled back leaves it.
SELECT nl2sql('How many orders are there?');
BEGIN;
RESET ALL;
ROLLBACK;
SELECT jsonb_path_query_array(e->'follow_up'->'turns', '$[*].question') AS turns
FROM nl2sql_explain('by status?', follow_up => true) e;

DROP FUNCTION converse_cancel();
DROP SCHEMA other;
DROP TABLE orders, customers;
DROP ROLE converse_reader;
DROP EXTENSION turboinfer;
