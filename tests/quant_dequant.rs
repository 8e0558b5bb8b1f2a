//! Dequantization parity: our scalar references against gguf-py's independent numpy dequantizers
//! (fixtures of real model rows and synthetic rows), Q8_0 quantization byte-for-byte against gguf-py's
//! port of `quantize_row_q8_0_ref`, and a sweep over every tensor of the real models.

mod common;
mod quant_support;

use quant_support::*;
use turboinfer::gguf::GgufFile;
use turboinfer::quant::{self, GgmlType};

/// True when `a` and `b` agree bit-for-bit or within 1e-6 relative (NaN matches NaN).
fn close(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= 1e-6 * a.abs().max(b.abs())
}

/// Every fixture row dequantizes bit-identically to gguf-py's numpy dequantizer.
#[test]
fn dequantize_matches_numpy_fixtures() {
    let fixtures = load_fixtures("dequant");
    assert!(fixtures.len() >= 21, "expected the full fixture set, got {}", fixtures.len());
    let mut covered = std::collections::BTreeSet::new();
    for f in &fixtures {
        let row_bytes = f.ty.row_bytes(f.row_len as u64).unwrap() as usize;
        assert_eq!(f.raw.len(), row_bytes * f.rows, "{}", f.name);
        assert_eq!(f.values.len(), f.row_len * f.rows, "{}", f.name);
        let mut out = vec![0f32; f.row_len];
        let mut exact = 0usize;
        for r in 0..f.rows {
            quant::dequantize_row(f.ty, &f.raw[r * row_bytes..(r + 1) * row_bytes], &mut out)
                .unwrap_or_else(|e| panic!("{}: {e}", f.name));
            let want = &f.values[r * f.row_len..(r + 1) * f.row_len];
            for (i, (&a, &b)) in out.iter().zip(want).enumerate() {
                assert!(close(a, b), "{} row {r} element {i}: ours {a:e} numpy {b:e}", f.name);
                exact += (a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())) as usize;
            }
        }
        eprintln!("{}: {} elements, {} bit-exact", f.name, f.values.len(), exact);
        // The scalar reference does the same f32 operations in the same order as ggml/numpy
        // ((d*sc)*q - dmin*m etc.), so it is not merely close but bit-identical.
        assert_eq!(exact, f.values.len(), "{}: scalar reference should be bit-exact", f.name);
        covered.insert(f.ty.name());
    }
    for t in [
        "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K",
        "q5_K", "q6_K",
    ] {
        assert!(covered.contains(t), "no fixture for {t}");
    }
}

/// Dequantizing a multi-row buffer in one call equals dequantizing row by row (rows are independent).
#[test]
fn dequantize_multi_row_equals_per_row() {
    for f in load_fixtures("dequant") {
        let mut all = vec![0f32; f.row_len * f.rows];
        quant::dequantize_row(f.ty, &f.raw, &mut all).unwrap();
        for (a, b) in all.iter().zip(&f.values) {
            assert!(close(*a, *b), "{}", f.name);
        }
    }
}

/// Q8_0 activation quantization reproduces gguf-py's bit-exact port of `quantize_row_q8_0_ref`.
#[test]
fn q8_0_quantize_matches_gguf_py_bytes() {
    let fixtures = load_fixtures("quantize");
    assert!(!fixtures.is_empty());
    for f in fixtures {
        assert_eq!(f.ty, GgmlType::Q8_0);
        let mut out = vec![0u8; f.raw.len()];
        quant::quantize_row(f.ty, &f.values, &mut out).unwrap();
        let mismatches: Vec<usize> = (0..out.len()).filter(|&i| out[i] != f.raw[i]).collect();
        assert!(
            mismatches.is_empty(),
            "{}: {} bytes differ, first at {:?}",
            f.name,
            mismatches.len(),
            &mismatches[..mismatches.len().min(8)]
        );
    }
}

/// Every tensor of the real models dequantizes (all rows), gives finite values, and its first rows'
/// dot products agree with the dequantized dot.
#[test]
fn real_models_dequantize_every_tensor() {
    for model in ["smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] {
        let Some(path) = common::model_path(model) else { continue };
        let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{model}: {e}"));
        let mut rng = Rng::new(42);
        let mut counts = std::collections::BTreeMap::<&str, usize>::new();
        for info in file.tensors() {
            let data = file.data_of(info);
            let (row_len, n_rows, row_bytes) = (info.row_len(), info.n_rows(), info.row_bytes());
            assert_eq!(data.len(), row_bytes * n_rows, "{model}/{}", info.name);
            let mut row = vec![0f32; row_len];
            for r in 0..n_rows {
                quant::dequantize_row(info.ty, &data[r * row_bytes..(r + 1) * row_bytes], &mut row)
                    .unwrap_or_else(|e| panic!("{model}/{} row {r}: {e}", info.name));
                assert!(
                    row.iter().all(|v| v.is_finite()),
                    "{model}/{} row {r}: non-finite value",
                    info.name
                );
            }
            // Dot products on real rows: the integer kernels against the dequantized definition.
            let act_ty = quant::activation_type(info.ty);
            let x = activations(&mut rng, row_len);
            let mut act = vec![0u8; act_ty.row_bytes(row_len as u64).unwrap() as usize];
            quant::quantize_row(act_ty, &x, &mut act).unwrap();
            for r in 0..n_rows.min(4) {
                let w = &data[r * row_bytes..(r + 1) * row_bytes];
                let got = quant::vec_dot(info.ty, row_len, w, &act).unwrap() as f64;
                let (want, scale) = reference_dot(info.ty, row_len, w, &act);
                let tol = 1e-4 * scale + 1e-30;
                assert!(
                    (got - want).abs() <= tol,
                    "{model}/{} row {r}: vec_dot {got} vs {want}",
                    info.name
                );
            }
            *counts.entry(info.ty.name()).or_default() += 1;
        }
        eprintln!("{model}: all tensors dequantized: {counts:?}");
    }
}
