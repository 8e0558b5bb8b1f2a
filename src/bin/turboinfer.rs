//! `turboinfer`: command-line front end of the engine (no PostgreSQL involved).
//!
//! ```text
//! turboinfer run  -m MODEL.gguf -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P]
//!                 [--repeat-penalty R] [--seed S] [-t THREADS] [--ctx N] [--stop STR]... [--json] [--no-special]
//!                 [--kv-type f16|f32] [--attn-precision ggml|exact] [--readahead LAYERS]
//!                 [--weight-budget MIB]
//!                 [--sparsity S [--sparse-sidecar FILE] [--selector predictor|gate]]
//! turboinfer info -m MODEL.gguf
//! turboinfer pack [-m] MODEL.gguf [-o OUT] [--force]
//! turboinfer quantize -m IN.gguf -o OUT.gguf --type q4_0|q2_k [--force]
//! turboinfer tiers
//! ```

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use turboinfer::cli::args::{Args, Opt};
use turboinfer::generate::sampler::SamplerConfig;
use turboinfer::generate::{generate, GenerateParams, Generation};
use turboinfer::gguf::GgufFile;
use turboinfer::model::{Model, ModelOptions};
use turboinfer::platform::runtime::Runtime;
use turboinfer::quant::GgmlType;
use turboinfer::tokenizer::Tokenizer;

const USAGE: &str = "usage:
  turboinfer run  -m MODEL.gguf -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P]
                  [--repeat-penalty R] [--seed S] [-t THREADS] [--ctx N] [--stop STR]... [--json] [--no-special]
                  [--kv-type f16|f32] [--attn-precision ggml|exact] [--readahead LAYERS]
                  [--weight-budget MIB]
                  [--sparsity S [--sparse-sidecar FILE] [--selector predictor|gate]]
  turboinfer info -m MODEL.gguf
  turboinfer pack [-m] MODEL.gguf [-o OUT] [--force]
                  (writes the packed K-quant weights file, default MODEL.gguf.kx16; skips a valid one)
  turboinfer quantize -m IN.gguf -o OUT.gguf --type q4_0|q2_k [--force]
                  (requantizes the blocks' weight matrices as llama-quantize --pure does, keeps the
                   rest; refuses an existing OUT without --force)
  turboinfer tiers
                  (the kernel tiers, one a line: NAME yes [default] | NAME no (why); every tier computes
                   the same bits)";

/// Default KV-cache size in positions (clamped to the model's training context).
const DEFAULT_CTX: usize = 4096;
/// Default number of tokens to generate.
const DEFAULT_N: usize = 128;

/// Parsed command line.
#[derive(Debug, PartialEq)]
enum Command {
    Run(RunArgs),
    Info {
        model: String,
    },
    /// `pack`: the model, the output path (default `<model>.kx16`), rewrite even if valid.
    Pack {
        model: String,
        out: Option<String>,
        force: bool,
    },
    /// `quantize`: the model, the output, the target type, replace an existing output.
    Quantize {
        model: String,
        out: String,
        ty: GgmlType,
        force: bool,
    },
    /// `tiers`: which kernel tiers this CPU runs.
    Tiers,
    Help,
}

/// Options of `run`.
#[derive(Debug, PartialEq)]
struct RunArgs {
    model: String,
    prompt: String,
    n: usize,
    sampler: SamplerConfig,
    threads: usize,
    ctx: usize,
    stop: Vec<String>,
    json: bool,
    parse_special: bool,
    /// KV cache type and attention arithmetic (`--kv-type`, `--attn-precision`).
    opts: ModelOptions,
    /// Layers of weights asked ahead of the pass on a cold page cache (`--readahead`, 0: none).
    readahead: usize,
    /// MiB of weights the model may keep resident; larger models stream (`--weight-budget`).
    weight_budget: Option<usize>,
    /// Sparse FFN: target sparsity (`--sparsity`, 0 = dense), sidecar (`--sparse-sidecar`, default
    /// `<model>.sparse`) and selector (`--selector predictor|gate`).
    #[cfg(feature = "sparse")]
    sparsity: f32,
    #[cfg(feature = "sparse")]
    sparse_sidecar: Option<String>,
    #[cfg(feature = "sparse")]
    selector: turboinfer::sparse::Selector,
}

/// The options of `run` and `info` (`info` takes only `-m`).
const RUN_OPTIONS: &[Opt] = &[
    Opt::one(&["--model", "-m"]),
    Opt::flag(&["--help", "-h"]),
    Opt::one(&["--prompt", "-p"]),
    Opt::one(&["--n-predict", "-n"]),
    Opt::one(&["--temp"]),
    Opt::one(&["--top-k"]),
    Opt::one(&["--top-p"]),
    Opt::one(&["--repeat-penalty"]),
    Opt::one(&["--repeat-last-n"]),
    Opt::one(&["--seed"]),
    Opt::one(&["--threads", "-t"]),
    Opt::one(&["--ctx", "-c"]),
    Opt::one(&["--stop"]),
    Opt::flag(&["--json"]),
    Opt::flag(&["--no-special"]),
    Opt::one(&["--kv-type"]),
    Opt::one(&["--attn-precision"]),
    Opt::one(&["--readahead"]),
    Opt::one(&["--weight-budget"]),
    #[cfg(feature = "sparse")]
    Opt::one(&["--sparsity"]),
    #[cfg(feature = "sparse")]
    Opt::one(&["--sparse-sidecar"]),
    #[cfg(feature = "sparse")]
    Opt::one(&["--selector"]),
];

/// The options of `info`.
const INFO_OPTIONS: &[Opt] = &[Opt::one(&["--model", "-m"]), Opt::flag(&["--help", "-h"])];

/// The options of `pack` (the model may also be its one bare argument).
const PACK_OPTIONS: &[Opt] = &[
    Opt::one(&["--model", "-m"]),
    Opt::one(&["--output", "-o"]),
    Opt::flag(&["--force"]),
    Opt::flag(&["--help", "-h"]),
];

/// The options of `quantize`.
const QUANTIZE_OPTIONS: &[Opt] = &[
    Opt::one(&["--model", "-m"]),
    Opt::one(&["--output", "-o"]),
    Opt::one(&["--type"]),
    Opt::flag(&["--force"]),
    Opt::flag(&["--help", "-h"]),
];

/// The target of `quantize --type` (llama.cpp's names, any case).
fn quantize_target(name: &str) -> Result<GgmlType, String> {
    match name.to_ascii_lowercase().as_str() {
        "q4_0" => Ok(GgmlType::Q4_0),
        "q2_k" => Ok(GgmlType::Q2_K),
        _ => Err(format!("unknown quantization type {name:?} (q4_0 or q2_k)")),
    }
}

/// Parses `args` (without the program name).
fn parse_args(args: &[String]) -> Result<Command, String> {
    let Some(cmd) = args.first() else { return Err("missing command".into()) };
    if cmd == "-h" || cmd == "--help" || cmd == "help" {
        return Ok(Command::Help);
    }
    if cmd == "tiers" {
        return match args.get(1) {
            None => Ok(Command::Tiers),
            Some(extra) => Err(format!("unexpected argument {extra:?} for tiers")),
        };
    }
    let spec = match cmd.as_str() {
        "pack" => PACK_OPTIONS,
        "quantize" => QUANTIZE_OPTIONS,
        "info" => INFO_OPTIONS,
        "run" => RUN_OPTIONS,
        _ => return Err(format!("unknown command {cmd:?}")),
    };
    let o = Args::parse(&args[1..], spec).map_err(|e| format!("{e} for {cmd}"))?;
    if o.has("--help") {
        return Ok(Command::Help);
    }
    if cmd == "pack" {
        let bare: Vec<&str> = o.positional.iter().map(String::as_str).collect();
        return match (o.one("--model"), bare.as_slice()) {
            (Some(m), []) | (None, &[m]) => Ok(Command::Pack {
                model: m.to_string(),
                out: o.one("--output").map(str::to_string),
                force: o.has("--force"),
            }),
            (None, []) => Err("missing MODEL for pack".into()),
            (_, [.., extra]) => Err(format!("unexpected argument {extra:?} for pack")),
        };
    }
    if let Some(extra) = o.positional.first() {
        return Err(format!("unexpected argument {extra:?} for {cmd}"));
    }
    let model = o.req("--model", "-m MODEL")?.to_string();
    if cmd == "quantize" {
        return Ok(Command::Quantize {
            model,
            out: o.req("--output", "-o OUT")?.to_string(),
            ty: quantize_target(o.req("--type", "--type q4_0|q2_k")?)?,
            force: o.has("--force"),
        });
    }
    if cmd == "info" {
        return Ok(Command::Info { model });
    }
    let d = SamplerConfig::default();
    let run = RunArgs {
        model,
        prompt: o.req("--prompt", "-p PROMPT")?.to_string(),
        n: o.num("--n-predict", DEFAULT_N)?,
        sampler: SamplerConfig {
            temperature: o.num("--temp", d.temperature)?,
            top_k: o.num("--top-k", d.top_k)?,
            top_p: o.num("--top-p", d.top_p)?,
            repeat_penalty: o.num("--repeat-penalty", d.repeat_penalty)?,
            repeat_last_n: o.num("--repeat-last-n", d.repeat_last_n)?,
            seed: o.num("--seed", d.seed)?,
        },
        threads: o.num("--threads", 0)?,
        ctx: o.num("--ctx", DEFAULT_CTX)?,
        stop: o.all("--stop").to_vec(),
        json: o.has("--json"),
        parse_special: !o.has("--no-special"),
        opts: ModelOptions {
            kv_dtype: o.one("--kv-type").map(str::parse).transpose()?.unwrap_or_default(),
            attn_precision: o
                .one("--attn-precision")
                .map(str::parse)
                .transpose()?
                .unwrap_or_default(),
        },
        readahead: o.num("--readahead", turboinfer::model::DEFAULT_READAHEAD)?,
        weight_budget: o.parsed::<usize>("--weight-budget")?,
        #[cfg(feature = "sparse")]
        sparsity: o.num("--sparsity", 0.0)?,
        #[cfg(feature = "sparse")]
        sparse_sidecar: o.one("--sparse-sidecar").map(str::to_string),
        #[cfg(feature = "sparse")]
        selector: o.one("--selector").map(str::parse).transpose()?.unwrap_or_default(),
    };
    if run.sampler.top_p.is_nan()
        || run.sampler.top_p <= 0.0
        || run.sampler.repeat_penalty <= 0.0
        || !run.sampler.temperature.is_finite()
    {
        return Err("--top-p and --repeat-penalty must be positive and --temp finite".into());
    }
    Ok(Command::Run(run))
}

/// `turboinfer tiers`: one line per kernel tier, `NAME yes`, `NAME yes default` (the tier a process
/// picks without `TURBOINFER_KERNELS`) or `NAME no (why)` (scripts choose the tiers to test from
/// this: the engine's own CPU detection, not a second copy of it).
fn cmd_tiers() {
    use turboinfer::kernels::{KernelSet, Tier, PORTABLE_OVERRIDE};
    let f = turboinfer::kernels::cpu::cpu_features();
    for t in Tier::ALL {
        match t.check(f) {
            Ok(()) if t == Tier::best(f) => println!("{t} yes default"),
            Ok(()) => println!("{t} yes"),
            Err(e) => println!("{t} no ({e})"),
        }
        // The scalar tier's portable table, where the scalar tier here is its F16C table: what a
        // CPU without F16C runs, forced for tests and benchmarks.
        if t == Tier::Scalar && KernelSet::portable().name() == PORTABLE_OVERRIDE {
            println!("{PORTABLE_OVERRIDE} yes");
        }
    }
}

/// `turboinfer pack`: writes the packed weights file unless a valid one exists (idempotent).
fn cmd_pack(model: &str, out: Option<&str>, force: bool) -> Result<(), String> {
    use turboinfer::model::packed;
    let file = GgufFile::open(model).map_err(|e| e.to_string())?;
    let out =
        out.map(std::path::PathBuf::from).unwrap_or_else(|| packed::sidecar_path(file.path()));
    if !file.tensors().iter().any(|t| packed::worth_packing(&file, t)) {
        println!("{model}: no packable Q4_K or Q6_K matrix, nothing to pack");
        return Ok(());
    }
    if !force {
        match packed::PackedFile::open(&out, &file) {
            Ok(p) => {
                println!(
                    "{}: valid pack already present ({} tensors, {} bytes), skipped",
                    out.display(),
                    p.entries().len(),
                    p.len()
                );
                return Ok(());
            }
            Err(packed::PackedError::Missing { .. }) => {}
            Err(e) => println!("replacing unusable pack: {e}"),
        }
    }
    let t = std::time::Instant::now();
    let s = packed::write(&file, &out).map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{}: {} tensors, {} bytes ({:.1} MiB) in {secs:.2} s",
        s.path.display(),
        s.tensors,
        s.bytes,
        s.bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// `turboinfer quantize`: requantizes the block matrices of `model` to `ty` into `out` (written
/// whole then renamed into place, so a failure leaves no partial file), then prints what it did.
fn cmd_quantize(model: &str, out: &str, ty: GgmlType, force: bool) -> Result<(), String> {
    use turboinfer::gguf::requantize::requantize;
    let out_path = std::path::Path::new(out);
    if out_path.exists() {
        if !force {
            return Err(format!("{out} exists (--force replaces it)"));
        }
        // The input is mapped while the output is written: replacing it in place is refused.
        if std::fs::canonicalize(out_path).ok() == std::fs::canonicalize(model).ok() {
            return Err(format!("{out} is the input model"));
        }
    }
    let file = GgufFile::open(model).map_err(|e| e.to_string())?;
    let t = std::time::Instant::now();
    let (w, s) = requantize(file.header(), file.bytes(), ty).map_err(|e| e.to_string())?;
    let written = w.write_file(out_path).map_err(|e| e.to_string())?;
    let secs = t.elapsed().as_secs_f64();
    let (before, after) = s.requantized_bits();
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!("{out}: {ty} in {secs:.1} s");
    println!(
        "  tensors:   {} requantized ({before:.2} -> {after:.2} bits per weight), {} kept",
        s.requantized, s.kept
    );
    for (name, why) in &s.skipped {
        println!("  kept {name}: {why}");
    }
    println!(
        "  bytes:     {} -> {} of tensor data ({:.1} -> {:.1} MiB), file {} -> {written}",
        s.bytes_in,
        s.bytes_out,
        mib(s.bytes_in),
        mib(s.bytes_out),
        file.len()
    );
    println!(
        "  all tensors: {:.2} -> {:.2} bits per weight",
        s.bytes_in as f64 * 8.0 / s.elements.max(1) as f64,
        s.bits_per_weight()
    );
    Ok(())
}

/// `turboinfer run`.
fn cmd_run(a: &RunArgs) -> Result<(), String> {
    let file = Arc::new(GgufFile::open(&a.model).map_err(|e| e.to_string())?);
    let mut model = Model::from_gguf(file.clone())
        .map_err(|e| format!("cannot load model {}: {e}", a.model))?
        .with_options(a.opts);
    model.set_readahead(a.readahead);
    model.set_weight_budget(a.weight_budget.map(|mib| mib << 20));
    if let turboinfer::model::PackStatus::Ignored { .. } = model.attach_default_pack() {
        eprintln!("turboinfer: warning: packed weights {}", model.pack_status());
    }
    #[cfg(feature = "sparse")]
    if a.sparsity > 0.0 {
        let sc = a
            .sparse_sidecar
            .as_ref()
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| turboinfer::sparse::sidecar::default_path(a.model.as_ref()));
        let cfg = turboinfer::sparse::SparseConfig { selector: a.selector, ..Default::default() };
        let hook = turboinfer::sparse::load_for(&model, &sc, a.sparsity, cfg)
            .map_err(|e| e.to_string())?;
        model.set_ffn_hook(Some(hook));
    }
    let tok = Tokenizer::from_gguf(&file)
        .map_err(|e| format!("cannot load tokenizer of {}: {e}", a.model))?;
    let rt = Runtime::new(a.threads).map_err(|e| e.to_string())?;
    let mut cache = model.new_cache(a.ctx);
    let params = GenerateParams {
        max_tokens: a.n,
        sampler: a.sampler.clone(),
        stop: a.stop.clone(),
        parse_special: a.parse_special,
    };
    let mut out = std::io::stdout().lock();
    let mut on_text = |s: &str| {
        if !a.json {
            let _ = out.write_all(s.as_bytes());
            let _ = out.flush();
        }
    };
    let g = generate(&model, &tok, &rt, &mut cache, &a.prompt, &params, &mut on_text)
        .map_err(|e| e.to_string())?;
    let t = &g.timings;
    if a.json {
        writeln!(out, "{}", json_of(&g)).map_err(|e| e.to_string())?;
    } else {
        let _ = writeln!(out);
    }
    eprintln!(
        "prefill: {:.1} tok/s ({} tokens), decode: {:.1} tok/s ({} tokens)",
        t.prefill_tok_s(),
        t.prefill_tokens,
        t.decode_tok_s(),
        t.decode_tokens
    );
    Ok(())
}

/// The `--json` result object.
fn json_of(g: &Generation) -> serde_json::Value {
    let t = &g.timings;
    serde_json::json!({
        "prompt_ids": g.prompt_ids,
        "output_ids": g.output_ids,
        "text": g.text,
        "stop_reason": format!("{:?}", g.stop_reason),
        "timings": {
            "prefill_tokens": t.prefill_tokens,
            "prefill_ms": t.prefill_ms,
            "prefill_tok_s": t.prefill_tok_s(),
            "decode_tokens": t.decode_tokens,
            "decode_ms": t.decode_ms,
            "decode_tok_s": t.decode_tok_s(),
        }
    })
}

/// `turboinfer info`.
fn cmd_info(path: &str) -> Result<(), String> {
    let file = Arc::new(GgufFile::open(path).map_err(|e| e.to_string())?);
    let mut model =
        Model::from_gguf(file.clone()).map_err(|e| format!("cannot load model {path}: {e}"))?;
    model.attach_default_pack();
    let c = model.config();
    let mut types: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut n_params = 0u64;
    for t in file.tensors() {
        let e = types.entry(t.ty.name()).or_default();
        e.0 += 1;
        e.1 += t.size;
        n_params += t.n_elements();
    }
    println!("file:            {path}");
    println!(
        "file size:       {} bytes ({:.1} MiB)",
        file.len(),
        file.len() as f64 / (1 << 20) as f64
    );
    if let Ok(name) = file.get_str("general.name") {
        println!("name:            {name}");
    }
    println!("architecture:    {}", c.arch.name());
    println!("parameters:      {n_params}");
    println!("layers:          {}", c.n_layers);
    println!("dim:             {}", c.dim);
    println!("ffn dim:         {}", c.ffn_dim);
    println!("heads / kv:      {} / {} (head dim {})", c.n_heads, c.n_kv_heads, c.head_dim);
    println!("rope:            {:?}, theta {}, {} rotary dims", c.rope_mode, c.rope_theta, c.n_rot);
    println!("rms eps:         {:e}", c.rms_eps);
    println!("vocab:           {}", c.vocab_size);
    println!("context length:  {}", c.context_length);
    println!("tied embeddings: {}", c.tied_embeddings);
    println!("qkv bias:        {}, qk norm: {}", c.qkv_bias, c.qk_norm);
    println!("packed:          {}", model.pack_status());
    let (_, stages, pass_bytes) = model.readahead_progress();
    println!(
        "one pass reads:  {pass_bytes} bytes ({:.1} MiB of weights in {stages} stages)",
        pass_bytes as f64 / (1 << 20) as f64
    );
    println!("tensors:         {}", file.tensors().len());
    for (ty, (n, bytes)) in types {
        println!("  {ty:<6} {n:>4} tensors, {bytes:>12} bytes");
    }
    Ok(())
}

/// The usage of the sparse FFN commands (none in a build without the `sparse` feature).
fn sparse_usage() -> &'static str {
    #[cfg(feature = "sparse")]
    return turboinfer::cli::sparse::USAGE;
    #[cfg(not(feature = "sparse"))]
    return "";
}

/// Parses the command line, runs the command, maps errors to exit codes (2 usage, 1 failure).
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    #[cfg(feature = "sparse")]
    if let Some(c) = args.first().filter(|c| turboinfer::cli::sparse::handles(c)) {
        return match turboinfer::cli::sparse::run(c, &args[1..], &|split| {
            turboinfer::nl2sql::calibration::nl2sql_prompts(Some(split))
        }) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("turboinfer: error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let cmd = match parse_args(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("turboinfer: {e}\n{USAGE}\n{}", sparse_usage());
            return ExitCode::from(2);
        }
    };
    let res = match &cmd {
        Command::Help => {
            println!("{USAGE}\n{}", sparse_usage());
            Ok(())
        }
        Command::Info { model } => cmd_info(model),
        Command::Tiers => {
            cmd_tiers();
            Ok(())
        }
        Command::Pack { model, out, force } => cmd_pack(model, out.as_deref(), *force),
        Command::Quantize { model, out, ty, force } => cmd_quantize(model, out, *ty, *force),
        Command::Run(r) => cmd_run(r),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("turboinfer: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owned argument vector.
    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    /// The `run` command of `run -m x -p y` followed by `extra`, or a panic.
    fn run_with(extra: &[&str]) -> RunArgs {
        let all: Vec<&str> = ["run", "-m", "x", "-p", "y"].iter().chain(extra).copied().collect();
        let Command::Run(r) = parse_args(&args(&all)).unwrap() else { panic!("not run") };
        r
    }

    #[test]
    fn parses_run_options() {
        let c = parse_args(&args(&[
            "run",
            "-m",
            "m.gguf",
            "-p",
            "hi",
            "-n",
            "7",
            "--temp",
            "0.8",
            "--top-k",
            "5",
            "--top-p",
            "0.9",
            "--repeat-penalty",
            "1.1",
            "--seed",
            "9",
            "-t",
            "2",
            "--ctx",
            "512",
            "--stop",
            ";",
            "--json",
            "--no-special",
        ]))
        .unwrap();
        let Command::Run(r) = c else { panic!("not run") };
        assert_eq!(
            (r.model.as_str(), r.prompt.as_str(), r.n, r.threads, r.ctx),
            ("m.gguf", "hi", 7, 2, 512)
        );
        assert_eq!(
            (
                r.sampler.temperature,
                r.sampler.top_k,
                r.sampler.top_p,
                r.sampler.repeat_penalty,
                r.sampler.seed
            ),
            (0.8, 5, 0.9, 1.1, 9)
        );
        assert_eq!(r.stop, vec![";".to_string()]);
        assert!(r.json && !r.parse_special);
    }

    #[test]
    fn defaults_and_errors() {
        let r = run_with(&[]);
        assert_eq!(
            (r.n, r.ctx, r.sampler.temperature, r.json, r.parse_special),
            (DEFAULT_N, DEFAULT_CTX, 0.0, false, true)
        );
        assert_eq!(r.readahead, turboinfer::model::DEFAULT_READAHEAD);
        assert_eq!(run_with(&["--readahead", "0"]).readahead, 0);
        assert_eq!(
            (r.weight_budget, run_with(&["--weight-budget", "512"]).weight_budget),
            (None, Some(512))
        );
        assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "--readahead", "-1"])).is_err());
        assert_eq!(
            parse_args(&args(&["info", "-m", "x"])).unwrap(),
            Command::Info { model: "x".into() }
        );
        assert!(parse_args(&args(&[])).is_err());
        assert!(parse_args(&args(&["run", "-m", "x"])).unwrap_err().contains("-p"));
        assert!(parse_args(&args(&["run", "-p", "x"])).unwrap_err().contains("-m"));
        assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "-n"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "-n", "abc"]))
            .unwrap_err()
            .contains("invalid"));
        assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "--bogus"]))
            .unwrap_err()
            .contains("unknown option"));
        assert!(parse_args(&args(&["info", "-m", "x", "-p", "y"])).is_err());
        assert!(parse_args(&args(&["frobnicate", "-m", "x"])).is_err());
        assert_eq!(
            parse_args(&args(&["pack", "m.gguf"])).unwrap(),
            Command::Pack { model: "m.gguf".into(), out: None, force: false }
        );
        assert_eq!(
            parse_args(&args(&["pack", "-m", "m.gguf", "-o", "o", "--force"])).unwrap(),
            Command::Pack { model: "m.gguf".into(), out: Some("o".into()), force: true }
        );
        assert!(parse_args(&args(&["pack"])).unwrap_err().contains("MODEL"));
        assert!(parse_args(&args(&["pack", "a", "b"])).unwrap_err().contains("unexpected"));
        assert!(parse_args(&args(&["pack", "a", "--bogus"]))
            .unwrap_err()
            .contains("unknown option"));
    }

    #[test]
    fn parses_quantize() {
        assert_eq!(
            parse_args(&args(&["quantize", "-m", "a.gguf", "-o", "b.gguf", "--type", "q4_0"]))
                .unwrap(),
            Command::Quantize {
                model: "a.gguf".into(),
                out: "b.gguf".into(),
                ty: GgmlType::Q4_0,
                force: false
            }
        );
        assert_eq!(
            parse_args(&args(&[
                "quantize", "--model", "a", "--output", "b", "--type", "Q2_K", "--force"
            ]))
            .unwrap(),
            Command::Quantize {
                model: "a".into(),
                out: "b".into(),
                ty: GgmlType::Q2_K,
                force: true
            }
        );
        let err = |a: &[&str]| parse_args(&args(a)).unwrap_err();
        assert!(err(&["quantize", "-m", "a", "-o", "b", "--type", "q4_k"]).contains("unknown"));
        assert!(err(&["quantize", "-m", "a", "-o", "b"]).contains("--type"));
        assert!(err(&["quantize", "-m", "a", "--type", "q4_0"]).contains("-o"));
        assert!(err(&["quantize", "-o", "b", "--type", "q4_0"]).contains("-m"));
        assert!(
            err(&["quantize", "-m", "a", "-o", "b", "--type", "q4_0", "c"]).contains("unexpected")
        );
        assert!(err(&["quantize", "-m", "a", "-o", "b", "--type"]).contains("needs a value"));
    }

    #[test]
    fn parses_precision_options() {
        use turboinfer::model::KvDtype;
        use turboinfer::ops::AttnPrecision;
        let r = run_with(&[]);
        assert_eq!(r.opts, ModelOptions::default());
        let r = run_with(&["--kv-type", "f32", "--attn-precision", "exact"]);
        assert_eq!((r.opts.kv_dtype, r.opts.attn_precision), (KvDtype::F32, AttnPrecision::Exact));
        let r = run_with(&["--kv-type", "f16", "--attn-precision", "ggml"]);
        assert_eq!(
            (r.opts.kv_dtype, r.opts.attn_precision),
            (KvDtype::F16, AttnPrecision::GgmlF16)
        );
        assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "--kv-type", "q8"]))
            .unwrap_err()
            .contains("KV cache type"));
        assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "--attn-precision", "fast"]))
            .unwrap_err()
            .contains("attention precision"));
        #[cfg(feature = "sparse")]
        {
            let r = run_with(&["--sparsity", "0.3", "--sparse-sidecar", "s", "--selector", "gate"]);
            assert_eq!(
                (r.sparsity, r.sparse_sidecar.as_deref(), r.selector),
                (0.3, Some("s"), turboinfer::sparse::Selector::Gate)
            );
            assert!(parse_args(&args(&["run", "-m", "x", "-p", "y", "--selector", "magic"]))
                .unwrap_err()
                .contains("selector"));
        }
    }
}
