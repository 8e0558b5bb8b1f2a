-- Resource settings have superuser-set ceilings (issue 16, item 3): a non-superuser cannot set
-- more worker threads, KV positions or tokens per answer than turboinfer.threads_limit,
-- turboinfer.context_tokens_limit and turboinfer.max_new_tokens_limit allow (SQLSTATE 42501, at
-- SET time and again when a call uses the value); superusers can. A context above the model's
-- training context is capped there with a NOTICE.
CREATE EXTENSION turboinfer;
CREATE ROLE limits_user LOGIN;
CREATE TABLE limits_t (id integer PRIMARY KEY, name text);
GRANT SELECT ON limits_t TO limits_user;
-- The ceilings and their defaults (threads_limit 0 = the CPU cores).
SHOW turboinfer.threads_limit;
SHOW turboinfer.context_tokens_limit;
SHOW turboinfer.max_new_tokens_limit;
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.threads_limit = 1;
SET ROLE limits_user;
-- The ceilings themselves are superuser-only.
SET turboinfer.threads_limit = 8;
\echo :LAST_ERROR_SQLSTATE
-- The issue's values, refused with the ceiling in the message.
SET turboinfer.threads = 256;
\echo :LAST_ERROR_SQLSTATE
SET turboinfer.context_tokens = 131072;
\echo :LAST_ERROR_SQLSTATE
SET turboinfer.max_new_tokens = 8192;
\echo :LAST_ERROR_SQLSTATE
-- set_config() and ALTER ROLE ... SET (a role may set its own defaults) are checked alike.
SELECT set_config('turboinfer.threads', '2', false);
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE limits_user SET turboinfer.context_tokens = 16384;
\echo :LAST_ERROR_SQLSTATE
-- Up to the ceilings is fine; threads = 0 means the cores, capped by threads_limit.
SET turboinfer.threads = 1;
SET turboinfer.context_tokens = 8192;
SET turboinfer.max_new_tokens = 1024;
SET turboinfer.threads = 0;
SET turboinfer.max_new_tokens = 8;
SELECT nl2sql_explain('how many rows are in limits_t?') ? 'sql' AS answered;
SELECT (turboinfer_info()->>'threads')::int AS threads;
RESET ROLE;
-- A superuser may exceed them.
SET turboinfer.threads = 2;
SHOW turboinfer.threads;
RESET turboinfer.threads;
-- A value set before a superuser lowered the ceiling is refused when it is used.
SET turboinfer.context_tokens_limit = 4096;
SET ROLE limits_user;
SELECT nl2sql('how many rows are in limits_t?');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
RESET turboinfer.context_tokens_limit;
-- A default a superuser gave the role above the ceiling is applied at login and refused when used.
ALTER ROLE limits_user SET turboinfer.max_new_tokens = 2048;
ALTER ROLE limits_user SET turboinfer.model = 'smollm2-135m';
\c - limits_user
SHOW turboinfer.max_new_tokens;
SELECT nl2sql('how many rows are in limits_t?');
\echo :LAST_ERROR_SQLSTATE
\c - postgres
-- context_tokens above the model's training context (SmolLM2: 8192) is capped there, with a
-- NOTICE once per value and model load.
SET turboinfer.model = 'smollm2-135m';
SET turboinfer.max_new_tokens = 8;
SET turboinfer.context_tokens = 16384;
SELECT nl2sql_explain('how many rows are in limits_t?') ? 'sql' AS answered;
SELECT nl2sql_explain('how many rows are in limits_t?') ? 'sql' AS answered;
SELECT (turboinfer_info()->'cache'->>'capacity_tokens')::int AS capacity_tokens;
RESET turboinfer.context_tokens;
-- turboinfer.weight_budget_mb (superuser only; 0 = no limit): a model that reads more per forward
-- pass than the budget streams its weights (each layer asked for ahead of the pass, given back
-- once computed). The answer stays the same, token for token.
SHOW turboinfer.weight_budget_mb;
SELECT nl2sql_explain('how many rows are in limits_t?')->>'sql' AS plain \gset
SELECT (turboinfer_info()->'weights'->>'pass_bytes')::bigint > 16 * 1024 * 1024 AS model_above_16mb,
       turboinfer_info()->'weights'->>'streamed' AS streamed;
SET turboinfer.weight_budget_mb = 16;
SELECT nl2sql_explain('how many rows are in limits_t?')->>'sql' = :'plain' AS same_answer_streamed;
SELECT turboinfer_info()->'weights'->>'streamed' AS streamed,
       (turboinfer_info()->'weights'->>'budget_bytes')::bigint AS budget_bytes;
RESET turboinfer.weight_budget_mb;
SET turboinfer.weight_budget_mb = -1;
\echo :LAST_ERROR_SQLSTATE
SET ROLE limits_user;
SET turboinfer.weight_budget_mb = 16;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
ALTER ROLE limits_user RESET ALL;
DROP TABLE limits_t;
DROP ROLE limits_user;
DROP EXTENSION turboinfer;
