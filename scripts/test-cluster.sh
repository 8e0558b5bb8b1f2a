#!/usr/bin/env bash
# Tests of scripts/cluster.sh that leave a running cluster untouched: busy port, bad port, and
# idempotent start/status. Run after `scripts/cluster.sh start`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
pass=0
fail=0

# expect NAME RC REGEX -- CMD...: CMD exits with RC and its output matches REGEX.
expect() {
    local name=$1 want=$2 regex=$3
    shift 4
    local rc=0 out
    out=$("$@" 2>&1) || rc=$?
    if [[ $rc -eq $want ]] && grep -Eq -- "$regex" <<<"$out"; then
        echo "ok   $name: $(tail -n 1 <<<"$out")"
        pass=$((pass + 1))
    else
        echo "FAIL $name: rc=$rc (want $want), want /$regex/, got:"
        sed 's/^/     | /' <<<"$out"
        fail=$((fail + 1))
    fi
}

# A TCP listener on a free port of 127.0.0.1 stands in for "some other server".
port_file=$(mktemp)
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
open(sys.argv[1], "w").write(str(s.getsockname()[1])); time.sleep(60)' "$port_file" &
listener=$!
trap 'kill $listener 2>/dev/null || true; rm -f "$port_file"' EXIT
for _ in $(seq 1 50); do [[ -s $port_file ]] && break; sleep 0.1; done
busy=$(cat "$port_file")

# A data dir that does not exist: the busy-port check must fire before any initdb.
expect "busy port" 1 "^cluster.sh: error: port $busy on 127.0.0.1 is busy" -- \
    env TURBOINFER_PGPORT="$busy" TURBOINFER_PGDATA=/nonexistent/turboinfer-test "$cluster" start
[[ ! -e /nonexistent/turboinfer-test ]] || { echo "FAIL busy port: created a data dir"; fail=$((fail + 1)); }
# A data dir of another major (PG_VERSION says so): refused before any initdb or pg_ctl.
other=$(mktemp -d)
echo 99 >"$other/PG_VERSION"
free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
expect "data dir of another major" 1 "holds a PostgreSQL 99 cluster, not [0-9]+" -- \
    env TURBOINFER_PGPORT="$free" TURBOINFER_PGDATA="$other" "$cluster" start
[[ $(ls -A "$other") == PG_VERSION ]] || { echo "FAIL data dir of another major: wrote into it"; fail=$((fail + 1)); }
rm -rf "$other"
expect "bad port" 1 "TURBOINFER_PGPORT must be a number" -- env TURBOINFER_PGPORT=54x "$cluster" status
expect "start when running" 0 "already running" -- "$cluster" start
expect "start again" 0 "already running" -- "$cluster" start
expect "status" 0 "^running: port [0-9]+" -- "$cluster" status
expect "psql" 0 "^1$" -- "$cluster" psql -X -At -c "SELECT 1"

echo "cluster.sh: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
