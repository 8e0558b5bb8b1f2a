//! nl2sql calls whose forward passes run in a batch server (`serve::Server`, behind the
//! `nl2sql::seq::Transport` trait the PostgreSQL worker implements): the same answers, token
//! for token, as the calls that keep their KV cache in-process, with speculation, sampled
//! candidates (forks of the question's sequence) and a memory budget small enough that the
//! server evicts caches and rebuilds them from their tokens.
//!
//! The server here is the real one, owning its own copy of the model (as the worker does); only
//! the transport is in-process instead of shared memory.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use turboinfer::nl2sql::seq::Transport;
use turboinfer::nl2sql::{Engine, Hooks, Nl2SqlError, Options, Outcome, PrefixCache};
use turboinfer::platform::runtime::Runtime;
use turboinfer::serve::{Request, SeqId, ServeError, Server};

/// A server and its model in this process.
struct InProcess {
    /// The server's own copy of the model (loaded again, as the worker does).
    engine: Engine,
    rt: Runtime,
    server: RefCell<Server>,
    next: Cell<SeqId>,
    forgotten: RefCell<Vec<SeqId>>,
    /// Batches run and the largest (sequences in one pass).
    steps: Cell<usize>,
    widest: Cell<usize>,
}

impl Transport for InProcess {
    fn step(&self, reqs: &[Request]) -> Result<Vec<Result<Vec<f32>, ServeError>>, Nl2SqlError> {
        let mut server = self.server.borrow_mut();
        for id in self.forgotten.borrow_mut().drain(..) {
            server.forget(id);
        }
        self.steps.set(self.steps.get() + 1);
        self.widest.set(self.widest.get().max(reqs.len()));
        let replies = server.step(self.engine.model(), &self.rt, reqs, &mut || true);
        Ok(replies.into_iter().map(|r| r.map(|r| r.logits)).collect())
    }
    fn new_seq(&self) -> SeqId {
        self.next.set(self.next.get() + 1);
        self.next.get()
    }
    fn forget(&self, seq: SeqId) {
        self.forgotten.borrow_mut().push(seq);
    }
    fn epoch(&self) -> u64 {
        0
    }
}

const QUESTIONS: [&str; 6] = [
    "How many users are there?",
    "List the 5 most expensive products.",
    "How many users are there per country?",
    "List the email of users who have never placed an order.",
    "What is the total revenue per product category?",
    "How many shipments are not delivered yet?",
];

fn answers(
    e: &Engine,
    rt: &Runtime,
    opts: &Options,
    transport: Option<Rc<dyn Transport>>,
) -> Vec<Outcome> {
    let mut cache = PrefixCache::new();
    cache.set_transport(transport);
    let schema = common::demo_schema();
    QUESTIONS
        .iter()
        .map(|q| {
            // An executor makes the candidates count (its digest: the statement's length, a
            // stand-in for a result that is the same on both sides).
            let mut execute = |sql: &str| Some(sql.len() as u64);
            let hooks = Hooks {
                validate: &mut |_| Ok(()),
                execute: Some(&mut execute),
                progress: &mut |_| true,
                link: None,
            };
            e.run_with(rt, &mut cache, &schema, q, opts, hooks).expect("nl2sql runs")
        })
        .collect()
}

/// Local and remote outcomes of every question under `opts`, the server's budget holding
/// `caches` sequences; returns the server's counters.
fn same_answers(
    name: &str,
    opts: Options,
    caches: usize,
) -> Option<turboinfer::serve::ServerStats> {
    let e = common::engine(name)?;
    let own = common::engine(name)?;
    let rt = Runtime::new(2).unwrap();
    let n_ctx = opts.context_tokens;
    let budget = caches * own.model().kv_cache_bytes(n_ctx);
    let server = InProcess {
        server: RefCell::new(Server::new(own.model(), n_ctx, budget)),
        engine: own,
        rt: Runtime::new(2).unwrap(),
        next: Cell::new(0),
        forgotten: RefCell::new(Vec::new()),
        steps: Cell::new(0),
        widest: Cell::new(0),
    };
    let server = Rc::new(server);
    let local = answers(&e, &rt, &opts, None);
    let remote = answers(&e, &rt, &opts, Some(server.clone() as Rc<dyn Transport>));
    for ((q, l), r) in QUESTIONS.iter().zip(&local).zip(&remote) {
        println!("{name} | {q} | {:?}", l.sql);
        assert_eq!(l.sql, r.sql, "{name}: {q}");
        assert_eq!(l.attempts.len(), r.attempts.len(), "{name}: {q}");
        for (a, b) in l.attempts.iter().zip(&r.attempts) {
            assert_eq!(a.ids, b.ids, "{name}: {q}");
        }
        assert_eq!(l.candidates.weighed.len(), r.candidates.weighed.len(), "{name}: {q}");
    }
    let stats = server.server.borrow().stats();
    println!("{name}: {} steps, widest {}, {stats:?}", server.steps.get(), server.widest.get());
    Some(stats)
}

fn opts() -> Options {
    Options { max_new_tokens: 64, context_tokens: 2048, ..Options::default() }
}

#[test]
fn remote_sequences_answer_the_same_smollm2() {
    same_answers("smollm2-135m", opts(), 8);
}

#[test]
fn remote_sequences_answer_the_same_with_speculation_and_samples() {
    let o = Options { speculation: true, samples: 3, ..opts() };
    let Some(stats) = same_answers("qwen2.5-coder-0.5b", o, 8) else { return };
    // The samples fork the question's sequence: their prefix is copied in the server.
    assert!(stats.copied > 0, "{stats:?}");
}

#[test]
fn remote_sequences_answer_the_same_when_evicted() {
    // Three caches: the call's sequence and three samples do not fit together with it, so the
    // server evicts and recomputes, and the answers still match.
    let o = Options { samples: 3, ..opts() };
    let Some(stats) = same_answers("qwen2.5-coder-0.5b", o, 3) else { return };
    assert!(stats.evictions > 0 && stats.recomputed > 0, "{stats:?}");
}
