//! The sparse subcommands of the `turboinfer` CLI: `calibrate`, `sparse-report`, `perplexity`,
//! `sparse-agree` (kept here so the binary only dispatches).

use crate::cli::args::{Args, Opt};
use crate::generate::{generate_ids, GenerateParams};
use crate::gguf::GgufFile;
use crate::model::{Logits, Model};
use crate::ops::log_softmax;
use crate::platform::runtime::Runtime;
use crate::sparse::{
    calibrate, corpus, load_for, sidecar, CalibOptions, LayerReport, SparseConfig, SparseHook,
};
use crate::tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Usage of the sparse subcommands.
pub const USAGE: &str = "  (sparse commands take --selector predictor|gate; default predictor)
  turboinfer calibrate -m MODEL.gguf [--out SIDECAR] [--corpus FILE...] [--target-sparsity 0.5,0.7,0.85]
                  [--rank 64] [--tokens 2048] [--window 256] [--no-nl2sql] [-t THREADS]
  turboinfer sparse-report -m MODEL.gguf [--sidecar S] --sparsity S --text FILE [--tokens 256] [--no-audit] [-t THREADS]
  turboinfer perplexity -m MODEL.gguf [--sidecar S --sparsity S [--oracle]] --text FILE [--ctx 512] [--tokens 4096] [-t THREADS]
  turboinfer sparse-agree -m MODEL.gguf [--sidecar S] --sparsity S [-n 48] [--questions N] [-t THREADS]";

/// True if `cmd` is one of this module's subcommands.
pub fn handles(cmd: &str) -> bool {
    matches!(cmd, "calibrate" | "sparse-report" | "perplexity" | "sparse-agree")
}

/// The options of the sparse subcommands (each reads those it needs; `--corpus` takes files).
const OPTIONS: &[Opt] = &[
    Opt::one(&["--model", "-m"]),
    Opt::one(&["--threads", "-t"]),
    Opt::one(&["--n-predict", "-n"]),
    Opt::one(&["--sidecar"]),
    Opt::one(&["--out"]),
    Opt::many(&["--corpus"]),
    Opt::one(&["--target-sparsity"]),
    Opt::one(&["--rank"]),
    Opt::one(&["--tokens"]),
    Opt::one(&["--window"]),
    Opt::one(&["--sparsity"]),
    Opt::one(&["--selector"]),
    Opt::one(&["--text"]),
    Opt::one(&["--ctx"]),
    Opt::one(&["--questions"]),
    Opt::flag(&["--no-nl2sql"]),
    Opt::flag(&["--no-audit"]),
    Opt::flag(&["--oracle"]),
];

/// The caller's nl2sql prompts of one split (0: calibration, 1: evaluation; see
/// `nl2sql::calibration::nl2sql_prompts`): the sparse module knows no nl2sql.
pub type PromptsFn = dyn Fn(usize) -> Vec<String>;

/// Runs subcommand `cmd` with `args` (after the command name); `prompts` gives the nl2sql prompts
/// that `calibrate` mixes in and `sparse-agree` answers.
pub fn run(cmd: &str, args: &[String], prompts: &PromptsFn) -> Result<(), String> {
    let o = Args::parse(args, OPTIONS)?;
    match cmd {
        "calibrate" => cmd_calibrate(&o, prompts),
        "sparse-report" => cmd_report(&o),
        "perplexity" => cmd_perplexity(&o),
        "sparse-agree" => cmd_agree(&o, prompts),
        _ => Err(format!("unknown command {cmd:?}")),
    }
}

/// Model, tokenizer and runtime from the common options.
fn load(o: &Args) -> Result<(Model, Tokenizer, Runtime, PathBuf), String> {
    let path = PathBuf::from(o.req("--model", "--model")?);
    let file = Arc::new(GgufFile::open(&path).map_err(|e| e.to_string())?);
    let model = Model::from_gguf(file.clone())
        .map_err(|e| format!("cannot load model {}: {e}", path.display()))?;
    let tok = Tokenizer::from_gguf(&file).map_err(|e| e.to_string())?;
    let rt = Runtime::new(o.num("--threads", 0)?).map_err(|e| e.to_string())?;
    Ok((model, tok, rt, path))
}

/// The sidecar path: `--sidecar`, else `<model>.sparse`.
fn sidecar_path(o: &Args, model: &Path) -> Result<PathBuf, String> {
    Ok(o.one("--sidecar").map(PathBuf::from).unwrap_or_else(|| sidecar::default_path(model)))
}

/// `turboinfer calibrate`.
fn cmd_calibrate(o: &Args, prompts: &PromptsFn) -> Result<(), String> {
    let (mut model, tok, rt, path) = load(o)?;
    let out = o.one("--out").map(PathBuf::from).unwrap_or_else(|| sidecar::default_path(&path));
    let mut opts = CalibOptions::default();
    if let Some(v) = o.one("--target-sparsity") {
        opts.levels = v
            .split(',')
            .map(|s| s.trim().parse::<f32>().map_err(|_| format!("bad sparsity {s:?}")))
            .collect::<Result<_, _>>()?;
    }
    opts.rank = o.num("--rank", opts.rank)?;
    opts.max_tokens = o.num("--tokens", opts.max_tokens)?;
    opts.window = o.num("--window", opts.window)?;
    let texts = if o.has("--no-nl2sql") { Vec::new() } else { prompts(0) };
    let files: Vec<String> = o.all("--corpus").to_vec();
    let file_texts = corpus::read_texts(&files).map_err(|e| format!("cannot read corpus: {e}"))?;
    let mixed = corpus::interleave(texts, file_texts);
    let t0 = Instant::now();
    let (spec, layers, rep) =
        calibrate(&mut model, &tok, &rt, &mixed, &opts).map_err(|e| e.to_string())?;
    let fit_s = t0.elapsed().as_secs_f64();
    sidecar::write(&out, &spec, &layers).map_err(|e| e.to_string())?;
    println!(
        "calibrated {} tokens, rank {}, levels {:?} in {fit_s:.1}s -> {}",
        rep.tokens,
        spec.rank,
        spec.levels,
        out.display()
    );
    println!(
        "layer  hot  {}",
        spec.levels.iter().map(|l| format!("recall@{l:<5}")).collect::<Vec<_>>().join(" ")
    );
    for (l, (r, h)) in rep.recall.iter().zip(&rep.n_hot).enumerate() {
        println!(
            "{l:>5} {h:>4}  {}",
            r.iter().map(|x| format!("{x:>12.3}")).collect::<Vec<_>>().join(" ")
        );
    }
    Ok(())
}

/// Attaches the sidecar at `--sparsity` with `cfg`; returns the hook.
fn attach(
    o: &Args,
    model: &mut Model,
    path: &Path,
    mut cfg: SparseConfig,
) -> Result<Arc<SparseHook>, String> {
    let s: f32 = o.num("--sparsity", 0.0)?;
    if let Some(sel) = o.one("--selector") {
        cfg.selector = sel.parse()?;
    }
    let sc = sidecar_path(o, path)?;
    let hook = load_for(model, &sc, s, cfg).map_err(|e| e.to_string())?;
    model.set_ffn_hook(Some(hook.clone()));
    Ok(hook)
}

/// Token ids of `--text` (at most `max`).
fn text_ids(o: &Args, tok: &Tokenizer, max: usize) -> Result<Vec<u32>, String> {
    let f = o.req("--text", "--text")?;
    let texts = corpus::read_texts(&[f]).map_err(|e| format!("cannot read {f}: {e}"))?;
    let mut ids = tok.encode(&texts[0], false).map_err(|e| e.to_string())?;
    ids.truncate(max);
    if ids.len() < 2 {
        return Err(format!("{f}: too little text"));
    }
    Ok(ids)
}

/// `turboinfer sparse-report`: decode `--text` token by token with the audit on; per-layer table.
/// `--sparsity 0` measures the dense FFN (every token takes the dense path).
fn cmd_report(o: &Args) -> Result<(), String> {
    let (mut model, tok, rt, path) = load(o)?;
    let s: f32 = o.num("--sparsity", 0.0)?;
    let mut cfg =
        SparseConfig { audit: s > 0.0 && !o.has("--no-audit"), ..SparseConfig::default() };
    if s == 0.0 {
        cfg.fallback_ratio = 0.0; // every token dense: the baseline timing
    }
    let hook = attach(o, &mut model, &path, cfg)?;
    let SparseHook::Sparse(sp) = &*hook else { unreachable!("load_for makes a sparse hook") };
    let ids = text_ids(o, &tok, o.num("--tokens", 256)?)?;
    let mut cache = model.new_cache(ids.len());
    let t0 = Instant::now();
    for &id in &ids {
        model.forward(&rt, &mut cache, &[id], Logits::Last).map_err(|e| e.to_string())?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let rep = sp.report();
    println!(
        "sparsity target {:.2}: {} tokens, {:.2} tok/s{}",
        sp.target(),
        ids.len(),
        ids.len() as f64 / secs,
        if cfg.audit { " (audit on: tok/s includes the audit)" } else { "" }
    );
    println!(
        "layer  pred_sparsity  actual_sparsity  recall  fallback  ffn_us/token  ffn_cpu_us/token"
    );
    let (mut tot, mut cpu) = (0.0, 0.0);
    for (l, r) in rep.iter().enumerate() {
        tot += r.us_per_token;
        cpu += r.cpu_us_per_token;
        println!(
            "{l:>5}  {:>13.3}  {:>15.3}  {:>6.3}  {:>8.3}  {:>12.1}  {:>16.1}",
            r.predicted_sparsity,
            r.actual_sparsity,
            r.recall,
            r.fallback_rate,
            r.us_per_token,
            r.cpu_us_per_token
        );
    }
    let mean = |f: &dyn Fn(&LayerReport) -> f64| rep.iter().map(f).sum::<f64>() / rep.len() as f64;
    println!(
        "mean   {:>13.3}  {:>15.3}  {:>6.3}  {:>8.3}  total {tot:.1} us/token, cpu {cpu:.1} us/token (one thread: -t 1)",
        mean(&|r| r.predicted_sparsity),
        mean(&|r| r.actual_sparsity),
        mean(&|r| r.recall),
        mean(&|r| r.fallback_rate)
    );
    Ok(())
}

/// `turboinfer perplexity`: exp(mean NLL) over `--text` in windows of `--ctx` tokens.
fn cmd_perplexity(o: &Args) -> Result<(), String> {
    let (mut model, tok, rt, path) = load(o)?;
    if o.one("--sparsity").is_some() {
        let oracle = o.has("--oracle");
        attach(
            o,
            &mut model,
            &path,
            SparseConfig { batches: true, oracle, ..SparseConfig::default() },
        )?;
    }
    let ids = text_ids(o, &tok, o.num("--tokens", 4096)?)?;
    let ctx: usize = o.num("--ctx", 512)?;
    let vocab = model.config().vocab_size;
    let (mut nll, mut count) = (0.0f64, 0usize);
    let t0 = Instant::now();
    for w in ids.chunks(ctx.max(2)) {
        if w.len() < 2 {
            continue;
        }
        let mut cache = model.new_cache(w.len());
        let logits = model.forward(&rt, &mut cache, w, Logits::All).map_err(|e| e.to_string())?;
        for t in 0..w.len() - 1 {
            let lp = log_softmax(&logits[t * vocab..(t + 1) * vocab]);
            nll -= lp[w[t + 1] as usize] as f64;
            count += 1;
        }
    }
    println!(
        "perplexity {:.4} over {count} tokens ({:.1}s)",
        (nll / count as f64).exp(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `turboinfer sparse-agree`: greedy nl2sql answers (held-out questions) dense vs sparse: exact
/// agreement, common prefix length, decode speed of both.
fn cmd_agree(o: &Args, prompts: &PromptsFn) -> Result<(), String> {
    let (mut model, tok, rt, path) = load(o)?;
    let n: usize = o.num("--n-predict", 48)?;
    let prompts: Vec<String> = prompts(1).into_iter().take(o.num("--questions", 20)?).collect();
    let params = GenerateParams { max_tokens: n, ..GenerateParams::default() };
    let run_all = |model: &Model| -> Result<(Vec<Vec<u32>>, f64, usize), String> {
        let mut outs = Vec::new();
        let (mut ms, mut toks) = (0.0, 0);
        for p in &prompts {
            let ids = tok.encode_prompt(p, true).map_err(|e| e.to_string())?;
            let mut cache = model.new_cache(ids.len() + n + 1);
            let g = generate_ids(model, &tok, &rt, &mut cache, &ids, &params, &mut |_| {})
                .map_err(|e| e.to_string())?;
            ms += g.timings.decode_ms;
            toks += g.timings.decode_tokens;
            outs.push(g.output_ids);
        }
        Ok((outs, ms, toks))
    };
    let (dense, dms, dt) = run_all(&model)?;
    attach(o, &mut model, &path, SparseConfig::default())?;
    let (sparse, sms, st) = run_all(&model)?;
    let same = dense.iter().zip(&sparse).filter(|(a, b)| a == b).count();
    let prefix: usize = dense
        .iter()
        .zip(&sparse)
        .map(|(a, b)| a.iter().zip(b).take_while(|(x, y)| x == y).count())
        .sum();
    let total: usize = dense.iter().map(Vec::len).sum();
    println!(
        "questions {}: identical outputs {same}/{}, common prefix {prefix}/{total} tokens",
        prompts.len(),
        prompts.len()
    );
    println!(
        "decode tok/s: dense {:.2}, sparse {:.2}",
        dt as f64 * 1000.0 / dms,
        st as f64 * 1000.0 / sms
    );
    for (i, (a, b)) in dense.iter().zip(&sparse).enumerate().filter(|(_, (a, b))| a != b).take(5) {
        println!("  q{i} dense:  {:?}\n  q{i} sparse: {:?}", tok.decode(a), tok.decode(b));
    }
    Ok(())
}
