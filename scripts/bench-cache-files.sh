#!/usr/bin/env bash
# Cold (miss) vs cache-file hit vs memory hit of nl2sql_explain('how many users?') on the demo
# database, per model: clears the schema-prefix cache files, asks twice in backend A (miss, then
# memory hit), twice in a new backend B (file hit, then memory hit), and shows the files' stats.
#
#   scripts/bench-cache-files.sh [MODEL...]   (default: qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
#
# Needs the extension installed and the cluster running with the demo database; (re)creates the
# extension in that database so that its SQL functions match the installed library.
set -euo pipefail
cd "$(dirname "$0")/.."
DB=${TURBOINFER_DEMO_DB:-turboinfer_demo}
P="scripts/cluster.sh psql -X -q -d $DB"
$P -c "DROP EXTENSION IF EXISTS turboinfer" -c "CREATE EXTENSION turboinfer" >/dev/null
models=("$@")
[[ ${#models[@]} -gt 0 ]] || models=(qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
for m in "${models[@]}"; do
    $P -c "SELECT turboinfer_cache_clear()" >/dev/null
    q="SELECT '$m' AS model, e->>'cache' AS cache,
              round(extract(epoch FROM clock_timestamp() - statement_timestamp()) * 1000) AS total_ms,
              e->'prefix_tokens' AS prefix, e->'prefill_tokens' AS prefill, e->'generated_tokens' AS gen,
              e->'timings_ms' AS timings_ms, e->>'sql' AS sql
       FROM nl2sql_explain('how many users?') e"
    set_model="SET turboinfer.model = '$m'"
    echo "== $m: backend A"
    $P -c "$set_model" -c "$q" -c "$q"
    echo "== $m: backend B"
    $P -c "$set_model" -c "$q" -c "$q"
    $P -c "SELECT turboinfer_info()->'cache_files' AS cache_files"
done
