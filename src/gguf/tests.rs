//! Unit tests of the GGUF writer and reader: round trips, and one test per way a header can be
//! malformed, each checking the exact error variant (and, for `Corrupt`, which check fired).

use super::*;
use crate::quant::GgmlType;

/// Little-endian bytes of a slice of f32.
fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Deterministic filler bytes (so tensor data is not all zeros and a misplaced slice shows).
fn filler(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// One metadata value of every scalar type, one array of every element type, nested arrays.
fn all_values() -> Vec<(&'static str, MetaValue)> {
    vec![
        ("t.u8", MetaValue::U8(200)),
        ("t.i8", MetaValue::I8(-100)),
        ("t.u16", MetaValue::U16(65_000)),
        ("t.i16", MetaValue::I16(-32_000)),
        ("t.u32", MetaValue::U32(4_000_000_000)),
        ("t.i32", MetaValue::I32(-2_000_000_000)),
        ("t.f32", MetaValue::F32(-1.5e-3)),
        ("t.bool_true", MetaValue::Bool(true)),
        ("t.bool_false", MetaValue::Bool(false)),
        ("t.string", MetaValue::String("héllo, 世界 \u{1F600}".into())),
        ("t.empty_string", MetaValue::String(String::new())),
        ("t.u64", MetaValue::U64(u64::MAX)),
        ("t.i64", MetaValue::I64(i64::MIN)),
        ("t.f64", MetaValue::F64(std::f64::consts::PI)),
        ("a.u8", MetaArray::U8(vec![0, 1, 255]).into()),
        ("a.i8", MetaArray::I8(vec![-128, 0, 127]).into()),
        ("a.u16", MetaArray::U16(vec![1, 65_535]).into()),
        ("a.i16", MetaArray::I16(vec![-1, i16::MAX]).into()),
        ("a.u32", MetaArray::U32(vec![7, u32::MAX]).into()),
        ("a.i32", MetaArray::I32(vec![-7, 1, 2, 3]).into()),
        (
            "a.f32",
            MetaArray::F32(vec![0.0, -0.0, f32::MAX, f32::MIN_POSITIVE, f32::INFINITY]).into(),
        ),
        ("a.bool", MetaArray::Bool(vec![true, false, true]).into()),
        ("a.string", MetaArray::String(vec!["a".into(), String::new(), "Ġthe".into()]).into()),
        ("a.u64", MetaArray::U64(vec![u64::MAX, 0]).into()),
        ("a.i64", MetaArray::I64(vec![i64::MIN, -1]).into()),
        ("a.f64", MetaArray::F64(vec![1e300, -1e-300]).into()),
        ("a.empty", MetaArray::U32(vec![]).into()),
        (
            "a.nested",
            MetaArray::Array(vec![
                MetaArray::I32(vec![1, 2]),
                MetaArray::String(vec!["x".into()]),
                MetaArray::Array(vec![MetaArray::Array(vec![MetaArray::Bool(vec![true])])]),
                MetaArray::Array(vec![]),
            ])
            .into(),
        ),
    ]
}

/// A small but complete file: every value type, three tensors of different types and sizes.
fn sample_writer() -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", "llama").unwrap();
    for (k, v) in all_values() {
        w.add_metadata(k, v).unwrap();
    }
    // [2 rows, 3 cols] f32: 24 bytes, not a multiple of 32, so padding follows it.
    w.add_tensor("a.weight", GgmlType::F32, &[3, 2], f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
        .unwrap();
    // One Q8_0 row of 64 elements: 2 blocks × 34 bytes.
    w.add_tensor("b.weight", GgmlType::Q8_0, &[64, 1], filler(68, 7)).unwrap();
    // One Q4_K super-block: 144 bytes.
    w.add_tensor("c.weight", GgmlType::Q4_K, &[256], filler(144, 99)).unwrap();
    w
}

/// The bytes of [`sample_writer`].
fn sample_bytes() -> Vec<u8> {
    sample_writer().to_bytes().unwrap()
}

/// Builds raw (possibly malformed) GGUF bytes field by field.
struct Raw(Vec<u8>);

impl Raw {
    /// Magic, version and the two counts.
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw(b"GGUF".to_vec()).u32(version).u64(n_tensors).u64(n_kv)
    }
    /// Appends one byte.
    fn u8(mut self, x: u8) -> Raw {
        self.0.push(x);
        self
    }
    /// Appends a little-endian u32.
    fn u32(mut self, x: u32) -> Raw {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    /// Appends a little-endian u64.
    fn u64(mut self, x: u64) -> Raw {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    /// Appends raw bytes.
    fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    /// Appends a GGUF string (length + bytes, which need not be UTF-8).
    fn str(self, s: &[u8]) -> Raw {
        self.u64(s.len() as u64).bytes(s)
    }
    /// Appends a key with a u32 value.
    fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.str(key.as_bytes()).u32(type_id::U32).u32(v)
    }
    /// Appends a tensor info.
    fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Raw {
        let mut r = self.str(name.as_bytes()).u32(dims.len() as u32);
        for &d in dims {
            r = r.u64(d);
        }
        r.u32(ty).u64(offset)
    }
    /// Zero-pads to a multiple of `align`.
    fn pad(mut self, align: usize) -> Raw {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    /// Appends `n` zero bytes.
    fn zeros(mut self, n: usize) -> Raw {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    /// Parses the bytes built so far.
    fn parse(&self) -> Result<GgufHeader, GgufError> {
        parse_header(&self.0)
    }
}

/// Asserts `r` is `Err(Corrupt(msg))` with `needle` in the message.
#[track_caller]
fn assert_corrupt<T: std::fmt::Debug>(r: Result<T, GgufError>, needle: &str) {
    match r {
        Err(GgufError::Corrupt(msg)) => {
            assert!(msg.contains(needle), "Corrupt({msg:?}) does not mention {needle:?}")
        }
        other => panic!("expected Corrupt(..{needle}..), got {other:?}"),
    }
}

/// Asserts `r` is `Err(Truncated { .. })` and returns what was being read.
#[track_caller]
fn assert_truncated<T: std::fmt::Debug>(r: Result<T, GgufError>) -> &'static str {
    match r {
        Err(GgufError::Truncated { what, .. }) => what,
        other => panic!("expected Truncated, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Writer → reader round trips
// ---------------------------------------------------------------------------------------------

#[test]
fn round_trip_every_value_type_in_order() {
    let bytes = sample_bytes();
    let h = parse_header(&bytes).unwrap();
    assert_eq!(h.version, 3);
    let mut expected_order = vec!["general.architecture".to_string()];
    expected_order.extend(all_values().iter().map(|(k, _)| k.to_string()));
    assert_eq!(h.metadata_order, expected_order);
    assert_eq!(h.metadata.len(), expected_order.len());
    for (k, v) in all_values() {
        assert_eq!(h.metadata[k], v, "value of {k}");
        assert_eq!(h.metadata[k].gguf_type_id(), v.gguf_type_id());
    }
    assert_eq!(h.metadata["general.architecture"].as_str(), Some("llama"));
}

#[test]
fn round_trip_preserves_float_bits_including_nan() {
    let nan32 = f32::from_bits(0x7fc0_1234);
    let nan64 = f64::from_bits(0x7ff8_0000_dead_beef);
    let mut w = GgufWriter::new();
    w.add_metadata("n32", nan32).unwrap();
    w.add_metadata("n64", nan64).unwrap();
    w.add_metadata("a32", vec![nan32, -0.0f32]).unwrap();
    let h = parse_header(&w.to_bytes().unwrap()).unwrap();
    match (&h.metadata["n32"], &h.metadata["n64"], &h.metadata["a32"]) {
        (MetaValue::F32(a), MetaValue::F64(b), MetaValue::Array(MetaArray::F32(v))) => {
            assert_eq!(a.to_bits(), nan32.to_bits());
            assert_eq!(b.to_bits(), nan64.to_bits());
            assert_eq!(v[0].to_bits(), nan32.to_bits());
            assert_eq!(v[1].to_bits(), (-0.0f32).to_bits());
        }
        other => panic!("wrong types {other:?}"),
    }
}

#[test]
fn round_trip_tensors_layout_and_data() {
    let w = sample_writer();
    let layout = w.layout();
    let bytes = w.to_bytes().unwrap();
    assert_eq!(bytes.len() as u64, layout.file_len);
    let h = parse_header(&bytes).unwrap();
    assert_eq!(h.alignment, 32);
    assert_eq!(h.data_offset, layout.data_offset);
    assert_eq!(h.data_offset % 32, 0);
    assert!(h.data_offset >= layout.header_len && h.data_offset - layout.header_len < 32);
    // Header padding is zeros.
    assert!(bytes[layout.header_len as usize..h.data_offset as usize].iter().all(|&b| b == 0));

    let expect: [(&str, GgmlType, Vec<u64>, Vec<u8>); 3] = [
        ("a.weight", GgmlType::F32, vec![3, 2], f32_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
        ("b.weight", GgmlType::Q8_0, vec![64, 1], filler(68, 7)),
        ("c.weight", GgmlType::Q4_K, vec![256], filler(144, 99)),
    ];
    assert_eq!(h.tensors.len(), 3);
    for ((t, (name, ty, dims, data)), off) in
        h.tensors.iter().zip(&expect).zip(&layout.tensor_offsets)
    {
        assert_eq!(&t.name, name);
        assert_eq!(t.ty, *ty);
        assert_eq!(&t.dims, dims);
        assert_eq!(t.offset, *off);
        assert_eq!(t.offset % 32, 0, "{name} offset aligned");
        assert_eq!(t.size, data.len() as u64);
        assert_eq!(
            &bytes[t.offset as usize..(t.offset + t.size) as usize],
            &data[..],
            "{name} data"
        );
    }
    // F32 [3, 2]: 3 per row, 2 rows, 12 bytes per row.
    let a = &h.tensors[0];
    assert_eq!((a.row_len(), a.n_rows(), a.row_bytes(), a.n_elements()), (3, 2, 12, 6));
    // The file ends on an alignment boundary (padding after the last tensor, as llama.cpp writes).
    assert_eq!(bytes.len() % 32, 0);
    let last = h.tensors.last().unwrap();
    assert!(bytes[(last.offset + last.size) as usize..].iter().all(|&b| b == 0));
}

#[test]
fn writer_honours_general_alignment() {
    for align in [1u32, 8, 64, 4096, MAX_ALIGNMENT as u32] {
        let mut w = GgufWriter::new();
        w.set_alignment(align).unwrap();
        w.add_tensor("x", GgmlType::F32, &[5], f32_bytes(&[1.0; 5])).unwrap();
        w.add_tensor("y", GgmlType::F16, &[3], vec![1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(w.alignment(), align as u64);
        let bytes = w.to_bytes().unwrap();
        let h = parse_header(&bytes).unwrap();
        assert_eq!(h.alignment, align as u64);
        assert_eq!(h.metadata[ALIGNMENT_KEY], MetaValue::U32(align));
        assert_eq!(h.data_offset % align as u64, 0);
        for t in &h.tensors {
            assert_eq!(t.offset % align as u64, 0, "align {align}: {} at {}", t.name, t.offset);
        }
        assert_eq!(
            h.tensors[1].offset,
            h.tensors[0].offset + 20u64.div_ceil(align as u64) * align as u64
        );
        assert_eq!(&bytes[h.tensors[1].offset as usize..][..6], &[1, 2, 3, 4, 5, 6]);
    }
}

#[test]
fn writer_with_nothing_is_a_valid_file() {
    let bytes = GgufWriter::new().to_bytes().unwrap();
    // magic + version + 2 counts = 24 bytes, padded to 32.
    assert_eq!(bytes.len(), 32);
    let h = parse_header(&bytes).unwrap();
    assert!(h.metadata.is_empty() && h.tensors.is_empty());
}

#[test]
fn writer_borrows_tensor_data() {
    let big = filler(32 * 1024, 3);
    let mut w = GgufWriter::new();
    w.add_tensor("borrowed", GgmlType::I8, &[1024, 32], &big[..]).unwrap();
    let bytes = w.to_bytes().unwrap();
    let h = parse_header(&bytes).unwrap();
    let t = &h.tensors[0];
    assert_eq!(&bytes[t.offset as usize..][..t.size as usize], &big[..]);
}

#[test]
fn write_file_is_atomic_and_opens() {
    let dir = std::env::temp_dir().join(format!("turboinfer-gguf-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sample.gguf");
    std::fs::write(&path, b"old contents").unwrap();
    let w = sample_writer();
    let n = w.write_file(&path).unwrap();
    assert_eq!(n, w.layout().file_len);
    // Only the final file is left: no temporary files.
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("sample.gguf")]);
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.len(), n);
    assert_eq!(f.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(f.get_u64("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_array("a.string").unwrap().len(), 3);
    assert_eq!(f.require_tensor("b.weight").unwrap().data, &filler(68, 7)[..]);
    assert!(matches!(f.require_tensor("nope"), Err(GgufError::MissingTensor(_))));
    // A write into a missing directory fails with the path in the error and leaves nothing behind.
    let bad = dir.join("no/such/dir/x.gguf");
    match w.write_file(&bad) {
        Err(GgufError::Io { path, .. }) => assert!(path.to_string_lossy().contains("no/such/dir")),
        other => panic!("expected Io, got {other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_to_reports_io_errors() {
    /// A sink that accepts `room` bytes, then fails.
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "full"));
            }
            let n = b.len().min(self.0);
            self.0 -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let w = sample_writer();
    assert!(matches!(w.write_to(Full(100)), Err(GgufError::Write(_))));
    let len = w.layout().file_len as usize;
    assert!(matches!(w.write_to(Full(len - 1)), Err(GgufError::Write(_))));
    assert_eq!(w.write_to(Full(len)).unwrap(), len as u64);
}

// ---------------------------------------------------------------------------------------------
// Writer validation
// ---------------------------------------------------------------------------------------------

/// Asserts an `InvalidMetadata` error whose reason mentions `needle`.
#[track_caller]
fn assert_bad_meta<T: std::fmt::Debug>(r: Result<T, GgufError>, needle: &str) {
    match r {
        Err(GgufError::InvalidMetadata { reason, .. }) => {
            assert!(reason.contains(needle), "{reason:?} lacks {needle:?}")
        }
        other => panic!("expected InvalidMetadata(..{needle}..), got {other:?}"),
    }
}

/// Asserts an `InvalidTensor` error whose reason mentions `needle`.
#[track_caller]
fn assert_bad_tensor<T: std::fmt::Debug>(r: Result<T, GgufError>, needle: &str) {
    match r {
        Err(GgufError::InvalidTensor { reason, .. }) => {
            assert!(reason.contains(needle), "{reason:?} lacks {needle:?}")
        }
        other => panic!("expected InvalidTensor(..{needle}..), got {other:?}"),
    }
}

#[test]
fn writer_rejects_invalid_metadata() {
    let mut w = GgufWriter::new();
    w.add_metadata("k", 1u8).unwrap();
    assert_bad_meta(w.add_metadata("k", 2u8), "duplicate");
    assert_bad_meta(w.add_metadata("", 2u8), "empty");
    assert_bad_meta(w.add_metadata("é".repeat(40_000), 1u8), "more than");
    for bad in [
        MetaValue::U32(0),
        MetaValue::U32(48),
        MetaValue::U32(1 << 21),
        MetaValue::U64(32),
        MetaValue::from("32"),
    ] {
        assert_bad_meta(GgufWriter::new().add_metadata(ALIGNMENT_KEY, bad), "power of two");
    }
    // Depth 4 is the deepest the reader accepts; 5 is refused up front.
    let mut a = MetaArray::U8(vec![1]);
    for _ in 0..3 {
        a = MetaArray::Array(vec![a]);
    }
    assert_eq!(a.depth(), 4);
    w.add_metadata("deep4", a.clone()).unwrap();
    assert_bad_meta(w.add_metadata("deep5", MetaArray::Array(vec![a])), "nested");
    // Rejected pairs were not added.
    assert_eq!(w.metadata_len(), 2);
    let h = parse_header(&w.to_bytes().unwrap()).unwrap();
    assert_eq!(h.metadata_order, vec!["k", "deep4"]);
}

#[test]
fn writer_rejects_invalid_tensors() {
    let mut w = GgufWriter::new();
    w.add_tensor("t", GgmlType::F32, &[2], f32_bytes(&[1.0, 2.0])).unwrap();
    assert_bad_tensor(w.add_tensor("t", GgmlType::F32, &[2], f32_bytes(&[1.0, 2.0])), "duplicate");
    assert_bad_tensor(w.add_tensor("", GgmlType::F32, &[1], vec![0; 4]), "name");
    assert_bad_tensor(w.add_tensor("n".repeat(64), GgmlType::F32, &[1], vec![0; 4]), "name");
    w.add_tensor("n".repeat(63), GgmlType::F32, &[1], vec![0; 4]).unwrap();
    assert_bad_tensor(w.add_tensor("d0", GgmlType::F32, &[], vec![]), "0 dimensions");
    assert_bad_tensor(
        w.add_tensor("d5", GgmlType::F32, &[1, 1, 1, 1, 1], vec![0; 4]),
        "5 dimensions",
    );
    assert_bad_tensor(w.add_tensor("z", GgmlType::F32, &[4, 0], vec![]), "zero dimension");
    assert_bad_tensor(
        w.add_tensor("q", GgmlType::Q4_0, &[48], vec![0; 27]),
        "multiple of the q4_0 block size",
    );
    assert_bad_tensor(
        w.add_tensor("o", GgmlType::F32, &[1 << 32, 1 << 31, 2], vec![]),
        "overflows",
    );
    assert_bad_tensor(w.add_tensor("o1", GgmlType::F32, &[1 << 62], vec![]), "overflows");
    assert_bad_tensor(
        w.add_tensor("short", GgmlType::Q8_0, &[32, 2], vec![0; 67]),
        "needs 68 bytes",
    );
    assert_bad_tensor(w.add_tensor("long", GgmlType::F16, &[3], vec![0; 7]), "needs 6 bytes");
    assert_eq!(w.tensor_count(), 2);
}

// ---------------------------------------------------------------------------------------------
// Malformed input: each case gives its own typed error
// ---------------------------------------------------------------------------------------------

#[test]
fn wrong_magic() {
    let mut b = sample_bytes();
    b[..4].copy_from_slice(b"GGML");
    assert!(matches!(parse_header(&b), Err(GgufError::BadMagic(m)) if &m == b"GGML"));
    // A byte-swapped (big-endian-looking) magic is not accepted either.
    b[..4].copy_from_slice(b"FUGG");
    assert!(matches!(parse_header(&b), Err(GgufError::BadMagic(_))));
    assert!(matches!(parse_header(&[0u8; 64]), Err(GgufError::BadMagic([0, 0, 0, 0]))));
}

#[test]
fn unsupported_versions() {
    for v in [0u32, 1, 4, 0x0300_0000, u32::MAX] {
        let mut b = sample_bytes();
        b[4..8].copy_from_slice(&v.to_le_bytes());
        assert!(
            matches!(parse_header(&b), Err(GgufError::UnsupportedVersion(x)) if x == v),
            "version {v}"
        );
    }
    // Version 2 has the same layout as 3 and is read.
    let mut b = sample_bytes();
    b[4..8].copy_from_slice(&2u32.to_le_bytes());
    assert_eq!(parse_header(&b).unwrap().version, 2);
}

#[test]
fn every_truncation_is_a_typed_error() {
    let w = sample_writer();
    let layout = w.layout();
    let bytes = w.to_bytes().unwrap();
    let h = parse_header(&bytes).unwrap();
    let last = h.tensors.last().unwrap();
    let data_end = (last.offset + last.size) as usize;
    let mut counts = [0usize; 3];
    for len in 0..bytes.len() {
        let r = parse_header(&bytes[..len]);
        if (len as u64) < layout.header_len {
            let what = assert_truncated(r);
            assert_ne!(what, "tensor data section", "prefix {len}");
            counts[0] += 1;
        } else if (len as u64) < h.data_offset {
            assert_eq!(assert_truncated(r), "tensor data section", "prefix {len}");
            counts[1] += 1;
        } else if len < data_end {
            match r {
                Err(GgufError::TensorOutOfBounds { name, offset, size, data_len }) => {
                    // The first tensor not fully inside the prefix is the one reported.
                    let t = h.tensors.iter().find(|t| t.offset + t.size > len as u64).unwrap();
                    assert_eq!(name, t.name, "prefix {len}");
                    assert_eq!((offset + h.data_offset, size), (t.offset, t.size));
                    assert_eq!(data_len, len as u64 - h.data_offset);
                }
                other => panic!("prefix {len}: expected TensorOutOfBounds, got {other:?}"),
            }
            counts[2] += 1;
        } else {
            // Only the zero padding after the last tensor is missing: all data is present.
            assert_eq!(parse_header(&bytes[..len]).unwrap().tensors, h.tensors, "prefix {len}");
        }
    }
    assert!(counts.iter().all(|&c| c > 0), "every region was cut: {counts:?}");
}

#[test]
fn truncated_open_file_errors() {
    let dir = std::env::temp_dir().join(format!("turboinfer-gguf-trunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = sample_bytes();
    let p = dir.join("t.gguf");
    for len in [0usize, 3, 4, 23, 24, 100, bytes.len() / 2, bytes.len() - 40] {
        std::fs::write(&p, &bytes[..len]).unwrap();
        match GgufFile::open(&p) {
            Err(GgufError::Truncated { .. } | GgufError::TensorOutOfBounds { .. }) => {}
            other => panic!("len {len}: expected Truncated/TensorOutOfBounds, got {other:?}"),
        }
    }
    assert!(matches!(GgufFile::open(dir.join("missing.gguf")), Err(GgufError::Io { .. })));
    assert!(matches!(GgufFile::open(&dir), Err(GgufError::Io { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn absurd_counts_fail_fast() {
    for n in [u64::MAX, 1 << 40, u64::MAX / 13 + 1, u64::MAX / 32 + 1] {
        // Tensor count.
        let r = Raw::new(3, n, 0).zeros(64).parse();
        assert!(
            matches!(r, Err(GgufError::Truncated { .. } | GgufError::Corrupt(_))),
            "tensors {n}: {r:?}"
        );
        // Metadata count.
        let r = Raw::new(3, 0, n).zeros(64).parse();
        assert!(
            matches!(r, Err(GgufError::Truncated { .. } | GgufError::Corrupt(_))),
            "kv {n}: {r:?}"
        );
        // Array length, for a 1-byte, a string and an array element type.
        for ety in [type_id::U8, type_id::STRING, type_id::ARRAY, type_id::F64] {
            let r =
                Raw::new(3, 0, 1).str(b"k").u32(type_id::ARRAY).u32(ety).u64(n).zeros(64).parse();
            assert!(
                matches!(r, Err(GgufError::Truncated { .. } | GgufError::Corrupt(_))),
                "array {ety} x {n}: {r:?}"
            );
        }
        // String lengths: key, string value, string array element, tensor name.
        let r = Raw::new(3, 0, 1).u64(n).zeros(64).parse();
        assert_eq!(assert_truncated(r), "metadata key");
        let r = Raw::new(3, 0, 1).str(b"k").u32(type_id::STRING).u64(n).zeros(64).parse();
        assert_eq!(assert_truncated(r), "metadata string");
        let r = Raw::new(3, 0, 1)
            .str(b"k")
            .u32(type_id::ARRAY)
            .u32(type_id::STRING)
            .u64(1)
            .u64(n)
            .zeros(64)
            .parse();
        assert_eq!(assert_truncated(r), "array string");
        let r = Raw::new(3, 1, 0).u64(n).zeros(64).parse();
        assert_eq!(assert_truncated(r), "tensor name");
    }
    // An impossible (overflowing) count is Corrupt, a merely too-large one Truncated.
    assert_corrupt(Raw::new(3, 0, u64::MAX).zeros(64).parse(), "impossibly large");
    assert_eq!(assert_truncated(Raw::new(3, 0, 1 << 40).zeros(64).parse()), "metadata entries");
    assert_eq!(assert_truncated(Raw::new(3, 1 << 40, 0).zeros(64).parse()), "tensor infos");
}

#[test]
fn tensor_offset_past_eof() {
    // One f32[4] tensor (16 bytes) whose data would start at 32 but the file stops at 16 bytes in.
    let base = Raw::new(3, 1, 0).tensor("t", &[4], 0, 32).pad(32).zeros(16);
    match base.parse() {
        Err(GgufError::TensorOutOfBounds { name, offset: 32, size: 16, data_len: 16 }) => {
            assert_eq!(name, "t")
        }
        other => panic!("expected TensorOutOfBounds, got {other:?}"),
    }
    // An offset near u64::MAX (aligned) must not overflow offset + size.
    let r = Raw::new(3, 1, 0).tensor("t", &[4], 0, u64::MAX - 31).pad(32).zeros(16).parse();
    assert!(matches!(r, Err(GgufError::TensorOutOfBounds { .. })), "{r:?}");
    // Exactly fitting is fine.
    let ok = Raw::new(3, 1, 0).tensor("t", &[4], 0, 0).pad(32).zeros(16).parse().unwrap();
    assert_eq!(ok.tensors[0].size, 16);
}

#[test]
fn tensor_size_overflow() {
    // f32 with dims whose byte size is > 2^64.
    for dims in [
        &[1u64 << 62, 8][..],
        &[1 << 32, 1 << 32, 1 << 2][..],
        &[u64::MAX][..],
        &[2, u64::MAX / 2 + 1][..],
    ] {
        assert_corrupt(
            Raw::new(3, 1, 0).tensor("t", dims, 0, 0).pad(32).zeros(64).parse(),
            "overflows",
        );
    }
    // A huge but representable size is simply out of bounds.
    let r = Raw::new(3, 1, 0).tensor("t", &[1 << 20, 1 << 20], 0, 0).pad(32).zeros(64).parse();
    assert!(
        matches!(r, Err(GgufError::TensorOutOfBounds { size, .. }) if size == 4 << 40),
        "{r:?}"
    );
}

#[test]
fn misaligned_tensor_offset() {
    assert_corrupt(
        Raw::new(3, 1, 0).tensor("t", &[4], 0, 4).pad(32).zeros(64).parse(),
        "not aligned",
    );
    // With general.alignment = 8 the same offset 8 is fine and 4 is not.
    let base = || Raw::new(3, 1, 1).kv_u32("general.alignment", 8);
    assert_eq!(
        base().tensor("t", &[4], 0, 8).pad(8).zeros(64).parse().unwrap().tensors[0].offset % 8,
        0
    );
    assert_corrupt(base().tensor("t", &[4], 0, 4).pad(8).zeros(64).parse(), "not aligned to 8");
}

#[test]
fn unknown_tensor_type() {
    // 4/5 are the removed Q4_2/Q4_3; 16 is an i-quant we do not read; 39+ does not exist.
    for id in [4u32, 5, 16, 23, 29, 39, 1000, u32::MAX] {
        match Raw::new(3, 1, 0).tensor("t", &[256], id, 0).pad(32).zeros(2048).parse() {
            Err(GgufError::UnknownTensorType { name, id: got }) => {
                assert_eq!((name.as_str(), got), ("t", id))
            }
            other => panic!("id {id}: expected UnknownTensorType, got {other:?}"),
        }
    }
}

#[test]
fn unknown_value_type() {
    for ty in [13u32, 100, u32::MAX] {
        match Raw::new(3, 0, 1).str(b"key").u32(ty).zeros(16).parse() {
            Err(GgufError::UnknownValueType { key, ty: got }) => {
                assert_eq!((key.as_str(), got), ("key", ty))
            }
            other => panic!("type {ty}: expected UnknownValueType, got {other:?}"),
        }
        // As an array's element type.
        let r = Raw::new(3, 0, 1).str(b"arr").u32(type_id::ARRAY).u32(ty).u64(1).zeros(16).parse();
        assert!(
            matches!(r, Err(GgufError::UnknownValueType { ty: got, .. }) if got == ty),
            "{r:?}"
        );
    }
}

#[test]
fn bad_dimension_counts() {
    for n in [0u32, 5, 1000, u32::MAX] {
        let r = Raw::new(3, 1, 0).str(b"t").u32(n).zeros(256).parse();
        assert_corrupt(r, &format!("has {n} dimensions"));
    }
}

#[test]
fn zero_dimension() {
    assert_corrupt(
        Raw::new(3, 1, 0).tensor("t", &[4, 0], 0, 0).pad(32).zeros(64).parse(),
        "zero dimension",
    );
    assert_corrupt(Raw::new(3, 1, 0).tensor("t", &[0], 0, 0).pad(32).parse(), "zero dimension");
}

#[test]
fn row_not_a_whole_number_of_blocks() {
    // Q4_K rows must be multiples of 256 elements, Q8_0 rows of 32.
    assert_corrupt(
        Raw::new(3, 1, 0).tensor("t", &[896], 12, 0).pad(32).zeros(4096).parse(),
        "not a multiple",
    );
    assert_corrupt(
        Raw::new(3, 1, 0).tensor("t", &[33, 2], 8, 0).pad(32).zeros(4096).parse(),
        "block size 32",
    );
}

#[test]
fn duplicate_tensor_name() {
    let r = Raw::new(3, 2, 0)
        .tensor("w", &[8], 0, 0)
        .tensor("w", &[8], 0, 32)
        .pad(32)
        .zeros(64)
        .parse();
    assert_corrupt(r, "duplicate tensor name \"w\"");
}

#[test]
fn duplicate_metadata_key() {
    let r = Raw::new(3, 0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2).parse();
    assert_corrupt(r, "duplicate metadata key \"a.b\"");
}

#[test]
fn invalid_utf8_strings() {
    let bad: &[u8] = &[b'k', 0xff, 0xfe];
    assert_corrupt(Raw::new(3, 0, 1).str(bad).u32(type_id::U8).u8(0).parse(), "metadata key");
    assert_corrupt(
        Raw::new(3, 0, 1).str(b"k").u32(type_id::STRING).str(bad).parse(),
        "metadata string",
    );
    let r = Raw::new(3, 0, 1)
        .str(b"k")
        .u32(type_id::ARRAY)
        .u32(type_id::STRING)
        .u64(2)
        .str(b"ok")
        .str(bad)
        .parse();
    assert_corrupt(r, "array string");
    // A lone surrogate half encoded as UTF-8 (CESU) is invalid too.
    let r = Raw::new(3, 1, 0)
        .str(&[0xed, 0xa0, 0x80])
        .u32(1)
        .u64(4)
        .u32(0)
        .u64(0)
        .pad(32)
        .zeros(16)
        .parse();
    assert_corrupt(r, "tensor name");
}

#[test]
fn bad_alignment_values() {
    for a in [0u32, 3, 48, 1 << 21, u32::MAX] {
        let r = Raw::new(3, 0, 1).kv_u32("general.alignment", a).parse();
        assert_corrupt(r, "general.alignment");
    }
    // Negative, string or float alignments.
    let r =
        Raw::new(3, 0, 1).str(b"general.alignment").u32(type_id::I32).u32(-32i32 as u32).parse();
    assert_corrupt(r, "general.alignment");
    let r = Raw::new(3, 0, 1).str(b"general.alignment").u32(type_id::STRING).str(b"32").parse();
    assert_corrupt(r, "general.alignment");
    let r =
        Raw::new(3, 0, 1).str(b"general.alignment").u32(type_id::F32).u32(32f32.to_bits()).parse();
    assert_corrupt(r, "general.alignment");
    // Other integer widths holding a power of two are read (llama.cpp writes u32).
    let h = Raw::new(3, 0, 1).str(b"general.alignment").u32(type_id::U64).u64(64).parse().unwrap();
    assert_eq!(h.alignment, 64);
}

#[test]
fn bool_bytes_other_than_0_or_1() {
    for b in [2u8, 0x80, 0xff] {
        assert_corrupt(Raw::new(3, 0, 1).str(b"k").u32(type_id::BOOL).u8(b).parse(), "bool byte");
        let r = Raw::new(3, 0, 1)
            .str(b"k")
            .u32(type_id::ARRAY)
            .u32(type_id::BOOL)
            .u64(3)
            .u8(1)
            .u8(0)
            .u8(b)
            .parse();
        assert_corrupt(r, "bool byte");
    }
}

#[test]
fn deeply_nested_arrays() {
    /// `depth` nested arrays of arrays, the innermost holding one u8.
    fn nested(depth: usize) -> Raw {
        let mut r = Raw::new(3, 0, 1).str(b"deep").u32(type_id::ARRAY);
        for _ in 0..depth - 1 {
            r = r.u32(type_id::ARRAY).u64(1);
        }
        r.u32(type_id::U8).u64(1).u8(42)
    }
    let h = nested(MAX_ARRAY_DEPTH).parse().unwrap();
    assert_eq!(h.metadata["deep"].as_array().unwrap().depth(), MAX_ARRAY_DEPTH);
    assert_corrupt(nested(MAX_ARRAY_DEPTH + 1).parse(), "nested deeper");
    // Far deeper than any stack could recurse: refused at depth 5, no stack overflow.
    assert_corrupt(nested(200_000).parse(), "nested deeper");
}

#[test]
fn padding_before_data_missing() {
    // A header that ends at byte 24 + tensor info, with tensors declared but no room for padding.
    let r = Raw::new(3, 1, 0).tensor("t", &[1], 0, 0);
    let len = r.0.len();
    assert_ne!(len % 32, 0);
    assert_eq!(assert_truncated(r.parse()), "tensor data section");
    // Without tensors, a file may end right after its header.
    assert!(Raw::new(3, 0, 1).kv_u32("x", 1).parse().is_ok());
}

#[test]
fn random_byte_flips_never_panic() {
    // A cheap in-tree stand-in for the fuzzer: flip bytes of a valid file at every position.
    let bytes = sample_bytes();
    let h = parse_header(&bytes).unwrap();
    let header_len = h.data_offset as usize;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for pos in 0..header_len {
        for _ in 0..4 {
            // xorshift64: deterministic, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut b = bytes.clone();
            b[pos] ^= (state as u8) | 1;
            if let Ok(h) = parse_header(&b) {
                for t in &h.tensors {
                    assert!(t.offset + t.size <= b.len() as u64);
                }
            }
        }
    }
}

#[test]
fn error_messages_stay_short_for_huge_names() {
    // A 1 MB key repeated, and a general.alignment holding a big array: messages stay bounded.
    let key = "k".repeat(1 << 20);
    let r = Raw::new(3, 0, 2)
        .str(key.as_bytes())
        .u32(type_id::U8)
        .u8(0)
        .str(key.as_bytes())
        .u32(type_id::U8)
        .u8(0)
        .parse();
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("duplicate metadata key") && msg.len() < 200, "{} bytes", msg.len());
    let r = Raw::new(3, 0, 1)
        .str(b"general.alignment")
        .u32(type_id::ARRAY)
        .u32(type_id::STRING)
        .u64(1000);
    let r = (0..1000).fold(r, |r, _| r.str("long string".repeat(100).as_bytes()));
    let msg = r.parse().unwrap_err().to_string();
    assert!(msg.contains("general.alignment of type array") && msg.len() < 200, "{msg}");
    // The name of a tensor with a bad dimension count is shortened too.
    let name = "t".repeat(10_000);
    let msg =
        Raw::new(3, 1, 0).str(name.as_bytes()).u32(9).zeros(64).parse().unwrap_err().to_string();
    assert!(msg.contains("9 dimensions") && msg.contains('…') && msg.len() < 200, "{msg}");
}
