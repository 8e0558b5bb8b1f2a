#!/usr/bin/env bash
# The batch worker (issue #30): a private cluster (port TURBOINFER_BATCHTEST_PORT, default 54345;
# 54545 for 17)
# with shared_preload_libraries = 'turboinfer', model qwen2.5-coder-0.5b, then
#   1. the reference: every question answered with turboinfer.batch_worker = off (each backend
#      computes by itself);
#   2. the worker on, with a KV memory budget of three sequences: it starts and reports ready in
#      turboinfer_info();
#   3. four sessions at once ask every question: every answer equals the reference, the worker ran
#      several callers in one pass, evicted caches (rebuilt by copy or recomputation), a waiting backend
#      showed the wait event Extension in pg_stat_activity, and turboinfer_stat counts the calls
#      the worker served (batch_calls, batch_wait_ms);
#   4. cancel: a call stopped by statement_timeout raises 57014; the same session's next call
#      answers as the reference;
#   5. a caller terminated (pg_terminate_backend) while it waits: another caller answers as the
#      reference, the worker carries on, the terminated backend's slot is given back;
#   6. the worker terminated mid-call: the caller gets an ERROR, the postmaster (same pid) starts
#      a new worker, the next call answers as the reference;
#   7. no backend crashed.
# Needs: the extension installed into the PostgreSQL of TURBOINFER_PG_MAJOR (default 15; its
# binaries in /usr/lib/postgresql/MAJOR/bin or TURBOINFER_PGBIN),
# model qwen2.5-coder-0.5b. The cluster lives in a temporary directory, removed afterwards.
set -euo pipefail
me="test-batch-worker.sh"
. "$(dirname "${BASH_SOURCE[0]}")/testlib.sh" # and pgmajor.sh: PGBIN of TURBOINFER_PG_MAJOR
PORT=${TURBOINFER_BATCHTEST_PORT:-$(pg_port 54345)}
MODEL=qwen2.5-coder-0.5b
# A 0.5B sequence of 2048 positions takes 48 MB of f32 keys and values: 150 MB holds three, fewer
# than four callers' sequences, so the worker must evict and recompute.
BUDGET_MB=150

pc_temp batchtest "$MODEL" # the private cluster (testlib.sh)

pc_init
cat >>"$pc_data/postgresql.conf" <<EOF
shared_preload_libraries = 'turboinfer'
turboinfer.model = '$MODEL'
turboinfer.context_tokens = 2048
turboinfer.threads = 2
turboinfer.batch_memory_mb = $BUDGET_MB
EOF
worker() { pc_set turboinfer.batch_worker "$1"; } # worker on|off (the cluster restarted)
q() { pc_psql "$@"; }
worker off
q -c "CREATE DATABASE batchtest"
q -d batchtest -c "CREATE EXTENSION turboinfer" \
  -c "CREATE TABLE customers (id int PRIMARY KEY, name text, country text)" \
  -c "CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, amount numeric, placed date)" \
  -c "INSERT INTO customers SELECT g, 'c' || g, (ARRAY['FR','DE','US'])[1 + g % 3] FROM generate_series(1, 30) g" \
  -c "INSERT INTO orders SELECT g, 1 + g % 30, g * 1.5, date '2024-01-01' + g FROM generate_series(1, 200) g"
questions=(
    "how many customers are there?"
    "total amount of orders per country"
    "which customer placed the most orders?"
    "what is the average order amount?"
)
ask() { # ask QUESTION...: one session answers each question, one line each (the answers only:
    # the verdict's NOTICE on an unsure answer, tested in pg_regress nl2sql_verdict, is silenced)
    local args=() x
    for x in "$@"; do args+=(-c "SELECT replace(nl2sql('$x'), E'\n', ' ')"); done
    q -d batchtest -c "SET turboinfer.max_new_tokens = 64" -c "SET turboinfer.unsure = ignore" "${args[@]}"
}

# 1. Reference answers, each backend computing by itself.
ask "${questions[@]}" >"$work/ref.out"
if [[ $(wc -l <"$work/ref.out") -eq ${#questions[@]} ]]; then ok "reference: ${#questions[@]} answers without the worker"; else bad "reference answers" "$(cat "$work/ref.out")"; fi
off=$(q -d batchtest -c "SELECT turboinfer_info()->'batch_worker'")
if [[ $off == null ]]; then ok "worker off: batch_worker is null in turboinfer_info()"; else bad "worker off: batch_worker" "$off"; fi

# 2. The worker on.
worker on
pm_pid=$(head -n 1 "$pc_data/postmaster.pid")
info() { q -d batchtest -c "SELECT turboinfer_info()->'batch_worker'->>'$1'"; }
ready() {
    local i
    for i in $(seq 1 120); do [[ $(info ready) == true ]] && return 0; sleep 0.5; done
    return 1
}
if ready; then ok "worker ready: $(q -d batchtest -c "SELECT turboinfer_info()->'batch_worker'")"; else bad "worker not ready" "$(info failure) $(tail -n 5 "$pc_log")"; fi
wpid=$(info pid)

# 3. Four sessions at once.
for i in 1 2 3 4; do ask "${questions[@]}" >"$work/s$i.out" 2>&1 & done
seen=0
for i in $(seq 1 200); do
    n=$(q -d batchtest -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%nl2sql%'")
    if [[ $n -gt 0 ]]; then seen=1; break; fi
    sleep 0.05
done
wait
same=1
for i in 1 2 3 4; do cmp -s "$work/ref.out" "$work/s$i.out" || { same=0; bad "session $i answers differ from the reference" "$(diff "$work/ref.out" "$work/s$i.out")"; }; done
[[ $same -eq 1 ]] && ok "four sessions at once: all $((4 * ${#questions[@]})) answers equal the reference"
[[ $seen -eq 1 ]] && ok "a waiting backend shows wait event Extension" || bad "no backend seen waiting on wait event Extension"
batch=$(info max_batch) evictions=$(info evictions) recomputed=$(info recomputed_tokens)
if [[ $batch -ge 2 ]]; then ok "several callers in one pass (max_batch $batch, $(info passes) passes for $(info requests) requests)"; else bad "no pass held two callers (max_batch $batch)"; fi
# An evicted caller's cache is rebuilt by copying the longest prefix another cache shares and
# recomputing the rest; the four sessions ask the same questions, so whether anything is left to
# recompute depends on how far apart they run (CI saw 0 and 108 tokens): only the eviction is
# required here. tests/serve.rs recomputes evicted sequences deterministically, to the same bits.
if [[ $evictions -gt 0 ]]; then ok "the memory budget evicted $evictions caches (recomputed $recomputed tokens, copied $(info copied_tokens))"; else bad "no eviction under a budget of three sequences ($evictions, $recomputed)"; fi
if [[ $(info pid) == "$wpid" ]]; then ok "the same worker throughout"; else bad "the worker changed: $wpid -> $(info pid)"; fi
read -r calls bcalls bwait <<<"$(q -d batchtest -F ' ' -c "SELECT sum(calls), sum(batch_calls), round(sum(batch_wait_ms)) FROM turboinfer_stat")"
if [[ $calls -ge 16 && $bcalls == "$calls" && $bwait -gt 0 ]]; then ok "turboinfer_stat: $bcalls of $calls calls served by the worker, $bwait ms waiting for its passes"; else bad "turboinfer_stat batch counters" "calls $calls batch_calls $bcalls batch_wait_ms $bwait"; fi

# 4. Cancel by statement_timeout, then the same session answers.
out=$(q -d batchtest -v ON_ERROR_STOP=0 -c "SET statement_timeout = '400ms'" \
      -c "SELECT nl2sql('${questions[1]}')" -c "RESET statement_timeout" \
      -c "SET turboinfer.max_new_tokens = 64" -c "SELECT replace(nl2sql('${questions[1]}'), E'\n', ' ')" 2>&1)
if grep -q 'canceling statement due to statement timeout' <<<"$out" && [[ $(tail -n 1 <<<"$out") == "$(sed -n 2p "$work/ref.out")" ]]; then
    ok "statement_timeout cancels a call; the session's next call answers as the reference"
else
    bad "cancel then answer" "$out"
fi

# 5. A caller terminated mid-batch: another caller in the same batches answers as the reference,
#    the worker carries on (same pid), and the slot of the terminated backend is given back.
callers_before=$(info callers)
PGAPPNAME=victim q -d batchtest -v ON_ERROR_STOP=0 -c "SET turboinfer.max_new_tokens = 64" -c "SELECT nl2sql('${questions[2]}')" >"$work/victim.out" 2>&1 &
victim=$!
ask "${questions[0]}" "${questions[3]}" >"$work/survivor.out" 2>&1 &
survivor=$!
term=f
for i in $(seq 1 200); do
    term=$(q -d batchtest -c "SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity WHERE application_name = 'victim' AND wait_event_type = 'Extension'")
    [[ $term == t ]] && break
    sleep 0.05
done
wait $victim || true
wait $survivor || true
if [[ $term == t ]] && grep -q 'terminating connection due to administrator command' "$work/victim.out"; then ok "pg_terminate_backend() on a caller while it waits for the worker"; else bad "caller terminated mid-batch" "$term $(cat "$work/victim.out")"; fi
if [[ $(cat "$work/survivor.out") == "$(sed -n '1p;4p' "$work/ref.out")" && $(info pid) == "$wpid" ]]; then ok "the other caller answers as the reference, the same worker serving"; else bad "after a caller was terminated" "$(cat "$work/survivor.out") worker $(info pid)"; fi
for i in $(seq 1 40); do [[ $(info callers) -le $callers_before ]] && break; sleep 0.1; done
if [[ $(info callers) -le $callers_before ]]; then ok "the terminated caller's slot was given back (callers $(info callers))"; else bad "slot not given back" "callers $callers_before -> $(info callers)"; fi

# 6. The worker terminated mid-call.
q -d batchtest -v ON_ERROR_STOP=0 -v VERBOSITY=verbose -c "SET turboinfer.max_new_tokens = 64" -c "SELECT nl2sql('${questions[2]}')" >"$work/killed.out" 2>&1 &
caller=$!
for i in $(seq 1 100); do
    n=$(q -d batchtest -c "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%nl2sql%'")
    [[ $n -gt 0 ]] && break
    sleep 0.05
done
term=$(q -d batchtest -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'turboinfer batch worker' AND pid = $wpid")
wait $caller || true
if [[ $term == t ]] && grep -q "batch worker exited" "$work/killed.out" && grep -q 57000 "$work/killed.out"; then ok "pg_terminate_backend() on the worker mid-call: the caller got $(grep -o 'ERROR.*' "$work/killed.out" | head -n 1)"; else bad "worker terminated mid-call" "$(cat "$work/killed.out")"; fi
if ready && [[ $(info pid) != "$wpid" ]]; then ok "the postmaster started a new worker (pid $wpid -> $(info pid), generation $(info generation))"; else bad "no new worker" "$(tail -n 5 "$pc_log")"; fi
got=$(ask "${questions[2]}")
if [[ $got == "$(sed -n 3p "$work/ref.out")" ]]; then ok "the next call answers as the reference"; else bad "after the restart" "$got"; fi

# 7. No crash (the postmaster started by `worker on` throughout).
pc_no_crash "$pm_pid"
