//! Parity of every kernel tier with the scalar reference (`turboinfer::quant`), which is the
//! numeric contract (`turboinfer::quant::contract`).
//!
//! Budget: none. Every tier's dot product equals the reference bit for bit (the integer block sums
//! are exact and the float operations are the contract's, in its order), and so do the batch
//! kernels, the attention kernels and the activation quantizers (byte for byte).
//! The reference itself is checked against the f64 dot of the dequantized operands: its float
//! order is one of many, so it may differ from the exact value by the rounding of `t` terms; we
//! allow `BUDGET_FACTOR * (t + 16) * eps * Σ|w_i a_i|` (t = blocks, or elements for float rows) and
//! print the worst observed `err / (eps * Σ|w_i a_i|)` so regressions toward the budget are visible.

mod common;
#[path = "quant_support/mod.rs"]
mod quant_support;

use quant_support::{activations, random_row, Rng};
use turboinfer::gguf::GgufFile;
use turboinfer::kernels::cpu::{cpu_features, CpuFeatures};
use turboinfer::kernels::{act_row, parse_override, KernelError, KernelSet, Tier};
use turboinfer::quant::{self, GgmlType};

/// Safety factor over the first-order reordering bound.
const BUDGET_FACTOR: f64 = 2.0;

/// Every weight type with a kernel slot (`KernelSet::get`): the types of our models and the
/// others the reference supports.
const TYPES: [GgmlType; 13] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// Tiers this CPU runs (printing the ones skipped and why), then the scalar tier's portable table
/// where this CPU's scalar tier is another (what a CPU without F16C runs).
fn tiers() -> Vec<&'static KernelSet> {
    let mut v = Vec::new();
    for t in Tier::ALL {
        match KernelSet::for_tier(t) {
            Ok(k) => v.push(k),
            Err(e) => eprintln!("skipping tier {t}: {e}"),
        }
    }
    if KernelSet::portable().name() == turboinfer::kernels::PORTABLE_OVERRIDE {
        v.push(KernelSet::portable());
    }
    v
}

/// Row lengths to test for `ty`: one block, a few blocks, and the models' real row lengths.
fn lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_size() {
        1 => vec![1, 7, 8, 17, 33, 896, 1536, 4864],
        32 => vec![32, 96, 896, 1536, 4864, 8960],
        _ => vec![256, 768, 1536, 4864, 8960],
    }
}

/// Σ|w_i a_i| over the dequantized row and activations, plus Σ|m_b s_b| for Q8_1 pairings.
fn magnitude(ty: GgmlType, n: usize, w: &[u8], act: &[u8]) -> f64 {
    let (_, mut mag) = quant_support::reference_dot(ty, n, w, act);
    if quant::activation_type(ty) == GgmlType::Q8_1 {
        let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32() as f64;
        for (wb, ab) in w.chunks_exact(ty.type_size()).zip(act.chunks_exact(36)) {
            mag += (f16(&wb[2..4]) * f16(&ab[2..4])).abs();
        }
    }
    mag
}

/// Number of sequentially accumulated float terms of a row of `n` elements of `ty`.
fn terms(ty: GgmlType, n: usize) -> usize {
    n / ty.block_size()
}

/// Quantizes `x` to `ty`'s activation format with the reference quantizer, as the kernels read
/// it (`act_row`: the blocks, then the 32-element formats' scales as f32).
fn quantize_act(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    act_row::quantize(quant::activation_type(ty), x).unwrap()
}

/// Checks one tier's `vec_dot` on (w, act): bitwise the reference, which is within the reordering
/// budget of the f64 dot of the dequantized operands; returns err / (eps * magnitude).
fn check_dot(k: &KernelSet, ty: GgmlType, n: usize, w: &[u8], row: &[u8], what: &str) -> f64 {
    let got = (k.vec_dot(ty).unwrap())(n, w, row);
    // The reference reads the ggml blocks only.
    let act = act_row::blocks(quant::activation_type(ty), n, row);
    let want = quant::vec_dot(ty, n, w, act).unwrap();
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "{what}: tier {} {ty} n={n}: got {got}, reference {want}",
        k.name()
    );
    let (exact, _) = quant_support::reference_dot(ty, n, w, act);
    let (got, want) = (got as f64, exact);
    let mag = magnitude(ty, n, w, act);
    let eps = f32::EPSILON as f64;
    let budget = BUDGET_FACTOR * (terms(ty, n) + 16) as f64 * eps * mag + f32::MIN_POSITIVE as f64;
    let err = (got - want).abs();
    assert!(
        err <= budget,
        "{what}: {ty} n={n}: reference {got}, f64 dot {want}, err {err:e} > budget {budget:e} (mag {mag:e})"
    );
    if mag > 0.0 {
        err / (eps * mag)
    } else {
        0.0
    }
}

#[test]
fn every_tier_matches_reference_on_random_rows() {
    let mut rng = Rng::new(0x5eed);
    for k in tiers() {
        for ty in TYPES {
            let mut worst = 0f64;
            for n in lengths(ty) {
                for _ in 0..6 {
                    let w = random_row(&mut rng, ty, n);
                    let act = quantize_act(ty, &activations(&mut rng, n));
                    worst = worst.max(check_dot(k, ty, n, &w, &act, "random"));
                }
            }
            eprintln!(
                "tier {:<10} {:<5} random rows: worst err = {worst:.2} eps·Σ|wa|",
                k.name(),
                ty.name()
            );
        }
    }
}

#[test]
fn every_tier_matches_reference_on_extreme_codes() {
    // All-max and all-min code bytes (0x00, 0xFF, 0x80, 0x7F patterns) hit saturation corners of the
    // u8×i8 pair sums; activations of full magnitude (±127 after quantization).
    let mut rng = Rng::new(7);
    for k in tiers() {
        for ty in TYPES.into_iter().filter(|t| t.block_size() > 1) {
            let n = 2 * ty.block_size().max(256);
            for fill in [0x00u8, 0xFF, 0x80, 0x7F, 0x88] {
                let mut w = random_row(&mut rng, ty, n);
                let keep = random_row(&mut rng, ty, n); // scale fields come from here
                w.iter_mut().for_each(|b| *b = fill);
                restore_scales(ty, &mut w, &keep);
                for sign in [1.0f32, -1.0] {
                    let x: Vec<f32> =
                        (0..n).map(|i| sign * if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
                    check_dot(k, ty, n, &w, &quantize_act(ty, &x), "extreme");
                }
            }
        }
    }
}

/// Copies the f16 scale fields of each block from `src` into `dst` (so filled rows stay finite).
fn restore_scales(ty: GgmlType, dst: &mut [u8], src: &[u8]) {
    let fields: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        _ => &[],
    };
    let bs = ty.type_size();
    for (d, s) in dst.chunks_exact_mut(bs).zip(src.chunks_exact(bs)) {
        for &f in fields {
            d[f..f + 2].copy_from_slice(&s[f..f + 2]);
        }
    }
}

/// Odd row lengths for the batch-invariance test: odd block counts (the AVX-512 32-block kernels
/// take an odd last block through the 256-bit kernel), and for float rows odd element counts (a
/// scalar tail after the vector loop).
fn odd_lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_size() {
        1 => vec![1, 7, 17, 33, 895],
        qk => [1, 3, 7, 151].iter().map(|b| b * qk).collect(),
    }
}

/// Every row of the batch kernel is bitwise the single-vector kernel of the same tier, for every
/// (type × tier), odd sizes, 1..=24 vectors (several `MAX_BATCH` chunks): what makes a batched
/// forward pass bitwise equal to one-token-at-a-time decoding.
#[test]
fn batch_kernel_equals_repeated_single_kernel() {
    let mut rng = Rng::new(11);
    for k in tiers() {
        for ty in TYPES {
            for n in odd_lengths(ty) {
                let w = random_row(&mut rng, ty, n);
                let ab = act_row::act_row_bytes(quant::activation_type(ty), n).unwrap();
                // Padding between vectors (filled with garbage) must be ignored.
                let stride = ab + 40;
                let count = 24; // three MAX_BATCH chunks
                let mut acts = vec![0xA5u8; stride * count];
                for v in 0..count {
                    acts[v * stride..v * stride + ab]
                        .copy_from_slice(&quantize_act(ty, &activations(&mut rng, n)));
                }
                let single = k.vec_dot(ty).unwrap();
                let batch = k.vec_dot_batch(ty).unwrap();
                let want: Vec<f32> =
                    (0..count).map(|v| single(n, &w, &acts[v * stride..v * stride + ab])).collect();
                for b in 1..=count {
                    let mut out = vec![f32::NAN; b];
                    // The last vector needs only `ab` bytes, not a whole stride.
                    batch(n, &w, &acts[..(b - 1) * stride + ab], stride, &mut out);
                    for (v, (o, s)) in out.iter().zip(&want).enumerate() {
                        assert_eq!(
                            o.to_bits(),
                            s.to_bits(),
                            "tier {} {ty} n {n} batch {b} vector {v}: {o} vs {s}",
                            k.name()
                        );
                    }
                }
            }
        }
    }
}

/// The contract's float dot order, written out here independently of the crate's code: 16 lanes
/// over whole groups of 16 (product rounded, then added: no FMA), folded l + l+8, l + l+4, l + l+2,
/// 0 + 1, then the tail one product at a time.
fn lanes16_score(k: &[f32], q: &[f32]) -> f32 {
    let full = k.len() / 16 * 16;
    let mut l = [0f32; 16];
    for j in (0..full).step_by(16) {
        for (i, acc) in l.iter_mut().enumerate() {
            *acc += k[j + i] * q[j + i];
        }
    }
    let r8: Vec<f32> = (0..8).map(|i| l[i] + l[i + 8]).collect();
    let r4: Vec<f32> = (0..4).map(|i| r8[i] + r8[i + 4]).collect();
    let r2: Vec<f32> = (0..2).map(|i| r4[i] + r4[i + 2]).collect();
    let mut s = r2[0] + r2[1];
    for t in full..k.len() {
        s += k[t] * q[t];
    }
    s
}

/// The attention score kernels (`KernelSet::score_dot`, F32 and F16 key rows, f32 query) of every
/// tier against an f64 dot of the same values, on head sizes with and without a vector tail, within
/// the float reordering budget, and bitwise in the contract's 16-lane order on every tier.
#[test]
fn score_kernels_match_reference() {
    let mut rng = Rng::new(23);
    for k in tiers() {
        for ty in [GgmlType::F32, GgmlType::F16] {
            let mut worst = 0f64;
            for n in [1usize, 7, 16, 17, 64, 80, 128, 129] {
                for _ in 0..20 {
                    let key = random_row(&mut rng, ty, n);
                    let q = activations(&mut rng, n);
                    let qb: Vec<u8> = q.iter().flat_map(|v| v.to_le_bytes()).collect();
                    let mut kv = vec![0f32; n];
                    quant::dequantize_row(ty, &key, &mut kv).unwrap();
                    let exact: f64 = kv.iter().zip(&q).map(|(&a, &b)| a as f64 * b as f64).sum();
                    let mag: f64 =
                        kv.iter().zip(&q).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
                    let got = (k.score_dot(ty).unwrap())(n, &key, &qb) as f64;
                    let eps = f32::EPSILON as f64;
                    let budget =
                        BUDGET_FACTOR * (n + 16) as f64 * eps * mag + f32::MIN_POSITIVE as f64;
                    assert!(
                        (got - exact).abs() <= budget,
                        "tier {} {ty} n={n}: score {got} vs {exact}",
                        k.name()
                    );
                    let want = lanes16_score(&kv, &q);
                    assert_eq!(
                        got as f32,
                        want,
                        "tier {} {ty} n={n}: not the tier's summation order",
                        k.name()
                    );
                    if mag > 0.0 {
                        worst = worst.max((got - exact).abs() / (eps * mag));
                    }
                }
            }
            eprintln!(
                "tier {:<10} {:<5} attention scores: worst err = {worst:.2} eps·Σ|kq|",
                k.name(),
                ty.name()
            );
        }
    }
}

/// The attention weighted-sum kernels (`KernelSet::weighted_sum`) of every tier are bitwise the
/// scalar reference (each lane does the reference's multiply-then-add in row order), on head sizes
/// with vector tails and several row counts.
#[test]
fn weighted_sum_kernels_are_bitwise_reference() {
    let mut rng = Rng::new(29);
    let reference = KernelSet::for_tier(Tier::Scalar).unwrap();
    for k in tiers() {
        for ty in [GgmlType::F32, GgmlType::F16] {
            for hd in [1usize, 7, 16, 64, 80, 128, 136, 200, 256] {
                for n in [0usize, 1, 3, 33, 257] {
                    let v = random_row(&mut rng, ty, n * hd);
                    let mut p: Vec<f32> = (0..n).map(|_| rng.uniform()).collect();
                    let z: f32 = p.iter().sum();
                    p.iter_mut().for_each(|x| *x /= z.max(1e-6));
                    let (mut want, mut got) = (vec![0.0f32; hd], vec![0.0f32; hd]);
                    (reference.weighted_sum(ty).unwrap())(hd, &p, &v, &mut want);
                    (k.weighted_sum(ty).unwrap())(hd, &p, &v, &mut got);
                    // Accumulated over blocks of rows (each call continuing from the last):
                    // bitwise the one-call sum, as attention's grouped heads rely on.
                    let mut blocks = vec![0.0f32; hd];
                    let row_bytes = v.len() / n.max(1);
                    for (j0, pb) in (0..n).step_by(5).zip(p.chunks(5)) {
                        let vb = &v[j0 * row_bytes..(j0 + pb.len()) * row_bytes];
                        (k.weighted_sum(ty).unwrap())(hd, pb, vb, &mut blocks);
                    }
                    for (d, ((a, b), c)) in got.iter().zip(&want).zip(&blocks).enumerate() {
                        assert_eq!(
                            a.to_bits(),
                            b.to_bits(),
                            "tier {} {ty} hd {hd} rows {n} lane {d}: {a} vs {b}",
                            k.name()
                        );
                        assert_eq!(
                            c.to_bits(),
                            b.to_bits(),
                            "tier {} {ty} hd {hd} rows {n} lane {d} in blocks of 5: {c} vs {b}",
                            k.name()
                        );
                    }
                    if n > 0 {
                        // And the reference is the weighted sum (against f64).
                        let mut x = vec![0f32; n * hd];
                        quant::dequantize_row(ty, &v, &mut x).unwrap();
                        for d in 0..hd {
                            let e: f64 = (0..n).map(|j| p[j] as f64 * x[j * hd + d] as f64).sum();
                            let m: f64 =
                                (0..n).map(|j| (p[j] as f64 * x[j * hd + d] as f64).abs()).sum();
                            assert!(
                                (want[d] as f64 - e).abs()
                                    <= 2.0 * (n + 1) as f64 * f32::EPSILON as f64 * m + 1e-30,
                                "{ty} hd {hd} rows {n} lane {d}"
                            );
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn quantizers_are_bit_identical_to_reference() {
    let mut rng = Rng::new(99);
    let mut cases: Vec<Vec<f32>> =
        [256usize, 512, 4864, 8960].iter().map(|&n| activations(&mut rng, n)).collect();
    // Rounding ties: 127 fixes the scale to exactly 1 (Q8_0) / -1 (Q8_K), the rest land on .5.
    cases.push(
        (0..256).map(|i| if i % 32 == 5 { 127.0 } else { (i % 200) as f32 - 100.5 }).collect(),
    );
    // Equal magnitudes of both signs: the first one fixes Q8_K's sign.
    cases.push(
        (0..256)
            .map(|i| {
                if i == 3 {
                    -5.0
                } else if i == 7 {
                    5.0
                } else {
                    (i % 5) as f32 * 0.3
                }
            })
            .collect(),
    );
    cases.push(vec![0.0; 256]);
    cases.push((0..256).map(|i| if i % 2 == 0 { -0.0 } else { 0.0 }).collect());
    // Non-finite and extreme values: NaN, ±inf, near f32::MAX, subnormals.
    let mut special = activations(&mut rng, 512);
    special[3] = f32::NAN;
    special[40] = f32::INFINITY;
    special[77] = f32::NEG_INFINITY;
    special[300] = 3.0e38;
    special[301] = -3.0e38;
    cases.push(special);
    cases.push((0..256).map(|i| (i as f32 - 128.0) * 1e-41).collect());
    cases.push((0..256).map(|i| if i == 9 { f32::NAN } else { 0.0 }).collect());
    for k in tiers() {
        for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F32] {
            let q = k.quantize(ty).unwrap();
            for (c, x) in cases.iter().enumerate() {
                let len = quant::row_size(ty, x.len()).unwrap();
                let (mut want, mut got) = (vec![0u8; len], vec![0x55u8; len]);
                quant::quantize_row(ty, x, &mut want).unwrap();
                q(x, &mut got);
                if let Some(i) = (0..len).find(|&i| want[i] != got[i]) {
                    panic!("tier {} quantizer {ty} case {c}: first differing byte {i}: {} vs reference {}", k.name(), got[i], want[i]);
                }
            }
        }
    }
}

#[test]
fn every_tier_matches_reference_on_real_model_rows() {
    let mut rng = Rng::new(2024);
    for model in ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        let Some(path) = common::model_path(model) else {
            continue;
        };
        let g = GgufFile::open(&path).unwrap();
        let mut per_type: Vec<(GgmlType, usize)> = Vec::new();
        for info in g.tensors() {
            let ty = info.ty;
            if !TYPES.contains(&ty) || info.dims.len() < 2 {
                continue;
            }
            // At most 3 matrices per type per model (the embedding/output matrix is the largest).
            let seen = per_type.iter_mut().find(|e| e.0 == ty);
            match seen {
                Some(e) if e.1 >= 3 => continue,
                Some(e) => e.1 += 1,
                None => per_type.push((ty, 1)),
            }
            let n = info.row_len();
            let rb = info.row_bytes();
            let data = g.data_of(info);
            let rows = info.n_rows();
            let sets = tiers();
            let mut worst = vec![0f64; sets.len()];
            for _ in 0..6 {
                let r = (rng.next_u64() % rows as u64) as usize;
                let w = &data[r * rb..(r + 1) * rb];
                let act = quantize_act(ty, &activations(&mut rng, n));
                for (s, k) in sets.iter().enumerate() {
                    worst[s] = worst[s].max(check_dot(
                        k,
                        ty,
                        n,
                        w,
                        &act,
                        &format!("{model} {}", info.name),
                    ));
                }
            }
            let summary: Vec<String> =
                sets.iter().zip(&worst).map(|(k, w)| format!("{}={w:.2}", k.name())).collect();
            eprintln!(
                "{model} {} ({ty}, {rows}x{n}): worst err/(eps·Σ|wa|): {}",
                info.name,
                summary.join(" ")
            );
        }
    }
}

#[test]
fn tier_selection_and_override() {
    let f = cpu_features();
    for t in Tier::ALL {
        assert_eq!(KernelSet::for_tier(t).is_ok(), t.supported(f), "{t}");
        assert_eq!(parse_override(t.name(), f).is_ok(), t.supported(f), "{t}");
        if let Ok(k) = KernelSet::for_tier(t) {
            assert_eq!(k.tier(), t);
        }
    }
    // The best tier is what the selection picks without an override (the test runner does not set it,
    // unless a tier is forced for the whole run, which must then be honoured).
    let k = turboinfer::kernels::try_kernels().expect("valid selection");
    match std::env::var(turboinfer::kernels::OVERRIDE_ENV) {
        Ok(s) if !s.trim().is_empty() => assert_eq!(k.tier(), parse_override(&s, f).unwrap()),
        _ => assert_eq!(k.tier(), Tier::best(f)),
    }
    // A CPU without AVX-512 refuses the AVX-512 tiers with the missing feature named.
    let avx2_only = CpuFeatures { avx2: true, fma: true, f16c: true, ..CpuFeatures::default() };
    let e = parse_override("avx512vnni", &avx2_only).unwrap_err();
    assert!(matches!(e, KernelError::Unsupported { tier: Tier::Avx512Vnni, .. }), "{e}");
    assert!(matches!(
        parse_override("avx512", &CpuFeatures::default()),
        Err(KernelError::Unsupported { .. })
    ));
    assert!(matches!(parse_override("fastest", f), Err(KernelError::UnknownTier(_))));
}

#[test]
fn kernels_refuse_short_buffers_without_reading_out_of_bounds() {
    for k in tiers() {
        for ty in TYPES {
            let n = 256;
            let w = vec![0u8; quant::row_size(ty, n).unwrap()];
            let a = vec![0u8; act_row::act_row_bytes(quant::activation_type(ty), n).unwrap()];
            let dot = k.vec_dot(ty).unwrap();
            let short = std::panic::catch_unwind(|| dot(n, &w[..w.len() - 1], &a));
            let short_a = std::panic::catch_unwind(|| dot(n, &w, &a[..a.len() - 1]));
            let batch = k.vec_dot_batch(ty).unwrap();
            let short_b = std::panic::catch_unwind(|| {
                let mut out = [0.0f32; 2];
                batch(n, &w[..w.len() - 1], &[a.clone(), a.clone()].concat(), a.len(), &mut out)
            });
            // Every entry point checks lengths (the scalar reference too): no result from a
            // buffer of the wrong length, and so no out-of-bounds read.
            assert!(
                short.is_err() && short_a.is_err() && short_b.is_err(),
                "tier {} {ty} accepted a short buffer",
                k.name()
            );
        }
    }
}

/// The elementary-function loops each tier compiles for itself (SwiGLU, softmax: the engine's own
/// `exp`) are bitwise the scalar tier's, on values across exp's whole range and beyond.
#[test]
fn activation_loops_are_bitwise_reference() {
    let reference = KernelSet::for_tier(Tier::Scalar).unwrap();
    let n = 4099; // not a multiple of any vector width
    let gate: Vec<f32> = (0..n).map(|i| ((i * 7919 % 4001) as f32 - 2000.0) * 0.061).collect();
    let up: Vec<f32> = (0..n).map(|i| ((i * 104_729 % 977) as f32 - 488.0) * 0.013).collect();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let (mut g0, mut s0) = (gate.clone(), gate.clone());
    reference.swiglu(&mut g0, &up);
    reference.softmax(&mut s0);
    for k in tiers() {
        let (mut g, mut s) = (gate.clone(), gate.clone());
        k.swiglu(&mut g, &up);
        k.softmax(&mut s);
        assert_eq!(bits(&g), bits(&g0), "tier {} swiglu", k.name());
        assert_eq!(bits(&s), bits(&s0), "tier {} softmax", k.name());
    }
}

/// The contract's `fma` (an exact emulation from f64 arithmetic in the baseline x86-64 build, the
/// instruction elsewhere) equals `f32::mul_add` bit for bit: on kernel-shaped operands (an exact
/// integer sum, a product of two scales, a running lane of either sign, cancellations) and on
/// random bit patterns, zeros and their signs, infinities and overflow included.
#[test]
fn contract_fma_is_the_fused_multiply_add() {
    use turboinfer::quant::contract::fma;
    let mut rng = Rng::new(0xF3A);
    let mut tested = 0usize;
    for i in 0..4_000_000u32 {
        let x = rng.next_u64();
        let (a, b, c) = match i % 5 {
            // A quad or block sum, a scale product, a lane.
            0 => (
                ((x as i32) >> 12) as f32,
                f32::from_bits(0x3000_0000 + ((x >> 36) as u32 & 0x0fff_ffff)),
                f32::from_bits(0x3400_0000 + ((x >> 8) as u32 & 0x0fff_ffff))
                    * if x & 1 == 0 { 1.0 } else { -1.0 },
            ),
            // Near-cancellation: c ≈ -a·b.
            1 => {
                let a = (x as i16) as f32;
                let b = f32::from_bits(0x3c00_0000 + ((x >> 20) as u32 & 0x00ff_ffff));
                (a, b, -(a * b) * (1.0 + ((x >> 50) as f32) * 1e-7))
            }
            // Exact zeros of either sign.
            2 => {
                let a = (x as i8) as f32;
                let b = f32::from_bits((x >> 8) as u32 & 0x3fff_ffff);
                (a, b, if x >> 63 == 0 { -(a * b) } else { -0.0 })
            }
            // Double-rounding traps: a·b is half an f32 ulp of c less 2^-46 of that, so a·b + c
            // lies just off the midpoint between two f32, too close for f64 to tell (the f64 sum
            // is the midpoint itself): only the rounding to odd gets these right, from either
            // side and with c of either parity.
            3 => {
                // c: any sign and mantissa, exponent field 40..220 (half an ulp stays normal).
                let exponent = (40 + (x >> 40) % 180) as u32;
                let c = f32::from_bits((exponent << 23) | (x as u32 & 0x807f_ffff));
                let half_ulp = f32::from_bits((exponent - 24) << 23);
                let sign = if x >> 63 == 0 { 1.0 } else { -1.0 };
                (1.0 + f32::EPSILON, sign * half_ulp * (1.0 - f32::EPSILON), c)
            }
            // Any bits (infinities and NaNs among them).
            _ => (
                f32::from_bits(x as u32),
                f32::from_bits((x >> 32) as u32),
                f32::from_bits((x >> 16) as u32),
            ),
        };
        let want = a.mul_add(b, c);
        // NaN payloads and signs are outside the contract; infinities (operands, or a finite
        // result that rounds past f32::MAX) are not.
        if want.is_nan() {
            continue;
        }
        tested += 1;
        let got = fma(a, b, c);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "fma({a:e}, {b:e}, {c:e}) = {got:e}, want {want:e}"
        );
    }
    assert!(tested > 3_000_000, "{tested}");
}
