//! `serve::Server` (many sequences, one batched pass per step, caches under a budget) on a real
//! model: every reply's logits are bitwise those of the sequence run alone from scratch, through
//! batching, rewinds, evictions and recomputation, and prefixes copied between sequences.

mod common;

use turboinfer::model::{Logits, Model};
use turboinfer::platform::runtime::Runtime;
use turboinfer::serve::{Request, ServeError, Server};

/// The logits of the last `k` tokens of `history` (the entries `rows` only, when set),
/// computed alone on a fresh cache.
fn alone(model: &Model, rt: &Runtime, history: &[u32], k: usize, rows: Option<&[u32]>) -> Vec<u32> {
    let mut kv = model.new_cache(history.len());
    let all = model.forward(rt, &mut kv, history, Logits::All).unwrap();
    let vocab = model.config().vocab_size;
    let last = all[(history.len() - k) * vocab..].chunks_exact(vocab);
    match rows {
        Some(ids) => {
            last.flat_map(|row| ids.iter().map(|&id| row[id as usize].to_bits())).collect()
        }
        None => last.flatten().map(|x| x.to_bits()).collect(),
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn req(seq: u64, pos: usize, tokens: &[u32], logits: usize) -> Request {
    Request { seq, pos, tokens: tokens.to_vec(), logits, rows: None }
}

/// Runs `reqs` as one step and checks each reply against the sequence alone; `hist` mirrors
/// each sequence's tokens as the callers see them.
fn check_step(
    model: &Model,
    rt: &Runtime,
    server: &mut Server,
    hist: &mut [Vec<u32>],
    reqs: &[Request],
) -> Vec<(usize, usize)> {
    let replies = server.step(model, rt, reqs, &mut || true);
    let mut counts = Vec::new();
    for (r, reply) in reqs.iter().zip(replies) {
        let reply = reply.unwrap_or_else(|e| panic!("sequence {}: {e}", r.seq));
        let h = &mut hist[r.seq as usize];
        h.truncate(r.pos);
        h.extend_from_slice(&r.tokens);
        if r.logits > 0 {
            assert!(
                bits(&reply.logits) == alone(model, rt, h, r.logits, r.rows.as_deref()),
                "sequence {} at {}: logits differ from the sequence alone",
                r.seq,
                h.len()
            );
        } else {
            assert!(reply.logits.is_empty());
        }
        counts.push((reply.recomputed, reply.copied));
    }
    counts
}

#[test]
fn batched_sequences_answer_as_alone() {
    let rt = Runtime::new(2).unwrap();
    let Some(path) = common::model_path("smollm2-135m") else { return };
    let model = Model::load(&path).unwrap();
    let schema: Vec<u32> = (0..40).map(|i| 100 + 7 * i).collect(); // a shared prompt prefix
    let mut server = Server::new(&model, 128, usize::MAX);
    let mut hist = vec![Vec::new(); 3];
    // Sequence 0 prefills the shared prefix in two chunks, the first without logits.
    check_step(&model, &rt, &mut server, &mut hist, &[req(0, 0, &schema[..30], 0)]);
    check_step(&model, &rt, &mut server, &mut hist, &[req(0, 30, &schema[30..], 1)]);
    // Sequences 1 and 2 ask about the same schema: its cache entries are copied, not computed;
    // sequence 0 decodes in the same pass.
    let q1: Vec<u32> = schema.iter().copied().chain([5, 6, 7]).collect();
    let q2: Vec<u32> = schema.iter().copied().chain([9]).collect();
    let c = check_step(
        &model,
        &rt,
        &mut server,
        &mut hist,
        &[req(0, 40, &[11], 1), req(1, 0, &q1, 1), req(2, 0, &q2, 1)],
    );
    assert_eq!(c[1], (0, 40), "sequence 1 copies the 40 shared tokens");
    assert_eq!(c[2], (0, 40), "sequence 2 copies the 40 shared tokens");
    // Decode steps, a draft check (every row's logits), and a rewind past rejected drafts.
    check_step(
        &model,
        &rt,
        &mut server,
        &mut hist,
        &[req(0, 41, &[12], 1), req(1, 43, &[300, 301, 302], 3), req(2, 41, &[13], 1)],
    );
    check_step(
        &model,
        &rt,
        &mut server,
        &mut hist,
        &[req(1, 44, &[400], 1), req(0, 42, &[14, 15], 2)],
    );
    // Vocabulary pruning: a draft check over a few entries beside a full-vocabulary step.
    let subset = vec![2, 3, 500, 49151];
    check_step(
        &model,
        &rt,
        &mut server,
        &mut hist,
        &[req(0, 44, &[16, 17], 2), Request { rows: Some(subset), ..req(1, 45, &[401, 402], 2) }],
    );
    assert_eq!(server.stats().max_batch, 3);
    assert_eq!(server.stats().evictions, 0);
    assert_eq!(server.sequences(), (3, 3));
    assert!(server.forget(2) && !server.forget(2));
}

#[test]
fn evicted_sequences_are_recomputed_to_the_same_bits() {
    let rt = Runtime::new(2).unwrap();
    let Some(path) = common::model_path("smollm2-135m") else { return };
    let model = Model::load(&path).unwrap();
    // A budget of two caches for three sequences taking turns.
    let budget = 2 * model.kv_cache_bytes(64) + 1;
    let mut server = Server::new(&model, 64, budget);
    assert_eq!(server.fits(), 2);
    let mut hist = vec![Vec::new(); 3];
    let prompts: [&[u32]; 3] = [&[10, 20, 30, 40], &[11, 21, 31], &[12, 22, 32, 42, 52]];
    let mut recomputed = 0;
    for round in 0..4u32 {
        for s in 0..3 {
            let pos = hist[s].len();
            let toks: Vec<u32> = if pos == 0 { prompts[s].to_vec() } else { vec![200 + round] };
            let c =
                check_step(&model, &rt, &mut server, &mut hist, &[req(s as u64, pos, &toks, 1)]);
            recomputed += c[0].0;
            assert!(server.resident_bytes() < budget);
        }
    }
    let st = server.stats();
    assert!(st.evictions >= 8, "each turn evicts the least recently used: {st:?}");
    assert_eq!(st.recomputed as usize, recomputed);
    assert!(recomputed > 0);
    // Two at once fit; three do not: the third is refused, the first two answered.
    let reqs = [
        req(0, hist[0].len(), &[1], 1),
        req(1, hist[1].len(), &[2], 1),
        req(2, hist[2].len(), &[3], 1),
    ];
    let out = server.step(&model, &rt, &reqs, &mut || true);
    assert!(out[0].is_ok() && out[1].is_ok());
    assert!(matches!(out[2], Err(ServeError::OverBudget { fits: 2, .. })), "{:?}", out[2]);
}

#[test]
fn bad_requests_change_nothing() {
    let rt = Runtime::new(2).unwrap();
    let Some(path) = common::model_path("smollm2-135m") else { return };
    let model = Model::load(&path).unwrap();
    let mut server = Server::new(&model, 16, usize::MAX);
    let mut hist = vec![Vec::new(); 2];
    check_step(&model, &rt, &mut server, &mut hist, &[req(0, 0, &[1, 2, 3], 1)]);
    let out = server.step(
        &model,
        &rt,
        &[
            req(0, 3, &[4], 1),
            req(0, 3, &[5], 1),         // the same sequence twice
            req(1, 2, &[5], 1),         // a sequence the server never saw, past position 0
            req(1, 0, &[], 0),          // no tokens
            req(1, 0, &[5], 2),         // more logits than tokens
            req(1, 0, &[7; 17], 1),     // longer than the context
            req(1, 0, &[1_000_000], 1), // a token outside the vocabulary
            Request { rows: Some(vec![3, 1 << 20]), ..req(1, 0, &[5], 1) }, // a row outside it
        ],
        &mut || true,
    );
    assert!(out[0].is_ok());
    assert!(matches!(out[1], Err(ServeError::Duplicate { seq: 0 })));
    assert!(matches!(out[2], Err(ServeError::UnknownPosition { seq: 1, pos: 2, known: 0 })));
    assert!(matches!(out[3], Err(ServeError::BadRequest { .. })));
    assert!(matches!(out[4], Err(ServeError::BadRequest { .. })));
    assert!(matches!(out[5], Err(ServeError::ContextFull { needed: 17, n_ctx: 16, .. })));
    assert!(matches!(out[6], Err(ServeError::OutOfVocab { id: 1_000_000, .. })));
    assert!(matches!(out[7], Err(ServeError::OutOfVocab { id: 0x10_0000, .. })));
    hist[0].extend([4]);
    // An interrupted pass advances nothing; the same request then answers as before.
    let r = [req(0, 4, &[8, 9], 1), req(1, 0, &[6, 6], 2)];
    let out = server.step(&model, &rt, &r, &mut || false);
    assert!(out.iter().all(|o| matches!(o, Err(ServeError::Interrupted))), "{out:?}");
    check_step(&model, &rt, &mut server, &mut hist, &r);
}

/// A caller that went away leaves its resident caches as donors: a new sequence with the same
/// prefix copies it (bitwise the same logits as computing it), and a retired cache is the
/// first to go when the budget is short, before any live sequence's. A prompt that arrives in
/// chunks keeps copying from a donor.
#[test]
fn retired_caches_give_their_prefix_and_go_first() {
    let rt = Runtime::new(2).unwrap();
    let Some(path) = common::model_path("smollm2-135m") else { return };
    let model = Model::load(&path).unwrap();
    let budget = 2 * model.kv_cache_bytes(64) + 1;
    let mut server = Server::new(&model, 64, budget);
    let mut hist = vec![Vec::new(); 4];
    let schema: Vec<u32> = (0..30).map(|i| 300 + 11 * i).collect();
    let q: Vec<u32> = schema.iter().copied().chain([7, 8]).collect();
    check_step(&model, &rt, &mut server, &mut hist, &[req(0, 0, &q, 1)]);
    // Sequence 0's caller goes away: its cache stays, retired.
    assert_eq!(server.retire_where(|id| id == 0), 1);
    assert_eq!((server.sequences(), server.retired()), ((0, 0), 1));
    // A new caller's sequence with the same schema copies the 30 shared tokens.
    let q1: Vec<u32> = schema.iter().copied().chain([9]).collect();
    let c = check_step(&model, &rt, &mut server, &mut hist, &[req(1, 0, &q1, 1)]);
    assert_eq!(c[0], (0, 30));
    // Two live sequences need the whole budget: the retired cache goes, no live one does.
    let evictions = server.stats().evictions;
    check_step(&model, &rt, &mut server, &mut hist, &[req(2, 0, &[5, 6], 1)]);
    assert_eq!(server.retired(), 0);
    assert_eq!(server.stats().evictions, evictions + 1);
    assert_eq!(server.sequences(), (2, 2));
    // A prompt sent in chunks: the first copies what it can (all but the token it must
    // compute), the next one the rest of what sequence 1 shares with it.
    assert!(server.forget(2));
    let c = check_step(&model, &rt, &mut server, &mut hist, &[req(3, 0, &schema[..10], 0)]);
    assert_eq!(c[0], (0, 9));
    let rest: Vec<u32> = schema[10..].iter().copied().chain([4]).collect();
    let c = check_step(&model, &rt, &mut server, &mut hist, &[req(3, 10, &rest, 1)]);
    assert_eq!(c[0], (0, 20));
}
