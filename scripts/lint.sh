#!/usr/bin/env bash
# Code habits checked in CI (`make lint`): formatting, clippy on the engine (with and without the
# optional sparse FFN) and on the PostgreSQL glue for each registered major with warnings as errors,
# and the layer rules: pgrx is named only under src/pg/, a major's feature only in src/pg/compat.rs,
# and no two modules import each other in a circle.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$HOME/.cargo/bin:$PATH"

echo "lint: cargo fmt --check"
cargo fmt --check
(cd fuzz && cargo fmt --check)

echo "lint: layer rule (pgrx only under src/pg/)"
# Any Rust file outside src/pg/ that names pgrx (a `use`, a path, an attribute, a comment) fails.
offenders=$(grep -rlE '\bpgrx\b' --include='*.rs' src tests benches fuzz/src fuzz/fuzz_targets |
  grep -v '^src/pg/' || true)
if [[ -n $offenders ]]; then
  echo "lint: pgrx named outside src/pg/:" >&2
  printf '  %s\n' $offenders >&2
  exit 1
fi

echo "lint: layer rule (the server version is known only in src/pg/compat.rs)"
# Differences between PostgreSQL majors live in one file (docs/postgres-versions.md): a pgNN
# feature named anywhere else in the code fails.
offenders=$(grep -rlE 'feature *= *"pg1[0-9]"' --include='*.rs' src tests benches | grep -vx 'src/pg/compat.rs' || true)
if [[ -n $offenders ]]; then
  echo "lint: a PostgreSQL major's feature named outside src/pg/compat.rs:" >&2
  printf '  %s\n' $offenders >&2
  exit 1
fi

echo "lint: layer rule (no import circles between modules)"
python3 tools/module_cycles.py

echo "lint: docs links (every relative markdown link names a file and heading that exist)"
python3 scripts/check-doc-links.py

echo "lint: cargo clippy (engine, all targets)"
cargo clippy --quiet --all-targets -- -D warnings
echo "lint: cargo clippy (engine without the sparse FFN, all targets)"
cargo clippy --quiet --no-default-features --all-targets -- -D warnings
# The extension on every major registered with pgrx here (15 by `make setup`, others by
# `make setup-pg PG_MAJOR=NN`; CI registers 14 to 17): each major compiles other code in
# src/pg/compat.rs.
# (A registered major whose pg_config is gone, e.g. its server removed, is skipped.)
majors=$(sed -n 's/^pg\(1[0-9]\) *= *"\(.*\)"$/\1 \2/p' "${PGRX_HOME:-$HOME/.pgrx}/config.toml" 2>/dev/null |
  while read -r m c; do if [[ -x $c ]]; then echo "$m"; fi; done | sort -n | tr '\n' ' ')
[[ $majors == *15* ]] || { echo "lint: PostgreSQL 15 is not registered with pgrx: run make setup" >&2; exit 1; }
for m in $majors; do
  echo "lint: cargo clippy (extension, pg$m)"
  cargo clippy --quiet --lib --features "pg$m" -- -D warnings
done
echo "lint: ok"
