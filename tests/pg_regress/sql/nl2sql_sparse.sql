-- Sparse FFN from SQL (SmolLM2, mechanics only): the turboinfer.sparsity and sparse_dir settings,
-- turboinfer_calibrate() (superuser only, cancellable), nl2sql_explain(..., sparsity => s), the
-- schema-prefix cache keeping sparse and dense prefixes apart, and clear errors for a missing,
-- uncalibrated or damaged sidecar. No timings are shown.
CREATE EXTENSION turboinfer;
SELECT turboinfer_cache_clear() >= 0 AS cleared;

-- The SQL surface.
SELECT p.proname, pg_get_function_arguments(p.oid) AS args, p.provolatile, p.proisstrict, p.proparallel,
       pg_get_function_result(p.oid) AS result
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'turboinfer'
WHERE p.proname IN ('turboinfer_calibrate', 'nl2sql_explain')
ORDER BY p.proname;
SELECT name, setting, context, vartype, min_val, max_val FROM pg_settings
WHERE name IN ('turboinfer.sparsity', 'turboinfer.sparse_dir', 'turboinfer.sparse_selector') ORDER BY name;
SELECT enumvals FROM pg_settings WHERE name = 'turboinfer.sparse_selector';
SET turboinfer.sparsity = 1;
SET turboinfer.sparsity = -0.1;

-- Error fields of a statement, with the data directory shown as $PGDATA (roles that may not
-- see data_directory get the text unchanged).
CREATE FUNCTION sparse_err(q text) RETURNS TABLE (sqlstate text, message text, detail text, hint text)
LANGUAGE plpgsql AS $$
DECLARE s text; m text; d text; h text;
    dd text := (SELECT setting FROM pg_settings WHERE name = 'data_directory');
BEGIN
    EXECUTE q;
    RETURN QUERY SELECT 'none'::text, NULL::text, NULL::text, NULL::text;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN QUERY SELECT s, coalesce(replace(m, dd, '$PGDATA'), m), coalesce(replace(d, dd, '$PGDATA'), d), h;
END $$;

SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 4;
CREATE SCHEMA sp;
CREATE TABLE sp.users (id integer PRIMARY KEY, name text NOT NULL);
SET search_path = sp, public;
\x on

-- Sparsity set, no sidecar anywhere: an ERROR naming the searched files, with a hint.
SET turboinfer.sparse_dir = 'turboinfer_sparse_regress_empty';
SET turboinfer.sparsity = 0.5;
SELECT * FROM sparse_err($$SELECT nl2sql('how many users?')$$);
SELECT * FROM sparse_err($$SELECT nl2sql_explain('how many users?', sparsity => 0.3)$$);
-- Off for one call: dense, no sidecar needed.
SELECT e->'sparsity' AS sparsity FROM nl2sql_explain('how many users?', sparsity => 0) e;
SELECT i->'sparse' AS sparse FROM turboinfer_info() i;
RESET turboinfer.sparsity;

-- Only a superuser may calibrate or move the sidecar directory; others see file names only.
CREATE ROLE nl2sql_sparse_user;
GRANT USAGE ON SCHEMA sp TO nl2sql_sparse_user;
GRANT SELECT ON sp.users TO nl2sql_sparse_user;
SET ROLE nl2sql_sparse_user;
SELECT * FROM sparse_err($$SET turboinfer.sparse_dir = '/tmp'$$);
SELECT * FROM sparse_err($$SELECT * FROM turboinfer_calibrate(tokens => 16)$$);
SELECT * FROM sparse_err($$SELECT nl2sql_explain('how many users?', sparsity => 0.5)$$);
RESET ROLE;

-- Argument checks come before any work.
SELECT * FROM sparse_err($$SELECT * FROM turboinfer_calibrate(levels => '{}')$$);
SELECT * FROM sparse_err($$SELECT * FROM turboinfer_calibrate(levels => '{0.5,0.99}')$$);
SELECT * FROM sparse_err($$SELECT * FROM turboinfer_calibrate(tokens => 4)$$);
SELECT * FROM sparse_err($$SELECT * FROM turboinfer_calibrate(corpus => ARRAY['/nonexistent/corpus.txt'])$$);

-- Calibration with tiny parameters (seconds): the sidecar lands in turboinfer.sparse_dir.
SET turboinfer.sparse_dir = 'turboinfer_sparse_regress';
SELECT replace(sidecar, current_setting('data_directory'), '$PGDATA') AS sidecar, model, levels, rank, tokens, layers,
       bytes > 0 AS has_bytes, array_length(mean_recall, 1) AS recall_levels, seconds > 0 AS timed
FROM turboinfer_calibrate(levels => '{0.5,0.3}', rank => 8, tokens => 64);
SELECT replace(i->'sparse'->>'sidecar', current_setting('data_directory'), '$PGDATA') AS sidecar,
       i->'sparse'->'levels' AS levels, i->'sparse'->'rank' AS rank, i->'sparse'->'attached' AS attached
FROM turboinfer_info() i;

-- Dense (computed by the call above): reused from memory.
SELECT e->>'cache' AS cache, e->'sparsity' AS sparsity FROM nl2sql_explain('how many users?') e;
SELECT e->>'cache' AS cache, e->>'fingerprint' AS dense_fp FROM nl2sql_explain('how many users?') e \gset
-- Sparse per call: the dense prefix in memory (and in its cache file) is not used.
SELECT e->>'cache' AS cache, e->>'fingerprint' <> :'dense_fp' AS other_fingerprint,
       e->'sparsity'->'level' AS level, e->'sparsity'->>'source' AS source, e->'sparsity'->>'selector' AS selector,
       replace(e->'sparsity'->>'sidecar', current_setting('data_directory'), '$PGDATA') AS sidecar,
       (e->'sparsity'->>'tokens')::int > 0 AS sparse_tokens,
       (e->'sparsity'->>'predicted_active_ratio')::float8 BETWEEN 0 AND 1 AS ratio_ok,
       (e->'sparsity'->>'fallback_rate')::float8 BETWEEN 0 AND 1 AS fallback_ok,
       (e->'sparsity'->>'ffn_ms')::float8 >= 0 AS has_ffn_ms
FROM nl2sql_explain('how many users?', sparsity => 0.5) e;
SELECT e->>'cache' AS cache, e->>'fingerprint' AS sparse_fp FROM nl2sql_explain('how many users?', sparsity => 0.5) e \gset
-- Another level is another key.
SELECT e->>'cache' AS cache, e->>'fingerprint' NOT IN (:'dense_fp', :'sparse_fp') AS other_fingerprint,
       e->'sparsity'->'level' AS level
FROM nl2sql_explain('how many users?', sparsity => 0.3) e;
-- So is another selector.
SET turboinfer.sparse_selector = gate;
SELECT e->>'cache' AS cache, e->>'fingerprint' NOT IN (:'dense_fp', :'sparse_fp') AS other_fingerprint,
       e->'sparsity'->>'selector' AS selector, (e->'sparsity'->>'tokens')::int > 0 AS sparse_tokens
FROM nl2sql_explain('how many users?', sparsity => 0.5) e;
RESET turboinfer.sparse_selector;
-- Back to dense: its own cache file, its own fingerprint.
SELECT e->>'cache' AS cache, e->>'fingerprint' = :'dense_fp' AS dense_fingerprint FROM nl2sql_explain('how many users?') e;

-- A new backend with the setting: served from the sparse file, never the dense one.
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 4;
SET turboinfer.sparse_dir = 'turboinfer_sparse_regress';
SET search_path = sp, public;
SET turboinfer.sparsity = 0.5;
SELECT e->>'cache' AS cache, e->>'fingerprint' = :'sparse_fp' AS sparse_fingerprint,
       e->'sparsity'->'level' AS level, e->'sparsity'->>'source' AS source
FROM nl2sql_explain('how many users?') e;
SELECT i->'sparse'->'attached' AS attached, i->'sparse'->'sparsity' AS sparsity FROM turboinfer_info() i;

-- A level that was not calibrated, or out of range: ERROR with the calibrated levels.
SET turboinfer.sparsity = 0.4;
SELECT * FROM sparse_err($$SELECT nl2sql_explain('how many users?')$$);
SELECT * FROM sparse_err($$SELECT nl2sql_explain('how many users?', sparsity => 0.99)$$);
RESET turboinfer.sparsity;

-- Calibration is cancellable: statement_timeout stops it between forward passes; nothing is
-- written (the sidecar keeps its levels) and the backend carries on, dense.
SET statement_timeout = '300ms';
-- Terse: a server started with RUST_BACKTRACE=1 adds a backtrace DETAIL to re-raised errors.
\set VERBOSITY terse
SELECT * FROM turboinfer_calibrate(levels => '{0.7}', tokens => 8192, rank => 8);
\set VERBOSITY default
RESET statement_timeout;
SELECT e->>'cache' AS cache, e->'sparsity' AS sparsity FROM nl2sql_explain('how many users?') e;
SELECT i->'sparse'->'levels' AS levels FROM turboinfer_info() i;

-- A damaged sidecar (overwritten with text): a clear ERROR, and the backend survives.
SELECT i->'sparse'->>'sidecar' AS sidecar_file FROM turboinfer_info() i \gset
COPY (SELECT 'not a sidecar') TO :'sidecar_file';
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 4;
SET turboinfer.sparse_dir = 'turboinfer_sparse_regress';
SET search_path = sp, public;
SELECT * FROM sparse_err($$SELECT nl2sql_explain('how many users?', sparsity => 0.5)$$);
SET turboinfer.sparsity = 0.5;
SELECT * FROM sparse_err($$SELECT nl2sql('how many users?')$$);
SELECT i->'sparse'->>'error' LIKE '%not a turboinfer sparse sidecar%' AS reported FROM turboinfer_info() i;
RESET turboinfer.sparsity;
SELECT e->>'cache' AS cache, e->'sparsity' AS sparsity FROM nl2sql_explain('how many users?') e;
-- Recalibrating replaces it.
SELECT levels, tokens FROM turboinfer_calibrate(levels => '{0.5}', rank => 4, tokens => 32);
SELECT e->'sparsity'->'level' AS level FROM nl2sql_explain('how many users?', sparsity => 0.5) e;
\x off

SELECT turboinfer_cache_clear() >= 1 AS cleared;
RESET search_path;
DROP SCHEMA sp CASCADE;
DROP ROLE nl2sql_sparse_user;
DROP FUNCTION sparse_err(text);
DROP EXTENSION turboinfer;
