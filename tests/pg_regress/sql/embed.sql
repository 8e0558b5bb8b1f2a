-- turboinfer_embed(text, encoder): sentence embeddings from the all-MiniLM-L6-v2 encoder
-- (src/embed/, src/pg/embed.rs). The values do not depend on the kernel tier: the encoder is
-- scalar code, the same on every CPU.
CREATE EXTENSION turboinfer;
CREATE ROLE embed_user LOGIN;
-- 384 values of unit length.
SELECT array_length(turboinfer_embed('how many users signed up last month?'), 1) AS dim;
SELECT round(sqrt(sum(x::float8 * x))::numeric, 5) AS norm
FROM unnest(turboinfer_embed('how many users signed up last month?')) AS t(x);
-- The first values, rounded: the numpy reference (tests/fixtures/minilm.json) has
-- 0.075075099, -0.11892679, -0.015215954.
SELECT array_agg(round(x::numeric, 5) ORDER BY i) AS first3
FROM unnest(turboinfer_embed('how many users signed up last month?')) WITH ORDINALITY AS t(x, i)
WHERE i <= 3;
-- The same text, the same embedding; the encoder named explicitly is the default one.
SELECT turboinfer_embed('orders by customer') = turboinfer_embed('orders by customer', 'all-minilm-l6-v2') AS same;
-- Cosine similarity is the dot product: a question is closer to the table it is about.
CREATE FUNCTION cosine(a real[], b real[]) RETURNS float8 LANGUAGE sql IMMUTABLE STRICT
AS $$ SELECT sum(x::float8 * y) FROM unnest(a, b) AS t(x, y) $$;
SELECT cosine(q, turboinfer_embed('table orders: order_id, customer_id, order_date'))
     > cosine(q, turboinfer_embed('table telescope_observations: star_name, magnitude')) + 0.1 AS closer
FROM (SELECT turboinfer_embed('how many customers placed an order last week?') AS q) s;
-- Embeddings rank stored texts by meaning (no word in common with the question).
CREATE TABLE docs (id int PRIMARY KEY, body text);
INSERT INTO docs VALUES (1, 'invoices and payments received from clients'),
  (2, 'the hiking trails of the national park'), (3, 'staff salaries and payroll');
SELECT id FROM docs ORDER BY cosine(turboinfer_embed(body), turboinfer_embed('money our customers paid us')) DESC LIMIT 1;
-- STRICT: NULL in, NULL out; an empty text is [CLS] [SEP] and still 384 values.
SELECT turboinfer_embed(NULL) IS NULL AS null_in, array_length(turboinfer_embed(''), 1) AS empty_dim;
-- A long text is truncated at 256 tokens: its embedding equals that of its first 254 words.
SELECT turboinfer_embed(repeat('word ', 5000)) = turboinfer_embed(repeat('word ', 254)) AS truncated;
-- Any role may call it (SECURITY INVOKER; nothing but the models directory is read).
SET ROLE embed_user;
SELECT array_length(turboinfer_embed('hello'), 1) AS dim_as_user;
-- Encoder names are plain directory names inside the models directory: 22023 otherwise; an
-- encoder that is not installed is 58P01, its directory shown to superusers only.
SELECT turboinfer_embed('x', '../models');
\echo :LAST_ERROR_SQLSTATE
SELECT turboinfer_embed('x', '/etc');
\echo :LAST_ERROR_SQLSTATE
SELECT turboinfer_embed('x', '');
\echo :LAST_ERROR_SQLSTATE
SELECT turboinfer_embed('x', 'no-such-encoder');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT turboinfer_embed('x', 'no-such-encoder');
\echo :LAST_ERROR_SQLSTATE
-- A model directory that is not an encoder (a GGUF file is not a directory) is refused alike.
SELECT turboinfer_embed('x', 'smollm2-135m.gguf');
\echo :LAST_ERROR_SQLSTATE
-- After errors the backend's encoder still works.
SELECT array_length(turboinfer_embed('still here'), 1) AS dim_after_errors;
DROP TABLE docs;
DROP FUNCTION cosine(real[], real[]);
DROP ROLE embed_user;
DROP EXTENSION turboinfer;
