//! End-to-end prompt-processing and decode speed, measured the way llama.cpp's `llama-bench` does
//! (pp N: one batch of N tokens into an empty cache; tg N: N single-token steps from an empty cache),
//! so the two can be run side by side (`benches/compare.sh`). `--depth D` runs both after D cached
//! tokens instead (llama-bench's `-d`): nl2sql decodes after a schema prompt of ~750 tokens, where
//! attention over the cache is a large part of each step.
//!
//! `--verify 1,2,4` measures instead what speculative decoding pays per verification pass: one
//! forward pass over b tokens with logits for every row, after the D cached tokens, for each listed
//! b in turn (interleaved, so drift hits every size alike); median ms and the ratio to b = 1.
//!
//! `--chunked C` measures instead a prompt of `--pp` tokens prefilled in chunks of C, as nl2sql
//! does, with the logits of every chunk's last token against those of the last chunk only (the
//! other chunks skip the LM head), alternating.
//!
//! cargo bench --bench e2e -- [--reps R] [--pp N] [--tg N] [--depth D] [-t THREADS] MODEL.gguf...
//! cargo bench --bench e2e -- --chunked 64 --pp 1344 [--reps R] MODEL.gguf...
//! cargo bench --bench e2e -- --verify 1,2,3,4 [--reps R] [--depth D] [-t THREADS] MODEL.gguf...

use std::time::Instant;
use turboinfer::model::{Logits, Model};

#[path = "common/bandwidth.rs"]
mod bandwidth_probe;
use turboinfer::generate::sampler::{argmax, SplitMix64};
use turboinfer::platform::runtime::Runtime;

/// Parsed command line.
struct Args {
    reps: usize,
    pp: usize,
    tg: usize,
    depth: usize,
    threads: usize,
    /// Batch sizes of `--verify` (empty: the pp/tg run).
    verify: Vec<usize>,
    /// Chunk size of `--chunked` (0: the pp/tg run).
    chunked: usize,
    models: Vec<String>,
}

/// Reads the command line (cargo bench passes `--bench`, which is ignored).
fn parse_args() -> Args {
    let mut a = Args {
        reps: 3,
        pp: 64,
        tg: 64,
        depth: 0,
        threads: 2,
        verify: Vec::new(),
        chunked: 0,
        models: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut num = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match s.as_str() {
            "--bench" => {}
            "--reps" => a.reps = num("--reps"),
            "--pp" => a.pp = num("--pp"),
            "--tg" => a.tg = num("--tg"),
            "--depth" => a.depth = num("--depth"),
            "--chunked" => a.chunked = num("--chunked"),
            "-t" | "--threads" => a.threads = num("-t"),
            "--verify" => {
                let list = it.next().unwrap_or_default();
                a.verify = list.split(',').map(|b| b.parse().expect("--verify 1,2,4")).collect();
                assert!(a.verify.iter().all(|&b| b > 0), "--verify: batch sizes are positive");
            }
            _ => a.models.push(s),
        }
    }
    a
}

/// Median of a non-empty list.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Deterministic pseudo-random token ids below `vocab` (llama-bench also feeds random tokens).
fn tokens(n: usize, vocab: usize) -> Vec<u32> {
    // A fixed seed: the same tokens every run; their content does not change the cost.
    let mut rng = SplitMix64::new(42);
    (0..n).map(|_| (rng.next_u64() % vocab as u64) as u32).collect()
}

/// Empties `cache` and, if `context` is not empty, prefills it (untimed) with `context`.
fn refill(model: &Model, rt: &Runtime, cache: &mut turboinfer::model::KvCache, context: &[u32]) {
    cache.clear();
    if !context.is_empty() {
        model.forward(rt, cache, context, Logits::Last).expect("depth prefill");
    }
}

fn main() {
    let a = parse_args();
    let rt = Runtime::new(a.threads).expect("thread pool");
    if !a.verify.is_empty() {
        return verify(&a, &rt);
    }
    if a.chunked > 0 {
        return chunked(&a, &rt);
    }
    println!("| model | test | tok/s (median of {}) | runs |", a.reps);
    // 512 MiB: far larger than the last-level cache, small next to the models.
    let probe = bandwidth_probe::buffer(512 << 20);
    println!("|---|---|---|---|");
    for path in &a.models {
        let model = Model::load(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let vocab = model.config().vocab_size;
        let name = std::path::Path::new(path).file_stem().unwrap().to_string_lossy().to_string();
        let prompt = tokens(a.pp, vocab);
        let context = tokens(a.depth, vocab); // [depth] cached before each timed run
                                              // One untimed warm-up pass pages the weights in, as llama-bench's warm-up run does.
        let mut cache = model.new_cache(a.depth + a.pp.max(a.tg) + 1);
        model.forward(&rt, &mut cache, &prompt[..a.pp.min(8)], Logits::Last).expect("warm-up");
        let mut pp = Vec::new();
        let mut tg = Vec::new();
        let mut bw = Vec::new(); // read bandwidth measured just before each decode run, GB/s
        for _ in 0..a.reps {
            refill(&model, &rt, &mut cache, &context);
            let t = Instant::now();
            model.forward(&rt, &mut cache, &prompt, Logits::Last).expect("pp");
            pp.push(a.pp as f64 / t.elapsed().as_secs_f64());

            refill(&model, &rt, &mut cache, &context);
            bw.push(bandwidth_probe::read_gbs(&probe, a.threads));
            let mut tok = prompt[0];
            let t = Instant::now();
            for _ in 0..a.tg {
                let logits = model.forward(&rt, &mut cache, &[tok], Logits::Last).expect("tg");
                tok = argmax(&logits);
            }
            tg.push(a.tg as f64 / t.elapsed().as_secs_f64());
        }
        let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(" ");
        let at = if a.depth > 0 { format!(" @ d{}", a.depth) } else { String::new() };
        println!("| {name} | pp{}{at} | {:.1} | {} |", a.pp, median(pp.clone()), fmt(&pp));
        println!("| {name} | tg{}{at} | {:.1} | {} |", a.tg, median(tg.clone()), fmt(&tg));
        // Weight bytes one decode step streams (every layer matrix and the LM head; the embedding
        // matrix is only read row by row unless it is the tied LM head), and their rate at the median.
        let w = model.weights();
        let per_tok: usize = w.output.byte_len()
            + w.layers
                .iter()
                .map(|l| {
                    [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                        .iter()
                        .map(|m| m.byte_len())
                        .sum::<usize>()
                })
                .sum::<usize>();
        let gbs = per_tok as f64 * median(tg.clone()) / 1e9;
        // Each decode run against the bandwidth measured just before it (the machine's bandwidth
        // drifts by tens of percent between minutes), then the median of those ratios.
        let frac = median(tg.iter().zip(&bw).map(|(t, b)| per_tok as f64 * t / 1e9 / b).collect());
        println!(
            "| {name} | decode weight GB/s{at} | {gbs:.1} | {:.1} MB per token, {}; {:.0}% of the read bandwidth measured before each run (median {:.1} GB/s, {} threads) |",
            per_tok as f64 / 1e6,
            model.pack_status(),
            100.0 * frac,
            median(bw.clone()),
            a.threads
        );
    }
}

/// `--verify`: the cost of a verification pass over b tokens (`Logits::All`) after `depth`
/// cached tokens, each size once per round, the cache truncated back to the depth after each.
fn verify(a: &Args, rt: &Runtime) {
    println!("| model | tokens fed | ms per pass (median of {}) | vs 1 token | runs |", a.reps);
    println!("|---|---|---|---|---|");
    for path in &a.models {
        let model = Model::load(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let vocab = model.config().vocab_size;
        let name = std::path::Path::new(path).file_stem().unwrap().to_string_lossy().to_string();
        let widest = *a.verify.iter().max().unwrap();
        let batch = tokens(widest, vocab); // [widest]; each pass feeds its first b
        let mut cache = model.new_cache(a.depth + widest + 1);
        refill(&model, rt, &mut cache, &tokens(a.depth, vocab));
        // One untimed pass pages the weights in.
        model.forward(rt, &mut cache, &batch[..1], Logits::Last).expect("warm-up");
        cache.truncate(a.depth);
        let mut ms: Vec<Vec<f64>> = vec![Vec::new(); a.verify.len()];
        for _ in 0..a.reps {
            for (j, &b) in a.verify.iter().enumerate() {
                // One token needs only its own row, as decoding without drafts asks for.
                let which = if b == 1 { Logits::Last } else { Logits::All };
                let t = Instant::now();
                model.forward(rt, &mut cache, &batch[..b], which).expect("verification pass");
                ms[j].push(t.elapsed().as_secs_f64() * 1e3);
                cache.truncate(a.depth);
            }
        }
        let one = a.verify.iter().position(|&b| b == 1).map(|j| median(ms[j].clone()));
        let at = if a.depth > 0 { format!(" @ d{}", a.depth) } else { String::new() };
        for (j, &b) in a.verify.iter().enumerate() {
            let m = median(ms[j].clone());
            let ratio = one.map_or("-".to_string(), |o| format!("{:.2}x", m / o));
            let runs = ms[j].iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(" ");
            println!("| {name} | {b}{at} | {m:.1} | {ratio} | {runs} |");
        }
    }
}

/// `--chunked`: a `pp`-token prompt in chunks of `chunked` tokens, every chunk's last logits
/// (before 2026-12-01) against the last chunk's only, alternating; checks both end on the same bits.
fn chunked(a: &Args, rt: &Runtime) {
    use turboinfer::model::SeqStep;
    println!("| model | prompt | logits of | ms (median of {}) | runs |", a.reps);
    println!("|---|---|---|---|---|");
    for path in &a.models {
        let model = Model::load(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let name = std::path::Path::new(path).file_stem().unwrap().to_string_lossy().to_string();
        let prompt = tokens(a.pp, model.config().vocab_size);
        let mut cache = model.new_cache(a.pp);
        let n_chunks = a.pp.div_ceil(a.chunked);
        let mut run = |every: bool| -> (f64, Vec<f32>) {
            cache.clear();
            let t = Instant::now();
            let mut logits = Vec::new();
            for (k, c) in prompt.chunks(a.chunked).enumerate() {
                let rows = usize::from(every || k + 1 == n_chunks);
                let mut step = [SeqStep { cache: &mut cache, tokens: c, logits: rows, rows: None }];
                logits = model.forward_batch(rt, &mut step, &mut || true).expect("chunk");
            }
            (t.elapsed().as_secs_f64() * 1e3, logits)
        };
        run(false); // pages the weights in
        let (mut every, mut last) = (Vec::new(), Vec::new());
        for _ in 0..a.reps {
            let (te, le) = run(true);
            let (tl, ll) = run(false);
            assert!(le.iter().zip(&ll).all(|(x, y)| x.to_bits() == y.to_bits()), "logits differ");
            every.push(te);
            last.push(tl);
        }
        let fmt = |v: &[f64]| v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(" ");
        let p = format!("{} in chunks of {}", a.pp, a.chunked);
        println!("| {name} | {p} | every chunk | {:.0} | {} |", median(every.clone()), fmt(&every));
        println!("| {name} | {p} | last chunk | {:.0} | {} |", median(last.clone()), fmt(&last));
    }
}
