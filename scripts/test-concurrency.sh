#!/usr/bin/env bash
# Many callers (issue 16, item 11): inference slots (turboinfer.max_concurrent) let at most N
# generations run at once server-wide; the others wait in arrival order and can be cancelled.
# Sets turboinfer.max_concurrent = $CONC_MAX (default 2) with ALTER SYSTEM + pg_reload_conf(),
# starts $CONC_CLIENTS (default 8) psql sessions at once, each asking the $CONC_QUESTIONS (default
# 2) questions below with $CONC_MODEL (default smollm2-135m), and meanwhile
#   - samples turboinfer_info()->'slots' from another session every 50 ms: never more than N
#     backends hold a slot, N are seen holding one, and callers are seen waiting;
#   - starts one more session once the queue is full and cancels it (pg_cancel_backend) while it
#     waits: it ends with ERROR 57014 within 2 s, while the others carry on;
#   - checks every other call answered a SELECT, the postmaster pid did not change and the server
#     log has no "terminated by signal".
# Prints the wall time of the run and the median and largest per-caller time (the figures of the
# README). With CONC_MAX=0 (no limit) the slot and cancel checks are skipped.
# Afterwards (also on failure) turboinfer.max_concurrent is reset (ALTER SYSTEM RESET) and the
# test database dropped.
# Needs: extension installed, cluster running, the model. Honors the TURBOINFER_PG*
# vars (the project's cluster of TURBOINFER_PG_MAJOR, default 15: scripts/pgmajor.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
MODEL=${CONC_MODEL:-smollm2-135m}
N=${CONC_MAX:-2}
CLIENTS=${CONC_CLIENTS:-8}
NQ=${CONC_QUESTIONS:-2}
QUESTIONS=('how many users are there?' 'list the names of the users in Paris' 'how many orders did each user place?')
DB=turboinfer_concurrency
me="test-concurrency.sh"
. "$here/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT: the project's cluster of TURBOINFER_PG_MAJOR
pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

pm_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null) || { echo "$me: error: cluster not running ($DATA)" >&2; exit 1; }
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$cluster" psql -X -q -c "LOAD 'turboinfer'" -c "ALTER SYSTEM RESET turboinfer.max_concurrent" -c "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
    "$cluster" psql -X -q -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT
q() { "$cluster" psql -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }

q -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
q -d "$DB" >/dev/null <<'SQL'
CREATE EXTENSION turboinfer;
CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL, city text);
CREATE TABLE orders (id int PRIMARY KEY, user_id int REFERENCES users, amount numeric(10,2));
SQL
q -c "LOAD 'turboinfer'" -c "ALTER SYSTEM SET turboinfer.max_concurrent = $N" -c "SELECT pg_reload_conf()" >/dev/null
sleep 0.5 # the postmaster re-reads the file, then new sessions start with it
shown=$(q -d "$DB" -c "SHOW turboinfer.max_concurrent")
[[ $shown == "$N" ]] && ok "turboinfer.max_concurrent = $N after pg_reload_conf()" || bad "turboinfer.max_concurrent is '$shown', expected $N"
log_from=$(($(stat -c %s "$LOG") + 1))

# The sampler: every 50 ms the slots as turboinfer_info() shows them, until no caller is left.
q -d "$DB" >"$tmp/sampler.out" 2>&1 <<SQL &
SET turboinfer.model = '$MODEL';
SET client_min_messages = notice;
DO \$\$
DECLARE
  s jsonb; h int; w int; max_h int := 0; max_w int := 0; samples int := 0; seen boolean := false;
  t0 timestamptz := clock_timestamp();
BEGIN
  LOOP
    PERFORM pg_stat_clear_snapshot(); -- pg_stat_activity is otherwise frozen for the transaction
    s := turboinfer_info()->'slots';
    h := jsonb_array_length(s->'holding');
    w := jsonb_array_length(s->'waiting');
    max_h := greatest(max_h, h); max_w := greatest(max_w, w); samples := samples + 1;
    IF EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'ti_conc') THEN
      seen := true;
    ELSIF seen OR clock_timestamp() - t0 > interval '60 s' THEN
      EXIT;
    END IF;
    EXIT WHEN clock_timestamp() - t0 > interval '600 s';
    PERFORM pg_sleep(0.05);
  END LOOP;
  RAISE NOTICE 'slots: max_holding=% max_waiting=% samples=% max_concurrent=%', max_h, max_w, samples, s->>'max_concurrent';
END
\$\$;
SQL
pids+=($!)

# The callers: CLIENTS sessions at once, NQ questions each, timed.
caller() { # caller I
    local i=$1 t0 t1 sql="SET turboinfer.model = '$MODEL';"
    for ((k = 0; k < NQ; k++)); do sql+=$'\n'"SELECT nl2sql('${QUESTIONS[k % ${#QUESTIONS[@]}]}');"; done
    t0=$(date +%s.%N)
    PGAPPNAME=ti_conc "$cluster" psql -X -q -A -t -d "$DB" <<<"$sql" >"$tmp/caller$i.out" 2>&1 || true
    t1=$(date +%s.%N)
    echo "$t0 $t1" >"$tmp/caller$i.time"
}
start=$(date +%s.%N)
for ((i = 1; i <= CLIENTS; i++)); do caller "$i" & pids+=($!); done

# One more caller once others wait (started before that, it may get a slot at once and never
# wait); cancelled while it waits.
if ((N > 0)); then
    for _ in $(seq 1 1200); do
        [[ $(q -d "$DB" -c "SELECT jsonb_array_length(turboinfer_info()->'slots'->'waiting') > 0" 2>/dev/null || true) == t ]] && break
        sleep 0.05
    done
    PGAPPNAME=ti_victim "$cluster" psql -X -q -A -t -d "$DB" -v VERBOSITY=verbose \
        -c "SET turboinfer.model = '$MODEL'" -c "SELECT nl2sql('how many users are there?')" >"$tmp/victim.out" 2>&1 &
    vpsql=$!
    pids+=($vpsql)
    vpid=""
    for _ in $(seq 1 600); do
        vpid=$(q -d "$DB" -c "SELECT a.pid FROM pg_stat_activity a, turboinfer_info() i
                              WHERE a.application_name = 'ti_victim'
                                AND (i->'slots'->'waiting') @> to_jsonb(a.pid)" 2>"$tmp/detect.err" || true)
        [[ -n $vpid ]] && break
        sleep 0.05
    done
    if [[ -z $vpid ]]; then
        bad "the extra caller was never seen waiting in turboinfer_info()->'slots'->'waiting':"; sed -n '1,5s/^/     | /p' "$tmp/detect.err"
    else
        ok "the extra caller (pid $vpid) is listed as waiting in turboinfer_info()"
        c0=$(date +%s%N)
        q -c "SELECT pg_cancel_backend($vpid)" >/dev/null
        wait "$vpsql" || true
        cms=$((($(date +%s%N) - c0) / 1000000))
        if grep -q 'ERROR:  57014: canceling statement due to user request' "$tmp/victim.out" && ((cms < 2000)); then
            ok "a waiting caller is cancelled in $cms ms: $(grep -m1 'ERROR:' "$tmp/victim.out")"
        else
            bad "cancelling a waiting caller: expected ERROR 57014 within 2 s, got after $cms ms:"; sed -n '1,10s/^/     | /p' "$tmp/victim.out"
        fi
    fi
fi

for ((i = 1; i <= CLIENTS; i++)); do wait "${pids[i]}" || true; done
end=$(date +%s.%N)
wait "${pids[0]}" || true

answered=0
for ((i = 1; i <= CLIENTS; i++)); do
    n=$(grep -ci '^select' "$tmp/caller$i.out" || true)
    if [[ $n -eq $NQ ]]; then answered=$((answered + 1)); else echo "     caller $i:"; sed -n '1,10s/^/     | /p' "$tmp/caller$i.out"; fi
done
[[ $answered -eq $CLIENTS ]] && ok "all $CLIENTS callers got $NQ answers" || bad "$((CLIENTS - answered)) of $CLIENTS callers did not get $NQ answers"

# Per-caller wall time (connection, model mapping, waiting and generating).
times=$(for ((i = 1; i <= CLIENTS; i++)); do awk '{printf "%.2f\n", $2 - $1}' "$tmp/caller$i.time"; done | sort -n)
median=$(awk '{a[NR] = $1} END {if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2}' <<<"$times")
echo "     $CLIENTS callers x $NQ questions, $MODEL, max_concurrent = $N: total $(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.2f", b - a}') s, median caller $median s, slowest $(tail -n 1 <<<"$times") s"

line=$(grep -o 'slots: .*' "$tmp/sampler.out" || true)
if [[ -z $line ]]; then
    bad "the sampler reported nothing:"; sed -n '1,10s/^/     | /p' "$tmp/sampler.out"
elif ((N > 0)); then
    max_h=$(sed -n 's/.*max_holding=\([0-9]*\).*/\1/p' <<<"$line")
    max_w=$(sed -n 's/.*max_waiting=\([0-9]*\).*/\1/p' <<<"$line")
    if ((max_h == N && max_w > 0)); then ok "never more than $N holding a slot, callers seen waiting ($line)"; else bad "slots: expected at most (and at some point) $N holding and some waiting: $line"; fi
else
    ok "no limit: $line"
fi

now_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || echo none)
if [[ $now_pid == "$pm_pid" ]] && ! grep -q 'terminated by signal' <<<"$(tail -c +"$log_from" "$LOG")"; then
    ok "postmaster $pm_pid still up, no backend terminated by a signal"
else
    bad "the server crashed (postmaster $pm_pid -> $now_pid):"; tail -c +"$log_from" "$LOG" | grep -E 'terminated by signal|terminating' | head -n 5 | sed 's/^/     | /'
fi

echo "concurrency tests: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
