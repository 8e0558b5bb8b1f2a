//! Tokenizer build time and encode throughput on the real vocabularies (a timing probe: a
//! benchmark, not a test).
//!
//! cargo bench --bench tokenizer   (TURBOINFER_SPEED_MODEL=NAME: one model only)

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;
use turboinfer::gguf::GgufFile;
use turboinfer::tokenizer::Tokenizer;

/// A long, varied text: SQL, prose, code, unicode (about 1 MB).
fn long_text() -> String {
    let para = "SELECT u.name, SUM(o.amount) FROM users u JOIN orders o ON u.id = o.user_id \
        WHERE created_at >= NOW() - INTERVAL '30 days' GROUP BY u.name ORDER BY 2 DESC LIMIT 10;\n\
        The quick brown fox jumps over the lazy dog, can't won't I'm you're they'll. 1234567890 3.14159\n\
        def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\
        中文分词测试 日本語のテキスト 한국어 emoji 🚀🔥 Ünïcödé café naïve résumé\r\n\n";
    // Vary the words so the BPE cache does not see the same few words only.
    let mut s = String::new();
    let mut i = 0u64;
    while s.len() < 1 << 20 {
        s.push_str(para);
        s.push_str(&format!("row_{i} value{} id{}x\n", i * 7919 % 10007, i * 31));
        i += 1;
    }
    s
}

/// CPU time this thread has run, in seconds (Linux `schedstat`; wall clock is unreliable on a
/// shared machine). `None` where unavailable.
fn thread_cpu() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<u64>().ok()? as f64 * 1e-9)
}

/// Resident set size of this process in MiB (Linux `statm`, 4 KiB pages), or NaN.
fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(f64::NAN, |pages| pages as f64 * 4096.0 / (1 << 20) as f64)
}

/// Returns freed heap pages to the OS (glibc), so RSS reflects live allocations.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: glibc's malloc_trim only releases free memory; it has no preconditions.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// CPU seconds between two readings, or NaN when unavailable.
fn cpu_since(start: Option<f64>) -> f64 {
    match (start, thread_cpu()) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    }
}

/// Measures build time, cold and warm encode throughput for model `name`.
fn measure(name: &str) {
    let Some(path) = common::model_path(name) else { return };
    let file = GgufFile::open(&path).unwrap();
    // Best of three builds: the machine is shared, the minimum is the least disturbed figure.
    trim_heap();
    let rss_before = rss_mib();
    let mut build = std::time::Duration::MAX;
    let mut build_cpu = f64::INFINITY;
    let mut tok = None;
    for _ in 0..3 {
        let (t0, c0) = (Instant::now(), thread_cpu());
        tok = Some(Tokenizer::from_gguf(&file).unwrap());
        build = build.min(t0.elapsed());
        build_cpu = build_cpu.min(cpu_since(c0));
    }
    let tok = tok.unwrap();
    // Memory held by one tokenizer: RSS growth across the builds above, peak and after returning
    // freed heap to the OS.
    let peak = rss_mib() - rss_before;
    trim_heap();
    println!(
        "{name}: RSS growth {peak:.1} MiB during the build, {:.1} MiB held by the tokenizer",
        rss_mib() - rss_before
    );
    let text = long_text();
    let t1 = Instant::now();
    let ids = tok.encode(&text, true).unwrap();
    let cold = t1.elapsed();
    let (t2, c2) = (Instant::now(), thread_cpu());
    let ids2 = tok.encode(&text, true).unwrap();
    let warm = t2.elapsed();
    let warm_cpu = cpu_since(c2);
    assert_eq!(ids, ids2);
    let t3 = Instant::now();
    let back = tok.decode(&ids);
    let dec = t3.elapsed();
    assert_eq!(back, text);
    println!(
        "{name}: build {:.1} ms CPU; encode {:.0} tok/s CPU (second pass)",
        build_cpu * 1e3,
        ids.len() as f64 / warm_cpu
    );
    println!(
        "{name}: vocab {} build {:.1} ms; encode {} bytes -> {} tokens: first {:.1} ms ({:.0} tok/s), again {:.1} ms ({:.0} tok/s); decode {:.1} ms",
        tok.vocab_size(),
        build.as_secs_f64() * 1e3,
        text.len(),
        ids.len(),
        cold.as_secs_f64() * 1e3,
        ids.len() as f64 / cold.as_secs_f64(),
        warm.as_secs_f64() * 1e3,
        ids.len() as f64 / warm.as_secs_f64(),
        dec.as_secs_f64() * 1e3,
    );
    // Generous bound (the target is well under a second on a quiet machine).
    assert!(build.as_secs_f64() < 2.0, "{name}: building the tokenizer took {build:?}");
}

fn main() {
    // TURBOINFER_SPEED_MODEL picks one model (a fresh process gives a cleaner memory figure).
    let only = std::env::var("TURBOINFER_SPEED_MODEL").ok();
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        measure(name);
    }
}
