-- Semantic validation and what the model is shown on real schemas:
--  * nl2sql_check() analyses a statement against the live catalog with the caller's privileges
--    and search_path (names, types, functions, grouping, privileges), never executing it, and
--    says what the repair round would tell the model (the real columns, the closest names);
--  * functions with side effects are refused, and validation calls no function at all;
--  * validation assigns no transaction id (works in READ ONLY transactions);
--  * tables outside the search path are shown (and written) schema-qualified;
--  * value notes come from pg_stats, only for columns the role may SELECT;
--  * an explicit schema list shows nothing from a schema the role has no USAGE on.
CREATE EXTENSION turboinfer;
CREATE SCHEMA shop;
CREATE TABLE shop.customers (id integer PRIMARY KEY, name text, status text, secret_note text);
CREATE TABLE shop.orders (id integer PRIMARY KEY, customer_id integer REFERENCES shop.customers, total_price numeric, placed_at timestamp);
INSERT INTO shop.customers SELECT g, 'c' || g, (ARRAY['active', 'inactive', 'banned'])[1 + g % 3], (ARRAY['vip', 'watch'])[1 + g % 2] FROM generate_series(1, 300) g;
INSERT INTO shop.orders SELECT g, 1 + g % 300, g * 1.5, timestamp '2023-01-01' + g * interval '1 hour' FROM generate_series(1, 3000) g;
CREATE SEQUENCE shop.ids;
ANALYZE shop.customers, shop.orders;
SET search_path = shop, public;

-- Names that do not resolve, with the catalog facts a repair round adds.
SELECT nl2sql_check('SELECT c.total_price FROM customers c JOIN orders o ON o.customer_id = c.id') AS wrong_alias;
SELECT nl2sql_check('SELECT o.cust_id FROM orders o') AS close_name;
SELECT nl2sql_check('SELECT count(*) FROM customer') AS no_such_table;
SELECT nl2sql_check('SELECT orders.id FROM customers') AS missing_from;
-- Types, functions, operators and grouping are checked too.
SELECT nl2sql_check('SELECT DATEDIFF(''day'', placed_at, now()) FROM orders') AS other_dialect;
SELECT nl2sql_check('SELECT count(*) FROM orders WHERE placed_at LIKE ''2023-03-%''') AS date_like;
SELECT nl2sql_check('SELECT status, count(*) FROM customers') AS grouping;
SELECT nl2sql_check('SELECT c.status, sum(o.total_price) FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.status') AS fine;

-- Side effects: volatile functions are refused (a few harmless ones excepted), and nothing the
-- statement names is ever called by validation, whatever its volatility.
CREATE TABLE shop.calls (n integer);
CREATE FUNCTION shop.bump() RETURNS integer LANGUAGE sql VOLATILE AS 'INSERT INTO shop.calls VALUES (1) RETURNING n';
CREATE FUNCTION shop.sneaky() RETURNS text LANGUAGE plpgsql STABLE AS $$BEGIN PERFORM set_config('nl2sql.touched', 'yes', false); RETURN 'x'; END$$;
SELECT nl2sql_check('SELECT bump()') AS volatile_refused;
SELECT nl2sql_check('SELECT set_config(''default_transaction_read_only'', ''off'', false)') AS set_config_refused;
SELECT nl2sql_check('SELECT pg_advisory_lock(1)') AS advisory_refused;
SELECT nl2sql_check('SELECT x FROM (SELECT nextval(''shop.ids'') AS x) s') AS sequence_refused;
SELECT nl2sql_check('SELECT id FROM orders ORDER BY random() LIMIT 1') AS random_allowed;
SELECT nl2sql_check('SELECT sneaky()') AS stable_accepted;
SELECT count(*) AS bump_calls FROM shop.calls;
SELECT current_setting('nl2sql.touched', true) IS NULL AS sneaky_not_called;

-- No transaction id, and READ ONLY transactions are fine.
BEGIN READ ONLY;
SELECT nl2sql_check('SELECT c.total_price FROM customers c') IS NOT NULL AS rejected, nl2sql_check('SELECT count(*) FROM orders') IS NULL AS accepted;
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
COMMIT;

-- Privileges: a column the role may not read is refused by validation, and its values never
-- reach the prompt; the superuser's prompt has them.
CREATE ROLE nl2sql_semantic;
GRANT USAGE ON SCHEMA shop TO nl2sql_semantic;
GRANT SELECT (id, name, status) ON shop.customers TO nl2sql_semantic;
GRANT SELECT ON shop.orders TO nl2sql_semantic;
GRANT EXECUTE ON FUNCTION nl2sql_check(text) TO nl2sql_semantic;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.repair_rounds = 0;
SELECT e->>'prompt' LIKE '%''vip''%' AS values_shown, e->>'prompt' LIKE '%status: values: ''active'', ''banned'', ''inactive''%' AS status_values
FROM nl2sql_explain('how many customers?') e;
-- A whole nl2sql call (catalog, prompt, generation, validation) takes no transaction id either.
BEGIN READ ONLY;
SELECT e->>'valid' IS NOT NULL AS answered FROM nl2sql_explain('how many orders?') e;
SELECT pg_current_xact_id_if_assigned() IS NULL AS no_xid;
COMMIT;
SET ROLE nl2sql_semantic;
SELECT nl2sql_check('SELECT secret_note FROM customers') AS column_denied;
SELECT nl2sql_check('SELECT name FROM customers') AS column_allowed;
SELECT e->>'prompt' LIKE '%secret_note%' AS column_shown, e->>'prompt' LIKE '%''vip''%' AS values_shown,
       e->>'prompt' LIKE '%status: values: ''active'', ''banned'', ''inactive''%' AS status_values
FROM nl2sql_explain('how many customers?') e;
RESET ROLE;

-- Tables outside the search path: shown, and written, schema-qualified.
SET search_path = public;
SELECT e->'tables_shown' AS shown, e->>'prompt' LIKE '%CREATE TABLE shop.orders (%REFERENCES shop.customers(id)%' AS qualified
FROM nl2sql_explain('how many orders?') e;
SELECT nl2sql_check('SELECT count(*) FROM shop.orders') AS qualified_ok;

-- An explicit schema list shows nothing from a schema without USAGE, even with SELECT granted.
CREATE SCHEMA hidden_s;
CREATE TABLE hidden_s.hidden_tab (id integer);
GRANT SELECT ON hidden_s.hidden_tab TO nl2sql_semantic;
SET ROLE nl2sql_semantic;
SELECT e->'tables_shown' AS shown FROM nl2sql_explain('how many?', ARRAY['shop', 'hidden_s']) e;
SELECT nl2sql('how many?', ARRAY['hidden_s']);
RESET ROLE;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA shop, hidden_s CASCADE;
RESET client_min_messages;
DROP OWNED BY nl2sql_semantic;
DROP ROLE nl2sql_semantic;
DROP EXTENSION turboinfer;
