//! An activation row as the kernels read it: ggml's blocks, then, for the 32-element formats'
//! activations (Q8_0, Q8_1), every block's f16 scales again as f32.
//!
//! ```text
//! Q8_0, n elements, nb = n/32:  [nb × 34-byte block][nb × f32 d]             nb × 38 bytes
//! Q8_1:                         [nb × 36-byte block][nb × (f32 d, f32 s)]     nb × 44 bytes
//! Q8_K, F32:                    ggml's row, nothing after it
//! ```
//!
//! The f32 values are the blocks' own f16 values converted, which is exact, so no result changes.
//! Why: a quantized matmul converts each activation scale once per weight row (thousands of times
//! per row of activations); converted here, once, the SIMD kernels broadcast it from memory
//! instead. On the avx2 tier that made one vector 1.12× (Q5_0), 1.15× (Q8_0) and 1.25× (Q4_1) the
//! weight GB/s (`cargo bench --bench kernels -- --tiers avx2`): the f16 conversion sat in the
//! innermost loop beside an integer dot of 32 elements.
//!
//! `ops::SharedActs` is the one producer in the engine; `quantize` is the same for tests and
//! benchmarks. The scalar reference (`quant::vec_dot`) reads the blocks only (`blocks`).

use crate::quant::{self, block_bytes, bytes, GgmlType, QuantError, QuantizeFn};

/// Bytes of a Q8_0 activation block as the kernels read it: the block and its f32 scale.
pub(crate) const Q8_0_ACT: usize = block_bytes::Q8_0 + 4;
/// Bytes of a Q8_1 activation block as the kernels read it: the block, its f32 scale and sum.
pub(crate) const Q8_1_ACT: usize = block_bytes::Q8_1 + 8;

/// The f16 values of one block of `ty` that are repeated as f32 after the blocks: their byte
/// offsets in the block (Q8_0: `d`; Q8_1: `d`, `s`).
fn scale_offsets(ty: GgmlType) -> &'static [usize] {
    match ty {
        GgmlType::Q8_0 => &[0],
        GgmlType::Q8_1 => &[0, 2],
        _ => &[],
    }
}

/// Bytes of an activation row of `n` elements of `ty` as the kernels read it.
pub fn act_row_bytes(ty: GgmlType, n: usize) -> Result<usize, QuantError> {
    Ok(quant::row_size(ty, n)? + scale_bytes(ty, n))
}

/// Bytes of the f32 scales after the blocks of a row of `n` elements of `ty` (`n` whole blocks).
pub fn scale_bytes(ty: GgmlType, n: usize) -> usize {
    match scale_offsets(ty).len() {
        0 => 0,
        k => n / ty.block_size() * 4 * k,
    }
}

/// The ggml blocks of activation row `row` (`n` elements of `ty`), what the reference reads.
pub fn blocks(ty: GgmlType, n: usize, row: &[u8]) -> &[u8] {
    &row[..quant::row_size(ty, n).expect("n is a whole number of blocks")]
}

/// Quantizes `x` into `dst` (`act_row_bytes(ty, x.len())` bytes) with quantizer `f` of `ty`, then
/// writes the f32 copies of the block scales after the blocks.
pub fn quantize_with(f: QuantizeFn, ty: GgmlType, x: &[f32], dst: &mut [u8]) {
    let g = quant::row_size(ty, x.len()).expect("x is a whole number of blocks");
    assert_eq!(dst.len(), act_row_bytes(ty, x.len()).expect("checked above"), "activation row");
    let (blocks, side) = dst.split_at_mut(g);
    f(x, blocks);
    let offs = scale_offsets(ty);
    if offs.is_empty() {
        return;
    }
    let side = side.chunks_exact_mut(4);
    let values =
        blocks.chunks_exact(ty.type_size()).flat_map(|b| offs.iter().map(move |&o| &b[o..o + 2]));
    for (out, h) in side.zip(values) {
        out.copy_from_slice(&bytes::f16_at(h).to_le_bytes());
    }
}

/// `x` quantized to activation type `ty` by the reference quantizer, as the kernels read it.
pub fn quantize(ty: GgmlType, x: &[f32]) -> Result<Vec<u8>, QuantError> {
    let f = quant::quantize_row_fn(ty).ok_or(QuantError::Unsupported { ty, op: "quantize" })?;
    let mut row = vec![0u8; act_row_bytes(ty, x.len())?];
    quantize_with(f, ty, x, &mut row);
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The f32 copies follow the blocks and equal their f16 scales (and Q8_1's sums).
    #[test]
    fn side_scales_repeat_the_block_scales() {
        let x: Vec<f32> = (0..96).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37).collect();
        for (ty, per) in [(GgmlType::Q8_0, 1), (GgmlType::Q8_1, 2), (GgmlType::Q8_K, 0)] {
            let n = if ty == GgmlType::Q8_K { 256 } else { x.len() };
            let x: Vec<f32> = (0..n).map(|i| x[i % x.len()]).collect();
            let row = quantize(ty, &x).unwrap();
            let g = quant::row_size(ty, n).unwrap();
            assert_eq!(row.len(), g + n / ty.block_size() * 4 * per, "{ty}");
            let mut want = vec![0u8; g];
            quant::quantize_row(ty, &x, &mut want).unwrap();
            assert_eq!(blocks(ty, n, &row), &want[..], "{ty}");
            for (b, block) in want.chunks_exact(ty.type_size()).enumerate() {
                for k in 0..per {
                    let side = bytes::f32_at(&row[g + 4 * (b * per + k)..]);
                    assert_eq!(
                        side.to_bits(),
                        bytes::f16_at(&block[2 * k..]).to_bits(),
                        "{ty} {b} {k}"
                    );
                }
            }
        }
    }
}
