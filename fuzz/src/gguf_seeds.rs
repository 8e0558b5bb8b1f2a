//! Writes a seed corpus for the `gguf_header` fuzz target into the directory given as the first
//! argument: small valid GGUF files made with `GgufWriter` (every value type, several tensor types,
//! several alignments) and, for each further argument, the first 64 KiB of that real model file.

use std::io::Read;
use std::path::{Path, PathBuf};
use turboinfer::gguf::{GgufWriter, MetaArray, MetaValue};
use turboinfer::quant::GgmlType;

/// How much of a real model to keep as a seed: enough for the magic, counts and the first
/// metadata (architecture, hyper-parameters, start of the vocabulary), small enough for libFuzzer.
const REAL_PREFIX: usize = 64 * 1024;

/// A file with one value of every metadata type and arrays of every element type.
fn all_types() -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    let kv: Vec<(&str, MetaValue)> = vec![
        ("general.architecture", "llama".into()),
        ("u8", 1u8.into()),
        ("i8", (-1i8).into()),
        ("u16", 2u16.into()),
        ("i16", (-2i16).into()),
        ("u32", 3u32.into()),
        ("i32", (-3i32).into()),
        ("f32", 0.5f32.into()),
        ("bool", true.into()),
        ("str", "text".into()),
        ("u64", 4u64.into()),
        ("i64", (-4i64).into()),
        ("f64", 0.25f64.into()),
        ("a.u8", vec![1u8, 2].into()),
        ("a.i32", vec![1i32, -2].into()),
        ("a.f32", vec![1.0f32].into()),
        ("a.bool", vec![true, false].into()),
        ("a.str", vec!["a".to_string(), "bc".to_string()].into()),
        ("a.u64", vec![9u64].into()),
        (
            "a.nested",
            MetaArray::Array(vec![MetaArray::U16(vec![1]), MetaArray::Array(vec![])]).into(),
        ),
    ];
    for (k, v) in kv {
        w.add_metadata(k, v).expect("valid seed metadata");
    }
    w
}

/// Adds a tensor of each block geometry (plain, 32-blocks, 256-blocks) with patterned bytes.
fn add_tensors(w: &mut GgufWriter<'static>) {
    let specs: [(&str, GgmlType, &[u64]); 4] = [
        ("f32", GgmlType::F32, &[4, 2]),
        ("f16", GgmlType::F16, &[3]),
        ("q8_0", GgmlType::Q8_0, &[32, 2]),
        ("q4_k", GgmlType::Q4_K, &[256]),
    ];
    for (name, ty, dims) in specs {
        let rows: u64 = dims[1..].iter().product();
        let n = (ty.row_bytes(dims[0]).expect("whole blocks") * rows) as usize;
        let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
        w.add_tensor(name, ty, dims, data).expect("valid seed tensor");
    }
}

/// Writes one seed file.
fn put(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).unwrap_or_else(|e| panic!("writing seed {name}: {e}"));
    println!("seed {name}: {} bytes", bytes.len());
}

/// Entry point: `gguf_seeds <corpus dir> [model.gguf ...]`.
fn main() {
    let mut args = std::env::args_os().skip(1);
    let dir = PathBuf::from(args.next().expect("usage: gguf_seeds <corpus dir> [model.gguf ...]"));
    std::fs::create_dir_all(&dir).expect("create corpus dir");

    put(&dir, "empty.gguf", &GgufWriter::new().to_bytes().unwrap());
    put(&dir, "metadata.gguf", &all_types().to_bytes().unwrap());
    let mut w = all_types();
    add_tensors(&mut w);
    put(&dir, "tensors.gguf", &w.to_bytes().unwrap());
    let mut w = GgufWriter::new();
    w.set_alignment(64).unwrap();
    add_tensors(&mut w);
    put(&dir, "aligned64.gguf", &w.to_bytes().unwrap());

    for model in args {
        let model = PathBuf::from(model);
        let mut buf = Vec::with_capacity(REAL_PREFIX);
        match std::fs::File::open(&model) {
            Ok(f) => {
                f.take(REAL_PREFIX as u64).read_to_end(&mut buf).expect("read model prefix");
                let stem = model.file_stem().unwrap_or_default().to_string_lossy().into_owned();
                put(&dir, &format!("{stem}.head64k.gguf"), &buf);
            }
            Err(e) => println!("skipping {}: {e}", model.display()),
        }
    }
}
