-- turboinfer_stat, turboinfer_stat_reset(), turboinfer.log_queries and turboinfer.progress.
-- The regress cluster does not preload the library: the counters are this backend's
-- (scope 'backend'); scripts/test-stat-shared.sh checks the shared scope.
CREATE EXTENSION turboinfer;
DROP ROLE IF EXISTS regress_stat_user;
CREATE ROLE regress_stat_user;
-- No cache files: the first call of this backend computes the schema prefix.
SET turboinfer.cache_max_mb = 0;
CREATE SCHEMA st;
CREATE TABLE st.users (id integer PRIMARY KEY, name text NOT NULL);
SET search_path = st, public;
SELECT turboinfer_stat_reset() <= clock_timestamp() AS reset;
SELECT count(*) AS rows FROM turboinfer_stat;

-- A cold call (prefix computed) then a warm one (prefix in memory), both answered.
SET turboinfer.model = 'qwen2.5-coder-0.5b';
SET turboinfer.repair_rounds = 0;
SELECT e->>'sql' AS sql, e->>'cache' AS cache FROM nl2sql_explain('how many users are there?') e;
SELECT nl2sql('how many users are there?');
SELECT datname = current_database() AS db, rolname = current_user AS role, calls, errors,
       errors_by_sqlstate, repairs, cache_hits_memory, cache_hits_file, cache_misses,
       prompt_tokens > 0 AS prompt, generated_tokens > 0 AS generated, forward_passes >= 0 AS passes,
       total_ms >= prefill_ms + decode_ms + validate_ms AS timed, prefill_ms > 0 AS prefilled,
       batch_calls, batch_wait_ms, scope, stats_reset <= clock_timestamp() AS since
FROM turboinfer_stat;

-- A rejected answer (one token, one repair round) counts as 42000, the ERROR nl2sql() raises;
-- errors before any generation count too: a blank question (22023), a missing model (58P01).
SET turboinfer.max_new_tokens = 1;
SET turboinfer.repair_rounds = 1;
SELECT nl2sql('how many users are there?');
RESET turboinfer.max_new_tokens;
SET turboinfer.repair_rounds = 0;
SELECT nl2sql('   ');
SET turboinfer.model = 'no-such-model';
SELECT nl2sql('how many users are there?');
SET turboinfer.model = 'qwen2.5-coder-0.5b';
SELECT calls, errors, errors_by_sqlstate, repairs, cache_hits_memory, cache_misses FROM turboinfer_stat;

-- turboinfer.log_queries: one message per call at the chosen level (the time is in the DETAIL).
\set VERBOSITY terse
SET turboinfer.log_queries = notice;
SELECT nl2sql('how many users are there?');
SELECT nl2sql('');
SET turboinfer.log_queries = debug1;
SELECT nl2sql('how many users are there?');
RESET turboinfer.log_queries;
SELECT nl2sql('how many users are there?');
-- Superuser only.
SET ROLE regress_stat_user;
SET turboinfer.log_queries = log;
RESET ROLE;

-- Another role: its calls get their own row; it sees every row (counters only, no text) and may
-- not reset them until granted EXECUTE.
GRANT USAGE ON SCHEMA st TO regress_stat_user;
GRANT SELECT ON st.users TO regress_stat_user;
SET ROLE regress_stat_user;
SELECT nl2sql(' ');
SELECT rolname, calls, errors, errors_by_sqlstate FROM turboinfer_stat ORDER BY rolname;
SELECT turboinfer_stat_reset();
RESET ROLE;
GRANT EXECUTE ON FUNCTION turboinfer_stat_reset() TO regress_stat_user;
SET ROLE regress_stat_user;
SELECT turboinfer_stat_reset() <= clock_timestamp() AS reset;
SELECT count(*) AS rows FROM turboinfer_stat;
RESET ROLE;
\set VERBOSITY default

-- turboinfer.progress: a cold schema prefill (SmolLM2, a new backend) reports in NOTICEs, a
-- warm call says nothing. How many NOTICEs appear depends on the machine (one a second): psql's
-- output with the token counts masked and repeated lines folded, DETAILs (times) left out.
\! psql -X -q -d turboinfer_regress -c "SET turboinfer.model = 'smollm2-135m'" -c "SET turboinfer.max_new_tokens = 1" -c "SET turboinfer.repair_rounds = 0" -c "SET turboinfer.cache_max_mb = 0" -c "SET search_path = st, public" -c "SET turboinfer.progress = 0" -c "SELECT nl2sql_explain('how many users are there?')->>'cache' AS cold" -c "SELECT nl2sql_explain('how many users are there?')->>'cache' AS warm" 2>&1 | grep -v '^DETAIL' | sed -E 's/[0-9]+\/[0-9]+ (tokens|layers) \([0-9]+ %\)/N\/M \1 (P %)/; s/done, [0-9]+ (tokens|layers)/done, M \1/' | uniq
-- Off (the default): no NOTICE.
\! psql -X -q -d turboinfer_regress -c "SET turboinfer.model = 'smollm2-135m'" -c "SET turboinfer.max_new_tokens = 1" -c "SET turboinfer.repair_rounds = 0" -c "SET turboinfer.cache_max_mb = 0" -c "SET search_path = st, public" -c "SELECT nl2sql_explain('how many users are there?')->>'cache' AS cold" 2>&1
-- turboinfer_calibrate() reports its recording and fitting the same way (tiny parameters; the
-- sidecar goes to a directory of its own, as in nl2sql_sparse).
\! psql -X -q -d turboinfer_regress -c "SET turboinfer.model = 'smollm2-135m'" -c "SET turboinfer.sparse_dir = 'turboinfer_sparse_stat_regress'" -c "SET turboinfer.progress = 0" -c "SELECT layers > 0 AS calibrated FROM turboinfer_calibrate(levels => '{0.5}', rank => 8, tokens => 64)" 2>&1 | grep -v '^DETAIL' | sed -E 's/[0-9]+\/[0-9]+ (tokens|layers) \([0-9]+ %\)/N\/M \1 (P %)/; s/done, [0-9]+ (tokens|layers)/done, M \1/' | uniq
SHOW turboinfer.progress;
SET turboinfer.progress = '2s';
SHOW turboinfer.progress;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA st CASCADE;
DROP OWNED BY regress_stat_user;
DROP ROLE regress_stat_user;
