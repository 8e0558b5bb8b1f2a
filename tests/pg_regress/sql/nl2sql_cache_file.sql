-- Schema-prefix KV cache files: the prefix one backend computed is loaded from its file by
-- another backend (a new connection), a damaged file is ignored, deleted and rewritten, and the
-- files can be disabled and cleared. SmolLM2 with a one-token budget: only the cache matters.
CREATE EXTENSION turboinfer;
SELECT turboinfer_cache_clear() >= 0 AS cleared;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
CREATE SCHEMA cf;
CREATE TABLE cf.users (id integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE cf.orders (id integer PRIMARY KEY, user_id integer REFERENCES cf.users, amount numeric);
SET search_path = cf, public;

-- Backend A computes the prefix and writes its file.
SELECT e->>'cache' AS cache, e->'timings_ms' ? 'cache_file' AS has_file_timing FROM nl2sql_explain('how many users?') e;
SELECT e->>'fingerprint' AS fp, e->>'sql' AS sql_a FROM nl2sql_explain('how many users?') e \gset
SELECT i->'cache'->>'file_writes' AS file_writes, i->'cache_files'->>'enabled' AS enabled,
       (i->'cache_files'->>'files')::int AS files, (i->'cache_files'->>'bytes')::bigint > 0 AS has_bytes,
       i->'cache_files'->>'dir' = current_setting('data_directory') || '/turboinfer_cache' AS default_dir
FROM turboinfer_info() i;

-- Backend B (a new connection) misses in memory and loads the file: same fingerprint, same
-- answer, only the question is run through the model. Then its own memory serves it.
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = cf, public;
SELECT e->>'cache' AS cache, e->>'fingerprint' = :'fp' AS same_fingerprint, e->>'sql' = :'sql_a' AS same_sql,
       (e->>'prefill_tokens')::int < (e->>'prompt_tokens')::int AS prefix_skipped
FROM nl2sql_explain('how many users?') e;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;
SELECT i->'cache'->>'file_hits' AS file_hits, i->'cache'->>'file_writes' AS file_writes FROM turboinfer_info() i;

-- A damaged file (overwritten with garbage) is ignored with a WARNING, deleted, recomputed and
-- rewritten; the next backend loads the good file again.
SELECT current_setting('data_directory') || '/turboinfer_cache/' || :'fp' || '.f32.tikv' AS cache_file \gset
COPY (SELECT 'not a cache file') TO :'cache_file';
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = cf, public;
-- (the WARNING names the file, whose name depends on the model file's inode: not shown)
SET client_min_messages = error;
SELECT e->>'cache' AS cache, e->>'sql' = :'sql_a' AS same_sql, (e->>'prefill_tokens')::int >= (e->>'prompt_tokens')::int AS full_prefill
FROM nl2sql_explain('how many users?') e;
RESET client_min_messages;
SELECT i->'cache'->>'file_errors' AS file_errors, i->'cache'->>'file_writes' AS file_writes FROM turboinfer_info() i;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = cf, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;

-- A changed schema has another fingerprint: no file for it yet; the beginning it shares with
-- the previous prefix is kept, the rest computed.
ALTER TABLE cf.users ADD COLUMN email text;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = cf, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;

-- cache_max_mb = 0 turns the files off: nothing read or written.
SET turboinfer.cache_max_mb = 0;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET turboinfer.cache_max_mb = 0;
SET search_path = cf, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;
SELECT i->'cache_files' AS cache_files, i->'cache'->>'file_writes' AS file_writes FROM turboinfer_info() i;
RESET turboinfer.cache_max_mb;

-- Only a superuser may change the cache settings or clear the files.
CREATE ROLE nl2sql_cache_user;
SET ROLE nl2sql_cache_user;
SET turboinfer.cache_dir = '/tmp';
SET turboinfer.cache_max_mb = 1;
SELECT turboinfer_cache_clear();
-- The directory is not shown to ordinary roles.
SELECT i->'cache_files' ? 'dir' AS has_dir_key, i->'cache_files'->>'dir' IS NULL AS dir_hidden FROM turboinfer_info() i;
RESET ROLE;
DROP ROLE nl2sql_cache_user;

-- Clearing deletes the files (two schemas were cached above); the next backend computes again.
SELECT turboinfer_cache_clear() >= 2 AS removed;
SELECT (turboinfer_info()->'cache_files'->>'files')::int AS files_left;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = cf, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many users?') e;

SELECT turboinfer_cache_clear() >= 1 AS cleared;
RESET search_path;
DROP SCHEMA cf CASCADE;
DROP EXTENSION turboinfer;
