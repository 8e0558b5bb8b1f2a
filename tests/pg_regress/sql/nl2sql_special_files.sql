-- A FIFO or a symbolic link planted where a schema-prefix cache file belongs (issue 16, item 9):
-- the backend does not block on the FIFO (a plain open waited, beyond cancel, for a writer) and
-- does not follow the link. Either is an I/O error of the cache file (a WARNING naming it, not
-- shown: the name depends on the model file's inode), the prefix is computed (a miss), and the
-- rewritten file replaces what was planted. SmolLM2 with a one-token budget.
CREATE EXTENSION turboinfer;
SELECT turboinfer_cache_clear() >= 0 AS cleared;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
CREATE SCHEMA sf;
CREATE TABLE sf.things (id integer PRIMARY KEY, label text);
-- What is at the cache file's path (outside the search path: not part of the schema shown).
CREATE SCHEMA sf_meta;
CREATE TABLE sf_meta.planted (file_type text);
SET search_path = sf, public;
-- How long a first call takes here (the model loaded, the prefix computed: a miss); the call
-- after the FIFO is planted does the same work, unless it blocks on the FIFO.
CREATE TABLE sf_meta.first (took interval);
CREATE TEMP TABLE t_first AS SELECT clock_timestamp() AS at;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many things?') e;
INSERT INTO sf_meta.first SELECT clock_timestamp() - at FROM t_first;
SELECT e->>'fingerprint' AS fp FROM nl2sql_explain('how many things?') e \gset
SELECT current_setting('data_directory') || '/turboinfer_cache/' || :'fp' || '.f32.tikv' AS cache_file \gset
-- The file becomes a FIFO. A helper opens it for writing after 20 s if it is still a FIFO: that
-- would release a backend blocked on it, so a regression makes this test fail slowly, not hang.
SELECT format('rm -f ''%1$s'' && mkfifo ''%1$s'' && { (sleep 20; [ -p ''%1$s'' ] && exec 3<>''%1$s'') </dev/null >/dev/null 2>&1 & }', :'cache_file') AS plant_fifo \gset
COPY (SELECT 1) TO PROGRAM :'plant_fifo';
SELECT format('stat -c %%F ''%s''', :'cache_file') AS file_type \gset
COPY sf_meta.planted FROM PROGRAM :'file_type';
SELECT * FROM sf_meta.planted;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = sf, public;
CREATE TEMP TABLE t0 AS SELECT clock_timestamp() AS at;
SET client_min_messages = error;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many things?') e;
RESET client_min_messages;
-- Prompt, not the 20 s and more of an open blocked until the helper writes: within 5 s (well
-- under a second with the model loading on a SIMD tier); on the scalar tier, which computes the
-- prefix far slower (its F16C or its portable table), within the first call's own time plus 10 s.
SELECT clock_timestamp() - at < CASE WHEN turboinfer_info()->>'kernel_tier' LIKE 'scalar%'
         THEN (SELECT took FROM sf_meta.first) + interval '10 seconds'
         ELSE interval '5 seconds' END AS prompt FROM t0;
SELECT i->'cache'->>'file_errors' AS file_errors, i->'cache'->>'file_writes' AS file_writes FROM turboinfer_info() i;
-- The rewritten file took the FIFO's place.
SELECT (pg_stat_file(:'cache_file')).size > 0 AS rewritten;
-- The file becomes a symbolic link to a copy of itself: a valid file, but not followed.
SELECT format('cp ''%1$s'' ''%1$s.real'' && ln -sf ''%1$s.real'' ''%1$s''', :'cache_file') AS plant_link \gset
COPY (SELECT 1) TO PROGRAM :'plant_link';
TRUNCATE sf_meta.planted;
COPY sf_meta.planted FROM PROGRAM :'file_type';
SELECT * FROM sf_meta.planted;
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = sf, public;
SET client_min_messages = error;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many things?') e;
RESET client_min_messages;
SELECT i->'cache'->>'file_errors' AS file_errors, i->'cache'->>'file_hits' AS file_hits FROM turboinfer_info() i;
-- With the link replaced by the rewritten file, the next backend loads it.
\c
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 1;
SET search_path = sf, public;
SELECT e->>'cache' AS cache FROM nl2sql_explain('how many things?') e;
SELECT format('rm -f ''%1$s.real''', :'cache_file') AS cleanup \gset
COPY (SELECT 1) TO PROGRAM :'cleanup';
SELECT turboinfer_cache_clear() >= 1 AS cleared;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA sf, sf_meta CASCADE;
RESET client_min_messages;
DROP EXTENSION turboinfer;
