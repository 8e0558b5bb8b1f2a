#!/usr/bin/env bash
# A model file rewritten in place while a backend reads it is an ERROR in that backend, not a
# server restart (issue 16, item 4). Copies qwen2.5-coder-0.5b into the models directory under a
# test name, and while nl2sql() runs a long prefill over a large schema with it:
#   1. truncates the file (`truncate`: reads past the new end would raise SIGBUS);
#   2. overwrites it in place with another model (`cp other.gguf model.gguf`, how an
#      administrator upgrades a model the wrong way);
# each time the call must end with ERROR 58030 (the file changed) and the server must go on: the
# postmaster keeps its pid and the log has no "terminated by signal". After each, the file is
# put back by rename (the documented way) and a new call with it answers.
# Needs: extension installed, cluster running, models qwen2.5-coder-0.5b and smollm2-135m.
# Honors the TURBOINFER_PG* vars (the project's cluster of TURBOINFER_PG_MAJOR, default 15:
# scripts/pgmajor.sh); TURBOINFER_MODELS_DIR as turboinfer-fetch-model does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
MODELS=${TURBOINFER_MODELS_DIR:-/var/lib/turboinfer/models}
NAME=turboinfer-swap-test
SWAP="$MODELS/$NAME.gguf"
DB=turboinfer_swap
me="test-model-swap.sh"
. "$here/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT: the project's cluster of TURBOINFER_PG_MAJOR
pass=0
fail=0
work=$(mktemp -d)

pm_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null) || { echo "$me: error: cluster not running ($DATA)" >&2; exit 1; }
for m in qwen2.5-coder-0.5b smollm2-135m; do
    [[ -f $MODELS/$m.gguf ]] || { echo "$me: error: model $m is not installed in $MODELS" >&2; exit 1; }
done
cleanup() {
    "$cluster" psql -X -q -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
    rm -f "$SWAP" "$SWAP.tmp"
    rm -rf "$work"
}
trap cleanup EXIT
log_from=$(($(stat -c %s "$LOG") + 1))

ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
psql_db() { "$cluster" psql -X -q -d "$DB" "$@"; }

# The model under test, put in place by rename (as the README says to).
install_swap() {
    cp "$MODELS/qwen2.5-coder-0.5b.gguf" "$SWAP.tmp"
    chmod a+r "$SWAP.tmp"
    mv -f "$SWAP.tmp" "$SWAP"
}

"$cluster" psql -X -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
# 80 tables of 12 columns in schema big (the shared fixture): a prompt of thousands of tokens,
# tens of seconds of prefill for 0.5B.
{
    printf '%s\n' "CREATE EXTENSION turboinfer;" "CREATE TABLE public.one (id int);" \
        "CREATE SCHEMA big;" "SET search_path = big;"
    cat "$here/../tests/fixtures/wide_schema.sql"
    printf '%s\n' "ALTER DATABASE $DB SET turboinfer.model = '$NAME';"
} | psql_db -v ON_ERROR_STOP=1 >/dev/null

# case NAME ACTION: starts a long nl2sql() call, runs ACTION on the model file 3 s into it, and
# checks the call's outcome; then restores the file by rename and checks a new call answers.
case_() {
    local name=$1 action=$2 out="$work/$1.out" pid
    install_swap
    psql_db -v VERBOSITY=verbose -c "SET turboinfer.context_tokens = 8192" -c "SET search_path = big, public" \
        -c "SELECT nl2sql('list every column of every table')" >"$out" 2>&1 &
    local client=$!
    for _ in $(seq 1 200); do
        pid=$(psql_db -At -c "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT nl2sql(''list every%' LIMIT 1")
        [[ -n $pid ]] && break
        sleep 0.05
    done
    sleep 3
    eval "$action"
    wait "$client" || true
    if grep -q "ERROR:  58030: turboinfer: the model file .* changed while this call was reading it" "$out"; then
        ok "$name: the call ends with ERROR 58030"
    else
        bad "$name: expected ERROR 58030, got:"; sed -n '1,12s/^/     | /p' "$out"
    fi
    install_swap
    local answer
    answer=$(psql_db -At -c "SELECT nl2sql('how many rows are in one?', ARRAY['public'])" 2>&1) || true
    if grep -qi "select" <<<"$answer" && ! grep -q "ERROR" <<<"$answer"; then
        ok "$name: after a rename-replace a new call answers: $(head -c 80 <<<"$answer" | tr '\n' ' ')"
    else
        bad "$name: no answer after the rename-replace:"; sed -n '1,12s/^/     | /p' <<<"$answer"
    fi
}

case_ "truncated in place" 'truncate -s 4096 "$SWAP"'
case_ "overwritten in place by cp" 'cp "$MODELS/smollm2-135m.gguf" "$SWAP"'

now_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
if [[ $now_pid == "$pm_pid" ]]; then ok "the postmaster kept its pid ($pm_pid)"; else bad "the postmaster pid changed: $pm_pid -> $now_pid"; fi
if grep -q "terminated by signal" <<<"$(tail -c +"$log_from" "$LOG")"; then
    bad "the server log reports a backend terminated by a signal:"; tail -c +"$log_from" "$LOG" | grep "terminated by signal" | sed 's/^/     | /'
else
    ok "no backend terminated by a signal"
fi

echo "model swap tests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
