//! The `Q4_K×16` / `Q6_K×16` packed layouts: Q4_K weight rows interleaved sixteen at a time, so that one 64-byte
//! vector holds the same four code bytes of sixteen rows and a dot product runs "rows in lanes"
//! (`vpdpbusd` of sixteen rows against one broadcast group of four activation bytes).
//!
//! A matrix of `rows` (a multiple of `PACK_ROWS`) Q4_K rows of `nb` super-blocks is a sequence of
//! row groups; group `g` (rows `16g..16g+16`) is `nb` packed blocks of `16 * 144` bytes, block `b`
//! being super-block `b` of its sixteen rows:
//! ```text
//! [0..32)      d        f16  × 16   row r at 2r
//! [32..64)     dmin     f16  × 16
//! [64..128)    scales bytes 0..4 of row r at 64 + 4r   (the 12 packed 6-bit scales/mins, as u32s)
//! [128..192)   scales bytes 4..8
//! [192..256)   scales bytes 8..12
//! [256..2304)  qs: for q in 0..32, bytes 4q..4q+4 of row r's 128 code bytes at 256 + 64q + 4r
//! ```
//! Q6_K matrices (`Q6_K×16`) are packed the same way, `16 * 210` bytes per packed block:
//! ```text
//! [0..32)      d        f16  × 16   row r at 2r
//! [32..288)    scales: for u in 0..4, scales 4u..4u+4 (i8) of row r at 32 + 64u + 4r
//! [288..2336)  ql: for q in 0..32, bytes 4q..4q+4 of row r's 128 low-bit bytes at 288 + 64q + 4r
//! [2336..3360) qh: for q in 0..16, bytes 4q..4q+4 of row r's 64 high-bit bytes at 2336 + 64q + 4r
//! ```
//! The layout is a pure permutation of the GGUF bytes (same size, no rounding), so a packed matrix
//! holds exactly the same weights; a group occupies the same byte range as its rows do unpacked.

use crate::quant::{block_bytes, GgmlType, QK_K};

/// Rows interleaved per group.
pub const PACK_ROWS: usize = 16;
/// Bytes of one Q4_K super-block.
const Q4K: usize = block_bytes::Q4_K;
/// Bytes of one Q6_K super-block.
const Q6K: usize = block_bytes::Q6_K;
/// Bytes of a packed Q4_K block (sixteen super-blocks).
pub const PACKED_BLOCK: usize = PACK_ROWS * Q4K;
/// Bytes of a packed Q6_K block.
pub const PACKED_BLOCK_Q6K: usize = PACK_ROWS * Q6K;
/// Offsets of the scales, `ql` and `qh` arrays in a packed Q6_K block.
pub(crate) const Q6X_SCALES: usize = 32;
pub(crate) const Q6X_QL: usize = 288;
pub(crate) const Q6X_QH: usize = 2336;

/// Dot products of one packed row group with activation vectors: `out[v*16 + r] = dot(row r, vector v)`
/// for `v < out.len() / 16`, vectors `stride` bytes apart in `acts` (Q8_K rows of `n` elements),
/// `w` the group's `16 * row_bytes(n)` packed bytes. Every output is bitwise the reference dot
/// product of the unpacked row (`crate::quant`, the numeric contract's super-block chain), whatever
/// the tier, the vector count or the position of the vector in the batch.
pub type PackedDotFn = fn(n: usize, w: &[u8], acts: &[u8], stride: usize, out: &mut [f32]);

/// Whether a matrix of `ty` with `rows` rows of `cols` elements can be packed: Q4_K or Q6_K in
/// the ×16 layouts here, Q2_K in the lookup-table layout `Q2_K×32` (`kernels::lut`, the layout of
/// the LUT GEMV, which the forward pass uses where it is measured faster: `KernelSet::lut`).
pub fn packable(ty: GgmlType, rows: usize, cols: usize) -> bool {
    if ty == GgmlType::Q2_K {
        return super::lut::lut_packable(ty, rows, cols);
    }
    matches!(ty, GgmlType::Q4_K | GgmlType::Q6_K)
        && rows > 0
        && rows.is_multiple_of(PACK_ROWS)
        && cols > 0
        && cols.is_multiple_of(QK_K)
}

/// Packs a matrix of `ty` (Q4_K, Q6_K or Q2_K; see `pack_q4_k`, `pack_q6_k`, `lut::pack_q2_k`).
pub fn pack(ty: GgmlType, rows: usize, cols: usize, src: &[u8], dst: &mut [u8]) {
    match ty {
        GgmlType::Q6_K => pack_q6_k(rows, cols, src, dst),
        GgmlType::Q2_K => super::lut::pack_q2_k(rows, cols, src, dst),
        _ => pack_q4_k(rows, cols, src, dst),
    }
}

/// Copies `len`-byte unit `u` of each of the sixteen `rows` (GGUF blocks at `row(r)`, the unit at
/// byte `from + len*u`) to `dst[at + 64u + 4r]`: the "four bytes of every row" interleave.
fn interleave(
    dst: &mut [u8],
    at: usize,
    units: usize,
    from: usize,
    row: impl Fn(usize) -> usize,
    src: &[u8],
) {
    for r in 0..PACK_ROWS {
        for u in 0..units {
            let o = at + 64 * u + 4 * r;
            let i = row(r) + from + 4 * u;
            dst[o..o + 4].copy_from_slice(&src[i..i + 4]);
        }
    }
}

/// The inverse of `interleave` for row `r` of one packed block `pd`: for each `(at, units, to)`,
/// unit `u` at `pd[at + 64u + 4r]` back to `x[to + 4u]`.
fn deinterleave(x: &mut [u8], pd: &[u8], r: usize, parts: &[(usize, usize, usize)]) {
    for &(at, units, to) in parts {
        for u in 0..units {
            x[to + 4 * u..to + 4 * u + 4]
                .copy_from_slice(&pd[at + 64 * u + 4 * r..at + 64 * u + 4 * r + 4]);
        }
    }
}

/// Packs `rows` Q6_K rows of `cols` elements (`src`, GGUF order) into `dst` (same length).
/// Panics unless `packable(Q6_K, rows, cols)` and both slices hold exactly the matrix.
pub fn pack_q6_k(rows: usize, cols: usize, src: &[u8], dst: &mut [u8]) {
    assert!(packable(GgmlType::Q6_K, rows, cols), "not a packable Q6_K matrix: {rows}x{cols}");
    let nb = cols / QK_K;
    let rb = nb * Q6K;
    assert!(src.len() == rows * rb && dst.len() == src.len(), "packed matrix size mismatch");
    for (gs, gd) in src.chunks_exact(PACK_ROWS * rb).zip(dst.chunks_exact_mut(PACK_ROWS * rb)) {
        for (b, pd) in gd.chunks_exact_mut(PACKED_BLOCK_Q6K).enumerate() {
            let row = |r: usize| r * rb + b * Q6K;
            for r in 0..PACK_ROWS {
                pd[2 * r..2 * r + 2].copy_from_slice(&gs[row(r) + 208..row(r) + 210]);
            }
            interleave(pd, Q6X_SCALES, 4, 192, row, gs);
            interleave(pd, Q6X_QL, 32, 0, row, gs);
            interleave(pd, Q6X_QH, 16, 128, row, gs);
        }
    }
}

/// Row `r` (< 16) of super-block `b` of a packed Q6_K group, back in GGUF order (tests, reference).
pub fn unpack_block_q6_k(group: &[u8], b: usize, r: usize) -> [u8; Q6K] {
    let pd = &group[b * PACKED_BLOCK_Q6K..(b + 1) * PACKED_BLOCK_Q6K];
    let mut x = [0u8; Q6K];
    x[208..210].copy_from_slice(&pd[2 * r..2 * r + 2]);
    deinterleave(&mut x, pd, r, &[(Q6X_SCALES, 4, 192), (Q6X_QL, 32, 0), (Q6X_QH, 16, 128)]);
    x
}

/// Packs `rows` Q4_K rows of `cols` elements (`src`, GGUF order) into `dst` (same length).
/// Panics unless `packable(Q4_K, rows, cols)` and both slices hold exactly the matrix.
pub fn pack_q4_k(rows: usize, cols: usize, src: &[u8], dst: &mut [u8]) {
    assert!(packable(GgmlType::Q4_K, rows, cols), "not a packable Q4_K matrix: {rows}x{cols}");
    let nb = cols / QK_K;
    let rb = nb * Q4K;
    assert!(src.len() == rows * rb && dst.len() == src.len(), "packed matrix size mismatch");
    for (gs, gd) in src.chunks_exact(PACK_ROWS * rb).zip(dst.chunks_exact_mut(PACK_ROWS * rb)) {
        for (b, pd) in gd.chunks_exact_mut(PACKED_BLOCK).enumerate() {
            let row = |r: usize| r * rb + b * Q4K;
            for r in 0..PACK_ROWS {
                pd[2 * r..2 * r + 2].copy_from_slice(&gs[row(r)..row(r) + 2]);
                pd[32 + 2 * r..32 + 2 * r + 2].copy_from_slice(&gs[row(r) + 2..row(r) + 4]);
            }
            interleave(pd, 64, 3, 4, row, gs); // the 12 scale bytes
            interleave(pd, 256, 32, 16, row, gs); // the 128 code bytes
        }
    }
}

/// Row `r` (< 16) of super-block `b` of a packed group, back in GGUF order (tests, reference).
pub fn unpack_block(group: &[u8], b: usize, r: usize) -> [u8; Q4K] {
    let pd = &group[b * PACKED_BLOCK..(b + 1) * PACKED_BLOCK];
    let mut x = [0u8; Q4K];
    x[0..2].copy_from_slice(&pd[2 * r..2 * r + 2]);
    x[2..4].copy_from_slice(&pd[32 + 2 * r..32 + 2 * r + 2]);
    deinterleave(&mut x, pd, r, &[(64, 3, 4), (256, 32, 16)]);
    x
}
