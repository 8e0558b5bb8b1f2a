//! The GGUF reader on the three real models: metadata, tensor directory, every tensor range inside
//! the file; truncated copies of SmolLM2 give typed errors (no SIGBUS); a full repack of SmolLM2
//! through `GgufWriter` reads back identical.

mod common;

use std::collections::{BTreeSet, HashSet};
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use turboinfer::gguf::{GgufError, GgufFile, GgufWriter, MetaArray};
use turboinfer::quant::GgmlType;

/// What we know about a model from its model card and from llama.cpp (see shared/models.md).
struct Expect {
    name: &'static str,
    arch: &'static str,
    blocks: usize,
    dim: u64,
    heads: u64,
    kv_heads: u64,
    vocab: usize,
    n_tensors: usize,
    /// Tensor names present in every block besides the llama set (qwen2 has q/k/v biases).
    extra_block_tensors: &'static [&'static str],
    types: &'static [GgmlType],
}

/// Per-block tensors common to llama and qwen2 in llama.cpp's naming.
const BLOCK_TENSORS: [&str; 9] = [
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
];

const SMOLLM2: Expect = Expect {
    name: "smollm2-135m",
    arch: "llama",
    blocks: 30,
    dim: 576,
    heads: 9,
    kv_heads: 3,
    vocab: 49152,
    // 30 blocks × 9 + token_embd + output_norm (the LM head is tied to token_embd).
    n_tensors: 272,
    extra_block_tensors: &[],
    types: &[GgmlType::F32, GgmlType::Q4_1, GgmlType::Q8_0],
};

const QWEN_05B: Expect = Expect {
    name: "qwen2.5-coder-0.5b",
    arch: "qwen2",
    blocks: 24,
    dim: 896,
    heads: 14,
    kv_heads: 2,
    vocab: 151936,
    // 24 blocks × 12 + token_embd + output_norm + output.
    n_tensors: 291,
    extra_block_tensors: &["attn_q.bias", "attn_k.bias", "attn_v.bias"],
    types: &[GgmlType::F32, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K],
};

const QWEN_15B: Expect = Expect {
    name: "qwen2.5-coder-1.5b",
    arch: "qwen2",
    blocks: 28,
    dim: 1536,
    heads: 12,
    kv_heads: 2,
    vocab: 151936,
    // 28 blocks × 12 + token_embd + output_norm + output.
    n_tensors: 339,
    extra_block_tensors: &["attn_q.bias", "attn_k.bias", "attn_v.bias"],
    types: &[GgmlType::F32, GgmlType::Q4_K, GgmlType::Q6_K],
};

/// Opens `e`'s model and checks everything we know about it.
fn check_model(e: &Expect) {
    let Some(path) = common::model_path(e.name) else { return };
    let f = GgufFile::open(&path).unwrap_or_else(|err| panic!("{}: {err}", e.name));
    let arch = f.get_str("general.architecture").unwrap();
    assert_eq!(arch, e.arch);
    assert_eq!(f.get_u64(&format!("{arch}.block_count")).unwrap() as usize, e.blocks);
    assert_eq!(f.get_u64(&format!("{arch}.embedding_length")).unwrap(), e.dim);
    assert_eq!(f.get_u64(&format!("{arch}.attention.head_count")).unwrap(), e.heads);
    assert_eq!(f.get_u64(&format!("{arch}.attention.head_count_kv")).unwrap(), e.kv_heads);
    match f.get_array("tokenizer.ggml.tokens").unwrap() {
        MetaArray::String(tokens) => assert_eq!(tokens.len(), e.vocab),
        other => panic!("tokens are not strings: {:?}", other.element_type_id()),
    }
    // Wrong-type and missing lookups are typed errors.
    assert!(matches!(f.get_u64("general.architecture"), Err(GgufError::WrongType { .. })));
    assert!(matches!(f.get_str("no.such.key"), Err(GgufError::MissingKey(_))));

    let h = f.header();
    assert_eq!(h.alignment, 32);
    assert_eq!(h.data_offset % h.alignment, 0);
    assert_eq!(f.tensors().len(), e.n_tensors, "{} tensor count", e.name);
    for i in 0..e.blocks {
        for t in BLOCK_TENSORS.iter().chain(e.extra_block_tensors) {
            assert!(f.tensor(&format!("blk.{i}.{t}")).is_some(), "{}: blk.{i}.{t} missing", e.name);
        }
    }
    assert!(f.tensor(&format!("blk.{}.attn_q.weight", e.blocks)).is_none());
    let emb = f.require_tensor("token_embd.weight").unwrap();
    assert_eq!(emb.info.dims, vec![e.dim, e.vocab as u64]);
    assert_eq!(f.require_tensor("output_norm.weight").unwrap().info.dims, vec![e.dim]);

    let types: BTreeSet<u32> = f.tensors().iter().map(|t| t.ty.id()).collect();
    let allowed: BTreeSet<u32> = e.types.iter().map(|t| t.id()).collect();
    assert!(types.is_subset(&allowed), "{}: types {types:?} not within {allowed:?}", e.name);
    assert!(types.contains(&GgmlType::F32.id()) && types.len() >= 2, "{}: types {types:?}", e.name);

    // Every tensor range lies inside the file and the data section, ranges do not overlap, sizes
    // match dims, and every view is readable at both ends (no SIGBUS).
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut names = HashSet::new();
    for t in f.tensors() {
        assert!(names.insert(t.name.as_str()), "duplicate {}", t.name);
        assert!(
            t.offset >= h.data_offset && t.offset + t.size <= f.len(),
            "{} out of file",
            t.name
        );
        assert_eq!(t.offset % h.alignment, 0);
        assert_eq!(t.size, t.row_bytes() as u64 * t.n_rows() as u64);
        assert_eq!(t.n_elements() as usize, t.row_len() * t.n_rows());
        let v = f.tensor(&t.name).unwrap();
        assert_eq!(v.data.len() as u64, t.size);
        let _ = (v.data[0], v.data[v.data.len() - 1]);
        ranges.push((t.offset, t.offset + t.size));
    }
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "{}: overlapping tensors {w:?}", e.name);
    }
    // The data runs to the end of the file (the last tensor plus at most its padding).
    assert!(f.len() - ranges.last().unwrap().1 < h.alignment);
}

#[test]
fn smollm2_header_and_tensors() {
    check_model(&SMOLLM2);
    if let Some(p) = common::model_path(SMOLLM2.name) {
        let f = GgufFile::open(p).unwrap();
        // Tied embeddings: there is no separate output.weight; the embedding is Q8_0.
        assert!(f.tensor("output.weight").is_none());
        assert_eq!(f.require_tensor("token_embd.weight").unwrap().info.ty, GgmlType::Q8_0);
        assert_eq!(f.require_tensor("blk.0.attn_q.weight").unwrap().info.ty, GgmlType::Q4_1);
    }
}

#[test]
fn qwen_05b_header_and_tensors() {
    check_model(&QWEN_05B);
}

#[test]
fn qwen_15b_header_and_tensors() {
    check_model(&QWEN_15B);
}

/// A fresh temporary directory for one test.
fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("turboinfer-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Copies the first `len` bytes of `src` to `dst`.
fn copy_prefix(src: &Path, dst: &Path, len: u64) {
    let mut input = File::open(src).unwrap().take(len);
    let mut out = File::create(dst).unwrap();
    let n = std::io::copy(&mut input, &mut out).unwrap();
    assert_eq!(n, len);
    out.flush().unwrap();
}

/// Offset of the first occurrence of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn truncated_smollm2_copies_give_typed_errors() {
    let Some(path) = common::model_path(SMOLLM2.name) else { return };
    let full = GgufFile::open(&path).unwrap();
    let len = full.len();
    let h = full.header();
    let bytes = full.bytes();
    // The vocabulary array starts right after its key; cut 100 KB into it (≈ token 10 000).
    let vocab_key =
        find(&bytes[..h.data_offset as usize], b"tokenizer.ggml.tokens").unwrap() as u64;
    let mid_vocab = vocab_key + 100_000;
    let last = h.tensors.iter().max_by_key(|t| t.offset).unwrap();
    let last_end = last.offset + last.size;
    assert!(mid_vocab < h.data_offset);

    let dir = temp_dir("gguf-trunc");
    let cuts: [(&str, u64); 9] = [
        ("4 bytes (magic only)", 4),
        ("100 bytes", 100),
        ("in the vocabulary", mid_vocab),
        ("1 byte before the data section", h.data_offset - 1),
        ("at the data section", h.data_offset),
        ("1 byte into the data", h.data_offset + 1),
        ("in the middle of the data", h.data_offset + (len - h.data_offset) / 2),
        ("1 byte short of the last tensor's end", last_end - 1),
        ("1 byte short of EOF", len - 1),
    ];
    for (what, cut) in cuts {
        let p = dir.join("cut.gguf");
        copy_prefix(&path, &p, cut);
        let r = GgufFile::open(&p);
        if cut >= last_end {
            // Only trailing padding is missing: all tensor data is still there.
            let f = r.unwrap_or_else(|e| panic!("cut {what} ({cut}): {e}"));
            assert_eq!(f.tensors(), full.tensors());
            continue;
        }
        let err = r.expect_err(what);
        let msg = err.to_string();
        match &err {
            GgufError::Truncated { file_len, .. } => {
                assert!(cut < h.data_offset, "cut {what}: {msg}");
                assert_eq!(*file_len, cut);
                assert!(msg.contains("truncated"), "{msg}");
            }
            GgufError::TensorOutOfBounds { .. } => {
                assert!(cut >= h.data_offset, "cut {what}: {msg}");
                assert!(msg.contains("outside the file"), "{msg}");
            }
            other => {
                panic!("cut {what} ({cut}): expected Truncated/TensorOutOfBounds, got {other:?}")
            }
        }
        println!("cut {what} at {cut}: {msg}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn smollm2_repacks_identically_through_the_writer() {
    let Some(path) = common::model_path(SMOLLM2.name) else { return };
    let src = GgufFile::open(&path).unwrap();
    let h = src.header();
    let mut w = GgufWriter::new();
    for k in &h.metadata_order {
        w.add_metadata(k.as_str(), h.metadata[k].clone()).unwrap();
    }
    for t in src.tensors() {
        // Borrowed straight from the mapping: nothing is copied until written.
        w.add_tensor(t.name.as_str(), t.ty, &t.dims, src.data_of(t)).unwrap();
    }
    let layout = w.layout();
    let dir = temp_dir("gguf-repack");
    let out = dir.join("repacked.gguf");
    assert_eq!(w.write_file(&out).unwrap(), layout.file_len);
    let re = GgufFile::open(&out).unwrap();
    assert_eq!(re.header().metadata, h.metadata);
    assert_eq!(re.header().metadata_order, h.metadata_order);
    assert_eq!(re.header().data_offset, layout.data_offset);
    assert_eq!(re.tensors().len(), src.tensors().len());
    for (a, b) in src.tensors().iter().zip(re.tensors()) {
        assert_eq!((&a.name, a.ty, &a.dims, a.size), (&b.name, b.ty, &b.dims, b.size));
        assert!(src.data_of(a) == re.data_of(b), "{} data differs", a.name);
    }
    // llama.cpp writes the same layout (tensors in order, each padded to 32), so the repacked file
    // is byte-identical to the original.
    assert_eq!(re.len(), src.len());
    assert!(re.bytes() == src.bytes(), "repacked file differs from the original");
    std::fs::remove_dir_all(&dir).unwrap();
}
