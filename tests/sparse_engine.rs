//! The sparse FFN through the nl2sql engine (SmolLM2, mechanics only): calibration stops when its
//! cancel callback asks (or unwinds) and always gives the model its previous hook back; a sparse
//! hook's tag separates prefix fingerprints and cache file keys from the dense ones, so a sparse
//! call is never served a dense prefix (in memory or from a cache file) and vice versa.

#![cfg(feature = "sparse")]

mod common;

use std::cell::Cell;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use turboinfer::generate::kv_file::KvFileDir;
use turboinfer::model::FfnHook;
use turboinfer::nl2sql::calibration;
use turboinfer::nl2sql::{
    Engine, Options, PrefixCache, PrefixSource, SchemaInfo, Table, TableKind,
};
use turboinfer::platform::runtime::Runtime;
use turboinfer::sparse::{self, sidecar, CalibOptions, SparseConfig, SparseError, SparseHook};

/// Tiny calibration settings (plumbing only: seconds on SmolLM2).
fn tiny() -> CalibOptions {
    CalibOptions { levels: vec![0.5], rank: 8, max_tokens: 48, window: 64, seed: 5 }
}

/// One users table.
fn schema() -> SchemaInfo {
    let mut users = Table::new("public", "users", TableKind::Table)
        .column("id", "integer", false)
        .column("name", "text", false);
    users.primary_key = vec!["id".into()];
    SchemaInfo::new(vec![users], Some("public"))
}

/// The engine over SmolLM2 with a freshly calibrated tiny sidecar written to a temporary file.
fn engine_with_sidecar(name: &str) -> Option<(Engine, Runtime, PathBuf)> {
    let path = common::model_path("smollm2-135m")?;
    let mut e = Engine::load(&path, "smollm2-135m").unwrap();
    let rt = Runtime::new(2).unwrap();
    let (spec, layers, _) = e
        .calibrate_sparse(&rt, &calibration::nl2sql_prompts(Some(0)), &tiny(), &|_| false)
        .unwrap();
    let sc = common::temp_path(name);
    sidecar::write(&sc, &spec, &layers).unwrap();
    Some((e, rt, sc))
}

#[test]
fn cancel_callback_stops_calibration_and_restores_the_hook() {
    let Some((mut e, rt, sc)) = engine_with_sidecar("cancel") else { return };
    let texts = calibration::nl2sql_prompts(Some(0));
    // A sparse hook is attached: calibration must hand it back whatever happens.
    let hook = sparse::load_for(e.model(), &sc, 0.5, SparseConfig::default()).unwrap();
    e.set_ffn_hook(Some(hook.clone()), "test-tag");
    let opts = CalibOptions { max_tokens: 4096, ..tiny() };

    // Cancelled at the third poll: stops long before 4096 tokens are recorded.
    let polls = Cell::new(0);
    let err = e.calibrate_sparse(&rt, &texts, &opts, &|_| {
        polls.set(polls.get() + 1);
        polls.get() >= 3
    });
    assert!(matches!(err, Err(SparseError::Cancelled)), "{err:?}");
    assert_eq!(polls.get(), 3, "stops at the first poll that asks");
    assert!(
        std::ptr::addr_eq(Arc::as_ptr(e.model().ffn_hook().unwrap()), Arc::as_ptr(&hook)),
        "the previous hook is back"
    );
    assert_eq!(e.ffn_tag(), "test-tag");

    // Cancelled while fitting (after recording): polls continue per layer.
    let polls = Cell::new(0);
    let n_layers = e.model().config().n_layers;
    let record_polls = {
        // Recording 48 tokens in windows of 64 and passes of 32: one poll per pass.
        let count = Cell::new(0);
        e.calibrate_sparse(&rt, &texts, &tiny(), &|_| {
            count.set(count.get() + 1);
            false
        })
        .unwrap();
        count.get() - n_layers
    };
    assert!(record_polls >= 2, "at least one poll per forward pass ({record_polls})");
    let err = e.calibrate_sparse(&rt, &texts, &tiny(), &|_| {
        polls.set(polls.get() + 1);
        polls.get() > record_polls + 2
    });
    assert!(matches!(err, Err(SparseError::Cancelled)), "{err:?}");

    // A callback that unwinds (PostgreSQL's interrupt check raising an ERROR) also restores it.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = e.calibrate_sparse(&rt, &texts, &opts, &|_| panic!("interrupt"));
    }));
    assert!(r.is_err());
    assert!(
        std::ptr::addr_eq(Arc::as_ptr(e.model().ffn_hook().unwrap()), Arc::as_ptr(&hook)),
        "the previous hook is back after unwinding"
    );
    assert!(matches!(
        SparseHook::of(&**e.model().ffn_hook().unwrap()),
        Some(SparseHook::Sparse(_))
    ));
    fs::remove_file(&sc).unwrap();
}

#[test]
fn sparse_and_dense_prefixes_never_mix() {
    let Some((mut e, rt, sc)) = engine_with_sidecar("keys") else { return };
    let opts = Options { max_new_tokens: 1, context_tokens: 512, ..Options::default() };
    let q = "how many users?";
    let dense_plan = e.plan(&schema(), q, &opts).unwrap();
    let dense_key = e.kv_file_key(&dense_plan).model_hash;
    let hook = sparse::load_for(e.model(), &sc, 0.5, SparseConfig::default()).unwrap();
    e.set_ffn_hook(Some(hook), "sidecar=abc|level=0.5");
    let sparse_plan = e.plan(&schema(), q, &opts).unwrap();
    assert_ne!(dense_plan.fingerprint, sparse_plan.fingerprint);
    assert_ne!(dense_key, e.kv_file_key(&sparse_plan).model_hash);
    assert_eq!(dense_plan.prefix_ids, sparse_plan.prefix_ids, "same prompt, other identity");
    e.set_ffn_hook(e.model().ffn_hook().cloned(), "sidecar=abc|level=0.3");
    assert_ne!(
        sparse_plan.fingerprint,
        e.plan(&schema(), q, &opts).unwrap().fingerprint,
        "the tag is part of the key"
    );
    e.set_ffn_hook(None, "");
    assert_eq!(
        dense_plan.fingerprint,
        e.plan(&schema(), q, &opts).unwrap().fingerprint,
        "dense keys are stable"
    );

    let dir = common::temp_path("kvdir");
    let _ = fs::remove_dir_all(&dir);
    let files = || Some(KvFileDir::new(&dir, 1 << 30));
    let run = |e: &Engine, cache: &mut PrefixCache| {
        e.run(&rt, cache, &schema(), q, &opts, &mut |_| true, &mut |_| Ok(()))
            .unwrap()
            .prefix_source
    };
    // Dense: computed (file written), then served from memory.
    let mut mem = PrefixCache::new();
    mem.set_file_dir(files());
    assert_eq!(run(&e, &mut mem), PrefixSource::Computed);
    assert_eq!(run(&e, &mut mem), PrefixSource::Memory);
    // Sparse in the same cache: neither the dense memory prefix nor the dense file serves it.
    let hook = sparse::load_for(e.model(), &sc, 0.5, SparseConfig::default()).unwrap();
    e.set_ffn_hook(Some(hook.clone()), "sidecar=abc|level=0.5");
    assert_eq!(run(&e, &mut mem), PrefixSource::Computed);
    assert_eq!(run(&e, &mut mem), PrefixSource::Memory);
    // Another "backend" with the same sparse hook gets the sparse file; a dense one the dense file.
    let mut other = PrefixCache::new();
    other.set_file_dir(files());
    assert_eq!(run(&e, &mut other), PrefixSource::File);
    e.set_ffn_hook(None, "");
    let mut third = PrefixCache::new();
    third.set_file_dir(files());
    assert_eq!(run(&e, &mut third), PrefixSource::File);
    assert_eq!(
        run(&e, &mut mem),
        PrefixSource::File,
        "back to dense: the sparse memory prefix is not reused"
    );
    assert_eq!(KvFileDir::new(&dir, 1 << 30).stats().files, 2, "one file per (prefix, hook)");
    let _ = fs::remove_dir_all(&dir);
    fs::remove_file(&sc).unwrap();
}

/// Speculation stays exact under a sparse FFN: a sparse hook that keeps batches dense (the default)
/// is not batch-invariant, so the engine decodes one token per pass even with speculation asked for
/// (same answer as without it, reported as off); a hook that also sparsifies batches token by token
/// is batch-invariant, so speculation runs and still gives the same answer.
#[test]
fn speculation_is_exact_or_off_under_a_sparse_hook() {
    let Some((mut e, rt, sc)) = engine_with_sidecar("spec") else { return };
    let q = "How many users are there?";
    let answer = |e: &Engine, speculation: bool| {
        let opts =
            Options { max_new_tokens: 24, context_tokens: 1024, speculation, ..Options::default() };
        e.run(&rt, &mut PrefixCache::new(), &schema(), q, &opts, &mut |_| true, &mut |_| Ok(()))
            .unwrap()
    };
    for batches in [false, true] {
        let hook = sparse::load_for(
            e.model(),
            &sc,
            0.5,
            SparseConfig { batches, ..SparseConfig::default() },
        )
        .unwrap();
        assert_eq!(hook.batch_invariant(), batches);
        e.set_ffn_hook(Some(hook), &format!("spec-test-{batches}"));
        let (plain, spec) = (answer(&e, false), answer(&e, true));
        assert_eq!(
            plain.attempts[0].ids, spec.attempts[0].ids,
            "batches {batches}: speculation changed the answer"
        );
        assert_eq!(
            spec.speculation.on, batches,
            "speculation runs only over a batch-invariant hook"
        );
        if !batches {
            assert_eq!(
                spec.speculation.stats.forward_passes, plain.speculation.stats.forward_passes,
                "no drafts when speculation is off"
            );
        }
    }
    e.set_ffn_hook(None, "");
    fs::remove_file(&sc).ok();
}
