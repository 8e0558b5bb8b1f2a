//! `Model::forward_rows` (LM head over a subset of the vocabulary) against the full logits on
//! the real models: every selected value is bitwise equal, for one token and for a batch.

mod common;

use turboinfer::model::{Logits, Model};
use turboinfer::platform::runtime::Runtime;

/// A spread of vocabulary rows: small ids, every 13th id, and the last id.
fn pick(vocab: usize) -> Vec<u32> {
    let mut rows: Vec<u32> = (0..vocab as u32).filter(|&i| i < 300 || i % 13 == 5).collect();
    rows.push(vocab as u32 - 1);
    rows.dedup();
    rows
}

#[test]
fn subset_logits_equal_full_logits() {
    let rt = Runtime::new(2).unwrap();
    // The 1.5B too: its LM head (Q6_K, packed) is the one the refusal check reads two rows of.
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        let Some(path) = common::model_path(name) else { continue };
        let model = Model::load(&path).unwrap();
        let vocab = model.config().vocab_size;
        let rows = pick(vocab);
        let prompt = [31u32, 414, 2093, 17, 90, 1000, 5];
        for which in [Logits::All, Logits::Last] {
            let mut a = model.new_cache(64);
            let mut b = model.new_cache(64);
            let full = model.forward(&rt, &mut a, &prompt, which).unwrap();
            let sub = model.forward_rows(&rt, &mut b, &prompt, which, &rows).unwrap();
            let n_out = full.len() / vocab;
            assert_eq!(sub.len(), n_out * rows.len());
            for t in 0..n_out {
                for (j, &r) in rows.iter().enumerate() {
                    assert_eq!(
                        sub[t * rows.len() + j].to_bits(),
                        full[t * vocab + r as usize].to_bits(),
                        "{name} {which:?} t {t} row {r}"
                    );
                }
            }
            // A decode step after the batch: the caches hold the same state.
            let full = model.forward(&rt, &mut a, &[42], Logits::Last).unwrap();
            let sub = model.forward_rows(&rt, &mut b, &[42], Logits::Last, &rows).unwrap();
            for (j, &r) in rows.iter().enumerate() {
                assert_eq!(sub[j].to_bits(), full[r as usize].to_bits(), "{name} decode row {r}");
            }
        }
        // Out-of-range rows are an error, not a panic.
        let mut c = model.new_cache(8);
        assert!(model.forward_rows(&rt, &mut c, &[1], Logits::Last, &[vocab as u32]).is_err());
    }
}
