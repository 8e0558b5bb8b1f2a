//! The tokenizer on small GGUF files built here: exact encodings of a hand-made vocabulary, and a
//! clear error for every kind of missing or bad metadata. Needs no model file.

use turboinfer::gguf::{parse_header, GgufFile};
use turboinfer::tokenizer::{TokenType, Tokenizer, TokenizerError};

/// A metadata value to write.
#[derive(Clone)]
enum Val {
    Str(&'static str),
    U32(u32),
    Bool(bool),
    Strs(Vec<String>),
    I32s(Vec<i32>),
}

/// GGUF value type codes (`gguf_type`).
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;

/// Appends a GGUF string (u64 length + bytes).
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Serializes a GGUF v3 file with the given metadata and no tensors.
fn gguf_bytes(kvs: &[(&str, Val)]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes()); // tensors
    out.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
    for (k, v) in kvs {
        put_str(&mut out, k);
        match v {
            Val::Str(s) => {
                out.extend_from_slice(&T_STRING.to_le_bytes());
                put_str(&mut out, s);
            }
            Val::U32(x) => {
                out.extend_from_slice(&T_U32.to_le_bytes());
                out.extend_from_slice(&x.to_le_bytes());
            }
            Val::Bool(b) => {
                out.extend_from_slice(&T_BOOL.to_le_bytes());
                out.push(*b as u8);
            }
            Val::Strs(v) => {
                out.extend_from_slice(&T_ARRAY.to_le_bytes());
                out.extend_from_slice(&T_STRING.to_le_bytes());
                out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                for s in v {
                    put_str(&mut out, s);
                }
            }
            Val::I32s(v) => {
                out.extend_from_slice(&T_ARRAY.to_le_bytes());
                out.extend_from_slice(&T_I32.to_le_bytes());
                out.extend_from_slice(&(v.len() as u64).to_le_bytes());
                for x in v {
                    out.extend_from_slice(&x.to_le_bytes());
                }
            }
        }
    }
    out
}

/// The GPT-2 byte-level character of byte `b` (written out independently of the crate's table).
fn byte_char(b: u8) -> char {
    let printable = |x: u8| {
        (b'!'..=b'~').contains(&x) || (0xA1..=0xAC).contains(&x) || (0xAE..=0xFF).contains(&x)
    };
    if printable(b) {
        return b as char;
    }
    let rank = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + rank).unwrap()
}

/// Ids of the hand-made vocabulary: bytes 0..=255 are ids 0..=255, then these.
const HE: u32 = 256;
const LL: u32 = 257;
const HELL: u32 = 258;
const HELLO: u32 = 259;
const SPACE_W: u32 = 260;
const IM_START: u32 = 261;
const IM_END: u32 = 262;
const TOOL: u32 = 263;
const PAD: u32 = 264;

/// A complete, valid tokenizer metadata set over the hand-made vocabulary.
fn base_kvs() -> Vec<(&'static str, Val)> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let mut types = vec![1i32; 256];
    for (t, ty) in [
        ("he", 1),
        ("ll", 1),
        ("hell", 1),
        ("hello", 1),
        ("Ġw", 1),
        ("<|im_start|>", 3),
        ("<|im_end|>", 3),
        ("<tool>", 4),
        ("[PAD]", 5),
    ] {
        tokens.push(t.to_string());
        types.push(ty);
    }
    let merges = ["h e", "l l", "he ll", "hell o", "Ġ w"].iter().map(|s| s.to_string()).collect();
    vec![
        ("tokenizer.ggml.model", Val::Str("gpt2")),
        ("tokenizer.ggml.pre", Val::Str("qwen2")),
        ("tokenizer.ggml.tokens", Val::Strs(tokens)),
        ("tokenizer.ggml.token_type", Val::I32s(types)),
        ("tokenizer.ggml.merges", Val::Strs(merges)),
        ("tokenizer.ggml.bos_token_id", Val::U32(IM_START)),
        ("tokenizer.ggml.eos_token_id", Val::U32(IM_END)),
        ("tokenizer.ggml.add_bos_token", Val::Bool(true)),
    ]
}

/// Builds a tokenizer from metadata through the byte-slice header parser.
fn build(kvs: &[(&str, Val)]) -> Result<Tokenizer, TokenizerError> {
    let header = parse_header(&gguf_bytes(kvs)).expect("test GGUF parses");
    Tokenizer::from_metadata(&header.metadata)
}

/// `base_kvs` without `key`.
fn without(key: &str) -> Vec<(&'static str, Val)> {
    base_kvs().into_iter().filter(|(k, _)| *k != key).collect()
}

/// `base_kvs` with `key` set to `v`.
fn with(key: &str, v: Val) -> Vec<(&'static str, Val)> {
    base_kvs().into_iter().map(|(k, old)| (k, if k == key { v.clone() } else { old })).collect()
}

#[test]
fn hand_made_vocabulary_encodes_exactly() {
    let tok = build(&base_kvs()).unwrap();
    assert_eq!(tok.vocab_size(), 265);
    let b = |c: u8| c as u32;
    // "hello" merges fully; " world" -> "Ġw" + single bytes.
    assert_eq!(
        tok.encode("hello world", false).unwrap(),
        vec![HELLO, SPACE_W, b(b'o'), b(b'r'), b(b'l'), b(b'd')]
    );
    // Merge priority: "he" (rank 0) before "ll" (rank 1) -> "hell" (rank 2); "hel" stays "he"+"l".
    assert_eq!(tok.encode("hel", false).unwrap(), vec![HE, b(b'l')]);
    assert_eq!(tok.encode("ll", false).unwrap(), vec![LL]);
    assert_eq!(tok.encode("hell", false).unwrap(), vec![HELL]);
    // Qwen2 splitting: each digit alone; "\r\n" runs kept together; bytes of non-ASCII letters.
    assert_eq!(tok.encode("12", false).unwrap(), vec![b(b'1'), b(b'2')]);
    assert_eq!(tok.encode("é", false).unwrap(), vec![0xC3, 0xA9]);

    let chat = "<|im_start|>hello<|im_end|>";
    assert_eq!(tok.encode(chat, true).unwrap(), vec![IM_START, HELLO, IM_END]);
    let plain = tok.encode(chat, false).unwrap();
    assert!(!plain.contains(&IM_START) && !plain.contains(&IM_END) && plain.contains(&HELLO));
    assert_eq!(tok.decode(&plain), chat);
    // User-defined tokens are matched even without special parsing; unused ones never.
    assert_eq!(tok.encode("a<tool>b", false).unwrap(), vec![b(b'a'), TOOL, b(b'b')]);
    assert!(!tok.encode("[PAD]", true).unwrap().contains(&PAD));

    assert_eq!(tok.encode_prompt("hello", true).unwrap(), vec![IM_START, HELLO]);
    assert_eq!(tok.bos_id(), Some(IM_START));
    assert_eq!(tok.eos_id(), Some(IM_END));
    assert!(tok.add_bos());
    assert!(tok.is_eog(IM_END) && !tok.is_eog(IM_START) && !tok.is_eog(HELLO));
    assert_eq!(tok.eog_ids(), &[IM_END]);

    assert_eq!(tok.token_to_piece(SPACE_W), b" w");
    assert_eq!(tok.token_to_piece(IM_END), b"<|im_end|>");
    assert_eq!(tok.token_to_piece(TOOL), b"<tool>");
    assert!(tok.token_to_piece(PAD).is_empty());
    assert_eq!(tok.token_to_piece(b'\n' as u32), b"\n");
    assert!(tok.token_to_piece(9999).is_empty());
    assert_eq!(tok.token_type(IM_START), Some(TokenType::Control));
    assert_eq!(tok.token_type(TOOL), Some(TokenType::UserDefined));
    assert_eq!(tok.token_id("<tool>"), Some(TOOL));
    assert_eq!(tok.token_text(SPACE_W), Some("Ġw"));
    assert_eq!(tok.decode(&[HELLO, SPACE_W, b(b'o'), IM_END]), "hello wo<|im_end|>");
}

#[test]
fn every_byte_round_trips_and_streams() {
    let tok = build(&base_kvs()).unwrap();
    let text = "héllo wörld 中文 🚀\r\n\t  end";
    let ids = tok.encode(text, false).unwrap();
    assert_eq!(tok.decode(&ids), text);
    let mut dec = tok.stream_decoder();
    let mut out = String::new();
    for &id in &ids {
        let s = dec.push(id);
        out += &s;
        // Each token here is a single byte: after a multi-byte lead byte nothing is emitted yet.
        if tok.token_to_piece(id)[0] >= 0xC0 {
            assert_eq!(s, "");
            assert_eq!(dec.pending().len(), 1);
        }
    }
    out += &dec.finish();
    assert_eq!(out, text);
    // Lone continuation byte: replaced at once; truncated lead byte: replaced at finish.
    let mut dec = tok.stream_decoder();
    assert_eq!(dec.push(0x80), "\u{FFFD}");
    assert_eq!(dec.push(0xE4), "");
    assert_eq!(dec.finish(), "\u{FFFD}");
}

#[test]
fn open_from_file_matches_from_metadata() {
    let bytes = gguf_bytes(&base_kvs());
    let path =
        std::env::temp_dir().join(format!("turboinfer-tokenizer-{}.gguf", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let file = GgufFile::open(&path).unwrap();
    let from_file = Tokenizer::from_gguf(&file);
    drop(file);
    std::fs::remove_file(&path).unwrap();
    let from_file = from_file.unwrap();
    let from_meta = build(&base_kvs()).unwrap();
    let text = "<|im_start|>hello world<|im_end|>";
    assert_eq!(from_file.encode(text, true).unwrap(), from_meta.encode(text, true).unwrap());
}

/// Asserts the error matches and its message names `needle`.
fn expect_err(kvs: Vec<(&'static str, Val)>, check: fn(&TokenizerError) -> bool, needle: &str) {
    match build(&kvs) {
        Ok(_) => panic!("expected an error mentioning {needle:?}"),
        Err(e) => {
            assert!(check(&e), "unexpected error variant: {e:?}");
            assert!(
                e.to_string().contains(needle),
                "message {:?} should mention {needle:?}",
                e.to_string()
            );
        }
    }
}

#[test]
fn missing_keys_are_named() {
    for key in [
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.merges",
    ] {
        match build(&without(key)) {
            Err(TokenizerError::MissingKey(k)) => assert_eq!(k, key),
            other => panic!("{key}: expected MissingKey, got {other:?}"),
        }
    }
    // Optional keys may be absent.
    let tok = build(&without("tokenizer.ggml.add_bos_token")).unwrap();
    assert!(!tok.add_bos());
    assert_eq!(tok.encode_prompt("hello", true).unwrap(), vec![HELLO]);
    assert!(build(&without("tokenizer.ggml.bos_token_id")).unwrap().bos_id().is_none());
}

#[test]
fn unsupported_model_and_pre_tokenizer() {
    expect_err(
        with("tokenizer.ggml.model", Val::Str("llama")),
        |e| matches!(e, TokenizerError::UnsupportedModel(_)),
        "llama",
    );
    expect_err(
        with("tokenizer.ggml.pre", Val::Str("llama-bpe")),
        |e| matches!(e, TokenizerError::UnsupportedPreTokenizer(_)),
        "llama-bpe",
    );
    // The same vocabulary works with the SmolLM pre-tokenizer.
    assert_eq!(
        build(&with("tokenizer.ggml.pre", Val::Str("smollm")))
            .unwrap()
            .encode("hello", false)
            .unwrap(),
        vec![HELLO]
    );
}

#[test]
fn bad_values_are_rejected() {
    expect_err(
        with("tokenizer.ggml.tokens", Val::Str("oops")),
        |e| matches!(e, TokenizerError::WrongType { .. }),
        "tokenizer.ggml.tokens",
    );
    expect_err(
        with("tokenizer.ggml.pre", Val::U32(2)),
        |e| matches!(e, TokenizerError::WrongType { .. }),
        "tokenizer.ggml.pre",
    );
    expect_err(
        with("tokenizer.ggml.tokens", Val::Strs(vec![])),
        |e| matches!(e, TokenizerError::InvalidVocab(_)),
        "empty",
    );
    expect_err(
        with("tokenizer.ggml.token_type", Val::I32s(vec![1; 3])),
        |e| matches!(e, TokenizerError::InvalidVocab(_)),
        "token_type",
    );
    expect_err(
        with("tokenizer.ggml.eos_token_id", Val::U32(9999)),
        |e| matches!(e, TokenizerError::InvalidVocab(_)),
        "eos_token_id",
    );
    expect_err(
        with("tokenizer.ggml.add_bos_token", Val::U32(1)),
        |e| matches!(e, TokenizerError::WrongType { .. }),
        "add_bos_token",
    );
    expect_err(
        with("tokenizer.ggml.merges", Val::Strs(vec!["nospace".into()])),
        |e| matches!(e, TokenizerError::InvalidVocab(_)),
        "nospace",
    );
    // A merge whose result is not in the vocabulary.
    expect_err(
        with("tokenizer.ggml.merges", Val::Strs(vec!["q z".into()])),
        |e| matches!(e, TokenizerError::Build(_)),
        "qz",
    );
}
