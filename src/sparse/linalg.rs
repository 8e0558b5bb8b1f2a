//! Dense f32 linear algebra for calibration (row-major, rayon-parallel, no external BLAS).

use crate::kernels::kernels;
use rayon::prelude::*;

/// `C = A·B` with `A` `[m, k]`, `B` `[k, n]`, `C` `[m, n]`; parallel over rows of `C`.
pub fn gemm(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let kset = kernels();
    assert!(a.len() == m * k && b.len() == k * n, "gemm shapes");
    let mut c = vec![0.0f32; m * n]; // [m, n]
    c.par_chunks_mut(n.max(1)).enumerate().for_each(|(i, row)| {
        for p in 0..k {
            let x = a[i * k + p];
            if x != 0.0 {
                kset.axpy(row, x, &b[p * n..(p + 1) * n]);
            }
        }
    });
    c
}

/// `Aᵀ` of `A` `[m, n]` (result `[n, m]`).
pub fn transpose(a: &[f32], m: usize, n: usize) -> Vec<f32> {
    let mut t = vec![0.0f32; m * n]; // [n, m]
    t.par_chunks_mut(m.max(1)).enumerate().for_each(|(j, row)| {
        for (i, y) in row.iter_mut().enumerate() {
            *y = a[i * n + j];
        }
    });
    t
}

/// Orthonormalizes the rows of `x` (`[k, d]`) in place (modified Gram-Schmidt, twice for
/// stability); a row that becomes (numerically) zero is left zero.
pub fn orthonormalize_rows(x: &mut [f32], k: usize, d: usize) {
    let kset = kernels();
    for _pass in 0..2 {
        for i in 0..k {
            let (done, rest) = x.split_at_mut(i * d);
            let row = &mut rest[..d];
            for j in 0..i {
                let prev = &done[j * d..(j + 1) * d];
                let c = kset.dot_f32(row, prev);
                kset.axpy(row, -c, prev);
            }
            let norm = kset.dot_f32(row, row).sqrt();
            if norm > 1e-20 {
                row.iter_mut().for_each(|v| *v /= norm);
            } else {
                row.fill(0.0);
            }
        }
    }
}

/// Solves `G X = B` for symmetric positive definite `G` (`[k, k]`) and `B` (`[k, n]`) by Cholesky
/// in f64. Returns `None` if `G` is not positive definite.
pub fn spd_solve(g: &[f32], b: &[f32], k: usize, n: usize) -> Option<Vec<f32>> {
    let mut l = vec![0.0f64; k * k]; // [k, k] lower factor
    for i in 0..k {
        for j in 0..=i {
            let mut s = g[i * k + j] as f64;
            for p in 0..j {
                s -= l[i * k + p] * l[j * k + p];
            }
            if i == j {
                if s <= 0.0 {
                    return None;
                }
                l[i * k + i] = s.sqrt();
            } else {
                l[i * k + j] = s / l[j * k + j];
            }
        }
    }
    let mut x = vec![0.0f32; k * n]; // [k, n]
    let cols: Vec<Vec<f64>> = (0..n)
        .into_par_iter()
        .map(|c| {
            let mut y = vec![0.0f64; k];
            for i in 0..k {
                let mut s = b[i * n + c] as f64;
                for p in 0..i {
                    s -= l[i * k + p] * y[p];
                }
                y[i] = s / l[i * k + i];
            }
            for i in (0..k).rev() {
                let mut s = y[i];
                for p in i + 1..k {
                    s -= l[p * k + i] * y[p];
                }
                y[i] = s / l[i * k + i];
            }
            y
        })
        .collect();
    for (c, col) in cols.iter().enumerate() {
        for i in 0..k {
            x[i * n + c] = col[i] as f32;
        }
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// gemm, transpose, orthonormalization and the SPD solver on small exact cases.
    #[test]
    fn small_cases() {
        let kset = kernels();
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // [2, 3]
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // [3, 2]
        assert_eq!(gemm(&a, &b, 2, 3, 2), vec![4.0, 5.0, 10.0, 11.0]);
        assert_eq!(transpose(&a, 2, 3), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let mut x = vec![3.0, 4.0, 0.0, 1.0, 1.0, 1.0];
        orthonormalize_rows(&mut x, 2, 3);
        assert!((kset.dot_f32(&x[0..3], &x[0..3]) - 1.0).abs() < 1e-6);
        assert!(kset.dot_f32(&x[0..3], &x[3..6]).abs() < 1e-6);
        let g = [4.0, 2.0, 2.0, 3.0]; // SPD
        let want = [1.0f32, -2.0];
        let rhs = [4.0 * 1.0 + 2.0 * -2.0, 2.0 * 1.0 + 3.0 * -2.0];
        let sol = spd_solve(&g, &rhs, 2, 1).unwrap();
        assert!((sol[0] - want[0]).abs() < 1e-5 && (sol[1] - want[1]).abs() < 1e-5);
        assert!(spd_solve(&[-1.0], &[1.0], 1, 1).is_none());
    }
}
