//! Kernel throughput benchmark (std-only timing; `cargo bench --bench kernels [-- options]`).
//!
//! Prints, as medians of several timed samples:
//! 1. read bandwidth: summing a 1 GiB buffer with the widest loads available, 1 and 2 threads;
//! 2. per (matrix shape, weight type, tier): weight GB/s of a full matrix × vector (one activation
//!    vector, rows split in 16-row chunks over a 2-thread rayon pool for the 2-thread column), at the
//!    real shapes of Qwen2.5-Coder 0.5B and 1.5B;
//!    the 1-thread figures also as weight bytes / thread CPU time (robust to a busy machine);
//! 3. the cost of the batch kernel for 1, 2, 4 and 8 activation vectors relative to 1.
//!
//! Rows labelled `x16` are the Q4_K / Q6_K matrix above them in the packed layout (`kernels::packed`), same bytes;
//! rows labelled `lut` the Q2_K (Q4_0) matrix above them in the `Q2_K×32` (`Q4_0×32`) layout through a
//! lookup-table kernel (`kernels::lut`, `kernels::lut_q4_0`; tables built once per product, included).
//!
//! Options: `--quick` (fewer samples, best tier only), `--tiers a,b` (`scalar-portable`: the scalar tier of a CPU without F16C), `--types q4_K,q6_K`, `--shapes 0.5b|1.5b`,
//! `--no-bandwidth`, `--bandwidth-only`.

use std::time::{Duration, Instant};

use rayon::prelude::*;
use turboinfer::kernels::{act_row, lut, lut_q4_0, packed, KernelSet, Tier, PORTABLE_OVERRIDE};

#[path = "common/bandwidth.rs"]
mod bandwidth_probe;
use turboinfer::quant::{self, GgmlType};

/// Weight bytes per parallel task: large enough that rayon's per-task cost (~1 µs) is small next to
/// reading the rows (~4 µs at 16 GB/s), small enough for many tasks per thread even on 896-row matrices.
const CHUNK_BYTES: usize = 64 << 10;

/// Command-line options.
struct Opts {
    samples: usize,
    /// Kernel tables to time: tiers, and `scalar-portable` (`KernelSet::portable`).
    tiers: Vec<&'static KernelSet>,
    types: Option<Vec<String>>,
    shapes: Option<String>,
    bandwidth: bool,
    /// Measure the read bandwidth and stop (`benches/compare.sh` brackets its runs with it).
    only_bandwidth: bool,
}

/// Parses the options after `--`.
fn opts() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Opts {
        samples: 7,
        tiers: Vec::new(),
        types: None,
        shapes: None,
        bandwidth: true,
        only_bandwidth: false,
    };
    let mut quick = false;
    let mut tier_names: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let next = |i: usize| args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--quick" => quick = true,
            "--no-bandwidth" => o.bandwidth = false,
            "--bandwidth-only" => o.only_bandwidth = true,
            "--tiers" => {
                tier_names = Some(next(i));
                i += 1;
            }
            "--types" => {
                o.types = Some(next(i).split(',').map(str::to_string).collect());
                i += 1;
            }
            "--shapes" => {
                o.shapes = Some(next(i));
                i += 1;
            }
            _ => {} // cargo passes `--bench`; ignore unknown flags
        }
        i += 1;
    }
    let f = turboinfer::kernels::cpu::cpu_features();
    let tiers: Vec<Tier> = match &tier_names {
        Some(names) => names
            .split(',')
            .filter(|s| *s != PORTABLE_OVERRIDE)
            .map(|s| {
                Tier::ALL
                    .into_iter()
                    .find(|t| t.name() == s)
                    .unwrap_or_else(|| panic!("unknown tier {s}"))
            })
            .collect(),
        None if quick => vec![Tier::best(f)],
        None => Tier::available(f),
    };
    for t in tiers {
        match KernelSet::for_tier(t) {
            Ok(k) => o.tiers.push(k),
            Err(_) => println!("skipping tier {t}: not supported by this CPU"),
        }
    }
    if tier_names.as_deref().is_some_and(|n| n.split(',').any(|s| s == PORTABLE_OVERRIDE)) {
        o.tiers.push(KernelSet::portable());
    }
    if quick {
        o.samples = 3;
    }
    o
}

/// Median wall time of `samples` runs of `f` (after one warm-up run).
fn median_time(samples: usize, mut f: impl FnMut()) -> Duration {
    median_of(samples, Instant::now, |s| s.elapsed(), &mut f)
}

/// Median CPU time of the calling thread over `samples` runs of `f` (after a warm-up): on a shared
/// machine this excludes time the thread spent descheduled.
fn median_thread_cpu(samples: usize, mut f: impl FnMut()) -> Duration {
    median_of(samples, thread_cpu, |s| thread_cpu().saturating_sub(s), &mut f)
}

/// Median of `samples` measurements `stop(start())` around `f`.
fn median_of<S>(
    samples: usize,
    start: impl Fn() -> S,
    stop: impl Fn(S) -> Duration,
    f: &mut impl FnMut(),
) -> Duration {
    f();
    let mut t: Vec<Duration> = (0..samples)
        .map(|_| {
            let s = start();
            f();
            stop(s)
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

/// `struct timespec` of Linux.
#[repr(C)]
struct Timespec {
    sec: i64,
    nsec: i64,
}

extern "C" {
    /// libc's `clock_gettime` (std already links libc).
    fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
}

/// CPU time consumed by the calling thread (`CLOCK_THREAD_CPUTIME_ID` = 3 on Linux).
fn thread_cpu() -> Duration {
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock id 3 is CLOCK_THREAD_CPUTIME_ID on Linux.
    let rc = unsafe { clock_gettime(3, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    Duration::new(ts.sec as u64, ts.nsec as u32)
}

/// Read bandwidth over a 1 GiB buffer with 1 and 2 threads, GB/s (medians).
fn bandwidth(samples: usize) {
    let buf = bandwidth_probe::buffer(1 << 30);
    for threads in [1usize, 2] {
        let mut v: Vec<f64> =
            (0..samples.min(5)).map(|_| bandwidth_probe::read_gbs(&buf, threads)).collect();
        v.sort_by(f64::total_cmp);
        println!("read bandwidth, 1 GiB, {threads} thread(s): {:.1} GB/s", v[v.len() / 2]);
    }
}

/// The engine's deterministic PRNG, for random test matrices.
type Rng = turboinfer::generate::sampler::SplitMix64;

/// Random weight matrix bytes of `rows` rows of `n` elements of `ty`, with small finite f16 scales
/// (random scale bits could be NaN/inf/subnormal, which is not what real weights look like).
fn random_matrix(rng: &mut Rng, ty: GgmlType, rows: usize, n: usize) -> Vec<u8> {
    let rb = quant::row_size(ty, n).unwrap();
    let mut w = vec![0u8; rb * rows];
    for c in w.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
    // 0x1C00 = f16 0.0039: a typical block scale.
    let scale = 0x1C00u16.to_le_bytes();
    let fields: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q4_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::F16 => {
            w.chunks_exact_mut(2).for_each(|c| c[1] &= 0x3B); // clear high exponent bits: |v| < 1
            &[]
        }
        _ => &[],
    };
    for b in w.chunks_exact_mut(ty.type_size()) {
        for &f in fields {
            b[f..f + 2].copy_from_slice(&scale);
        }
    }
    w
}

/// Quantized random activations of length `n` for weight type `ty`, via `k`'s quantizer.
fn activation(rng: &mut Rng, k: &KernelSet, ty: GgmlType, n: usize) -> Vec<u8> {
    let x: Vec<f32> =
        (0..n).map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5).collect();
    let at = quant::activation_type(ty);
    let mut a = vec![0u8; act_row::act_row_bytes(at, n).unwrap()];
    act_row::quantize_with(k.quantize(at).unwrap(), at, &x, &mut a);
    a
}

/// `out[r] = dot(w[r], act)` over all rows, 16-row chunks, on the current rayon pool.
fn matvec(k: &KernelSet, ty: GgmlType, n: usize, w: &[u8], act: &[u8], out: &mut [f32]) {
    let dot = k.vec_dot(ty).unwrap();
    let rb = w.len() / out.len();
    let chunk = (CHUNK_BYTES / rb).max(1);
    out.par_chunks_mut(chunk).enumerate().for_each(|(c, o)| {
        for (i, y) in o.iter_mut().enumerate() {
            let r = c * chunk + i;
            *y = dot(n, &w[r * rb..(r + 1) * rb], act);
        }
    });
}

/// Repetitions so one sample reads at least ~256 MB (or takes long enough to time reliably).
fn reps_for(bytes: usize) -> usize {
    (256usize << 20).div_ceil(bytes).clamp(1, 200)
}

fn main() {
    let o = opts();
    let f = turboinfer::kernels::cpu::cpu_features();
    println!(
        "CPU features: {:?}",
        f.list().iter().filter(|x| x.1).map(|x| x.0).collect::<Vec<_>>()
    );
    println!("samples per figure: {} (median reported)", o.samples);
    if o.bandwidth || o.only_bandwidth {
        bandwidth(o.samples);
    }
    if o.only_bandwidth {
        return;
    }
    let pool2 = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    // (model, n = row length (input), rows (output), weight types the model uses there + others that fit)
    let shapes: Vec<(&str, usize, usize, Vec<GgmlType>)> = {
        use GgmlType::*;
        let small = vec![Q8_0, Q5_0, Q4_0, Q4_1];
        let k = vec![Q4_K, Q6_K, Q8_0, Q5_0, Q4_1, Q4_0, Q2_K];
        vec![
            ("0.5b", 896, 896, small.clone()),
            ("0.5b", 896, 4864, small.clone()),
            ("0.5b", 4864, 896, k.clone()),
            ("0.5b", 896, 151936, vec![Q8_0, Q5_0]),
            ("1.5b", 1536, 1536, k.clone()),
            ("1.5b", 1536, 8960, k.clone()),
            ("1.5b", 8960, 1536, k.clone()),
            ("1.5b", 1536, 151936, vec![Q6_K, Q4_K]),
        ]
    };
    let mut rng = Rng::new(42);
    println!();
    println!("matrix × vector, weight GB/s (weight bytes / median time); cols x rows = row length x output rows");
    println!(
        "(1T cpu = weight bytes / thread CPU time: robust to time-slicing on a shared machine)"
    );
    println!(
        "{:<6} {:>14} {:<5} {:>9} {:<11} {:>9} {:>9} {:>9}",
        "model", "cols x rows", "type", "MB", "tier", "1T GB/s", "1T cpu", "2T GB/s"
    );
    for (model, n, rows, types) in &shapes {
        if o.shapes.as_deref().is_some_and(|s| s != *model) {
            continue;
        }
        for &ty in types {
            if o.types.as_ref().is_some_and(|t| !t.iter().any(|x| x == ty.name())) {
                continue;
            }
            let w = random_matrix(&mut rng, ty, *rows, *n);
            let mut out = vec![0f32; *rows];
            let reps = reps_for(w.len());
            for &k in &o.tiers {
                let act = activation(&mut rng, k, ty, *n);
                let dot = k.vec_dot(ty).unwrap();
                let rb = w.len() / rows;
                // 1 thread: the kernel over every row on this thread, timed by wall clock and by CPU time.
                let mut one = || {
                    for _ in 0..reps {
                        for (r, y) in out.iter_mut().enumerate() {
                            *y = dot(*n, &w[r * rb..(r + 1) * rb], &act);
                        }
                    }
                    std::hint::black_box(&out);
                };
                let t1 = median_time(o.samples, &mut one);
                let c1 = median_thread_cpu(o.samples, &mut one);
                // 2 threads: row-parallel over a 2-thread rayon pool.
                let t2 = median_time(o.samples, || {
                    pool2.install(|| {
                        for _ in 0..reps {
                            matvec(k, ty, *n, &w, &act, &mut out);
                        }
                    });
                    std::hint::black_box(&out);
                });
                let gbs = |t: Duration| (w.len() * reps) as f64 / t.as_secs_f64() / 1e9;
                println!(
                    "{:<6} {:>14} {:<5} {:>9.1} {:<11} {:>9.2} {:>9.2} {:>9.2}",
                    model,
                    format!("{n}x{rows}"),
                    ty.name(),
                    w.len() as f64 / 1e6,
                    k.name(),
                    gbs(t1),
                    gbs(c1),
                    gbs(t2)
                );
                if let Some((t1, c1, t2)) =
                    packed_times(&o, k, ty, *n, *rows, &w, &act, reps, &pool2)
                {
                    println!(
                        "{:<6} {:>14} {:<5} {:>9.1} {:<11} {:>9.2} {:>9.2} {:>9.2}",
                        model,
                        format!("{n}x{rows}"),
                        "x16",
                        w.len() as f64 / 1e6,
                        k.name(),
                        gbs(t1),
                        gbs(c1),
                        gbs(t2)
                    );
                }
            }
            if lut::lut_packable(ty, *rows, *n) || lut_q4_0::lut_packable(ty, *rows, *n) {
                let act = activation(&mut rng, o.tiers[0], ty, *n);
                for (name, f) in turboinfer::kernels::lut_kernels(ty) {
                    if name == "scalar" && !o.tiers.iter().any(|k| k.tier() == Tier::Scalar) {
                        continue;
                    }
                    let (t1, c1, t2) = lut_times(&o, f, ty, *n, *rows, &w, &act, reps, &pool2);
                    let gbs = |t: Duration| (w.len() * reps) as f64 / t.as_secs_f64() / 1e9;
                    println!(
                        "{:<6} {:>14} {:<5} {:>9.1} {:<11} {:>9.2} {:>9.2} {:>9.2}",
                        model,
                        format!("{n}x{rows}"),
                        "lut",
                        w.len() as f64 / 1e6,
                        format!("lut-{name}"),
                        gbs(t1),
                        gbs(c1),
                        gbs(t2)
                    );
                }
            }
        }
    }
    batch_costs(&o, &mut rng);
}

/// Wall time (1 thread), thread CPU time (1 thread) and wall time (2 threads) of `reps` products of
/// a matrix stored as row groups of `group_rows` rows and `group_bytes` bytes: each product first
/// makes its per-vector context (`prepare`, e.g. lookup tables), then `group(ctx, g, out)` writes
/// group `g`'s outputs (two threads: groups split in chunks over the pool).
fn group_times<C: Sync>(
    o: &Opts,
    (rows, group_rows, group_bytes): (usize, usize, usize),
    reps: usize,
    pool2: &rayon::ThreadPool,
    prepare: impl Fn() -> C + Sync,
    group: impl Fn(&C, usize, &mut [f32]) + Sync,
) -> (Duration, Duration, Duration) {
    let mut out = vec![0f32; rows];
    let mut one = || {
        for _ in 0..reps {
            let ctx = prepare();
            for (g, og) in out.chunks_exact_mut(group_rows).enumerate() {
                group(&ctx, g, og);
            }
        }
        std::hint::black_box(&out);
    };
    let t1 = median_time(o.samples, &mut one);
    let c1 = median_thread_cpu(o.samples, &mut one);
    let per = (CHUNK_BYTES / group_bytes).max(1);
    let t2 = median_time(o.samples, || {
        pool2.install(|| {
            for _ in 0..reps {
                let ctx = prepare();
                out.par_chunks_mut(per * group_rows).enumerate().for_each(|(c, o)| {
                    for (i, og) in o.chunks_exact_mut(group_rows).enumerate() {
                        group(&ctx, c * per + i, og);
                    }
                });
            }
        });
        std::hint::black_box(&out);
    });
    (t1, c1, t2)
}

/// [`group_times`] of the LUT form (`Q2_K×32`, `Q4_0×32`) of `w`, a `ty` matrix, with `act` by the
/// LUT kernel `f`, each product building its activation tables first (once per vector, as a forward
/// pass would per matrix).
#[allow(clippy::too_many_arguments)]
fn lut_times(
    o: &Opts,
    f: lut::LutGemvFn,
    ty: GgmlType,
    n: usize,
    rows: usize,
    w: &[u8],
    act: &[u8],
    reps: usize,
    pool2: &rayon::ThreadPool,
) -> (Duration, Duration, Duration) {
    type Tables = fn(usize, &[u8], &mut [u8]);
    let mut p = vec![0u8; w.len()];
    let (nb, block, table_bytes, build): (usize, usize, usize, Tables) = if ty == GgmlType::Q2_K {
        lut::pack_q2_k(rows, n, w, &mut p);
        (n / quant::QK_K, lut::LUT_BLOCK, lut::TABLE_BYTES, lut::build_tables)
    } else {
        lut_q4_0::pack_q4_0(rows, n, w, &mut p);
        (n / quant::QK, lut_q4_0::LUT_BLOCK, lut_q4_0::TABLE_BYTES, lut_q4_0::build_tables)
    };
    let gb = nb * block;
    let tables = || {
        let mut t = vec![0u8; nb * table_bytes];
        build(nb, act, &mut t);
        t
    };
    group_times(o, (rows, lut::LUT_ROWS, gb), reps, pool2, tables, |t, g, out| {
        f(nb, &p[g * gb..(g + 1) * gb], act, t, out.try_into().unwrap())
    })
}

/// [`group_times`] of the packed (`Q4_K×16` / `Q6_K×16`) form of `w` with `act`, if the tier has
/// a packed kernel for `ty`.
#[allow(clippy::too_many_arguments)]
fn packed_times(
    o: &Opts,
    k: &KernelSet,
    ty: GgmlType,
    n: usize,
    rows: usize,
    w: &[u8],
    act: &[u8],
    reps: usize,
    pool2: &rayon::ThreadPool,
) -> Option<(Duration, Duration, Duration)> {
    let dot = k.packed(ty).filter(|_| packed::packable(ty, rows, n))?;
    let mut p = vec![0u8; w.len()];
    packed::pack(ty, rows, n, w, &mut p);
    let gb = w.len() / rows * packed::PACK_ROWS;
    Some(group_times(
        o,
        (rows, packed::PACK_ROWS, gb),
        reps,
        pool2,
        || (),
        |_, g, out| dot(n, &p[g * gb..(g + 1) * gb], act, act.len(), out),
    ))
}

/// Time of the batch kernel over a whole matrix for 1, 2, 4, 8 vectors relative to 1 vector.
fn batch_costs(o: &Opts, rng: &mut Rng) {
    use GgmlType::*;
    println!();
    println!("batch kernel, 1 thread, thread CPU time: time for B vectors / time for 1 vector (1536x8960 matrices; Q5_0/Q8_0/Q4_1 at 896x4864)");
    println!("{:<5} {:<11} {:>8} {:>8} {:>8} {:>8}", "type", "tier", "B=1 ms", "B=2", "B=4", "B=8");
    for ty in [Q4_K, Q6_K, Q5_0, Q8_0, Q4_1] {
        if o.types.as_ref().is_some_and(|t| !t.iter().any(|x| x == ty.name())) {
            continue;
        }
        let (n, rows) = if ty.block_size() == 256 { (1536, 8960) } else { (896, 4864) };
        let w = random_matrix(rng, ty, rows, n);
        let rb = w.len() / rows;
        for &k in &o.tiers {
            let acts: Vec<u8> = (0..8).flat_map(|_| activation(rng, k, ty, n)).collect();
            let ab = acts.len() / 8;
            let batch = k.vec_dot_batch(ty).unwrap();
            let mut out = vec![0f32; 8];
            let mut times = Vec::new();
            for b in [1usize, 2, 4, 8] {
                let t = median_thread_cpu(o.samples, || {
                    for r in 0..rows {
                        batch(n, &w[r * rb..(r + 1) * rb], &acts, ab, &mut out[..b]);
                    }
                    std::hint::black_box(&out);
                });
                times.push(t.as_secs_f64());
            }
            println!(
                "{:<5} {:<11} {:>8.3} {:>8.2} {:>8.2} {:>8.2}",
                ty.name(),
                k.name(),
                times[0] * 1e3,
                times[1] / times[0],
                times[2] / times[0],
                times[3] / times[0]
            );
            if let Some(dot) = k.packed(ty) {
                let mut p = vec![0u8; w.len()];
                packed::pack(ty, rows, n, &w, &mut p);
                let gb = rb * packed::PACK_ROWS;
                let mut out = vec![0f32; 8 * packed::PACK_ROWS];
                let times: Vec<f64> = [1usize, 2, 4, 8]
                    .iter()
                    .map(|&b| {
                        median_thread_cpu(o.samples, || {
                            for g in 0..rows / packed::PACK_ROWS {
                                dot(
                                    n,
                                    &p[g * gb..(g + 1) * gb],
                                    &acts,
                                    ab,
                                    &mut out[..b * packed::PACK_ROWS],
                                );
                            }
                            std::hint::black_box(&out);
                        })
                        .as_secs_f64()
                    })
                    .collect();
                println!(
                    "{:<5} {:<11} {:>8.3} {:>8.2} {:>8.2} {:>8.2}",
                    "x16",
                    k.name(),
                    times[0] * 1e3,
                    times[1] / times[0],
                    times[2] / times[0],
                    times[3] / times[0]
                );
            }
        }
    }
}
