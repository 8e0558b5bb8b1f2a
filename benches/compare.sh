#!/usr/bin/env bash
# Side-by-side speed of TurboInfer and llama.cpp on the same GGUF files, same thread count, in one
# run (these machines are noisy: only ratios from one run mean anything). Prints a markdown table.
#   benches/compare.sh [MODEL_NAME...]   (default: the three models, when fetched)
# Env: REPS (default 3), PP (default 64), TG (default 64), THREADS (default 2), DEPTH (default 0:
# both run after DEPTH cached tokens, llama-bench's -d; nl2sql decodes after a ~750-token schema).
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS_DIR=${TURBOINFER_MODELS_DIR:-/var/lib/turboinfer/models}
REPS=${REPS:-3} PP=${PP:-64} TG=${TG:-64} THREADS=${THREADS:-2} DEPTH=${DEPTH:-0}
names=("$@"); [[ ${#names[@]} -gt 0 ]] || names=(smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
bin=$(benches/llamacpp.sh build)
cargo bench -q --bench e2e --no-run >/dev/null 2>&1
cargo bench -q --bench kernels --no-run >/dev/null 2>&1
out=$(mktemp -d)
# Read bandwidth before and after the runs (2 threads), to put decode's weight stream next to it.
bandwidth() { cargo bench -q --bench kernels -- --bandwidth-only | sed -n 's/.*2 thread(s): \([0-9.]*\) GB\/s/\1/p'; }
for n in "${names[@]}"; do
  m="$MODELS_DIR/$n.gguf"; [[ -f $m ]] || { echo "skipping $n: $m not found" >&2; continue; }
  # Alternate the two engines so drift in machine load hits both alike; the read bandwidth is
  # measured just before each (it drifts by tens of percent on these machines).
  bandwidth >"$out/$n.bw.ours"
  cargo bench -q --bench e2e -- --reps "$REPS" --pp "$PP" --tg "$TG" --depth "$DEPTH" -t "$THREADS" "$m" >"$out/$n.ours"
  bandwidth >"$out/$n.bw.llama"
  "$bin/llama-bench" -m "$m" -t "$THREADS" -r "$REPS" -p "$PP" -n "$TG" -d "$DEPTH" -o json >"$out/$n.llama" 2>/dev/null
done
python3 - "$out" "$PP" "$TG" "$DEPTH" "${names[@]}" <<'PY'
import json, sys, os, re
out, pp, tg, depth, names = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
at = f" @ d{depth}" if depth else ""

print(f"| model | test | TurboInfer tok/s | llama.cpp tok/s | ratio |")
print("|---|---|---|---|---|")
for n in names:
    if not os.path.exists(f"{out}/{n}.ours"): continue
    ours, mb = {}, None
    for line in open(f"{out}/{n}.ours"):
        w = re.match(r"\|[^|]*\|\s*decode weight GB/s[^|]*\|[^|]*\|\s*([\d.]+) MB per token", line)
        if w: mb = float(w.group(1))
        m = re.match(r"\|\s*\S+\s*\|\s*(pp\d+|tg\d+)(?: @ d\d+)?\s*\|\s*([\d.]+)", line)
        if m: ours[m.group(1)] = float(m.group(2))
    llama = {}
    for r in json.load(open(f"{out}/{n}.llama")):
        key = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        # llama-bench reports per-run samples; take their median like ours.
        s = sorted(r.get("samples_ts") or [r["avg_ts"]]); llama[key] = s[len(s)//2]
    for k in (f"pp{pp}", f"tg{tg}"):
        if k in ours and k in llama:
            print(f"| {n} | {k}{at} | {ours[k]:.1f} | {llama[k]:.1f} | {ours[k]/llama[k]:.2f} |")
    if mb is not None and f"tg{tg}" in ours and f"tg{tg}" in llama:
        g = lambda r: r * mb / 1e3
        bo, bl = (float(open(f"{out}/{n}.bw.{e}").read()) for e in ("ours", "llama"))
        print(f"| {n} | decode weight GB/s{at} | {g(ours[f'tg{tg}']):.1f} ({100*g(ours[f'tg{tg}'])/bo:.0f}% of {bo:.1f}) "
              f"| {g(llama[f'tg{tg}']):.1f} ({100*g(llama[f'tg{tg}'])/bl:.0f}% of {bl:.1f}) | |")
print("\ndecode weight GB/s = tg tok/s x the weight bytes a decode step reads (the same GGUF matrices for both "
      "engines), next to the 2-thread read bandwidth measured just before that engine's runs")
PY
rm -rf "$out"
