//! Parity with ggml's own C reference code (llama.cpp b11434), recorded by tools/gen_quant_fixtures.py
//! --ggml-src into tests/fixtures/quant/ggml.json: our Q8_0/Q8_1/Q8_K quantizers must reproduce
//! `quantize_row_q8_*_ref` byte-for-byte, and our dot products must agree with
//! `ggml_vec_dot_*_generic` on real and synthetic weight rows to the rounding of their float sums:
//! the integer block sums are the same exact numbers, only the order in which the per-block float
//! terms are added differs (ours is the numeric contract's, `quant::contract`, the same on every CPU;
//! ggml's generic order is one of its several, one per instruction set).

mod quant_support;

use quant_support::*;
use turboinfer::quant;

/// The parsed ggml.json.
fn ggml_manifest() -> serde_json::Value {
    let path = quant_fixtures_dir().join("ggml.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("ggml.json parses")
}

/// Q8_0/Q8_1/Q8_K quantizers reproduce ggml's `quantize_row_q8_*_ref` byte-for-byte on adversarial input.
#[test]
fn activation_quantizers_match_ggml_bytes() {
    let m = ggml_manifest();
    let dir = quant_fixtures_dir();
    let entries = m["quantize"].as_array().expect("quantize entries");
    assert_eq!(entries.len(), 3, "Q8_0, Q8_1 and Q8_K");
    for e in entries {
        let ty = type_by_name(e["type"].as_str().unwrap());
        let (n, rows) =
            (e["row_len"].as_u64().unwrap() as usize, e["rows"].as_u64().unwrap() as usize);
        let x = read_f32s(&dir.join(e["f32"].as_str().unwrap()));
        let want = std::fs::read(dir.join(e["raw"].as_str().unwrap())).unwrap();
        let rb = ty.row_bytes(n as u64).unwrap() as usize;
        assert_eq!((x.len(), want.len()), (n * rows, rb * rows));
        for r in 0..rows {
            let mut got = vec![0u8; rb];
            quant::quantize_row(ty, &x[r * n..(r + 1) * n], &mut got).unwrap();
            let w = &want[r * rb..(r + 1) * rb];
            let diff: Vec<usize> = (0..rb).filter(|&i| got[i] != w[i]).collect();
            assert!(
                diff.is_empty(),
                "{ty} row {r}: {} bytes differ from ggml, first at {:?}",
                diff.len(),
                &diff[..diff.len().min(8)]
            );
        }
    }
}

/// Our dot products equal ggml's generic kernels up to the reordering of their per-block float terms
/// (`(blocks + 16) · eps · Σ|w·a|`, and in practice far less: the worst is printed).
#[test]
fn vec_dot_matches_ggml_generic_kernels() {
    let m = ggml_manifest();
    let fixtures = load_fixtures("dequant");
    let entries = m["vec_dot"].as_array().expect("vec_dot entries");
    let mut covered = std::collections::BTreeSet::new();
    let (mut exact, mut total, mut worst) = (0, 0, 0f64);
    for e in entries {
        let name = e["weights"].as_str().unwrap();
        let f =
            fixtures.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no fixture {name}"));
        let act_ty = quant::activation_type(f.ty);
        assert_eq!(act_ty.name(), e["act_type"].as_str().unwrap(), "{name}");
        let n = f.row_len;
        // Same activations as the generator, quantized by us: must be ggml's bytes (checked via their sum;
        // the quantizers themselves are compared byte-for-byte above).
        let x = det_activations(e["seed"].as_u64().unwrap(), n);
        let mut act = vec![0u8; act_ty.row_bytes(n as u64).unwrap() as usize];
        quant::quantize_row(act_ty, &x, &mut act).unwrap();
        let sum: u64 = act.iter().map(|&b| b as u64).sum();
        assert_eq!(
            sum,
            e["act_sum_bytes"].as_u64().unwrap(),
            "{name}: activations differ from the generator's"
        );
        let rb = f.ty.row_bytes(n as u64).unwrap() as usize;
        for (r, want) in e["results"].as_array().unwrap().iter().enumerate() {
            let want = want.as_f64().unwrap() as f32;
            let w = &f.raw[r * rb..(r + 1) * rb];
            let got = quant::vec_dot(f.ty, n, w, &act).unwrap();
            let (_, scale) = reference_dot(f.ty, n, w, &act);
            // Same integer sums; the float terms (one or two per block) are added in another
            // order, which moves the result by at most a few roundings of the sum's magnitude.
            let terms = (n / f.ty.block_size()) as f64;
            let budget =
                2.0 * (terms + 16.0) * f32::EPSILON as f64 * scale + f32::MIN_POSITIVE as f64;
            let err = (got as f64 - want as f64).abs();
            assert!(
                err <= budget,
                "{name} row {r}: ours {got:e} ggml {want:e}, err {err:e} > {budget:e} (Σ|w·a| = {scale:e})"
            );
            if scale > 0.0 {
                worst = worst.max(err / (f32::EPSILON as f64 * scale));
            }
            exact += (got.to_bits() == want.to_bits()) as usize;
            total += 1;
        }
        covered.insert(f.ty.name());
    }
    eprintln!(
        "vec_dot vs ggml generic: {exact}/{total} bit-identical, worst err {worst:.2} eps·Σ|w·a|"
    );
    for t in ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"] {
        assert!(covered.contains(t), "no ggml vec_dot fixture for {t}");
    }
}
