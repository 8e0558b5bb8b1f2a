//! GGUF metadata values (`gguf_type` and the values it tags).

/// One metadata value. Arrays hold values of a single element type.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(MetaArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A typed array; the common big ones (vocabulary, merges, scores, token types) get dense storage.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
    /// Arrays of arrays: legal in GGUF, unused by the models we run.
    Array(Vec<MetaArray>),
}

impl MetaArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            MetaArray::U8(v) => v.len(),
            MetaArray::I8(v) => v.len(),
            MetaArray::U16(v) => v.len(),
            MetaArray::I16(v) => v.len(),
            MetaArray::U32(v) => v.len(),
            MetaArray::I32(v) => v.len(),
            MetaArray::F32(v) => v.len(),
            MetaArray::Bool(v) => v.len(),
            MetaArray::String(v) => v.len(),
            MetaArray::U64(v) => v.len(),
            MetaArray::I64(v) => v.len(),
            MetaArray::F64(v) => v.len(),
            MetaArray::Array(v) => v.len(),
        }
    }

    /// True when the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl MetaValue {
    /// The value as an unsigned integer, when it is any non-negative integer type.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetaValue::U8(v) => Some(v as u64),
            MetaValue::U16(v) => Some(v as u64),
            MetaValue::U32(v) => Some(v as u64),
            MetaValue::U64(v) => Some(v),
            MetaValue::I8(v) if v >= 0 => Some(v as u64),
            MetaValue::I16(v) if v >= 0 => Some(v as u64),
            MetaValue::I32(v) if v >= 0 => Some(v as u64),
            MetaValue::I64(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }

    /// The value as a float, when it is any numeric type.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetaValue::F32(v) => Some(v as f64),
            MetaValue::F64(v) => Some(v),
            MetaValue::I8(v) => Some(v as f64),
            MetaValue::I16(v) => Some(v as f64),
            MetaValue::I32(v) => Some(v as f64),
            MetaValue::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The value as a string slice.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            MetaValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&MetaArray> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            MetaValue::U8(_) => "u8",
            MetaValue::I8(_) => "i8",
            MetaValue::U16(_) => "u16",
            MetaValue::I16(_) => "i16",
            MetaValue::U32(_) => "u32",
            MetaValue::I32(_) => "i32",
            MetaValue::F32(_) => "f32",
            MetaValue::Bool(_) => "bool",
            MetaValue::String(_) => "string",
            MetaValue::Array(_) => "array",
            MetaValue::U64(_) => "u64",
            MetaValue::I64(_) => "i64",
            MetaValue::F64(_) => "f64",
        }
    }
}

/// GGUF `gguf_type` ids of the value kinds (the numbers stored before every value in a file).
pub mod type_id {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

impl MetaValue {
    /// The GGUF type id that tags this value in a file (see [`type_id`]).
    pub fn gguf_type_id(&self) -> u32 {
        match self {
            MetaValue::U8(_) => type_id::U8,
            MetaValue::I8(_) => type_id::I8,
            MetaValue::U16(_) => type_id::U16,
            MetaValue::I16(_) => type_id::I16,
            MetaValue::U32(_) => type_id::U32,
            MetaValue::I32(_) => type_id::I32,
            MetaValue::F32(_) => type_id::F32,
            MetaValue::Bool(_) => type_id::BOOL,
            MetaValue::String(_) => type_id::STRING,
            MetaValue::Array(_) => type_id::ARRAY,
            MetaValue::U64(_) => type_id::U64,
            MetaValue::I64(_) => type_id::I64,
            MetaValue::F64(_) => type_id::F64,
        }
    }
}

impl MetaArray {
    /// The GGUF type id of this array's elements (see [`type_id`]).
    pub fn element_type_id(&self) -> u32 {
        match self {
            MetaArray::U8(_) => type_id::U8,
            MetaArray::I8(_) => type_id::I8,
            MetaArray::U16(_) => type_id::U16,
            MetaArray::I16(_) => type_id::I16,
            MetaArray::U32(_) => type_id::U32,
            MetaArray::I32(_) => type_id::I32,
            MetaArray::F32(_) => type_id::F32,
            MetaArray::Bool(_) => type_id::BOOL,
            MetaArray::String(_) => type_id::STRING,
            MetaArray::Array(_) => type_id::ARRAY,
            MetaArray::U64(_) => type_id::U64,
            MetaArray::I64(_) => type_id::I64,
            MetaArray::F64(_) => type_id::F64,
        }
    }

    /// Nesting depth: 1 for an array of scalars or strings, 1 + the deepest element for arrays of arrays.
    pub fn depth(&self) -> usize {
        match self {
            MetaArray::Array(v) => 1 + v.iter().map(MetaArray::depth).max().unwrap_or(0),
            _ => 1,
        }
    }
}

/// `From` conversions so that writers can say `w.add_metadata("k", 7u32)` or `vec!["a".to_string()]`.
macro_rules! meta_from {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for MetaValue {
            /// Wraps the scalar in its `MetaValue` variant.
            fn from(v: $t) -> MetaValue {
                MetaValue::$variant(v)
            }
        }
        impl From<Vec<$t>> for MetaArray {
            /// Wraps the vector in its `MetaArray` variant.
            fn from(v: Vec<$t>) -> MetaArray {
                MetaArray::$variant(v)
            }
        }
        impl From<Vec<$t>> for MetaValue {
            /// Wraps the vector as an array value.
            fn from(v: Vec<$t>) -> MetaValue {
                MetaValue::Array(MetaArray::$variant(v))
            }
        }
    )*};
}

meta_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32, bool => Bool,
    String => String, u64 => U64, i64 => I64, f64 => F64);

impl From<&str> for MetaValue {
    /// Copies the string into a string value.
    fn from(v: &str) -> MetaValue {
        MetaValue::String(v.to_string())
    }
}

impl From<MetaArray> for MetaValue {
    /// Wraps the array as a value.
    fn from(v: MetaArray) -> MetaValue {
        MetaValue::Array(v)
    }
}
