#!/usr/bin/env bash
# Decode speed of a model whose matrices the lookup-table kernel takes (a Q2_K GGUF, packed with
# `turboinfer pack`), with the LUT (pack attached) and with the dot product (pack moved aside for
# the run), alternating, and llama.cpp's llama-bench (tg64) on the same file between them; then the
# shipped model for scale. Prints decode tok/s, prefill tok/s and a hash of the generated tokens
# (every line of one model must show the same hash: the LUT changes no bit).
#   benches/lut-decode.sh MODEL.gguf [RUNS=3]          (docs/journal/issue-31-lookup-table-kernels.md, "The LUT in the forward pass")
set -euo pipefail
cd "$(dirname "$0")/.."
M=$(realpath "$1"); RUNS=${2:-3}
[[ -f "$M.kx16" ]] || { echo "lut-decode.sh: no pack $M.kx16 (turboinfer pack $M)" >&2; exit 2; }
BIN=$(benches/llamacpp.sh build)
cargo build --release --bin turboinfer -q
PROMPT="-- PostgreSQL: count the users created in 2024
SELECT"
restore() { [[ -f "$M.kx16.off" ]] && mv "$M.kx16.off" "$M.kx16"; true; }
trap restore EXIT
run() {  # threads label model
  target/release/turboinfer run -m "$3" -p "$PROMPT" -n 64 -t "$1" --json 2>/dev/null | python3 -c "
import json, sys, hashlib
d = json.load(sys.stdin); t = d['timings']
h = hashlib.sha1(str(d['output_ids']).encode()).hexdigest()[:12]
print(f't=$1 $2 decode {t[\"decode_tok_s\"]:.2f} tok/s, prefill {t[\"prefill_tok_s\"]:.1f} tok/s, tokens {h}')"
}
for t in 2 1; do
  for _ in $(seq "$RUNS"); do
    run "$t" lut "$M"
    mv "$M.kx16" "$M.kx16.off"; run "$t" dot "$M"; restore
    if [[ $t == 2 ]]; then
      "$BIN/llama-bench" -m "$M" -t 2 -r 1 -p 0 -n 64 -o jsonl 2>/dev/null | python3 -c "
import json, sys
for l in sys.stdin:
    if l.strip(): print(f't=2 llama.cpp tg64 {json.loads(l)[\"avg_ts\"]:.2f} tok/s')"
    fi
  done
done
SHIPPED=${TURBOINFER_MODELS_DIR:-/var/lib/turboinfer/models}/qwen2.5-coder-1.5b.gguf
if [[ -f "$SHIPPED" ]]; then
  for _ in $(seq "$RUNS"); do run 2 shipped-q4_k_m "$SHIPPED"; done
fi
