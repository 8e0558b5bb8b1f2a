//! The safetensors container (Hugging Face): what the embedding model ships as.
//!
//! ```text
//! [0..8)        u64 LE   n, the header's length
//! [8..8+n)      JSON     { name: { "dtype": "F32", "shape": [..], "data_offsets": [begin, end] }, ..,
//!                          "__metadata__": {..} (optional) }
//! [8+n..)       bytes    the tensors' data; offsets are relative to here
//! ```
//!
//! The file is read into memory (90 MB for all-MiniLM-L6-v2): a copy that an administrator's
//! overwrite of the file cannot turn into a SIGBUS, at a size where sharing pages between backends
//! matters little. Every offset, shape and type is checked before use: the file is untrusted.

use std::collections::HashMap;

use super::EmbedError;
use crate::platform::fallible::try_zeroed;

/// Largest header accepted: the real one is 14 KB; this bounds the JSON parse of a hostile file.
const MAX_HEADER: u64 = 16 << 20;

/// One tensor's place in the data section.
#[derive(Debug, Clone)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    begin: usize,
    end: usize,
}

/// A safetensors file in memory.
pub struct SafeTensors {
    data: Vec<u8>,
    /// Start of the data section in `data`.
    base: usize,
    tensors: HashMap<String, Entry>,
}

impl SafeTensors {
    /// Parses `bytes` (a whole file), checking every entry against the data section.
    pub fn parse(bytes: Vec<u8>) -> Result<SafeTensors, EmbedError> {
        let bad = |m: String| EmbedError::Format(format!("safetensors: {m}"));
        let n = bytes.get(..8).ok_or_else(|| bad("shorter than its header length".into()))?;
        let n = u64::from_le_bytes(n.try_into().expect("8 bytes"));
        if n > MAX_HEADER || 8 + n > bytes.len() as u64 {
            return Err(bad(format!("header length {n} does not fit the file")));
        }
        let base = 8 + n as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[8..base])
            .map_err(|e| bad(format!("header is not JSON: {e}")))?;
        let obj = header.as_object().ok_or_else(|| bad("header is not an object".into()))?;
        let data_len = bytes.len() - base;
        let mut tensors = HashMap::new();
        for (name, v) in obj {
            if name == "__metadata__" {
                continue;
            }
            let field = |k: &str| v.get(k).ok_or_else(|| bad(format!("{name}: no {k}")));
            let dtype = field("dtype")?
                .as_str()
                .ok_or_else(|| bad(format!("{name}: dtype is not a string")))?
                .to_string();
            let ints = |k: &str| -> Result<Vec<usize>, EmbedError> {
                field(k)?
                    .as_array()
                    .ok_or_else(|| bad(format!("{name}: {k} is not an array")))?
                    .iter()
                    .map(|x| {
                        x.as_u64()
                            .and_then(|x| usize::try_from(x).ok())
                            .ok_or_else(|| bad(format!("{name}: {k} holds a non-integer")))
                    })
                    .collect()
            };
            let shape = ints("shape")?;
            let offs = ints("data_offsets")?;
            let [begin, end] = offs[..] else {
                return Err(bad(format!("{name}: data_offsets is not [begin, end]")));
            };
            if begin > end || end > data_len {
                return Err(bad(format!("{name}: data [{begin}, {end}) outside {data_len} bytes")));
            }
            tensors.insert(name.clone(), Entry { dtype, shape, begin, end });
        }
        Ok(SafeTensors { data: bytes, base, tensors })
    }

    /// The F32 tensor `name` of shape `shape`, as values.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let e = self
            .tensors
            .get(name)
            .ok_or_else(|| EmbedError::Format(format!("safetensors: no tensor {name}")))?;
        let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if e.dtype != "F32" || e.shape != shape || elements.map(|k| k * 4) != Some(e.end - e.begin)
        {
            return Err(EmbedError::Format(format!(
                "safetensors: {name} is {} {:?} ({} bytes), expected F32 {shape:?}",
                e.dtype,
                e.shape,
                e.end - e.begin
            )));
        }
        let raw = &self.data[self.base + e.begin..self.base + e.end];
        let mut out = try_zeroed::<f32>(raw.len() / 4)?;
        for (o, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
            *o = f32::from_le_bytes(b.try_into().expect("4 bytes"));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of one 2×2 F32 tensor.
    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn reads_a_tensor_and_refuses_bad_entries() {
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let h = r#"{"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"__metadata__":{}}"#;
        let st = SafeTensors::parse(file(h, &data)).unwrap();
        assert_eq!(st.f32("t", &[2, 2]).unwrap(), vec![1.0, 2.0, 3.0, 4.0]);
        assert!(st.f32("t", &[4, 1]).is_err(), "shape checked");
        assert!(st.f32("u", &[2, 2]).is_err(), "missing tensor");
        let past = r#"{"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,20]}}"#;
        assert!(SafeTensors::parse(file(past, &data)).is_err(), "data past the end");
        assert!(SafeTensors::parse(vec![255; 8]).is_err(), "header length past the end");
        assert!(SafeTensors::parse(file("[1]", &[])).is_err(), "header not an object");
    }
}
