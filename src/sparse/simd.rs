//! Small f32 vector helpers (axpy, Q8_0-row axpy, dot) compiled twice: a portable body and the same
//! body with AVX2+FMA enabled, chosen once at run time (no compile-time `target-cpu`).

use crate::quant::GgmlType;
use std::sync::OnceLock;

/// Bytes of one Q8_0 block: an f16 scale and 32 signed bytes.
pub const Q8_0_BLOCK_BYTES: usize = 34;
/// Elements of one Q8_0 block.
pub const Q8_0_BLOCK: usize = 32;

/// `y += a * x`.
#[inline(always)]
fn axpy_body(y: &mut [f32], a: f32, x: &[f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi = a.mul_add(xi, *yi);
    }
}

/// `y += a * dequant(q)` for one Q8_0 row `q` of `y.len()` elements.
#[inline(always)]
fn axpy_q8_0_body(y: &mut [f32], a: f32, q: &[u8]) {
    for (yb, qb) in y.chunks_exact_mut(Q8_0_BLOCK).zip(q.chunks_exact(Q8_0_BLOCK_BYTES)) {
        let d = half::f16::from_le_bytes([qb[0], qb[1]]).to_f32() * a;
        for (yi, &qi) in yb.iter_mut().zip(&qb[2..]) {
            *yi = d.mul_add(qi as i8 as f32, *yi);
        }
    }
}

/// `y += Σ_k a[k] * dequant(q[k])` for four Q8_0 rows: each block of `y` is loaded and stored once
/// for the four rows (a quarter of the accumulator traffic of four single-row calls).
#[inline(always)]
fn axpy4_q8_0_body(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
    for (b, yb) in y.chunks_exact_mut(Q8_0_BLOCK).enumerate() {
        let o = b * Q8_0_BLOCK_BYTES;
        let blk = |k: usize| &q[k][o..o + Q8_0_BLOCK_BYTES];
        let (b0, b1, b2, b3) = (blk(0), blk(1), blk(2), blk(3));
        let sc = |qb: &[u8], k: usize| half::f16::from_le_bytes([qb[0], qb[1]]).to_f32() * a[k];
        let (d0, d1, d2, d3) = (sc(b0, 0), sc(b1, 1), sc(b2, 2), sc(b3, 3));
        for (i, yi) in yb.iter_mut().enumerate() {
            let mut v = d0.mul_add(b0[2 + i] as i8 as f32, *yi);
            v = d1.mul_add(b1[2 + i] as i8 as f32, v);
            v = d2.mul_add(b2[2 + i] as i8 as f32, v);
            *yi = d3.mul_add(b3[2 + i] as i8 as f32, v);
        }
    }
}

/// Dot product with 8 independent partial sums (vectorizable).
#[inline(always)]
fn dot_body(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (xc, yc) = (x.chunks_exact(8), y.chunks_exact(8));
    let (xr, yr) = (xc.remainder(), yc.remainder());
    for (a, b) in xc.zip(yc) {
        for i in 0..8 {
            acc[i] = a[i].mul_add(b[i], acc[i]);
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (a, b) in xr.iter().zip(yr) {
        s += a * b;
    }
    s
}

/// The dispatched helpers.
#[derive(Clone, Copy)]
struct Fns {
    axpy: fn(&mut [f32], f32, &[f32]),
    axpy_q8_0: fn(&mut [f32], f32, &[u8]),
    axpy4_q8_0: fn(&mut [f32], [f32; 4], [&[u8]; 4]),
    dot: fn(&[f32], &[f32]) -> f32,
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    /// AVX2+FMA build of `axpy_body`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn axpy_t(y: &mut [f32], a: f32, x: &[f32]) {
        super::axpy_body(y, a, x)
    }
    /// AVX2+FMA build of `axpy_q8_0_body`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn axpy_q8_0_t(y: &mut [f32], a: f32, q: &[u8]) {
        super::axpy_q8_0_body(y, a, q)
    }
    /// AVX2+FMA build of `axpy4_q8_0_body`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn axpy4_q8_0_t(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
        super::axpy4_q8_0_body(y, a, q)
    }
    /// Safe wrapper; only installed in the table after `avx2`/`fma` were detected.
    pub(super) fn axpy4_q8_0(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
        // SAFETY: `table()` installs this function only when the CPU has AVX2 and FMA.
        unsafe { axpy4_q8_0_t(y, a, q) }
    }
    /// AVX2+FMA build of `dot_body`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_t(x: &[f32], y: &[f32]) -> f32 {
        super::dot_body(x, y)
    }
    /// Safe wrapper; only installed in the table after `avx2`/`fma` were detected.
    pub(super) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
        // SAFETY: `table()` installs this function only when the CPU has AVX2 and FMA.
        unsafe { axpy_t(y, a, x) }
    }
    /// Safe wrapper; only installed in the table after `avx2`/`fma` were detected.
    pub(super) fn axpy_q8_0(y: &mut [f32], a: f32, q: &[u8]) {
        // SAFETY: as above.
        unsafe { axpy_q8_0_t(y, a, q) }
    }
    /// Safe wrapper; only installed in the table after `avx2`/`fma` were detected.
    pub(super) fn dot(x: &[f32], y: &[f32]) -> f32 {
        // SAFETY: as above.
        unsafe { dot_t(x, y) }
    }
}

/// The helper table for this CPU, chosen once.
fn table() -> Fns {
    static T: OnceLock<Fns> = OnceLock::new();
    *T.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            let f = crate::cpu::cpu_features();
            if f.avx2 && f.fma {
                return Fns {
                    axpy: avx2::axpy,
                    axpy_q8_0: avx2::axpy_q8_0,
                    axpy4_q8_0: avx2::axpy4_q8_0,
                    dot: avx2::dot,
                };
            }
        }
        Fns {
            axpy: axpy_body,
            axpy_q8_0: axpy_q8_0_body,
            axpy4_q8_0: axpy4_q8_0_body,
            dot: dot_body,
        }
    })
}

/// `y += a * x` (`x.len() >= y.len()`).
pub fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    (table().axpy)(y, a, x)
}

/// `y += a * dequant(q)`, `q` one Q8_0 row of `y.len()` elements (a multiple of 32).
pub fn axpy_q8_0(y: &mut [f32], a: f32, q: &[u8]) {
    debug_assert_eq!(q.len(), y.len() / Q8_0_BLOCK * Q8_0_BLOCK_BYTES);
    (table().axpy_q8_0)(y, a, q)
}

/// `y += Σ_k a[k] * dequant(q[k])` for four Q8_0 rows of `y.len()` elements each.
pub fn axpy4_q8_0(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
    debug_assert!(q.iter().all(|r| r.len() == y.len() / Q8_0_BLOCK * Q8_0_BLOCK_BYTES));
    (table().axpy4_q8_0)(y, a, q)
}

/// `Σ x[i] * y[i]`.
pub fn dot(x: &[f32], y: &[f32]) -> f32 {
    (table().dot)(x, y)
}

/// Bytes of a Q8_0 row of `n` elements (`n` a multiple of 32).
pub fn q8_0_row_bytes(n: usize) -> usize {
    debug_assert_eq!(GgmlType::Q8_0.block_size(), Q8_0_BLOCK);
    n / Q8_0_BLOCK * Q8_0_BLOCK_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dispatched helpers agree with the portable bodies and with the reference Q8_0 dequantizer.
    #[test]
    fn helpers_match_reference() {
        let n = 96;
        let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 17) as f32 - 8.0) * 0.25).collect();
        let mut q = vec![0u8; q8_0_row_bytes(n)];
        (crate::quant::quantize_row_fn(GgmlType::Q8_0).unwrap())(&x, &mut q);
        let mut deq = vec![0.0f32; n];
        crate::quant::dequantize_row(GgmlType::Q8_0, &q, &mut deq).unwrap();
        let mut y1 = vec![1.0f32; n];
        axpy_q8_0(&mut y1, 0.5, &q);
        for i in 0..n {
            assert!((y1[i] - (1.0 + 0.5 * deq[i])).abs() < 1e-5, "{i}");
        }
        let mut y2 = vec![1.0f32; n];
        axpy(&mut y2, 2.0, &x);
        for i in 0..n {
            assert_eq!(y2[i], 1.0 + 2.0 * x[i]);
        }
        let mut y3 = vec![1.0f32; n];
        axpy4_q8_0(&mut y3, [0.5, -1.0, 0.25, 2.0], [&q, &q, &q, &q]);
        for i in 0..n {
            assert!((y3[i] - (1.0 + 1.75 * deq[i])).abs() < 1e-4, "{i}");
        }
        let d: f32 = x.iter().map(|v| v * v).sum();
        assert!((dot(&x, &x) - d).abs() < 1e-3);
    }
}
