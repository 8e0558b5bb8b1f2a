//! Speculative decoding with real models: the same tokens, text and stop reason as plain greedy
//! decoding for every llama.cpp fixture prompt and for 21 nl2sql questions over the demo shop
//! schema, fewer forward passes; rolling the KV cache back leaves it as a fresh computation.

mod common;

use turboinfer::model::{Logits, Model};
use turboinfer::nl2sql::{Engine, Options, Outcome, PrefixCache};
use turboinfer::platform::runtime::Runtime;

/// The 21 questions (counts, filters, joins, aggregates, ordering, dates, distinct, exists).
pub const QUESTIONS: [&str; 21] = [
    "How many users are there?",
    "How many products are there?",
    "List the names of all categories.",
    "How many orders have status 'delivered'?",
    "What is the average price of products?",
    "Which products cost more than 100?",
    "List the 5 most expensive products.",
    "How many users signed up in 2024?",
    "How many orders were placed in March 2024?",
    "What is the total amount of all payments?",
    "How many users are there per country?",
    "List the full names of users from France.",
    "Which carriers shipped orders, and how many shipments each?",
    "What is the average rating of each product?",
    "List the email of users who have never placed an order.",
    "How many distinct countries do users come from?",
    "What is the total revenue per product category?",
    "Which user placed the most orders?",
    "List orders with their user's full name.",
    "How many shipments are not delivered yet?",
    "How many reviews have a rating of 5?",
];

/// Runs every question with speculation `on`; returns the outcomes.
fn answers(e: &Engine, rt: &Runtime, on: bool) -> Vec<Outcome> {
    answers_with(e, rt, Options { speculation: on, ..Options::default() })
}

/// Runs every question with `opts` (96 new tokens, 2048 positions, no repair rounds: the
/// comparisons are of one decode per question, and an answer cut off at the budget would
/// otherwise start a repair); returns the outcomes.
fn answers_with(e: &Engine, rt: &Runtime, opts: Options) -> Vec<Outcome> {
    let opts = Options { max_new_tokens: 96, context_tokens: 2048, repair_rounds: 0, ..opts };
    let mut cache = PrefixCache::new();
    let schema = common::demo_schema();
    QUESTIONS
        .iter()
        .map(|q| {
            e.run(rt, &mut cache, &schema, q, &opts, &mut |_| true, &mut |_| Ok(()))
                .expect("nl2sql runs")
        })
        .collect()
}

/// Speculation on vs off over the 21 questions: identical ids, text, stop reasons; prints the
/// forward passes per generated token and the acceptance rate.
fn same_answers_fewer_passes(name: &str) {
    let Some(e) = common::engine(name) else { return };
    let rt = Runtime::new(2).unwrap();
    let plain = answers(&e, &rt, false);
    let spec = answers(&e, &rt, true);
    let (mut gen, mut fp_plain, mut fp_spec, mut drafted, mut accepted) = (0, 0, 0, 0, 0);
    let (mut ms_plain, mut ms_spec) = (0.0, 0.0);
    for ((q, p), s) in QUESTIONS.iter().zip(&plain).zip(&spec) {
        assert_eq!(p.attempts.len(), 1);
        assert_eq!(s.attempts.len(), 1);
        let (a, b) = (&p.attempts[0], &s.attempts[0]);
        println!(
            "{name} | {q} | {:?} | {} tokens, passes {} -> {}, drafted {} accepted {}",
            a.raw,
            a.generated_tokens,
            p.speculation.stats.forward_passes,
            s.speculation.stats.forward_passes,
            s.speculation.stats.draft_tokens,
            s.speculation.stats.accepted_tokens
        );
        assert_eq!(
            a.ids, b.ids,
            "{name}: {q}: token ids differ (plain {:?}, speculative {:?})",
            a.raw, b.raw
        );
        assert_eq!(a.raw, b.raw, "{name}: {q}");
        assert_eq!(a.stop, b.stop, "{name}: {q}");
        assert_eq!(
            (p.speculation.stats.draft_tokens, p.speculation.stats.accepted_tokens),
            (0, 0),
            "no drafts without speculation"
        );
        assert_eq!(
            p.speculation.stats.forward_passes,
            a.generated_tokens - 1,
            "plain: one pass per token after the first"
        );
        assert!(s.speculation.stats.forward_passes <= p.speculation.stats.forward_passes);
        assert!(s.speculation.stats.accepted_tokens <= s.speculation.stats.draft_tokens);
        gen += a.generated_tokens;
        fp_plain += p.speculation.stats.forward_passes;
        fp_spec += s.speculation.stats.forward_passes;
        drafted += s.speculation.stats.draft_tokens;
        accepted += s.speculation.stats.accepted_tokens;
        ms_plain += p.timings.decode_ms;
        ms_spec += s.timings.decode_ms;
    }
    println!(
        "{name}: {} questions, {gen} generated tokens; forward passes per generated token: plain {:.3}, speculative {:.3} ({:.2}x fewer); acceptance {accepted}/{drafted} = {:.3}; decode ms plain {ms_plain:.0}, speculative {ms_spec:.0}",
        QUESTIONS.len(),
        fp_plain as f64 / gen as f64,
        fp_spec as f64 / gen as f64,
        fp_plain as f64 / fp_spec.max(1) as f64,
        accepted as f64 / drafted.max(1) as f64
    );
    assert!(fp_spec < fp_plain, "speculation must save forward passes");
}

/// The session's earlier answers are drafts of the next ones (`draft::recall`): the questions
/// asked a second time in the same session (the same prefix, its drafter remembering the first
/// round's answers) give the same tokens as without speculation, in fewer passes than the first
/// round took.
#[test]
fn earlier_answers_draft_the_next_ones() {
    let name = "qwen2.5-coder-0.5b";
    let Some(e) = common::engine(name) else { return };
    let rt = Runtime::new(2).unwrap();
    let opts = |speculation| Options {
        speculation,
        max_new_tokens: 96,
        context_tokens: 2048,
        repair_rounds: 0,
        ..Options::default()
    };
    let schema = common::demo_schema();
    let questions = &QUESTIONS[..6];
    let ask = |cache: &mut PrefixCache, speculation: bool| -> Vec<Outcome> {
        questions
            .iter()
            .map(|q| {
                e.run(&rt, cache, &schema, q, &opts(speculation), &mut |_| true, &mut |_| Ok(()))
                    .expect("nl2sql runs")
            })
            .collect()
    };
    let plain = ask(&mut PrefixCache::new(), false);
    let mut cache = PrefixCache::new();
    let first = ask(&mut cache, true);
    let second = ask(&mut cache, true);
    let passes =
        |o: &[Outcome]| o.iter().map(|o| o.speculation.stats.forward_passes).sum::<usize>();
    for (((q, p), a), b) in questions.iter().zip(&plain).zip(&first).zip(&second) {
        assert_eq!(p.attempts[0].ids, a.attempts[0].ids, "{name}: {q}: first round");
        assert_eq!(p.attempts[0].ids, b.attempts[0].ids, "{name}: {q}: second round");
    }
    let (p1, p2) = (passes(&first), passes(&second));
    println!("{name}: {} questions twice: passes {p1} then {p2}", questions.len());
    assert!(p2 < p1, "the second round is drafted from the first: {p2} passes against {p1}");
}

#[test]
fn smollm2_questions_are_identical_with_speculation() {
    same_answers_fewer_passes("smollm2-135m");
}

#[test]
fn qwen_05b_questions_are_identical_with_speculation() {
    same_answers_fewer_passes("qwen2.5-coder-0.5b");
}

/// Under the identifier constraints of repair rounds, speculation still changes nothing:
/// verification chooses every position through the same constrainer. Every answer is rejected,
/// so each question gets its repair round, decoded constrained.
#[test]
fn qwen_05b_repair_rounds_are_identical_with_speculation() {
    let name = "qwen2.5-coder-0.5b";
    let Some(e) = common::engine(name) else { return };
    let rt = Runtime::new(2).unwrap();
    let run = |speculation: bool| -> Vec<Outcome> {
        let opts = Options {
            max_new_tokens: 96,
            context_tokens: 2048,
            repair_rounds: 1,
            candidates: 1,
            speculation,
            ..Options::default()
        };
        let mut cache = PrefixCache::new();
        let schema = common::demo_schema();
        let mut reject = |_: &str| Err(turboinfer::nl2sql::Rejection::from("nope"));
        QUESTIONS
            .iter()
            .map(|q| {
                e.run(&rt, &mut cache, &schema, q, &opts, &mut |_| true, &mut reject)
                    .expect("nl2sql runs")
            })
            .collect()
    };
    let (plain, spec) = (run(false), run(true));
    let mut saved = 0;
    for ((q, p), s) in QUESTIONS.iter().zip(&plain).zip(&spec) {
        assert_eq!(p.sql, s.sql, "{name}: {q}");
        assert_eq!(p.shaping.constrained_tokens, s.shaping.constrained_tokens, "{name}: {q}");
        assert_eq!(p.attempts.len(), s.attempts.len(), "{name}: {q}");
        for (a, b) in p.attempts.iter().zip(&s.attempts) {
            assert_eq!(
                a.ids, b.ids,
                "{name}: {q}: token ids differ (plain {:?}, speculative {:?})",
                a.raw, b.raw
            );
            assert_eq!(a.stop, b.stop, "{name}: {q}");
        }
        saved += p.speculation.stats.forward_passes - s.speculation.stats.forward_passes;
    }
    let repaired = plain.iter().filter(|o| o.attempts.len() > 1).count();
    assert!(repaired > QUESTIONS.len() / 2, "only {repaired} questions got a repair round");
    assert!(saved > 0, "speculation saves forward passes in repair rounds too");
}

#[test]
fn fixture_prompts_are_identical_with_speculation() {
    let rt = Runtime::new(2).unwrap();
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b"] {
        let Some(e) = common::engine(name) else { continue };
        let Some(fx) = common::load_fixture(name) else { continue };
        let mut kv = turboinfer::nl2sql::seq::Seq::Local(e.model().new_cache(512));
        for g in fx["generate"].as_array().unwrap() {
            let prompt = common::ids(&g["prompt_ids"]);
            let n = common::ids(&g["output_ids"]).len();
            let plain = e.complete(&rt, &mut kv, &prompt, n, false).unwrap();
            let spec = e.complete(&rt, &mut kv, &prompt, n, true).unwrap();
            println!(
                "{name} {:?}: {} tokens, passes {} -> {}, drafted {} accepted {}",
                g["prompt"]
                    .as_str()
                    .unwrap()
                    .chars()
                    .rev()
                    .take(30)
                    .collect::<String>()
                    .chars()
                    .rev()
                    .collect::<String>(),
                plain.ids.len(),
                plain.stats.forward_passes,
                spec.stats.forward_passes,
                spec.stats.draft_tokens,
                spec.stats.accepted_tokens
            );
            assert_eq!(plain.ids, spec.ids, "{name}: {:?}", g["prompt"]);
            assert_eq!(plain.text, spec.text);
            assert_eq!(plain.stop, spec.stop);
            assert!(spec.stats.forward_passes <= plain.stats.forward_passes);
        }
    }
}

/// Max |a - b| over two equally long slices.
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Runs `tokens` one at a time into `kv`, returning the last logits.
fn one_by_one(
    m: &Model,
    rt: &Runtime,
    kv: &mut turboinfer::model::KvCache,
    tokens: &[u32],
) -> Vec<f32> {
    let mut out = Vec::new();
    for &t in tokens {
        out = m.forward(rt, kv, &[t], Logits::Last).unwrap();
    }
    out
}

#[test]
fn kv_rollback_equals_a_fresh_computation() {
    let rt = Runtime::new(2).unwrap();
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b"] {
        let Some(e) = common::engine(name) else { continue };
        let m = e.model();
        let prompt = e.tokenizer().encode("SELECT name, email FROM users WHERE", false).unwrap();
        let draft_a =
            e.tokenizer().encode(" country = 'FR' AND created_at > now()", false).unwrap();
        let draft_b = e.tokenizer().encode(" id = 42 ORDER BY name DESC LIMIT 3;", false).unwrap();
        assert!(draft_a.len() >= 6 && draft_b.len() >= 6);
        let keep = 2; // accepted draft tokens
        let next = e.tokenizer().encode(" OR", false).unwrap();

        // Verified draft A, rolled back after `keep` tokens, then the model's own token.
        let mut rolled = m.new_cache(128);
        m.forward(&rt, &mut rolled, &prompt, Logits::Last).unwrap();
        let l0 = rolled.len();
        m.forward(&rt, &mut rolled, &draft_a, Logits::All).unwrap();
        rolled.truncate(l0 + keep);
        assert_eq!(rolled.len(), l0 + keep);
        let after_rollback = m.forward(&rt, &mut rolled, &next, Logits::All).unwrap();

        // The same, but with different (rejected) tokens after the kept ones: stale keys and
        // values must not leak into later positions.
        let mut other: Vec<u32> = draft_a[..keep].to_vec();
        other.extend_from_slice(&draft_b[..draft_a.len() - keep]);
        let mut fresh = m.new_cache(128);
        m.forward(&rt, &mut fresh, &prompt, Logits::Last).unwrap();
        m.forward(&rt, &mut fresh, &other, Logits::All).unwrap();
        fresh.truncate(l0 + keep);
        let after_other = m.forward(&rt, &mut fresh, &next, Logits::All).unwrap();
        assert_eq!(
            after_rollback, after_other,
            "{name}: rolled-back positions leak into the logits"
        );

        // And against computing the kept tokens one by one on a fresh cache (equal up to the
        // batch-size rounding of the kernels).
        let mut seq = m.new_cache(128);
        m.forward(&rt, &mut seq, &prompt, Logits::Last).unwrap();
        one_by_one(m, &rt, &mut seq, &draft_a[..keep]);
        let after_seq = m.forward(&rt, &mut seq, &next, Logits::All).unwrap();
        let d = max_diff(&after_rollback, &after_seq);
        println!("{name}: rollback vs one-by-one max |logit diff| = {d:e}");
        assert!(d < 1e-2, "{name}: rolled-back cache differs from a fresh computation by {d}");
        assert_eq!(
            turboinfer::generate::sampler::argmax(&after_rollback),
            turboinfer::generate::sampler::argmax(&after_seq),
            "{name}"
        );
    }
}

/// The template drafter also drafts the Markdown fence chat models open their answers with: after
/// the first token "```" it proposes "sql", the newline and the statement's start (on the 1.5B
/// scorecard this saved about two passes per question), and a bare statement start still works.
#[test]
fn drafter_drafts_the_answer_fence() {
    use turboinfer::gguf::GgufFile;
    use turboinfer::nl2sql::draft::Drafter;
    use turboinfer::nl2sql::Fingerprint;
    use turboinfer::tokenizer::Tokenizer;
    let Some(path) = common::model_path("qwen2.5-coder-0.5b") else { return };
    let tok = Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    let d = Drafter::for_schema(&tok, &common::demo_schema(), Fingerprint::of("m", "p")).unwrap();
    let fence = tok.encode("```", false).unwrap();
    let draft = tok.decode(&d.propose(&fence, fence.len(), 3, &[]));
    assert_eq!(draft, "sql\nSELECT", "after the fence's first token");
    let start = tok.encode("SELECT COUNT(*) FROM", false).unwrap();
    let draft = tok.decode(&d.propose(&start, start.len(), 2, &[]));
    assert!(draft.starts_with(' '), "a table name follows FROM: {draft:?}");
}

/// A drafter built after another one, taking over the tokenized texts they share, is the drafter
/// built from nothing: the same trie, node for node; and so is one tokenized on a pool's threads.
#[test]
fn a_drafter_built_after_another_is_the_same() {
    use turboinfer::gguf::GgufFile;
    use turboinfer::nl2sql::draft::Drafter;
    use turboinfer::nl2sql::Fingerprint;
    use turboinfer::tokenizer::Tokenizer;
    let Some(path) = common::model_path("qwen2.5-coder-0.5b") else { return };
    let tok = Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    let rt = Runtime::new(2).unwrap();
    let all = common::demo_schema();
    let mut first = all.clone();
    first.tables.truncate(1);
    let mut second = all.clone();
    second.tables.remove(0);
    for (before, now) in [(&all, &second), (&first, &all), (&second, &second)] {
        let fp = Fingerprint::of("m", "p");
        let previous = Drafter::for_schema(&tok, before, fp).unwrap();
        let after = Drafter::for_schema_after(&tok, now, fp, Some(previous.clone()), None).unwrap();
        let fresh = Drafter::for_schema(&tok, now, fp).unwrap();
        assert!(fresh.statements() > 0);
        assert_eq!(after.statements(), fresh.statements());
        assert_eq!(format!("{:?}", after.trie()), format!("{:?}", fresh.trie()));
        // Tokenized on a pool's threads: the same trie, with or without the previous drafter.
        for prev in [Some(previous), None] {
            let pooled = Drafter::for_schema_after(&tok, now, fp, prev, Some(&rt)).unwrap();
            assert_eq!(format!("{:?}", pooled.trie()), format!("{:?}", fresh.trie()));
        }
    }
}

/// Backing out of a dead end (a chooser that finds no acceptable token): the decode takes the
/// last token back, picks the next best one there from the kept logits row, and continues with a
/// KV cache that equals a fresh computation of the new path; with speculation on it gives the
/// same tokens; with back-outs off the chooser's fallback is taken.
#[test]
fn backing_out_of_a_dead_end() {
    use std::collections::HashMap;
    use turboinfer::nl2sql::decode::{decode, Choice, Start};
    use turboinfer::nl2sql::draft::Drafter;
    use turboinfer::nl2sql::DecodeLimits;
    let rt = Runtime::new(2).unwrap();
    let Some(e) = common::engine("smollm2-135m") else { return };
    let (m, tok) = (e.model(), e.tokenizer());
    let prompt = tok.encode("SELECT name, email FROM users WHERE", false).unwrap();
    let argmax_excluding = |row: &[f32], excluded: &[u32]| {
        (0..row.len() as u32)
            .filter(|id| !excluded.contains(id))
            .max_by(|a, b| row[*a as usize].total_cmp(&row[*b as usize]).then(b.cmp(a)))
            .unwrap()
    };
    // One decode: `dead` is the token the chooser finds no way past (a dead end wherever it is
    // the best remaining choice); rows seen per text are recorded.
    // `pending`: the prompt's last tokens are fed by the decode's first pass (with its draft).
    let run_from = |dead: Option<u32>, backtrack: usize, speculation: bool, pending: usize| {
        let mut kv = m.new_cache(256);
        let fed = prompt.len() - pending;
        let start = match pending {
            0 => Start::Logits(m.forward(&rt, &mut kv, &prompt, Logits::Last).unwrap()),
            _ => {
                m.forward(&rt, &mut kv, &prompt[..fed], Logits::Last).unwrap();
                Start::Pending(prompt[fed..].to_vec())
            }
        };
        let mut seen: HashMap<String, Vec<f32>> = HashMap::new();
        let drafter = Drafter::lookup_only();
        let limits = DecodeLimits { max_new: 24, stop_at_statement: false, seed: "", backtrack };
        let out = decode(
            tok,
            &mut kv,
            start,
            &prompt,
            speculation.then_some((&drafter, &[][..])),
            limits,
            &mut |kv, tokens, rows| {
                let mut cut = kv.clone();
                let all = m.forward(&rt, kv, tokens, Logits::All)?;
                // The last `rows` rows, and the same as asking for them alone.
                let want = all[(tokens.len() - rows) * all.len() / tokens.len()..].to_vec();
                if rows == 1 {
                    assert_eq!(m.forward(&rt, &mut cut, tokens, Logits::Last)?, want);
                }
                Ok(want)
            },
            &mut |text, row, excluded| {
                seen.insert(text.to_string(), row.to_vec());
                let id = argmax_excluding(row, excluded);
                Choice { id, acceptable: Some(id) != dead }
            },
            &mut |_| true,
        )
        .unwrap();
        (out, seen)
    };
    let run = |dead: Option<u32>, backtrack: usize, speculation: bool| {
        run_from(dead, backtrack, speculation, 0)
    };
    let (plain, plain_rows) = run(None, 0, false);
    assert!(plain.ids.len() >= 8, "{:?}", plain.text);
    // A pending start (the prompt's last 1 or 3 tokens fed with the first draft) gives the same
    // tokens, with or without drafts.
    for (pending, speculation) in [(1, true), (3, true), (3, false)] {
        let (p, _) = run_from(None, 0, speculation, pending);
        assert_eq!((&p.ids, &p.text, &p.stop), (&plain.ids, &plain.text, &plain.stop));
    }
    let dead = plain.ids[3];
    // Without back-outs the fallback (the same argmax) is taken.
    assert_eq!(run(Some(dead), 0, false).0.ids, plain.ids);
    // Back-outs enough for the whole budget: the dead token may be one the model keeps coming
    // back to (on the AVX2 tier's numerics it is the statement's `;`, wanted after every
    // literal), and each time it is the best choice costs one back-out.
    let backouts = 32;
    let (backed, rows) = run(Some(dead), backouts, false);
    assert_eq!(backed.ids[..2], plain.ids[..2], "before the back-out: unchanged");
    let text2 = tok.decode(&plain.ids[..2]);
    assert_eq!(
        backed.ids[2],
        argmax_excluding(&plain_rows[&text2], &[plain.ids[2]]),
        "the next best token where the path was taken back"
    );
    assert!(!backed.ids.contains(&dead), "the dead end is never taken: {:?}", backed.text);
    // The rows after the back-out are those of a fresh computation of the new path.
    let mut kv = m.new_cache(256);
    let mut row = m.forward(&rt, &mut kv, &prompt, Logits::Last).unwrap();
    for (k, &id) in backed.ids.iter().enumerate() {
        let text = tok.decode(&backed.ids[..k]);
        let d = max_diff(&row, &rows[&text]);
        assert!(d < 1e-3, "position {k}: the decode's row differs from a fresh computation by {d}");
        row = m.forward(&rt, &mut kv, &[id], Logits::Last).unwrap();
    }
    // Speculation changes the passes, not the tokens.
    let (spec, _) = run(Some(dead), backouts, true);
    assert_eq!((spec.ids, spec.text), (backed.ids, backed.text));
}
