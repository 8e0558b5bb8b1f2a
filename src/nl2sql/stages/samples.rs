//! Sampled candidates (`turboinfer.samples`): `n` answers to the question drawn at a moderate
//! temperature and decoded together, one forward pass per step for all of them (a decode step
//! reads every weight once, whatever the batch: on a memory-bound CPU four sequences cost little
//! more than one). Each starts from a copy of the cache rows of the question and is judged like
//! any answer; the caller's executor, when there is one, runs the valid ones, and the choice
//! among all candidates goes to the result most of them agree on (self-consistency).
//!
//! Deterministic: sample `i` draws from a generator seeded with `i`, so the same question over
//! the same schema gets the same samples, the same votes and the same answer every time.

use super::call::CallState;
use super::repair_turn::MAX_ERROR_CHARS;
use crate::generate::sampler::{Sampler, SamplerConfig};
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::progress::Progress;
use crate::nl2sql::decode::candidates::{self, Candidate, TokenScore};
use crate::nl2sql::decode::seq::Seq as KvSeq;
use crate::nl2sql::decode::sql_decode::StopReason;
use crate::nl2sql::repair::feedback::cap_chars;
use crate::nl2sql::sql::sqltext::{answer_complete, extract_sql};
use crate::platform::clock::ms_since;
use std::time::Instant;

/// Sampling temperature: 0.7 is where self-consistency is usually run (diverse enough that
/// samples disagree where the model is unsure, not so hot that a small model's SQL falls apart);
/// top-k 40 and top-p 0.95 as llama.cpp's defaults (`SamplerConfig::default`).
pub const SAMPLE_TEMPERATURE: f32 = 0.7;

/// One sequence being sampled.
struct Seq {
    kv: KvSeq,
    sampler: Sampler,
    ids: Vec<u32>,
    scores: Vec<TokenScore>,
    logits: Vec<f32>, // [vocab] at the next position
    stop: Option<StopReason>,
}

/// Decodes `call.opts.samples` sampled answers to the question together and appends each as a
/// candidate to `cands` (duplicates included: each is a vote). Nothing when samples are off or
/// the question's logits were not kept.
pub fn run(call: &mut CallState<'_, '_>, cands: &mut Vec<Candidate>) -> Result<(), Nl2SqlError> {
    let n = call.opts.samples;
    if n == 0 || call.question_logits.is_empty() {
        return Ok(());
    }
    let t = Instant::now();
    let (model, tok) = (call.forward.model, call.forward.tok);
    let vocab = model.config().vocab_size;
    let budget = call.opts.max_new_tokens;
    // Each sequence's cache: the question's rows, room for one answer.
    let cap = call.question_end + budget + 1;
    let mut seqs = Vec::with_capacity(n);
    for i in 0..n {
        let kv = call.kv().fork(call.question_end, cap, model.config())?;
        let cfg = SamplerConfig {
            temperature: SAMPLE_TEMPERATURE,
            seed: i as u64,
            ..SamplerConfig::default()
        };
        seqs.push(Seq {
            kv,
            sampler: Sampler::new(cfg),
            ids: Vec::new(),
            scores: Vec::new(),
            logits: call.question_logits.clone(),
            stop: None,
        });
    }
    let mut passes = 0;
    loop {
        // Each live sequence draws its next token; those that go on are fed together.
        let mut feed = Vec::new();
        for (i, s) in seqs.iter_mut().enumerate().filter(|(_, s)| s.stop.is_none()) {
            let id = s.sampler.sample(&s.logits, &[]);
            if let Some(sc) = candidates::score(&s.logits, id as usize) {
                s.scores.push(sc);
            }
            if tok.is_eog(id) {
                s.stop = Some(StopReason::EndOfGeneration);
                continue;
            }
            s.ids.push(id);
            if answer_complete(&tok.decode(&s.ids)) {
                s.stop = Some(StopReason::EndOfStatement);
            } else if s.ids.len() >= budget || s.kv.len() + 1 >= s.kv.capacity() {
                s.stop = Some(StopReason::Budget);
            } else {
                feed.push((i, id));
            }
        }
        if feed.is_empty() {
            break;
        }
        let generated = seqs.iter().map(|s| s.ids.len()).max().unwrap_or(0);
        if !(call.hooks.progress)(Progress::Decode { generated }) {
            return Err(Nl2SqlError::Cancelled);
        }
        let tokens: Vec<u32> = feed.iter().map(|&(_, id)| id).collect();
        let mut kvs: Vec<&mut KvSeq> = seqs
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| feed.iter().any(|&(j, _)| j == *i))
            .map(|(_, s)| &mut s.kv)
            .collect();
        // Checked between layers too: a step of several samples is several tokens of work.
        let mut check = || (call.hooks.progress)(Progress::Decode { generated });
        let logits = call.forward.logits_seqs(&mut kvs, &tokens, &mut check)?; // [feed.len(), vocab]
        passes += 1;
        for (row, &(i, _)) in logits.chunks_exact(vocab).zip(&feed) {
            seqs[i].logits.clear();
            seqs[i].logits.extend_from_slice(row);
        }
    }
    call.spec.forward_passes += passes;
    call.tokens.generated += seqs.iter().map(|s| s.ids.len()).sum::<usize>();
    call.timings.decode_ms += ms_since(t);
    for (i, s) in seqs.into_iter().enumerate() {
        let sql = extract_sql(&tok.decode(&s.ids)).sql;
        let stop = s.stop.unwrap_or(StopReason::Budget);
        let verdict = call.check(&sql, &stop);
        // A doubted sample is valid, chosen only when no undoubted candidate is.
        let doubt = verdict.as_ref().err().is_some_and(|r| r.advisory);
        let verdict = if doubt { Ok(()) } else { verdict };
        // The same statement as an earlier candidate: the same rows, not run twice.
        let digest = match cands.iter().find(|c| c.sql == sql && c.error.is_none()) {
            Some(c) if verdict.is_ok() => c.digest,
            _ => call.execute(&sql, verdict.is_ok()),
        };
        cands.push(Candidate {
            sql,
            branch: None,
            sample: Some(i),
            mean_logprob: candidates::mean_logprob(&s.scores),
            error: verdict.err().map(|r| cap_chars(&r.message, MAX_ERROR_CHARS)),
            doubted: doubt,
            digest,
        });
    }
    Ok(())
}
