//! T-MAC-style GEMV by table lookup for 2-bit weights (`Q2_K`), measured against the dot-product
//! kernels (`docs/performance.md`, "Lookup-table kernels"). The forward pass runs it for one-token
//! products of Q2_K matrices packed in this layout (`<model>.kx16`) on the tiers where it was
//! measured faster (`kernels::select::lut_for`).
//!
//! The idea (T-MAC, Wei et al. 2024): a b-bit weight code is b one-bit planes. For every group of
//! four consecutive activations `a[4k..4k+4]` the sixteen possible sums `T_k[i] = Σ_{bit j of i}
//! a[4k+j]` are computed once per activation vector; a weight row then needs, per plane and group,
//! one lookup of `T_k` at the 4-bit index formed by its codes' bits, and the code sum is
//! `Σ_k T_k[idx0] + 2·Σ_k T_k[idx1]`. A byte shuffle (`vpshufb`, NEON `tbl`) performs 16–32
//! lookups at once: the table of one group against the indices of 32 rows.
//!
//! **Exactness.** The numeric contract (`quant::contract`) fixes only the float work; integer sums
//! are free. The tables are built from the Q8_K activation codes, so every lookup is an exact
//! integer, and the per-row `isum`/`summs` of a super-block equal the reference's (`quant::q2_k`);
//! the float chain is the same two FMAs per super-block. So the LUT result is bitwise the dot
//! product's, which `tests/lut_parity.rs` checks on every tier the CPU has. A table entry spans
//! `[-508, 508]` (four codes of at most 127 in magnitude: the Q8_K quantizer never emits −128),
//! which a byte cannot hold: each table is stored as its low bytes (u8) and high bytes
//! (`T >> 8`, in `[-2, 1]`), two shuffles per lookup, recombined in 16-bit lanes.
//!
//! **Layout** (`Q2_K×32`): `LUT_ROWS` = 32 rows interleaved per group, a pure rearrangement of the
//! rows' Q2_K bits (same size: 32 × 84 bytes per super-block):
//! ```text
//! [0..64)      d     f16 × 32     row r at 2r
//! [64..128)    dmin  f16 × 32
//! [128..640)   scales: sub-block g (0..16) of row r at 128 + 32g + r  (low nibble scale, high min)
//! [640..2688)  indices: plane p (0..2), quad pair j (0..32): row r at 640 + 1024p + 32j + r,
//!              low nibble = plane-p bits of the codes of quad 2j (element 4·2j + i at bit i),
//!              high nibble = those of quad 2j + 1
//! ```
//! **Tables** (per Q8_K activation super-block, `TABLE_BYTES` = 2048): quad k (0..64) at 32k:
//! sixteen low bytes, then sixteen high bytes, entry i = `T_k[i]`.

use crate::quant::{block_bytes, GgmlType, QK_K};

/// Rows interleaved per group: one 256-bit vector of index bytes.
pub const LUT_ROWS: usize = 32;
/// Bytes of one Q2_K super-block.
const Q2K: usize = block_bytes::Q2_K;
/// Bytes of a packed group's super-block.
pub const LUT_BLOCK: usize = LUT_ROWS * Q2K;
/// Quads (groups of four elements) per super-block.
const QUADS: usize = QK_K / 4;
/// Table bytes per activation super-block: per quad sixteen low and sixteen high bytes.
pub const TABLE_BYTES: usize = QUADS * 32;
/// Offsets in a packed super-block.
pub(crate) const OFF_DMIN: usize = 64;
pub(crate) const OFF_SCALES: usize = 128;
pub(crate) const OFF_IDX: usize = 640;
/// Bytes of one plane's indices in a packed super-block.
pub(crate) const PLANE: usize = 1024;

/// Q8_K activation block: size and field offsets (`quant::q8_k`).
const Q8K_BYTES: usize = block_bytes::Q8_K;
use crate::quant::q8k_layout::{BSUMS as Q8K_BSUMS, QS as Q8K_QS};

/// A group's GEMV: `out[r] = dot(row r, activation)` for the 32 rows of the packed group `w`
/// (`nb` packed super-blocks), `act` the Q8_K activation row and `tables` its tables
/// ([`build_tables`]). Bitwise the Q2_K reference dot product of each row.
pub type LutGemvFn = fn(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]);

/// A LUT kernel with what a matrix product needs around it: the activation blocks it reads, the
/// tables to build per activation vector, and the GEMV of one 32-row group. What `KernelSet::lut`
/// hands out where the measurements say a LUT beats the dot product (`kernels::select`).
#[derive(Clone, Copy, Debug)]
pub struct LutKernel {
    /// Elements per activation block (and per packed block): 256 for Q2_K, 32 for Q4_0.
    pub block: usize,
    /// Table bytes per activation block.
    pub table_bytes: usize,
    /// Builds the tables of `nb` activation blocks (`build_tables`).
    pub build_tables: fn(nb: usize, act: &[u8], tables: &mut [u8]),
    /// The GEMV of one packed group of `LUT_ROWS` rows.
    pub gemv: LutGemvFn,
}

/// Whether a matrix can be packed for the LUT kernel (Q2_K, whole groups, whole super-blocks).
pub fn lut_packable(ty: GgmlType, rows: usize, cols: usize) -> bool {
    ty == GgmlType::Q2_K
        && rows > 0
        && rows.is_multiple_of(LUT_ROWS)
        && cols > 0
        && cols.is_multiple_of(QK_K)
}

/// Packs a Q2_K matrix (`rows` × `cols`, `src` its GGUF bytes) into `dst` (the same size).
///
/// Panics unless [`lut_packable`] and both slices have the matrix's size.
pub fn pack_q2_k(rows: usize, cols: usize, src: &[u8], dst: &mut [u8]) {
    assert!(lut_packable(GgmlType::Q2_K, rows, cols), "not a packable Q2_K matrix");
    let nb = cols / QK_K;
    assert!(src.len() == rows * nb * Q2K && dst.len() == src.len(), "matrix size");
    for (gi, group) in dst.chunks_exact_mut(nb * LUT_BLOCK).enumerate() {
        for (b, out) in group.chunks_exact_mut(LUT_BLOCK).enumerate() {
            out.fill(0);
            for r in 0..LUT_ROWS {
                let row = gi * LUT_ROWS + r;
                let x = &src[(row * nb + b) * Q2K..][..Q2K];
                out[2 * r..2 * r + 2].copy_from_slice(&x[80..82]);
                out[OFF_DMIN + 2 * r..OFF_DMIN + 2 * r + 2].copy_from_slice(&x[82..84]);
                for g in 0..QK_K / 16 {
                    out[OFF_SCALES + LUT_ROWS * g + r] = x[g];
                }
                let codes = codes(x);
                for p in 0..2 {
                    for k in 0..QUADS {
                        let nib = (0..4).fold(0u8, |n, i| n | ((codes[4 * k + i] >> p) & 1) << i);
                        out[OFF_IDX + PLANE * p + LUT_ROWS * (k / 2) + r] |= nib << (4 * (k % 2));
                    }
                }
            }
        }
    }
}

/// The 256 codes (0..=3) of a Q2_K super-block in element order (`quant::q2_k`'s layout: element
/// e at byte `16 + 32·(e/128) + e%32`, bits `2·((e%128)/32)`).
fn codes(x: &[u8]) -> [u8; QK_K] {
    std::array::from_fn(|e| (x[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3)
}

/// Builds the lookup tables of a Q8_K activation row of `nb` super-blocks into `tables`
/// (`nb * TABLE_BYTES` bytes). Done once per activation vector; every matrix reading that vector
/// (q/k/v, gate/up) can share them.
pub fn build_tables(nb: usize, act: &[u8], tables: &mut [u8]) {
    assert!(act.len() >= nb * Q8K_BYTES && tables.len() >= nb * TABLE_BYTES, "sizes");
    for b in 0..nb {
        let q = &act[b * Q8K_BYTES + Q8K_QS..][..QK_K];
        let t = &mut tables[b * TABLE_BYTES..][..TABLE_BYTES];
        for k in 0..QUADS {
            quad_table(&q[4 * k..4 * k + 4], &mut t[32 * k..32 * k + 32]);
        }
    }
}

/// The 32 table bytes of one quad of activation codes `q` (four i8 as bytes): entry `i` (the sum
/// of the codes whose bit is set in `i`) as its low byte at `t[i]` and its high byte (in `[-2, 1]`:
/// `|entry| ≤ 4·128`) at `t[16 + i]`. Shared by every LUT layout (`lut_q4_0` too).
pub(crate) fn quad_table(q: &[u8], t: &mut [u8]) {
    // Entry i is entry i without its lowest set bit, plus that bit's activation.
    let mut e = [0i32; 16];
    for i in 1..16usize {
        e[i] = e[i & (i - 1)] + q[i.trailing_zeros() as usize] as i8 as i32;
    }
    for (i, &s) in e.iter().enumerate() {
        t[i] = s as u8; // low byte
        t[16 + i] = (s >> 8) as u8; // high byte
    }
}

/// Reads a table entry back from its two bytes.
#[inline(always)]
pub(crate) fn entry(t: &[u8], k: usize, i: usize) -> i32 {
    t[32 * k + i] as i32 + 256 * (t[32 * k + 16 + i] as i8 as i32)
}

/// The scalar reference of the LUT GEMV: the same lookups, one row at a time.
pub fn gemv_scalar(nb: usize, w: &[u8], act: &[u8], tables: &[u8], out: &mut [f32; LUT_ROWS]) {
    use crate::quant::bytes::{f16_at, f32_at};
    use crate::quant::contract::chain;
    let mut acc = [0.0f32; LUT_ROWS];
    for b in 0..nb {
        let x = &w[b * LUT_BLOCK..][..LUT_BLOCK];
        let y = &act[b * Q8K_BYTES..][..Q8K_BYTES];
        let t = &tables[b * TABLE_BYTES..][..TABLE_BYTES];
        let dy = f32_at(y);
        for (r, a) in acc.iter_mut().enumerate() {
            let (mut isum, mut summs) = (0i32, 0i32);
            for g in 0..QK_K / 16 {
                let sm = x[OFF_SCALES + LUT_ROWS * g + r];
                let mut s = 0i32;
                for k in 4 * g..4 * g + 4 {
                    for p in 0..2 {
                        let byte = x[OFF_IDX + PLANE * p + LUT_ROWS * (k / 2) + r];
                        s += entry(t, k, ((byte >> (4 * (k % 2))) & 15) as usize) << p;
                    }
                }
                isum += (sm & 15) as i32 * s;
                let bsum = i16::from_le_bytes([y[Q8K_BSUMS + 2 * g], y[Q8K_BSUMS + 2 * g + 1]]);
                summs += (sm >> 4) as i32 * bsum as i32;
            }
            *a = chain(*a, isum, f16_at(&x[2 * r..]) * dy);
            *a = chain(*a, summs, -(f16_at(&x[OFF_DMIN + 2 * r..]) * dy));
        }
    }
    *out = acc;
}
