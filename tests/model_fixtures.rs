//! The forward pass against llama.cpp's reference outputs, plus batching / KV-cache invariants.

mod common;

use common::{fixture, ids, model_path};
use turboinfer::model::{KvCache, Logits, Model, ModelError};
use turboinfer::ops::log_softmax;
use turboinfer::runtime::Runtime;
use turboinfer::sampler::argmax;

/// Steps of each fixture continuation that are compared.
const STEPS: usize = 16;
/// llama.cpp's top-2 log-probabilities closer than this are a near-tie: either token is an
/// acceptable argmax. The brief suggested 0.02; 0.05 is used because llama.cpp's own decode
/// arithmetic is noisier than that: its CPU flash attention keeps K/V in f16 and accumulates the
/// V sum in f16 on the decode path. Rounding only our K/V to f16 moves these log-probabilities by
/// up to ~0.2, and one step of the 1.5B fixture (prompt 1, step 12, gap 0.026) flips under it.
const NEAR_TIE: f64 = 0.05;
/// Largest allowed difference, at any one step, between our and llama.cpp's log-probability of
/// llama.cpp's token (the f16 noise above; a real bug such as a wrong RoPE, a missing bias or a
/// bad dequantizer shows differences of whole nats and argmax failures).
const LOGPROB_TOL_STEP: f64 = 0.2;
/// Largest allowed mean of those differences over one prompt's compared steps: the noise averages
/// out, a systematic error does not.
const LOGPROB_TOL_MEAN: f64 = 0.05;
/// Threads per test (the machine has two cores).
const THREADS: usize = 2;

/// Teacher-forced comparison of every `generate` fixture of `name`.
///
/// The prompt runs as one batch (logits of step 0), then llama.cpp's first 15 output tokens run as
/// a second batch with all logits (steps 1..16). Feeding llama.cpp's own tokens means a legitimate
/// near-tie flip cannot cascade into unrelated later steps, so every step stays comparable: at a
/// near-tie only the argmax check is waived, the log-probability checks still apply. (Comparing
/// our own greedy path instead would have to stop at the first near-tie.)
fn check_against_llamacpp(name: &str) {
    let Some(path) = model_path(name) else { return };
    let model = Model::load(&path).expect("load model");
    let rt = Runtime::new(THREADS).unwrap();
    let fx = fixture(name);
    let vocab = model.config().vocab_size;
    let mut worst = 0.0f64;
    let mut worst_mean = 0.0f64;
    for (gi, g) in fx["generate"].as_array().expect("generate").iter().enumerate() {
        let prompt = ids(&g["prompt_ids"]);
        let out = ids(&g["output_ids"]);
        let steps = g["steps"].as_array().expect("steps");
        let n = STEPS.min(out.len()).min(steps.len());
        let mut cache = model.new_cache(prompt.len() + n + 1);
        let mut logits = model.forward(&rt, &mut cache, &prompt, Logits::Last).expect("prefill");
        if n > 1 {
            logits.extend(model.forward(&rt, &mut cache, &out[..n - 1], Logits::All).expect("teacher-forced batch"));
        }
        assert_eq!(logits.len(), n * vocab);
        let mut sum = 0.0f64;
        for (i, step) in steps.iter().take(n).enumerate() {
            let row = &logits[i * vocab..(i + 1) * vocab];
            let lp = log_softmax(row);
            let want = step["id"].as_u64().unwrap() as usize;
            assert_eq!(want as u32, out[i]);
            let want_lp = step["logprob"].as_f64().unwrap();
            let top = step["top"].as_array().unwrap();
            let gap = top[0]["logprob"].as_f64().unwrap() - top[1]["logprob"].as_f64().unwrap();
            let diff = (lp[want] as f64 - want_lp).abs();
            worst = worst.max(diff);
            sum += diff;
            let ours = argmax(row) as usize;
            assert!(
                diff <= LOGPROB_TOL_STEP,
                "{name} prompt {gi} step {i}: logprob of token {want} is {} here, {want_lp} in llama.cpp",
                lp[want]
            );
            if gap >= NEAR_TIE {
                assert_eq!(ours, want, "{name} prompt {gi} step {i}: argmax {ours} ({}) vs llama.cpp {want} ({want_lp})", lp[ours]);
            } else {
                eprintln!("{name} prompt {gi} step {i}: near-tie (gap {gap:.4}), argmax check waived (ours {ours}, llama.cpp {want})");
            }
        }
        let mean = sum / n as f64;
        worst_mean = worst_mean.max(mean);
        assert!(mean <= LOGPROB_TOL_MEAN, "{name} prompt {gi}: mean |logprob difference| {mean:.4} over {n} steps");
    }
    eprintln!("{name}: |logprob difference| vs llama.cpp: worst step {worst:.4}, worst prompt mean {worst_mean:.4}");
}

#[test]
fn smollm2_matches_llamacpp() {
    check_against_llamacpp("smollm2-135m");
}

#[test]
fn qwen05_matches_llamacpp() {
    check_against_llamacpp("qwen2.5-coder-0.5b");
}

#[test]
fn qwen15_matches_llamacpp() {
    check_against_llamacpp("qwen2.5-coder-1.5b");
}

/// Largest absolute difference between two equally long slices.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The first prompt of `name`'s fixture, cut to `len` tokens.
fn some_prompt(name: &str, len: usize) -> Vec<u32> {
    let fx = fixture(name);
    let p = ids(&fx["generate"][0]["prompt_ids"]);
    p[..len.min(p.len())].to_vec()
}

/// Batched prefill gives the same logits, row by row, as feeding the tokens one at a time.
fn check_batch_equals_sequential(name: &str) {
    let Some(path) = model_path(name) else { return };
    let model = Model::load(&path).unwrap();
    let rt = Runtime::new(THREADS).unwrap();
    let vocab = model.config().vocab_size;
    let toks = some_prompt(name, 24);
    let mut c1 = model.new_cache(64);
    let batch = model.forward(&rt, &mut c1, &toks, Logits::All).unwrap(); // [24, vocab]
    assert_eq!(c1.len(), toks.len());
    let mut c2 = model.new_cache(64);
    for (i, &t) in toks.iter().enumerate() {
        let one = model.forward(&rt, &mut c2, &[t], Logits::Last).unwrap(); // [1, vocab]
        let d = max_diff(&batch[i * vocab..(i + 1) * vocab], &one);
        assert!(d < 1e-3, "{name}: token {i}: batch vs sequential logits differ by {d}");
    }
    // Logits::Last of a batch is the last row of Logits::All.
    let mut c3 = model.new_cache(64);
    let last = model.forward(&rt, &mut c3, &toks, Logits::Last).unwrap();
    assert_eq!(last.len(), vocab);
    assert!(max_diff(&last, &batch[(toks.len() - 1) * vocab..]) < 1e-3);
}

#[test]
fn smollm2_batch_equals_sequential() {
    check_batch_equals_sequential("smollm2-135m");
}

#[test]
fn qwen05_batch_equals_sequential() {
    check_batch_equals_sequential("qwen2.5-coder-0.5b");
}

/// Truncating the cache and recomputing gives the same logits as a fresh computation.
#[test]
fn kv_truncate_then_recompute_equals_fresh() {
    let name = "smollm2-135m";
    let Some(path) = model_path(name) else { return };
    let model = Model::load(&path).unwrap();
    let rt = Runtime::new(THREADS).unwrap();
    let toks = some_prompt(name, 20);
    let (a, b) = toks.split_at(12);
    let other: Vec<u32> = b.iter().map(|&t| (t + 17) % model.config().vocab_size as u32).collect();

    let mut fresh = model.new_cache(64);
    let want = model.forward(&rt, &mut fresh, &toks, Logits::All).unwrap();

    let mut cache = model.new_cache(64);
    model.forward(&rt, &mut cache, a, Logits::Last).unwrap();
    model.forward(&rt, &mut cache, &other, Logits::All).unwrap(); // a wrong continuation ...
    assert_eq!(cache.len(), 20);
    cache.truncate(12); // ... rolled back
    assert_eq!(cache.len(), 12);
    let got = model.forward(&rt, &mut cache, b, Logits::All).unwrap();
    let vocab = model.config().vocab_size;
    let d = max_diff(&got, &want[12 * vocab..]);
    assert!(d < 1e-3, "recompute after truncate differs by {d}");
}

/// A full cache is an error, not a panic, and leaves the cache usable.
#[test]
fn context_full_is_an_error() {
    let name = "smollm2-135m";
    let Some(path) = model_path(name) else { return };
    let model = Model::load(&path).unwrap();
    let rt = Runtime::new(THREADS).unwrap();
    let mut cache: KvCache = model.new_cache(8);
    assert_eq!(cache.capacity(), 8);
    let toks = some_prompt(name, 8);
    model.forward(&rt, &mut cache, &toks[..6], Logits::Last).unwrap();
    let err = model.forward(&rt, &mut cache, &toks[..3], Logits::Last).unwrap_err();
    assert!(matches!(err, ModelError::ContextFull { needed: 9, capacity: 8 }), "{err}");
    assert_eq!(cache.len(), 6);
    model.forward(&rt, &mut cache, &toks[..2], Logits::Last).unwrap();
    assert!(matches!(model.forward(&rt, &mut cache, &toks[..1], Logits::Last), Err(ModelError::ContextFull { .. })));
    // Bad inputs are errors too.
    assert!(matches!(model.forward(&rt, &mut model.new_cache(8), &[], Logits::Last), Err(ModelError::EmptyBatch)));
    assert!(matches!(model.forward(&rt, &mut model.new_cache(8), &[u32::MAX], Logits::Last), Err(ModelError::TokenOutOfRange { .. })));
}

/// Config is read correctly from each model's metadata.
#[test]
fn configs_of_the_three_models() {
    use turboinfer::model::Arch;
    use turboinfer::ops::RopeMode;
    if let Some(p) = model_path("smollm2-135m") {
        let c = Model::load(&p).unwrap().config().clone();
        assert_eq!((c.arch, c.n_layers, c.dim, c.ffn_dim, c.n_heads, c.n_kv_heads, c.head_dim), (Arch::Llama, 30, 576, 1536, 9, 3, 64));
        assert_eq!((c.rope_mode, c.rope_theta, c.vocab_size, c.tied_embeddings, c.qkv_bias), (RopeMode::Normal, 100000.0, 49152, true, false));
    }
    if let Some(p) = model_path("qwen2.5-coder-0.5b") {
        let c = Model::load(&p).unwrap().config().clone();
        assert_eq!((c.arch, c.n_layers, c.dim, c.ffn_dim, c.n_heads, c.n_kv_heads, c.head_dim), (Arch::Qwen2, 24, 896, 4864, 14, 2, 64));
        assert_eq!((c.rope_mode, c.rope_theta, c.vocab_size, c.tied_embeddings, c.qkv_bias), (RopeMode::Neox, 1e6, 151936, false, true));
        assert_eq!(c.rms_eps, 1e-6);
    }
    if let Some(p) = model_path("qwen2.5-coder-1.5b") {
        let c = Model::load(&p).unwrap().config().clone();
        assert_eq!((c.arch, c.n_layers, c.dim, c.n_heads, c.n_kv_heads, c.head_dim), (Arch::Qwen2, 28, 1536, 12, 2, 128));
    }
}

/// A missing file is a clean error.
#[test]
fn missing_file_is_an_error() {
    let err = Model::load("/nonexistent/model.gguf").unwrap_err();
    assert!(err.to_string().contains("/nonexistent/model.gguf"), "{err}");
}
