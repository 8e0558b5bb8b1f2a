#!/usr/bin/env bash
# An allocation failure is an ERROR, not a server restart (issue 16, item 2): restarts the test
# cluster with an address-space limit (RLIMIT_AS, TURBOINFER_PG_ULIMIT_V of scripts/cluster.sh)
# that a normal nl2sql() call fits in but a huge context does not, then checks that
#   1. SET turboinfer.context_tokens = 131072 (capped at the model's 32768 trained positions) and
#      nl2sql() fail with ERROR 53200 (out_of_memory) naming the KV cache and its bytes, HINT
#      turboinfer.context_tokens, and that the same session answers again at the default context;
#   2. a normal call in a new session still answers;
#   3. the postmaster pid did not change and the server log has no "terminated by signal" (a
#      backend that aborts makes the postmaster restart every session).
# The limit: the backend's peak address space after a normal call (model mapping, threads,
# default KV cache), measured first without a limit, plus LIMIT_MARGIN_MIB (default 384). The
# model is qwen2.5-coder-0.5b: 24 KiB of f32 KV per position, so its 32768 positions need 672 MiB
# more than the default 4096 (96 MiB): well beyond the margin, while small allocations stay within.
# Afterwards (also on failure) the cluster is restarted without the limit.
# Needs: extension installed, cluster running, model qwen2.5-coder-0.5b. Honors the TURBOINFER_PG*
# vars (the project's cluster of TURBOINFER_PG_MAJOR, default 15: scripts/pgmajor.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
MODEL=qwen2.5-coder-0.5b
MARGIN_MIB=${LIMIT_MARGIN_MIB:-384}
DB=turboinfer_memlimit
me="test-memory-limit.sh"
. "$here/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT: the project's cluster of TURBOINFER_PG_MAJOR
pass=0
fail=0

head -n 1 "$DATA/postmaster.pid" >/dev/null 2>&1 || { echo "$me: error: cluster not running ($DATA)" >&2; exit 1; }

restart() { # restart [KIB]: the cluster with an address-space limit of KIB (none when absent)
    # A postmaster asked to stop during its crash recovery (after a backend aborted) may never
    # finish a fast shutdown: then an immediate one.
    "$cluster" stop || runuser -u postgres -- "$PGBIN/pg_ctl" stop -D "$DATA" -m immediate -w -t 60 >/dev/null
    if [[ -n ${1:-} ]]; then env TURBOINFER_PG_ULIMIT_V="$1" "$cluster" start; else env -u TURBOINFER_PG_ULIMIT_V "$cluster" start; fi
}
cleanup() {
    "$cluster" psql -X -q -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1 || true
    restart 2>&1 | sed "s/^/$me: /"
}
trap cleanup EXIT
# A cluster left limited by an interrupted run is measured without its limit.
restart 2>&1 | sed "s/^/$me: /"

"$cluster" psql -X -q -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
"$cluster" psql -X -q -v ON_ERROR_STOP=1 -d "$DB" >/dev/null <<'SQL'
CREATE EXTENSION turboinfer;
CREATE TABLE users (id int PRIMARY KEY, name text, city text);
SQL

# Peak address space (KiB) of a backend after a normal call, without a limit.
peak=$("$cluster" psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" <<SQL | tail -n 1
SET turboinfer.model = '$MODEL';
SELECT nl2sql('how many users are there?') IS NOT NULL AS answered \\gset
SELECT pg_backend_pid() AS pid \\gset
\\setenv BACKEND :pid
\\! sed -n 's/^VmPeak:[[:space:]]*\\([0-9]*\\) kB/\\1/p' /proc/\$BACKEND/status
SQL
)
[[ $peak =~ ^[0-9]+$ ]] || { echo "$me: error: could not measure a backend's peak address space (got '$peak')" >&2; exit 1; }
limit=$((peak + MARGIN_MIB * 1024))
echo "$me: a normal call peaks at $((peak / 1024)) MiB of address space; limit $((limit / 1024)) MiB"

restart "$limit" 2>&1 | sed "s/^/$me: /"
pm_pid=$(head -n 1 "$DATA/postmaster.pid")
if grep -q "^Max address space *$((limit * 1024)) " /proc/"$pm_pid"/limits; then
    echo "ok   postmaster runs with RLIMIT_AS = $((limit / 1024)) MiB"; pass=$((pass + 1))
else
    echo "FAIL postmaster has no address-space limit of $limit KiB:"; grep 'address space' /proc/"$pm_pid"/limits | sed 's/^/     | /'; fail=$((fail + 1))
fi
log_from=$(($(stat -c %s "$LOG") + 1))

# 1. The huge context: ERROR 53200 naming the KV cache, then the same session answers again.
out=$("$cluster" psql -X -q -d "$DB" -v VERBOSITY=verbose 2>&1 <<SQL || true
SET turboinfer.model = '$MODEL';
SET turboinfer.context_tokens = 131072;
SELECT nl2sql('how many users are there?');
RESET turboinfer.context_tokens;
SELECT 'after: ' || nl2sql('how many users are there?');
SQL
)
if grep -q 'ERROR:  53200: turboinfer: out of memory allocating the KV cache ([0-9]* bytes)' <<<"$out" \
    && grep -q 'HINT:  Lower turboinfer.context_tokens' <<<"$out"; then
    echo "ok   huge context: $(grep -m1 'ERROR:' <<<"$out")"; pass=$((pass + 1))
else
    echo "FAIL huge context: expected ERROR 53200 out of memory allocating the KV cache with a HINT, got:"; sed -n '1,20s/^/     | /p' <<<"$out"; fail=$((fail + 1))
fi
if grep -qi 'after: SELECT' <<<"$out"; then
    echo "ok   the same session answers at the default context"; pass=$((pass + 1))
else
    echo "FAIL the session did not answer after the ERROR:"; sed -n '1,20s/^/     | /p' <<<"$out"; fail=$((fail + 1))
fi

# 2. A normal call in a new session.
out=$("$cluster" psql -X -q -A -t -d "$DB" -c "SET turboinfer.model = '$MODEL'" -c "SELECT nl2sql('how many users are there?')" 2>&1) || true
if grep -qi '^SELECT' <<<"$out"; then
    echo "ok   a new session answers: $out"; pass=$((pass + 1))
else
    echo "FAIL a new session did not answer:"; sed -n '1,20s/^/     | /p' <<<"$out"; fail=$((fail + 1))
fi

# 3. No crash: same postmaster, no backend killed by a signal.
now_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || echo none)
if [[ $now_pid == "$pm_pid" ]] && ! grep -Eq 'terminated by signal|memory allocation of [0-9]+ bytes failed' <<<"$(tail -c +"$log_from" "$LOG")"; then
    echo "ok   postmaster $pm_pid still up, no backend terminated by a signal"; pass=$((pass + 1))
else
    echo "FAIL the server crashed (postmaster $pm_pid -> $now_pid):"; tail -c +"$log_from" "$LOG" | grep -E 'terminated by signal|memory allocation|terminating' | head -n 5 | sed 's/^/     | /'; fail=$((fail + 1))
fi

echo "memory limit tests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
