//! Follow-up questions in the engine (`nl2sql::Conversation`): the earlier turns are in the
//! prompt; the cache rows the previous call left of them are kept, and the answer is the one a
//! fresh cache computes (token for token); turns asked over another schema prefix are dropped;
//! the oldest turns beyond the token budget are left out.

mod common;

use turboinfer::nl2sql::{
    Conversation, Dropped, Fingerprint, Hooks, Options, Outcome, PrefixCache, Progress, SchemaInfo,
    Turn,
};
use turboinfer::platform::runtime::Runtime;

/// One call of `e` on `cache`: `question` after `conv`.
fn ask(
    e: &turboinfer::nl2sql::Engine,
    rt: &Runtime,
    cache: &mut PrefixCache,
    schema: &SchemaInfo,
    question: &str,
    conv: Option<Conversation<'_>>,
    opts: &Options,
) -> Outcome {
    let mut accept = |_: &str| Ok(());
    let mut go = |_: Progress| true;
    let hooks = Hooks { validate: &mut accept, execute: None, progress: &mut go, link: None };
    e.run_turn(rt, cache, schema, question, conv, opts, hooks).unwrap()
}

#[test]
fn a_follow_up_keeps_the_earlier_rows_and_answers_as_a_fresh_cache_does() {
    let Some(e) = common::engine("qwen2.5-coder-0.5b") else { return };
    let rt = Runtime::new(2).unwrap();
    let schema = common::users_orders(true);
    let opts = Options { max_new_tokens: 64, context_tokens: 2048, ..Options::default() };
    let mut cache = PrefixCache::new();
    let q1 = "How many orders are there?";
    let first = ask(&e, &rt, &mut cache, &schema, q1, None, &opts);
    assert!(!first.follow_up.asked);
    let turn = Turn::of(q1, &first).expect("an answered question is a turn");
    assert_eq!(turn.answer, first.attempts[0].raw, "answered at once: the model's own words");
    let turns = [turn];
    let conv =
        Conversation { first_question: q1, turns: &turns, fingerprint: first.prompt.fingerprint };

    // After the first turn, in the same cache: its question and answer keep their rows.
    let warm = ask(&e, &rt, &mut cache, &schema, "only those above 100?", Some(conv), &opts);
    assert!(warm.follow_up.asked);
    assert_eq!((warm.follow_up.used, warm.follow_up.dropped), (1, None));
    assert!(warm.refusal.is_none(), "a follow-up is not checked");
    assert!(warm.prompt.text.contains(q1) && warm.prompt.text.contains(&first.sql));
    let kept = warm.follow_up.reused_tokens;
    assert!(kept > 10, "the first turn's rows are kept: {kept}");
    // The same follow-up on a fresh cache: everything computed, the same answer.
    let mut fresh = PrefixCache::new();
    let cold = ask(&e, &rt, &mut fresh, &schema, "only those above 100?", Some(conv), &opts);
    assert_eq!(cold.follow_up.reused_tokens, 0);
    assert_eq!(cold.prompt.text, warm.prompt.text);
    assert_eq!(cold.tokens.prefill - cold.tokens.prefix, warm.tokens.prefill + kept);
    assert_eq!(cold.attempts.len(), warm.attempts.len());
    for (c, w) in cold.attempts.iter().zip(&warm.attempts) {
        assert_eq!(c.ids, w.ids, "kept rows must not change the answer");
    }

    // Asked over another schema prefix: the turns are dropped, the question is asked alone
    // (and checked as a question alone is).
    let other = Conversation { fingerprint: Fingerprint::of("another", "prefix"), ..conv };
    let alone = ask(&e, &rt, &mut cache, &schema, "How many users are there?", Some(other), &opts);
    assert_eq!(alone.follow_up.dropped, Some(Dropped::SchemaChanged));
    assert_eq!((alone.follow_up.used, alone.follow_up.reused_tokens), (0, 0));
    assert!(!alone.prompt.text.contains(q1));

    // A token budget smaller than the one turn: it is left out.
    let tight = Options { follow_up_tokens: 8, ..opts };
    let none = ask(&e, &rt, &mut cache, &schema, "only those above 100?", Some(conv), &tight);
    assert_eq!((none.follow_up.used, none.follow_up.dropped), (0, None));
    assert!(!none.prompt.text.contains(q1));
}
