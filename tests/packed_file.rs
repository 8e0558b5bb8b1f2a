//! The packed Q4_K/Q6_K weights file (`model::packed`, `<model>.kx16`) on the real Q4_K/Q6_K model
//! (qwen2.5-coder-0.5b): write and open, every way a file can be bad (each a clear
//! `PackedError`, never a panic), the load policy next to the model, the pack → unpack round
//! trip of a real tensor, and logits of a packed model bitwise equal to the unpacked model's.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use turboinfer::gguf::GgufFile;
use turboinfer::kernels::packed::{unpack_block, unpack_block_q6_k, PACK_ROWS};
use turboinfer::model::packed::{self, fnv1a64, PackedError, PackedFile};
use turboinfer::model::{Logits, Model, ModelError, PackStatus, ReadFrom};
use turboinfer::platform::runtime::Runtime;
use turboinfer::quant::GgmlType;

/// The Q4_K/Q6_K test model.
const MODEL: &str = "qwen2.5-coder-0.5b";

/// A fresh, empty temporary directory for test `tag`.
fn tmp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("turboinfer-packed-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes a test's temporary directory when dropped (also when the test fails).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    /// Deletes the directory and everything in it.
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The opened test model and a pack of it written into a fresh directory for `tag` (deleted
/// with the returned guard).
fn model_and_pack(tag: &str) -> Option<(Arc<GgufFile>, PathBuf, Cleanup)> {
    let path = common::model_path(MODEL)?;
    let gguf = Arc::new(GgufFile::open(&path).unwrap());
    let dir = tmp_dir(tag);
    let out = dir.join("model.gguf.kx16");
    let s = packed::write(&gguf, &out).unwrap();
    assert_eq!(s.bytes, std::fs::metadata(&out).unwrap().len());
    Some((gguf, out, Cleanup(dir)))
}

/// Rewrites the header checksum (bytes 56..64) after a test edited the header.
fn fix_header(b: &mut [u8]) {
    let h = fnv1a64(&b[..56]);
    b[56..64].copy_from_slice(&h.to_le_bytes());
}

/// Rewrites the table checksum (the table ends where the first entry's data starts, minus
/// padding: recomputed over the entries as listed) and then the header checksum.
fn fix_table(b: &mut [u8], n: usize) {
    let mut at = 64;
    for _ in 0..n {
        let nl = u16::from_le_bytes([b[at], b[at + 1]]) as usize;
        at += 2 + nl + 32;
    }
    let h = fnv1a64(&b[64..at]);
    b[48..56].copy_from_slice(&h.to_le_bytes());
    fix_header(b);
}

/// Applies `edit` to a copy of the pack at `src` and opens the copy against `gguf`.
fn open_edited(
    src: &Path,
    gguf: &GgufFile,
    name: &str,
    edit: impl FnOnce(&mut Vec<u8>),
) -> Result<PackedFile, PackedError> {
    let mut b = std::fs::read(src).unwrap();
    edit(&mut b);
    let p = src.with_file_name(name);
    std::fs::write(&p, &b).unwrap();
    let r = PackedFile::open(&p, gguf);
    let _ = std::fs::remove_file(&p); // a mapping outlives the name
    r
}

/// Writing then opening gives one entry per packable matrix, 64-byte aligned, as long as the tensor.
#[test]
fn write_and_open() {
    let Some((gguf, out, _cleanup)) = model_and_pack("open") else { return };
    let p = PackedFile::open(&out, &gguf).unwrap();
    let want: Vec<&str> = gguf
        .tensors()
        .iter()
        .filter(|t| packed::worth_packing(&gguf, t))
        .map(|t| t.name.as_str())
        .collect();
    let got: Vec<&str> = p.entries().iter().map(|e| e.name.as_str()).collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    for e in p.entries() {
        let t = gguf.tensor(&e.name).unwrap();
        assert_eq!((e.offset % 64, e.len), (0, t.info.size), "{}", e.name);
        assert_eq!(p.data_of(e).len(), t.data.len());
    }
    assert!(p.matches(&gguf));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o644);
    }
    // No temporary file is left behind.
    let names: Vec<_> =
        std::fs::read_dir(out.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    println!("packed {} tensors, {} bytes", p.entries().len(), p.len());
}

/// Every packed tensor unpacks (`kernels::packed::unpack_block`) to exactly the GGUF's bytes.
#[test]
fn pack_unpack_round_trips_real_tensors() {
    let Some((gguf, out, _cleanup)) = model_and_pack("roundtrip") else { return };
    let p = PackedFile::open(&out, &gguf).unwrap();
    for e in p.entries() {
        let t = gguf.tensor(&e.name).unwrap();
        let (rb, nb) = (t.info.row_bytes(), t.info.row_len() / 256);
        let packed = p.data_of(e);
        assert_ne!(packed, t.data, "{}: packing must permute the bytes", e.name);
        for (g, group) in packed.chunks_exact(PACK_ROWS * rb).enumerate() {
            for r in 0..PACK_ROWS {
                let row = &t.data[(g * PACK_ROWS + r) * rb..][..rb];
                for b in 0..nb {
                    let (got, bb) = match t.info.ty {
                        GgmlType::Q6_K => (unpack_block_q6_k(group, b, r).to_vec(), 210),
                        _ => (unpack_block(group, b, r).to_vec(), 144),
                    };
                    assert_eq!(
                        &got[..],
                        &row[b * bb..(b + 1) * bb],
                        "{} group {g} row {r} block {b}",
                        e.name
                    );
                }
            }
        }
    }
}

/// Every bad file is a clear error naming the problem, never a panic.
#[test]
fn bad_files_are_refused() {
    let Some((gguf, out, _cleanup)) = model_and_pack("bad") else { return };
    let n = PackedFile::open(&out, &gguf).unwrap().entries().len();
    /// The error of a refused open (the caller's line on failure).
    #[track_caller]
    fn msg(r: Result<PackedFile, PackedError>) -> PackedError {
        r.map(|_| ()).unwrap_err()
    }

    let e = msg(PackedFile::open(out.with_file_name("absent.kx16"), &gguf));
    assert!(matches!(e, PackedError::Missing { .. }), "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");

    let e = msg(open_edited(&out, &gguf, "magic", |b| b[0] = b'X'));
    assert!(matches!(e, PackedError::BadMagic { .. }), "{e}");

    let e = msg(open_edited(&out, &gguf, "short-header", |b| b.truncate(40)));
    assert!(matches!(e, PackedError::Truncated { .. }), "{e}");
    let e = msg(open_edited(&out, &gguf, "empty", |b| b.clear()));
    assert!(matches!(e, PackedError::Truncated { .. }), "{e}");
    let e = msg(open_edited(&out, &gguf, "truncated", |b| b.truncate(b.len() / 2)));
    assert!(matches!(e, PackedError::Truncated { .. }), "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
    let e = msg(open_edited(&out, &gguf, "longer", |b| b.extend_from_slice(&[0; 64])));
    assert!(matches!(e, PackedError::Corrupt { .. }), "{e}");

    let e = msg(open_edited(&out, &gguf, "header-byte", |b| b[20] ^= 1));
    assert!(matches!(e, PackedError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("header checksum"), "{e}");

    let e = msg(open_edited(&out, &gguf, "version", |b| {
        b[8..12].copy_from_slice(&1u32.to_le_bytes()); // version 1: Q4_K matrices only
        fix_header(b);
    }));
    assert!(matches!(e, PackedError::WrongVersion { found: 1, .. }), "{e}");
    // A future format with another header layout: the version is still what is reported.
    let e = msg(open_edited(&out, &gguf, "version-raw", |b| {
        b[8..12].copy_from_slice(&7u32.to_le_bytes())
    }));
    assert!(matches!(e, PackedError::WrongVersion { found: 7, .. }), "{e}");

    // The source changed: another header hash, or another length.
    let e = msg(open_edited(&out, &gguf, "hash", |b| {
        b[32] ^= 1;
        fix_header(b);
    }));
    assert!(matches!(e, PackedError::Stale { .. }), "{e}");
    assert!(e.to_string().contains("stale"), "{e}");
    let e = msg(open_edited(&out, &gguf, "srclen", |b| {
        b[16] ^= 1;
        fix_header(b);
    }));
    assert!(matches!(e, PackedError::Stale { .. }), "{e}");

    // Entry table damage: the checksum catches it; a consistent but wrong table is checked entry by entry.
    let off_at = |b: &[u8]| 64 + 2 + u16::from_le_bytes([b[64], b[65]]) as usize;
    let e = msg(open_edited(&out, &gguf, "table-byte", |b| {
        let at = off_at(b);
        b[at] ^= 0x40;
    }));
    assert!(matches!(e, PackedError::Corrupt { .. }) && e.to_string().contains("table"), "{e}");
    let e = msg(open_edited(&out, &gguf, "oob", |b| {
        let at = off_at(b);
        b[at..at + 8].copy_from_slice(&(u64::MAX - 8).to_le_bytes());
        fix_table(b, n);
    }));
    assert!(matches!(e, PackedError::OutOfBounds { .. }), "{e}");
    let e = msg(open_edited(&out, &gguf, "oob2", |b| {
        let at = off_at(b);
        let len = b.len() as u64;
        b[at..at + 8].copy_from_slice(&(len - 64).to_le_bytes());
        fix_table(b, n);
    }));
    assert!(matches!(e, PackedError::OutOfBounds { .. }), "{e}");
    let e = msg(open_edited(&out, &gguf, "misaligned", |b| {
        let at = off_at(b);
        let o = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        b[at..at + 8].copy_from_slice(&(o + 8).to_le_bytes());
        fix_table(b, n);
    }));
    assert!(matches!(e, PackedError::BadEntry { .. }) && e.to_string().contains("aligned"), "{e}");
    let e = msg(open_edited(&out, &gguf, "length", |b| {
        let at = off_at(b) + 8;
        let l = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
        b[at..at + 8].copy_from_slice(&(l - 144).to_le_bytes());
        fix_table(b, n);
    }));
    assert!(matches!(e, PackedError::BadEntry { .. }), "{e}");
    let e = msg(open_edited(&out, &gguf, "name", |b| {
        b[66] = b'X';
        fix_table(b, n);
    }));
    assert!(
        matches!(e, PackedError::BadEntry { .. }) && e.to_string().contains("no such tensor"),
        "{e}"
    );
    // A tensor of the model that is not a packable matrix (a norm vector, a Q5_0/Q8_0
    // matrix) under the first entry's name, with the same name length so the layout stays.
    let nl = std::fs::read(&out).unwrap()[64] as usize;
    if let Some(t) =
        gguf.tensors().iter().find(|t| packed::packable_shape(t).is_none() && t.name.len() == nl)
    {
        let e = msg(open_edited(&out, &gguf, "unpackable", |b| {
            b[66..66 + nl].copy_from_slice(t.name.as_bytes());
            fix_table(b, n);
        }));
        assert!(
            matches!(e, PackedError::BadEntry { .. }) && e.to_string().contains("packable"),
            "{e}"
        );
        println!("{e}");
    }

    // Damaged packed data.
    let e = msg(open_edited(&out, &gguf, "data", |b| {
        let at = off_at(b);
        let o = u64::from_le_bytes(b[at..at + 8].try_into().unwrap()) as usize;
        b[o + 100] ^= 0xff;
    }));
    assert!(matches!(e, PackedError::BadEntry { .. }) && e.to_string().contains("damaged"), "{e}");

    // Not a file at all.
    let e = msg(PackedFile::open(out.parent().unwrap(), &gguf));
    assert!(matches!(e, PackedError::Io { .. }), "{e}");
}

/// A pack of one model opened against, or attached to, another model is stale.
#[test]
fn pack_of_another_model_is_stale() {
    let Some((gguf, out, _cleanup)) = model_and_pack("stale") else { return };
    let Some(other_path) = common::model_path("smollm2-135m") else { return };
    let other = Arc::new(GgufFile::open(&other_path).unwrap());
    let e = PackedFile::open(&out, &other).map(|_| ()).unwrap_err();
    assert!(matches!(e, PackedError::Stale { .. }), "{e}");
    println!("{e}");
    let pack = Arc::new(PackedFile::open(&out, &gguf).unwrap());
    let mut m = Model::from_gguf(other).unwrap();
    let e = m.attach_packed(pack).unwrap_err();
    assert!(matches!(e, ModelError::Packed(PackedError::Stale { .. })), "{e}");
    assert_eq!((m.packed_matrices(), m.pack_status()), (0, &PackStatus::None));
}

/// `Model::load` next to a pack: valid → attached; bad → ignored with the reason (and the model
/// still runs); absent → none.
#[test]
fn load_policy() {
    let Some(path) = common::model_path(MODEL) else { return };
    let dir = tmp_dir("policy");
    let _cleanup = Cleanup(dir.clone());
    let link = dir.join("m.gguf");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&path, &link).unwrap();
    #[cfg(not(unix))]
    return;
    let m = Model::load(&link).unwrap();
    assert_eq!(m.pack_status(), &PackStatus::None);
    assert_eq!(m.pack_status().to_string(), "none");

    let side = packed::sidecar_path(&link);
    packed::write(m.file(), &side).unwrap();
    let m = Model::load(&link).unwrap();
    let n = m.packed_matrices();
    assert!(n > 0 && m.packed_bytes() > 0);
    assert!(matches!(m.pack_status(), PackStatus::Attached { matrices, .. } if *matrices == n));
    assert!(
        m.pack_status().to_string().starts_with(&format!("kx16 ({n} matrices)")),
        "{}",
        m.pack_status()
    );
    println!("attached: {}", m.pack_status());

    let mut b = std::fs::read(&side).unwrap();
    b.truncate(b.len() - 1000);
    std::fs::write(&side, &b).unwrap();
    let m = Model::load(&link).unwrap();
    assert_eq!(m.packed_matrices(), 0);
    let s = m.pack_status().to_string();
    assert!(s.starts_with("ignored: ") && s.contains("truncated"), "{s}");
    println!("{s}");
    let rt = Runtime::new(1).unwrap();
    let mut c = m.new_cache(8);
    m.forward(&rt, &mut c, &[1, 2], Logits::Last).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model with the pack attached gives logits bitwise equal to the unpacked model's.
#[test]
fn packed_logits_equal_unpacked() {
    let Some((gguf, out, _cleanup)) = model_and_pack("logits") else { return };
    let kset = turboinfer::kernels::kernels();
    match kset.packed_q4_k() {
        Some(_) => {
            println!("kernel path: packed Q4_K/Q6_K x16 kernels of tier {}", kset.tier().name())
        }
        None => println!(
            "kernel path: tier {} has no packed kernel, both runs use the unpacked kernels",
            kset.tier().name()
        ),
    }
    let plain = Model::from_gguf(gguf.clone()).unwrap();
    let mut packed_model = Model::from_gguf(gguf.clone()).unwrap();
    let n = packed_model.attach_packed(Arc::new(PackedFile::open(&out, &gguf).unwrap())).unwrap();
    assert!(n > 0);
    assert_eq!(plain.packed_matrices(), 0);
    let rt = Runtime::new(2).unwrap();
    let prompt = [31u32, 414, 2093, 17, 90];
    let mut a = plain.new_cache(32);
    let mut b = packed_model.new_cache(32);
    let la = plain.forward(&rt, &mut a, &prompt, Logits::All).unwrap();
    let lb = packed_model.forward(&rt, &mut b, &prompt, Logits::All).unwrap();
    assert_eq!(la.len(), lb.len());
    for (i, (x, y)) in la.iter().zip(&lb).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "logit {i}: {x} vs {y}");
    }
    // One decode step (the single-vector path).
    let la = plain.forward(&rt, &mut a, &[42], Logits::Last).unwrap();
    let lb = packed_model.forward(&rt, &mut b, &[42], Logits::Last).unwrap();
    assert!(la.iter().zip(&lb).all(|(x, y)| x.to_bits() == y.to_bits()), "decode step differs");
    packed_model.detach_packed();
    assert_eq!(packed_model.packed_matrices(), 0);
}

/// Read-ahead (`Model::set_readahead`) covers exactly what a pass reads, from the file it reads
/// it from, advises each stage once, and changes no logit bit; nor does streaming the weights
/// under a budget (`Model::set_weight_budget`).
#[test]
fn readahead_follows_the_pass() {
    let Some((gguf, out, _cleanup)) = model_and_pack("readahead") else { return };
    let mut model = Model::from_gguf(gguf.clone()).unwrap();
    model.attach_packed(Arc::new(PackedFile::open(&out, &gguf).unwrap())).unwrap();
    let n_layers = model.config().n_layers;
    // Every matrix is read from where `rows_with` reads it: the pack when its tier has a packed
    // kernel for the matrix's type (the 256-bit tiers have one for Q4_K, not for Q6_K).
    let has_kernel = |ty| turboinfer::kernels::kernels().packed(ty).is_some();
    let w = model.weights();
    let mut matrices: Vec<_> = w.layers.iter().flat_map(|l| l.matrices()).collect();
    matrices.push(&w.output);
    let mut want = 0;
    for m in &matrices {
        want += m.byte_len();
        match (m.reads_from(), m.packed_range()) {
            (ReadFrom::Pack(r), Some(p)) => assert!(has_kernel(m.ty) && r == p, "{}", m.name),
            (ReadFrom::Gguf(r), p) => {
                assert!(p.is_none() || !has_kernel(m.ty), "{}", m.name);
                assert_eq!(r.len(), m.byte_len(), "{}", m.name);
            }
            (ReadFrom::Pack(_), None) => panic!("{} read from a pack it is not in", m.name),
        }
    }
    // The stages' bytes: every matrix, plus at most the small gaps merged between them.
    let (advised, stages, bytes) = model.readahead_progress();
    assert_eq!((advised, stages), (0, n_layers + 1));
    assert!(bytes >= want && bytes <= want + want / 100, "{bytes} vs {want}");

    let rt = Runtime::new(2).unwrap();
    let prompt = [31u32, 414, 2093, 17, 90];
    let run = |m: &Model| {
        let mut c = m.new_cache(32);
        let mut l = m.forward(&rt, &mut c, &prompt, Logits::All).unwrap();
        l.extend(m.forward(&rt, &mut c, &[42], Logits::Last).unwrap());
        l
    };
    model.set_readahead(0);
    let off = run(&model);
    assert_eq!(model.readahead_progress().0, 0, "depth 0 advises nothing");
    model.set_readahead(2);
    let on = run(&model);
    assert_eq!(model.readahead_progress().0, n_layers + 1, "one pass advises every stage");
    assert!(off.iter().zip(&on).all(|(x, y)| x.to_bits() == y.to_bits()));
    // A budget below one pass streams the weights (advised every pass, dropped behind): the
    // same bits again; a budget above it changes nothing.
    model.set_weight_budget(Some(bytes + 1));
    assert!(!model.streams_weights());
    model.set_weight_budget(Some(bytes / 4));
    assert!(model.streams_weights());
    let streamed = run(&model);
    assert!(off.iter().zip(&streamed).all(|(x, y)| x.to_bits() == y.to_bits()));
    assert_eq!(model.readahead_progress().0, n_layers + 1, "every stage advised again");
    model.set_weight_budget(None);
    // Detaching rebuilds the stages over the model file, not yet advised.
    model.detach_packed();
    assert_eq!(model.readahead_progress().0, 0);
    let w = model.weights();
    assert!(w
        .layers
        .iter()
        .flat_map(|l| l.matrices())
        .chain([&w.output])
        .all(|m| { matches!(m.reads_from(), ReadFrom::Gguf(r) if r.len() == m.byte_len()) }));
}

/// `turboinfer pack`: writes the pack, skips a valid one, replaces a bad one, and has nothing to
/// do for a model without Q4_K or Q6_K matrices.
#[test]
fn cli_pack_is_idempotent() {
    let Some(path) = common::model_path(MODEL) else { return };
    let out = tmp_dir("cli").join("p.kx16");
    let _cleanup = Cleanup(out.parent().unwrap().to_path_buf());
    let run = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_turboinfer"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let (m, o) = (path.to_str().unwrap(), out.to_str().unwrap());
    let s = run(&["pack", m, "-o", o]);
    assert!(s.contains("tensors") && s.contains(" bytes") && s.contains(" s\n"), "{s}");
    let s = run(&["pack", m, "-o", o]);
    assert!(s.contains("skipped"), "{s}");
    std::fs::write(&out, b"not a pack").unwrap();
    let s = run(&["pack", m, "-o", o]);
    assert!(s.contains("replacing unusable pack") && s.contains("tensors"), "{s}");
    let gguf = GgufFile::open(&path).unwrap();
    PackedFile::open(&out, &gguf).unwrap();
    if let Some(small) = common::model_path("smollm2-135m") {
        let s = run(&["pack", small.to_str().unwrap(), "-o", o]);
        assert!(s.contains("nothing to pack"), "{s}");
    }
    let _ = std::fs::remove_dir_all(out.parent().unwrap());
}

/// A Q2_K model with a pack: its matrices are packed in the lookup-table layout (`Q2_K×32`), the
/// decode step runs the LUT kernel where the tier uses it (`KernelSet::lut`), and the logits are
/// bitwise the unpacked model's, prompt batch and decode step alike. The model is Qwen2.5-Coder-1.5B
/// cut to its first block, whose seven matrices are replaced by random valid Q2_K ones (its row
/// lengths, 1536 and 8960, are whole Q2_K super-blocks; no shipped model is Q2_K).
#[test]
fn q2_k_lut_logits_equal_unpacked() {
    use turboinfer::gguf::{GgufWriter, MetaValue};
    let Some(base) = common::model_path("qwen2.5-coder-1.5b") else { return };
    let src = GgufFile::open(&base).unwrap();
    let h = src.header();
    let mut w = GgufWriter::new();
    for k in &h.metadata_order {
        let v = if k.ends_with(".block_count") { MetaValue::U32(1) } else { h.metadata[k].clone() };
        w.add_metadata(k.as_str(), v).unwrap();
    }
    let mut seed = 0x51ed_2701u64;
    let mut next = move || {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) as u32
    };
    let matrices = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"];
    let mut random: Vec<(String, Vec<u64>, Vec<u8>)> = Vec::new();
    for t in src.tensors() {
        let is_matrix = matrices.iter().any(|m| t.name == format!("blk.0.{m}.weight"));
        if is_matrix {
            let (cols, rows) = (t.dims[0] as usize, t.dims[1] as usize);
            let mut b: Vec<u8> = (0..rows * cols / 256 * 84).map(|_| next() as u8).collect();
            for blk in b.chunks_exact_mut(84) {
                // Small finite f16 d and dmin (exponent field 3..4: about 2^-12..2^-11).
                blk[80..82].copy_from_slice(&(0x0C00u16 + (next() % 0x800) as u16).to_le_bytes());
                blk[82..84].copy_from_slice(&(0x0C00u16 + (next() % 0x800) as u16).to_le_bytes());
            }
            random.push((t.name.clone(), t.dims.clone(), b));
        }
    }
    for t in src.tensors() {
        if t.name.starts_with("blk.") && !t.name.starts_with("blk.0.") {
            continue;
        }
        if let Some((name, dims, b)) = random.iter().find(|r| r.0 == t.name) {
            w.add_tensor(name.as_str(), GgmlType::Q2_K, dims, b).unwrap();
        } else {
            w.add_tensor(t.name.as_str(), t.ty, &t.dims, src.data_of(t)).unwrap();
        }
    }
    let dir = tmp_dir("q2k-lut");
    let _cleanup = Cleanup(dir.clone());
    let path = dir.join("q2k-one-block.gguf");
    w.write_file(&path).unwrap();
    let gguf = Arc::new(GgufFile::open(&path).unwrap());
    let out = dir.join("q2k-one-block.gguf.kx16");
    packed::write(&gguf, &out).unwrap();
    let pack = Arc::new(PackedFile::open(&out, &gguf).unwrap());
    // The seven Q2_K matrices (and the K-quant LM head, if it packs) are in the pack.
    for m in matrices {
        assert!(pack.entry(&format!("blk.0.{m}.weight")).is_some(), "{m} not packed");
    }
    let kset = turboinfer::kernels::kernels();
    match kset.lut(GgmlType::Q2_K) {
        Some(_) => println!("kernel path: Q2_K LUT kernel on tier {}", kset.tier().name()),
        None => println!(
            "kernel path: tier {} does not use the LUT kernel, both runs dot Q2_K unpacked",
            kset.tier().name()
        ),
    }
    let plain = Model::from_gguf(gguf.clone()).unwrap();
    let mut lut_model = Model::from_gguf(gguf.clone()).unwrap();
    assert!(lut_model.attach_packed(pack).unwrap() >= matrices.len());
    let rt = Runtime::new(2).unwrap();
    let prompt = [31u32, 414, 2093, 17, 90];
    let mut a = plain.new_cache(32);
    let mut b = lut_model.new_cache(32);
    let la = plain.forward(&rt, &mut a, &prompt, Logits::All).unwrap();
    let lb = lut_model.forward(&rt, &mut b, &prompt, Logits::All).unwrap();
    assert!(la.iter().any(|x| x.is_finite() && *x != 0.0), "degenerate logits");
    for (i, (x, y)) in la.iter().zip(&lb).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "prompt logit {i}: {x} vs {y}");
    }
    // Decode steps: the single-vector path, where the LUT kernel runs.
    for tok in [42u32, 7, 1000] {
        let la = plain.forward(&rt, &mut a, &[tok], Logits::Last).unwrap();
        let lb = lut_model.forward(&rt, &mut b, &[tok], Logits::Last).unwrap();
        for (i, (x, y)) in la.iter().zip(&lb).enumerate() {
            assert_eq!(x.to_bits(), y.to_bits(), "decode {tok}: logit {i}: {x} vs {y}");
        }
    }
}
