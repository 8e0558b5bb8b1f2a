//! `Model::forward_rows` (LM head over a subset of the vocabulary) against the full logits on
//! the real models: every selected value is bitwise equal, for one token and for a batch.

mod common;

use turboinfer::model::{Logits, Model};
use turboinfer::runtime::Runtime;

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
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b"] {
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

/// Times the LM head three ways for one token on the Qwen models (full vocabulary; every 12th
/// row in place; the same rows gathered into a contiguous copy first), printing ms per call.
#[test]
#[ignore = "timing, run by hand: cargo test --release --test model_rows -- --ignored --nocapture"]
fn head_timing() {
    for name in ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        head_timing_of(name);
    }
}

/// [`head_timing`] for one model.
fn head_timing_of(name: &str) {
    use turboinfer::ops::{matmul, matmul_rows, SharedActs, WeightRows};
    let Some(path) = common::model_path(name) else { return };
    let model = Model::load(&path).unwrap();
    let rt = Runtime::new(2).unwrap();
    let (dim, vocab) = (model.config().dim, model.config().vocab_size);
    let out_m = &model.weights().output;
    let w = out_m.rows(model.file());
    let x: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.1).sin()).collect(); // [1, dim]
    let mut acts = SharedActs::new(&x, dim);
    let (a, arb) = rt.install(|| acts.get(out_m.act_ty)).unwrap();
    let rows: Vec<u32> = (0..vocab as u32).step_by(12).collect();
    let reps = 20;
    let time = |f: &mut dyn FnMut()| {
        f();
        let t = std::time::Instant::now();
        for _ in 0..reps {
            f();
        }
        t.elapsed().as_secs_f64() * 1000.0 / reps as f64
    };
    let mut full = vec![0.0f32; vocab];
    let t_full = time(&mut || rt.install(|| matmul(w, a, arb, 1, &mut full)));
    let mut sub = vec![0.0f32; rows.len()];
    let t_rows = time(&mut || rt.install(|| matmul_rows(w, a, arb, 1, &rows, &mut sub)));
    let mut gathered = vec![0u8; rows.len() * w.row_bytes];
    let mut sub2 = vec![0.0f32; rows.len()];
    let t_gather = time(&mut || {
        for (dst, &r) in gathered.chunks_exact_mut(w.row_bytes).zip(&rows) {
            dst.copy_from_slice(&w.data[r as usize * w.row_bytes..(r as usize + 1) * w.row_bytes]);
        }
        let g = WeightRows { data: &gathered, rows: rows.len(), packed: None, ..w };
        rt.install(|| matmul(g, a, arb, 1, &mut sub2));
    });
    assert_eq!(sub, sub2);
    println!("{name}: LM head {} x {dim} {}: full {t_full:.2} ms, {} rows in place {t_rows:.2} ms, gathered {t_gather:.2} ms", vocab, out_m.ty, rows.len());
}
