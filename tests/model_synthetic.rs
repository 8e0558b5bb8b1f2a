//! Tiny synthetic models written as GGUF files: the forward pass against an independent f64
//! reference transformer (llama, qwen2 and qwen3 layouts, F32 weights so no quantization noise),
//! and load-time validation errors.

use std::path::PathBuf;
use turboinfer::model::{Logits, Model, ModelError};
use turboinfer::platform::runtime::Runtime;

/// Shape of the synthetic models.
const DIM: usize = 32;
const N_HEADS: usize = 4;
const N_KV: usize = 2;
const HEAD_DIM: usize = 16; // q_dim = 64 != DIM on purpose (as in qwen3)
const FFN: usize = 48;
const VOCAB: usize = 11;
const N_LAYERS: usize = 2;
const EPS: f32 = 1e-6;
const THETA: f32 = 10_000.0;
/// GGUF data alignment (the format's default).
const ALIGN: usize = 32;

/// A metadata value.
enum Val {
    U32(u32),
    F32(f32),
    Str(&'static str),
}

/// A tensor to write: name, ggml dims, f32 data.
struct T {
    name: String,
    dims: Vec<usize>,
    data: Vec<f32>,
}

/// Serialises a GGUF v3 file with F32 tensors.
fn gguf(kvs: &[(&str, Val)], tensors: &[T]) -> Vec<u8> {
    fn s(out: &mut Vec<u8>, x: &str) {
        out.extend((x.len() as u64).to_le_bytes());
        out.extend(x.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        s(&mut out, k);
        match v {
            Val::U32(x) => {
                out.extend(4u32.to_le_bytes());
                out.extend(x.to_le_bytes());
            }
            Val::F32(x) => {
                out.extend(6u32.to_le_bytes());
                out.extend(x.to_le_bytes());
            }
            Val::Str(x) => {
                out.extend(8u32.to_le_bytes());
                s(&mut out, x);
            }
        }
    }
    let mut offset = 0usize;
    for t in tensors {
        s(&mut out, &t.name);
        out.extend((t.dims.len() as u32).to_le_bytes());
        for &d in &t.dims {
            out.extend((d as u64).to_le_bytes());
        }
        out.extend(0u32.to_le_bytes()); // F32
        out.extend((offset as u64).to_le_bytes());
        offset += (t.data.len() * 4).div_ceil(ALIGN) * ALIGN;
    }
    out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
    for t in tensors {
        for v in &t.data {
            out.extend(v.to_le_bytes());
        }
        out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
    }
    out
}

/// Deterministic pseudo-random values in [-scale, scale] (a 64-bit LCG; constants from Knuth's MMIX).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// The tensors of a synthetic model of `arch`.
fn tensors(arch: &str) -> Vec<T> {
    let qd = N_HEADS * HEAD_DIM;
    let kvd = N_KV * HEAD_DIM;
    let mut seed = 0;
    let mut t = |name: String, dims: Vec<usize>, scale: f32, offset: f32| {
        seed += 1;
        let n = dims.iter().product();
        T { name, dims, data: values(n, seed, scale).into_iter().map(|v| v + offset).collect() }
    };
    let mut v = vec![
        t("token_embd.weight".into(), vec![DIM, VOCAB], 1.0, 0.0),
        t("output_norm.weight".into(), vec![DIM], 0.2, 1.0),
    ];
    for l in 0..N_LAYERS {
        let n = |s: &str| format!("blk.{l}.{s}");
        v.push(t(n("attn_norm.weight"), vec![DIM], 0.2, 1.0));
        v.push(t(n("attn_q.weight"), vec![DIM, qd], 0.4, 0.0));
        v.push(t(n("attn_k.weight"), vec![DIM, kvd], 0.4, 0.0));
        v.push(t(n("attn_v.weight"), vec![DIM, kvd], 0.4, 0.0));
        v.push(t(n("attn_output.weight"), vec![qd, DIM], 0.2, 0.0));
        if arch == "qwen2" {
            v.push(t(n("attn_q.bias"), vec![qd], 0.3, 0.0));
            v.push(t(n("attn_k.bias"), vec![kvd], 0.3, 0.0));
            v.push(t(n("attn_v.bias"), vec![kvd], 0.3, 0.0));
        }
        if arch == "qwen3" {
            v.push(t(n("attn_q_norm.weight"), vec![HEAD_DIM], 0.2, 1.0));
            v.push(t(n("attn_k_norm.weight"), vec![HEAD_DIM], 0.2, 1.0));
        }
        v.push(t(n("ffn_norm.weight"), vec![DIM], 0.2, 1.0));
        v.push(t(n("ffn_gate.weight"), vec![DIM, FFN], 0.3, 0.0));
        v.push(t(n("ffn_up.weight"), vec![DIM, FFN], 0.3, 0.0));
        v.push(t(n("ffn_down.weight"), vec![FFN, DIM], 0.2, 0.0));
    }
    if arch != "llama" {
        v.push(t("output.weight".into(), vec![DIM, VOCAB], 0.5, 0.0)); // llama stays tied
    }
    v
}

/// The metadata of a synthetic model of `arch`.
fn metadata(arch: &'static str) -> Vec<(String, Val)> {
    let k = |s: &str| format!("{arch}.{s}");
    vec![
        ("general.architecture".into(), Val::Str(arch)),
        (k("block_count"), Val::U32(N_LAYERS as u32)),
        (k("context_length"), Val::U32(64)),
        (k("embedding_length"), Val::U32(DIM as u32)),
        (k("feed_forward_length"), Val::U32(FFN as u32)),
        (k("attention.head_count"), Val::U32(N_HEADS as u32)),
        (k("attention.head_count_kv"), Val::U32(N_KV as u32)),
        (k("attention.key_length"), Val::U32(HEAD_DIM as u32)),
        (k("rope.freq_base"), Val::F32(THETA)),
        (k("attention.layer_norm_rms_epsilon"), Val::F32(EPS)),
    ]
}

/// Writes a file and returns its path (unique per test name).
fn write(tag: &str, kvs: &[(String, Val)], ts: &[T]) -> PathBuf {
    let kv: Vec<(&str, Val)> = kvs
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                match v {
                    Val::U32(x) => Val::U32(*x),
                    Val::F32(x) => Val::F32(*x),
                    Val::Str(x) => Val::Str(x),
                },
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("turboinfer-model-synth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{tag}.gguf"));
    std::fs::write(&p, gguf(&kv, ts)).unwrap();
    p
}

/// Looks a tensor up by name.
fn get<'a>(ts: &'a [T], name: &str) -> Option<&'a [f32]> {
    ts.iter().find(|t| t.name == name).map(|t| t.data.as_slice())
}

/// `W x` for W stored as `rows` rows of `x.len()` (ggml dims `[cols, rows]`).
fn matvec(w: &[f32], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len()).map(|r| r.iter().zip(x).map(|(&a, b)| a as f64 * b).sum()).collect()
}

/// RMSNorm in f64.
fn rms(x: &[f64], w: &[f32]) -> Vec<f64> {
    let s = (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + EPS as f64).sqrt();
    x.iter().zip(w).map(|(v, &g)| v / s * g as f64).collect()
}

/// Rotates each head of `x` for position `pos` (`neox`: half-split pairs; else adjacent pairs).
fn rope(x: &mut [f64], pos: usize, neox: bool) {
    let half = HEAD_DIM / 2;
    for h in x.chunks_exact_mut(HEAD_DIM) {
        for i in 0..half {
            let th = pos as f64 * (THETA as f64).powf(-2.0 * i as f64 / HEAD_DIM as f64);
            let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
            let (x0, x1) = (h[a], h[b]);
            h[a] = x0 * th.cos() - x1 * th.sin();
            h[b] = x0 * th.sin() + x1 * th.cos();
        }
    }
}

/// Independent f64 reference: logits `[n, vocab]` for every token of `toks`.
fn reference(arch: &str, ts: &[T], toks: &[u32]) -> Vec<f64> {
    let emb = get(ts, "token_embd.weight").unwrap();
    let mut xs: Vec<Vec<f64>> = toks
        .iter()
        .map(|&t| emb[t as usize * DIM..][..DIM].iter().map(|&v| v as f64).collect())
        .collect();
    let group = N_HEADS / N_KV;
    for l in 0..N_LAYERS {
        let w = |s: &str| get(ts, &format!("blk.{l}.{s}"));
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        let mut qs = Vec::new();
        for (p, x) in xs.iter().enumerate() {
            let h = rms(x, w("attn_norm.weight").unwrap());
            let (mut q, mut k, mut v) = (
                matvec(w("attn_q.weight").unwrap(), &h),
                matvec(w("attn_k.weight").unwrap(), &h),
                matvec(w("attn_v.weight").unwrap(), &h),
            );
            for (vec, b) in
                [(&mut q, "attn_q.bias"), (&mut k, "attn_k.bias"), (&mut v, "attn_v.bias")]
            {
                if let Some(b) = w(b) {
                    vec.iter_mut().zip(b).for_each(|(a, &c)| *a += c as f64);
                }
            }
            if let (Some(qn), Some(kn)) = (w("attn_q_norm.weight"), w("attn_k_norm.weight")) {
                q = q.chunks_exact(HEAD_DIM).flat_map(|c| rms(c, qn)).collect();
                k = k.chunks_exact(HEAD_DIM).flat_map(|c| rms(c, kn)).collect();
            }
            rope(&mut q, p, arch != "llama");
            rope(&mut k, p, arch != "llama");
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        for (t, x) in xs.iter_mut().enumerate() {
            let mut att = vec![0.0f64; N_HEADS * HEAD_DIM];
            for h in 0..N_HEADS {
                let kh = h / group;
                let qh = &qs[t][h * HEAD_DIM..][..HEAD_DIM];
                let s: Vec<f64> = (0..=t)
                    .map(|p| {
                        qh.iter()
                            .zip(&ks[p][kh * HEAD_DIM..][..HEAD_DIM])
                            .map(|(a, b)| a * b)
                            .sum::<f64>()
                            / (HEAD_DIM as f64).sqrt()
                    })
                    .collect();
                let m = s.iter().cloned().fold(f64::MIN, f64::max);
                let z: f64 = s.iter().map(|v| (v - m).exp()).sum();
                for (p, sv) in s.iter().enumerate() {
                    for d in 0..HEAD_DIM {
                        att[h * HEAD_DIM + d] += (sv - m).exp() / z * vs[p][kh * HEAD_DIM + d];
                    }
                }
            }
            let o = matvec(w("attn_output.weight").unwrap(), &att);
            x.iter_mut().zip(&o).for_each(|(a, b)| *a += b);
            let h = rms(x, w("ffn_norm.weight").unwrap());
            let g = matvec(w("ffn_gate.weight").unwrap(), &h);
            let u = matvec(w("ffn_up.weight").unwrap(), &h);
            let a: Vec<f64> = g.iter().zip(&u).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
            let d = matvec(w("ffn_down.weight").unwrap(), &a);
            x.iter_mut().zip(&d).for_each(|(a, b)| *a += b);
        }
    }
    let out = get(ts, "output.weight").unwrap_or(emb);
    xs.iter().flat_map(|x| matvec(out, &rms(x, get(ts, "output_norm.weight").unwrap()))).collect()
}

/// Loads the synthetic `arch` model and compares batched and decoded logits with the reference.
fn check_arch(arch: &'static str) {
    let ts = tensors(arch);
    let path = write(arch, &metadata(arch), &ts);
    let model = Model::load(&path).unwrap();
    let c = model.config();
    assert_eq!(
        (c.q_dim(), c.kv_dim(), c.tied_embeddings, c.qkv_bias, c.qk_norm),
        (64, 32, arch == "llama", arch == "qwen2", arch == "qwen3")
    );
    let rt = Runtime::new(2).unwrap();
    let toks = [3u32, 1, 4, 1, 5, 9, 2, 6, 5, 3];
    let want = reference(arch, &ts, &toks);
    let mut cache = model.new_cache(32);
    let mut got = model.forward(&rt, &mut cache, &toks[..6], Logits::All).unwrap();
    for &t in &toks[6..] {
        got.extend(model.forward(&rt, &mut cache, &[t], Logits::Last).unwrap());
    }
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            (*g as f64 - w).abs() <= 1e-4 * scale.max(1.0),
            "{arch}: logit {i}: {g} vs reference {w}"
        );
    }
}

#[test]
fn llama_layout_matches_reference() {
    check_arch("llama");
}

#[test]
fn qwen2_layout_matches_reference() {
    check_arch("qwen2");
}

#[test]
fn qwen3_layout_matches_reference() {
    check_arch("qwen3");
}

#[test]
fn load_errors_are_typed() {
    // Unsupported architecture.
    let mut md = metadata("llama");
    md[0].1 = Val::Str("mamba");
    let err = Model::load(write("arch", &md, &tensors("llama"))).unwrap_err();
    assert!(matches!(&err, ModelError::UnsupportedArch(a) if a == "mamba"), "{err}");
    // Missing tensor.
    let ts: Vec<T> =
        tensors("llama").into_iter().filter(|t| t.name != "blk.1.ffn_up.weight").collect();
    let err = Model::load(write("missing", &metadata("llama"), &ts)).unwrap_err();
    assert!(matches!(&err, ModelError::MissingTensor(n) if n == "blk.1.ffn_up.weight"), "{err}");
    // qwen2 requires its Q/K/V biases.
    let ts: Vec<T> =
        tensors("qwen2").into_iter().filter(|t| t.name != "blk.0.attn_k.bias").collect();
    let err = Model::load(write("bias", &metadata("qwen2"), &ts)).unwrap_err();
    assert!(matches!(&err, ModelError::MissingTensor(n) if n == "blk.0.attn_k.bias"), "{err}");
    // Shape mismatch: a K projection with the wrong number of rows.
    let mut ts = tensors("llama");
    let k = ts.iter_mut().find(|t| t.name == "blk.0.attn_k.weight").unwrap();
    k.dims = vec![DIM, HEAD_DIM];
    k.data.truncate(DIM * HEAD_DIM);
    let err = Model::load(write("shape", &metadata("llama"), &ts)).unwrap_err();
    assert!(
        matches!(&err, ModelError::ShapeMismatch { name, .. } if name == "blk.0.attn_k.weight"),
        "{err}"
    );
    assert!(err.to_string().contains("expected [32, 32]"), "{err}");
    // Missing and inconsistent metadata.
    let md: Vec<(String, Val)> =
        metadata("llama").into_iter().filter(|(k, _)| k != "llama.block_count").collect();
    let err = Model::load(write("nokey", &md, &tensors("llama"))).unwrap_err();
    assert!(err.to_string().contains("llama.block_count"), "{err}");
    let mut md = metadata("llama");
    md[6].1 = Val::U32(3); // 4 heads, 3 KV heads
    let err = Model::load(write("gqa", &md, &tensors("llama"))).unwrap_err();
    assert!(matches!(err, ModelError::BadMetadata { .. }), "{err}");
}
