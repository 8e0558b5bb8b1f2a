#!/usr/bin/env bash
# The aarch64 kernel tiers (neon, dotprod, i8mm) on this x86-64 machine: cross-builds
# tests/aarch64_contract.rs for aarch64-unknown-linux-gnu and runs it under user-mode QEMU, once per
# tier forced through TURBOINFER_KERNELS, against digests of the same program run natively on the
# scalar tier (the numeric contract's specification): every kernel slot bitwise the aarch64
# scalar reference, the scalar reference's results and SmolLM2-135M's logits bitwise x86's.
#
#   qemu -cpu max         (neon, dotprod, i8mm): every tier's kernel slots; model logits on the neon
#                         tier (SmolLM2, f32 and f16 caches), the dotprod tier (the 0.5B model,
#                         its Q4_K/Q6_K/Q5_0/Q8_0 matrices unpacked through sdot) and the i8mm tier
#                         (SmolLM2, and the 0.5B model with its packed Q4_K weights: the smmla
#                         kernels)
#   qemu -cpu cortex-a57  (Armv8.0, no dotprod/i8mm): detection must offer exactly scalar and neon,
#                         the default tier is neon, every neon kernel slot runs (no SIGILL)
#
# The toolchain comes from scripts/setup-aarch64.sh (Debian's rustc 1.96 with the aarch64 std,
# RUSTC=/usr/bin/rustc for the cross build only); the cross build has its own target directory
# ($TURBOINFER_CROSS_TARGET_DIR, default target/cross). QEMU 7.2 hangs on thread creation: the
# test is one thread, without libtest (harness = false).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

TARGET=aarch64-unknown-linux-gnu
SYSROOT=/usr/aarch64-linux-gnu
# Seconds one QEMU run may take before it counts as hung (a run takes well under a minute).
RUN_TIMEOUT=${TURBOINFER_QEMU_TIMEOUT:-300}

scripts/setup-aarch64.sh
digest=$(realpath -m target/aarch64-contract.digest)
mkdir -p target

echo "==> x86-64: reference digests on the scalar tier"
TURBOINFER_KERNELS=scalar cargo test -q --release --test aarch64_contract -- --write-digest "$digest"

# cross CPU TIER ARGS...: runs the aarch64 test under `qemu-aarch64 -cpu CPU`, TURBOINFER_KERNELS=TIER
# (empty: the default selection).
cross() {
  local cpu=$1 tier=$2
  shift 2
  echo "==> aarch64 (qemu -cpu $cpu): tier ${tier:-default} $*"
  TURBOINFER_KERNELS=$tier \
  RUSTC=/usr/bin/rustc \
  CARGO_TARGET_DIR=${TURBOINFER_CROSS_TARGET_DIR:-target/cross} \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="timeout $RUN_TIMEOUT qemu-aarch64 -cpu $cpu -L $SYSROOT" \
    cargo test -q --release --no-default-features --target $TARGET --test aarch64_contract -- \
    --digest "$digest" "$@"
}

echo "==> cross build ($TARGET, rustc $(/usr/bin/rustc --version | cut -d' ' -f2))"
RUSTC=/usr/bin/rustc CARGO_TARGET_DIR=${TURBOINFER_CROSS_TARGET_DIR:-target/cross} \
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
  cargo test -q --release --no-default-features --target $TARGET --test aarch64_contract --no-run

cross max scalar --no-model --expect-tiers scalar,neon,dotprod,i8mm
cross max neon --runs smollm2,smollm2-f16
cross max dotprod --runs qwen-0.5b
cross max i8mm --runs smollm2,qwen-0.5b
cross cortex-a57 "" --no-model --expect-tiers scalar,neon
echo "==> aarch64 (qemu -cpu cortex-a57): TURBOINFER_KERNELS=i8mm must be refused"
if out=$(cross cortex-a57 i8mm --no-model 2>&1); then
  echo "test-aarch64.sh: TURBOINFER_KERNELS=i8mm ran on a CPU without i8mm" >&2
  exit 1
fi
grep -q "kernel tier i8mm is not available on this CPU: missing dotprod" <<<"$out" ||
  { echo "$out" >&2; echo "test-aarch64.sh: no 'missing dotprod' refusal" >&2; exit 1; }
echo "refused: $(grep -o 'kernel tier i8mm is not available[^"]*dotprod' <<<"$out" | head -1)"
echo "==> aarch64 tiers: ok"
