//! `requantize` on a tiny model built in memory with the writer: which tensors change type, that
//! the rest is kept byte for byte, the metadata, and that the result reads back with the reader.

use super::requantize::{is_block_matrix, llama_ftype, requantize, RequantizeError, FILE_TYPE_KEY};
use super::{parse_header, GgufWriter, MetaValue};
use crate::quant::{self, GgmlType};

/// `n` deterministic f32 values in [-1, 1).
fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n as u32)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as f32 / 1000.0 - 1.0)
        .collect()
}

/// The bytes of f32 values.
fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A tiny model: two block matrices in F32 and Q8_0, one whose rows (96) are whole Q4_0 blocks but
/// not Q2_K super-blocks, a norm, an F16 embedding and an output head matrix.
fn tiny_model() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", "llama").unwrap();
    w.add_metadata("general.name", "tiny").unwrap();
    // 15: LLAMA_FTYPE_MOSTLY_Q4_K_M, what the shipped model says.
    w.add_metadata(FILE_TYPE_KEY, 15u32).unwrap();
    w.add_metadata("llama.block_count", 1u32).unwrap();
    w.add_tensor("blk.0.attn_q.weight", GgmlType::F32, &[256, 4], f32_bytes(&values(1024, 1)))
        .unwrap();
    let x = values(512, 2);
    let mut q8 = vec![0u8; quant::row_size(GgmlType::Q8_0, 512).unwrap()];
    quant::quantize_row(GgmlType::Q8_0, &x, &mut q8).unwrap();
    w.add_tensor("blk.0.ffn_down.weight", GgmlType::Q8_0, &[256, 2], q8).unwrap();
    w.add_tensor("blk.0.ffn_up.weight", GgmlType::F32, &[96, 2], f32_bytes(&values(192, 3)))
        .unwrap();
    w.add_tensor("blk.0.attn_norm.weight", GgmlType::F32, &[256], f32_bytes(&values(256, 4)))
        .unwrap();
    let emb: Vec<u8> =
        values(768, 5).iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect();
    w.add_tensor("token_embd.weight", GgmlType::F16, &[256, 3], emb).unwrap();
    w.add_tensor("output.weight", GgmlType::F32, &[256, 2], f32_bytes(&values(512, 6))).unwrap();
    w.to_bytes().unwrap()
}

#[test]
fn block_matrix_names() {
    assert!(is_block_matrix("blk.0.attn_q.weight"));
    assert!(is_block_matrix("blk.27.ffn_down.weight"));
    assert!(!is_block_matrix("blk.0.attn_q.bias"));
    assert!(!is_block_matrix("blk.0.attn_norm.weight"));
    assert!(!is_block_matrix("blk.x.attn_q.weight"));
    assert!(!is_block_matrix("blk..attn_q.weight"));
    assert!(!is_block_matrix("output.weight"));
    assert!(!is_block_matrix("token_embd.weight"));
    assert_eq!((llama_ftype(GgmlType::Q4_0), llama_ftype(GgmlType::Q2_K)), (Some(2), Some(10)));
}

#[test]
fn tiny_model_requantizes_and_reads_back() {
    let src = tiny_model();
    let h = parse_header(&src).unwrap();
    for (target, requantized, skipped) in [(GgmlType::Q4_0, 3, 0), (GgmlType::Q2_K, 2, 1)] {
        let (w, s) = requantize(&h, &src, target).unwrap();
        assert_eq!(
            (s.requantized, s.kept, s.skipped.len()),
            (requantized, 6 - requantized, skipped)
        );
        let out = w.to_bytes().unwrap();
        let o = parse_header(&out).unwrap();
        assert_eq!(o.metadata_order, h.metadata_order);
        for k in &h.metadata_order {
            let expect = if k == FILE_TYPE_KEY {
                MetaValue::U32(llama_ftype(target).unwrap())
            } else {
                h.metadata[k].clone()
            };
            assert_eq!(o.metadata[k], expect, "{k}");
        }
        assert_eq!(o.tensors.len(), h.tensors.len());
        let mut bytes_out = 0;
        for (a, b) in h.tensors.iter().zip(&o.tensors) {
            assert_eq!((&a.name, &a.dims), (&b.name, &b.dims));
            let (da, db) = (
                &src[a.offset as usize..(a.offset + a.size) as usize],
                &out[b.offset as usize..(b.offset + b.size) as usize],
            );
            bytes_out += b.size;
            let changed = is_block_matrix(&a.name) && a.dims[0] % target.block_size() as u64 == 0;
            if !changed {
                assert_eq!((b.ty, da), (a.ty, db), "{} kept", a.name);
                continue;
            }
            // The requantized bytes are the target quantizer's of the dequantized source rows.
            assert_eq!(b.ty, target, "{}", a.name);
            assert_eq!(b.size, target.row_bytes(a.dims[0]).unwrap() * a.dims[1]);
            let mut x = vec![0f32; a.n_elements() as usize];
            for (r, xr) in x.chunks_mut(a.row_len()).enumerate() {
                let rb = a.row_bytes();
                quant::dequantize_row(a.ty, &da[r * rb..(r + 1) * rb], xr).unwrap();
            }
            let mut expect = vec![0u8; b.size as usize];
            for (xr, e) in x.chunks(a.row_len()).zip(expect.chunks_mut(b.row_bytes())) {
                quant::quantize_weights(target, xr, e).unwrap();
            }
            assert_eq!(db, &expect[..], "{}", a.name);
        }
        assert_eq!(s.bytes_out, bytes_out);
        assert_eq!(s.bytes_in, h.tensors.iter().map(|t| t.size).sum::<u64>());
        // Before: attn_q (and for Q4_0 ffn_up) in F32, 32 bits, ffn_down in Q8_0, 8.5 bits.
        let (before, after) = s.requantized_bits();
        let expect = if target == GgmlType::Q4_0 {
            (1024.0 * 32.0 + 512.0 * 8.5 + 192.0 * 32.0) / 1728.0
        } else {
            (1024.0 * 32.0 + 512.0 * 8.5) / 1536.0
        };
        assert!((before - expect).abs() < 1e-9, "{before} vs {expect}");
        let bits = if target == GgmlType::Q4_0 { 4.5 } else { 2.625 };
        assert_eq!(after, bits);
    }
    if let Some((name, why)) = requantize(&h, &src, GgmlType::Q2_K).unwrap().1.skipped.first() {
        assert_eq!(name, "blk.0.ffn_up.weight");
        assert!(why.contains("multiple of 256"), "{why}");
    }
}

#[test]
fn unknown_target_is_refused() {
    let src = tiny_model();
    let h = parse_header(&src).unwrap();
    for ty in [GgmlType::Q4_K, GgmlType::F16, GgmlType::Q8_0] {
        assert!(matches!(requantize(&h, &src, ty), Err(RequantizeError::Target(t)) if t == ty));
    }
}
