#!/usr/bin/env bash
# The first nl2sql() of a new backend after a server restart, on a cold and on a warm page cache,
# for the installed turboinfer.so and (optionally) another build's, swapped in turn.
#   benches/coldstart-pg.sh [BASELINE_SO] [REPS]
# BASELINE_SO: another build's library (e.g. `cargo build --release --lib --features pg15` in a
# worktree of an older revision: target/release/libturboinfer.so). REPS: runs per build and round
# (default 2; two rounds). Root only (it drops the page cache and replaces the installed
# library); uses the test cluster of scripts/cluster.sh and a database `coldstart` with two small
# tables (made when missing). The installed library is put back at the end. Prints one line per
# run: build, cold|warm, seconds (psql's whole call, connection included).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-} reps=${2:-2}
[[ $(id -u) == 0 ]] || { echo "coldstart-pg.sh: run as root (drop_caches)" >&2; exit 1; }
lib=$(pg_config --pkglibdir)/turboinfer.so
saved=$(mktemp --suffix=.so)
cp "$lib" "$saved"
psql_() { scripts/cluster.sh psql -X -q -v ON_ERROR_STOP=1 "$@"; }
# Never overwrite a library a process maps: stop the server, then `install` (a new inode).
use() { scripts/cluster.sh stop >/dev/null 2>&1 || true; install -m 755 "$1" "$lib"; }
restore() { use "$saved"; rm -f "$saved"; scripts/cluster.sh start >/dev/null 2>&1; }
trap restore EXIT

scripts/cluster.sh start >/dev/null 2>&1
if [[ -z $(psql_ -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'coldstart'") ]]; then
  psql_ -d postgres -c "CREATE DATABASE coldstart"
  psql_ -d coldstart <<'SQL'
CREATE EXTENSION turboinfer;
CREATE TABLE users (id int PRIMARY KEY, name text, city text, created_at date);
CREATE TABLE orders (id int PRIMARY KEY, user_id int REFERENCES users, amount numeric, placed_at date);
INSERT INTO users SELECT g, 'u' || g, 'c' || (g % 5), date '2026-01-01' + g FROM generate_series(1, 100) g;
SQL
fi
q="SELECT nl2sql('how many users live in each city?')"
one() { # one cold|warm: restart, (drop the page cache), time one call in a new backend
  scripts/cluster.sh stop >/dev/null 2>&1 || true
  if [[ $1 == cold ]]; then sync; echo 1 > /proc/sys/vm/drop_caches; fi
  scripts/cluster.sh start >/dev/null 2>&1
  local t0; t0=$(date +%s.%N)
  psql_ -d coldstart -Atc "$q" >/dev/null
  echo "$(date +%s.%N) - $t0" | bc
}
builds=(installed:"$saved")
[[ -n $base ]] && builds+=(baseline:"$base")
for round in 1 2; do
  for b in "${builds[@]}"; do
    name=${b%%:*} so=${b#*:}
    use "$so"
    one warm >/dev/null   # the schema's prefix cache file, as after earlier use
    for _ in $(seq "$reps"); do
      echo "$name cold $(one cold)"
      echo "$name warm $(one warm)"
    done
  done
done
