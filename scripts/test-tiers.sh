#!/usr/bin/env bash
# Runs the llama.cpp fixture comparison, the bitwise batch-invariance tests (batch = sequential,
# 1 vs 2 threads) and packed = unpacked Q4_K/Q6_K logits once per kernel tier this CPU has, each
# tier forced through TURBOINFER_KERNELS, against the same expectations (every tier computes the
# same bits: the numeric contract; tests/tiers.rs compares the tiers' logits directly). The tiers
# come from `turboinfer tiers`, the engine's own CPU detection.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t tiers < <(cargo run -q --release --bin turboinfer -- tiers | awk '$2 == "yes" { print $1 }')
[[ ${tiers[0]:-} == scalar ]] || { echo "test-tiers.sh: turboinfer tiers did not list the scalar tier" >&2; exit 1; }
echo "==> kernel tiers on this CPU: ${tiers[*]}"
for t in "${tiers[@]}"; do
  echo "==> model fixtures on kernel tier $t"
  TURBOINFER_KERNELS=$t cargo test -q --release --test model_fixtures -- matches_llamacpp batch_is_bitwise_sequential
  echo "==> packed Q4_K/Q6_K weights = unpacked, bitwise, on kernel tier $t"
  TURBOINFER_KERNELS=$t cargo test -q --release --test packed_file -- packed_logits_equal_unpacked --nocapture
done
