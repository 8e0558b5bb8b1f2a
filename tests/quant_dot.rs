//! Dot-product tests for every weight type:
//! 1. tight: `vec_dot(w, act)` equals the f64 dot of the dequantized row and dequantized activations
//!    (the integer kernels are exact; only f32 scale products and block summation round) within
//!    1e-4 · Σ|w_i·â_i|;
//! 2. budget: `vec_dot(w, quantize_row(x))` against the exact f64 `Σ w_i·x_i` stays within a rigorous
//!    per-type bound on activation-quantization error (see `activation_error_bound`), and the observed
//!    error is of the size the rounding model predicts.
//!
//! Sizes cover one block, several blocks, odd block counts, model row lengths, and many rows.

mod quant_support;

use quant_support::*;
use turboinfer::quant::{self, GgmlType};

/// Weight types with a dot product, and the row lengths tested for each (whole blocks).
fn cases() -> Vec<(GgmlType, Vec<usize>)> {
    use GgmlType::*;
    let legacy = vec![32, 64, 96, 224, 576, 896, 1536, 4864];
    let kquant = vec![256, 512, 768, 1536, 4864, 8960];
    let float = vec![1, 7, 8, 9, 31, 33, 576, 1000];
    vec![
        (F32, float.clone()),
        (F16, float.clone()),
        (BF16, float),
        (Q4_0, legacy.clone()),
        (Q4_1, legacy.clone()),
        (Q5_0, legacy.clone()),
        (Q5_1, legacy.clone()),
        (Q8_0, legacy),
        (Q2_K, kquant.clone()),
        (Q3_K, kquant.clone()),
        (Q4_K, kquant.clone()),
        (Q5_K, kquant.clone()),
        (Q6_K, kquant),
    ]
}

/// Quantizes `x` into the activation format of `weight`.
fn quantize_act(weight: GgmlType, x: &[f32]) -> Vec<u8> {
    let t = quant::activation_type(weight);
    let mut act = vec![0u8; t.row_bytes(x.len() as u64).unwrap() as usize];
    quant::quantize_row(t, x, &mut act).unwrap();
    act
}

/// Weight → activation pairings are ggml's `vec_dot_type`s, and every listed type has its functions.
#[test]
fn activation_types_are_ggmls_vec_dot_types() {
    use GgmlType::*;
    for (w, a) in [
        (Q4_0, Q8_0),
        (Q5_0, Q8_0),
        (Q8_0, Q8_0),
        (Q4_1, Q8_1),
        (Q5_1, Q8_1),
        (Q2_K, Q8_K),
        (Q3_K, Q8_K),
        (Q4_K, Q8_K),
        (Q5_K, Q8_K),
        (Q6_K, Q8_K),
        (F32, F32),
        (F16, F32),
        (BF16, F32),
    ] {
        assert_eq!(quant::activation_type(w), a, "{w}");
        assert!(quant::vec_dot_fn(w).is_some(), "{w}");
        assert!(quant::dequantize_row_fn(w).is_some(), "{w}");
    }
    for a in [Q8_0, Q8_1, Q8_K, F32] {
        assert!(quant::quantize_row_fn(a).is_some(), "{a}");
        assert!(quant::dequantize_row_fn(a).is_some(), "{a}");
    }
}

/// Integer kernels equal the dequantized definition on random rows of many lengths (tight).
#[test]
fn vec_dot_equals_dequantized_dot_random_rows() {
    let mut rng = Rng::new(1);
    for (ty, sizes) in cases() {
        let f = quant::vec_dot_fn(ty).unwrap();
        let mut worst = 0f64;
        for &n in &sizes {
            let x = activations(&mut rng, n);
            let act = quantize_act(ty, &x);
            // Many rows against the same activations, as in a matrix-vector product.
            for _ in 0..8 {
                let w = random_row(&mut rng, ty, n);
                let got = quant::vec_dot(ty, n, &w, &act).unwrap();
                assert_eq!(
                    got.to_bits(),
                    f(n, &w, &act).to_bits(),
                    "{ty}: checked and unchecked entry points differ"
                );
                let (want, scale) = reference_dot(ty, n, &w, &act);
                let err = (got as f64 - want).abs() / scale.max(1e-30);
                assert!(
                    err <= 1e-4,
                    "{ty} n={n}: vec_dot {got} vs dequantized {want} (rel {err:e})"
                );
                worst = worst.max(err);
            }
        }
        eprintln!("{ty}: worst |vec_dot - dequantized dot| / Σ|w·a| = {worst:.2e}");
    }
}

/// Worst-case activation-quantization error of `Σ w_i·x_i` when `x` is replaced by its quantized form
/// `act` (format `activation_type(weight)`), given the dequantized weights `wf`:
/// * Q8_0 / Q8_1 (32-blocks, f16 scale): each element is rounded to the nearest multiple of the
///   unrounded `d_b = amax_b/127` (error ≤ d_b/2), then reconstructed with `f16(d_b)` (extra error
///   ≤ 127·|f16(d_b) − d_b|), so `|x̂_i − x_i| ≤ ε_b = d_b/2 + 127·|f16(d_b) − d_b|`; bound `Σ|w_i|·ε_b`.
///   In relative terms ε_b ≤ amax_b·(1/254 + 1/2048): ≈ 0.44% of the block's largest activation.
/// * Q8_1 additionally: Q4_1/Q5_1 apply their block offset `m_b` to the stored sum `s_b` (f16 of
///   `d_b·Σq`), not to `Σ x̂_i`; that adds `|m_b|·|s_b − f16(d_b)·Σq_b|` per block.
/// * Q8_K (256-blocks, f32 scale `amax_b/127`, round-to-nearest-even): `ε_b = d_b/2` ≈ 0.39% of the
///   super-block's largest activation; with 256-wide blocks an outlier raises ε for 8× more elements
///   than in Q8_0, which is why K-quant dots are measurably noisier on outlier-heavy activations.
/// * F32: no quantization.
///
/// Plus float slack `1e-5·Σ|w_i·x_i|` for the kernel's f32 arithmetic (measured ≤ ~1e-6 in the tight test).
fn activation_error_bound(weight: GgmlType, w: &[u8], wf: &[f32], x: &[f32], act: &[u8]) -> f64 {
    let act_ty = quant::activation_type(weight);
    let slack = 1e-5 * abs_dot_f64(wf, x);
    let bs = act_ty.block_size();
    let mut bound = 0f64;
    if act_ty == GgmlType::F32 {
        return slack;
    }
    for (b, (xb, wb)) in x.chunks(bs).zip(wf.chunks(bs)).enumerate() {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let eps = match act_ty {
            GgmlType::Q8_K => d as f64 / 2.0 * (1.0 + 1e-6),
            _ => d as f64 / 2.0 + 127.0 * (half::f16::from_f32(d).to_f32() as f64 - d as f64).abs(),
        };
        bound += eps * wb.iter().map(|v| v.abs() as f64).sum::<f64>();
        if act_ty == GgmlType::Q8_1 {
            let f16 = |b: &[u8]| half::f16::from_le_bytes([b[0], b[1]]).to_f32() as f64;
            let ab = &act[b * act_ty.type_size()..(b + 1) * act_ty.type_size()];
            let m = f16(&w[b * weight.type_size() + 2..]);
            let sum_q: i32 = ab[4..].iter().map(|&q| q as i8 as i32).sum();
            bound += m.abs() * (f16(&ab[2..4]) - f16(&ab[0..2]) * sum_q as f64).abs();
        }
    }
    bound + slack
}

/// RMS activation-quantization error expected from uniform rounding noise (variance d_b²/12 per element).
fn expected_rms(act_ty: GgmlType, wf: &[f32], x: &[f32]) -> f64 {
    if act_ty == GgmlType::F32 {
        return 0.0;
    }
    let bs = act_ty.block_size();
    let mut var = 0f64;
    for (xb, wb) in x.chunks(bs).zip(wf.chunks(bs)) {
        let d = xb.iter().fold(0f32, |m, v| m.max(v.abs())) as f64 / 127.0;
        var += d * d / 12.0 * wb.iter().map(|&v| v as f64 * v as f64).sum::<f64>();
    }
    var.sqrt()
}

/// Checks one weight row against the exact dot with unquantized activations; returns (err/Σ|wx|, err/rms).
fn check_budget(ty: GgmlType, n: usize, w: &[u8], x: &[f32]) -> (f64, f64) {
    let act = quantize_act(ty, x);
    let mut wf = vec![0f32; n];
    quant::dequantize_row(ty, w, &mut wf).unwrap();
    let got = quant::vec_dot(ty, n, w, &act).unwrap() as f64;
    let exact = dot_f64(&wf, x);
    let err = (got - exact).abs();
    let bound = activation_error_bound(ty, w, &wf, x, &act);
    assert!(
        err <= bound,
        "{ty} n={n}: |vec_dot − exact| = {err:e} exceeds budget {bound:e} (exact {exact})"
    );
    let rms = expected_rms(quant::activation_type(ty), &wf, x);
    (err / abs_dot_f64(&wf, x).max(1e-30), if rms > 0.0 { err / rms } else { 0.0 })
}

/// Against unquantized activations, random rows stay within the per-type budget and the rounding-noise model.
#[test]
fn activation_quantization_error_within_budget_random_rows() {
    let mut rng = Rng::new(2);
    for (ty, sizes) in cases() {
        let (mut worst_rel, mut sum_sq, mut count) = (0f64, 0f64, 0usize);
        for &n in &sizes {
            for _ in 0..8 {
                let w = random_row(&mut rng, ty, n);
                let x = activations(&mut rng, n);
                let (rel, z) = check_budget(ty, n, &w, &x);
                worst_rel = worst_rel.max(rel);
                sum_sq += z * z;
                count += 1;
            }
        }
        let rms_ratio = (sum_sq / count as f64).sqrt();
        eprintln!("{ty}: worst err/Σ|wx| = {worst_rel:.2e}, observed/predicted RMS error = {rms_ratio:.2}");
        // Rounding to nearest gives errors of about the predicted size (ratio ≈ 1); a biased or
        // too-coarse quantizer (e.g. truncation, wrong scale) would push this well above 1.
        assert!(
            rms_ratio <= 2.0,
            "{ty}: errors {rms_ratio:.2}× larger than rounding noise predicts"
        );
    }
}

/// Real model rows: tight agreement with the dequantized dot, and within the activation budget.
#[test]
fn activation_quantization_error_within_budget_real_rows() {
    // Real weight rows from the three models (via the committed fixtures), several activation draws each.
    let mut rng = Rng::new(3);
    for f in load_fixtures("dequant") {
        if quant::vec_dot_fn(f.ty).is_none() {
            continue;
        }
        let row_bytes = f.ty.row_bytes(f.row_len as u64).unwrap() as usize;
        let mut worst = 0f64;
        for r in 0..f.rows {
            let w = &f.raw[r * row_bytes..(r + 1) * row_bytes];
            // Rows holding inf/nan (the synthetic f16/bf16 specials) have no finite dot to compare.
            if f.values[r * f.row_len..(r + 1) * f.row_len].iter().any(|v| !v.is_finite()) {
                continue;
            }
            for _ in 0..4 {
                let x = activations(&mut rng, f.row_len);
                let act = quantize_act(f.ty, &x);
                let got = quant::vec_dot(f.ty, f.row_len, w, &act).unwrap() as f64;
                let (want, scale) = reference_dot(f.ty, f.row_len, w, &act);
                assert!((got - want).abs() <= 1e-4 * scale + 1e-30, "{}: tight", f.name);
                worst = worst.max(check_budget(f.ty, f.row_len, w, &x).0);
            }
        }
        eprintln!("{}: worst err/Σ|wx| = {worst:.2e}", f.name);
    }
}

/// Sub-row slices (1 block, 3 blocks, …) of real rows: the kernels must not depend on the row length.
#[test]
fn vec_dot_on_block_prefixes_of_real_rows() {
    let mut rng = Rng::new(4);
    for f in load_fixtures("dequant") {
        let Some(dot) = quant::vec_dot_fn(f.ty) else { continue };
        let bs = f.ty.block_size();
        let blocks = f.row_len / bs;
        for k in [1, 2, 3, 5, blocks] {
            if k > blocks || k * bs > 8960 {
                continue;
            }
            let n = k * bs;
            let w = &f.raw[..f.ty.row_bytes(n as u64).unwrap() as usize];
            if f.values[..n].iter().any(|v| !v.is_finite()) {
                continue;
            }
            let act = quantize_act(f.ty, &activations(&mut rng, n));
            let got = dot(n, w, &act) as f64;
            let (want, scale) = reference_dot(f.ty, n, w, &act);
            assert!(
                (got - want).abs() <= 1e-4 * scale + 1e-30,
                "{} first {k} blocks: {got} vs {want}",
                f.name
            );
        }
    }
}

/// A zero activation vector gives exactly zero for every type (no offset leaks through `s`/`bsums`).
#[test]
fn zero_activations_give_zero() {
    let mut rng = Rng::new(5);
    for (ty, sizes) in cases() {
        let n = sizes[sizes.len() / 2];
        let w = random_row(&mut rng, ty, n);
        let act = quantize_act(ty, &vec![0f32; n]);
        assert_eq!(quant::vec_dot(ty, n, &w, &act).unwrap(), 0.0, "{ty}");
    }
}
