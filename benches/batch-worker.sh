#!/usr/bin/env bash
# Many callers with and without the batch worker (issue #30), side by side in one run: a private
# cluster (port BW_PORT, default 54346) with shared_preload_libraries = 'turboinfer' and model
# BW_MODEL (default qwen2.5-coder-1.5b), a small shop schema, then for each mode
#   off: turboinfer.batch_worker = off, turboinfer.max_concurrent = 1 (callers queue; each
#        backend computes alone, with every core);
#   on:  turboinfer.batch_worker = on (one worker batches every caller's passes);
# (1) one caller asks every question (the lone caller's time per answer), then (2) BW_CALLERS
# (default 8) sessions at once each ask every question. Prints the wall time of (2), the median and
# slowest caller, the lone caller's median answer, the worker's counters, and whether every answer
# of every run equals the lone in-backend caller's. Then (3) llama-server -np BW_CALLERS answers
# the prompts nl2sql() built the same way, side by side (BW_LLAMACPP=0 skips it; it needs
# benches/llamacpp.sh build).
#   benches/batch-worker.sh
#   BW_SQLEVAL=broker benches/batch-worker.sh      # 16 development-set questions (see SQLEVAL below)
#   BW_QUEUE=0 ...                                 # mode off only as the lone caller (the reference
#                                                  # answers), not with the callers queueing (~11 min less
#                                                  # with BW_SQLEVAL and the 1.5B on 2 cores)
# Needs: the extension installed into the PostgreSQL of TURBOINFER_PGBIN (default Debian's), the
# model. Takes a few minutes (the 1.5B on 2 cores).
set -euo pipefail
me="batch-worker.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/testlib.sh"
PGBIN=${TURBOINFER_PGBIN:-/usr/lib/postgresql/15/bin}
PORT=${BW_PORT:-54346}
MODEL=${BW_MODEL:-qwen2.5-coder-1.5b}
CALLERS=${BW_CALLERS:-8}
# BW_SQLEVAL=DB: the development database DB of ../shared/sqleval (its dump) and its first 16
# questions (10 basic, 6 advanced; the question text only) instead of the shop schema.
SQLEVAL=${BW_SQLEVAL:-}
SQLEVAL_DIR=${TURBOINFER_SQLEVAL_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/sqleval}
CTX=2048 NEW=96
[[ -n $SQLEVAL ]] && CTX=4096 NEW=256 # longer schemas and answers
pc_temp bwbench "$MODEL"
pc_init
cat >>"$pc_data/postgresql.conf" <<EOF
shared_preload_libraries = 'turboinfer'
turboinfer.model = '$MODEL'
turboinfer.context_tokens = $CTX
turboinfer.max_new_tokens = $NEW
turboinfer.batch_memory_mb = 4096
EOF
mode() { pc_set turboinfer.batch_worker "$1"; } # mode on|off (the cluster restarted)
q() { pc_psql "$@"; }
if [[ -n $SQLEVAL ]]; then
    [[ -f $SQLEVAL_DIR/dbs/$SQLEVAL.sql ]] || die "no $SQLEVAL_DIR/dbs/$SQLEVAL.sql"
    mapfile -t questions < <(python3 -c '
import csv, os, sys
d, db = sys.argv[1:3]
for f, n in (("instruct_basic_postgres.csv", 10), ("instruct_advanced_postgres.csv", 6)):
    rows = [r for r in csv.DictReader(open(os.path.join(d, f))) if r["db_name"] == db][:n]
    for r in rows:
        print(" ".join(r["question"].split()).replace(chr(39), chr(39) * 2))
' "$SQLEVAL_DIR" "$SQLEVAL")
else
    questions=(
        "how many customers are there?"
        "total amount of orders per country"
        "which customer placed the most orders?"
        "what is the average order amount?"
        "how many orders were placed in 2024?"
        "list the names of customers from France"
    )
fi
ask() { # ask: one session, every question; one line per answer: seconds<TAB>sql (ERROR: none)
    local x
    for x in "${questions[@]}"; do
        echo "\\set a ERROR"
        echo "SELECT clock_timestamp() AS t0 \\gset"
        echo "SELECT replace(nl2sql('$x'), E'\\n', ' ') AS a \\gset"
        echo "SELECT round(extract(epoch FROM clock_timestamp() - :'t0')::numeric, 2) || E'\\t' || :'a';"
    done | q -d bw -v ON_ERROR_STOP=0 -f - 2>/dev/null
}
# The worker's cumulative passes, computed tokens and copied tokens, on one line.
worker_counts() { q -d bw -c "SELECT concat_ws(' ', b->>'passes', b->>'tokens', b->>'copied_tokens') FROM (SELECT turboinfer_info()->'batch_worker' b) s"; }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

mode off
q -c "CREATE DATABASE bw"
if [[ -n $SQLEVAL ]]; then
    q -d bw -c "CREATE EXTENSION turboinfer" -f "$SQLEVAL_DIR/dbs/$SQLEVAL.sql" >/dev/null
else
q -d bw -c "CREATE EXTENSION turboinfer" \
  -c "CREATE TABLE customers (id int PRIMARY KEY, name text, country text)" \
  -c "CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, amount numeric, placed date)" \
  -c "INSERT INTO customers SELECT g, 'c' || g, (ARRAY['FR','DE','US'])[1 + g % 3] FROM generate_series(1, 30) g" \
  -c "INSERT INTO orders SELECT g, 1 + g % 30, g * 1.5, date '2024-01-01' + g FROM generate_series(1, 200) g"
fi
for m in off on; do
    [[ $m == on ]] && mode on
    if [[ $m == on ]]; then
        for i in $(seq 1 240); do [[ $(q -d bw -c "SELECT turboinfer_info()->'batch_worker'->>'ready'") == true ]] && break; sleep 0.5; done
    fi
    ask >/dev/null # warm: model mapped, schema prefix computed (in the worker, or a cache file)
    ask >"$work/lone-$m.out"
    [[ $m == off && ${BW_QUEUE:-1} == 0 ]] && continue
    q -d bw -c "SELECT turboinfer_stat_reset()" >/dev/null # the counters below: the callers' only
    # The worker's counters are cumulative: taken now, to report the callers' part alone.
    [[ $m == on ]] && w0=$(worker_counts)
    start=$(date +%s.%N)
    for i in $(seq 1 "$CALLERS"); do
        ( s=$(date +%s.%N); ask >"$work/c$i-$m.out"; echo "$(date +%s.%N) - $s" | bc >"$work/t$i-$m" ) &
    done
    wait
    total=$(echo "$(date +%s.%N) - $start" | bc)
    callers=$(cat "$work"/t*-"$m" | median)
    slowest=$(cat "$work"/t*-"$m" | sort -n | tail -n 1)
    lone=$(cut -f1 "$work/lone-$m.out" | median)
    same=yes
    for f in "$work/lone-$m.out" "$work"/c*-"$m".out; do
        cmp -s <(cut -f2 "$work/lone-off.out") <(cut -f2 "$f") || same=no
    done
    printf '%-4s %d callers x %d questions: total %.1f s, median caller %.1f s, slowest %.1f s; lone caller median answer %.2f s; answers equal the lone in-backend ones: %s\n' \
        "$m" "$CALLERS" "${#questions[@]}" "$total" "$callers" "$slowest" "$lone" "$same"
    # What the callers' calls did, summed over every session (turboinfer_stat's shared scope):
    # prompt tokens (cached ones included), generated tokens, forward passes, prefill / decode time.
    echo "     calls: $(q -d bw -c "SELECT format('%s calls, %s prompt tokens, %s generated, %s passes, prefill %s s, decode %s s', sum(calls), sum(prompt_tokens), sum(generated_tokens), sum(forward_passes), round((sum(prefill_ms) / 1000)::numeric, 1), round((sum(decode_ms) / 1000)::numeric, 1)) FROM turboinfer_stat")"
    if [[ $m == on ]]; then
        echo "     worker: $(q -d bw -c "SELECT turboinfer_info()->'batch_worker'")"
        read -r p0 t0 c0 <<<"$w0"
        read -r p1 t1 c1 <<<"$(worker_counts)"
        echo "     worker, the callers' part: $((p1 - p0)) passes, $((t1 - t0)) tokens computed ($(((t1 - t0) / (p1 - p0 > 0 ? p1 - p0 : 1))) a pass), $((c1 - c0)) copied"
    fi
done
# (3) The peer: llama-server -np CALLERS on the very prompts nl2sql() built (BW_LLAMACPP=0: skip).
if [[ ${BW_LLAMACPP:-1} == 1 ]]; then
    {
        echo "["
        for i in "${!questions[@]}"; do
            [[ $i -gt 0 ]] && echo ","
            q -d bw -c "SELECT nl2sql_explain('${questions[$i]}')::jsonb->'prompt'" || echo '""'
        done
        echo "]"
    } >"$work/prompts.json"
    pc_stop # the cores to llama-server alone
    python3 "$(dirname "${BASH_SOURCE[0]}")/llamacpp-callers.py" "$work/prompts.json" "$MODEL" \
        "$(nproc)" "$CTX" "$NEW" "$CALLERS" "$work" || echo "llama-server: not run (build it with benches/llamacpp.sh build)"
fi
