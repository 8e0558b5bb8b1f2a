//! The lookup-table GEMV for 2-bit weights (`turboinfer::kernels::lut`): every LUT kernel this CPU
//! runs, and its scalar reference, equal the Q2_K reference dot product (`turboinfer::quant`, the
//! numeric contract's super-block chain) bit for bit, row by row.
//!
//! Budget: none. The tables hold exact integer sums of the Q8_K codes, so the per-row integer sums
//! are the reference's, and the float work is the same two FMAs per super-block.

#[path = "quant_support/mod.rs"]
mod quant_support;

use quant_support::{activations, random_row, Rng};
use turboinfer::kernels::lut::{
    build_tables, lut_packable, pack_q2_k, LUT_BLOCK, LUT_ROWS, TABLE_BYTES,
};
use turboinfer::kernels::lut_kernels as kernels;
use turboinfer::quant::{self, GgmlType, QK_K};

/// Bytes of a Q2_K super-block.
const Q2K: usize = 84;

/// A random Q2_K matrix; with `extreme`, every code 3 and every scale and min 15 (the largest
/// integer sums the layout must hold).
fn matrix(rng: &mut Rng, rows: usize, cols: usize, extreme: bool) -> Vec<u8> {
    let mut m: Vec<u8> = (0..rows).flat_map(|_| random_row(rng, GgmlType::Q2_K, cols)).collect();
    if extreme {
        for b in m.chunks_exact_mut(Q2K) {
            b[..80].fill(0xFF);
        }
    }
    m
}

/// Q8_K activations of `cols` elements; with `extreme`, every code ±127 of one sign.
fn activation(rng: &mut Rng, cols: usize, extreme: Option<f32>) -> Vec<u8> {
    let x = match extreme {
        Some(s) => vec![s; cols],
        None => activations(rng, cols),
    };
    let mut a = vec![0u8; quant::row_size(GgmlType::Q8_K, cols).unwrap()];
    quant::quantize_row(GgmlType::Q8_K, &x, &mut a).unwrap();
    a
}

/// Checks every LUT kernel against the reference on one matrix and vector.
fn check(rows: usize, cols: usize, w: &[u8], act: &[u8], what: &str) {
    let nb = cols / QK_K;
    let reference = quant::vec_dot_fn(GgmlType::Q2_K).unwrap();
    let mut packed = vec![0u8; w.len()];
    pack_q2_k(rows, cols, w, &mut packed);
    let mut tables = vec![0u8; nb * TABLE_BYTES];
    build_tables(nb, act, &mut tables);
    for (name, f) in kernels() {
        for (g, group) in packed.chunks_exact(nb * LUT_BLOCK).enumerate() {
            let mut out = [0f32; LUT_ROWS];
            f(nb, group, act, &tables, &mut out);
            for (r, &o) in out.iter().enumerate() {
                let row = g * LUT_ROWS + r;
                let want = reference(cols, &w[row * nb * Q2K..(row + 1) * nb * Q2K], act);
                assert_eq!(o.to_bits(), want.to_bits(), "{name}, {what}: row {row}: {o} != {want}");
            }
        }
    }
}

#[test]
fn every_lut_kernel_equals_the_reference() {
    let names: Vec<_> = kernels().iter().map(|k| k.0).collect();
    eprintln!("LUT kernels on this CPU: {names:?}");
    let mut rng = Rng::new(0x1u64 << 40 | 0x7ab1e);
    // One super-block, a few, and the 1.5B model's row lengths (1536, 8960).
    for (rows, cols) in [(32, 256), (64, 768), (32, 1536), (32, 8960)] {
        assert!(lut_packable(GgmlType::Q2_K, rows, cols));
        for _ in 0..3 {
            let w = matrix(&mut rng, rows, cols, false);
            let a = activation(&mut rng, cols, None);
            check(rows, cols, &w, &a, &format!("random {rows}x{cols}"));
        }
    }
    // The largest sums: codes 3, scales and mins 15, activations all +127 or all -127.
    for s in [1.0f32, -1.0] {
        let w = matrix(&mut rng, 32, 512, true);
        let a = activation(&mut rng, 512, Some(s));
        check(32, 512, &w, &a, &format!("extreme {s}"));
    }
}

#[test]
fn packing_refuses_what_it_cannot_hold() {
    assert!(!lut_packable(GgmlType::Q4_K, 32, 256));
    assert!(!lut_packable(GgmlType::Q2_K, 16, 256));
    assert!(!lut_packable(GgmlType::Q2_K, 32, 128));
    let r = std::panic::catch_unwind(|| pack_q2_k(32, 256, &[0u8; 10], &mut [0u8; 10]));
    assert!(r.is_err());
}
