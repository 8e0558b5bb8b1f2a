//! The identifier constraints of repair rounds with a real tokenizer: unit checks of the
//! chooser (`Constrainer::choose`) over the demo schema.

mod common;

use turboinfer::nl2sql::constrain::{Constrainer, TOP_K};

/// Logits that rank `prefer` tokens first (in order), everything else at 0.
fn ranked(vocab: usize, prefer: &[u32]) -> Vec<f32> {
    let mut l = vec![0.0f32; vocab];
    for (k, &id) in prefer.iter().enumerate() {
        l[id as usize] = 100.0 - k as f32;
    }
    l
}

/// Logits ranking `prefer` first and the tokens the chooser may weigh besides them (the rest of
/// its top K: ties are taken lowest id first), to be excluded: the choice among `prefer` only.
fn only(vocab: usize, prefer: &[u32]) -> (Vec<f32>, Vec<u32>) {
    let others = (0..vocab as u32).filter(|id| !prefer.contains(id)).take(TOP_K).collect();
    (ranked(vocab, prefer), others)
}

#[test]
fn chooser_with_a_real_tokenizer() {
    let Some(e) = common::engine("qwen2.5-coder-0.5b") else { return };
    let tok = e.tokenizer();
    let n = tok.vocab_size();
    let c = Constrainer::new(&common::demo_schema());
    let one = |s: &str| -> u32 {
        let ids = tok.encode(s, false).unwrap();
        assert_eq!(ids.len(), 1, "{s:?} is {ids:?}");
        ids[0]
    };
    // A table that does not exist loses to one that does.
    let (bad, good) = (one(" customers"), one(" users"));
    let p = c.choose(tok, "SELECT count(*) FROM", &ranked(n, &[bad, good]));
    assert_eq!((p.id, p.changed), (good, true));
    // Keywords and functions pass untouched.
    let p = c.choose(tok, "SELECT", &ranked(n, &[one(" COUNT"), good]));
    assert_eq!((p.id, p.changed), (one(" COUNT"), false));
    // After an alias, only that table's columns.
    let text = "SELECT u.full_name FROM users u WHERE u.";
    let p = c.choose(tok, text, &ranked(n, &[one("name"), one("email")]));
    assert_eq!((p.id, p.changed), (one("email"), true));
    // Nothing acceptable among the candidates: plain argmax.
    let (l, others) = only(n, &[one("name"), one("names")]);
    let p = c.choose_excluding(tok, text, &l, &others);
    assert_eq!((p.id, p.changed, p.acceptable), (one("name"), false, false));
    // A token the decoder backed out of is never picked again; the next acceptable one is.
    let (l, mut others) = only(n, &[one("email"), one("full")]);
    others.push(one("email"));
    let p = c.choose_excluding(tok, text, &l, &others);
    assert_eq!((p.id, p.changed, p.acceptable), (one("full"), true, true));
    // End of generation is no escape from a dead end: only the model's own first choice.
    let eog = tok.eog_ids()[0];
    let (l, others) = only(n, &[one("name"), eog]);
    let p = c.choose_excluding(tok, text, &l, &others);
    assert_eq!((p.id, p.acceptable), (one("name"), false));
    let (l, others) = only(n, &[eog, one("name")]);
    let p = c.choose_excluding(tok, text, &l, &others);
    assert_eq!((p.id, p.acceptable), (eog, true));
}
