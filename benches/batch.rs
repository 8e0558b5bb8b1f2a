//! What batching sequences in one forward pass buys ([`turboinfer::serve::Server`], issue #30):
//! S sequences, each after the same D-token prompt (a schema prefix, computed once and copied),
//! decode T tokens greedily, either **batched** (one `Server::step` per token for all S) or
//! **alone** (each sequence's T steps on its own, one after the other, as callers queued behind
//! `turboinfer.max_concurrent = 1` are served). Reports total decode tokens/s of each, their
//! ratio, and checks the two give the same tokens (the batch = sequential property).
//!
//! cargo bench --bench batch -- [--seqs 1,2,4,8] [--tg T] [--depth D] [--reps R] [-t THREADS] MODEL.gguf

use std::time::Instant;
use turboinfer::generate::sampler::{argmax, SplitMix64};
use turboinfer::model::Model;
use turboinfer::platform::runtime::Runtime;
use turboinfer::serve::{Request, Server};

struct Args {
    seqs: Vec<usize>,
    tg: usize,
    depth: usize,
    reps: usize,
    threads: usize,
    model: String,
}

fn parse_args() -> Args {
    let mut a = Args {
        seqs: vec![1, 2, 4, 8],
        tg: 32,
        depth: 512,
        reps: 3,
        threads: 2,
        model: String::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{s} needs a value"));
        match s.as_str() {
            "--bench" => {}
            "--seqs" => {
                a.seqs = val().split(',').map(|n| n.parse().expect("--seqs 1,2,8")).collect()
            }
            "--tg" => a.tg = val().parse().expect("--tg N"),
            "--depth" => a.depth = val().parse().expect("--depth D"),
            "--reps" => a.reps = val().parse().expect("--reps R"),
            "-t" | "--threads" => a.threads = val().parse().expect("-t N"),
            _ => a.model = s,
        }
    }
    assert!(!a.model.is_empty(), "usage: batch [--seqs 1,2,8] [--tg T] [--depth D] MODEL.gguf");
    a
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One run: every sequence gets the shared prompt plus its own first token, then `tg` greedy
/// steps; `together` runs each step for all sequences in one pass. Returns the decode seconds
/// (prompt untimed) and each sequence's tokens.
fn run(model: &Model, rt: &Runtime, a: &Args, s: usize, together: bool) -> (f64, Vec<Vec<u32>>) {
    let vocab = model.config().vocab_size as u64;
    let mut rng = SplitMix64::new(7);
    let prompt: Vec<u32> = (0..a.depth).map(|_| (rng.next_u64() % vocab) as u32).collect();
    let mut server = Server::new(model, a.depth + a.tg + 2, usize::MAX);
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); s];
    let mut pos = vec![0usize; s];
    let mut next: Vec<u32> = (0..s as u32).map(|i| 1000 + i).collect(); // each its own question
    let step = |server: &mut Server, reqs: Vec<Request>| -> Vec<Vec<f32>> {
        server
            .step(model, rt, &reqs, &mut || true)
            .into_iter()
            .map(|r| r.expect("step").logits)
            .collect()
    };
    // The prompt once (sequence 0), then every sequence's own token after a copy of it.
    step(
        &mut server,
        vec![Request { seq: 0, pos: 0, tokens: prompt.clone(), logits: 0, rows: None }],
    );
    for i in 0..s {
        let mut t = if i == 0 { vec![] } else { prompt.clone() };
        t.push(next[i]);
        let p = if i == 0 { a.depth } else { 0 };
        let l = step(
            &mut server,
            vec![Request { seq: i as u64, pos: p, tokens: t, logits: 1, rows: None }],
        );
        pos[i] = a.depth + 1;
        next[i] = argmax(&l[0]);
    }
    let t0 = Instant::now();
    if together {
        for _ in 0..a.tg {
            let reqs = (0..s)
                .map(|i| Request {
                    seq: i as u64,
                    pos: pos[i],
                    tokens: vec![next[i]],
                    logits: 1,
                    rows: None,
                })
                .collect();
            for (i, l) in step(&mut server, reqs).iter().enumerate() {
                out[i].push(next[i]);
                pos[i] += 1;
                next[i] = argmax(l);
            }
        }
    } else {
        for i in 0..s {
            for _ in 0..a.tg {
                let r = Request {
                    seq: i as u64,
                    pos: pos[i],
                    tokens: vec![next[i]],
                    logits: 1,
                    rows: None,
                };
                let l = step(&mut server, vec![r]);
                out[i].push(next[i]);
                pos[i] += 1;
                next[i] = argmax(&l[0]);
            }
        }
    }
    (t0.elapsed().as_secs_f64(), out)
}

fn main() {
    let a = parse_args();
    let rt = Runtime::new(a.threads).expect("thread pool");
    let model = Model::load(&a.model).unwrap_or_else(|e| panic!("{}: {e}", a.model));
    let name = std::path::Path::new(&a.model).file_stem().unwrap().to_string_lossy().to_string();
    println!(
        "| model | sequences | depth | alone tok/s | batched tok/s | ratio | same tokens |  ({} threads, tg {}, median of {})",
        a.threads, a.tg, a.reps
    );
    println!("|---|---|---|---|---|---|---|");
    run(&model, &rt, &Args { tg: 2, seqs: vec![], model: String::new(), ..a }, 1, true); // warm-up
    for &s in &a.seqs {
        let (mut alone, mut batched, mut same) = (Vec::new(), Vec::new(), true);
        for _ in 0..a.reps {
            // Interleaved, so drift in the machine's read bandwidth hits both alike.
            let (ta, oa) = run(&model, &rt, &a, s, false);
            let (tb, ob) = run(&model, &rt, &a, s, true);
            alone.push((s * a.tg) as f64 / ta);
            batched.push((s * a.tg) as f64 / tb);
            same &= oa == ob;
        }
        let (x, y) = (median(alone), median(batched));
        println!(
            "| {name} | {s} | {} | {x:.1} | {y:.1} | {:.2}x | {} |",
            a.depth,
            y / x,
            if same { "yes" } else { "NO" }
        );
    }
}
