//! The same answer on every CPU: the logits of every kernel tier this CPU has are bitwise the
//! scalar tier's (the numeric contract, `turboinfer::quant::contract`), for every model present,
//! on the llama.cpp fixture prompts: the prompt as one batch (all positions' logits), then the
//! fixture's continuation one token at a time (decode), then the same continuation as one batch
//! (speculative verification), which on each tier must also be bitwise its decode (batch
//! invariance). Packed weights are used by the tiers that have packed kernels, so packed = unpacked
//! is checked on each of them too. This is the whole cross-tier check of the engine: the llama.cpp
//! fixtures run once, on the default tier (`tests/model_fixtures.rs`), and hold on every tier by
//! this test.
//!
//! Kernel tiers are chosen per model here (`Model::from_gguf_on`), so one process compares them;
//! `TURBOINFER_KERNELS` plays no part. A tier this CPU lacks is listed as skipped, never faked.

mod common;

use std::sync::Arc;

use common::{ids, load_fixture, model_path};
use turboinfer::gguf::GgufFile;
use turboinfer::kernels::{KernelSet, Tier};
use turboinfer::model::{KvDtype, Logits, Model, ModelOptions};
use turboinfer::ops::AttnPrecision;
use turboinfer::platform::runtime::Runtime;

/// Decoded continuation tokens compared per prompt.
const STEPS: usize = 6;
/// Threads per pass (the machine has two cores; results do not depend on it).
const THREADS: usize = 2;

/// Every tier this CPU runs, the scalar reference first, printing the ones skipped; then the
/// scalar tier's portable table where this CPU's scalar tier is another (what a CPU without F16C
/// runs: the same reference code without the instruction).
fn tiers() -> Vec<&'static KernelSet> {
    let mut v = Vec::new();
    for t in Tier::ALL {
        match KernelSet::for_tier(t) {
            Ok(k) => v.push(k),
            Err(e) => println!("skipping tier {t}: {e}"),
        }
    }
    assert_eq!(v[0].tier(), Tier::Scalar, "the scalar tier runs everywhere");
    // Named `scalar-portable` exactly when it is not this CPU's scalar tier.
    if KernelSet::portable().name() == turboinfer::kernels::PORTABLE_OVERRIDE {
        v.push(KernelSet::portable());
    }
    v
}

/// Every logit of the three passes over every fixture prompt of `name`, on `set`'s tier, as bits.
fn logits(
    file: &Arc<GgufFile>,
    set: &'static KernelSet,
    opts: ModelOptions,
    name: &str,
) -> Vec<u32> {
    let mut model = Model::from_gguf_on(file.clone(), set).expect("model loads").with_options(opts);
    model.attach_default_pack();
    let rt = Runtime::new(THREADS).unwrap();
    let fx = load_fixture(name).expect("fixture present with the model");
    let mut out = Vec::new();
    for g in fx["generate"].as_array().unwrap() {
        let prompt = ids(&g["prompt_ids"]);
        let cont: Vec<u32> = ids(&g["output_ids"]).into_iter().take(STEPS).collect();
        // Prefill: one batch, every position's logits.
        let mut cache = model.new_cache(prompt.len() + 2 * cont.len() + 1);
        out.extend(model.forward(&rt, &mut cache, &prompt, Logits::All).unwrap());
        // Decode: one token at a time.
        let mut decoded = Vec::new();
        for &t in &cont {
            decoded.extend(model.forward(&rt, &mut cache, &[t], Logits::Last).unwrap());
        }
        // Verification: the same tokens again, as one batch, after the prompt. On every tier it
        // is bitwise the decode above (batch invariance: what speculation's exactness rests on).
        cache.truncate(prompt.len());
        let verified = model.forward(&rt, &mut cache, &cont, Logits::All).unwrap();
        assert!(
            bitwise_equal(&verified, &decoded),
            "{name}: tier {}: the continuation as one batch differs from decoding it token by token",
            set.name()
        );
        out.extend(decoded);
        out.extend(verified);
    }
    out.into_iter().map(f32::to_bits).collect()
}

/// `a` and `b` hold the same floats, bit for bit.
fn bitwise_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Compares every tier with the scalar tier for model `name` under `opts`; prints one line a tier.
fn check(name: &str, opts: ModelOptions) {
    let Some(path) = model_path(name) else { return };
    let file = Arc::new(GgufFile::open(&path).expect("model opens"));
    let tiers = tiers();
    let reference = logits(&file, tiers[0], opts, name);
    assert!(!reference.is_empty());
    let (mut passed, mut failed) = (0, 0);
    for &set in &tiers[1..] {
        let got = logits(&file, set, opts, name);
        assert_eq!(got.len(), reference.len());
        match got.iter().zip(&reference).position(|(a, b)| a != b) {
            None => {
                passed += 1;
                println!(
                    "{name} {opts:?}: tier {} = scalar, {} logits bitwise",
                    set.name(),
                    got.len()
                );
            }
            Some(i) => {
                failed += 1;
                let differ = got.iter().zip(&reference).filter(|(a, b)| a != b).count();
                println!(
                    "{name} {opts:?}: tier {} differs from scalar at logit {i} ({} vs {}), {differ} of {} differ",
                    set.name(),
                    f32::from_bits(got[i]),
                    f32::from_bits(reference[i]),
                    got.len()
                );
            }
        }
    }
    println!("{name}: {passed} passed, {failed} failed");
    assert_eq!(failed, 0, "{name}: a tier's logits differ from the scalar tier's");
}

/// The default (exact) mode, f32 cache.
fn exact() -> ModelOptions {
    ModelOptions::default()
}

#[test]
fn smollm2_logits_are_the_same_on_every_tier() {
    check("smollm2-135m", exact());
    // The f16 cache in both attention modes (f16 score kernels; ggml's one-chunk arithmetic).
    for attn_precision in [AttnPrecision::Exact, AttnPrecision::GgmlF16] {
        check("smollm2-135m", ModelOptions { kv_dtype: KvDtype::F16, attn_precision });
    }
}

#[test]
fn qwen_05b_logits_are_the_same_on_every_tier() {
    check("qwen2.5-coder-0.5b", exact());
}

#[test]
fn qwen_15b_logits_are_the_same_on_every_tier() {
    check("qwen2.5-coder-1.5b", exact());
}
