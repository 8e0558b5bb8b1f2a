//! Little-endian field readers/writers shared by the block formats.

use half::bf16;

/// Reads the f16 stored little-endian at `b[0..2]` as f32.
#[inline(always)]
pub(crate) fn f16_at(b: &[u8]) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[0], b[1]]))
}

/// Exact f16 → f32 conversion without branches on the common path (the scale of every block goes
/// through here, and the portable build cannot assume F16C): moving the 15 exponent+mantissa bits up
/// by 13 and multiplying by 2^112 rebiases the exponent (15 → 127) and normalizes subnormals exactly;
/// only inf/NaN (exponent 31) need their exponent forced to 255. Checked against `half` for all 65536 inputs.
#[inline(always)]
pub(crate) const fn f16_to_f32(h: u16) -> f32 {
    // 2^112 = 2^(127-15): the difference of the f32 and f16 exponent biases.
    const REBIAS: f32 = f32::from_bits((127 + 112) << 23);
    // Exponent field 31 (inf/NaN) after the 13-bit shift.
    const INF_NAN: u32 = 0x1F << 23;
    let em = (h as u32 & 0x7FFF) << 13;
    let sign = (h as u32 & 0x8000) << 16;
    let mag =
        if em >= INF_NAN { em | 0x7F80_0000 } else { (f32::from_bits(em) * REBIAS).to_bits() };
    f32::from_bits(mag | sign)
}

/// Every f16's f32 value, indexed by its bits (256 KiB, computed at compile time): the portable
/// scalar table's conversion of the 32-element formats' two to four scales per block, where
/// [`f16_to_f32`]'s dozen operations each weighed most (with the table the portable Q8_0, Q4_0,
/// Q5_0 and Q4_1 kernels ran 1.1-1.7× faster on one thread; llama.cpp too keeps such a table).
pub(crate) static F16_TABLE: [f32; 1 << 16] = {
    let mut t = [0.0f32; 1 << 16];
    let mut i = 0;
    while i < t.len() {
        t[i] = f16_to_f32(i as u16);
        i += 1;
    }
    t
};

/// [`f16_at`] by table lookup.
#[inline(always)]
pub(crate) fn f16_at_table(b: &[u8]) -> f32 {
    F16_TABLE[u16::from_le_bytes([b[0], b[1]]) as usize]
}

/// Writes `v` rounded to f16 (round-to-nearest-even, as `GGML_FP32_TO_FP16`) into `b[0..2]`.
#[inline(always)]
pub(crate) fn put_f16(b: &mut [u8], v: f32) {
    b[..2].copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
}

/// Reads the bf16 stored little-endian at `b[0..2]` as f32.
#[inline(always)]
pub(crate) fn bf16_at(b: &[u8]) -> f32 {
    bf16::from_le_bytes([b[0], b[1]]).to_f32()
}

/// Reads the f32 stored little-endian at `b[0..4]`.
#[inline(always)]
pub(crate) fn f32_at(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// Reads the i16 stored little-endian at `b[0..2]`.
#[inline(always)]
pub(crate) fn i16_at(b: &[u8]) -> i16 {
    i16::from_le_bytes([b[0], b[1]])
}

#[cfg(test)]
mod tests {
    /// The branch-light f16 conversion equals `half`'s for every one of the 65536 bit patterns.
    #[test]
    fn f16_to_f32_is_exact_for_all_inputs() {
        for h in 0..=u16::MAX {
            let ours = super::f16_to_f32(h);
            // The table (computed at compile time) holds the same bits.
            assert_eq!(super::F16_TABLE[h as usize].to_bits(), ours.to_bits(), "{h:#06x}");
            let reference = half::f16::from_bits(h).to_f32();
            if reference.is_nan() {
                assert!(ours.is_nan(), "{h:#06x}");
            } else {
                assert_eq!(ours.to_bits(), reference.to_bits(), "{h:#06x}");
            }
        }
    }
}
