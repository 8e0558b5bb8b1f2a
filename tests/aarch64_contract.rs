//! The numeric contract across architectures, in one thread (`harness = false`): runs natively
//! on x86-64 and under user-mode QEMU on aarch64 (`scripts/test-aarch64.sh`), where creating a
//! thread hangs, so there is no libtest and no thread pool (`Runtime::on_current_thread`).
//!
//! 1. Kernel slots: every slot of the tiers under test (the `TURBOINFER_KERNELS` tier, else every
//!    tier this CPU runs) is bitwise the scalar tier on random and edge-case inputs: dot products of
//!    every weight type (single and batch), packed Q4_K/Q6_K groups, attention scores and weighted
//!    sums, activation quantizers (byte for byte), SwiGLU/softmax, the sparse FFN's vector kernels;
//!    and every lookup-table kernel (`kernels::lut`) the Q2_K reference.
//! 2. Across architectures: digests (SHA-256 of the exact bits) of the scalar reference's results
//!    on those inputs, and of SmolLM2-135M's logits on short fixture prompts (prefill, a few decode
//!    steps, the same steps verified as one batch) on the selected tier. `--write-digest FILE`
//!    writes them (run on x86-64: the spec); `--digest FILE` compares (run on each aarch64 tier).
//!
//! Options: `--write-digest FILE` | `--digest FILE`, `--expect-tiers a,b,..` (the exact list of
//! tiers this CPU must run), `--runs a,b,..` (model runs, default all: `RUNS`), `--no-model`.
//! Prints `N passed, N failed`; exits 1 on a failure.

mod common;
#[path = "quant_support/mod.rs"]
mod quant_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use quant_support::{activations, random_row, Rng};
use sha2::{Digest, Sha256};
use turboinfer::gguf::GgufFile;
use turboinfer::kernels::cpu::cpu_features;
use turboinfer::kernels::{self, packed, parse_override, KernelError, KernelSet, Tier};
use turboinfer::model::{KvDtype, Logits, Model, ModelOptions};
use turboinfer::platform::runtime::Runtime;
use turboinfer::quant::{self, GgmlType};

/// Weight types with a kernel slot.
const TYPES: [GgmlType; 11] = [
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
];

/// Prompt tokens used at most (the fixture's long prompts cut short: QEMU is slow).
const PROMPT_MAX: usize = 20;

/// Pass/fail counts and the digests of this run.
#[derive(Default)]
struct Report {
    passed: usize,
    failed: usize,
    digests: BTreeMap<String, String>,
}

impl Report {
    /// Counts one check; prints `what` when it failed.
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if ok {
            self.passed += 1;
        } else {
            self.failed += 1;
            println!("FAILED: {}", what());
        }
    }

    /// Records the digest of `bits` under `key`. Every f32 NaN counts as one value: NaN signs and
    /// payloads are not part of the contract (x86's default NaN, e.g. of `0 · inf`, is negative,
    /// Arm's positive).
    fn digest(&mut self, key: String, bits: &[u32]) {
        let mut h = Sha256::new();
        for &b in bits {
            let b = if f32::from_bits(b).is_nan() { 0x7FC0_0000 } else { b };
            h.update(b.to_le_bytes());
        }
        let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        self.digests.insert(key, hex);
    }
}

/// Bits of a float slice.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Quantizes `x` to `ty`'s activation format with the reference quantizer, as the kernels read
/// it (`kernels::act_row`: the blocks, then the 32-element formats' scales as f32).
fn quantize_act(ty: GgmlType, x: &[f32]) -> Vec<u8> {
    kernels::act_row::quantize(quant::activation_type(ty), x).unwrap()
}

/// A random valid row of `ty` (Q8_K rows, which `random_row` lacks, come from its quantizer).
fn row(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    if ty == GgmlType::Q8_K {
        let x = activations(rng, n);
        let mut w = vec![0u8; quant::row_size(ty, n).unwrap()];
        quant::quantize_row(ty, &x, &mut w).unwrap();
        return w;
    }
    random_row(rng, ty, n)
}

/// `w` with every byte `fill` except the scale fields of `keep` (finite scales, extreme codes:
/// 0x80/0x7F/0xFF hit the integer corners of every code format).
fn extreme(ty: GgmlType, keep: &[u8], fill: u8) -> Vec<u8> {
    let fields: &[(usize, usize)] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[(0, 2)],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K => &[(0, 4)],
        GgmlType::Q6_K => &[(208, 2)],
        GgmlType::Q8_K => &[(0, 4), (260, 32)],
        _ => return keep.to_vec(),
    };
    let mut w = vec![fill; keep.len()];
    let bs = ty.type_size();
    for (d, s) in w.chunks_exact_mut(bs).zip(keep.chunks_exact(bs)) {
        for &(o, l) in fields {
            d[o..o + l].copy_from_slice(&s[o..o + l]);
        }
    }
    w
}

/// Row lengths for `ty`: one block, odd block counts (a lone last block of a parity), real sizes.
fn lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_size() {
        1 => vec![1, 7, 16, 17, 33, 576, 1000],
        32 => vec![32, 96, 224, 576],
        _ => vec![256, 768, 1536],
    }
}

/// Dot products of every type: the tier's single and batch kernels against the reference.
fn dots(r: &mut Report, tiers: &[&'static KernelSet]) {
    let mut rng = Rng::new(0xA64);
    for ty in TYPES {
        let mut reference_bits = Vec::new();
        let mut bad = vec![0usize; tiers.len()];
        for n in lengths(ty) {
            let base = row(&mut rng, ty, n);
            let mut rows = vec![base.clone(), row(&mut rng, ty, n)];
            if ty.block_size() > 1 {
                rows.extend([0x00u8, 0xFF, 0x80, 0x7F, 0x88].map(|f| extreme(ty, &base, f)));
            }
            // Eight activation vectors `stride` bytes apart, garbage in between.
            let at = quant::activation_type(ty);
            let ab = kernels::act_row::act_row_bytes(at, n).unwrap();
            let stride = ab + 24;
            let count = 7;
            let mut acts = vec![0xA5u8; stride * count];
            for v in 0..count {
                let x: Vec<f32> = if v == 0 {
                    // Full-magnitude activations: codes ±127.
                    (0..n).map(|i| if i % 3 == 0 { -1.0 } else { 1.0 }).collect()
                } else {
                    activations(&mut rng, n)
                };
                acts[v * stride..v * stride + ab].copy_from_slice(&quantize_act(ty, &x));
            }
            let act = |v: usize| &acts[v * stride..v * stride + ab];
            for w in &rows {
                let want: Vec<f32> = (0..count)
                    .map(|v| {
                        let blocks = kernels::act_row::blocks(at, n, act(v));
                        quant::vec_dot(ty, n, w, blocks).unwrap()
                    })
                    .collect();
                reference_bits.extend(bits(&want));
                for (t, k) in tiers.iter().enumerate() {
                    let single: Vec<f32> =
                        (0..count).map(|v| (k.vec_dot(ty).unwrap())(n, w, act(v))).collect();
                    let mut batch = vec![f32::NAN; count];
                    (k.vec_dot_batch(ty).unwrap())(
                        n,
                        w,
                        &acts[..(count - 1) * stride + ab],
                        stride,
                        &mut batch,
                    );
                    let mut first = vec![f32::NAN; 1];
                    (k.vec_dot_batch(ty).unwrap())(n, w, act(3), stride, &mut first);
                    if bits(&single) != bits(&want)
                        || bits(&batch) != bits(&want)
                        || first[0].to_bits() != want[3].to_bits()
                    {
                        bad[t] += 1;
                        if bad[t] == 1 {
                            println!(
                                "  {} {ty} n={n}: single {single:?} batch {batch:?} reference {want:?}",
                                k.tier()
                            );
                        }
                    }
                }
            }
        }
        for (t, k) in tiers.iter().enumerate() {
            r.check(bad[t] == 0, || {
                format!("tier {} {ty} dot products: {} rows differ", k.tier(), bad[t])
            });
        }
        r.digest(format!("dot/{ty}"), &reference_bits);
    }
}

/// Packed Q4_K/Q6_K groups (tiers with packed kernels): every output is the reference dot of its row.
fn packed_groups(r: &mut Report, tiers: &[&'static KernelSet]) {
    let mut rng = Rng::new(0x9AC);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
        let (rows, n) = (32, 512);
        let rb = quant::row_size(ty, n).unwrap();
        let mut m: Vec<u8> = (0..rows).flat_map(|_| row(&mut rng, ty, n)).collect();
        // Extreme codes in a few rows.
        for (i, f) in [(3usize, 0xFFu8), (8, 0x80), (17, 0x00), (30, 0x7F)] {
            let e = extreme(ty, &m[i * rb..(i + 1) * rb], f);
            m[i * rb..(i + 1) * rb].copy_from_slice(&e);
        }
        let mut p = vec![0u8; m.len()];
        packed::pack(ty, rows, n, &m, &mut p);
        let ab = quant::row_size(GgmlType::Q8_K, n).unwrap();
        let stride = ab + 8;
        let count = 5;
        let mut acts = vec![0x5Au8; stride * count];
        for v in 0..count {
            acts[v * stride..v * stride + ab]
                .copy_from_slice(&quantize_act(ty, &activations(&mut rng, n)));
        }
        for k in tiers {
            let Some(dot) = k.packed(ty) else { continue };
            let mut bad = 0;
            for b in 1..=count {
                for g in 0..rows / packed::PACK_ROWS {
                    let gw = &p[g * packed::PACK_ROWS * rb..(g + 1) * packed::PACK_ROWS * rb];
                    let mut out = vec![f32::NAN; b * packed::PACK_ROWS];
                    dot(n, gw, &acts[..(b - 1) * stride + ab], stride, &mut out);
                    for v in 0..b {
                        for rr in 0..packed::PACK_ROWS {
                            let w = &m[(g * packed::PACK_ROWS + rr) * rb..][..rb];
                            let want = quant::vec_dot(ty, n, w, &acts[v * stride..v * stride + ab])
                                .unwrap();
                            let got = out[v * packed::PACK_ROWS + rr];
                            if got.to_bits() != want.to_bits() {
                                bad += 1;
                                if bad == 1 {
                                    println!("  {} packed {ty} {b} vectors, group {g} row {rr} vector {v}: {got} vs {want}", k.tier());
                                }
                            }
                        }
                    }
                }
            }
            r.check(bad == 0, || format!("tier {} packed {ty}: {bad} outputs differ", k.tier()));
        }
    }
}

/// The lookup-table GEMV kernels (`kernels::lut`, `Q2_K×32`; `kernels::lut_q4_0`, `Q4_0×32`):
/// every output, of every LUT kernel this CPU runs (NEON `tbl` on aarch64), is the reference dot of
/// its row, bit for bit, including the largest sums (all codes at their extreme, activations ±127).
fn lut_groups(r: &mut Report) {
    use turboinfer::kernels::{lut, lut_q4_0};
    type Pack = fn(usize, usize, &[u8], &mut [u8]);
    type Tables = fn(usize, &[u8], &mut [u8]);
    /// Type, elements per block, the code bytes of a block (set to 0xFF for the largest sums),
    /// packed block bytes, table bytes per activation block, packing, tables.
    type Layout = (GgmlType, usize, std::ops::Range<usize>, usize, usize, Pack, Tables);
    let layouts: [Layout; 2] = [
        (
            GgmlType::Q2_K,
            256,
            0..80,
            lut::LUT_BLOCK,
            lut::TABLE_BYTES,
            lut::pack_q2_k,
            lut::build_tables,
        ),
        (
            GgmlType::Q4_0,
            32,
            2..18,
            lut_q4_0::LUT_BLOCK,
            lut_q4_0::TABLE_BYTES,
            lut_q4_0::pack_q4_0,
            lut_q4_0::build_tables,
        ),
    ];
    let mut rng = Rng::new(0x107);
    let (rows, n) = (64, 512);
    for (ty, elems, codes, packed_block, table_bytes, pack, build) in layouts {
        let nb = n / elems;
        let rb = quant::row_size(ty, n).unwrap();
        let bb = rb / nb;
        for extreme_case in [None, Some(1.0f32), Some(-1.0)] {
            let mut m: Vec<u8> = (0..rows).flat_map(|_| row(&mut rng, ty, n)).collect();
            let x = match extreme_case {
                Some(s) => {
                    m.chunks_exact_mut(bb).for_each(|b| b[codes.clone()].fill(0xFF));
                    vec![s; n]
                }
                None => activations(&mut rng, n),
            };
            // The activation row without `act_row`'s padding, which `quant::vec_dot` refuses.
            let act = quantize_act(ty, &x);
            let act = &act[..quant::row_size(quant::activation_type(ty), n).unwrap()];
            let mut p = vec![0u8; m.len()];
            pack(rows, n, &m, &mut p);
            let mut tables = vec![0u8; nb * table_bytes];
            build(nb, act, &mut tables);
            for (name, f) in turboinfer::kernels::lut_kernels(ty) {
                let mut bad = 0;
                for (g, gw) in p.chunks_exact(nb * packed_block).enumerate() {
                    let mut out = [f32::NAN; lut::LUT_ROWS];
                    f(nb, gw, act, &tables, &mut out);
                    for (rr, &got) in out.iter().enumerate() {
                        let w = &m[(g * lut::LUT_ROWS + rr) * rb..][..rb];
                        let want = quant::vec_dot(ty, n, w, act).unwrap();
                        if got.to_bits() != want.to_bits() {
                            bad += 1;
                        }
                    }
                }
                r.check(bad == 0, || {
                    format!("LUT kernel {ty} {name} ({extreme_case:?}): {bad} outputs differ")
                });
            }
        }
    }
}

/// Attention scores and weighted sums (F32 and F16 rows).
fn attention(r: &mut Report, tiers: &[&'static KernelSet], scalar: &KernelSet) {
    let mut rng = Rng::new(0xA77);
    for ty in [GgmlType::F32, GgmlType::F16] {
        let mut ref_bits = Vec::new();
        let mut bad = vec![0usize; tiers.len()];
        for n in [1usize, 7, 16, 17, 64, 80, 129] {
            let key = random_row(&mut rng, ty, n);
            let q: Vec<u8> =
                activations(&mut rng, n).iter().flat_map(|v| v.to_le_bytes()).collect();
            let want = (scalar.score_dot(ty).unwrap())(n, &key, &q);
            ref_bits.push(want.to_bits());
            for (t, k) in tiers.iter().enumerate() {
                bad[t] +=
                    ((k.score_dot(ty).unwrap())(n, &key, &q).to_bits() != want.to_bits()) as usize;
            }
        }
        for hd in [1usize, 7, 16, 64, 80, 136] {
            for n in [0usize, 1, 3, 33] {
                let v = random_row(&mut rng, ty, n * hd);
                let p: Vec<f32> = (0..n).map(|_| rng.uniform() / n as f32).collect();
                let mut want: Vec<f32> = (0..hd).map(|i| i as f32 * 0.01).collect();
                let start = want.clone();
                (scalar.weighted_sum(ty).unwrap())(hd, &p, &v, &mut want);
                ref_bits.extend(bits(&want));
                for (t, k) in tiers.iter().enumerate() {
                    let mut got = start.clone();
                    (k.weighted_sum(ty).unwrap())(hd, &p, &v, &mut got);
                    // In blocks of two rows, each call continuing from the last.
                    let mut blocks = start.clone();
                    let rbytes = v.len() / n.max(1);
                    for (j0, pb) in (0..n).step_by(2).zip(p.chunks(2)) {
                        let vb = &v[j0 * rbytes..(j0 + pb.len()) * rbytes];
                        (k.weighted_sum(ty).unwrap())(hd, pb, vb, &mut blocks);
                    }
                    bad[t] += (bits(&got) != bits(&want) || bits(&blocks) != bits(&want)) as usize;
                }
            }
        }
        for (t, k) in tiers.iter().enumerate() {
            r.check(bad[t] == 0, || {
                format!("tier {} {ty} attention: {} cases differ", k.tier(), bad[t])
            });
        }
        r.digest(format!("attention/{ty}"), &ref_bits);
    }
}

/// Activation quantizers (byte for byte), SwiGLU/softmax, the sparse FFN's vector kernels, and the
/// contract's `fma` (f64 emulation in the baseline x86-64 build, the instruction on aarch64).
fn elementwise(r: &mut Report, tiers: &[&'static KernelSet], scalar: &KernelSet) {
    let mut rng = Rng::new(0xE1E);
    let mut cases: Vec<Vec<f32>> =
        [256usize, 512].iter().map(|&n| activations(&mut rng, n)).collect();
    cases.push(
        (0..256).map(|i| if i % 32 == 5 { 127.0 } else { (i % 200) as f32 - 100.5 }).collect(),
    );
    cases.push((0..256).map(|i| if i % 2 == 0 { -0.0 } else { 0.0 }).collect());
    let mut special = activations(&mut rng, 256);
    special[3] = f32::NAN;
    special[40] = f32::INFINITY;
    special[77] = f32::NEG_INFINITY;
    special[200] = 3.0e38;
    cases.push(special);
    cases.push((0..256).map(|i| (i as f32 - 128.0) * 1e-41).collect());
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F32] {
        let want: Vec<Vec<u8>> = cases
            .iter()
            .map(|x| {
                let mut q = vec![0u8; quant::row_size(ty, x.len()).unwrap()];
                quant::quantize_row(ty, x, &mut q).unwrap();
                q
            })
            .collect();
        for k in tiers {
            let same = cases.iter().zip(&want).all(|(x, want)| {
                let mut got = vec![0x55u8; want.len()];
                (k.quantize(ty).unwrap())(x, &mut got);
                &got == want
            });
            r.check(same, || {
                format!("tier {} quantizer {ty} differs from the reference", k.tier())
            });
        }
        // Q8_1's `s = d · Σq` is NaN for an infinite input (`0 · inf`), whose sign differs
        // between x86 and Arm: any f16 NaN there counts as one value.
        let mut bytes = want.concat();
        if ty == GgmlType::Q8_1 {
            for b in bytes.chunks_exact_mut(quant::row_size(ty, 32).unwrap()) {
                if half::f16::from_le_bytes([b[2], b[3]]).is_nan() {
                    b[2..4].copy_from_slice(&half::f16::NAN.to_le_bytes());
                }
            }
        }
        r.digest(format!("quantize/{ty}"), &bytes.iter().map(|&b| b as u32).collect::<Vec<_>>());
    }
    // SwiGLU and softmax over exp's whole range and beyond.
    let n = 1027;
    let gate: Vec<f32> = (0..n).map(|i| ((i * 7919 % 4001) as f32 - 2000.0) * 0.061).collect();
    let up: Vec<f32> = (0..n).map(|i| ((i * 104_729 % 977) as f32 - 488.0) * 0.013).collect();
    let (mut g0, mut s0) = (gate.clone(), gate.clone());
    scalar.swiglu(&mut g0, &up);
    scalar.softmax(&mut s0);
    r.digest("swiglu".into(), &bits(&g0));
    r.digest("softmax".into(), &bits(&s0));
    // Sparse FFN vector kernels.
    let m = 32 * 7;
    let x: Vec<f32> = (0..m + 5).map(|i| ((i * 53 % 29) as f32 - 14.0) * 0.37).collect();
    let q8: Vec<Vec<u8>> = (0..4)
        .map(|s| {
            let x: Vec<f32> = (0..m).map(|i| ((i * 7 + s * 13) % 31) as f32 - 15.5).collect();
            // Q8_0 rows as stored (ggml's blocks only), not as activations.
            let mut q = vec![0u8; quant::row_size(GgmlType::Q8_0, m).unwrap()];
            quant::quantize_row(GgmlType::Q8_0, &x, &mut q).unwrap();
            q
        })
        .collect();
    let q = [&q8[0][..], &q8[1][..], &q8[2][..], &q8[3][..]];
    let vector_ops = |k: &KernelSet| {
        let mut out = Vec::new();
        let mut y = vec![0.5f32; m - 3];
        k.axpy(&mut y, -1.25, &x);
        out.extend(bits(&y));
        let mut y = x[..m].to_vec();
        k.axpy_q8_0(&mut y, 0.75, q[1]);
        out.extend(bits(&y));
        let mut y = x[..m].to_vec();
        k.axpy4_q8_0(&mut y, [0.5, -1.0, 0.25, 2.0], q);
        out.extend(bits(&y));
        out.push(k.dot_f32(&x[..m - 3], &x[1..m - 2]).to_bits());
        out
    };
    let want_vec = vector_ops(scalar);
    r.digest("vector".into(), &want_vec);
    for k in tiers {
        let (mut g, mut s) = (gate.clone(), gate.clone());
        k.swiglu(&mut g, &up);
        k.softmax(&mut s);
        r.check(bits(&g) == bits(&g0), || format!("tier {} swiglu", k.tier()));
        r.check(bits(&s) == bits(&s0), || format!("tier {} softmax", k.tier()));
        r.check(vector_ops(k) == want_vec, || {
            format!("tier {} sparse FFN vector kernels", k.tier())
        });
    }
    // The contract's fma on kernel-shaped and arbitrary finite operands.
    let mut fma_bits = Vec::new();
    for i in 0..20_000u32 {
        let x = rng.next_u64();
        let (a, b, c) = if i % 2 == 0 {
            (
                ((x as i32) >> 12) as f32,
                f32::from_bits(0x3000_0000 + ((x >> 36) as u32 & 0x0fff_ffff)),
                f32::from_bits(0x3400_0000 + ((x >> 8) as u32 & 0x0fff_ffff)),
            )
        } else {
            (
                f32::from_bits(x as u32),
                f32::from_bits((x >> 32) as u32),
                f32::from_bits((x >> 16) as u32),
            )
        };
        if a.is_finite() && b.is_finite() && c.is_finite() && a.mul_add(b, c).is_finite() {
            fma_bits.push(quant::contract::fma(a, b, c).to_bits());
        }
    }
    r.digest("fma".into(), &fma_bits);
}

/// The model runs: (name, model, cache type, fixture prompts, decode steps). SmolLM2 (Q4_1/Q8_0:
/// the 32-element kernels, F32/F16 attention) with both cache types; the 0.5B model (Q4_K/Q6_K/
/// Q5_0/Q8_0) once, short, with its packed weights attached when present (the i8mm tier's `smmla`
/// kernels; the other tiers dot the same matrices unpacked). `--runs a,b` selects some.
const RUNS: [(&str, &str, KvDtype, &[usize], usize); 3] = [
    ("smollm2", "smollm2-135m", KvDtype::F32, &[2, 3], 3),
    ("smollm2-f16", "smollm2-135m", KvDtype::F16, &[2], 3),
    ("qwen-0.5b", "qwen2.5-coder-0.5b", KvDtype::F32, &[3], 2),
];

/// Model logits on short fixture prompts, on the process's tier: prefill (every position), a few
/// decode steps, the same steps verified as one batch (`RUNS`).
fn model(r: &mut Report, rt: &Runtime, runs: &[&str]) {
    let set = kernels::kernels();
    for (run, name, kv, prompts, steps) in RUNS.into_iter().filter(|x| runs.contains(&x.0)) {
        let Some(path) = common::model_path(name) else { continue };
        let Some(fx) = common::load_fixture(name) else { continue };
        let file = Arc::new(GgufFile::open(&path).expect("model opens"));
        let gens = fx["generate"].as_array().unwrap();
        let opts = ModelOptions { kv_dtype: kv, ..ModelOptions::default() };
        let mut model = Model::from_gguf_on(file, set).expect("model loads").with_options(opts);
        model.attach_default_pack();
        for &g in prompts {
            let prompt: Vec<u32> =
                common::ids(&gens[g]["prompt_ids"]).into_iter().take(PROMPT_MAX).collect();
            let cont: Vec<u32> =
                common::ids(&gens[g]["output_ids"]).into_iter().take(steps).collect();
            let mut cache = model.new_cache(prompt.len() + cont.len() + 1);
            let key = |pass: &str| format!("model/{run}/{name}/prompt{g}/{pass}");
            let t0 = std::time::Instant::now();
            let pre = model.forward(rt, &mut cache, &prompt, Logits::All).unwrap();
            r.digest(key("prefill"), &bits(&pre));
            let mut dec = Vec::new();
            for &t in &cont {
                dec.extend(model.forward(rt, &mut cache, &[t], Logits::Last).unwrap());
            }
            r.digest(key("decode"), &bits(&dec));
            cache.truncate(prompt.len());
            let ver = model.forward(rt, &mut cache, &cont, Logits::All).unwrap();
            r.digest(key("verify"), &bits(&ver));
            // Verification is bitwise the one-token decode (batch invariance).
            r.check(bits(&ver) == bits(&dec), || {
                format!("{} batch verification = decode", key(""))
            });
            println!(
                "  {} {name} prompt {g} ({} tokens) + {} steps, {kv:?} cache, packed weights: {}: {:.1}s",
                set.tier(),
                prompt.len(),
                cont.len(),
                model.pack_status(),
                t0.elapsed().as_secs_f64()
            );
        }
    }
}

fn main() {
    // The engine's pool is this thread (QEMU hangs on thread creation).
    let rt = Runtime::on_current_thread().expect("one-thread runtime");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg =
        |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let write = arg("--write-digest");
    let compare = arg("--digest");
    let f = cpu_features();
    let available = Tier::available(f);
    println!(
        "aarch64_contract: {} {:?}, tiers {:?}, selected {}",
        std::env::consts::ARCH,
        f.list().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect::<Vec<_>>(),
        available.iter().map(|t| t.name()).collect::<Vec<_>>(),
        kernels::kernels().tier()
    );
    let mut r = Report::default();
    if let Some(want) = arg("--expect-tiers") {
        let got: Vec<&str> = available.iter().map(|t| t.name()).collect();
        let want: Vec<&str> = want.split(',').collect();
        r.check(got == want, || format!("tiers {got:?}, expected {want:?}"));
        // Every other tier is refused, by `for_tier` and as a `TURBOINFER_KERNELS` value.
        for t in Tier::ALL.into_iter().filter(|t| !available.contains(t)) {
            r.check(KernelSet::for_tier(t).is_err(), || {
                format!("tier {t} accepted on a CPU without it")
            });
            r.check(
                matches!(parse_override(t.name(), f), Err(KernelError::Unsupported { tier, .. }) if tier == t),
                || format!("TURBOINFER_KERNELS={t} not refused on a CPU without it"),
            );
        }
    }
    // Tiers under test: the forced one, else all; the scalar tier is the reference.
    let scalar = KernelSet::for_tier(Tier::Scalar).unwrap();
    let forced = std::env::var(kernels::OVERRIDE_ENV).is_ok_and(|s| !s.trim().is_empty());
    let tiers: Vec<&'static KernelSet> = if forced {
        vec![kernels::kernels()]
    } else {
        available.iter().map(|&t| KernelSet::for_tier(t).unwrap()).collect()
    };
    let tiers: Vec<&'static KernelSet> =
        tiers.into_iter().filter(|k| k.tier() != Tier::Scalar).collect();
    let t0 = std::time::Instant::now();
    dots(&mut r, &tiers);
    packed_groups(&mut r, &tiers);
    lut_groups(&mut r);
    attention(&mut r, &tiers, scalar);
    elementwise(&mut r, &tiers, scalar);
    println!("  kernel slots: {} checks ({:.1}s)", r.passed + r.failed, t0.elapsed().as_secs_f64());
    let all_runs = RUNS.map(|x| x.0).join(",");
    let runs_arg = if args.iter().any(|a| a == "--no-model") {
        String::new()
    } else {
        arg("--runs").unwrap_or(all_runs)
    };
    let runs: Vec<&str> = runs_arg.split(',').filter(|s| !s.is_empty()).collect();
    if !runs.is_empty() {
        let t1 = std::time::Instant::now();
        model(&mut r, &rt, &runs);
        println!("  model: {:.1}s", t1.elapsed().as_secs_f64());
    }
    if let Some(path) = write {
        let text: String = r.digests.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{path}: {e}"));
        println!("  wrote {} digests to {path}", r.digests.len());
    }
    if let Some(path) = compare {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let want: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once(' ')).collect();
        for (k, v) in &want {
            let got = r.digests.get(*k).cloned();
            // Model digests of runs not selected here are not compared.
            let skipped = k
                .strip_prefix("model/")
                .is_some_and(|m| !runs.iter().any(|run| m.starts_with(&format!("{run}/"))));
            if !skipped {
                r.check(got.as_deref() == Some(*v), || {
                    format!("{k}: digest {got:?}, reference {v} ({path})")
                });
            }
        }
        for k in r.digests.keys().filter(|k| !want.contains_key(k.as_str())) {
            println!("FAILED: {k}: not in the reference digests ({path})");
            r.failed += 1;
        }
    }
    println!("{} passed, {} failed", r.passed, r.failed);
    std::process::exit(if r.failed == 0 { 0 } else { 1 });
}
