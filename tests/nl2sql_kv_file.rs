//! Schema KV prefix cache files with a real model (SmolLM2): a prefix loaded from a file gives
//! bitwise the same logits as one computed by the model, a second "backend" (a fresh
//! `PrefixCache`) is served from the file, and a damaged file is refused, deleted and rewritten.

mod common;

use std::fs;
use turboinfer::generate::kv_file::{KvFileDir, KvFileError};
use turboinfer::model::Logits;
use turboinfer::nl2sql::{Engine, Options, PrefixCache, PrefixSource, Progress, PREFILL_CHUNK};
use turboinfer::platform::runtime::Runtime;

#[test]
fn file_prefix_gives_bitwise_equal_logits() {
    let Some(path) = common::model_path("smollm2-135m") else { return };
    let e = Engine::load(&path, "smollm2-135m").unwrap();
    let rt = Runtime::new(2).unwrap();
    let opts = Options { max_new_tokens: 8, context_tokens: 1024, ..Options::default() };
    let plan = e.plan(&common::users_orders(false), "How many users are there?", &opts).unwrap();
    let dir = common::fresh_dir("kvfile-logits");
    let files = KvFileDir::new(&dir, 1 << 30);
    let key = e.kv_file_key(&plan);

    // Computed: the prefix in engine-sized chunks, then the question.
    let mut fresh = e.model().new_cache(1024);
    for chunk in plan.prefix_ids.chunks(PREFILL_CHUNK) {
        e.model().forward(&rt, &mut fresh, chunk, Logits::Last).unwrap();
    }
    files.store(&key, &fresh).unwrap();
    let want = e.model().forward(&rt, &mut fresh, &plan.question_ids, Logits::Last).unwrap();

    // Loaded: a cache of another capacity filled from the file, then the same question.
    let mut loaded = e.model().new_cache(700);
    files.load(&key, &mut loaded).unwrap();
    assert_eq!(loaded.len(), plan.prefix_ids.len());
    let got = e.model().forward(&rt, &mut loaded, &plan.question_ids, Logits::Last).unwrap();
    assert_eq!(want.len(), got.len());
    let differing = want.iter().zip(&got).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    assert_eq!(
        differing, 0,
        "logits after a file-loaded prefix must equal the computed ones bitwise"
    );

    // A plan for another schema does not accept this file's tokens.
    let mut other = common::users_orders(false);
    other.tables[0].columns.push(turboinfer::nl2sql::Column {
        name: "age".into(),
        data_type: "integer".into(),
        nullable: true,
        ..Default::default()
    });
    let plan2 = e.plan(&other, "How many users are there?", &opts).unwrap();
    let mut k2 = e.kv_file_key(&plan2);
    k2.fingerprint = key.fingerprint; // same file name, other token ids
    assert!(matches!(files.load(&k2, &mut loaded), Err(KvFileError::Mismatch { .. })));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn second_cache_is_served_from_the_file_and_damage_is_recovered() {
    let Some(path) = common::model_path("smollm2-135m") else { return };
    let e = Engine::load(&path, "smollm2-135m").unwrap();
    let rt = Runtime::new(2).unwrap();
    // No repair rounds: the prefill counts below are of the question alone (a 12-token answer is cut off).
    let opts = Options {
        max_new_tokens: 12,
        context_tokens: 1024,
        repair_rounds: 0,
        ..Options::default()
    };
    let dir = common::fresh_dir("kvfile-engine");
    let files = KvFileDir::new(&dir, 1 << 30);
    let mut go = |_: Progress| true;
    let mut accept = |_: &str| Ok(());
    let q = "How many users are there?";

    // "Backend A" computes the prefix and writes the file.
    let mut a = PrefixCache::new();
    a.set_file_dir(Some(files.clone()));
    let cold =
        e.run(&rt, &mut a, &common::users_orders(false), q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(cold.prefix_source, PrefixSource::Computed);
    assert_eq!(a.stats().file_writes, 1, "{:?}", a.take_events());
    assert_eq!(files.stats().files, 1);

    // "Backend B" misses in memory, loads the file, skips the prefix prefill, answers the same.
    let mut b = PrefixCache::new();
    b.set_file_dir(Some(files.clone()));
    let warm =
        e.run(&rt, &mut b, &common::users_orders(false), q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(warm.prefix_source, PrefixSource::File, "{:?}", b.take_events());
    assert!(warm.cache_hit());
    assert_eq!(warm.tokens.prefill, warm.tokens.prompt - warm.tokens.prefix);
    assert_eq!(warm.attempts[0].raw, cold.attempts[0].raw);
    assert_eq!(b.stats().file_hits, 1);
    // Then from its own memory.
    let again =
        e.run(&rt, &mut b, &common::users_orders(false), q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(again.prefix_source, PrefixSource::Memory);

    // A damaged file: refused with a warning, deleted, recomputed, rewritten intact.
    let file = files.path_for(&cold.prompt.fingerprint, e.model().new_cache(1).dtype());
    let mut bytes = fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 1;
    fs::write(&file, &bytes).unwrap();
    let mut c = PrefixCache::new();
    c.set_file_dir(Some(files.clone()));
    let redo =
        e.run(&rt, &mut c, &common::users_orders(false), q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(redo.prefix_source, PrefixSource::Computed);
    let events = c.take_events();
    assert!(events.iter().any(|ev| ev.warning && ev.message.contains("corrupt")), "{events:?}");
    assert_eq!(redo.attempts[0].raw, cold.attempts[0].raw);
    let mut d = PrefixCache::new();
    d.set_file_dir(Some(files.clone()));
    assert_eq!(
        e.run(&rt, &mut d, &common::users_orders(false), q, &opts, &mut go, &mut accept)
            .unwrap()
            .prefix_source,
        PrefixSource::File
    );

    // Without a directory nothing is read or written.
    let mut m = PrefixCache::new();
    assert_eq!(
        e.run(&rt, &mut m, &common::users_orders(false), q, &opts, &mut go, &mut accept)
            .unwrap()
            .prefix_source,
        PrefixSource::Computed
    );
    assert_eq!(m.stats().file_hits + m.stats().file_writes, 0);
    let _ = fs::remove_dir_all(&dir);
}
