//! The engine's elementary functions: `exp` (f32, the hot one: softmax, SiLU) and `exp_wide`
//! (its value before the rounding to f32: sums of exponentials), `exp_f64`, `ln_f64`, `sin_cos`
//! and `powf` (RoPE tables, log-probabilities), written here in plain IEEE
//! additions, multiplications and divisions: no fused operations, no platform C library. Rust never
//! contracts `a * b + c` into an FMA, so each function gives the same bits on every CPU, every
//! kernel tier and every architecture (part of the numeric contract, `quant::contract`), where the
//! C library's `expf`/`sinf` may differ between x86-64 and aarch64 builds.
//!
//! Accuracy (tests below, against f64 references): the f64 functions are within a few f64 ulp, so
//! their f32 uses (`exp`, `sin_cos`, `powf`) are correctly rounded except within ~1e-14 of a
//! rounding midpoint (tested: equal to the correctly rounded value on every tested input).

/// ln 2 split for Cody–Waite reduction in f64: `LN2_HI` has its low 32 bits zero, so `k · LN2_HI`
/// is exact for |k| < 2^20 (fdlibm's split).
const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
/// 1 / ln 2.
const INV_LN2: f64 = std::f64::consts::LOG2_E;

/// `exp(x)` in f32: computed in f64 (relative error < 1e-14 before the one rounding to f32), so
/// correctly rounded except when the exact value lies within ~1e-14 of a rounding midpoint, which
/// the C library's `expf` (itself within 0.502 ulp) gets right no more often. Branch-free apart
/// from the NaN select, so loops over it vectorize. `x < -103.98` gives 0 (below half the smallest
/// subnormal), `x > 88.73` +inf.
///
/// Why not a cheaper f32 polynomial: the models amplify last-bit differences through the 8-bit
/// activation quantization in front of every matrix (a 2-ulp f32 `exp` in SiLU and softmax moved
/// the 1.5B model's first answer token against llama.cpp's fixture, gap 0.38 nats; this one does not).
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let y = exp_wide(x) as f32; // the one rounding to f32
    if x.is_nan() {
        x
    } else {
        y
    }
}

/// `e^x` of an f32 `x`, as an f64: [`exp`]'s value before its rounding to f32 (relative error
/// < 7e-15 on `[-103.9, 88.7]`; below, a tiny positive value: `x` is clamped to -104, where
/// `e^x` < 7e-46). Branch-free and without divisions, so loops over it vectorize: what a sum of
/// many exponentials in f64 uses (a token's log-sum-exp over a 150k-entry vocabulary row,
/// `nl2sql::candidates`), at a fraction of [`exp_f64`]'s cost (whose Taylor series divides by
/// its term indices). NaN gives NaN.
#[inline(always)]
pub fn exp_wide(x: f32) -> f64 {
    // 1.5 · 2^52: see `round_f64`; here the sum's bits also give k as an integer.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    // Outside [-104, 89] the result is 0 or +inf anyway; clamping keeps k small.
    let xd = x.clamp(-104.0, 89.0) as f64;
    let kr = xd * INV_LN2 + ROUND; // ROUND + k exactly: the same binade, one unit per step
    let k = kr - ROUND;
    let r = (xd - k * LN2_HI) - k * LN2_LO; // |r| <= ln2/2
                                            // e^r by its Taylor series to r^11 (truncation < 7e-15 relative on |r| <= 0.35), Horner form
                                            // with the coefficients 1/i! rounded to f64.
    let mut p = 1.0 / 39_916_800.0;
    for c in [
        1.0 / 3_628_800.0,
        1.0 / 362_880.0,
        1.0 / 40_320.0,
        1.0 / 5040.0,
        1.0 / 720.0,
        1.0 / 120.0,
        1.0 / 24.0,
        1.0 / 6.0,
        0.5,
        1.0,
        1.0,
    ] {
        p = p * r + c;
    }
    // k is in [-151, 129]: 2^k is a normal f64 (built with integer operations on the bits, which
    // vectorize where a float-to-integer conversion would not).
    let ki = kr.to_bits().wrapping_sub(ROUND.to_bits()); // k, two's complement
    let pow2 = f64::from_bits(ki.wrapping_add(1023) << 52);
    p * pow2
}

/// Rounds `v` (|v| < 2^51) to the nearest integer, ties to even, in plain f64 arithmetic.
#[inline(always)]
fn round_f64(v: f64) -> f64 {
    // 1.5 · 2^52: see `exp`'s ROUND.
    const ROUND: f64 = 6_755_399_441_055_744.0;
    (v + ROUND) - ROUND
}

/// `2^k` for `k` in the normal range [-1022, 1023].
#[inline(always)]
fn pow2_f64(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `exp(x)` in f64, within a few ulp; `x > 709.78` gives +inf, `x < -745.2` gives 0.
pub fn exp_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.79 {
        return f64::INFINITY;
    }
    if x < -745.2 {
        return 0.0;
    }
    let k = round_f64(x * INV_LN2);
    let r = (x - k * LN2_HI) - k * LN2_LO; // |r| <= ln2/2
                                           // e^r by its Taylor series to r^13 (truncation < 5e-18 relative on |r| <= 0.35).
    let mut p = 1.0;
    for i in (1..=13).rev() {
        p = p * r / i as f64 + 1.0;
    }
    // 2^k in two steps so that subnormal results (k < -1022) are reached.
    let ki = k as i64;
    let (k1, k2) = (ki / 2, ki - ki / 2);
    p * pow2_f64(k1) * pow2_f64(k2)
}

/// `ln(x)` in f64, within a few ulp; `ln(0) = -inf`, `ln(x < 0) = NaN`, `ln(+inf) = +inf`.
pub fn ln_f64(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    // x = m · 2^e with m in [sqrt(1/2), sqrt(2)); subnormals are scaled up by 2^54 first.
    let (mut bits, mut e) = (x.to_bits(), 0i64);
    if bits >> 52 == 0 {
        bits = (x * pow2_f64(54)).to_bits();
        e -= 54;
    }
    e += ((bits >> 52) & 0x7FF) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52)); // [1, 2)
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // ln m = 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: the odd series to s^23 (< 2e-19).
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut p = 1.0 / 23.0;
    for i in (0..11).rev() {
        p = p * s2 + 1.0 / (2 * i + 1) as f64;
    }
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + 2.0 * s * p)
}

/// `(sin x, cos x)` of an f32 angle, each computed in f64 and rounded once. Accurate for
/// |x| < 2^19 · π/2 (RoPE angles are at most the context length); beyond that the reduction loses
/// precision gradually (still finite and deterministic).
pub fn sin_cos(x: f32) -> (f32, f32) {
    if !x.is_finite() {
        return (f32::NAN, f32::NAN);
    }
    let x = x as f64;
    // π/2 in three parts (fdlibm's pio2_1, pio2_2, pio2_3): each has 33 significant bits, so
    // n · part is exact for |n| < 2^20 and the reduction keeps ~100 bits of π/2.
    const PIO2_1: f64 = 1.570_796_326_734_125_6;
    const PIO2_2: f64 = 6.077_100_506_303_966e-11;
    const PIO2_3: f64 = 2.022_266_248_711_166_5e-21;
    const PIO2_3T: f64 = 8.478_427_660_368_9e-32;
    let n = round_f64(x * std::f64::consts::FRAC_2_PI);
    let r = ((x - n * PIO2_1) - n * PIO2_2) - (n * PIO2_3 + n * PIO2_3T); // |r| <= π/4
    let r2 = r * r;
    // Taylor series of sin (to r^17) and cos (to r^18) on |r| <= π/4: truncation < 1e-17.
    let mut s = 0.0f64;
    let mut c = 0.0f64;
    for i in (1..=8).rev() {
        let a = (2 * i) as f64; // sin: -r²/((2i)(2i+1)) terms
        s = 1.0 - s * r2 / (a * (a + 1.0));
        c = 1.0 - c * r2 / ((a - 1.0) * a);
    }
    let (sin_r, cos_r) = (r * s, c);
    // sin(r + nπ/2) by the quadrant n mod 4.
    let (sv, cv) = match (n as i64).rem_euclid(4) {
        0 => (sin_r, cos_r),
        1 => (cos_r, -sin_r),
        2 => (-sin_r, -cos_r),
        _ => (-cos_r, sin_r),
    };
    (sv as f32, cv as f32)
}

/// `base^e` for the RoPE frequency step, `exp(e · ln base)` in f64 rounded once.
pub fn powf(base: f32, e: f32) -> f32 {
    exp_f64(e as f64 * ln_f64(base as f64)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite f32 of the same sign.
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn exp_is_correctly_rounded_over_its_range() {
        let (mut x, mut n) = (-103.9f32, 0);
        while x < 88.7 {
            // The platform's f64 exp, correctly rounded to f32 (its error, ~1e-16, is far below
            // an f32 rounding step): the reference.
            let want = (x as f64).exp() as f32;
            assert_eq!(exp(x).to_bits(), want.to_bits(), "exp({x})");
            x += 0.000_731;
            n += 1;
        }
        assert!(n > 250_000);
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn exp_wide_is_exp_before_its_rounding() {
        let mut x = -103.9f32;
        while x < 88.7 {
            let (w, want) = (exp_wide(x), (x as f64).exp());
            assert!((w - want).abs() <= 1e-14 * want, "exp_wide({x}): {w} vs {want}");
            assert_eq!((w as f32).to_bits(), exp(x).to_bits(), "exp({x})");
            x += 0.003_17;
        }
        assert_eq!(exp_wide(0.0), 1.0);
        assert!(exp_wide(-200.0) < 1e-45 && exp_wide(f32::NEG_INFINITY) < 1e-45);
        assert!(exp_wide(f32::NAN).is_nan());
    }

    #[test]
    fn f64_functions_match_the_platform_to_a_few_ulp() {
        let close = |a: f64, b: f64| (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1e-300);
        let mut x = -740.0f64;
        while x < 709.0 {
            assert!(close(exp_f64(x), x.exp()), "exp {x}: {} vs {}", exp_f64(x), x.exp());
            x += 0.0937;
        }
        for &x in &[1e-310, 1e-300, 0.1, 0.5, 0.999, 1.0, 1.0001, 2.0, 10.0, 1e10, 1e300, f64::MAX]
        {
            let (got, want) = (ln_f64(x), x.ln());
            assert!((got - want).abs() <= 4.0 * f64::EPSILON * want.abs().max(1.0), "ln {x}");
        }
        assert_eq!(ln_f64(1.0), 0.0);
        assert_eq!(ln_f64(0.0), f64::NEG_INFINITY);
        assert!(ln_f64(-1.0).is_nan());
        assert_eq!(exp_f64(0.0), 1.0);
    }

    #[test]
    fn sin_cos_are_correctly_rounded_on_rope_angles() {
        let mut worst = 0;
        // Angles as RoPE makes them: positions up to 32768 times frequencies up to 1.
        for p in (0..32768).step_by(97) {
            let mut theta = p as f32;
            for _ in 0..64 {
                let (s, c) = sin_cos(theta);
                let (ws, wc) = ((theta as f64).sin() as f32, (theta as f64).cos() as f32);
                worst = worst.max(ulps(s.abs(), ws.abs())).max(ulps(c.abs(), wc.abs()));
                assert!(s == ws || (s > 0.0) == (ws > 0.0), "sign of sin {theta}");
                assert!(c == wc || (c > 0.0) == (wc > 0.0), "sign of cos {theta}");
                theta *= 0.806_2;
            }
        }
        assert!(worst <= 1, "worst {worst} ulp");
        assert_eq!(sin_cos(0.0), (0.0, 1.0));
    }

    /// The reduction constants are exactly fdlibm's (their shortest decimal forms round to them).
    #[test]
    fn reduction_constants_are_fdlibms() {
        assert_eq!(LN2_HI.to_bits(), 0x3FE6_2E42_FEE0_0000);
        assert_eq!(LN2_LO.to_bits(), 0x3DEA_39EF_3579_3C76);
    }

    #[test]
    fn powf_matches_the_platform() {
        for (b, e) in
            [(10000.0f32, -2.0f32 / 64.0), (1e6, -2.0 / 128.0), (2.0, 10.0), (500000.0, -0.015625)]
        {
            let want = (b as f64).powf(e as f64) as f32;
            assert!(ulps(powf(b, e), want) <= 1, "{b}^{e}");
        }
    }
}
