#!/usr/bin/env bash
# Fuzzes the GGUF header parser (turboinfer::gguf::parse_header) with cargo-fuzz / libFuzzer.
# Not part of `make test`: it runs for minutes and needs cargo-fuzz.
#
# Usage: scripts/fuzz-gguf.sh [SECONDS] [TARGET]   (default 1200 s = 20 minutes, target gguf_header)
#
# Targets (fuzz/fuzz_targets/):
#   gguf_header     any bytes -> parse_header: Ok or a typed Err; accepted tensor ranges are in bounds.
#   gguf_roundtrip  parse -> GgufWriter -> parse -> write is byte-identical (writer/reader agreement).
#
# What it does:
#   1. writes the seed corpus into fuzz/corpus/<target>/ (git-ignored): small valid files made by
#      GgufWriter (fuzz/src/gguf_seeds.rs) plus the first 64 KiB of the SmolLM2 model if present
#      ($TURBOINFER_MODELS_DIR, default /var/lib/turboinfer/models);
#   2. runs the target for SECONDS with one libFuzzer process at low priority
#      (the machine is shared), with memory limits so an unbounded allocation counts as a crash;
#   3. prints libFuzzer's final stats (executions, coverage). A crash leaves its input in
#      fuzz/artifacts/<target>/: turn it into a unit test in src/gguf/tests.rs, fix the reader,
#      then replay it with `scripts/fuzz-gguf.sh` again or
#      `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run <target> <artifact>`.
#
# Needs: cargo-fuzz (`cargo install cargo-fuzz --locked`). There is no nightly toolchain here;
# RUSTC_BOOTSTRAP=1 lets stable rustc accept the -Z sanitizer flags cargo-fuzz passes.
# Environment: FUZZ_NICE (default 10), FUZZ_RSS_MB (default 2048), FUZZ_MALLOC_MB (default 512).
set -euo pipefail

secs="${1:-1200}"
target="${2:-gguf_header}"
root="$(cd "$(dirname "$0")/.." && pwd)"
models="${TURBOINFER_MODELS_DIR:-/var/lib/turboinfer/models}"
nice_level="${FUZZ_NICE:-10}"
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$root/fuzz/target}"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "cargo-fuzz is missing: run 'cargo install cargo-fuzz --locked'" >&2
    exit 2
fi

cd "$root/fuzz"
corpus="corpus/$target"
mkdir -p "$corpus"
nice -n "$nice_level" cargo run --quiet --release --bin gguf_seeds -- "$corpus" "$models/smollm2-135m.gguf"
# Other targets also start from what gguf_header has already found (read-only: new finds go to $corpus).
extra=()
if [[ "$target" != gguf_header && -d corpus/gguf_header ]]; then
    extra=(corpus/gguf_header)
fi

# -max_len: the real-model seed is 64 KiB; mutations may grow inputs a little past it.
# -rss_limit_mb / -malloc_limit_mb: a header that makes the parser allocate without bound is a bug.
nice -n "$nice_level" cargo fuzz run "$target" "$corpus" "${extra[@]}" -- \
    -max_total_time="$secs" \
    -max_len=70000 \
    -rss_limit_mb="${FUZZ_RSS_MB:-2048}" \
    -malloc_limit_mb="${FUZZ_MALLOC_MB:-512}" \
    -print_final_stats=1
