#!/usr/bin/env bash
# turboinfer_stat in shared scope (issue 15): a private cluster (port TURBOINFER_STATTEST_PORT,
# default 54343; 54543 for 17) with shared_preload_libraries = 'turboinfer', then
#   1. two sessions at once (SmolLM2, one-token answers): their calls are summed in one row of
#      scope 'shared' (the first computes the schema prefix and writes its cache file, the second,
#      waiting for the inference slot, loads it), seen from a third session;
#   2. more (database, role) pairs than rows: the extra ones are counted in the overflow row
#      (NULL dbid and userid) and no count is lost;
#   3. turboinfer_stat_reset() is refused to a role without EXECUTE (42501) and, called by a
#      superuser, clears every backend's counters;
#   4. no backend crashed (same postmaster, no "terminated by signal" in the log).
# Needs: the extension installed into the PostgreSQL of TURBOINFER_PG_MAJOR (default 15; its
# binaries in /usr/lib/postgresql/MAJOR/bin or TURBOINFER_PGBIN),
# model smollm2-135m. The cluster lives in a temporary directory, removed afterwards.
set -euo pipefail
me="test-stat-shared.sh"
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh" # and pgmajor.sh: PGBIN of TURBOINFER_PG_MAJOR
PORT=${TURBOINFER_STATTEST_PORT:-$(pg_port 54343)}
MODEL=smollm2-135m
# Rows of the shared table (MAX_ENTRIES in src/pg/stat.rs): one more role than that overflows.
MAX_ENTRIES=256

pc_temp stattest "$MODEL" # the private cluster (testlib.sh)

pc_init
echo "shared_preload_libraries = 'turboinfer'" >>"$pc_data/postgresql.conf"
pc_start
say "private cluster with shared_preload_libraries = 'turboinfer' on port $PORT ($work)"
pm_pid=$(head -n 1 "$pc_data/postmaster.pid")
q() { pc_psql "$@"; }
q -c "CREATE DATABASE stattest"
q -d stattest -c "CREATE EXTENSION turboinfer" -c "CREATE TABLE users (id int PRIMARY KEY, name text)"

# 1. Two sessions at once, then a third one reads the row.
session() {
    q -d stattest -c "SET turboinfer.model = '$MODEL'" -c "SET turboinfer.max_new_tokens = 1" \
        -c "SET turboinfer.repair_rounds = 0" \
        -c "SELECT nl2sql_explain('how many users are there?')->>'cache'" \
        -c "SELECT 1 FROM (SELECT nl2sql('  ')) x" 2>&1 || true
}
session >"$work/a.out" &
a=$!
session >"$work/b.out" &
b=$!
wait $a $b
got=$(q -d stattest -c "SELECT concat_ws(' ', datname, rolname, calls, errors, errors_by_sqlstate, cache_hits_memory, cache_hits_file, cache_misses, scope) FROM turboinfer_stat")
want='stattest postgres 4 4 {"22023": 2, "42000": 2} 0 1 1 shared'
if [[ $got == "$want" ]]; then
    ok "two sessions' calls in one shared row: $got"
else
    bad "shared row: want '$want', got:" "$got
session a: $(cat "$work/a.out")
session b: $(cat "$work/b.out")"
fi
caches=$(sort "$work/a.out" "$work/b.out" | grep -E '^(miss|file|hit)$' | tr '\n' ' ')
[[ $caches == "file miss " ]] && ok "one session computed the prefix, the other loaded its file" ||
    bad "cache levels of the two sessions: want 'file miss', got '$caches'"

# 2. One call by each of MAX_ENTRIES roles (plus the postgres row: one pair too many).
q -d stattest >/dev/null <<SQL
SET client_min_messages = warning;
DO \$\$ BEGIN
  FOR i IN 1..$MAX_ENTRIES LOOP
    EXECUTE format('CREATE ROLE stattest_%s', i);
    EXECUTE format('SET ROLE stattest_%s', i);
    BEGIN PERFORM nl2sql(' '); EXCEPTION WHEN invalid_parameter_value THEN NULL; END;
    RESET ROLE;
  END LOOP;
END \$\$;
SQL
got=$(q -d stattest -c "SELECT count(*) FILTER (WHERE userid IS NOT NULL), sum(calls) FILTER (WHERE userid IS NULL), sum(calls) FROM turboinfer_stat" | tr '|' ' ')
[[ $got == "$MAX_ENTRIES 1 $((MAX_ENTRIES + 4))" ]] && ok "$MAX_ENTRIES rows, the pair beyond them in the overflow row, no call lost" ||
    bad "overflow: want '$MAX_ENTRIES 1 $((MAX_ENTRIES + 4))' (rows, overflow calls, all calls), got '$got'"

# 3. Reset: refused without EXECUTE, then by a superuser for everyone.
out=$(q -d stattest -c "SET ROLE stattest_1" -c "SELECT turboinfer_stat_reset()" 2>&1 || true)
grep -q 'permission denied for function turboinfer_stat_reset' <<<"$out" && ok "reset refused to a role without EXECUTE" ||
    bad "reset by a role without EXECUTE was not refused" "$out"
got=$(q -d stattest -c "SELECT turboinfer_stat_reset() <= clock_timestamp()" -c "SELECT count(*) FROM turboinfer_stat")
[[ $got == $'t\n0' ]] && ok "reset by a superuser clears every backend's rows" || bad "reset: want 't 0', got" "$got"
q -d stattest -c "SET client_min_messages = warning" -c "DO \$\$ BEGIN FOR i IN 1..$MAX_ENTRIES LOOP EXECUTE format('DROP ROLE stattest_%s', i); END LOOP; END \$\$" >/dev/null

# 4. No crash.
pc_no_crash "$pm_pid"
