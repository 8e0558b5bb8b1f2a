//! `Model::forward_seqs` (one decode step of several sequences in one pass, each with its own KV
//! cache) against each sequence decoded alone, on the real models: the logits are bitwise equal,
//! at every step, also when the sequences share a copied prefix and sit at different positions.

mod common;

use turboinfer::model::{KvCache, Logits, Model};
use turboinfer::platform::runtime::Runtime;

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

/// `Model::forward_batch` with a different number of new tokens per sequence (a prompt chunk
/// whose logits nobody reads, a decode step, a draft check with every row's logits, one over
/// a subset of the vocabulary) against each sequence alone: the logits asked for are bitwise
/// equal, and so are the caches (the next token of each, decoded alone from both, gives the
/// same logits).
#[test]
fn ragged_batch_equals_sequences_alone() {
    use turboinfer::model::SeqStep;
    let rt = Runtime::new(2).unwrap();
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b"] {
        let Some(path) = common::model_path(name) else { continue };
        let model = Model::load(&path).unwrap();
        let vocab = model.config().vocab_size;
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let start = |prompt: &[u32]| {
            let mut kv = model.new_cache(64);
            if !prompt.is_empty() {
                model.forward(&rt, &mut kv, prompt, Logits::Last).unwrap();
            }
            kv
        };
        // Vocabulary pruning: a few entries, ascending, the last one included.
        let subset: Vec<u32> = [0, 1, 17, 400, 9000, vocab - 1].map(|i| i as u32).to_vec();
        // (tokens already in the cache, new tokens, logits of the last how many, of which rows)
        type Case<'a> = (&'a [u32], &'a [u32], usize, Option<&'a [u32]>);
        let seqs: [Case; 4] = [
            (&[], &[31, 414, 2093, 17, 90, 1000, 5], 0, None),
            (&[8, 9, 10], &[12], 1, None),
            (&[3], &[7, 700, 70], 3, None),
            (&[5, 6], &[44, 45], 2, Some(&subset)),
        ];
        let mut together: Vec<_> = seqs.iter().map(|s| start(s.0)).collect();
        let mut alone: Vec<_> = seqs.iter().map(|s| start(s.0)).collect();
        let mut steps: Vec<SeqStep> = together
            .iter_mut()
            .zip(&seqs)
            .map(|(kv, s)| SeqStep { cache: kv, tokens: s.1, logits: s.2, rows: s.3 })
            .collect();
        let got = model.forward_batch(&rt, &mut steps, &mut || true).unwrap();
        assert_eq!(got.len(), 4 * vocab + 2 * subset.len(), "{name}: 0 + 1 + 3 + 2 rows");
        let mut want = Vec::new();
        for (kv, s) in alone.iter_mut().zip(&seqs) {
            let all = model.forward(&rt, kv, s.1, Logits::All).unwrap();
            for row in all[(s.1.len() - s.2) * vocab..].chunks_exact(vocab) {
                match s.3 {
                    Some(ids) => want.extend(ids.iter().map(|&id| row[id as usize])),
                    None => want.extend_from_slice(row),
                }
            }
        }
        assert!(bits(&got) == bits(&want), "{name}: batched logits differ from each alone");
        for (i, (a, b)) in together.iter_mut().zip(&mut alone).enumerate() {
            assert_eq!(a.len(), b.len());
            let x = model.forward(&rt, a, &[42], Logits::Last).unwrap();
            let y = model.forward(&rt, b, &[42], Logits::Last).unwrap();
            assert!(bits(&x) == bits(&y), "{name} sequence {i}: caches differ after the batch");
        }
        // Bad steps are refused before any cache moves.
        let before: Vec<usize> = together.iter().map(|kv| kv.len()).collect();
        let (a, rest) = together.split_first_mut().unwrap();
        let mut bad = vec![
            SeqStep { cache: a, tokens: &[1, 2], logits: 1, rows: None },
            SeqStep { cache: &mut rest[0], tokens: &[5], logits: 2, rows: None },
        ];
        assert!(model.forward_batch(&rt, &mut bad, &mut || true).is_err());
        let mut empty = vec![SeqStep { cache: &mut rest[1], tokens: &[], logits: 0, rows: None }];
        assert!(model.forward_batch(&rt, &mut empty, &mut || true).is_err());
        let stray = [vocab as u32];
        let mut row =
            vec![SeqStep { cache: &mut rest[1], tokens: &[5], logits: 1, rows: Some(&stray) }];
        assert!(model.forward_batch(&rt, &mut row, &mut || true).is_err());
        assert_eq!(together.iter().map(|kv| kv.len()).collect::<Vec<_>>(), before);
    }
}
