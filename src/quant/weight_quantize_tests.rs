//! The weight quantizers (`q4_0::quantize`, `q2_k::quantize`): round-trip error bounds on random and
//! edge-case rows, determinism, and the exact bytes of hand-checked blocks. Byte identity with
//! llama.cpp is measured outside CI (`benches/quantize-vs-llamacpp.sh`).

use super::bytes::f16_at;
use super::{dequantize_row, quantize_weights, GgmlType, QuantError, QK, QK_K};

/// A deterministic xorshift stream of f32 in [-1, 1) (no `rand` dependency).
fn random_row(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.max(1);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // The top 24 bits: exactly representable in f32.
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Quantizes `x` to `ty`, dequantizes it back.
fn round_trip(ty: GgmlType, x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut q = vec![0u8; super::row_size(ty, x.len()).unwrap()];
    quantize_weights(ty, x, &mut q).unwrap();
    let mut y = vec![0f32; x.len()];
    dequantize_row(ty, &q, &mut y).unwrap();
    (q, y)
}

/// Q4_0 error bound per block: one step `|d|` (half a step from the round to nearest, but a value
/// of the sign opposite to the maximum beyond 7.5 steps is clamped to code 15, up to a full step
/// off), plus the block maximum's share of the f16 rounding of `d` (8 steps of at most 2^-11
/// relative error each), plus slack.
fn q4_0_bound(block: &[f32]) -> f32 {
    let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 8.0;
    d + amax * (8.0 / 2048.0) + 1e-6
}

#[test]
fn q4_0_round_trip_error_is_bounded() {
    let mut rows = vec![
        random_row(4 * QK, 1),
        random_row(4 * QK, 2).iter().map(|v| v * 1e-3).collect(),
        vec![0.0; QK],
        vec![0.75; QK],
        vec![-3.0; QK],
    ];
    // One large outlier among small values, and a row whose largest magnitude is negative.
    let mut outlier = random_row(QK, 3).iter().map(|v| v * 0.01).collect::<Vec<_>>();
    outlier[17] = 40.0;
    rows.push(outlier);
    let mut neg = random_row(QK, 4);
    neg[5] = -2.5;
    rows.push(neg);
    for (r, x) in rows.iter().enumerate() {
        let (_, y) = round_trip(GgmlType::Q4_0, x);
        for (b, (xb, yb)) in x.chunks(QK).zip(y.chunks(QK)).enumerate() {
            let bound = q4_0_bound(xb);
            for (i, (a, c)) in xb.iter().zip(yb).enumerate() {
                assert!(
                    (a - c).abs() <= bound,
                    "row {r} block {b} [{i}]: {a} -> {c}, bound {bound}"
                );
            }
        }
    }
}

#[test]
fn q4_0_edge_cases_are_exact_where_they_must_be() {
    // All zeros: d = 0 / -8 = -0.0 (f16 0x8000, as ggml stores it), every code the midpoint 8,
    // everything decodes to 0.
    let (q, y) = round_trip(GgmlType::Q4_0, &[0.0; QK]);
    assert_eq!(&q[..2], &[0x00, 0x80]);
    assert!(q[2..].iter().all(|&b| b == 0x88));
    assert!(y.iter().all(|&v| v == 0.0));
    // The largest magnitude keeps its sign and is code 0 (exact when f16 holds max/8 exactly).
    let mut x = [0.0f32; QK];
    x[3] = -2.0;
    x[20] = 1.0;
    let (q, y) = round_trip(GgmlType::Q4_0, &x);
    assert_eq!(f16_at(&q), 0.25);
    assert_eq!((y[3], y[20]), (-2.0, 1.0));
    // A constant positive row: max = c, d = -c/8, every code 0 and exact.
    let (q, y) = round_trip(GgmlType::Q4_0, &[0.5; QK]);
    assert!(q[2..].iter().all(|&b| b == 0x00));
    assert!(y.iter().all(|&v| v == 0.5));
    // Exactly -max would round to code 16: clamped to 15, decoding to -7/8 of max.
    let mut x = [0.0f32; QK];
    x[0] = 8.0;
    x[1] = -8.0;
    let (q, y) = round_trip(GgmlType::Q4_0, &x);
    assert_eq!(q[2 + 1] & 0x0F, 15);
    assert_eq!((y[0], y[1]), (8.0, -7.0));
}

/// A hand-checked block: x[j] = j - 16 for j < 32, so max = -16 (first of the largest magnitudes,
/// element 0), d = 2, id = 0.5; element j has code trunc((j - 16)/2 + 8.5) = trunc(j/2 + 0.5), the
/// low nibble of byte j for j < 16 and the high nibble of byte j - 16 above.
#[test]
fn q4_0_layout_hand_checked() {
    let x: Vec<f32> = (0..QK).map(|j| j as f32 - 16.0).collect();
    let (q, _) = round_trip(GgmlType::Q4_0, &x);
    // f16 2.0 = 0x4000.
    assert_eq!(&q[..2], &[0x00, 0x40]);
    for j in 0..16 {
        let lo = ((j as f32 / 2.0 + 0.5) as u8).min(15);
        let hi = (((j + 16) as f32 / 2.0 + 0.5) as u8).min(15);
        assert_eq!(q[2 + j], lo | (hi << 4), "byte {j}");
    }
    // Spot values: element 0 code 0 (the max), element 31 would be 16, clamped to 15.
    assert_eq!(q[2] & 0x0F, 0);
    assert_eq!(q[2 + 15] >> 4, 15);
}

/// Q2_K error bound per 16-element sub-block: a 3-step grid over the sub-block's range (min with
/// 0) rounded to nearest is within half a step; the 4-bit quantized scale and min and the least
/// squares refit can shift that, so the bound checked is a full step of the range plus the
/// super-block's 4-bit scale rounding (1/30 of the largest range in the super-block), plus the f16
/// rounding of `d` and `dmin` (2^-11 relative, of at most 15 steps: 2^-10 of the largest magnitude).
fn q2_k_bound(sub: &[f32], superblock: &[f32]) -> f32 {
    let range = |s: &[f32]| {
        let lo = s.iter().fold(0f32, |m, &v| m.min(v));
        let hi = s.iter().fold(f32::MIN, |m, &v| m.max(v));
        hi - lo
    };
    let widest = superblock.chunks(16).map(range).fold(0f32, f32::max);
    let amax = superblock.iter().fold(0f32, |m, v| m.max(v.abs()));
    range(sub) / 3.0 + widest / 30.0 * 3.0 + amax / 1024.0 + 1e-6
}

#[test]
fn q2_k_round_trip_error_is_bounded() {
    let mut rows = vec![
        random_row(2 * QK_K, 5),
        random_row(QK_K, 6).iter().map(|v| v * 1e-2).collect(),
        vec![0.0; QK_K],
        vec![0.25; QK_K],
        vec![-1.5; QK_K],
    ];
    let mut outlier = random_row(QK_K, 7).iter().map(|v| v * 0.01).collect::<Vec<_>>();
    outlier[100] = 25.0;
    rows.push(outlier);
    let mut neg = random_row(QK_K, 8);
    neg[200] = -6.0;
    rows.push(neg);
    for (r, x) in rows.iter().enumerate() {
        let (_, y) = round_trip(GgmlType::Q2_K, x);
        for (xs, ys) in x.chunks(QK_K).zip(y.chunks(QK_K)) {
            for (g, (xg, yg)) in xs.chunks(16).zip(ys.chunks(16)).enumerate() {
                let bound = q2_k_bound(xg, xs);
                for (a, c) in xg.iter().zip(yg) {
                    assert!((a - c).abs() <= bound, "row {r} group {g}: {a} -> {c}, bound {bound}");
                }
            }
        }
        // And on average far better than the bound: under a quarter of the mean range step.
        let rms =
            (x.iter().zip(&y).map(|(a, c)| (a - c) * (a - c)).sum::<f32>() / x.len() as f32).sqrt();
        let scale = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(rms <= scale / 3.0 + 1e-6, "row {r}: rms {rms}, max {scale}");
    }
}

#[test]
fn q2_k_edge_cases() {
    // All zeros: every scale, min and code 0; decodes to zeros.
    let (q, y) = round_trip(GgmlType::Q2_K, &[0.0; QK_K]);
    assert!(q.iter().all(|&b| b == 0));
    assert!(y.iter().all(|&v| v == 0.0));
    // A constant negative row: each sub-block is max == min, scale 0 and min 1.5, so only the
    // min is stored: scale nibbles 0, min nibbles 15, dmin = f16(1.5/15), every value -15·dmin.
    let (q, y) = round_trip(GgmlType::Q2_K, &[-1.5; QK_K]);
    assert!(q[..16].iter().all(|&b| b == 0xF0));
    assert_eq!(f16_at(&q[80..82]), 0.0);
    let dmin = f16_at(&q[82..84]);
    assert_eq!(dmin, half::f16::from_f32(0.1).to_f32());
    assert!(y.iter().all(|&v| v == -15.0 * dmin));
    // A constant positive row: min 0 (the offset only subtracts); the grid 0..3 over [0, c] puts
    // c on code 3 and the least squares refit keeps it there: 15·d·3 within f16 of c.
    let (q, y) = round_trip(GgmlType::Q2_K, &[0.75; QK_K]);
    assert_eq!(f16_at(&q[82..84]), 0.0);
    assert!(y.iter().all(|&v| (v - 0.75).abs() <= 0.75 / 1024.0), "{}", y[0]);
}

/// A hand-checked super-block: sub-block g holds the codes 0,1,2,3 (four times) times s = 2^(g%4),
/// no negative values. Each fit is exact on its plain min/max grid (scale s, min 0: powers of two
/// keep every operation exact, so no search step beats error 0), so the mins and dmin are 0, the
/// 4-bit scales are round_half_even(15·s/8) = 2, 4, 8, 15 against d = f16(8/15), and the codes
/// recomputed against the stored scales (s·c over 0.9375·s, or exactly s) are still the originals.
#[test]
fn q2_k_layout_hand_checked() {
    let code = |e: usize| (e % 4) as u8;
    let s = |g: usize| (1u32 << (g % 4)) as f32;
    let x: Vec<f32> = (0..QK_K).map(|e| s(e / 16) * code(e) as f32).collect();
    let (q, _) = round_trip(GgmlType::Q2_K, &x);
    for g in 0..16 {
        assert_eq!(q[g], [2, 4, 8, 15][g % 4], "scale {g}");
    }
    assert_eq!(f16_at(&q[80..82]), half::f16::from_f32(8.0 / 15.0).to_f32());
    assert_eq!(f16_at(&q[82..84]), 0.0);
    // Byte 16 + 32h + e: elements 128h + e + 32k at bits 2k.
    for h in 0..2 {
        for e in 0..32 {
            let at = 128 * h + e;
            let b = code(at) | code(at + 32) << 2 | code(at + 64) << 4 | code(at + 96) << 6;
            assert_eq!(q[16 + 32 * h + e], b, "qs byte {}", 32 * h + e);
        }
    }
}

#[test]
fn quantizers_are_deterministic_and_checked() {
    for (ty, n) in [(GgmlType::Q4_0, 8 * QK), (GgmlType::Q2_K, 4 * QK_K)] {
        let x = random_row(n, 9);
        assert_eq!(round_trip(ty, &x).0, round_trip(ty, &x).0, "{ty}");
        let mut short = vec![0u8; 3];
        assert!(matches!(
            quantize_weights(ty, &x, &mut short),
            Err(QuantError::WrongLength { .. })
        ));
        assert!(matches!(
            quantize_weights(ty, &x[..n - 1], &mut short),
            Err(QuantError::NotBlockMultiple { .. })
        ));
    }
    assert!(matches!(
        quantize_weights(GgmlType::Q4_K, &[0.0; QK_K], &mut [0; 144]),
        Err(QuantError::Unsupported { .. })
    ));
}
