-- make demo: ask nl2sql() a question, show the generated SQL and how it was produced, then run
-- the SQL in a read-only transaction (nl2sql itself never executes anything).
\pset footer off
\echo 'SELECT nl2sql(''how many users?'');'
SELECT nl2sql('how many users?') AS generated_sql \gset
\echo :generated_sql
\echo
\echo '-- how it was produced (a second call: the schema prefix is now cached):'
SELECT e->>'cache' AS cache, e->'prompt_tokens' AS prompt_tokens, e->'generated_tokens' AS generated,
       e->'timings_ms' AS timings_ms
FROM nl2sql_explain('how many users?') e;
\echo '-- the generated SQL, executed read-only:'
BEGIN TRANSACTION READ ONLY;
:generated_sql \g
COMMIT;
