-- nl2sql(): SQL surface, argument checks, settings and model errors (no generation needed).
CREATE EXTENSION turboinfer;

-- Volatility, strictness, parallel safety, security and result types of the nl2sql functions.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, p.provolatile, p.proisstrict,
       p.proparallel, p.prosecdef, pg_get_function_result(p.oid) AS result
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'turboinfer'
WHERE p.proname IN ('nl2sql', 'nl2sql_explain', 'turboinfer_info', 'turboinfer_bench')
ORDER BY p.proname, args;

-- The settings exist with their defaults and contexts.
SELECT name, setting, context, vartype, min_val, max_val FROM pg_settings
WHERE name LIKE 'turboinfer.%' ORDER BY name;

-- Removed in 0.3.0 (docs/nl2sql.md, "The ledger"): still accepted so that old configurations
-- load, hidden from pg_settings, the value ignored; the first assignment in a session warns.
SET turboinfer.vocab_pruning = on;
SET turboinfer.vocab_pruning = off;
SET turboinfer.schema_constraints = on;
SELECT count(*) AS listed FROM pg_settings
WHERE name IN ('turboinfer.vocab_pruning', 'turboinfer.schema_constraints');
RESET turboinfer.vocab_pruning;
RESET turboinfer.schema_constraints;

-- NULL in, NULL out (STRICT): no model needed.
SELECT nl2sql(NULL) IS NULL AS null_question, nl2sql_explain(NULL) IS NULL AS null_explain;

-- Empty and blank questions are refused before any model is touched; so are long ones.
SELECT nl2sql('');
SELECT nl2sql(E'  \n\t ');
SELECT nl2sql(repeat('x', 2001));

-- Nothing set: turboinfer.model defaults to qwen2.5-coder-1.5b (used if installed; the answer
-- depends on the machine, so only the setting is shown here: scripts/test-package.sh answers).
SELECT setting, boot_val, source FROM pg_settings WHERE name = 'turboinfer.model';
-- No model configured: turboinfer.model set to ''.
SET turboinfer.model = '';
SELECT nl2sql('how many users?');
-- A mistyped name under the reserved prefix is an error once the library is loaded.
SET turboinfer.modle = 'smollm2-135m';
-- A model name that is not installed: error with the fetch hint.
SET turboinfer.model = 'no-such-model';
SELECT nl2sql('how many users?');
-- Paths outside the models directory are refused when set.
SET turboinfer.model = '/etc/passwd';
SET turboinfer.model = '../cluster/postgresql.conf';
SHOW turboinfer.model;
-- Settings ranges.
SET turboinfer.max_new_tokens = 0;
SET turboinfer.context_tokens = 10;

-- Only a superuser may choose the model; anyone may tune threads and budgets.
CREATE ROLE nl2sql_api_user;
SET ROLE nl2sql_api_user;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 64;
SHOW turboinfer.max_new_tokens;
SET turboinfer.cache_dir = '/tmp';
RESET ROLE;
DROP ROLE nl2sql_api_user;

-- A real model, but nothing to show it: no visible tables in the search path / given schemas.
SET turboinfer.model = 'smollm2-135m';
CREATE SCHEMA empty_schema;
SET search_path = empty_schema;
SELECT public.nl2sql('how many users?');
RESET search_path;
SELECT nl2sql('how many users?', ARRAY['empty_schema']);

-- turboinfer_info() reports the loaded model (stable fields only).
SELECT i->>'loaded' AS loaded, i->>'arch' AS arch, (i->>'n_layers')::int AS n_layers,
       i->'tensor_types' ? 'q4_1' OR i->'tensor_types' ? 'Q4_1' AS has_q4_1,
       (i->>'mapped_bytes')::bigint AS mapped_bytes, i->>'model_path' AS path,
       i->>'model_default' AS is_default
FROM turboinfer_info() i;
-- Packed Q4_K weights: SmolLM2 has no Q4_K matrix, so there is no pack and it runs unpacked.
SELECT i->>'packed' AS packed, (i->>'packed_matrices')::int AS packed_matrices FROM turboinfer_info() i;

-- The SQLSTATE of each error.
CREATE FUNCTION sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE q;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE;
END $$;
SELECT q, sqlstate_of(q) AS sqlstate FROM (VALUES
  ($q$SELECT nl2sql('')$q$),
  ($q$SELECT nl2sql(repeat('x', 2001))$q$),
  ($q$SELECT nl2sql('q', ARRAY['empty_schema'])$q$),
  ($q$SET turboinfer.model = '/etc/passwd'$q$),
  ($q$SET LOCAL turboinfer.model = 'absent-model'; SELECT nl2sql('q')$q$),
  ($q$SET LOCAL turboinfer.model = ''; SELECT nl2sql('q')$q$)
) v(q);
DROP FUNCTION sqlstate_of(text);
DROP SCHEMA empty_schema;

DROP EXTENSION turboinfer;
