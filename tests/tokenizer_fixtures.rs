//! The tokenizer against llama.cpp's reference token ids for the three real models.

mod common;

use serde_json::Value;
use turboinfer::gguf::GgufFile;
use turboinfer::tokenizer::Tokenizer;

/// The tokenizer and fixture of model `name`, or `None` when the model is absent (skip).
fn load(name: &str) -> Option<(Tokenizer, Value)> {
    let path = common::model_path(name)?;
    let fixture = common::load_fixture(name)?;
    let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let tok = Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{name}: {e}"));
    Some((tok, fixture))
}

/// A JSON array of token ids.
fn ids(v: &Value) -> Vec<u32> {
    v.as_array().expect("id array").iter().map(|x| x.as_u64().expect("id") as u32).collect()
}

/// Every `tokenize` text encodes to exactly llama.cpp's ids (special tokens parsed, nothing added).
fn check_tokenize(name: &str) {
    let Some((tok, fx)) = load(name) else { return };
    let cases = fx["tokenize"].as_array().expect("tokenize array");
    assert_eq!(cases.len(), 18, "{name}: fixture should hold 18 texts");
    let mut failures = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        let got = tok.encode(text, true).unwrap();
        if got != want {
            failures.push(format!("{text:?}\n  want {want:?}\n  got  {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{name}: {} mismatches:\n{}", failures.len(), failures.join("\n"));
}

/// Every `generate` prompt encodes to llama.cpp's prompt ids (BOS per the metadata), and the
/// greedy output ids decode to llama.cpp's output text (end-of-generation tokens not rendered).
fn check_generate(name: &str) {
    let Some((tok, fx)) = load(name) else { return };
    let gens = fx["generate"].as_array().expect("generate array");
    assert!(!gens.is_empty());
    for g in gens {
        let prompt = g["prompt"].as_str().unwrap();
        let want = ids(&g["prompt_ids"]);
        assert_eq!(tok.encode_prompt(prompt, true).unwrap(), want, "{name}: prompt {prompt:?}");
        let out: Vec<u32> = ids(&g["output_ids"]).into_iter().filter(|&t| !tok.is_eog(t)).collect();
        assert_eq!(tok.decode(&out), g["output_text"].as_str().unwrap(), "{name}: output text");
    }
}

/// decode(encode(x)) == x for every fixture text, with and without special-token parsing, and
/// control tokens are not produced when parsing is off.
fn check_round_trip(name: &str) {
    let Some((tok, fx)) = load(name) else { return };
    let mut texts: Vec<String> = fx["tokenize"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap().to_string())
        .collect();
    texts.extend(
        fx["generate"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["prompt"].as_str().unwrap().to_string()),
    );
    for text in &texts {
        for parse_special in [true, false] {
            let ids = tok.encode(text, parse_special).unwrap();
            assert_eq!(
                &tok.decode(&ids),
                text,
                "{name}: round trip (parse_special={parse_special})"
            );
            if !parse_special {
                assert!(
                    ids.iter().all(|&t| !tok.is_special(t)),
                    "{name}: special token in plain encoding of {text:?}: {ids:?}"
                );
            }
        }
    }
}

/// Special-token handling, BOS/EOS/EOG and piece lookups.
fn check_specials(name: &str) {
    let Some((tok, _)) = load(name) else { return };
    let start = tok.token_id("<|im_start|>").expect("<|im_start|>");
    let end = tok.token_id("<|im_end|>").expect("<|im_end|>");
    let text = "<|im_start|>user\nhi<|im_end|>";
    let parsed = tok.encode(text, true).unwrap();
    assert_eq!(parsed.first(), Some(&start));
    assert_eq!(parsed.last(), Some(&end));
    let plain = tok.encode(text, false).unwrap();
    assert!(!plain.contains(&start) && !plain.contains(&end));
    assert!(plain.len() > parsed.len());
    assert_eq!(tok.decode(&plain), text);

    assert!(tok.is_eog(end));
    assert!(tok.is_eog(tok.token_id("<|endoftext|>").unwrap()));
    assert!(tok.is_eog(tok.eos_id().unwrap()));
    assert!(!tok.is_eog(start));
    assert!(!tok.is_eog(tok.encode("hello", false).unwrap()[0]));

    assert_eq!(tok.token_to_piece(end), b"<|im_end|>");
    let space_the = tok.encode(" the", false).unwrap();
    assert_eq!(space_the.len(), 1);
    assert_eq!(tok.token_to_piece(space_the[0]), b" the");
    assert!(tok.token_to_piece(tok.vocab_size() as u32).is_empty());
    assert!(!tok.add_bos());
    assert_eq!(tok.encode("", true).unwrap(), Vec::<u32>::new());
}

/// Streaming decode of multi-byte text: never a broken character, held-back bytes exist at some
/// point, and the concatenation equals the full text.
fn check_stream(name: &str) {
    let Some((tok, _)) = load(name) else { return };
    let text = "中文分词测试 日本語のテキスト 한국어 emoji 🚀🔥 ©®™ ≠ Ünïcödé";
    let ids = tok.encode(text, false).unwrap();
    let mut dec = tok.stream_decoder();
    let mut out = String::new();
    let mut held_back = 0;
    for &id in &ids {
        let piece = tok.token_to_piece(id);
        let s = dec.push(id);
        if std::str::from_utf8(&piece).is_err() {
            held_back += 1;
        }
        out += &s;
    }
    out += &dec.finish();
    assert_eq!(out, text);
    assert!(held_back > 0, "{name}: expected some tokens to carry partial characters: {ids:?}");

    // A truncated stream ends with U+FFFD, never with broken bytes.
    let rocket = tok.encode("🚀", false).unwrap();
    let mut dec = tok.stream_decoder();
    let mut s = String::new();
    for &id in &rocket[..rocket.len() - 1] {
        s += &dec.push(id);
    }
    if rocket.len() > 1 {
        assert_eq!(s, "");
        assert_eq!(dec.finish(), "\u{FFFD}");
    }
}

/// Long runs of one character class encode quickly and round-trip (no regex blow-up or loss).
fn check_long_runs(name: &str) {
    let Some((tok, _)) = load(name) else { return };
    for unit in [" ", "\n", " \t\r\n", "a", "!", "7", "中", "🚀", "'", "<|im_end|>"] {
        let text = unit.repeat(20_000) + "x";
        let t = std::time::Instant::now();
        let ids = tok.encode(&text, true).unwrap();
        assert_eq!(tok.decode(&ids), text, "{name}: run of {unit:?}");
        assert!(t.elapsed().as_secs() < 10, "{name}: run of {unit:?} took {:?}", t.elapsed());
    }
}

macro_rules! model_tests {
    ($module:ident, $name:literal) => {
        mod $module {
            #[test]
            fn tokenize_matches_llamacpp() {
                super::check_tokenize($name);
            }
            #[test]
            fn prompt_ids_and_output_text_match_llamacpp() {
                super::check_generate($name);
            }
            #[test]
            fn decode_encode_round_trips() {
                super::check_round_trip($name);
            }
            #[test]
            fn special_tokens_and_eog() {
                super::check_specials($name);
            }
            #[test]
            fn streaming_decode_holds_back_partial_chars() {
                super::check_stream($name);
            }
            #[test]
            fn long_runs_round_trip() {
                super::check_long_runs($name);
            }
        }
    };
}

model_tests!(smollm2_135m, "smollm2-135m");
model_tests!(qwen25_coder_05b, "qwen2.5-coder-0.5b");
model_tests!(qwen25_coder_15b, "qwen2.5-coder-1.5b");
