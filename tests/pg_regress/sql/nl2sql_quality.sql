-- SQL quality with the Qwen2.5-Coder 0.5B model on a demo-like schema: the generated query,
-- executed in a read-only transaction, returns the right answer.
CREATE EXTENSION turboinfer;
SET turboinfer.model = 'qwen2.5-coder-0.5b';
CREATE SCHEMA shop;
SET search_path = shop, public;
CREATE TABLE countries (country_code char(2) PRIMARY KEY, name text NOT NULL UNIQUE, continent text NOT NULL);
COMMENT ON TABLE countries IS 'Countries the shop ships to.';
CREATE TABLE users (user_id integer PRIMARY KEY, email text NOT NULL UNIQUE, full_name text NOT NULL,
                    country_code char(2) NOT NULL REFERENCES countries, signed_up_at timestamptz NOT NULL);
COMMENT ON TABLE users IS 'Registered customers of the shop.';
CREATE TABLE orders (order_id integer PRIMARY KEY, user_id integer NOT NULL REFERENCES users,
                     status text NOT NULL, ordered_at timestamptz NOT NULL);
INSERT INTO countries VALUES ('FR', 'France', 'Europe'), ('JP', 'Japan', 'Asia');
INSERT INTO users SELECT i, 'u' || i || '@example.com', 'User ' || i, CASE WHEN i % 3 = 0 THEN 'JP' ELSE 'FR' END,
                         timestamptz '2024-01-01' + i * interval '1 day'
FROM generate_series(1, 37) i;
INSERT INTO orders SELECT i, 1 + i % 37, 'paid', timestamptz '2024-06-01' + i * interval '1 hour' FROM generate_series(1, 90) i;

-- Runs a one-value query (the test's own helper; nl2sql never executes anything).
CREATE FUNCTION run_scalar(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE r bigint;
BEGIN
  EXECUTE q INTO r;
  RETURN r;
END $$;

-- The query is one SELECT that counts users; run read-only, it gives the true count.
SELECT nl2sql('how many users?') AS q \gset
SELECT :'q' ~* '^\s*select' AS is_select, :'q' ~* 'users' AS mentions_users, position(';' in :'q') = 0 AS no_semicolon;
BEGIN TRANSACTION READ ONLY;
SELECT run_scalar(:'q') = (SELECT count(*) FROM shop.users) AS correct_count;
COMMIT;
-- Asking again reuses the schema prefix and gives the same query.
SELECT e->>'cache' AS cache, e->>'sql' = :'q' AS same_sql, (e->>'valid')::bool AS valid FROM nl2sql_explain('how many users?') e;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA shop CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
