//! Bounds-checked parsing of the GGUF header (works on any byte slice, so it can be fuzzed).

use super::{
    GgufError, GgufHeader, MetaArray, MetaValue, TensorInfo, DEFAULT_ALIGNMENT, MAX_ALIGNMENT,
    MAX_ARRAY_DEPTH, MAX_DIMS,
};
use crate::quant::GgmlType;
use std::collections::HashMap;

/// "GGUF" read as a little-endian u32.
pub(crate) const MAGIC: [u8; 4] = *b"GGUF";

/// A cursor over the file bytes that never reads past the end.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Takes `n` bytes or fails with `Truncated` naming `what`.
    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], GgufError> {
        let remaining = (self.buf.len() - self.pos) as u64;
        if n > remaining {
            return Err(GgufError::Truncated {
                what,
                offset: self.pos as u64,
                needed: n,
                file_len: self.buf.len() as u64,
            });
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    /// Bytes left after the cursor.
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// Takes exactly `N` bytes as an array.
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GgufError> {
        Ok(self.take(N as u64, what)?.try_into().expect("took N bytes"))
    }
    /// Reads a u8.
    fn u8(&mut self, w: &'static str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(w)?[0])
    }
    /// Reads a little-endian u16.
    fn u16(&mut self, w: &'static str) -> Result<u16, GgufError> {
        Ok(u16::from_le_bytes(self.array(w)?))
    }
    /// Reads a little-endian u32.
    fn u32(&mut self, w: &'static str) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(w)?))
    }
    /// Reads a little-endian u64.
    fn u64(&mut self, w: &'static str) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(w)?))
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes.
    fn string(&mut self, what: &'static str) -> Result<String, GgufError> {
        let len = self.u64(what)?;
        let at = self.pos;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| GgufError::Corrupt(format!("{what} at offset {at} is not valid UTF-8")))
    }

    /// Checks that `count` elements of at least `min_size` bytes each can fit in what is left,
    /// so an absurd count is refused before anything is allocated.
    /// A count whose minimum size is computable but larger than the rest of the file is reported
    /// as `Truncated` (it is what a cut file looks like); one whose size overflows u64 is `Corrupt`.
    fn check_count(
        &self,
        count: u64,
        min_size: u64,
        what: &'static str,
    ) -> Result<usize, GgufError> {
        match count.checked_mul(min_size) {
            Some(need) if need <= self.remaining() => Ok(count as usize),
            Some(need) => Err(GgufError::Truncated {
                what,
                offset: self.pos as u64,
                needed: need,
                file_len: self.buf.len() as u64,
            }),
            None => Err(GgufError::Corrupt(format!(
                "{what} count {count} at offset {} is impossibly large",
                self.pos
            ))),
        }
    }
}

/// Smallest encoded size of a value of GGUF type `ty` (for count checks); `None` for unknown types.
fn min_value_size(ty: u32) -> Option<u64> {
    Some(match ty {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 => 8,     // string: u64 length
        9 => 4 + 8, // array: type + count
        10..=12 => 8,
        _ => return None,
    })
}

/// At most the first 80 characters of a file-controlled string, for error messages (a crafted
/// file could otherwise put megabytes into one message).
fn short(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(80) {
        None => s.into(),
        Some((i, _)) => format!("{}…", &s[..i]).into(),
    }
}

/// Reads a bool byte, which must be 0 or 1 (as ggml requires).
fn read_bool(c: &mut Cursor, key: &str) -> Result<bool, GgufError> {
    let at = c.pos;
    match c.u8("metadata bool")? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(GgufError::Corrupt(format!(
            "metadata key {:?}: bool byte {b} at offset {at} (must be 0 or 1)",
            short(key)
        ))),
    }
}

/// Reads one metadata value of type `ty`.
fn read_value(c: &mut Cursor, key: &str, ty: u32, depth: usize) -> Result<MetaValue, GgufError> {
    const W: &str = "metadata value";
    Ok(match ty {
        0 => MetaValue::U8(c.u8(W)?),
        1 => MetaValue::I8(c.u8(W)? as i8),
        2 => MetaValue::U16(c.u16(W)?),
        3 => MetaValue::I16(c.u16(W)? as i16),
        4 => MetaValue::U32(c.u32(W)?),
        5 => MetaValue::I32(c.u32(W)? as i32),
        6 => MetaValue::F32(f32::from_bits(c.u32(W)?)),
        7 => MetaValue::Bool(read_bool(c, key)?),
        8 => MetaValue::String(c.string("metadata string")?),
        9 => MetaValue::Array(read_array(c, key, depth)?),
        10 => MetaValue::U64(c.u64(W)?),
        11 => MetaValue::I64(c.u64(W)? as i64),
        12 => MetaValue::F64(f64::from_bits(c.u64(W)?)),
        _ => return Err(GgufError::UnknownValueType { key: key.to_string(), ty }),
    })
}

/// Reads an array value: element type, count, elements.
fn read_array(c: &mut Cursor, key: &str, depth: usize) -> Result<MetaArray, GgufError> {
    if depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::Corrupt(format!(
            "metadata key {:?}: arrays nested deeper than {MAX_ARRAY_DEPTH}",
            short(key)
        )));
    }
    let ety = c.u32("array element type")?;
    let count = c.u64("array length")?;
    let min = min_value_size(ety)
        .ok_or_else(|| GgufError::UnknownValueType { key: key.to_string(), ty: ety })?;
    let n = c.check_count(count, min, "array elements")?;
    const W: &str = "array element";
    macro_rules! dense {
        ($variant:ident, $read:expr) => {{
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push($read);
            }
            MetaArray::$variant(v)
        }};
    }
    Ok(match ety {
        0 => MetaArray::U8(c.take(n as u64, W)?.to_vec()),
        1 => MetaArray::I8(c.take(n as u64, W)?.iter().map(|&b| b as i8).collect()),
        2 => dense!(U16, c.u16(W)?),
        3 => dense!(I16, c.u16(W)? as i16),
        4 => dense!(U32, c.u32(W)?),
        5 => dense!(I32, c.u32(W)? as i32),
        6 => dense!(F32, f32::from_bits(c.u32(W)?)),
        7 => dense!(Bool, read_bool(c, key)?),
        8 => dense!(String, c.string("array string")?),
        9 => dense!(Array, read_array(c, key, depth + 1)?),
        10 => dense!(U64, c.u64(W)?),
        11 => dense!(I64, c.u64(W)? as i64),
        12 => dense!(F64, f64::from_bits(c.u64(W)?)),
        _ => unreachable!("min_value_size accepted only known types"),
    })
}

/// Parses and validates a GGUF header from the start of `buf` (the whole file).
pub fn parse_header(buf: &[u8]) -> Result<GgufHeader, GgufError> {
    let mut c = Cursor { buf, pos: 0 };
    let magic = c.array::<4>("magic")?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic(magic));
    }
    let version = c.u32("version")?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion(version));
    }
    let n_tensors = c.u64("tensor count")?;
    let n_kv = c.u64("metadata count")?;
    // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at least
    // 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset).
    let n_kv = c.check_count(n_kv, 13, "metadata entries")?;
    let mut metadata = HashMap::with_capacity(n_kv);
    let mut metadata_order = Vec::with_capacity(n_kv);
    for _ in 0..n_kv {
        let key = c.string("metadata key")?;
        let ty = c.u32("metadata value type")?;
        let value = read_value(&mut c, &key, ty, 0)?;
        if metadata.insert(key.clone(), value).is_some() {
            return Err(GgufError::Corrupt(format!("duplicate metadata key {:?}", short(&key))));
        }
        metadata_order.push(key);
    }

    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => {
            match v.as_u64() {
                Some(a) if a > 0 && a.is_power_of_two() && a <= MAX_ALIGNMENT => a,
                _ => {
                    let shown = v
                        .as_u64()
                        .map_or_else(|| format!("of type {}", v.type_name()), |a| a.to_string());
                    return Err(GgufError::Corrupt(format!("general.alignment {shown} is not an unsigned power of two <= {MAX_ALIGNMENT}")));
                }
            }
        }
    };

    let n_tensors = c.check_count(n_tensors, 32, "tensor infos")?;
    // (name, type id, dims, relative offset), validated once the data section's start is known.
    let mut raw = Vec::with_capacity(n_tensors);
    let mut names = std::collections::HashSet::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name = c.string("tensor name")?;
        if !names.insert(name.clone()) {
            return Err(GgufError::Corrupt(format!("duplicate tensor name {:?}", short(&name))));
        }
        let n_dims = c.u32("tensor dimension count")? as usize;
        if n_dims == 0 || n_dims > MAX_DIMS {
            return Err(GgufError::Corrupt(format!(
                "tensor {:?} has {n_dims} dimensions (1..={MAX_DIMS} allowed)",
                short(&name)
            )));
        }
        let mut dims = Vec::with_capacity(n_dims);
        for _ in 0..n_dims {
            dims.push(c.u64("tensor dimension")?);
        }
        let id = c.u32("tensor type")?;
        let offset = c.u64("tensor offset")?;
        raw.push((name, id, dims, offset));
    }

    let header_end = c.pos as u64;
    let data_offset = header_end.div_ceil(alignment) * alignment;
    let file_len = buf.len() as u64;
    if data_offset > file_len && n_tensors > 0 {
        return Err(GgufError::Truncated {
            what: "tensor data section",
            offset: header_end,
            needed: data_offset - header_end,
            file_len,
        });
    }
    let data_len = file_len.saturating_sub(data_offset);

    let mut tensors = Vec::with_capacity(n_tensors);
    for (name, id, dims, rel) in raw {
        let ty = GgmlType::from_id(id)
            .ok_or_else(|| GgufError::UnknownTensorType { name: name.clone(), id })?;
        if dims.contains(&0) {
            return Err(GgufError::Corrupt(format!(
                "tensor {:?} has a zero dimension {dims:?}",
                short(&name)
            )));
        }
        let rows = dims[1..].iter().try_fold(1u64, |acc, &d| acc.checked_mul(d));
        if !dims[0].is_multiple_of(ty.block_size() as u64) {
            return Err(GgufError::Corrupt(format!(
                "tensor {:?}: row length {} is not a multiple of the {ty} block size {}",
                short(&name),
                dims[0],
                ty.block_size()
            )));
        }
        // `row_bytes` is None here only when the row's byte size overflows u64.
        let size = rows
            .zip(ty.row_bytes(dims[0]))
            .and_then(|(r, row_bytes)| r.checked_mul(row_bytes))
            .ok_or_else(|| {
                GgufError::Corrupt(format!(
                    "tensor {:?}: size of dims {dims:?} overflows",
                    short(&name)
                ))
            })?;
        if rel % alignment != 0 {
            return Err(GgufError::Corrupt(format!(
                "tensor {:?}: offset {rel} is not aligned to {alignment}",
                short(&name)
            )));
        }
        match rel.checked_add(size) {
            Some(end) if end <= data_len => {}
            _ => return Err(GgufError::TensorOutOfBounds { name, offset: rel, size, data_len }),
        }
        tensors.push(TensorInfo { name, ty, dims, offset: data_offset + rel, size });
    }

    Ok(GgufHeader { version, metadata, metadata_order, tensors, data_offset, alignment })
}
