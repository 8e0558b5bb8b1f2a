//! LM head timing: the full vocabulary against a subset of its rows, in place or gathered, and
//! the token score decoding computes over the row after it (a timing probe: a benchmark, not a
//! test).
//!
//! cargo bench --bench lm_head

#[path = "../tests/common/mod.rs"]
mod common;

use turboinfer::model::Model;
use turboinfer::platform::runtime::Runtime;

/// Times the LM head three ways for one token on the Qwen models (full vocabulary; every 12th
/// row in place; the same rows gathered into a contiguous copy first), printing ms per call.
fn main() {
    for name in ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        head_timing_of(name);
    }
}

/// [`main`] for one model.
fn head_timing_of(name: &str) {
    use turboinfer::ops::{matmul, matmul_rows, SharedActs, WeightRows};
    let Some(path) = common::model_path(name) else { return };
    let model = Model::load(&path).unwrap();
    let rt = Runtime::new(2).unwrap();
    let (dim, vocab) = (model.config().dim, model.config().vocab_size);
    let out_m = &model.weights().output;
    let w = out_m.rows(model.file());
    let x: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.1).sin()).collect(); // [1, dim]
    let mut acts = SharedActs::new(&x, dim, turboinfer::kernels::kernels());
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
    // What decoding does next with the row: the chosen token's score (the log-sum-exp over the
    // row, `nl2sql::candidates`), on the pool's threads as in a backend, and on one thread.
    use turboinfer::nl2sql::candidates::{score, score_on};
    let j = (0..vocab).fold(0, |b, i| if full[i] > full[b] { i } else { b });
    let t_on = time(&mut || {
        std::hint::black_box(score_on(&rt, &full, j));
    });
    let t_one = time(&mut || {
        std::hint::black_box(score(&full, j));
    });
    println!("{name}: token score over the row: {t_on:.2} ms on 2 threads, {t_one:.2} ms on one");
}
