-- The read-only validation of generated SQL (nl2sql_check(sql) applies it without generating):
-- exactly one query; no INTO, no row locks and no data-modifying statement anywhere in it
-- (sub-links, CTEs, set operations, FROM sub-selects, LATERAL, ORDER BY, ...).
CREATE EXTENSION turboinfer;
-- The tables the statements name (validation also resolves every name against the catalog).
CREATE TABLE t (id integer, a integer);
CREATE TABLE u (id integer);
SELECT q, nl2sql_check(q) AS verdict FROM (VALUES
  ('SELECT 1'),
  ('VALUES (1), (2)'),
  ('TABLE pg_class'),
  ('WITH a AS (SELECT 1 AS x) SELECT x FROM a'),
  ('WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r'),
  ('SELECT * FROM t WHERE id IN (SELECT id FROM u) ORDER BY 1 LIMIT 5'),
  ('SELECT * FROM t FOR UPDATE'),
  ('SELECT * FROM t WHERE id IN (SELECT id FROM u FOR UPDATE)'),
  ('SELECT * FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.id = t.id FOR SHARE)'),
  ('SELECT (SELECT max(id) FROM u FOR NO KEY UPDATE) AS m'),
  ('SELECT CASE WHEN true THEN (SELECT 1 FROM u FOR KEY SHARE) END'),
  ('SELECT * FROM t ORDER BY (SELECT 1 FROM u LIMIT 1 FOR UPDATE)'),
  ('WITH x AS (SELECT * FROM t FOR UPDATE) SELECT * FROM x'),
  ('WITH x AS MATERIALIZED (SELECT * FROM (SELECT * FROM t FOR SHARE) s) SELECT * FROM x'),
  ('SELECT * FROM (SELECT * FROM t FOR UPDATE) s'),
  ('SELECT * FROM t JOIN LATERAL (SELECT * FROM u WHERE u.id = t.id FOR UPDATE) s ON true'),
  ('SELECT 1 UNION SELECT id FROM (SELECT id FROM t FOR UPDATE) s'),
  ('(SELECT id FROM t FOR UPDATE) UNION ALL SELECT 2'),
  ('SELECT 1 INTERSECT (SELECT id FROM t FOR SHARE)'),
  ('SELECT * FROM t WHERE id = ANY (ARRAY(SELECT id FROM u FOR UPDATE))'),
  ('WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x'),
  ('WITH x AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM x'),
  ('WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM x'),
  ('WITH a AS (SELECT 1), b AS (WITH c AS (DELETE FROM t RETURNING 1) SELECT * FROM c) SELECT * FROM b'),
  ('SELECT * FROM t WHERE id IN (WITH d AS (DELETE FROM u RETURNING id) SELECT id FROM d)'),
  ('SELECT * INTO new_t FROM t'),
  ('SELECT * FROM t WHERE id IN (SELECT id INTO x FROM u)'),
  ('DELETE FROM t'),
  ('WITH x AS (SELECT 1) DELETE FROM t'),
  ('EXPLAIN SELECT 1'),
  ('SELECT 1; SELECT 2'),
  ('SELEC 1'),
  ('')
) v(q);
DROP TABLE t, u;
DROP EXTENSION turboinfer;
