#!/usr/bin/env bash
# `turboinfer quantize` against llama.cpp's quantizer on the same input: both requantize MODEL to
# TYPE (llama-quantize with --pure, so every block matrix gets TYPE rather than llama.cpp's mixture,
# and --allow-requantize, as the input is already quantized), then the bytes of every block matrix
# (blk.N.{attn_q,attn_k,attn_v,attn_output,ffn_gate,ffn_up,ffn_down}.weight) are compared.
# A measuring stick, not a test: llama.cpp is not in CI.
#   benches/quantize-vs-llamacpp.sh MODEL.gguf q4_0|q2_k     (default: smollm2-135m, q4_0)
# Prints per tensor type how many matrices are bit-identical, and the first differing ones with
# their count of differing bytes; exits 1 if any differ.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
MODEL=${1:-/var/lib/turboinfer/models/smollm2-135m.gguf}
TYPE=${2:-q4_0}
OUT=${TMPDIR:-/tmp}/quantize-vs-llamacpp.$$
mkdir -p "$OUT"
trap 'rm -rf "$OUT"' EXIT
bin=$(benches/llamacpp.sh build)
cargo build --release -j1 --bin turboinfer -q
./target/release/turboinfer quantize -m "$MODEL" -o "$OUT/ours.gguf" --type "$TYPE"
"$bin/llama-quantize" --allow-requantize --pure "$MODEL" "$OUT/llama.gguf" "${TYPE^^}" 2 \
  >"$OUT/llama.log" 2>&1 || { cat "$OUT/llama.log" >&2; exit 1; }

python3 - "$OUT/ours.gguf" "$OUT/llama.gguf" <<'EOF'
import re, struct, sys

def tensors(path):
    """name -> (ggml type id, bytes) of a GGUF v3 file (little-endian, as written by both)."""
    f = open(path, "rb").read()
    assert f[:4] == b"GGUF", path
    n_t, n_kv = struct.unpack_from("<QQ", f, 8)
    at = 24
    def s():
        nonlocal at
        (n,) = struct.unpack_from("<Q", f, at); at += 8 + n
        return f[at - n:at].decode()
    # Sizes of the scalar metadata types by id (gguf_type: u8 i8 u16 i16 u32 i32 f32 bool _ _ u64 i64 f64).
    size = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    align = 32
    def value(t):
        nonlocal at
        if t == 8: return s()
        if t == 9:
            (et, n) = struct.unpack_from("<IQ", f, at); at += 12
            return [value(et) for _ in range(n)]
        v = f[at:at + size[t]]; at += size[t]
        return v
    for _ in range(n_kv):
        k = s(); (t,) = struct.unpack_from("<I", f, at); at += 4
        v = value(t)
        if k == "general.alignment": align = struct.unpack("<I", v)[0]
    infos = []
    for _ in range(n_t):
        name = s(); (nd,) = struct.unpack_from("<I", f, at); at += 4
        dims = struct.unpack_from("<%dQ" % nd, f, at); at += 8 * nd
        ty, off = struct.unpack_from("<IQ", f, at); at += 12
        infos.append((name, ty, off))
    data = -(-at // align) * align
    # Each tensor's bytes end where the next (by offset) begins; padding is zeros in both files.
    offs = sorted(o for _, _, o in infos) + [len(f) - data]
    nxt = {o: offs[i + 1] for i, o in enumerate(offs[:-1])}
    return {n: (ty, f[data + o:data + nxt[o]]) for n, ty, o in infos}

ours, ref = tensors(sys.argv[1]), tensors(sys.argv[2])
matrix = re.compile(r"blk\.\d+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$")
same, diff = {}, []
for name in sorted(n for n in ours if matrix.match(n)):
    (ta, a), (tb, b) = ours[name], ref[name]
    if ta != tb:
        diff.append((name, f"type {ta} vs llama.cpp {tb}"))
    elif a != b:
        n = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
        diff.append((name, f"{n} of {len(b)} bytes differ"))
    else:
        same[ta] = same.get(ta, 0) + 1
print(f"block matrices bit-identical to llama-quantize: {sum(same.values())} of {sum(same.values()) + len(diff)}"
      f" (by ggml type id: {same})")
for name, why in diff[:10]:
    print(f"  differs: {name}: {why}")
sys.exit(1 if diff else 0)
EOF
