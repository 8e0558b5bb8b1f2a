//! `Model::forward_seqs` (one decode step of several sequences in one pass, each with its own KV
//! cache) against each sequence decoded alone, on the real models: the logits are bitwise equal,
//! at every step, also when the sequences share a copied prefix and sit at different positions.

mod common;

use turboinfer::model::{KvCache, Logits, Model};
use turboinfer::runtime::Runtime;

#[test]
fn sequences_together_equal_sequences_alone() {
    let rt = Runtime::new(2).unwrap();
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b"] {
        let Some(path) = common::model_path(name) else { continue };
        let model = Model::load(&path).unwrap();
        let vocab = model.config().vocab_size;
        let prompt = [31u32, 414, 2093, 17, 90, 1000, 5];
        // The shared prefix, prefilled once; three sequences copy it (the third one token
        // further on, so the batch mixes positions).
        let mut base = model.new_cache(64);
        model.forward(&rt, &mut base, &prompt, Logits::Last).unwrap();
        let fork = |extra: &[u32]| -> KvCache {
            let mut kv = model.new_cache(32);
            base.copy_prefix_to(base.len(), &mut kv).unwrap();
            if !extra.is_empty() {
                model.forward(&rt, &mut kv, extra, Logits::Last).unwrap();
            }
            kv
        };
        let (mut a, mut b, mut c) = (fork(&[]), fork(&[]), fork(&[77]));
        let (mut a1, mut b1, mut c1) = (fork(&[]), fork(&[]), fork(&[77]));
        assert_eq!(a.len(), prompt.len());
        let steps: [[u32; 3]; 4] = [[12, 12, 400], [9, 3000, 8], [1, 2, 3], [500, 500, 500]];
        for (s, toks) in steps.iter().enumerate() {
            let together =
                model.forward_seqs(&rt, &mut [&mut a, &mut b, &mut c], toks, &mut || true).unwrap();
            assert_eq!(together.len(), 3 * vocab);
            for (i, kv) in [&mut a1, &mut b1, &mut c1].into_iter().enumerate() {
                let alone = model.forward(&rt, kv, &[toks[i]], Logits::Last).unwrap();
                let same = together[i * vocab..(i + 1) * vocab]
                    .iter()
                    .zip(&alone)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{name} step {s} sequence {i}: logits differ from the sequence alone"
                );
            }
        }
        assert_eq!(
            (a.len(), b.len(), c.len()),
            (prompt.len() + 4, prompt.len() + 4, prompt.len() + 5)
        );
        // A copy into a cache of another shape is refused, not a panic.
        let other = Model::load(common::model_path(name).unwrap()).unwrap();
        let mut small = other.new_cache(2);
        assert!(base.copy_prefix_to(base.len(), &mut small).is_err());
    }
}
