//! Q2_K: super-blocks of 256 elements, 84 bytes (ggml `block_q2_K`), 16 sub-blocks of 16:
//! ```text
//! [0..16)   scales  u8×16  sub-block g: scale = low nibble, min = high nibble
//! [16..80)  qs      u8×64  2-bit codes: element e sits in byte 32*(e/128) + e%32 at bit 2*((e%128)/32)
//! [80..82)  d       f16    super-scale of the scales
//! [82..84)  dmin    f16    super-scale of the mins
//! value = d*scale[e/16] * code - dmin*min[e/16]   (code 0..=3)
//! ```
//! Dotted with Q8_K activations.

use super::bytes::{f16_at, f32_at, put_f16};
use super::contract::chain;
use super::{q8_k, QK_K};
use super::{DequantizeFn, Format, GgmlType, QuantizeFn, VecDotFn};

/// Bytes per super-block.
pub(crate) const BLOCK: usize = QK_K / 16 + QK_K / 4 + 2 + 2;

/// The format (`quant::Format`).
#[allow(non_camel_case_types)]
pub(crate) struct Q2_K;

impl Format for Q2_K {
    const TYPE: GgmlType = GgmlType::Q2_K;
    const ELEMENTS: usize = QK_K;
    const BYTES: usize = BLOCK;
    const ACTIVATION: GgmlType = GgmlType::Q8_K;
    const DEQUANTIZE: DequantizeFn = dequantize;
    const VEC_DOT: Option<VecDotFn> = Some(vec_dot);
    const QUANTIZE: Option<QuantizeFn> = None;
}

/// Unpacks the 256 codes (0..=3) of a super-block in element order.
#[inline(always)]
fn codes(b: &[u8; BLOCK]) -> [u8; QK_K] {
    let mut v = [0u8; QK_K];
    for h in 0..2 {
        let qs = &b[16 + 32 * h..16 + 32 * h + 32];
        for j in 0..4 {
            for l in 0..32 {
                v[128 * h + 32 * j + l] = (qs[l] >> (2 * j)) & 3;
            }
        }
    }
    v
}

/// Dequantizes whole Q2_K super-blocks (`dequantize_row_q2_K`).
pub(crate) fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.as_chunks::<BLOCK>().0.iter().zip(dst.as_chunks_mut::<QK_K>().0) {
        let d = f16_at(&b[80..82]);
        let dmin = f16_at(&b[82..84]);
        let v = codes(b);
        for ((&sc, yg), vg) in
            b[..QK_K / 16].iter().zip(y.chunks_exact_mut(16)).zip(v.chunks_exact(16))
        {
            let (dl, ml) = (d * (sc & 0x0F) as f32, dmin * (sc >> 4) as f32);
            for (o, &c) in yg.iter_mut().zip(vg) {
                *o = dl * c as f32 - ml;
            }
        }
    }
}

/// Largest 2-bit code.
const NMAX: i32 = 3;
/// Largest 4-bit sub-block scale or min code (the super-block's largest maps to it).
const Q4_SCALE: f32 = 15.0;

/// ggml's `nearest_int` (adding 1.5·2^23 and reading the mantissa: round half to even), which
/// `round_ties_even` equals for |v| < 2^22; every value rounded here is a code-sized multiple of a
/// scale fitted to the same numbers, far inside that range.
#[inline(always)]
fn nearest(v: f32) -> i32 {
    v.round_ties_even() as i32
}

/// One sub-block's affine fit, ggml's `make_qkx2_quants(16, 3, x, |x|, …, -0.5, 0.1, 15, true)`:
/// returns `(scale, min)` with `x ≈ scale·code - min` and the codes in `l`. Weights are `|x|` (large
/// values matter more) and the error is their weighted absolute deviation. Starting from the plain
/// min/max grid, it tries 16 grid widths `(3 + rmin + rdelta·k) / (max - min)`, k = 0..=15 (rmin
/// -0.5, rdelta 0.1: from 2.5 to 4.0 steps over the range, so the rounding boundaries move across the
/// values), and for each one the least-squares scale and min of those codes (the min clamped to ≤ 0,
/// i.e. an offset that only subtracts), keeping the one of least error. f32 operations in ggml's
/// order, so the result is bit for bit its own.
fn fit_sub_block(x: &[f32; 16], l: &mut [u8; 16]) -> (f32, f32) {
    // ggml's search parameters for Q2_K (see above).
    const RMIN: f32 = -0.5;
    const RDELTA: f32 = 0.1;
    const NSTEP: i32 = 15;
    let w = x.map(f32::abs);
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..16 {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    // The offset only ever subtracts: a sub-block of positive values still starts its grid at 0.
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let mut iscale = NMAX as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..16 {
        let q = nearest(iscale * (x[i] - min)).clamp(0, NMAX);
        l[i] = q as u8;
        let diff = scale * q as f32 + min - x[i];
        best_error += w[i] * diff.abs();
    }
    let mut laux = [0u8; 16];
    for is in 0..=NSTEP {
        iscale = (RMIN + RDELTA * is as f32 + NMAX as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..16 {
            let q = nearest(iscale * (x[i] - min)).clamp(0, NMAX);
            laux[i] = q as u8;
            let lf = q as f32;
            sum_l += w[i] * lf;
            sum_l2 += w[i] * lf * lf;
            sum_xl += w[i] * lf * x[i];
        }
        // Weighted least squares of x on (code, 1): D is the normal equations' determinant.
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..16 {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += w[i] * diff.abs();
            }
            if cur_error < best_error {
                l.copy_from_slice(&laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Quantizes whole super-blocks of f32 weights to Q2_K as ggml's `quantize_row_q2_K_ref` (what
/// `llama-quantize` runs without an importance matrix): each 16-element sub-block gets its own
/// fitted scale and min (`fit_sub_block`); those are quantized to 4 bits against the super-block's
/// largest (`d = max_scale/15`, `dmin = max_min/15`, stored as f16); then every code is recomputed
/// against the scale and min actually stored, `clamp(round((x + dmin·m)/(d·s)), 0, 3)` (a
/// sub-block whose stored scale is 0 keeps its fitted codes, which then decode to `-dmin·m`). A
/// weight format only: not the table's `QUANTIZE` (activation quantizers).
pub(crate) fn quantize(x: &[f32], dst: &mut [u8]) {
    for (xb, b) in x.as_chunks::<QK_K>().0.iter().zip(dst.as_chunks_mut::<BLOCK>().0) {
        let mut l = [0u8; QK_K];
        let (mut scales, mut mins) = ([0.0f32; QK_K / 16], [0.0f32; QK_K / 16]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for (j, (xg, lg)) in
            xb.as_chunks::<16>().0.iter().zip(l.as_chunks_mut::<16>().0).enumerate()
        {
            (scales[j], mins[j]) = fit_sub_block(xg, lg);
            if scales[j] > max_scale {
                max_scale = scales[j];
            }
            if mins[j] > max_min {
                max_min = mins[j];
            }
        }
        // Codes wrap into the byte as C's int-to-uint8 store does (a fitted scale is never
        // negative in practice; this keeps even that case ggml's bytes).
        if max_scale > 0.0 {
            let iscale = Q4_SCALE / max_scale;
            for j in 0..QK_K / 16 {
                b[j] = nearest(iscale * scales[j]) as u8;
            }
            put_f16(&mut b[80..82], max_scale / Q4_SCALE);
        } else {
            b[..QK_K / 16].fill(0);
            put_f16(&mut b[80..82], 0.0);
        }
        if max_min > 0.0 {
            let iscale = Q4_SCALE / max_min;
            for j in 0..QK_K / 16 {
                b[j] = (b[j] as i32 | (nearest(iscale * mins[j]) << 4)) as u8;
            }
            put_f16(&mut b[82..84], max_min / Q4_SCALE);
        } else {
            put_f16(&mut b[82..84], 0.0);
        }
        let (d, dmin) = (f16_at(&b[80..82]), f16_at(&b[82..84]));
        for (j, &sm) in b[..QK_K / 16].iter().enumerate() {
            let dl = d * (sm & 0x0F) as f32;
            if dl == 0.0 {
                continue;
            }
            let ml = dmin * (sm >> 4) as f32;
            for (li, &xi) in l[16 * j..16 * j + 16].iter_mut().zip(&xb[16 * j..16 * j + 16]) {
                *li = nearest((xi + ml) / dl).clamp(0, NMAX) as u8;
            }
        }
        // The layout of `codes`: byte 32·h + e of half h holds elements 128h + e + 32k at bit 2k.
        for h in 0..2 {
            for e in 0..32 {
                let at = 128 * h + e;
                b[16 + 32 * h + e] =
                    l[at] | (l[at + 32] << 2) | (l[at + 64] << 4) | (l[at + 96] << 6);
            }
        }
    }
}

/// Dot product of a Q2_K row with Q8_K activations, the contract's super-block chain
/// (`contract::chain`): per super-block the exact `isum = Σ_g scale_g · Σ code·q8` and
/// `summs = Σ_g min_g · bsums[g]`, then `acc = fma(isum, d·d_a, acc)`, `acc = fma(summs, -(dmin·d_a), acc)`.
pub(crate) fn vec_dot(n: usize, w: &[u8], act: &[u8]) -> f32 {
    debug_assert!(w.len() == n / QK_K * BLOCK && act.len() == n / QK_K * q8_k::BLOCK);
    let mut acc = 0.0f32;
    for (x, y) in w.as_chunks::<BLOCK>().0.iter().zip(act.as_chunks::<{ q8_k::BLOCK }>().0) {
        let v = codes(x);
        let q8 = &y[q8_k::QS..q8_k::BSUMS];
        let (mut isum, mut summs) = (0i32, 0i32);
        let sums = q8_k::group_sums(&v, q8);
        // The first 16 bytes: each group's scale (low nibble) and min (high nibble).
        for (g, &sm) in x[..QK_K / 16].iter().enumerate() {
            isum += (sm & 0x0F) as i32 * sums[g];
            summs += (sm >> 4) as i32 * q8_k::bsum(y, g);
        }
        let dy = f32_at(y);
        acc = chain(acc, isum, f16_at(&x[80..82]) * dy);
        acc = chain(acc, summs, -(f16_at(&x[82..84]) * dy));
    }
    acc
}
