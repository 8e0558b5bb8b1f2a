#!/usr/bin/env bash
# No backtrace reaches a client (issue 16, item 10): restarts the test cluster with RUST_BACKTRACE=1
# in the server's environment, raises two ERRORs that pass through Rust, and checks what psql
# receives (VERBOSITY verbose: message, DETAIL, HINT, CONTEXT, LOCATION) carries no frames:
#   1. a Rust panic: turboinfer_calibrate() with a NULL level (pgrx's "array contains NULL", XX000,
#      raised while unboxing the argument, before any code of ours runs);
#   2. a PostgreSQL error re-raised through Rust: statement_timeout during a long nl2sql() call.
# The server log, by contrast, must keep the panic and its backtrace. Afterwards the cluster is
# restarted with the RUST_BACKTRACE it had before (unset if it had none).
# Needs: extension installed, cluster running, model smollm2-135m. Honors the TURBOINFER_PG*
# vars (the project's cluster of TURBOINFER_PG_MAJOR, default 15: scripts/pgmajor.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
DB=turboinfer_backtrace
me="test-backtrace.sh"
. "$here/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT: the project's cluster of TURBOINFER_PG_MAJOR
pass=0
fail=0

# The postmaster's RUST_BACKTRACE ("" when unset), to restore it afterwards.
pm_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null) || { echo "$me: error: cluster not running ($DATA)" >&2; exit 1; }
had=$(tr '\0' '\n' </proc/"$pm_pid"/environ | sed -n 's/^RUST_BACKTRACE=//p')

restart() { # restart VALUE: the cluster with RUST_BACKTRACE=VALUE ("" = unset)
    "$cluster" stop
    if [[ -n $1 ]]; then env RUST_BACKTRACE="$1" "$cluster" start; else env -u RUST_BACKTRACE "$cluster" start; fi
}
cleanup() {
    "$cluster" psql -X -q -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
    restart "$had" 2>&1 | sed "s/^/$me: /"
}
restart 1
trap cleanup EXIT
log_from=$(($(stat -c %s "$LOG") + 1))

# check NAME SQLSTATE -- SQL: SQL's client-visible error has SQLSTATE and no backtrace frames.
check() {
    local name=$1 state=$2 sql=$4 out
    out=$("$cluster" psql -X -q -d "$DB" -v VERBOSITY=verbose -c "SET turboinfer.model = 'smollm2-135m'" -c "$sql" 2>&1) || true
    # Frames look like "   3: name" and "             at /path/file.rs:12:5".
    if ! grep -q "ERROR:  $state" <<<"$out"; then
        echo "FAIL $name: expected an ERROR with SQLSTATE $state, got:"; sed -n '1,20s/^/     | /p' <<<"$out"; fail=$((fail + 1))
    elif grep -Eiq '^ *[0-9]+: |^ +at /|backtrace|\.cargo/registry|/rustc/' <<<"$out"; then
        echo "FAIL $name: the client received a backtrace:"; sed -n '1,20s/^/     | /p' <<<"$out"; fail=$((fail + 1))
    else
        echo "ok   $name: $(grep -m1 'ERROR:' <<<"$out")"; pass=$((pass + 1))
    fi
}

"$cluster" psql -X -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
# 80 tables of 12 columns in schema big (the shared fixture): seconds of work for SmolLM2.
{
    printf '%s\n' "CREATE EXTENSION turboinfer;" "CREATE SCHEMA big;" "SET search_path = big;"
    cat "$here/../tests/fixtures/wide_schema.sql"
} | "$cluster" psql -X -q -v ON_ERROR_STOP=1 -d "$DB" >/dev/null

check "rust panic (NULL calibration level)" XX000 -- "SELECT turboinfer_calibrate(levels => ARRAY[NULL]::float8[])"
# The model is loaded by a first call on a tiny schema, so the timeout strikes inside the
# generation (the ERROR is raised by PostgreSQL inside check_for_interrupts! and re-raised by pgrx).
check "statement timeout re-raised through Rust" 57014 -- \
    "CREATE TABLE public.one (id int); SELECT nl2sql('how many rows in one?', ARRAY['public']); SET search_path = big, public; SET statement_timeout = '1s'; SELECT nl2sql('list every column of every table');"

# The server log keeps the panic (message and backtrace) for the DBA.
# (Read first, then searched: `tail | grep -q` under pipefail fails when grep stops early.)
logged=$(tail -c +"$log_from" "$LOG")
if grep -q 'array contains NULL' <<<"$logged" && grep -q 'stack backtrace' <<<"$logged"; then
    echo "ok   server log: the panic and its backtrace are logged"; pass=$((pass + 1))
else
    echo "FAIL server log: no panic message with a backtrace in $LOG"; fail=$((fail + 1))
fi

echo "backtrace tests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
