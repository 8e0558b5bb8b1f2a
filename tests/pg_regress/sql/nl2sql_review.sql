-- Doubts: statements PostgreSQL accepts whose result can hardly be what was asked.
--  * nl2sql_review() is nl2sql_check() plus the doubts nl2sql() sends back to the model once:
--    GROUP BY columns the result does not show, SUM/AVG over identifiers (primary or foreign
--    keys), a result column repeated, keys of different tables compared, a ratio of integers;
--    each with the facts a repair round gets;
--  * the engine's own fix when a doubt has one (no model round): a GROUP BY on a hidden key removed,
--    1.0 * written before an integer dividend;
--  * the ordinary forms of the same queries raise no doubt;
--  * it never runs the statement, and sees only what analysis sees (the caller's privileges).
CREATE EXTENSION turboinfer;
CREATE SCHEMA shop;
CREATE TABLE shop.customers (id integer PRIMARY KEY, name text, state text);
CREATE TABLE shop.products (id integer PRIMARY KEY, name text, cost numeric);
CREATE TABLE shop.sales (id integer PRIMARY KEY, customer_id integer REFERENCES shop.customers,
                         product_id integer REFERENCES shop.products, price numeric, sold_on date);
SET search_path = shop, public;

-- A figure asked for once, grouped by a key the result does not show: one unlabeled row per key.
-- nl2sql() removes such a GROUP BY itself (the figure over all rows) when nothing at the top
-- depends on the groups (HAVING, LIMIT, OFFSET, DISTINCT, a window); otherwise the model decides.
SELECT nl2sql_review('SELECT count(*), sum(s.price) FROM sales s WHERE s.sold_on >= CURRENT_DATE - 30 GROUP BY s.customer_id') AS hidden_group;
SELECT nl2sql_review('SELECT count(*) / count(s.product_id), max(s.price) FROM sales s GROUP BY s.id ORDER BY 2 DESC') AS hidden_key_and_ratio;
SELECT nl2sql_review('SELECT max(s.price) FROM sales s GROUP BY s.customer_id ORDER BY 1 DESC LIMIT 1') AS hidden_group_top_one;
SELECT nl2sql_review('SELECT count(*) FROM sales s GROUP BY s.customer_id HAVING count(*) > 2') AS hidden_group_having;
SELECT nl2sql_review('SELECT sum(price) FROM sales GROUP BY sold_on') AS hidden_non_key;
SELECT nl2sql_review('SELECT avg(price) FROM sales GROUP BY date_part(''year'', sold_on)') AS hidden_expression;
-- Shown, directly or through an expression of the result: no doubt.
SELECT nl2sql_review('SELECT s.customer_id, count(*) FROM sales s GROUP BY s.customer_id') AS group_shown;
SELECT nl2sql_review('SELECT to_char(date_trunc(''month'', sold_on), ''YYYY-MM''), sum(price) FROM sales GROUP BY date_trunc(''month'', sold_on)') AS shown_formatted;
SELECT nl2sql_review('SELECT count(*) FROM sales') AS one_figure;
-- Inside a sub-query a hidden group is ordinary (an average of per-customer counts).
SELECT nl2sql_review('SELECT avg(n) FROM (SELECT count(*) AS n FROM sales GROUP BY customer_id) t') AS nested_group;

-- Identifiers added up, also inside arithmetic and CASE results; the quantities suggested.
SELECT nl2sql_review('SELECT c.state, sum(s.customer_id) FROM sales s JOIN customers c ON c.id = s.customer_id GROUP BY c.state') AS summed_reference;
SELECT nl2sql_review('SELECT avg(s.price - p.id) FROM sales s JOIN products p ON p.id = s.product_id') AS key_in_arithmetic;
-- Counted, compared or conditioned on: no doubt.
SELECT nl2sql_review('SELECT count(DISTINCT customer_id), sum(CASE WHEN product_id = 1 THEN price ELSE 0 END) FROM sales') AS counted;

-- Keys of different tables compared; the declared foreign keys given as the way to join.
SELECT nl2sql_review('SELECT c.name, s.price FROM sales s JOIN customers c ON c.id = s.product_id') AS wrong_join;
SELECT nl2sql_review('SELECT c.name FROM customers c, products p WHERE c.id = p.id') AS keys_compared;
SELECT nl2sql_review('SELECT c.name, p.name FROM sales s JOIN customers c ON c.id = s.customer_id JOIN products p ON p.id = s.product_id') AS declared_joins;
-- A column compared with itself joins nothing.
SELECT nl2sql_review('SELECT count(*) FROM sales s JOIN customers c ON s.customer_id = s.customer_id') AS self_join;

-- A result column repeated (whatever its labels); the same column from two tables is not.
SELECT nl2sql_review('SELECT s.id, s.price, s.id AS sale FROM sales s') AS repeated;
SELECT nl2sql_review('SELECT s.id, c.id FROM sales s JOIN customers c ON c.id = s.customer_id') AS two_ids;

-- A ratio of integers is cut to a whole number (in a sub-query too); nl2sql() writes 1.0 * before
-- the dividend itself when that leaves no doubt. A constant divisor, a numeric side: no doubt.
SELECT nl2sql_review('SELECT c.state, count(*) FILTER (WHERE s.price > 10) / count(*) AS share FROM sales s JOIN customers c ON c.id = s.customer_id GROUP BY c.state') AS integer_ratio;
SELECT nl2sql_review('SELECT * FROM (SELECT (SELECT count(*) FROM sales) / (SELECT count(*) FROM customers) AS per_customer) t') AS nested_ratio;
SELECT nl2sql_review('SELECT count(*) / 2, sum(price) / count(*), 1.0 * count(*) / count(DISTINCT customer_id), count(*)::numeric / nullif(count(product_id), 0) FROM sales') AS exact_ratios;

-- Several doubts in one message; a rejected statement gets the rejection, as nl2sql_check.
SELECT nl2sql_review('SELECT sum(s.id) FROM sales s JOIN customers c ON c.id = s.product_id GROUP BY c.state') AS several;
SELECT nl2sql_review('SELECT s.total FROM sales s') = nl2sql_check('SELECT s.total FROM sales s') AS rejected_as_check;
SELECT nl2sql_check('SELECT count(*) FROM sales GROUP BY customer_id') IS NULL AS check_ignores_doubts;

-- Never executed, never writes, privileges as analysis checks them.
CREATE TABLE shop.calls (n integer);
CREATE FUNCTION shop.bump() RETURNS integer LANGUAGE sql VOLATILE AS 'INSERT INTO shop.calls VALUES (1) RETURNING n';
SELECT nl2sql_review('SELECT bump()') AS volatile_refused;
SELECT count(*) AS calls FROM shop.calls;
CREATE ROLE review_reader;
GRANT USAGE ON SCHEMA shop TO review_reader;
GRANT SELECT (id, price) ON shop.sales TO review_reader;
SET ROLE review_reader;
SELECT nl2sql_review('SELECT sum(id) FROM sales') AS reader_doubt;
SELECT nl2sql_review('SELECT sum(customer_id) FROM sales') AS reader_no_privilege;
RESET ROLE;
DROP OWNED BY review_reader;
DROP ROLE review_reader;
DROP SCHEMA shop CASCADE;
DROP EXTENSION turboinfer;
