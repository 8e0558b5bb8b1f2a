#!/usr/bin/env bash
# Side-by-side speed of TurboInfer and llama.cpp on the same GGUF files, same thread count, in one
# run (these machines are noisy: only ratios from one run mean anything). Prints a markdown table.
#   benches/compare.sh [MODEL_NAME...]   (default: the three models, when fetched)
# Env: REPS (default 3), PP (default 64), TG (default 64), THREADS (default 2), DEPTH (default 0:
# both run after DEPTH cached tokens, llama-bench's -d; nl2sql decodes after a ~750-token schema).
#   TIERS="avx2 avx512vnni"  run TurboInfer once per kernel tier (TURBOINFER_KERNELS), each next to
#                            the same llama.cpp run; "all" = every tier this CPU has but scalar;
#                            "scalar-portable" is the scalar tier of a CPU without F16C.
#   BASELINE=REV             also run the e2e bench of git revision REV (built in a worktree under
#                            target/baseline), interleaved with the current build: "before" and
#                            "after" columns per tier, for changes that must not cost speed.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS_DIR=${TURBOINFER_MODELS_DIR:-/var/lib/turboinfer/models}
REPS=${REPS:-3} PP=${PP:-64} TG=${TG:-64} THREADS=${THREADS:-2} DEPTH=${DEPTH:-0}
TIERS=${TIERS:-} BASELINE=${BASELINE:-}
names=("$@"); [[ ${#names[@]} -gt 0 ]] || names=(smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b)
bin=$(benches/llamacpp.sh build)

# The e2e bench binary of the working tree (and of BASELINE), called directly so that each run is
# exactly one process with one TURBOINFER_KERNELS.
e2e_binary() { # e2e_binary DIR: builds DIR's e2e bench, prints its path
  (cd "$1" && cargo bench -q --bench e2e --no-run --message-format=json 2>/dev/null) |
    python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except ValueError: continue
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]=="e2e" and m.get("executable"): print(m["executable"])' | tail -n 1
}
after=$(e2e_binary .)
before= before_portable=yes
if [[ -n $BASELINE ]]; then
  wt=target/baseline
  rev=$(git rev-parse --verify "$BASELINE^{commit}")
  if [[ ! -d $wt ]]; then git worktree add -q --detach "$wt" "$rev"; else git -C "$wt" checkout -q --detach "$rev"; fi
  before=$(e2e_binary "$wt")
  before_portable=yes; grep -q scalar-portable "$wt/src/kernels/select.rs" 2>/dev/null || before_portable=no
  [[ -x $before ]] || { echo "compare.sh: could not build the e2e bench of $BASELINE" >&2; exit 1; }
fi
cargo bench -q --bench kernels --no-run >/dev/null 2>&1
if [[ $TIERS == all ]]; then
  TIERS=$(cargo run -q --release --bin turboinfer -- tiers | awk '$2 == "yes" && $1 != "scalar" && $1 != "scalar-portable" { print $1 }' | tr '\n' ' ')
fi
tiers=(${TIERS:-default})
out=$(mktemp -d)
# Read bandwidth before and after the runs (2 threads), to put decode's weight stream next to it.
bandwidth() { cargo bench -q --bench kernels -- --bandwidth-only | sed -n 's/.*2 thread(s): \([0-9.]*\) GB\/s/\1/p'; }
# ours WHICH BINARY TIER MODEL: one e2e run (TIER "default": the process's own choice).
ours() {
  local tier=$3
  # A BASELINE build older than the `scalar-portable` override has only its scalar table (before
  # 0.3.0's F16C table that was the portable code).
  if [[ $1 == before && $tier == scalar-portable && $before_portable == no ]]; then tier=scalar; fi
  local env=(); [[ $tier == default ]] || env=(TURBOINFER_KERNELS="$tier")
  env "${env[@]}" "$2" --reps "$REPS" --pp "$PP" --tg "$TG" --depth "$DEPTH" -t "$THREADS" "$4"
}
for n in "${names[@]}"; do
  m="$MODELS_DIR/$n.gguf"; [[ -f $m ]] || { echo "skipping $n: $m not found" >&2; continue; }
  # Alternate the engines (and the builds, and the tiers) so drift in machine load hits all alike;
  # the read bandwidth is measured just before TurboInfer's and llama.cpp's runs (it drifts by
  # tens of percent on these machines).
  bandwidth >"$out/$n.bw.ours"
  for t in "${tiers[@]}"; do
    ours after "$after" "$t" "$m" >"$out/$n.$t.ours"
    if [[ -n $before ]]; then ours before "$before" "$t" "$m" >"$out/$n.$t.before"; fi
  done
  bandwidth >"$out/$n.bw.llama"
  "$bin/llama-bench" -m "$m" -t "$THREADS" -r "$REPS" -p "$PP" -n "$TG" -d "$DEPTH" -o json >"$out/$n.llama" 2>/dev/null
done
python3 - "$out" "$PP" "$TG" "$DEPTH" "${#tiers[@]}" "${tiers[@]}" "${names[@]}" <<'PY'
import json, sys, os, re
out, pp, tg, depth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
nt = int(sys.argv[5]); tiers = sys.argv[6:6 + nt]; names = sys.argv[6 + nt:]
at = f" @ d{depth}" if depth else ""

def parse(path):
    res, mb = {}, None
    for line in open(path):
        w = re.match(r"\|[^|]*\|\s*decode weight GB/s[^|]*\|[^|]*\|\s*([\d.]+) MB per token", line)
        if w: mb = float(w.group(1))
        m = re.match(r"\|\s*\S+\s*\|\s*(pp\d+|tg\d+)(?: @ d\d+)?\s*\|\s*([\d.]+)", line)
        if m: res[m.group(1)] = float(m.group(2))
    return res, mb

baseline = any(os.path.exists(f"{out}/{n}.{t}.before") for n in names for t in tiers)
if baseline:
    print("| model | test | tier | before tok/s | after tok/s | after/before | llama.cpp tok/s | after/llama.cpp |")
    print("|---|---|---|---|---|---|---|---|")
else:
    print("| model | test | tier | TurboInfer tok/s | llama.cpp tok/s | ratio |")
    print("|---|---|---|---|---|---|")
for n in names:
    if not os.path.exists(f"{out}/{n}.llama"): continue
    llama = {}
    for r in json.load(open(f"{out}/{n}.llama")):
        key = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
        # llama-bench reports per-run samples; take their median like ours.
        s = sorted(r.get("samples_ts") or [r["avg_ts"]]); llama[key] = s[len(s)//2]
    mb = None
    for t in tiers:
        ours, mb_t = parse(f"{out}/{n}.{t}.ours")
        mb = mb or mb_t
        before = parse(f"{out}/{n}.{t}.before")[0] if baseline else {}
        for k in (f"pp{pp}", f"tg{tg}"):
            if k not in ours or k not in llama: continue
            if baseline and k in before:
                print(f"| {n} | {k}{at} | {t} | {before[k]:.1f} | {ours[k]:.1f} | {ours[k]/before[k]:.3f} "
                      f"| {llama[k]:.1f} | {ours[k]/llama[k]:.2f} |")
            else:
                print(f"| {n} | {k}{at} | {t} | {ours[k]:.1f} | {llama[k]:.1f} | {ours[k]/llama[k]:.2f} |")
    if mb is not None and not baseline:
        g = lambda r: r * mb / 1e3
        bo, bl = (float(open(f"{out}/{n}.bw.{e}").read()) for e in ("ours", "llama"))
        best = max(parse(f"{out}/{n}.{t}.ours")[0].get(f"tg{tg}", 0) for t in tiers)
        if best and f"tg{tg}" in llama:
            print(f"| {n} | decode weight GB/s{at} | best | {g(best):.1f} ({100*g(best)/bo:.0f}% of {bo:.1f}) "
                  f"| {g(llama[f'tg{tg}']):.1f} ({100*g(llama[f'tg{tg}'])/bl:.0f}% of {bl:.1f}) | |")
print("\ndecode weight GB/s = tg tok/s x the weight bytes a decode step reads (the same GGUF matrices for both "
      "engines), next to the 2-thread read bandwidth measured just before that engine's runs")
PY
rm -rf "$out"
