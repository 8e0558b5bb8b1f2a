#!/usr/bin/env bash
# Code habits checked in CI (`make lint`): formatting, clippy on the engine (with and without the
# optional sparse FFN) and on the PostgreSQL glue with warnings as errors, and the layer rules:
# pgrx is named only under src/pg/, and no two modules import each other in a circle.
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

echo "lint: layer rule (no import circles between modules)"
python3 tools/module_cycles.py

echo "lint: cargo clippy (engine, all targets)"
cargo clippy --quiet --all-targets -- -D warnings
echo "lint: cargo clippy (engine without the sparse FFN, all targets)"
cargo clippy --quiet --no-default-features --all-targets -- -D warnings
echo "lint: cargo clippy (extension, pg15)"
cargo clippy --quiet --lib --features pg15 -- -D warnings
echo "lint: ok"
