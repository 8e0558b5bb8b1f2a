//! nl2sql engine with real models: prompt tokens equal llama.cpp's for the fixture prompt, the
//! prefix cache gives the same answer as a cold run, cancellation, trimming, the 0.5B model's
//! answer to the fixture question.

mod common;

use std::rc::Rc;
use turboinfer::nl2sql::{
    trim, ColumnStats, Hooks, LazyStats, Nl2SqlError, Options, PrefixCache, PrefixSource, Progress,
    SchemaInfo, StatsSource, Table, TableKind,
};
use turboinfer::platform::runtime::Runtime;

#[test]
fn prompt_tokens_match_llama_cpp() {
    for name in ["smollm2-135m", "qwen2.5-coder-0.5b"] {
        let Some(e) = common::engine(name) else { continue };
        let Some(fx) = common::load_fixture(name) else { continue };
        let g = &fx["generate"][0];
        let want = common::ids(&g["prompt_ids"]);
        // The fixture lists users before orders; render them in that order.
        let schema = common::users_orders(true);
        let ddl: String = schema
            .tables
            .iter()
            .map(|t| turboinfer::nl2sql::Renderer::new(&schema).table(t))
            .collect();
        let mut ids = turboinfer::nl2sql::prompt::prefix(&ddl).encode(e.tokenizer()).unwrap();
        ids.extend(
            turboinfer::nl2sql::prompt::question("How many users are there?")
                .encode(e.tokenizer())
                .unwrap(),
        );
        let text = turboinfer::nl2sql::prompt::prefix(&ddl).text()
            + &turboinfer::nl2sql::prompt::question("How many users are there?").text();
        assert_eq!(text, g["prompt"].as_str().unwrap(), "{name}: prompt text");
        assert_eq!(ids, want, "{name}: segment-wise tokenization differs from llama.cpp's");
    }
}

/// No repair rounds and no candidates: a 12-token answer is cut off (rejected by the engine),
/// and the tests using these options are about the prefix, not repairs or candidates (tested
/// below).
fn prefix_only() -> Options {
    Options {
        max_new_tokens: 12,
        context_tokens: 1024,
        repair_rounds: 0,
        candidates: 1,
        ..Options::default()
    }
}

#[test]
fn cached_prefix_gives_the_cold_answer_and_cancel_works() {
    let Some(e) = common::engine("smollm2-135m") else { return };
    let rt = Runtime::new(2).unwrap();
    let schema = common::users_orders(true);
    let opts = prefix_only();
    let mut accept = |_: &str| Ok(());
    let mut go = |_: Progress| true;
    let mut cache = PrefixCache::new();
    let cold = e
        .run(&rt, &mut cache, &schema, "How many users are there?", &opts, &mut go, &mut accept)
        .unwrap();
    assert!(!cold.cache_hit());
    let warm = e
        .run(&rt, &mut cache, &schema, "How many users are there?", &opts, &mut go, &mut accept)
        .unwrap();
    assert!(warm.cache_hit());
    assert_eq!(warm.tokens.prefill, warm.tokens.prompt - warm.tokens.prefix);
    assert_eq!(
        cold.attempts[0].raw, warm.attempts[0].raw,
        "KV prefix reuse must not change the answer"
    );
    assert_eq!(cold.prompt.fingerprint, warm.prompt.fingerprint);
    // The reported prompt is the exact text of the tokens run (for feeding the same prompt to llama-server).
    let plan = e.plan(&schema, "How many users are there?", &opts).unwrap();
    assert_eq!(warm.prompt.text, plan.text());
    assert!(warm
        .prompt
        .text
        .ends_with("How many users are there?<|im_end|>\n<|im_start|>assistant\n"));
    assert_eq!(e.tokenizer().encode(&warm.prompt.text, true).unwrap().len(), warm.tokens.prompt);
    assert_eq!(cache.stats().hits, 1);
    assert_eq!(cache.stats().misses, 1);

    // A different schema is a miss with another fingerprint.
    let mut other = schema.clone();
    other.tables[0].columns.push(turboinfer::nl2sql::Column {
        name: "age".into(),
        data_type: "integer".into(),
        nullable: true,
        ..Default::default()
    });
    let third = e
        .run(&rt, &mut cache, &other, "How many users are there?", &opts, &mut go, &mut accept)
        .unwrap();
    assert!(!third.cache_hit());
    assert_ne!(third.prompt.fingerprint, cold.prompt.fingerprint);

    // Cancel during the prefix prefill: the cache is left without a valid prefix, and the next
    // call recomputes it and answers as before.
    let mut calls = 0;
    let mut cancel = |_: Progress| {
        calls += 1;
        calls < 2
    };
    let r = e.run(
        &rt,
        &mut cache,
        &schema,
        "How many users are there?",
        &opts,
        &mut cancel,
        &mut accept,
    );
    assert!(matches!(r, Err(Nl2SqlError::Cancelled)), "{r:?}");
    let again = e
        .run(&rt, &mut cache, &schema, "How many users are there?", &opts, &mut go, &mut accept)
        .unwrap();
    assert!(!again.cache_hit());
    assert_eq!(again.attempts[0].raw, cold.attempts[0].raw);

    // A rejecting validator triggers `repair_rounds` repair rounds (fewer only when a repair
    // repeats an earlier rejected statement), then reports the error.
    let mut reject = |_: &str| Err(turboinfer::nl2sql::Rejection::from("nope"));
    let two = Options { repair_rounds: 2, ..opts };
    let bad = e
        .run(&rt, &mut cache, &schema, "How many users are there?", &two, &mut go, &mut reject)
        .unwrap();
    let n = bad.attempts.len();
    assert!(n == 3 || (n == 2 && bad.attempts[1].sql == bad.attempts[0].sql), "{:?}", bad.attempts);
    let one = Options { repair_rounds: 1, ..opts };
    assert_eq!(
        e.run(&rt, &mut cache, &schema, "How many users are there?", &one, &mut go, &mut reject)
            .unwrap()
            .attempts
            .len(),
        2
    );
    let none = Options { repair_rounds: 0, ..opts };
    assert_eq!(
        e.run(&rt, &mut cache, &schema, "How many users are there?", &none, &mut go, &mut reject)
            .unwrap()
            .attempts
            .len(),
        1
    );
    // Attempts cut off at `max_new_tokens` (every one here: 12 tokens) do not count against the
    // repair budget: a budget of one token leaves such a line its rounds.
    assert!(bad.attempts.iter().all(|a| a.stop.name() == "max_new_tokens"), "{:?}", bad.attempts);
    let tight = Options { repair_tokens: 1, ..two };
    let cut = e
        .run(&rt, &mut cache, &schema, "How many users are there?", &tight, &mut go, &mut reject)
        .unwrap();
    let sqls = |o: &turboinfer::nl2sql::Outcome| {
        o.attempts.iter().map(|a| a.sql.clone()).collect::<Vec<_>>()
    };
    assert_eq!(sqls(&cut), sqls(&bad));
    assert_eq!((cut.repair_budget.decoded, cut.repair_budget.reached), (0, false));
    // "nope", or the engine's own verdict when an answer holds no SQL at all.
    assert!(bad.attempts.iter().all(|a| a.error.is_some()), "{:?}", bad.attempts);
    assert!(bad.error.is_some());
    assert!(matches!(bad.into_result(), Err(Nl2SqlError::InvalidSql { .. })));
}

#[test]
fn a_prefix_beginning_like_the_last_one_keeps_that_beginning_and_gives_the_cold_answer() {
    let Some(e) = common::engine("smollm2-135m") else { return };
    let rt = Runtime::new(2).unwrap();
    let opts = prefix_only();
    let mut accept = |_: &str| Ok(());
    let mut go = |_: Progress| true;
    let q = "How many users are there?";
    let home = common::users_orders(true);
    // The same tables plus one in another schema, whose name sorts before `public`: the home
    // schema's tables are still shown first, so this prompt begins as `home`'s does.
    let mut more = home.clone();
    more.tables.push(
        Table::new("archive", "users_2019", TableKind::Table)
            .column("id", "integer", false)
            .column("name", "text", false),
    );
    let plan = e.plan(&more, q, &opts).unwrap();
    assert_eq!(plan.shown, ["public.orders", "public.users", "archive.users_2019"]);

    let mut fresh = PrefixCache::new();
    let cold = e.run(&rt, &mut fresh, &more, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(cold.prefix_source, PrefixSource::Computed);
    assert_eq!(cold.tokens.reused, 0);

    let mut cache = PrefixCache::new();
    e.run(&rt, &mut cache, &home, q, &opts, &mut go, &mut accept).unwrap();
    let kept = e.run(&rt, &mut cache, &more, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(kept.prefix_source, PrefixSource::Partial);
    assert!(!kept.cache_hit());
    let shared = common_len(&e.plan(&home, q, &opts).unwrap().prefix_ids, &plan.prefix_ids);
    assert!(shared > 100, "the home tables are shared: {shared} tokens");
    assert_eq!(kept.tokens.reused, shared);
    assert_eq!(kept.tokens.prefill, kept.tokens.prompt - shared);
    assert_eq!(kept.attempts[0].raw, cold.attempts[0].raw, "kept rows must not change the answer");
    assert_eq!((cache.stats().misses, cache.stats().partial), (2, 1));
    // Now the whole prefix is held: a hit.
    let hit = e.run(&rt, &mut cache, &more, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(hit.prefix_source, PrefixSource::Memory);
    assert_eq!(hit.tokens.reused, hit.tokens.prefix);
    assert_eq!(hit.attempts[0].raw, cold.attempts[0].raw);
    // After an invalidation nothing is kept.
    cache.invalidate();
    let redo = e.run(&rt, &mut cache, &home, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(redo.prefix_source, PrefixSource::Computed);
}

fn common_len(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn trimming_and_context_errors() {
    let Some(e) = common::engine("smollm2-135m") else { return };
    // 40 tables of 12 columns: far more than 600 positions.
    let mut tables: Vec<Table> = (0..40)
        .map(|i| {
            (0..12)
                .fold(Table::new("public", &format!("table_{i:02}"), TableKind::Table), |t, c| {
                    t.column(&format!("col_{c}"), "integer", true)
                })
        })
        .collect();
    tables.push(Table::new("public", "users", TableKind::Table).column("id", "integer", false));
    let schema = SchemaInfo::new(tables, Some("public"));
    let opts = Options { max_new_tokens: 16, context_tokens: 600, ..Options::default() };
    let plan = e.plan(&schema, "how many users?", &opts).unwrap();
    assert!(plan.shown.contains(&"public.users".to_string()), "{:?}", plan.shown);
    assert!(!plan.dropped.is_empty());
    assert_eq!(plan.shown.len() + plan.dropped.len(), 41);
    assert!(plan.prefix_ids.len() + plan.question_ids.len() + 2 * 16 <= 600);
    // Deterministic.
    assert_eq!(e.plan(&schema, "how many users?", &opts).unwrap().fingerprint, plan.fingerprint);
    // Too small for anything.
    let tiny = Options { max_new_tokens: 16, context_tokens: 100, ..Options::default() };
    assert!(matches!(
        e.plan(&schema, "how many users?", &tiny),
        Err(Nl2SqlError::ContextTooSmall { .. })
    ));
    assert!(matches!(e.plan(&SchemaInfo::default(), "q", &opts), Err(Nl2SqlError::NoTables)));
}

#[test]
fn small_coder_answers_the_fixture_question() {
    let Some(e) = common::engine("qwen2.5-coder-0.5b") else { return };
    let rt = Runtime::new(2).unwrap();
    let mut cache = PrefixCache::new();
    let opts = Options { max_new_tokens: 32, context_tokens: 1024, ..Options::default() };
    let o = e
        .run(
            &rt,
            &mut cache,
            &common::users_orders(true),
            "How many users are there?",
            &opts,
            &mut |_| true,
            &mut |s: &str| {
                if s.to_lowercase().starts_with("select") {
                    Ok(())
                } else {
                    Err("not a SELECT".into())
                }
            },
        )
        .unwrap();
    assert_eq!(o.error, None);
    assert_eq!(o.sql.to_lowercase(), "select count(*) from users", "{:?}", o.attempts);
}

#[test]
fn memory_plan_is_known_before_the_call_and_matches_its_kv_cache() {
    let Some(e) = common::engine("smollm2-135m") else { return };
    let rt = Runtime::new(2).unwrap();
    let cfg = e.model().config().clone();
    // Capped at the training context (8192 for SmolLM2-135M).
    let huge = Options { context_tokens: 131_072, ..Options::default() };
    let plan = e.memory_plan(&huge, 2);
    assert_eq!(plan.positions, cfg.context_length);
    assert_eq!(
        plan.kv_cache_bytes,
        2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 * cfg.context_length
    );
    assert!(plan.scratch_bytes > 0 && plan.scratch_bytes < plan.kv_cache_bytes, "{plan:?}");
    assert_eq!(plan.total_bytes(), plan.kv_cache_bytes + plan.scratch_bytes);
    // A call reports the plan it ran with, and its cache is what the plan said.
    let opts = Options { max_new_tokens: 48, context_tokens: 1024, ..Options::default() };
    let mut cache = PrefixCache::new();
    let out = e
        .run(
            &rt,
            &mut cache,
            &common::users_orders(true),
            "how many users are there?",
            &opts,
            &mut |_| true,
            &mut |_| Ok(()),
        )
        .unwrap();
    assert_eq!(out.memory, e.memory_plan(&opts, 2));
    assert_eq!(cache.capacity(), 1024);
    assert_eq!(e.model().kv_cache_bytes(1024), out.memory.kv_cache_bytes);
}

/// The question the repair, doubt and candidate tests ask of the 0.5B model over users/orders.
const WHICH_USERS: &str = "Which users placed the most orders?";

/// The 0.5B engine, a 2-thread runtime, the users/orders schema and options for
/// [`WHICH_USERS`] (64 tokens, 1024 positions, one candidate, `repair_rounds`); `None` without
/// the model.
fn which_users_setup(
    repair_rounds: usize,
) -> Option<(turboinfer::nl2sql::Engine, Runtime, SchemaInfo, Options)> {
    let e = common::engine("qwen2.5-coder-0.5b")?;
    let opts = Options {
        max_new_tokens: 64,
        context_tokens: 1024,
        repair_rounds,
        candidates: 1,
        ..Options::default()
    };
    Some((e, Runtime::new(2).unwrap(), common::users_orders(true), opts))
}

#[test]
fn candidates_branch_off_the_first_answer_and_only_when_they_can_matter() {
    let Some((e, rt, schema, one)) = which_users_setup(0) else { return };
    let mut cache = PrefixCache::new();
    let q = WHICH_USERS;
    let four = Options { candidates: 4, ..one };
    let mut go = |_: Progress| true;
    let mut accept = |_: &str| Ok(());
    let greedy = e.run(&rt, &mut cache, &schema, q, &one, &mut go, &mut accept).unwrap();
    assert_eq!(greedy.error, None);
    assert!(greedy.candidates.weighed.is_empty() && greedy.candidates.chosen.is_none());

    // A valid first answer and no executor: no branch could change the answer, none is decoded.
    let mut runs = 0;
    let mut count = |_: &str| {
        runs += 1;
        Some(1)
    };
    let o = e.run(&rt, &mut cache, &schema, q, &four, &mut go, &mut accept).unwrap();
    assert_eq!((o.sql.as_str(), o.candidates.weighed.len()), (greedy.sql.as_str(), 0));
    assert_eq!(o.tokens.generated, greedy.tokens.generated);
    // One candidate: the executor is never called.
    let hooks =
        Hooks { validate: &mut accept, execute: Some(&mut count), progress: &mut go, link: None };
    let o = e.run_with(&rt, &mut cache, &schema, q, &one, hooks);
    assert_eq!(o.unwrap().sql, greedy.sql);
    assert_eq!(runs, 0, "one candidate executes nothing");

    // The first answer rejected: branches off it are weighed, the rejected one never chosen.
    let first = greedy.sql.clone();
    let mut reject_first =
        |s: &str| if s == first { Err(turboinfer::nl2sql::Rejection::from("no")) } else { Ok(()) };
    let o = e.run(&rt, &mut cache, &schema, q, &four, &mut go, &mut reject_first).unwrap();
    assert!(o.candidates.weighed.len() >= 2, "{:?}", o.candidates.weighed);
    assert!(o.candidates.weighed.len() <= 4);
    assert_eq!(o.candidates.weighed[0].sql, greedy.sql);
    assert!(o.candidates.weighed[0].error.is_some() && o.candidates.weighed[0].branch.is_none());
    assert!(o.candidates.weighed[1..].iter().all(|c| c.branch.is_some()));
    let mut sqls: Vec<&str> = o.candidates.weighed.iter().map(|c| c.sql.as_str()).collect();
    sqls.dedup();
    assert_eq!(sqls.len(), o.candidates.weighed.len(), "no statement is weighed twice");
    let i = o.candidates.chosen.expect("a valid branch");
    assert!(
        i > 0 && o.error.is_none() && o.sql == o.candidates.weighed[i].sql && o.sql != greedy.sql
    );
    // The most likely valid branch.
    let best = o.candidates.weighed[1..].iter().map(|c| c.mean_logprob).fold(f32::MIN, f32::max);
    assert_eq!(o.candidates.weighed[i].mean_logprob, best);
    assert!(o.tokens.generated > greedy.tokens.generated);

    // With an executor every valid candidate runs once; agreement outvotes the first answer.
    let mut executed: Vec<String> = Vec::new();
    let mut digest_of = |s: &str| {
        executed.push(s.to_string());
        // The first answer alone with its result; every branch agreeing on another.
        Some(if s == first { 1 } else { 2 })
    };
    let hooks = Hooks {
        validate: &mut accept,
        execute: Some(&mut digest_of),
        progress: &mut go,
        link: None,
    };
    let o = e.run_with(&rt, &mut cache, &schema, q, &four, hooks).unwrap();
    assert_eq!(executed.len(), o.candidates.weighed.len(), "{executed:?}");
    assert!(o.candidates.weighed.iter().all(|c| c.error.is_none() && c.digest.is_some()));
    if o.candidates.weighed.len() >= 3 {
        assert_ne!(o.sql, greedy.sql, "two agreeing branches outvote the first answer");
    }
    let mut same = |_: &str| Some(7);
    let hooks =
        Hooks { validate: &mut accept, execute: Some(&mut same), progress: &mut go, link: None };
    let o = e.run_with(&rt, &mut cache, &schema, q, &four, hooks).unwrap();
    assert_eq!(o.sql, greedy.sql, "all agree: the first answer");
}

#[test]
fn kept_rows_give_the_same_repairs_and_branches_with_fewer_prompt_tokens() {
    // Every statement rejected: two repair rounds, then three branches off the first answer.
    // Each turn starts again after the question; keeping the rows the cache still holds must
    // change nothing but the prompt tokens run (the forward pass is batch-invariant).
    let Some((e, rt, schema, opts)) = which_users_setup(2) else { return };
    let q = WHICH_USERS;
    let mut go = |_: Progress| true;
    let mut run = |keep_rows: bool| {
        let opts = Options { candidates: 4, keep_rows, ..opts };
        let mut reject = |_: &str| Err(turboinfer::nl2sql::Rejection::from("nope"));
        let mut cache = PrefixCache::new();
        e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut reject).unwrap()
    };
    let (fresh, kept) = (run(false), run(true));
    assert!(fresh.attempts.len() >= 2 && fresh.candidates.weighed.len() >= 2, "{fresh:?}");
    assert_eq!(kept.attempts, fresh.attempts);
    assert_eq!(kept.candidates.weighed, fresh.candidates.weighed);
    assert_eq!(
        (&kept.sql, &kept.error, kept.candidates.chosen),
        (&fresh.sql, &fresh.error, fresh.candidates.chosen)
    );
    assert_eq!(
        (
            kept.tokens.generated,
            kept.speculation.stats.forward_passes,
            kept.speculation.stats.accepted_tokens
        ),
        (
            fresh.tokens.generated,
            fresh.speculation.stats.forward_passes,
            fresh.speculation.stats.accepted_tokens
        )
    );
    // The first repair turn starts with the statement just decoded: its rows are kept.
    eprintln!(
        "prompt tokens run after the question: {} kept rows, {} recomputed",
        kept.tokens.prefill - kept.tokens.prompt,
        fresh.tokens.prefill - fresh.tokens.prompt
    );
    // How many depends on where the answers part (7 tokens on this question under the numeric
    // contract, more before): fewer, never more.
    assert!(
        kept.tokens.prefill < fresh.tokens.prefill,
        "{} vs {}",
        kept.tokens.prefill,
        fresh.tokens.prefill
    );
}

#[test]
fn the_repair_budget_stops_rounds_and_rescue_branches_past_it_and_changes_nothing_before() {
    // Every statement rejected, two repair rounds and a branch allowed. Without a budget the
    // line has its rounds and a branch; a budget the whole line fits in changes nothing; a
    // budget the first answer uses up ends the line there, with no branch; one token more
    // allows one round. Greedy decoding: what runs before the budget stops it is the same.
    let Some((e, rt, schema, opts)) = which_users_setup(2) else { return };
    let q = WHICH_USERS;
    let mut go = |_: Progress| true;
    let mut cache = PrefixCache::new();
    let mut run = |repair_tokens: usize| {
        let opts = Options { candidates: 2, repair_tokens, ..opts };
        let mut reject = |_: &str| Err(turboinfer::nl2sql::Rejection::from("nope"));
        e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut reject).unwrap()
    };
    // The attempts' tokens and verdicts (their draft counters differ: the session's earlier
    // answers draft the later ones).
    let line = |o: &turboinfer::nl2sql::Outcome| -> Vec<(Vec<u32>, Option<String>)> {
        o.attempts.iter().map(|a| (a.ids.clone(), a.error.clone())).collect()
    };
    let free = run(0);
    assert!(free.attempts.len() >= 2 && free.candidates.weighed.len() >= 2, "{free:?}");
    let decoded: usize = free.attempts.iter().map(|a| a.generated_tokens).sum();
    assert_eq!((free.repair_budget.decoded, free.repair_budget.reached), (decoded, false));

    let roomy = run(decoded + 1);
    assert_eq!(line(&roomy), line(&free));
    assert_eq!(roomy.candidates.weighed, free.candidates.weighed);
    assert!(!roomy.repair_budget.reached);

    let first = free.attempts[0].generated_tokens;
    assert!(first > 0);
    let spent = run(first);
    assert_eq!(line(&spent)[..], line(&free)[..1]);
    assert!(spent.candidates.weighed.is_empty(), "no rescue branch past the budget");
    assert_eq!((spent.repair_budget.decoded, spent.repair_budget.reached), (first, true));
    assert!(matches!(spent.into_result(), Err(Nl2SqlError::InvalidSql { .. })));

    let one_round = run(first + 1);
    assert_eq!(line(&one_round)[..], line(&free)[..2]);
    assert!(one_round.candidates.weighed.is_empty());
    assert!(one_round.repair_budget.reached);
}

#[test]
fn a_doubted_answer_gets_one_repair_and_is_kept_when_the_repair_does_no_better() {
    let Some((e, rt, schema, opts)) = which_users_setup(2) else { return };
    let mut cache = PrefixCache::new();
    let q = WHICH_USERS;
    let mut go = |_: Progress| true;
    let mut accept = |_: &str| Ok(());
    let greedy = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!((greedy.error.as_deref(), greedy.attempts.len()), (None, 1));
    let first = greedy.sql.clone();
    let doubt = || turboinfer::nl2sql::Rejection {
        message: "the query runs, but it looks wrong".into(),
        advisory: true,
        ..Default::default()
    };
    let hard = || turboinfer::nl2sql::Rejection::from("no");

    // Every answer doubted: one repair round only, and the first answer is kept, valid.
    let mut doubt_all = |_: &str| Err(doubt());
    let o = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut doubt_all).unwrap();
    assert_eq!((o.sql.as_str(), o.error.as_deref()), (first.as_str(), None));
    assert_eq!(o.attempts.len(), 2, "one round for a doubt");
    assert!(o.attempts.iter().all(|a| a.advisory && a.error.is_some()));
    assert!(!o.attempts[1].raw.is_empty());

    // The first answer doubted, every other answer rejected: the rounds run out, the doubted
    // answer is the answer.
    let mut doubt_then_reject = |s: &str| if s == first { Err(doubt()) } else { Err(hard()) };
    let o = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut doubt_then_reject).unwrap();
    assert_eq!((o.sql.as_str(), o.error.as_deref()), (first.as_str(), None));
    assert!(o.attempts[0].advisory);
    assert!(o.attempts[1..].iter().all(|a| a.advisory == (a.sql == first)), "{:?}", o.attempts);

    // The first answer doubted, the others accepted: the repair's answer, unless it repeated
    // the doubted statement.
    let mut doubt_first = |s: &str| if s == first { Err(doubt()) } else { Ok(()) };
    let o = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut doubt_first).unwrap();
    assert_eq!(o.error, None);
    assert_eq!(o.attempts.len(), 2);
    assert_eq!(o.sql, o.attempts[1].sql);
}

#[test]
fn a_column_on_the_wrong_table_is_requalified_without_a_model_round() {
    let Some((e, rt, schema, opts)) = which_users_setup(2) else { return };
    let mut cache = PrefixCache::new();
    let q = WHICH_USERS;
    let mut go = |_: Progress| true;
    let mut accept = |_: &str| Ok(());
    let greedy = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut accept).unwrap();
    // The answer joins users and orders under aliases; pretend `id` were not a column of users:
    // orders is the one other table that has it, so the engine requalifies `<users>.id` itself.
    let froms = turboinfer::nl2sql::statement::from_items(&greedy.sql);
    let alias = |t: &str| froms.iter().find(|f| f.table.last().map(String::as_str) == Some(t));
    let (u, o) = (alias("users").expect("users in FROM"), alias("orders").expect("orders in FROM"));
    let wrong = format!("{}.id", u.alias);
    assert!(greedy.sql.contains(&wrong), "{}", greedy.sql);
    let first = greedy.sql.clone();
    let mut missing_id = |s: &str| {
        if s == first {
            Err(turboinfer::nl2sql::Rejection {
                message: format!("column {wrong} does not exist"),
                sqlstate: Some("42703".into()),
                ..Default::default()
            })
        } else {
            Ok(())
        }
    };
    let r = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut missing_id).unwrap();
    assert_eq!(r.error, None);
    assert_eq!(r.attempts.len(), 2, "{:?}", r.attempts);
    let fix = &r.attempts[1];
    assert_eq!((fix.generated_tokens, fix.error.as_deref()), (0, None));
    assert!(fix
        .rewritten
        .as_deref()
        .is_some_and(|n| n.starts_with(&format!("{wrong} -> {}.id", o.alias))));
    assert_eq!(r.sql, fix.sql);
    assert_eq!(r.sql, first.replace(&wrong, &format!("{}.id", o.alias)));
    assert_eq!(r.tokens.generated, greedy.tokens.generated, "no token decoded for the rewrite");
}

#[test]
fn a_doubt_s_own_fix_is_used_without_a_model_round_only_when_it_clears_every_doubt() {
    let Some((e, rt, schema, opts)) = which_users_setup(2) else { return };
    let mut cache = PrefixCache::new();
    let q = WHICH_USERS;
    let mut go = |_: Progress| true;
    let mut accept = |_: &str| Ok(());
    let greedy = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut accept).unwrap();
    let first = greedy.sql.clone();
    // The validator doubts the first answer and knows its fix (as for an integer ratio).
    let fixed = format!("{first} LIMIT 10");
    let doubt = |fixed: &str| turboinfer::nl2sql::Rejection {
        message: "the query runs, but a / … divides integers".into(),
        advisory: true,
        fix: Some(Box::new((fixed.to_string(), "1.0 * written before a / …".into()))),
        ..Default::default()
    };
    let mut fix_passes = |s: &str| if s == first { Err(doubt(&fixed)) } else { Ok(()) };
    let r = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut fix_passes).unwrap();
    assert_eq!(r.error, None);
    assert_eq!(r.attempts.len(), 2, "{:?}", r.attempts);
    let fix = &r.attempts[1];
    assert_eq!((fix.generated_tokens, fix.error.as_deref()), (0, None));
    assert_eq!(fix.rewritten.as_deref(), Some("1.0 * written before a / …"));
    assert_eq!(r.sql, fixed);
    assert_eq!(r.tokens.generated, greedy.tokens.generated, "no token decoded for the fix");

    // A fix still doubted (for another reason) is not used: the model gets its round instead,
    // and the first answer stays when that round does no better.
    let mut fix_doubted = |s: &str| {
        if s == first {
            Err(doubt(&fixed))
        } else {
            Err(turboinfer::nl2sql::Rejection {
                message: "the query runs, but it returns the same expression more than once".into(),
                advisory: true,
                ..Default::default()
            })
        }
    };
    let r = e.run(&rt, &mut cache, &schema, q, &opts, &mut go, &mut fix_doubted).unwrap();
    assert!(r.attempts.iter().all(|a| a.rewritten.is_none()), "{:?}", r.attempts);
    assert_eq!(r.attempts.len(), 2, "one model round for the doubt: {:?}", r.attempts);
    assert!(r.attempts[1].generated_tokens > 0);
    assert_eq!((r.sql.as_str(), r.error.as_deref()), (first.as_str(), None));

    // With repairs off, nothing is rewritten either.
    let off = Options { repair_rounds: 0, ..opts };
    let mut fix_passes = |s: &str| if s == first { Err(doubt(&fixed)) } else { Ok(()) };
    let r = e.run(&rt, &mut cache, &schema, q, &off, &mut go, &mut fix_passes).unwrap();
    assert_eq!(r.attempts.len(), 1);
    assert_eq!((r.sql.as_str(), r.error.as_deref()), (first.as_str(), None));
}

#[test]
fn samples_are_decoded_together_deterministically_and_vote() {
    let Some((e, rt, schema, one)) = which_users_setup(0) else { return };
    let mut cache = PrefixCache::new();
    let q = WHICH_USERS;
    let mut go = |_: Progress| true;
    let mut accept = |_: &str| Ok(());
    let greedy = e.run(&rt, &mut cache, &schema, q, &one, &mut go, &mut accept).unwrap();
    let three = Options { samples: 3, ..one };

    // A valid first answer and no executor: samples could not change it, none is decoded.
    let o = e.run(&rt, &mut cache, &schema, q, &three, &mut go, &mut accept).unwrap();
    assert_eq!((o.sql.as_str(), o.candidates.weighed.len()), (greedy.sql.as_str(), 0));

    // With an executor: the greedy answer and three samples, each executed once; the same
    // samples on every call (fixed seeds), whatever else the cache held in between.
    let run = |digest: &mut dyn FnMut(&str) -> Option<u64>| {
        let mut go = |_: Progress| true;
        let mut accept = |_: &str| Ok(());
        let mut cache = PrefixCache::new();
        let hooks =
            Hooks { validate: &mut accept, execute: Some(digest), progress: &mut go, link: None };
        e.run_with(&rt, &mut cache, &schema, q, &three, hooks).unwrap()
    };
    let mut executed = 0;
    let o = run(&mut |_: &str| {
        executed += 1;
        Some(1)
    });
    let w = &o.candidates.weighed;
    assert_eq!(w.len(), 4, "{w:?}");
    assert_eq!((w[0].sample, w[0].branch), (None, None));
    assert_eq!(w[1..].iter().map(|c| c.sample).collect::<Vec<_>>(), [Some(0), Some(1), Some(2)]);
    assert!(w[1..].iter().all(|c| !c.sql.is_empty() && c.mean_logprob.is_finite()));
    let distinct = {
        let mut s: Vec<&str> = w.iter().map(|c| c.sql.as_str()).collect();
        s.sort();
        s.dedup();
        s.len()
    };
    assert!(
        executed <= 4 && executed >= distinct.min(4) - 1,
        "{executed} runs, {distinct} statements"
    );
    assert_eq!(o.sql, greedy.sql, "all agree: the first answer");
    let again = run(&mut |_: &str| Some(1));
    let sqls = |c: &[turboinfer::nl2sql::candidates::Candidate]| {
        c.iter().map(|c| c.sql.clone()).collect::<Vec<_>>()
    };
    assert_eq!(sqls(&again.candidates.weighed), sqls(w), "the same samples every time");

    // Samples agreeing on a result the first answer does not give outvote it.
    let first = greedy.sql.clone();
    let o = run(&mut |s: &str| Some(if s == first { 1 } else { 2 }));
    let w = &o.candidates.weighed;
    let with_first = w.iter().filter(|c| c.sql == first).count();
    let others = w.iter().filter(|c| c.sql != first && c.error.is_none()).count();
    if others > with_first {
        assert_ne!(o.sql, first, "more agreeing samples outvote the first answer: {w:?}");
    } else {
        assert_eq!(o.sql, first, "the first answer's group is as large: {w:?}");
    }
}

/// A decode pass over several tokens (a draft check, a step of several samples) is checked before
/// each half layer like a prefill chunk, with the last progress reported: a cancel that arrives
/// while one runs ends the call there (on the scalar tier such a pass is over a second of work).
#[test]
fn a_cancel_during_a_pass_over_drafts_or_samples_ends_the_call() {
    let Some((e, rt, schema, one)) = which_users_setup(0) else { return };
    // One call (samples are decoded only with an executor to weigh them).
    let call = |opts: &Options, progress: &mut dyn FnMut(Progress) -> bool| {
        let mut accept = |_: &str| Ok(());
        let mut digest = |_: &str| Some(1u64);
        let execute =
            (opts.samples > 0).then_some(&mut digest as &mut dyn FnMut(&str) -> Option<u64>);
        let hooks = Hooks { validate: &mut accept, execute, progress, link: None };
        e.run_with(&rt, &mut PrefixCache::new(), &schema, WHICH_USERS, opts, hooks)
    };
    for (what, opts) in [
        ("drafts", Options { speculation: true, ..one }),
        ("samples", Options { speculation: false, samples: 2, ..one }),
    ] {
        // A decoding report right after the same one: a check inside a pass.
        let mut seen = Vec::new();
        let o = call(&opts, &mut |p| {
            seen.push(p);
            true
        })
        .unwrap();
        if what == "drafts" {
            assert!(o.speculation.stats.draft_tokens > 0, "{what}: no drafts to check");
        } else {
            assert!(o.candidates.weighed.len() > 1, "{what}: no samples decoded");
        }
        let inside = seen
            .windows(2)
            .filter(|w| matches!(w[1], Progress::Decode { .. }) && w[0] == w[1])
            .count();
        assert!(inside > 0, "{what}: no check inside a pass: {seen:?}");

        // Cancelled at the first check inside a pass: the call ends with the cancel error.
        let mut prev = None;
        let r = call(&opts, &mut |p| {
            let again = matches!(p, Progress::Decode { .. }) && prev == Some(p);
            prev = Some(p);
            !again
        });
        assert!(matches!(r, Err(Nl2SqlError::Cancelled)), "{what}: {r:?}");
    }
}

/// Approved examples: the most similar stored questions go into the question part as earlier
/// exchanges, after a schema prefix that does not change; with none chosen the prompt is the
/// plain one; the refusal check reads the plain question, so its verdict is the same bitwise.
#[test]
fn approved_examples_follow_the_unchanged_prefix_and_the_check_reads_the_plain_question() {
    use turboinfer::nl2sql::examples::Example;
    use turboinfer::nl2sql::prompt;
    use turboinfer::nl2sql::refusal::RefusalMode;
    let Some(e) = common::engine("smollm2-135m") else { return };
    let q = "How many orders were placed by each user?";
    let plain = common::users_orders(true);
    let mut taught = plain.clone();
    taught.examples = vec![
        Example {
            id: 7,
            question: "How many orders are there?".into(),
            sql: "SELECT count(*) FROM orders;".into(),
        },
        Example {
            id: 8,
            question: "List the users by country".into(),
            sql: "SELECT name FROM users ORDER BY country".into(),
        },
        Example { id: 9, question: "Weather in Paris".into(), sql: "SELECT 1".into() },
    ];
    let opts = Options {
        max_new_tokens: 4,
        context_tokens: 1024,
        repair_rounds: 0,
        candidates: 1,
        refusal: RefusalMode::Margin(100.0),
        ..Options::default()
    };
    let without = e.plan(&plain, q, &opts).unwrap();
    let with = e.plan(&taught, q, &opts).unwrap();
    assert_eq!(with.fingerprint, without.fingerprint);
    assert_eq!(with.prefix_ids, without.prefix_ids);
    assert_eq!(without.question, prompt::question(q));
    assert!(without.examples.is_empty() && without.plain_question_ids.is_none());
    assert_eq!(
        with.examples.iter().map(|x| x.0).collect::<Vec<_>>().len(),
        2,
        "{:?}",
        with.examples
    );
    assert!(
        with.examples.iter().all(|x| x.0 != 9 && x.1 > 0.0 && x.1 <= 1.0),
        "{:?}",
        with.examples
    );
    let text = with.question.text();
    assert!(
        text.contains("```sql\nSELECT count(*) FROM orders\n```"),
        "trailing ; dropped: {text}"
    );
    assert!(text.ends_with(&prompt::question(q).text()), "{text}");
    assert_eq!(with.plain_question_ids.as_deref(), Some(without.question_ids.as_slice()));
    let none = Options { examples: 0, ..opts };
    assert_eq!(e.plan(&taught, q, &none).unwrap().question, prompt::question(q));

    let rt = Runtime::new(2).unwrap();
    let mut accept = |_: &str| Ok(());
    let mut go = |_: Progress| true;
    let mut cache = PrefixCache::new();
    let a = e.run(&rt, &mut cache, &plain, q, &opts, &mut go, &mut accept).unwrap();
    let b = e.run(&rt, &mut cache, &taught, q, &opts, &mut go, &mut accept).unwrap();
    let (va, vb) = (a.refusal.unwrap(), b.refusal.unwrap());
    assert_eq!(
        va.margin.unwrap().to_bits(),
        vb.margin.unwrap().to_bits(),
        "the check reads the plain question"
    );
    assert_eq!(b.prompt.examples.len(), 2);
    assert_eq!(b.tokens.prompt, with.prefix_ids.len() + with.question_ids.len());
    assert!(b.prompt.text.ends_with(&text));
}

#[test]
fn prewarm_of_a_schema_that_does_not_fit_writes_the_home_prefix_a_new_cache_reads() {
    let Some(e) = common::engine("smollm2-135m") else { return };
    let rt = Runtime::new(2).unwrap();
    let opts = prefix_only();
    let mut accept = |_: &str| Ok(());
    let mut go = |_: Progress| true;
    // The home schema (users, orders) and forty tables elsewhere: too many for 1,024 tokens.
    let mut schema = common::users_orders(true);
    for i in 0..40 {
        schema.tables.push(
            Table::new("archive", &format!("sensor_log_{i:02}"), TableKind::Table)
                .column("id", "integer", false)
                .column("reading", "real", true)
                .column("taken_at", "timestamptz", true),
        );
    }
    let dir = common::fresh_dir("prewarm-home");
    let files = || Some(turboinfer::generate::kv_file::KvFileDir::new(&dir, 1 << 30));

    let mut warm = PrefixCache::new();
    warm.set_file_dir(files());
    let p = e.prewarm(&rt, &mut warm, &schema, &opts, None, &mut go).unwrap();
    assert!(!p.fits);
    assert_eq!((p.prefix, p.prefix_tables), (Some(PrefixSource::Computed), 2));

    // A question that points at nothing elsewhere is shown the home schema alone, whose prefix
    // a new cache (another backend) reads from the file; the answer is the cold one.
    let q = "How many users are there?";
    let mut fresh = PrefixCache::new();
    fresh.set_file_dir(files());
    let read = e.run(&rt, &mut fresh, &schema, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(read.prefix_source, PrefixSource::File);
    assert_eq!(read.prompt.shown, ["public.orders", "public.users"]);
    assert_eq!(read.tokens.prefix, p.prefix_tokens);
    let mut cold = PrefixCache::new();
    let computed = e.run(&rt, &mut cold, &schema, q, &opts, &mut go, &mut accept).unwrap();
    assert_eq!(computed.prefix_source, PrefixSource::Computed);
    assert_eq!(read.attempts[0].raw, computed.attempts[0].raw);

    // Nothing but the home schema (one schema): no second prefix to prepare.
    let mut one = schema.clone();
    one.default_schema = Some("archive".into());
    one.tables.retain(|t| t.schema == "archive");
    let p = e.prewarm(&rt, &mut warm, &one, &opts, None, &mut go).unwrap();
    assert_eq!((p.fits, p.prefix, p.prefix_tables), (false, None, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A [`StatsSource`] over fixed statistics that records which tables each read asked for.
struct RecordedStats {
    /// (table name, column) -> statistics.
    stats: std::collections::HashMap<(String, String), ColumnStats>,
    /// The table names of each read, in call order.
    asked: std::cell::RefCell<Vec<Vec<String>>>,
}

impl StatsSource for RecordedStats {
    fn read(&self, tables: &[&Table]) -> Vec<Vec<(String, ColumnStats)>> {
        self.asked.borrow_mut().push(tables.iter().map(|t| t.name.clone()).collect());
        let of = |t: &Table| {
            let get = |c: &turboinfer::nl2sql::Column| {
                self.stats
                    .get(&(t.name.clone(), c.name.clone()))
                    .map(|s| (c.name.clone(), s.clone()))
            };
            t.columns.iter().filter_map(get).collect()
        };
        tables.iter().map(|t| of(t)).collect()
    }
}

#[test]
fn lazy_statistics_are_read_for_the_rendered_tables_only_and_give_the_same_prompt() {
    let Some(e) = common::engine("smollm2-135m") else { return };
    let opts = prefix_only();
    // The home schema (users, orders: a status column with few values) and 600 tables
    // elsewhere, each with a kind column of three values: so many that not even a lower bound
    // of their text fits 1,024 tokens (they are not all rendered).
    let mut eager = common::users_orders(true);
    for i in 0..600 {
        let t = Table::new("archive", &format!("sensor_log_{i:03}"), TableKind::Table)
            .column("id", "integer", false)
            .column("kind", "text", true);
        eager
            .tables
            .push((0..12).fold(t, |t, c| t.column(&format!("reading_value_{c:02}"), "real", true)));
    }
    let values = |v: &[&str]| ColumnStats {
        distinct: Some(v.len() as u32),
        common: v.iter().map(|s| s.to_string()).collect(),
        bounds: Vec::new(),
    };
    let mut stats = std::collections::HashMap::new();
    for t in &mut eager.tables {
        let (col, v) = match t.schema.as_str() {
            "public" if t.name == "orders" => ("status", values(&["paid", "open"])),
            "public" => continue,
            _ => ("kind", values(&["min", "max", "mean"])),
        };
        stats.insert((t.name.clone(), col.to_string()), v.clone());
        t.columns.iter_mut().find(|c| c.name == col).unwrap().stats = Some(v);
    }
    let lazy_of = |schema: &SchemaInfo| {
        let mut lazy = schema.clone();
        lazy.tables.iter_mut().flat_map(|t| &mut t.columns).for_each(|c| c.stats = None);
        let rec = Rc::new(RecordedStats { stats: stats.clone(), asked: Default::default() });
        lazy.lazy_stats = Some(LazyStats(rec.clone()));
        (lazy, rec)
    };

    // Too big to fit: the tables visited are read, a batch at a time, and the prompt is the one
    // the statistics read up front give (notes included).
    let (lazy, rec) = lazy_of(&eager);
    for q in ["How many orders are open?", "Which sensor logs of kind max are there?"] {
        let want = e.plan(&eager, q, &opts).unwrap();
        let got = e.plan(&lazy, q, &opts).unwrap();
        assert!(want.linking.is_some() && want.dropped.len() > 550, "{q}: {:?}", want.shown);
        assert_eq!(got.prefix.text(), want.prefix.text(), "{q}");
        assert_eq!(got.fingerprint, want.fingerprint, "{q}");
        assert!(want.prefix.text().contains("'paid'"), "{}", want.prefix.text());
    }
    let asked: std::collections::BTreeSet<String> =
        rec.asked.borrow().iter().flatten().cloned().collect();
    assert!(asked.len() < 150, "read {} of 602 tables", asked.len());
    assert!(rec.asked.borrow().iter().all(|r| r.len() <= trim::MAX_MISSES));

    // A schema that fits: every table's statistics in one read.
    let small = common::users_orders(true);
    let mut eager_small = small.clone();
    let v = values(&["paid", "open"]);
    eager_small.tables[1].columns.iter_mut().find(|c| c.name == "status").unwrap().stats = Some(v);
    let (lazy, rec) = lazy_of(&eager_small);
    let q = "How many orders are open?";
    let (want, got) = (e.plan(&eager_small, q, &opts).unwrap(), e.plan(&lazy, q, &opts).unwrap());
    assert!(got.linking.is_none());
    assert_eq!(got.prefix.text(), want.prefix.text());
    assert_eq!(rec.asked.borrow()[0].len(), 2, "{:?}", rec.asked.borrow());
}

/// The refusal check's turn skipped (`refusal::Skip`): the answer starts from the question
/// part's own logits and is the one decoded without any check, token for token; not skipped,
/// the verdict is bitwise the one of the check run on every question (`on`), and so is the
/// answer.
#[test]
fn a_skipped_check_gives_the_answer_of_no_check_and_a_run_check_the_verdict_of_on() {
    use turboinfer::nl2sql::refusal::{RefusalMode, Skip};
    use turboinfer::nl2sql::Engine;
    let Some(mut e) = common::engine("qwen2.5-coder-0.5b") else { return };
    let schema = common::users_orders(true);
    let q = "How many orders were placed by each user?";
    let rt = Runtime::new(2).unwrap();
    let base = Options {
        max_new_tokens: 24,
        context_tokens: 1024,
        repair_rounds: 0,
        candidates: 1,
        ..Options::default()
    };
    let run_with = |e: &Engine, refusal: RefusalMode, keep_rows: bool| {
        let opts = Options { refusal, keep_rows, ..base };
        let mut accept = |_: &str| Ok(());
        let mut go = |_: Progress| true;
        // A fresh cache each time: every run prefills the same prefix, then the question.
        e.run(&rt, &mut PrefixCache::new(), &schema, q, &opts, &mut go, &mut accept).unwrap()
    };
    let run = |e: &Engine, refusal: RefusalMode| run_with(e, refusal, true);
    let off = run(&e, RefusalMode::Off);
    let on = run(&e, RefusalMode::Margin(100.0));
    let checked = on.refusal.unwrap();
    assert!(checked.margin.is_some() && !checked.refused());
    assert_eq!(on.sql, off.sql);

    // Always skipped (any opening, any match): no margin, the answer of no check.
    e.set_refusal_calibration(Some(100.0), Some(Skip { opening: f32::NEG_INFINITY, words: 0 }));
    let skipped = run(&e, RefusalMode::Auto);
    let v = skipped.refusal.unwrap();
    assert_eq!(v.margin, None, "{v:?}");
    assert!(v.opening.is_some_and(|o| o < 0.0), "{v:?}");
    assert_eq!(skipped.sql, off.sql);
    assert_eq!(skipped.tokens.generated, off.tokens.generated);
    assert_eq!(skipped.answer_logprob.map(f32::to_bits), off.answer_logprob.map(f32::to_bits));

    // Never skipped (no opening is sure enough): the opening read, then the check as with `on`.
    e.set_refusal_calibration(Some(100.0), Some(Skip { opening: f32::INFINITY, words: 0 }));
    let run_check = run(&e, RefusalMode::Auto);
    let w = run_check.refusal.unwrap();
    assert_eq!(w.margin.map(f32::to_bits), checked.margin.map(f32::to_bits));
    assert_eq!(w.opening.map(f32::to_bits), v.opening.map(f32::to_bits));
    assert_eq!(run_check.sql, off.sql);
    assert_eq!(run_check.tokens.generated, off.tokens.generated);
    assert_eq!(run_check.answer_logprob.map(f32::to_bits), off.answer_logprob.map(f32::to_bits));

    // The assistant's opening the probe computed is put back after the check's turn, not
    // prefilled again: the same answer, bitwise, with fewer prompt tokens through the model than
    // when rows are not kept (the opening prefilled once more, as on a remote sequence).
    let again = run_with(&e, RefusalMode::Auto, false);
    assert_eq!(again.refusal.unwrap().margin.map(f32::to_bits), w.margin.map(f32::to_bits));
    assert_eq!(again.sql, run_check.sql);
    assert_eq!(again.tokens.generated, run_check.tokens.generated);
    assert_eq!(again.answer_logprob.map(f32::to_bits), run_check.answer_logprob.map(f32::to_bits));
    assert!(
        run_check.tokens.prefill < again.tokens.prefill,
        "{} < {}",
        run_check.tokens.prefill,
        again.tokens.prefill
    );
}
