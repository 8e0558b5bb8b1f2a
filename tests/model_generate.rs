//! The generation loop with the real tokenizer: end-of-generation, budgets, seeded sampling.

mod common;

use common::{fixture, ids, model_path};
use std::sync::Arc;
use turboinfer::generate::sampler::SamplerConfig;
use turboinfer::generate::{generate, GenerateParams, StopReason};
use turboinfer::gguf::GgufFile;
use turboinfer::model::Model;
use turboinfer::platform::runtime::Runtime;
use turboinfer::tokenizer::Tokenizer;

/// Loads model + tokenizer over one shared mapping.
fn load(path: &std::path::Path) -> (Model, Tokenizer) {
    let file = Arc::new(GgufFile::open(path).unwrap());
    let tok = Tokenizer::from_gguf(&file).unwrap();
    (Model::from_gguf(file).unwrap(), tok)
}

/// Qwen 0.5B answers the first SQL prompt with 5 tokens then `<|im_end|>`: generation stops on
/// that end-of-generation token, which ends `output_ids` but not the text.
#[test]
fn qwen05_stops_at_end_of_generation() {
    let name = "qwen2.5-coder-0.5b";
    let Some(path) = model_path(name) else { return };
    let (model, tok) = load(&path);
    let rt = Runtime::new(2).unwrap();
    let g = &fixture(name)["generate"][0];
    let mut cache = model.new_cache(512);
    let mut streamed = String::new();
    let params = GenerateParams { max_tokens: 32, ..Default::default() };
    let r =
        generate(&model, &tok, &rt, &mut cache, g["prompt"].as_str().unwrap(), &params, &mut |s| {
            streamed.push_str(s)
        })
        .unwrap();
    assert_eq!(r.prompt_ids, ids(&g["prompt_ids"]));
    assert_eq!(r.output_ids, ids(&g["output_ids"]));
    assert_eq!(r.stop_reason, StopReason::EndOfGeneration);
    assert_eq!(r.text, g["output_text"].as_str().unwrap());
    assert_eq!(streamed, r.text);
    assert_eq!(r.timings.prefill_tokens, r.prompt_ids.len());
    assert_eq!(r.timings.decode_tokens, r.output_ids.len() - 1);
    assert_eq!(cache.len(), r.prompt_ids.len() + r.output_ids.len() - 1);
}

/// Budget stops, seeded sampling is reproducible, and different seeds explore different text.
#[test]
fn smollm2_budget_and_seeded_sampling() {
    let name = "smollm2-135m";
    let Some(path) = model_path(name) else { return };
    let (model, tok) = load(&path);
    let rt = Runtime::new(2).unwrap();
    let mut cache = model.new_cache(256);
    let run = |cache: &mut _, seed: u64| {
        let sampler = SamplerConfig {
            temperature: 1.0,
            top_k: 40,
            top_p: 0.95,
            repeat_penalty: 1.1,
            seed,
            ..Default::default()
        };
        let params = GenerateParams { max_tokens: 12, sampler, ..Default::default() };
        generate(&model, &tok, &rt, cache, "Once upon a time", &params, &mut |_| {}).unwrap()
    };
    let a = run(&mut cache, 1);
    assert_eq!(a.output_ids.len(), 12);
    assert_eq!(a.stop_reason, StopReason::Budget);
    assert_eq!(a.output_ids, run(&mut cache, 1).output_ids);
    let others: Vec<Vec<u32>> = (2..5).map(|s| run(&mut cache, s).output_ids).collect();
    assert!(
        others.iter().any(|o| *o != a.output_ids),
        "three other seeds all gave {:?}",
        a.output_ids
    );
}

/// A prompt longer than the cache is a clean error; a full cache during decode stops generation.
#[test]
fn smollm2_context_limits() {
    let Some(path) = model_path("smollm2-135m") else { return };
    let (model, tok) = load(&path);
    let rt = Runtime::new(2).unwrap();
    let params = GenerateParams { max_tokens: 50, ..Default::default() };
    let mut small = model.new_cache(3);
    let err =
        generate(&model, &tok, &rt, &mut small, "The capital of France is", &params, &mut |_| {})
            .unwrap_err();
    assert!(err.to_string().contains("context is full"), "{err}");
    let mut cache = model.new_cache(8); // 5 prompt tokens + 3 decode positions
    let r =
        generate(&model, &tok, &rt, &mut cache, "The capital of France is", &params, &mut |_| {})
            .unwrap();
    assert_eq!(r.stop_reason, StopReason::ContextFull);
    assert_eq!(r.output_ids.len(), 4);
    assert_eq!(cache.len(), 8);
}

/// `forward_checked` asks before every half layer (attention, feed-forward); stopped midway, the pass returns `Interrupted` and
/// leaves the KV cache as before, so the next pass equals an uninterrupted one.
#[test]
fn a_pass_stops_between_layers_and_leaves_the_cache_as_it_was() {
    use turboinfer::model::{Logits, ModelError};
    let Some(path) = model_path("smollm2-135m") else { return };
    let (m, tok) = load(&path);
    let rt = Runtime::new(2).unwrap();
    let prompt = tok.encode("SELECT name FROM users WHERE", false).unwrap();
    let more = tok.encode(" id = 1 ORDER BY name", false).unwrap();
    let layers = m.config().n_layers;

    let mut calls = 0;
    let mut kv = m.new_cache(128);
    m.forward_checked(&rt, &mut kv, &prompt, Logits::Last, &mut || {
        calls += 1;
        true
    })
    .unwrap();
    assert_eq!(calls, 2 * layers, "one check per half layer");
    let before = kv.len();

    let mut calls = 0;
    let r = m.forward_checked(&rt, &mut kv, &more, Logits::All, &mut || {
        calls += 1;
        calls <= layers
    });
    assert!(matches!(r, Err(ModelError::Interrupted { layer }) if layer == layers / 2), "{r:?}");
    assert_eq!(kv.len(), before, "an interrupted pass does not advance the cache");

    let resumed = m.forward(&rt, &mut kv, &more, Logits::All).unwrap();
    let mut fresh = m.new_cache(128);
    m.forward(&rt, &mut fresh, &prompt, Logits::Last).unwrap();
    assert_eq!(
        resumed,
        m.forward(&rt, &mut fresh, &more, Logits::All).unwrap(),
        "same logits as without the interruption"
    );
}
