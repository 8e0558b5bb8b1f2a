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

Files: <name>.raw (rows × row_bytes, concatenated), <name>.f32 (rows × row_len little-endian f32).
Usage: python3 tools/gen_quant_fixtures.py [out_dir]
"""
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "quant")
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
         T.Q5_1: "q5_1", T.Q8_0: "q8_0", T.Q4_K: "q4_K", T.Q6_K: "q6_K"}


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
    n, rows = 256, 4
    for qtype in [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]:
        x = synthetic_rows(rng, rows, n)
        raw = quantize(x, qtype)
        values = dequantize(raw, qtype)
        out.append(write(f"synthetic.{NAMES[qtype]}", qtype, raw, values,
                         {"synthetic": "gguf.quants.quantize on seeded normal data, per-block magnitudes 1e-4..1e2"}))
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
    x = synthetic_rows(rng, 4, 256)
    raw = quantize(x, T.Q8_0)
    name = "quantize.q8_0"
    x.astype("<f4").tofile(os.path.join(OUT, name + ".f32"))
    raw.astype(np.uint8).tofile(os.path.join(OUT, name + ".raw"))
    return [{"name": name, "type": "q8_0", "row_len": 256, "rows": 4, "f32": name + ".f32", "raw": name + ".raw",
             "source": {"synthetic": "gguf.quants.quantize(Q8_0) of seeded data"}}]


def main():
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
    total = sum(os.path.getsize(os.path.join(OUT, p)) for p in os.listdir(OUT))
    print(f"wrote {len(manifest['dequant'])} dequant + {len(manifest['quantize'])} quantize fixtures, {total} bytes, to {OUT}")


if __name__ == "__main__":
    main()
