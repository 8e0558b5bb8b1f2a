//! The tensor element types of GGUF/ggml and their block geometry.

/// A ggml tensor type, numbered as in GGUF files (`ggml_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    I8,
    I16,
    I32,
    I64,
    F64,
    BF16,
}

/// Elements per super-block of the K-quants (`QK_K` in ggml).
pub const QK_K: usize = 256;
/// Elements per block of the legacy 32-wide quants (`QK4_0`, `QK8_0`, … in ggml).
pub const QK: usize = 32;

impl GgmlType {
    /// Maps the numeric id stored in a GGUF tensor info; `None` for ids we do not know the layout of.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        use GgmlType::*;
        // Ids 4 and 5 (Q4_2, Q4_3) were removed from ggml; 16..=23 and 29, 31.. are i-quants/others we do not read.
        Some(match id {
            0 => F32,
            1 => F16,
            2 => Q4_0,
            3 => Q4_1,
            6 => Q5_0,
            7 => Q5_1,
            8 => Q8_0,
            9 => Q8_1,
            10 => Q2_K,
            11 => Q3_K,
            12 => Q4_K,
            13 => Q5_K,
            14 => Q6_K,
            15 => Q8_K,
            24 => I8,
            25 => I16,
            26 => I32,
            27 => I64,
            28 => F64,
            30 => BF16,
            _ => return None,
        })
    }

    /// The numeric GGUF id of this type (`const`, so kernels can use it as a const generic).
    pub const fn id(self) -> u32 {
        use GgmlType::*;
        match self {
            F32 => 0,
            F16 => 1,
            Q4_0 => 2,
            Q4_1 => 3,
            Q5_0 => 6,
            Q5_1 => 7,
            Q8_0 => 8,
            Q8_1 => 9,
            Q2_K => 10,
            Q3_K => 11,
            Q4_K => 12,
            Q5_K => 13,
            Q6_K => 14,
            Q8_K => 15,
            I8 => 24,
            I16 => 25,
            I32 => 26,
            I64 => 27,
            F64 => 28,
            BF16 => 30,
        }
    }

    /// Elements per block (1 for plain types).
    /// Elements per block (1 for the float and integer types): `quant::Format::ELEMENTS`.
    pub fn block_size(self) -> usize {
        super::info(self).map_or(1, |f| f.elements)
    }

    /// Bytes per block: `quant::Format::BYTES`, or the element size of a type the engine does not
    /// read.
    pub fn type_size(self) -> usize {
        use GgmlType::*;
        match super::info(self) {
            Some(f) => f.bytes,
            None => match self {
                I8 => 1,
                I16 => 2,
                I32 => 4,
                _ => 8, // I64, F64
            },
        }
    }

    pub fn row_bytes(self, n: u64) -> Option<u64> {
        let bs = self.block_size() as u64;
        if !n.is_multiple_of(bs) {
            return None;
        }
        (n / bs).checked_mul(self.type_size() as u64)
    }

    /// The name ggml uses for this type (e.g. `q4_K`).
    pub fn name(self) -> &'static str {
        use GgmlType::*;
        match self {
            F32 => "f32",
            F16 => "f16",
            Q4_0 => "q4_0",
            Q4_1 => "q4_1",
            Q5_0 => "q5_0",
            Q5_1 => "q5_1",
            Q8_0 => "q8_0",
            Q8_1 => "q8_1",
            Q2_K => "q2_K",
            Q3_K => "q3_K",
            Q4_K => "q4_K",
            Q5_K => "q5_K",
            Q6_K => "q6_K",
            Q8_K => "q8_K",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            F64 => "f64",
            BF16 => "bf16",
        }
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_match_ggml() {
        for id in 0..64 {
            if let Some(t) = GgmlType::from_id(id) {
                assert_eq!(t.id(), id);
            }
        }
        // Sizes of ggml's block structs (ggml-common.h static asserts).
        assert_eq!(GgmlType::Q4_0.type_size(), 18);
        assert_eq!(GgmlType::Q4_1.type_size(), 20);
        assert_eq!(GgmlType::Q5_0.type_size(), 22);
        assert_eq!(GgmlType::Q8_0.type_size(), 34);
        assert_eq!(GgmlType::Q8_1.type_size(), 36);
        assert_eq!(GgmlType::Q2_K.type_size(), 84);
        assert_eq!(GgmlType::Q3_K.type_size(), 110);
        assert_eq!(GgmlType::Q4_K.type_size(), 144);
        assert_eq!(GgmlType::Q5_K.type_size(), 176);
        assert_eq!(GgmlType::Q6_K.type_size(), 210);
        assert_eq!(GgmlType::Q8_K.type_size(), 292);
        assert_eq!(GgmlType::Q4_K.row_bytes(1536), Some(6 * 144));
        assert_eq!(GgmlType::Q4_K.row_bytes(896), None);
    }
}
