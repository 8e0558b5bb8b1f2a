#!/usr/bin/env bash
# The SQL regression tests once more on every other kernel tier this CPU has, against the same
# expected files (every tier computes the same bits: the numeric contract). `make installcheck`
# runs them on the tier a server picks by itself; this restarts the cluster with each other tier
# forced through TURBOINFER_KERNELS in the server's environment, checks that a backend really runs
# it (turboinfer_info()), runs scripts/regress.sh, and finally restarts the cluster with the
# environment it had.
#   scripts/regress-tiers.sh TEST...
# The Makefile passes REGRESS_TIERS: the suites that can catch what tests/tiers.rs (every tier's
# logits bitwise the scalar tier's) cannot; every tier, the scalar one included, runs all of them.
# Needs: the extension installed, the cluster running, the CLI built (for `turboinfer tiers`).
# The cluster is that of TURBOINFER_PG_MAJOR (default 15; scripts/pgmajor.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
me="regress-tiers.sh"
. "$here/pgmajor.sh"
pg_cluster # DATA RUN LOG PORT: the project's cluster of TURBOINFER_PG_MAJOR
[[ $# -gt 0 ]] || { echo "usage: $0 TEST..." >&2; exit 2; }

# Not `scalar-portable`: it differs from this CPU's scalar table only in the 32-element formats'
# dot products, which tests/tiers.rs compares bitwise on every model.
mapfile -t tiers < <(cd "$here/.." && cargo run -q --release --bin turboinfer -- tiers | awk '$2 == "yes" && $3 != "default" && $1 != "scalar-portable" { print $1 }')
if [[ ${#tiers[@]} -eq 0 ]]; then echo "$me: no other kernel tier on this CPU"; exit 0; fi

# The postmaster's TURBOINFER_KERNELS ("" when unset), to restore it afterwards.
pm_pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null) || { echo "$me: error: cluster not running ($DATA)" >&2; exit 1; }
had=$(tr '\0' '\n' </proc/"$pm_pid"/environ | sed -n 's/^TURBOINFER_KERNELS=//p')
restart() { # restart TIER: the cluster with TURBOINFER_KERNELS=TIER ("" = unset)
    "$cluster" stop
    if [[ -n $1 ]]; then env TURBOINFER_KERNELS="$1" "$cluster" start; else env -u TURBOINFER_KERNELS "$cluster" start; fi
}
trap 'restart "$had" 2>&1 | sed "s/^/$me: /"' EXIT

passed=0
failed=()
for t in "${tiers[@]}"; do
    echo "==> pg_regress on kernel tier $t"
    restart "$t"
    # A backend of this server really runs the tier.
    got=$("$cluster" psql -X -q -At -d postgres -c "SET client_min_messages = warning" \
          -c "CREATE EXTENSION IF NOT EXISTS turboinfer" -c "SELECT turboinfer_info()->>'kernel_tier'" \
          -c "DROP EXTENSION turboinfer" 2>&1 | tail -n 1) || true
    if [[ $got != "$t" ]]; then
        echo "$me: the server runs kernel tier '${got}', not $t"; failed+=("$t"); continue
    fi
    if "$here/regress.sh" "$@"; then passed=$((passed + 1)); else failed+=("$t"); fi
done
echo "$me: tiers ${tiers[*]}: ${passed} passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[[ ${#failed[@]} -eq 0 ]]
