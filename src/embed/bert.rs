//! The BERT encoder (Hugging Face `BertModel`, post-LayerNorm) and sentence-transformers' mean
//! pooling and normalization. f32 weights as shipped; one thread (a sentence of 20 tokens is
//! ~0.2 G multiply-adds); the matrix products on the kernel tier's F32 dot product, whose
//! results the numeric contract makes the same on every tier.

use std::io::Read;
use std::path::Path;

use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

use super::{EmbedError, SafeTensors};
use crate::fileio::regular_file::{self, Links};
use crate::kernels::math;
use crate::kernels::{f32_bytes, try_kernels, KernelSet};
use crate::platform::fallible::try_zeroed;
use crate::quant::contract::dot16;
use crate::quant::GgmlType;

/// Tokens per text at most (sentence-transformers' `max_seq_length` for all-MiniLM-L6-v2, whose
/// `tokenizer.json` says 128; position embeddings go to 512). Longer texts are truncated.
pub const MAX_TOKENS: usize = 256;

/// Bytes of text tokenized at most (`Encoder::tokens`): 256 tokens of English are ~1.5 KB, and a
/// word piece is at most 100 characters (longer words are one unknown token), so 64 KiB is beyond
/// any text whose first 256 tokens it could change, short of hostile input.
pub const MAX_TEXT: usize = 64 << 10;

/// The shape of the encoder (`config.json`).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub vocab: usize,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub ffn: usize,
    pub positions: usize,
    pub token_types: usize,
    pub eps: f32,
}

impl Config {
    /// Reads `config.json`: a `bert` model with `gelu` activation and absolute positions.
    pub fn parse(json: &str) -> Result<Config, EmbedError> {
        let bad = |m: String| EmbedError::Format(format!("config.json: {m}"));
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| bad(format!("not JSON: {e}")))?;
        let text = |k: &str| v.get(k).and_then(|x| x.as_str());
        if text("model_type") != Some("bert") {
            return Err(bad(format!("model_type {:?}, expected \"bert\"", text("model_type"))));
        }
        if text("hidden_act").unwrap_or("gelu") != "gelu" {
            return Err(bad(format!("hidden_act {:?}, expected \"gelu\"", text("hidden_act"))));
        }
        if text("position_embedding_type").unwrap_or("absolute") != "absolute" {
            return Err(bad("only absolute position embeddings are supported".into()));
        }
        // Bounds keep every product below (a model 64× MiniLM's size is still refused by none).
        let int = |k: &str, max: u64| -> Result<usize, EmbedError> {
            match v.get(k).and_then(|x| x.as_u64()) {
                Some(x) if (1..=max).contains(&x) => Ok(x as usize),
                other => Err(bad(format!("{k} = {other:?}, expected 1..={max}"))),
            }
        };
        let c = Config {
            vocab: int("vocab_size", 1 << 20)?,
            dim: int("hidden_size", 8192)?,
            layers: int("num_hidden_layers", 128)?,
            heads: int("num_attention_heads", 256)?,
            ffn: int("intermediate_size", 65536)?,
            positions: int("max_position_embeddings", 8192)?,
            token_types: int("type_vocab_size", 16)?,
            eps: v.get("layer_norm_eps").and_then(|x| x.as_f64()).unwrap_or(1e-12) as f32,
        };
        if !c.dim.is_multiple_of(c.heads) {
            return Err(bad(format!("hidden_size {} not a multiple of {} heads", c.dim, c.heads)));
        }
        Ok(c)
    }

    fn head_dim(&self) -> usize {
        self.dim / self.heads
    }
}

/// `y = x·Wᵀ + b` (PyTorch `Linear`): `w` is `[out, inp]` row-major.
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    inp: usize,
}

impl Linear {
    fn load(st: &SafeTensors, name: &str, out: usize, inp: usize) -> Result<Linear, EmbedError> {
        Ok(Linear {
            w: st.f32(&format!("{name}.weight"), &[out, inp])?,
            b: st.f32(&format!("{name}.bias"), &[out])?,
            inp,
        })
    }

    /// `x`: `[n, inp]` → `[n, out]`, with the kernel tier's F32 batch dot product (`k`): each
    /// weight row is read once and dotted with every token row. Its sums follow the numeric
    /// contract's sixteen element lanes, so the result is the same on every tier.
    fn apply(&self, k: &KernelSet, x: &[f32]) -> Vec<f32> {
        let (n, out) = (x.len() / self.inp, self.b.len());
        let batch = k.vec_dot_batch(GgmlType::F32).expect("every tier has an F32 batch kernel");
        let xb = f32_bytes(x);
        let mut y = vec![0.0f32; n * out];
        let mut col = vec![0.0f32; n]; // one output column: [n]
        for (o, (w, b)) in self.w.chunks_exact(self.inp).zip(&self.b).enumerate() {
            batch(self.inp, f32_bytes(w), xb, self.inp * 4, &mut col);
            for (t, c) in col.iter().enumerate() {
                y[t * out + o] = c + b;
            }
        }
        y
    }
}

/// LayerNorm over rows of `dim`: `(x - mean) / sqrt(var + eps) · w + b` (biased variance).
struct Norm {
    w: Vec<f32>,
    b: Vec<f32>,
    eps: f32,
}

impl Norm {
    fn load(st: &SafeTensors, name: &str, dim: usize, eps: f32) -> Result<Norm, EmbedError> {
        Ok(Norm {
            w: st.f32(&format!("{name}.weight"), &[dim])?,
            b: st.f32(&format!("{name}.bias"), &[dim])?,
            eps,
        })
    }

    fn apply(&self, x: &mut [f32]) {
        let d = self.w.len();
        for row in x.chunks_exact_mut(d) {
            // Statistics in f64: the rows are short, and it keeps the two passes exact enough.
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / d as f64;
            let inv = 1.0 / (var + self.eps as f64).sqrt();
            for ((v, w), b) in row.iter_mut().zip(&self.w).zip(&self.b) {
                *v = ((*v as f64 - mean) * inv) as f32 * w + b;
            }
        }
    }
}

/// One encoder layer.
struct Layer {
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    attn_norm: Norm,
    up: Linear,
    down: Linear,
    ffn_norm: Norm,
}

/// A loaded encoder and its tokenizer.
pub struct Encoder {
    cfg: Config,
    /// The kernel tier of this process (`TURBOINFER_KERNELS` or the best the CPU has).
    kernels: &'static KernelSet,
    tokenizer: Tokenizer,
    /// `[vocab, dim]`, `[positions, dim]`, `[token_types, dim]`.
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<Layer>,
}

/// Reads `dir/name` (a regular file, opened without blocking: `fileio::regular_file`) into a
/// buffer the allocator may refuse without aborting.
fn read(dir: &Path, name: &str) -> Result<Vec<u8>, EmbedError> {
    let path = dir.join(name);
    let io = |source| EmbedError::Io { path: path.display().to_string(), source };
    let mut f = regular_file::open(&path, Links::Follow).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    let mut buf = try_zeroed::<u8>(usize::try_from(len).unwrap_or(usize::MAX))?;
    f.read_exact(&mut buf).map_err(io)?;
    Ok(buf)
}

impl Encoder {
    /// Loads a sentence-transformers directory: `config.json`, `model.safetensors`,
    /// `tokenizer.json`, and (if present) `1_Pooling/config.json`, which must ask for mean pooling.
    pub fn load(dir: &Path) -> Result<Encoder, EmbedError> {
        let utf8 = |b: Vec<u8>, name: &str| {
            String::from_utf8(b).map_err(|_| EmbedError::Format(format!("{name}: not UTF-8")))
        };
        let cfg = Config::parse(&utf8(read(dir, "config.json")?, "config.json")?)?;
        if dir.join("1_Pooling/config.json").exists() {
            let p = utf8(read(dir, "1_Pooling/config.json")?, "1_Pooling/config.json")?;
            let p: serde_json::Value = serde_json::from_str(&p)
                .map_err(|e| EmbedError::Format(format!("1_Pooling/config.json: not JSON: {e}")))?;
            if p.get("pooling_mode_mean_tokens").and_then(|x| x.as_bool()) != Some(true) {
                return Err(EmbedError::Format(
                    "1_Pooling/config.json: only mean pooling is supported".into(),
                ));
            }
        }
        let mut tokenizer = Tokenizer::from_bytes(read(dir, "tokenizer.json")?)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        // One text at a time: no padding; truncation at MAX_TOKENS (or the positions there are).
        tokenizer.with_padding(None::<PaddingParams>);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS.min(cfg.positions),
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let st = SafeTensors::parse(read(dir, "model.safetensors")?)?;
        let (d, eps) = (cfg.dim, cfg.eps);
        let layers = (0..cfg.layers)
            .map(|l| {
                let p = format!("encoder.layer.{l}");
                Ok(Layer {
                    q: Linear::load(&st, &format!("{p}.attention.self.query"), d, d)?,
                    k: Linear::load(&st, &format!("{p}.attention.self.key"), d, d)?,
                    v: Linear::load(&st, &format!("{p}.attention.self.value"), d, d)?,
                    o: Linear::load(&st, &format!("{p}.attention.output.dense"), d, d)?,
                    attn_norm: Norm::load(&st, &format!("{p}.attention.output.LayerNorm"), d, eps)?,
                    up: Linear::load(&st, &format!("{p}.intermediate.dense"), cfg.ffn, d)?,
                    down: Linear::load(&st, &format!("{p}.output.dense"), d, cfg.ffn)?,
                    ffn_norm: Norm::load(&st, &format!("{p}.output.LayerNorm"), d, eps)?,
                })
            })
            .collect::<Result<Vec<_>, EmbedError>>()?;
        Ok(Encoder {
            kernels: try_kernels().map_err(|e| EmbedError::Format(e.to_string()))?,
            word: st.f32("embeddings.word_embeddings.weight", &[cfg.vocab, d])?,
            position: st.f32("embeddings.position_embeddings.weight", &[cfg.positions, d])?,
            token_type: st.f32("embeddings.token_type_embeddings.weight", &[cfg.token_types, d])?,
            emb_norm: Norm::load(&st, "embeddings.LayerNorm", d, eps)?,
            layers,
            tokenizer,
            cfg,
        })
    }

    /// Runs the matrix products on kernel table `k` from now on (tests compare tiers in one
    /// process; the result is the same on each).
    pub fn use_kernels(&mut self, k: &'static KernelSet) {
        self.kernels = k;
    }

    /// The model's shape.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The token ids the encoder sees for `text` (`[CLS] … [SEP]`, truncated at [`MAX_TOKENS`]).
    /// A text longer than [`MAX_TEXT`] bytes is cut there first (at a character boundary): a
    /// bound on the tokenizer's work, far beyond what 256 tokens of any ordinary text take.
    pub fn tokens(&self, text: &str) -> Result<Vec<u32>, EmbedError> {
        let text = &text[..text.floor_char_boundary(MAX_TEXT)];
        let enc =
            self.tokenizer.encode(text, true).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let ids = enc.get_ids().to_vec();
        if let Some(&bad) = ids.iter().find(|&&t| t as usize >= self.cfg.vocab) {
            return Err(EmbedError::Format(format!("tokenizer id {bad} outside the vocabulary")));
        }
        Ok(ids)
    }

    /// The unit-length embedding of `text` (`config().dim` values).
    pub fn embed(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        Ok(self.embed_tokens(&self.tokens(text)?))
    }

    /// The unit-length embedding of token ids `ids` (each below the vocabulary size, at most
    /// `positions` of them; an empty list gives zeros).
    fn embed_tokens(&self, ids: &[u32]) -> Vec<f32> {
        let (d, n) = (self.cfg.dim, ids.len().min(self.cfg.positions));
        if n == 0 {
            return vec![0.0; d];
        }
        // x: [n, d]
        let mut x = Vec::with_capacity(n * d);
        for (p, &t) in ids[..n].iter().enumerate() {
            let (w, pos) = (&self.word[t as usize * d..][..d], &self.position[p * d..][..d]);
            x.extend((0..d).map(|j| w[j] + pos[j] + self.token_type[j]));
        }
        self.emb_norm.apply(&mut x);
        for l in &self.layers {
            let a = self.attention(l, &x, n);
            let k = self.kernels;
            let mut h = l.o.apply(k, &a);
            h.iter_mut().zip(&x).for_each(|(h, x)| *h += x);
            l.attn_norm.apply(&mut h);
            let mut up = l.up.apply(k, &h);
            up.iter_mut().for_each(|v| *v = gelu(*v));
            let mut y = l.down.apply(k, &up);
            y.iter_mut().zip(&h).for_each(|(y, h)| *y += h);
            l.ffn_norm.apply(&mut y);
            x = y;
        }
        // Mean over tokens (every token is real: no padding), then L2 normalization
        // (sentence-transformers' Normalize: x / max(|x|, 1e-12)).
        let mut mean = vec![0.0f64; d];
        for row in x.chunks_exact(d) {
            mean.iter_mut().zip(row).for_each(|(m, &v)| *m += v as f64);
        }
        let norm = mean.iter().map(|m| m * m).sum::<f64>().sqrt().max(1e-12 * n as f64);
        mean.iter().map(|m| (m / norm) as f32).collect()
    }

    /// Multi-head self-attention of `x` (`[n, d]`, no mask: every token is real) before the
    /// output projection: `[n, d]`.
    fn attention(&self, l: &Layer, x: &[f32], n: usize) -> Vec<f32> {
        let (d, hd) = (self.cfg.dim, self.cfg.head_dim());
        let kern = self.kernels;
        let (q, k, v) = (l.q.apply(kern, x), l.k.apply(kern, x), l.v.apply(kern, x));
        let scale = 1.0 / (hd as f32).sqrt();
        let mut out = vec![0.0f32; n * d];
        let mut p = vec![0.0f32; n];
        for h in 0..self.cfg.heads {
            for i in 0..n {
                let qi = &q[i * d + h * hd..][..hd];
                for (j, pj) in p.iter_mut().enumerate() {
                    let kj = &k[j * d + h * hd..][..hd];
                    *pj = dot16(hd, |e| qi[e], |e| kj[e]) * scale;
                }
                let max = p.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                let mut sum = 0.0f32;
                p.iter_mut().for_each(|v| {
                    *v = math::exp(*v - max);
                    sum += *v;
                });
                let o = &mut out[i * d + h * hd..][..hd];
                for (j, &pj) in p.iter().enumerate() {
                    let vj = &v[j * d + h * hd..][..hd];
                    o.iter_mut().zip(vj).for_each(|(o, &v)| *o += pj / sum * v);
                }
            }
        }
        out
    }
}

/// GELU as BERT defines it, `x/2 · (1 + erf(x/√2))` (not the tanh approximation).
fn gelu(x: f32) -> f32 {
    let x = x as f64;
    (0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))) as f32
}

/// The error function to ~1e-15: its Taylor series for |x| < 2.5, else the continued fraction of
/// erfc (both converge fast there); |x| ≥ 6 is ±1 in f64.
fn erf(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < 2.5 {
        // erf(a) = 2/√π Σ (-1)^k a^(2k+1) / (k! (2k+1)); at a = 2.5 the terms fall below 1e-17
        // of the sum by k = 60.
        let (mut term, mut sum, a2) = (a, a, a * a);
        for k in 1..80 {
            term *= -a2 / k as f64;
            let t = term / (2 * k + 1) as f64;
            sum += t;
            if t.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum * std::f64::consts::FRAC_2_SQRT_PI
    } else if a < 6.0 {
        // erfc(a) = e^(-a²)/√π · 1/(a + 1/2/(a + 1/(a + 3/2/(a + 2/(a + …))))), evaluated from
        // the 60th level up.
        let mut f = 0.0f64;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (a + f);
        }
        1.0 - math::exp_f64(-a * a) / std::f64::consts::PI.sqrt() / (a + f)
    } else {
        1.0
    };
    r.copysign(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// erf against known values (Abramowitz & Stegun table 7.1, 15 digits).
    #[test]
    fn erf_matches_tabulated_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_047),
            (1.0, 0.842_700_792_949_715),
            (2.0, 0.995_322_265_018_953),
            (2.5, 0.999_593_047_982_555),
            (3.0, 0.999_977_909_503_001),
            (-1.0, -0.842_700_792_949_715),
        ] {
            assert!((erf(x) - want).abs() < 1e-13, "erf({x}) = {} not {want}", erf(x));
        }
    }

    #[test]
    fn config_is_checked() {
        let ok = r#"{"model_type":"bert","hidden_act":"gelu","vocab_size":30522,"hidden_size":384,
            "num_hidden_layers":6,"num_attention_heads":12,"intermediate_size":1536,
            "max_position_embeddings":512,"type_vocab_size":2,"layer_norm_eps":1e-12}"#;
        let c = Config::parse(ok).unwrap();
        assert_eq!((c.dim, c.heads, c.head_dim(), c.layers), (384, 12, 32, 6));
        assert!(Config::parse(&ok.replace("\"gelu\"", "\"relu\"")).is_err());
        assert!(Config::parse(&ok.replace("\"bert\"", "\"llama\"")).is_err());
        assert!(Config::parse(
            &ok.replace("\"num_attention_heads\":12", "\"num_attention_heads\":7")
        )
        .is_err());
        assert!(Config::parse(&ok.replace("384", "0")).is_err());
    }
}
