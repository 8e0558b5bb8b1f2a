//! The `Q4_K×16` / `Q6_K×16` packed layouts and kernels (`turboinfer::kernels::packed`), and the
//! block-exact K-quant arithmetic they share with every tier's unpacked Q4_K and Q6_K kernels.
//!
//! Budget: none. Every SIMD tier's Q4_K / Q6_K dot product and every packed kernel must equal the
//! scalar reference (`turboinfer::quant`, the numeric contract's super-block chain) bit for bit
//! (the integer sums are exact and the float operations are the same FMAs per super-block in the
//! same order), for every vector count and position in a batch.

mod common;
#[path = "quant_support/mod.rs"]
mod quant_support;

use quant_support::{activations, random_row, Rng};
use turboinfer::gguf::GgufFile;
use turboinfer::kernels::packed::{
    pack, packable, unpack_block, unpack_block_q6_k, PACKED_BLOCK, PACKED_BLOCK_Q6K, PACK_ROWS,
};
use turboinfer::kernels::{KernelSet, Tier};
use turboinfer::quant::{self, GgmlType};

/// Bytes of a Q4_K / Q6_K super-block and of a Q8_K activation block.
const Q4K: usize = 144;
const Q6K: usize = 210;
const Q8K: usize = 292;

/// The packable K-quants.
const TYPES: [GgmlType; 2] = [GgmlType::Q4_K, GgmlType::Q6_K];

/// The reference dot product of `ty` (the contract's super-block chain); `act` may run on past
/// the row's activation blocks.
fn exact(ty: GgmlType) -> impl Fn(usize, &[u8], &[u8]) -> f32 {
    let f = quant::vec_dot_fn(ty).expect("K-quants have a reference dot product");
    move |n: usize, w: &[u8], act: &[u8]| f(n, w, &act[..n / 256 * Q8K])
}

/// SIMD tiers this CPU runs (printing the ones skipped).
fn simd_tiers() -> Vec<&'static KernelSet> {
    let mut v = Vec::new();
    for t in Tier::ALL.into_iter().filter(|t| *t != Tier::Scalar) {
        match KernelSet::for_tier(t) {
            Ok(k) => v.push(k),
            Err(e) => eprintln!("skipping tier {t}: {e}"),
        }
    }
    v
}

/// Q8_K activations of `count` random vectors of `n` elements, `stride` bytes apart (gap bytes 0xA5).
fn act_vectors(rng: &mut Rng, n: usize, count: usize, stride: usize) -> Vec<u8> {
    let ab = n / 256 * Q8K;
    let mut acts = vec![0xA5u8; stride * count.max(1)];
    for v in 0..count {
        quant::quantize_row(
            GgmlType::Q8_K,
            &activations(rng, n),
            &mut acts[v * stride..v * stride + ab],
        )
        .unwrap();
    }
    acts
}

/// Checks every packed kernel on one matrix of `ty` (`rows` x `n`, GGUF bytes `w`) against the
/// block-exact reference, for 1..=9 vectors; returns how many (tier, vector count) cases ran.
fn check_matrix(rng: &mut Rng, ty: GgmlType, w: &[u8], rows: usize, n: usize, what: &str) -> usize {
    let rb = quant::row_size(ty, n).unwrap();
    let mut packed = vec![0u8; w.len()];
    pack(ty, rows, n, w, &mut packed);
    let mut cases = 0;
    for count in [1usize, 2, 3, 4, 5, 8, 9] {
        let stride = n / 256 * Q8K + 64 * (count % 3); // also strides with a gap
        let acts = act_vectors(rng, n, count, stride);
        let want: Vec<f32> = (0..count)
            .flat_map(|v| (0..rows).map(move |r| (v, r)))
            .map(|(v, r)| exact(ty)(n, &w[r * rb..(r + 1) * rb], &acts[v * stride..]))
            .collect(); // [count, rows]
        for k in simd_tiers() {
            let Some(dot) = k.packed(ty) else {
                // The 256-bit tiers keep Q6_K unpacked (slower packed there; see x86/mod.rs).
                assert!(
                    ty == GgmlType::Q6_K && matches!(k.tier(), Tier::Avx2 | Tier::AvxVnni),
                    "tier {} must have a packed {ty} kernel",
                    k.tier()
                );
                continue;
            };
            let mut out = vec![f32::NAN; count * PACK_ROWS];
            for g in 0..rows / PACK_ROWS {
                dot(
                    n,
                    &packed[g * PACK_ROWS * rb..(g + 1) * PACK_ROWS * rb],
                    &acts,
                    stride,
                    &mut out,
                );
                for v in 0..count {
                    for r in 0..PACK_ROWS {
                        let (got, exp) =
                            (out[v * PACK_ROWS + r], want[v * rows + g * PACK_ROWS + r]);
                        assert_eq!(
                            got.to_bits(),
                            exp.to_bits(),
                            "{what}: tier {} {ty} n={n} vectors={count}: row {} vector {v}: {got} vs block-exact {exp}",
                            k.tier(),
                            g * PACK_ROWS + r
                        );
                    }
                }
            }
            cases += 1;
        }
    }
    cases
}

#[test]
fn packing_is_a_lossless_permutation() {
    let mut rng = Rng::new(11);
    let (rows, n) = (32, 768);
    for ty in TYPES {
        let bb = ty.type_size();
        let w: Vec<u8> = (0..rows).flat_map(|_| random_row(&mut rng, ty, n)).collect();
        let mut p = vec![0u8; w.len()];
        pack(ty, rows, n, &w, &mut p);
        let rb = n / 256 * bb;
        for g in 0..rows / PACK_ROWS {
            let group = &p[g * PACK_ROWS * rb..(g + 1) * PACK_ROWS * rb];
            for r in 0..PACK_ROWS {
                for b in 0..n / 256 {
                    let row = &w[(g * PACK_ROWS + r) * rb..];
                    let got = if ty == GgmlType::Q6_K {
                        unpack_block_q6_k(group, b, r).to_vec()
                    } else {
                        unpack_block(group, b, r).to_vec()
                    };
                    assert_eq!(
                        got[..],
                        row[b * bb..(b + 1) * bb],
                        "{ty} group {g} row {r} block {b}"
                    );
                }
            }
        }
        let (mut sorted_w, mut sorted_p) = (w.clone(), p.clone());
        sorted_w.sort_unstable();
        sorted_p.sort_unstable();
        assert_eq!(sorted_w, sorted_p, "{ty}: packing only moves bytes");
    }
    assert_eq!((PACKED_BLOCK, PACKED_BLOCK_Q6K), (PACK_ROWS * Q4K, PACK_ROWS * Q6K));
    assert!(
        packable(GgmlType::Q4_K, 32, 768)
            && !packable(GgmlType::Q4_K, 24, 768)
            && !packable(GgmlType::Q8_0, 32, 768)
    );
    assert!(packable(GgmlType::Q6_K, 32, 768) && !packable(GgmlType::Q6_K, 32, 700));
}

#[test]
fn every_simd_tier_k_quant_is_block_exact() {
    let mut rng = Rng::new(0xb10c);
    let eps = f32::EPSILON as f64;
    for ty in TYPES {
        let bb = ty.type_size();
        let mut worst = 0f64;
        for n in [256usize, 768, 1536, 4864, 8960] {
            for trial in 0..8 {
                let mut w = random_row(&mut rng, ty, n);
                if trial == 7 {
                    // Saturation corners: all-0xFF code bytes (the largest codes) and full-scale activations.
                    let codes = if ty == GgmlType::Q6_K { 0..192 } else { 16..bb };
                    for b in w.chunks_exact_mut(bb) {
                        b[codes.clone()].fill(0xFF);
                    }
                }
                let act = act_vectors(&mut rng, n, 1, n / 256 * Q8K);
                let want = exact(ty)(n, &w, &act);
                for k in simd_tiers() {
                    let got = (k.vec_dot(ty).unwrap())(n, &w, &act);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "tier {} {ty} n={n} trial {trial}: {got} vs block-exact {want}",
                        k.tier()
                    );
                    let mut b3 = [0f32; 3];
                    let acts3: Vec<u8> = (0..3).flat_map(|_| act.iter().copied()).collect();
                    (k.vec_dot_batch(ty).unwrap())(n, &w, &acts3, act.len(), &mut b3);
                    assert!(
                        b3.iter().all(|v| v.to_bits() == want.to_bits()),
                        "tier {} {ty} batch",
                        k.tier()
                    );
                }
                // The block-exact order against ggml's reference: within the reordering budget.
                let (reference, mag) = quant_support::reference_dot(ty, n, &w, &act);
                let budget = 2.0 * (n / 256 + 16) as f64 * eps * mag + f32::MIN_POSITIVE as f64;
                let err = (want as f64 - reference).abs();
                assert!(err <= budget, "{ty} n={n}: block-exact {want} vs reference {reference}: err {err:e} > {budget:e}");
                worst = worst.max(err / (eps * mag).max(f64::MIN_POSITIVE));
            }
        }
        eprintln!("block-exact {ty} vs f64 reference: worst err = {worst:.2} eps·Σ|wa|");
    }
}

#[test]
fn packed_kernels_are_block_exact_on_random_matrices() {
    let mut rng = Rng::new(0x9acc);
    let mut cases = 0;
    for ty in TYPES {
        for (rows, n) in [(16usize, 256usize), (32, 768), (48, 1536), (16, 8960)] {
            let w: Vec<u8> = (0..rows).flat_map(|_| random_row(&mut rng, ty, n)).collect();
            cases += check_matrix(&mut rng, ty, &w, rows, n, "random");
        }
    }
    eprintln!("packed kernels: {cases} (tier, matrix, vector count) cases bitwise block-exact");
}

/// The largest codes (every code byte 0xFF) against full-scale activations of one sign, so every
/// partial sum is as large as it gets: the AVX2 packed kernel sums eight `maddubs` lanes in i16
/// (at most 8 · 2 · 15 · 127 = 30480 < 32767) before weighting them; no lane may saturate.
#[test]
fn packed_kernels_are_block_exact_at_the_largest_sums() {
    let mut rng = Rng::new(0x5a7);
    let (ty, rows, n) = (GgmlType::Q4_K, 2 * PACK_ROWS, 1536);
    let mut w: Vec<u8> = (0..rows).flat_map(|_| random_row(&mut rng, ty, n)).collect();
    for b in w.chunks_exact_mut(Q4K) {
        b[16..].fill(0xFF);
    }
    let mut packed = vec![0u8; w.len()];
    pack(ty, rows, n, &w, &mut packed);
    let rb = Q4K * n / 256;
    let mut cases = 0;
    for sign in [1.0f32, -1.0] {
        for count in [1usize, 2, 3] {
            let ab = n / 256 * Q8K;
            let mut acts = vec![0u8; ab * count];
            for v in 0..count {
                let x: Vec<f32> =
                    (0..n).map(|i| sign * (1.0 + (i % 7 == 0) as u8 as f32 * 0.01)).collect();
                quant::quantize_row(GgmlType::Q8_K, &x, &mut acts[v * ab..(v + 1) * ab]).unwrap();
            }
            for k in simd_tiers() {
                let Some(dot) = k.packed(ty) else { continue };
                let mut out = vec![f32::NAN; count * PACK_ROWS];
                for g in 0..rows / PACK_ROWS {
                    dot(
                        n,
                        &packed[g * PACK_ROWS * rb..(g + 1) * PACK_ROWS * rb],
                        &acts,
                        ab,
                        &mut out,
                    );
                    for v in 0..count {
                        for r in 0..PACK_ROWS {
                            let row = g * PACK_ROWS + r;
                            let want = exact(ty)(n, &w[row * rb..(row + 1) * rb], &acts[v * ab..]);
                            let got = out[v * PACK_ROWS + r];
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "tier {} sign {sign} vectors {count}: row {row} vector {v}: {got} vs block-exact {want}",
                                k.tier()
                            );
                        }
                    }
                }
                cases += 1;
            }
        }
    }
    eprintln!("packed Q4_K at the largest sums: {cases} (tier, sign, vector count) cases");
}

#[test]
fn packed_kernels_are_block_exact_on_real_model_rows() {
    let mut rng = Rng::new(77);
    for model in ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        let Some(path) = common::model_path(model) else {
            continue;
        };
        let g = GgufFile::open(&path).unwrap();
        let mut done = [0usize; 2];
        for info in g.tensors() {
            let (n, rows) = (info.row_len(), info.n_rows());
            let i = TYPES.iter().position(|t| *t == info.ty).unwrap_or(0);
            if info.dims.len() != 2 || !packable(info.ty, rows, n) || done[i] == 3 {
                continue;
            }
            // The first 32 rows and a group from the middle.
            let rb = info.row_bytes();
            let data = g.data_of(info);
            let mid = rows / 2 / PACK_ROWS * PACK_ROWS;
            let mut w = data[..2 * PACK_ROWS * rb].to_vec();
            w.extend_from_slice(&data[mid * rb..(mid + PACK_ROWS) * rb]);
            let cases = check_matrix(
                &mut rng,
                info.ty,
                &w,
                3 * PACK_ROWS,
                n,
                &format!("{model} {}", info.name),
            );
            eprintln!(
                "{model} {} ({}, {rows}x{n}): {cases} cases bitwise block-exact",
                info.name, info.ty
            );
            done[i] += 1;
        }
        assert_eq!(done, [3, 3], "{model} has packable Q4_K and Q6_K matrices");
    }
}

#[test]
fn packed_kernels_refuse_bad_shapes() {
    let Some(dot) = simd_tiers().into_iter().find_map(|k| k.packed(GgmlType::Q4_K)) else {
        eprintln!("skipping: no packed kernel on this CPU");
        return;
    };
    let w = vec![0u8; PACKED_BLOCK];
    let acts = vec![0u8; Q8K];
    for (what, n, wl, al, ol) in [
        ("short weights", 256, PACKED_BLOCK - 1, Q8K, 16),
        ("short activations", 256, PACKED_BLOCK, Q8K - 1, 16),
        ("partial output", 256, PACKED_BLOCK, Q8K, 15),
        ("partial block", 255, PACKED_BLOCK, Q8K, 16),
    ] {
        let r = std::panic::catch_unwind(|| {
            let mut out = vec![0f32; ol];
            dot(n, &w[..wl], &acts[..al], Q8K, &mut out);
        });
        assert!(r.is_err(), "{what} must be refused, not read out of bounds");
    }
}
