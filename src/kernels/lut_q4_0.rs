//! T-MAC-style GEMV by table lookup for 4-bit weights (`Q4_0` as four one-bit planes), measured
//! against the Q4_0 dot-product kernels (`docs/performance.md`, "Lookup-table kernels"). Slower
//! than the dot product on every tier measured, so the forward pass does not use it
//! (`kernels::select::lut_for`).
//!
//! The method is `kernels::lut`'s (read that first): the sixteen subset sums of every quad of
//! activation codes are tabled once per activation vector ([`build_tables`], the same
//! [`quad_table`] as for Q2_K), and a weight row's quad sum is a shift-add of one lookup per
//! plane. What differs for Q4_0:
//! - **Four planes of a signed code.** Q4_0's value is `d·(nib − 8)`; `nib − 8` in 4-bit two's
//!   complement is `c = nib ^ 8`, whose bits `b0..b3` give `c = b0 + 2·b1 + 4·b2 − 8·b3`. So a
//!   quad's exact integer sum is `T[i0] + 2·T[i1] + 4·T[i2] − 8·T[i3]` (`i_p` the 4-bit index of
//!   the quad's plane-`p` bits): no bias term, plane 3 weighted −8. `|sum| ≤ 4·8·128 = 4096`.
//! - **The float work is the contract's sixteen quad lanes** (`quant::contract`, shape 2), not a
//!   chain: the sum of quad `k` of block `b` goes to lane `8·(b mod 2) + k` as
//!   `lane + sum·(d_w·d_a)` (product rounded, then the sum), and the lanes are folded by
//!   `fold16`. So per quad and row the LUT kernel does the same float work as the dot product,
//!   and its result is bitwise the Q4_0 reference (`tests/lut_parity.rs`).
//!
//! **Layout** (`Q4_0×32`): `LUT_ROWS` = 32 rows interleaved per 32-element block, a pure
//! rearrangement of the rows' Q4_0 bits (same size: 32 × 18 bytes per block):
//! ```text
//! [0..64)     d     f16 × 32     row r at 2r
//! [64..576)   indices: plane p (0..4), quad pair j (0..4): row r at 64 + 128p + 32j + r,
//!             low nibble = plane-p bits of the codes c of quad 2j (element 4·2j + i at bit i),
//!             high nibble = those of quad 2j + 1
//! ```
//! Planes `p` and quad pairs `j`, `j + 1` (j even) are 64 contiguous bytes: one 512-bit load.
//! **Tables** (per Q8_0 activation block, `TABLE_BYTES` = 256): quad k (0..8) at 32k, as
//! `kernels::lut`'s.

pub use super::lut::LUT_ROWS;
use super::lut::{entry, quad_table};
use crate::quant::{block_bytes, GgmlType, QK};

/// Bytes of one Q4_0 block (32 elements).
const Q40: usize = block_bytes::Q4_0;
/// Bytes of a packed group's block.
pub const LUT_BLOCK: usize = LUT_ROWS * Q40;
/// Quads per block.
const QUADS: usize = QK / 4;
/// Table bytes per activation block: per quad sixteen low and sixteen high bytes.
pub const TABLE_BYTES: usize = QUADS * 32;
/// Offset of the indices in a packed block.
pub(crate) const OFF_IDX: usize = 2 * LUT_ROWS;
/// Bytes of one plane's indices in a packed block.
pub(crate) const PLANE: usize = QUADS / 2 * LUT_ROWS;
/// Bytes of a Q8_0 activation block (f16 scale, 32 codes).
const Q80: usize = block_bytes::Q8_0;

/// Whether a matrix can be packed for the Q4_0 LUT kernel (Q4_0, whole groups, whole blocks).
pub fn lut_packable(ty: GgmlType, rows: usize, cols: usize) -> bool {
    ty == GgmlType::Q4_0
        && rows > 0
        && rows.is_multiple_of(LUT_ROWS)
        && cols > 0
        && cols.is_multiple_of(QK)
}

/// Packs a Q4_0 matrix (`rows` × `cols`, `src` its GGUF bytes) into `dst` (the same size).
///
/// Panics unless [`lut_packable`] and both slices have the matrix's size.
pub fn pack_q4_0(rows: usize, cols: usize, src: &[u8], dst: &mut [u8]) {
    assert!(lut_packable(GgmlType::Q4_0, rows, cols), "not a packable Q4_0 matrix");
    let nb = cols / QK;
    assert!(src.len() == rows * nb * Q40 && dst.len() == src.len(), "matrix size");
    for (gi, group) in dst.chunks_exact_mut(nb * LUT_BLOCK).enumerate() {
        for (b, out) in group.chunks_exact_mut(LUT_BLOCK).enumerate() {
            out.fill(0);
            for r in 0..LUT_ROWS {
                let x = &src[((gi * LUT_ROWS + r) * nb + b) * Q40..][..Q40];
                out[2 * r..2 * r + 2].copy_from_slice(&x[..2]);
                // Element e (< 16) is the low nibble of x[2 + e], e + 16 the high one (`quant::q4_0`);
                // `^ 8` makes it the two's complement code of `nib − 8`.
                let code = |e: usize| ((x[2 + e % 16] >> (4 * (e / 16))) & 15) ^ 8;
                for p in 0..4 {
                    for k in 0..QUADS {
                        let nib = (0..4).fold(0u8, |n, i| n | ((code(4 * k + i) >> p) & 1) << i);
                        out[OFF_IDX + PLANE * p + LUT_ROWS * (k / 2) + r] |= nib << (4 * (k % 2));
                    }
                }
            }
        }
    }
}

/// Builds the lookup tables of a Q8_0 activation row of `nb` blocks into `tables`
/// (`nb * TABLE_BYTES` bytes), once per activation vector.
pub fn build_tables(nb: usize, act: &[u8], tables: &mut [u8]) {
    assert!(act.len() >= nb * Q80 && tables.len() >= nb * TABLE_BYTES, "sizes");
    for b in 0..nb {
        let q = &act[b * Q80 + 2..][..QK];
        let t = &mut tables[b * TABLE_BYTES..][..TABLE_BYTES];
        for k in 0..QUADS {
            quad_table(&q[4 * k..4 * k + 4], &mut t[32 * k..32 * k + 32]);
        }
    }
}

/// The weight of plane `p` in a code: 1, 2, 4 and −8 (the two's complement sign bit).
pub(crate) const PLANE_WEIGHT: [i32; 4] = [1, 2, 4, -8];

/// The scalar reference of the Q4_0 LUT GEMV: the same lookups, one row at a time, and the
/// contract's quad lanes. `nb` blocks of 32 elements; signature of `lut::LutGemvFn`.
pub fn gemv_scalar(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    use crate::quant::bytes::f16_at;
    use crate::quant::contract::fold16;
    assert!(
        w.len() >= nb * LUT_BLOCK && act.len() >= nb * Q80 && tables.len() >= nb * TABLE_BYTES,
        "LUT GEMV operand sizes"
    );
    let mut lanes = [[0.0f32; 16]; LUT_ROWS];
    for b in 0..nb {
        let x = &w[b * LUT_BLOCK..][..LUT_BLOCK];
        let t = &tables[b * TABLE_BYTES..][..TABLE_BYTES];
        let da = f16_at(&act[b * Q80..]);
        for (r, lanes) in lanes.iter_mut().enumerate() {
            let scale = f16_at(&x[2 * r..]) * da;
            for k in 0..QUADS {
                let mut s = 0i32;
                for (p, &wp) in PLANE_WEIGHT.iter().enumerate() {
                    let byte = x[OFF_IDX + PLANE * p + LUT_ROWS * (k / 2) + r];
                    s += wp * entry(t, k, ((byte >> (4 * (k % 2))) & 15) as usize);
                }
                lanes[8 * (b % 2) + k] += s as f32 * scale;
            }
        }
    }
    *out = std::array::from_fn(|r| fold16(lanes[r]));
}
