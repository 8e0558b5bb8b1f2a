#!/usr/bin/env bash
# The SQL regression tests once more on every other kernel tier this CPU has, against the same
# expected files (every tier computes the same bits: the numeric contract). `make installcheck`
# runs them on the tier a server picks by itself; this restarts the cluster with each other tier
# forced through TURBOINFER_KERNELS in the server's environment, checks that a backend really runs
# it (turboinfer_info()), runs scripts/regress.sh, and finally restarts the cluster with the
# environment it had.
#   scripts/regress-tiers.sh [--scalar-subset TEST,TEST...] TEST...
# With --scalar-subset, the scalar tier runs only those of TEST... that are in the list: with no
# SIMD it takes about five times as long as the others (~20 minutes for every suite on a 2-vCPU
# VM, which alone would eat a quarter of CI's 90 minutes), and tests/tiers.rs already compares its
# logits bitwise with every other tier on every model; the subset keeps an end-to-end check of it.
# Needs: the extension installed, the cluster running, the CLI built (for `turboinfer tiers`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/cluster.sh"
DATA=${TURBOINFER_PGDATA:-/var/lib/turboinfer/cluster}
me="regress-tiers.sh"
scalar_subset=""
if [[ ${1:-} == --scalar-subset ]]; then
    [[ $# -ge 2 ]] || { echo "usage: $0 [--scalar-subset TEST,TEST...] TEST..." >&2; exit 2; }
    scalar_subset=",$2,"
    shift 2
fi
[[ $# -gt 0 ]] || { echo "usage: $0 [--scalar-subset TEST,TEST...] TEST..." >&2; exit 2; }
# The suites tier $1 runs: all of them, or the scalar subset on the scalar tier.
suites_for() {
    local t
    if [[ $1 != scalar || -z $scalar_subset ]]; then printf '%s\n' "${all[@]}"; return; fi
    for t in "${all[@]}"; do [[ $scalar_subset == *",$t,"* ]] && echo "$t"; done
    return 0
}
all=("$@")

# Not `scalar-portable`: it differs from this CPU's scalar table only in the 32-element formats'
# dot products, which tests/tiers.rs compares bitwise on every model (its suites would add the
# scalar tier's ~17 minutes again).
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
    mapfile -t suites < <(suites_for "$t")
    if [[ ${#suites[@]} -lt ${#all[@]} ]]; then
        echo "==> tier $t: ${#suites[@]} of ${#all[@]} suites (--scalar-subset)"
    fi
    if [[ ${#suites[@]} -eq 0 ]]; then echo "$me: tier $t: none of these suites is in --scalar-subset; skipped"; passed=$((passed + 1)); continue; fi
    if "$here/regress.sh" "${suites[@]}"; then passed=$((passed + 1)); else failed+=("$t"); fi
done
echo "$me: tiers ${tiers[*]}: ${passed} passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[[ ${#failed[@]} -eq 0 ]]
