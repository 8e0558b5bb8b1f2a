//! Activation quantizers (Q8_0, Q8_1, Q8_K, F32): round-trip error bounds, format invariants
//! (Q8_1's `s`, Q8_K's `bsums` and exact ±127 for the largest element), all-zero input, huge and tiny
//! magnitudes, and non-finite input degrading without panics.

mod quant_support;

use quant_support::*;
use turboinfer::quant::{self, GgmlType};

/// Quantizes and dequantizes `x` through `ty`, returning (bytes, reconstruction).
fn round_trip(ty: GgmlType, x: &[f32]) -> (Vec<u8>, Vec<f32>) {
    let mut q = vec![0u8; ty.row_bytes(x.len() as u64).unwrap() as usize];
    quant::quantize_row(ty, x, &mut q).unwrap();
    let mut y = vec![0f32; x.len()];
    quant::dequantize_row(ty, &q, &mut y).unwrap();
    (q, y)
}

/// Reads an f16 field.
fn f16_at(b: &[u8]) -> f32 {
    half::f16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// Checks the per-element round-trip bound of `ty` on `x`: the element is rounded to the nearest
/// multiple of the block scale `d = amax/127`, so |x − x̂| ≤ d/2; for the f16-scaled formats
/// (Q8_0/Q8_1) reconstruction uses f16(d), adding up to 127·|f16(d) − d|. Returns the worst error / d.
fn check_round_trip(ty: GgmlType, x: &[f32]) -> f64 {
    let (q, y) = round_trip(ty, x);
    let bs = ty.block_size();
    let mut worst = 0f64;
    for (b, (xb, yb)) in x.chunks(bs).zip(y.chunks(bs)).enumerate() {
        let blk = &q[b * ty.type_size()..(b + 1) * ty.type_size()];
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax as f64 / 127.0;
        let (stored_d, qs): (f64, &[u8]) = match ty {
            GgmlType::Q8_0 => (f16_at(blk) as f64, &blk[2..]),
            GgmlType::Q8_1 => (f16_at(blk) as f64, &blk[4..]),
            GgmlType::Q8_K => {
                (f32::from_le_bytes(blk[0..4].try_into().unwrap()) as f64, &blk[4..260])
            }
            _ => unreachable!(),
        };
        // Float slack: 1e-6·d for the f32 products x·(1/d) and q·d.
        let bound = d / 2.0 + 127.0 * (stored_d - d).abs() + 1e-6 * d;
        for (i, (&a, &r)) in xb.iter().zip(yb).enumerate() {
            let err = (a as f64 - r as f64).abs();
            assert!(
                err <= bound,
                "{ty} block {b} elem {i}: x={a:e} x̂={r:e} err={err:e} > {bound:e} (d={d:e})"
            );
            if d > 0.0 {
                worst = worst.max(err / d);
            }
        }
        if amax > 0.0 {
            // The largest-magnitude element uses the full code range.
            let imax = xb.iter().position(|v| v.abs() == amax).unwrap();
            let code = qs[imax] as i8;
            assert_eq!(code.unsigned_abs(), 127, "{ty} block {b}: largest element got code {code}");
        } else {
            assert!(
                blk.iter().all(|&v| v == 0),
                "{ty} block {b}: all-zero input must give an all-zero block"
            );
        }
        match ty {
            GgmlType::Q8_1 => {
                // s = f16(d·Σq) with the unrounded f32 d (ggml's quantize_row_q8_1_ref).
                let sum: i32 = qs.iter().map(|&v| v as i8 as i32).sum();
                let d32 = amax / 127.0;
                assert_eq!(
                    f16_at(&blk[2..4]).to_bits(),
                    half::f16::from_f32(sum as f32 * d32).to_f32().to_bits(),
                    "{ty} block {b}: s"
                );
            }
            GgmlType::Q8_K => {
                for g in 0..16 {
                    let sum: i32 = qs[16 * g..16 * g + 16].iter().map(|&v| v as i8 as i32).sum();
                    let stored = i16::from_le_bytes([blk[260 + 2 * g], blk[261 + 2 * g]]) as i32;
                    assert_eq!(stored, sum, "{ty} block {b}: bsums[{g}]");
                }
                // The element equal to the signed max maps to exactly -127 (iscale = -127/max).
                if amax > 0.0 {
                    let imax = xb.iter().position(|v| v.abs() == amax).unwrap();
                    assert_eq!(qs[imax] as i8, -127, "{ty} block {b}: max element code");
                }
            }
            _ => {}
        }
    }
    worst
}

/// LLM-like activations round-trip within the per-element bound, with the format invariants intact.
#[test]
fn round_trip_random_activations() {
    let mut rng = Rng::new(10);
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let mut worst = 0f64;
        for n in [256, 512, 1792, 1536, 4864] {
            let x = activations(&mut rng, n);
            worst = worst.max(check_round_trip(ty, &x));
        }
        eprintln!("{ty}: worst |x − x̂| = {worst:.4}·d");
    }
}

/// All-zero input gives all-zero blocks (scale 0, no NaN from 0/0).
#[test]
fn round_trip_all_zero() {
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let (q, y) = round_trip(ty, &[0f32; 512]);
        assert!(q.iter().all(|&b| b == 0), "{ty}");
        assert!(y.iter().all(|&v| v == 0.0), "{ty}");
        check_round_trip(ty, &[0f32; 512]);
    }
}

/// Extreme magnitudes stay within the bound (Q8_K: f32 scale; Q8_0/Q8_1: within f16 range).
#[test]
fn round_trip_huge_and_tiny_values() {
    let mut rng = Rng::new(11);
    let base: Vec<f32> = (0..512).map(|_| rng.normal()).collect();
    // Q8_K keeps an f32 scale: any finite magnitude up to ~f32::MAX/127·127 round-trips within d/2.
    for s in [1e30f32, 1e20, 1e-20, 1e-30, 1e-35] {
        let x: Vec<f32> = base.iter().map(|v| v * s).collect();
        check_round_trip(GgmlType::Q8_K, &x);
    }
    // Q8_0/Q8_1 keep an f16 scale, finite up to 65504: block maxima up to 127·65504 ≈ 8.3e6 are
    // representable. Tiny maxima push d into f16 subnormals/zero; the bound (d/2 + 127·|f16(d) − d|)
    // still holds, i.e. the values degrade to zero rather than to garbage.
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1] {
        for s in [2e6f32, 1e4, 1e-3, 1e-6, 1e-9, 1e-30] {
            let x: Vec<f32> = base.iter().map(|v| v * s).collect();
            check_round_trip(ty, &x);
        }
    }
    // Mixed: a huge outlier next to tiny values in the same block.
    let mut x = vec![1e-4f32; 256];
    x[17] = -3e5;
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        check_round_trip(ty, &x);
    }
}

/// Values exactly halfway between codes: Q8_0/Q8_1 round half away from zero (`roundf`), Q8_K half to
/// even (`nearest_int`) — the two ggml reference rules.
#[test]
fn rounding_ties_follow_ggml() {
    // Block max 127 → d = 1, so x = k + 0.5 lands exactly on a tie.
    let mut x = vec![0f32; 256];
    x[0] = 127.0;
    x[1] = 2.5;
    x[2] = -2.5;
    x[3] = 3.5;
    let (q, _) = round_trip(GgmlType::Q8_0, &x);
    assert_eq!([q[2 + 1] as i8, q[2 + 2] as i8, q[2 + 3] as i8], [3, -3, 4]);
    let (q, _) = round_trip(GgmlType::Q8_1, &x);
    assert_eq!([q[4 + 1] as i8, q[4 + 2] as i8, q[4 + 3] as i8], [3, -3, 4]);
    // Q8_K: iscale = -127/127 = -1, so codes are the negated values, ties to even.
    let (q, _) = round_trip(GgmlType::Q8_K, &x);
    assert_eq!([q[4] as i8, q[4 + 1] as i8, q[4 + 2] as i8, q[4 + 3] as i8], [-127, -2, 2, -4]);
}

/// NaN/inf/extreme input degrades without panicking.
#[test]
fn non_finite_input_does_not_panic() {
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F32] {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN_POSITIVE] {
            let mut x = vec![0.5f32; 256];
            x[3] = bad;
            let (_q, y) = round_trip(ty, &x);
            assert_eq!(y.len(), 256);
        }
    }
}

/// The F32 activation format is an exact copy.
#[test]
fn f32_activation_format_is_lossless() {
    let mut rng = Rng::new(12);
    let x = activations(&mut rng, 333);
    let (q, y) = round_trip(GgmlType::F32, &x);
    assert_eq!(q.len(), 333 * 4);
    assert_eq!(x, y);
}
