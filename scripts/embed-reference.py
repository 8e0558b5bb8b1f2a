#!/usr/bin/env python3
"""embed-reference.py: the reference sentence embeddings for tests/embed.rs.

An independent forward pass of a sentence-transformers BERT model (all-MiniLM-L6-v2), in float64
numpy, written from the Hugging Face BertModel definition (post-LayerNorm encoder, exact erf GELU)
and sentence-transformers' mean pooling and normalization; tokens from the `tokenizers` package
(the same tokenizer.json). It shares no code with the Rust encoder (src/embed/).

Usage: embed-reference.py MODEL_DIR > tests/fixtures/minilm.json
Needs: numpy, tokenizers (pip install numpy tokenizers; any recent version).
"""

import hashlib
import json
import math
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

SENTENCES = [
    "how many users signed up last month?",
    "table orders: order_id, customer_id, total amount, created_at",
    "List the names of customers who never placed an order.",
    "Which doctor treated the most patients in 2023?",
    "wallet transactions by merchant category",
    "",
    "Café crème, naïve résumé — 東京 🚀",
    "column email (text): the customer's e-mail address, unique, not null",
    # Longer than 256 tokens: the encoder truncates as sentence-transformers does.
    " ".join(f"word{i}" for i in range(300)),
]
MAX_TOKENS = 256


def load(path):
    """The float32 tensors of a safetensors file, as float64 arrays."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"]).astype(np.float64)
    return out, hashlib.sha256(raw).hexdigest()


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def forward(t, cfg, ids):
    d, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = d // heads
    n = len(ids)
    x = (t["embeddings.word_embeddings.weight"][ids]
         + t["embeddings.position_embeddings.weight"][:n]
         + t["embeddings.token_type_embeddings.weight"][0])
    x = layer_norm(x, t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"], eps)
    lin = lambda x, p: x @ t[p + ".weight"].T + t[p + ".bias"]
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}"
        q = lin(x, p + ".attention.self.query").reshape(n, heads, hd).transpose(1, 0, 2)
        k = lin(x, p + ".attention.self.key").reshape(n, heads, hd).transpose(1, 0, 2)
        v = lin(x, p + ".attention.self.value").reshape(n, heads, hd).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, d)
        h = layer_norm(lin(a, p + ".attention.output.dense") + x,
                       t[p + ".attention.output.LayerNorm.weight"], t[p + ".attention.output.LayerNorm.bias"], eps)
        f = lin(gelu(lin(h, p + ".intermediate.dense")), p + ".output.dense")
        x = layer_norm(f + h, t[p + ".output.LayerNorm.weight"], t[p + ".output.LayerNorm.bias"], eps)
    m = x.mean(0)
    return m / max(np.linalg.norm(m), 1e-12)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[2])
    d = sys.argv[1]
    cfg = json.load(open(f"{d}/config.json"))
    t, sha = load(f"{d}/model.safetensors")
    tok = Tokenizer.from_file(f"{d}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    cases = []
    for s in SENTENCES:
        ids = tok.encode(s).ids
        e = forward(t, cfg, ids)
        cases.append({"text": s, "ids": ids, "embedding": [float(f"{v:.8g}") for v in e]})
    json.dump({"model_sha256": sha, "generator": "scripts/embed-reference.py", "cases": cases}, sys.stdout, indent=1,
              ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
