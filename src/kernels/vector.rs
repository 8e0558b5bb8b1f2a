//! Small f32 vector kernels of the sparse FFN (axpy, Q8_0-row axpy, dot): the portable reference
//! bodies, which the scalar tier uses as they are and the x86 tiers compile with AVX2+FMA
//! (`x86::vector`); the dot product is each tier's F32 dot; every tier reaches them through its
//! `KernelSet`.

use crate::quant::GgmlType;

/// Bytes of one Q8_0 block: an f16 scale and 32 signed bytes.
const Q8_0_BLOCK_BYTES: usize = 34;
/// Elements of one Q8_0 block.
const Q8_0_BLOCK: usize = 32;

/// `y += a * x`.
#[inline(always)]
pub(crate) fn axpy_body(y: &mut [f32], a: f32, x: &[f32]) {
    for (yi, &xi) in y.iter_mut().zip(x) {
        *yi = a.mul_add(xi, *yi);
    }
}

/// `y += a * dequant(q)` for one Q8_0 row `q` of `y.len()` elements.
#[inline(always)]
pub(crate) fn axpy_q8_0_body(y: &mut [f32], a: f32, q: &[u8]) {
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
pub(crate) fn axpy4_q8_0_body(y: &mut [f32], a: [f32; 4], q: [&[u8]; 4]) {
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

/// `Σ x[i]·y[i]` over the shorter length: the scalar F32 dot product (the numeric contract's
/// sixteen element lanes, `quant::contract::dot16`) on the vectors' bytes.
pub(crate) fn dot_f32(x: &[f32], y: &[f32]) -> f32 {
    let n = x.len().min(y.len());
    (crate::quant::vec_dot_fn(GgmlType::F32).expect("F32 has a dot product"))(
        n,
        f32_bytes(&x[..n]),
        f32_bytes(&y[..n]),
    )
}

/// `x` as its little-endian bytes (this target is little-endian: see `ops::attention`).
pub(crate) fn f32_bytes(x: &[f32]) -> &[u8] {
    // SAFETY: f32 is 4 bytes of plain data without padding; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(x.as_ptr() as *const u8, std::mem::size_of_val(x)) }
}

/// Bytes of a Q8_0 row of `n` elements (`n` a multiple of 32).
pub fn q8_0_row_bytes(n: usize) -> usize {
    debug_assert_eq!(GgmlType::Q8_0.block_size(), Q8_0_BLOCK);
    n / Q8_0_BLOCK * Q8_0_BLOCK_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{KernelSet, Tier};

    /// The tables of every tier this CPU runs.
    fn tiers() -> Vec<&'static KernelSet> {
        Tier::available(crate::kernels::cpu::cpu_features())
            .into_iter()
            .map(|t| KernelSet::for_tier(t).unwrap())
            .collect()
    }

    /// Every tier's helpers agree with the reference Q8_0 dequantizer and plain arithmetic.
    #[test]
    fn helpers_match_reference() {
        for k in tiers() {
            let n = 96;
            let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 17) as f32 - 8.0) * 0.25).collect();
            let mut q = vec![0u8; q8_0_row_bytes(n)];
            (crate::quant::quantize_row_fn(GgmlType::Q8_0).unwrap())(&x, &mut q);
            let mut deq = vec![0.0f32; n];
            crate::quant::dequantize_row(GgmlType::Q8_0, &q, &mut deq).unwrap();
            let mut y1 = vec![1.0f32; n];
            k.axpy_q8_0(&mut y1, 0.5, &q);
            for i in 0..n {
                assert!((y1[i] - (1.0 + 0.5 * deq[i])).abs() < 1e-5, "{} {i}", k.tier());
            }
            let mut y2 = vec![1.0f32; n];
            k.axpy(&mut y2, 2.0, &x);
            for i in 0..n {
                assert_eq!(y2[i], 1.0 + 2.0 * x[i], "{}", k.tier());
            }
            let mut y3 = vec![1.0f32; n];
            k.axpy4_q8_0(&mut y3, [0.5, -1.0, 0.25, 2.0], [&q, &q, &q, &q]);
            for i in 0..n {
                assert!((y3[i] - (1.0 + 1.75 * deq[i])).abs() < 1e-4, "{} {i}", k.tier());
            }
            let d: f32 = x.iter().map(|v| v * v).sum();
            assert!((k.dot_f32(&x, &x) - d).abs() < 1e-3, "{}", k.tier());
        }
    }

    /// Every tier's helpers are bitwise the scalar reference bodies (the same fused operations in
    /// the same order, only compiled for other instructions), on lengths with remainders.
    #[test]
    fn every_tier_is_bitwise_the_reference() {
        let n = 32 * 7;
        let x: Vec<f32> = (0..n + 5).map(|i| ((i * 53 % 29) as f32 - 14.0) * 0.37).collect();
        let rows: Vec<Vec<u8>> = (0..4)
            .map(|r| {
                let v: Vec<f32> = (0..n).map(|i| ((i * 7 + r * 13) % 31) as f32 - 15.5).collect();
                let mut q = vec![0u8; q8_0_row_bytes(n)];
                (crate::quant::quantize_row_fn(GgmlType::Q8_0).unwrap())(&v, &mut q);
                q
            })
            .collect();
        let q = [&rows[0][..], &rows[1][..], &rows[2][..], &rows[3][..]];
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for k in tiers() {
            for len in [n, n - 3, 5] {
                let (mut a, mut b) = (vec![0.5f32; len], vec![0.5f32; len]);
                axpy_body(&mut a, -1.25, &x);
                k.axpy(&mut b, -1.25, &x);
                assert_eq!(bits(&a), bits(&b), "{} axpy {len}", k.tier());
                assert_eq!(
                    dot_f32(&x[..len], &x[1..len + 1]).to_bits(),
                    k.dot_f32(&x[..len], &x[1..len + 1]).to_bits(),
                    "{} dot {len}",
                    k.tier()
                );
            }
            let (mut a, mut b) = (x[..n].to_vec(), x[..n].to_vec());
            axpy_q8_0_body(&mut a, 0.75, q[1]);
            k.axpy_q8_0(&mut b, 0.75, q[1]);
            assert_eq!(bits(&a), bits(&b), "{} axpy_q8_0", k.tier());
            let (mut a, mut b) = (x[..n].to_vec(), x[..n].to_vec());
            axpy4_q8_0_body(&mut a, [0.5, -1.0, 0.25, 2.0], q);
            k.axpy4_q8_0(&mut b, [0.5, -1.0, 0.25, 2.0], q);
            assert_eq!(bits(&a), bits(&b), "{} axpy4_q8_0", k.tier());
        }
    }
}
