#!/usr/bin/env bash
# Runs the llama.cpp fixture comparison, the bitwise batch-invariance tests (batch = sequential,
# 1 vs 2 threads) and packed = unpacked Q4_K/Q6_K logits once per kernel tier this CPU has (TURBOINFER_KERNELS
# forces a tier; the engine refuses one the CPU lacks, so tiers are chosen from /proc/cpuinfo).
set -euo pipefail
cd "$(dirname "$0")/.."
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
tiers=(scalar)
has avx2 fma && tiers+=(avx2)
has avx2 fma avx_vnni && tiers+=(avxvnni)
has avx512f avx512bw avx512vl && tiers+=(avx512)
has avx512f avx512bw avx512vl avx512_vnni && tiers+=(avx512vnni)
for t in "${tiers[@]}"; do
  echo "==> model fixtures on kernel tier $t"
  TURBOINFER_KERNELS=$t cargo test -q --release --test model_fixtures -- matches_llamacpp batch_is_bitwise_sequential
  echo "==> packed Q4_K/Q6_K weights = unpacked, bitwise, on kernel tier $t"
  TURBOINFER_KERNELS=$t cargo test -q --release --test packed_file -- packed_logits_equal_unpacked --nocapture
done
