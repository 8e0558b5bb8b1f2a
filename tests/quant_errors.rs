//! Error paths of the public quantization API: unsupported types and wrong lengths are `QuantError`s,
//! never panics, for every entry point and every type id.

use turboinfer::quant::{self, GgmlType, QuantError};

/// Every type id ggml/GGUF defines that we know the layout of.
fn all_types() -> Vec<GgmlType> {
    (0..64).filter_map(GgmlType::from_id).collect()
}

/// Each entry point accepts exactly the types it implements and reports `Unsupported` otherwise.
#[test]
fn unsupported_types_are_errors() {
    use GgmlType::*;
    for ty in all_types() {
        let n = ty.block_size() * 2;
        let bytes = ty.row_bytes(n as u64).unwrap() as usize;
        let mut out = vec![0f32; n];
        let r = quant::dequantize_row(ty, &vec![0u8; bytes], &mut out);
        assert_eq!(r.is_ok(), quant::dequantize_row_fn(ty).is_some(), "{ty}");
        if let Err(e) = r {
            assert!(matches!(e, QuantError::Unsupported { .. }), "{ty}: {e}");
        }
        let act_ty = quant::activation_type(ty);
        let act = vec![0u8; act_ty.row_bytes(n as u64).map(|b| b as usize).unwrap_or(0)];
        let r = quant::vec_dot(ty, n, &vec![0u8; bytes], &act);
        assert_eq!(r.is_ok(), quant::vec_dot_fn(ty).is_some(), "{ty}: {r:?}");
        let r = quant::quantize_row(ty, &out, &mut vec![0u8; bytes]);
        assert_eq!(r.is_ok(), matches!(ty, F32 | Q8_0 | Q8_1 | Q8_K), "{ty}: {r:?}");
    }
    // The types the model code relies on are all there.
    for ty in [F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K] {
        assert!(quant::dequantize_row_fn(ty).is_some() && quant::vec_dot_fn(ty).is_some(), "{ty}");
    }
    assert!(matches!(
        quant::vec_dot(I8, 4, &[0; 4], &[0; 16]),
        Err(QuantError::Unsupported { .. })
    ));
}

/// Buffers of the wrong size and partial blocks are `WrongLength` / `NotBlockMultiple`.
#[test]
fn wrong_lengths_are_errors() {
    for ty in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        let bs = ty.block_size();
        let n = bs * 3;
        let good = ty.row_bytes(n as u64).unwrap() as usize;
        let act_ty = quant::activation_type(ty);
        let good_act = act_ty.row_bytes(n as u64).unwrap() as usize;
        let mut out = vec![0f32; n];
        for bad in [0, good - 1, good + 1, good * 2] {
            let e = quant::dequantize_row(ty, &vec![0u8; bad], &mut out).unwrap_err();
            assert!(matches!(e, QuantError::WrongLength { .. }), "{ty}: {e}");
            let e = quant::vec_dot(ty, n, &vec![0u8; bad], &vec![0u8; good_act]).unwrap_err();
            assert!(matches!(e, QuantError::WrongLength { .. }), "{ty}: {e}");
        }
        for bad in [0, good_act - 1, good_act + 1] {
            let e = quant::vec_dot(ty, n, &vec![0u8; good], &vec![0u8; bad]).unwrap_err();
            assert!(matches!(e, QuantError::WrongLength { .. }), "{ty}: {e}");
        }
        if bs > 1 {
            // Element counts that are not whole blocks.
            for n_bad in [1, bs - 1, bs + 1, 2 * bs + 7] {
                let e = quant::dequantize_row(ty, &vec![0u8; good], &mut vec![0f32; n_bad])
                    .unwrap_err();
                assert!(matches!(e, QuantError::NotBlockMultiple { .. }), "{ty}: {e}");
                let e =
                    quant::vec_dot(ty, n_bad, &vec![0u8; good], &vec![0u8; good_act]).unwrap_err();
                assert!(matches!(e, QuantError::NotBlockMultiple { .. }), "{ty}: {e}");
            }
        }
        // The error text names the type (useful in model-loading messages).
        let e = quant::dequantize_row(ty, &[0u8; 1], &mut out).unwrap_err();
        assert!(e.to_string().contains(ty.name()), "{e}");
    }
    // Weight rows whose block size differs from the activation's (F16 weights of 33 elements are fine,
    // Q8_0 activations of 33 are not).
    assert!(quant::vec_dot(GgmlType::F16, 33, &[0; 66], &[0; 132]).is_ok());
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
        let e = quant::quantize_row(ty, &[0f32; 33], &mut [0u8; 64]).unwrap_err();
        assert!(matches!(e, QuantError::NotBlockMultiple { .. }), "{ty}: {e}");
        let n = ty.block_size();
        let e = quant::quantize_row(ty, &vec![0f32; n], &mut vec![0u8; ty.type_size() - 1])
            .unwrap_err();
        assert!(matches!(e, QuantError::WrongLength { .. }), "{ty}: {e}");
    }
}

/// Zero-length rows are valid and give empty results.
#[test]
fn empty_rows_are_fine() {
    assert_eq!(quant::vec_dot(GgmlType::Q4_K, 0, &[], &[]), Ok(0.0));
    assert_eq!(quant::dequantize_row(GgmlType::Q6_K, &[], &mut []), Ok(()));
    assert_eq!(quant::quantize_row(GgmlType::Q8_K, &[], &mut []), Ok(()));
}

/// Element counts whose byte size overflows are errors, not arithmetic overflow.
#[test]
fn absurd_sizes_are_errors_not_overflows() {
    let n = usize::MAX / 32 * 32;
    let e = quant::vec_dot(GgmlType::Q8_0, n, &[], &[]).unwrap_err();
    assert!(matches!(e, QuantError::TooLarge { .. } | QuantError::WrongLength { .. }), "{e}");
}

/// Random garbage bytes of the right length never panic (scales may decode to inf/nan; that is data,
/// not a crash).
#[test]
fn garbage_blocks_do_not_panic() {
    let mut state = 0x1234_5678_9abc_def0u64;
    for ty in all_types() {
        let (Some(deq), n) = (quant::dequantize_row_fn(ty), ty.block_size() * 4) else { continue };
        let bytes: Vec<u8> = (0..ty.row_bytes(n as u64).unwrap())
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let mut out = vec![0f32; n];
        deq(&bytes, &mut out);
        if let Some(dot) = quant::vec_dot_fn(ty) {
            let act_ty = quant::activation_type(ty);
            let act: Vec<u8> = bytes
                .iter()
                .cycle()
                .take(act_ty.row_bytes(n as u64).unwrap() as usize)
                .copied()
                .collect();
            let _ = dot(n, &bytes, &act);
        }
    }
}
