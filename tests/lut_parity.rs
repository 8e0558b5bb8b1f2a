//! The lookup-table GEMV for 2-bit and 4-bit weights (`turboinfer::kernels::lut`, `Q2_K×32`, and
//! `kernels::lut_q4_0`, `Q4_0×32`): every LUT kernel this CPU runs, and its scalar reference, equal
//! the reference dot product (`turboinfer::quant`, the numeric contract) bit for bit, row by row.
//!
//! Budget: none. The tables hold exact integer sums of the activation codes, so the per-row integer
//! sums are the reference's, and the float work is the reference's: two FMAs per Q2_K super-block,
//! the sixteen quad lanes and their fold for Q4_0.

#[path = "quant_support/mod.rs"]
mod quant_support;

use quant_support::{activations, random_row, Rng};
use turboinfer::kernels::lut::{self, LUT_ROWS};
use turboinfer::kernels::{lut_kernels, lut_q4_0};
use turboinfer::quant::{self, GgmlType, QK, QK_K};

/// Bytes of a Q2_K super-block.
const Q2K: usize = 84;
/// Bytes of a Q4_0 block.
const Q40: usize = 18;

/// One LUT layout: its weight type, elements and bytes per block, packed block and table sizes,
/// and its packing and table builders.
struct Layout {
    ty: GgmlType,
    elems: usize,
    bytes: usize,
    packed_block: usize,
    table_bytes: usize,
    pack: fn(usize, usize, &[u8], &mut [u8]),
    tables: fn(usize, &[u8], &mut [u8]),
}

const Q2_K: Layout = Layout {
    ty: GgmlType::Q2_K,
    elems: QK_K,
    bytes: Q2K,
    packed_block: lut::LUT_BLOCK,
    table_bytes: lut::TABLE_BYTES,
    pack: lut::pack_q2_k,
    tables: lut::build_tables,
};

const Q4_0: Layout = Layout {
    ty: GgmlType::Q4_0,
    elems: QK,
    bytes: Q40,
    packed_block: lut_q4_0::LUT_BLOCK,
    table_bytes: lut_q4_0::TABLE_BYTES,
    pack: lut_q4_0::pack_q4_0,
    tables: lut_q4_0::build_tables,
};

/// A random matrix of `l`'s type; with `extreme`, every block's codes and scales set to `fill`
/// (Q2_K: every code 3, every scale and min 15; Q4_0: every code `fill` nibble, the scale kept).
fn matrix(rng: &mut Rng, l: &Layout, rows: usize, cols: usize, extreme: Option<u8>) -> Vec<u8> {
    let mut m: Vec<u8> = (0..rows).flat_map(|_| random_row(rng, l.ty, cols)).collect();
    if let Some(fill) = extreme {
        for b in m.chunks_exact_mut(l.bytes) {
            match l.ty {
                GgmlType::Q2_K => b[..80].fill(fill),
                _ => b[2..].fill(fill),
            }
        }
    }
    m
}

/// Activations of `cols` elements in `l`'s activation format; with `extreme`, every code ±127 of
/// one sign.
fn activation(rng: &mut Rng, l: &Layout, cols: usize, extreme: Option<f32>) -> Vec<u8> {
    let x = match extreme {
        Some(s) => vec![s; cols],
        None => activations(rng, cols),
    };
    let at = quant::activation_type(l.ty);
    let mut a = vec![0u8; quant::row_size(at, cols).unwrap()];
    quant::quantize_row(at, &x, &mut a).unwrap();
    a
}

/// Checks every LUT kernel of `l` against the reference on one matrix and vector.
fn check(l: &Layout, rows: usize, cols: usize, w: &[u8], act: &[u8], what: &str) {
    let nb = cols / l.elems;
    let reference = quant::vec_dot_fn(l.ty).unwrap();
    let mut packed = vec![0u8; w.len()];
    (l.pack)(rows, cols, w, &mut packed);
    let mut tables = vec![0u8; nb * l.table_bytes];
    (l.tables)(nb, act, &mut tables);
    let rb = nb * l.bytes;
    for (name, f) in lut_kernels(l.ty) {
        for (g, group) in packed.chunks_exact(nb * l.packed_block).enumerate() {
            let mut out = [f32::NAN; LUT_ROWS];
            f(nb, group, act, &tables, &mut out);
            for (r, &o) in out.iter().enumerate() {
                let row = g * LUT_ROWS + r;
                let want = reference(cols, &w[row * rb..(row + 1) * rb], act);
                assert_eq!(
                    o.to_bits(),
                    want.to_bits(),
                    "{} {name}, {what}: row {row}: {o} != {want}",
                    l.ty
                );
            }
        }
    }
}

#[test]
fn every_lut_kernel_equals_the_reference() {
    for l in [&Q2_K, &Q4_0] {
        let names: Vec<_> = lut_kernels(l.ty).iter().map(|k| k.0).collect();
        eprintln!("{} LUT kernels on this CPU: {names:?}", l.ty);
        assert!(names.len() > 1 || cfg!(not(any(target_arch = "x86_64", target_arch = "aarch64"))));
        let mut rng = Rng::new(0x1u64 << 40 | 0x7ab1e);
        // One block, a few (odd and even counts: the Q4_0 lanes alternate by block parity), and
        // the 1.5B model's row lengths (1536, 8960).
        for (rows, cols) in
            [(32usize, 256usize), (64, 768), (32, 1536), (32, 8960), (32, 32), (32, 96)]
        {
            if !cols.is_multiple_of(l.elems) {
                continue;
            }
            assert!(
                lut::lut_packable(l.ty, rows, cols) || lut_q4_0::lut_packable(l.ty, rows, cols)
            );
            for _ in 0..3 {
                let w = matrix(&mut rng, l, rows, cols, None);
                let a = activation(&mut rng, l, cols, None);
                check(l, rows, cols, &w, &a, &format!("random {rows}x{cols}"));
            }
        }
        // The largest sums: Q2_K codes 3, scales and mins 15; Q4_0 codes -8 (nibble 0) and 7
        // (nibble 15); activations all +127 or all -127.
        let fills: &[u8] = if l.ty == GgmlType::Q2_K { &[0xFF] } else { &[0x00, 0xFF, 0x0F] };
        for &fill in fills {
            for s in [1.0f32, -1.0] {
                let w = matrix(&mut rng, l, 32, 512, Some(fill));
                let a = activation(&mut rng, l, 512, Some(s));
                check(l, 32, 512, &w, &a, &format!("extreme {fill:#x} {s}"));
            }
        }
    }
}

#[test]
fn packing_refuses_what_it_cannot_hold() {
    assert!(!lut::lut_packable(GgmlType::Q4_K, 32, 256));
    assert!(!lut::lut_packable(GgmlType::Q2_K, 16, 256));
    assert!(!lut::lut_packable(GgmlType::Q2_K, 32, 128));
    assert!(!lut_q4_0::lut_packable(GgmlType::Q4_1, 32, 32));
    assert!(!lut_q4_0::lut_packable(GgmlType::Q4_0, 16, 32));
    assert!(!lut_q4_0::lut_packable(GgmlType::Q4_0, 32, 48));
    assert!(lut_kernels(GgmlType::Q4_K).is_empty());
    let r = std::panic::catch_unwind(|| lut::pack_q2_k(32, 256, &[0u8; 10], &mut [0u8; 10]));
    assert!(r.is_err());
    let r = std::panic::catch_unwind(|| lut_q4_0::pack_q4_0(32, 32, &[0u8; 10], &mut [0u8; 10]));
    assert!(r.is_err());
}
