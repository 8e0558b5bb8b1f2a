//! The worker's main loop: load the model, publish it on the board, then run every posted step
//! of every caller in one batched pass of a `serve::Server`, until SIGTERM.
//!
//! Nothing here blocks a backend: a backend only waits for the step it posted, and a worker
//! that exits (SIGTERM, an ERROR) marks the board not ready and wakes every waiting caller,
//! which then raises an ERROR; the postmaster starts a new worker after `RESTART`, whose
//! generation number tells callers their sequences are gone.

use super::board::{self, State, MAX_CALLERS};
use super::BOARD;
use crate::nl2sql::model_path::{self, MODELS_DIR};
use crate::nl2sql::Engine;
use crate::pg::backend;
use crate::pg::gucs;
use crate::platform::runtime::Runtime;
use crate::serve::{wire, ServeError, Server};
use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::pg_sys;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long the worker sleeps when nothing wakes it: it also retries a failed model load this
/// often, and notices backends that went away without a goodbye.
const IDLE: Duration = Duration::from_secs(2);

/// Longest wait for the callers of the last pass before the next one (see `gather`): a pass of
/// the 1.5B model takes 50-250 ms, so 2 ms costs at most a few percent.
const GATHER: Duration = Duration::from_millis(2);
/// How often `gather` looks at the board.
const GATHER_POLL_US: i64 = 100;

/// Set once SIGTERM arrived (pgrx's flag is cleared by each read).
static TERMINATING: AtomicBool = AtomicBool::new(false);

/// True once SIGTERM arrived.
fn terminating() -> bool {
    if BackgroundWorker::sigterm_received() {
        TERMINATING.store(true, Ordering::Relaxed);
    }
    TERMINATING.load(Ordering::Relaxed)
}

/// The callers' segments the worker has mapped, by slot: a caller keeps one segment for its
/// life (see `client`), so the worker maps it once instead of at every step (each fresh mapping
/// of a multi-megabyte logits area costs a page fault per page on both sides).
struct Mappings([Option<Mapped>; MAX_CALLERS]);

/// A mapped segment and whose it is: a new handle in the slot (the caller grew its segment) or
/// a new owner (the slot was given to another backend) means this one is stale.
#[derive(Clone, Copy)]
struct Mapped {
    owner: u32,
    handle: pg_sys::dsm_handle,
    seg: *mut pg_sys::dsm_segment,
}

impl Mappings {
    fn new() -> Self {
        Mappings([None; MAX_CALLERS])
    }

    /// The mapping of `handle` for the caller `owner` in `slot`; null when it cannot be mapped
    /// (the caller's segment is gone).
    fn get(
        &mut self,
        slot: usize,
        owner: u32,
        handle: pg_sys::dsm_handle,
    ) -> *mut pg_sys::dsm_segment {
        match self.0[slot] {
            Some(m) if m.owner == owner && m.handle == handle => return m.seg,
            Some(_) => self.unmap(slot),
            None => {}
        }
        // SAFETY: attaching a handle a caller posted; a segment already gone gives null.
        let seg = unsafe { pg_sys::dsm_attach(handle) };
        if !seg.is_null() {
            // SAFETY: keeps the mapping beyond any resource owner, until `unmap`.
            unsafe { pg_sys::dsm_pin_mapping(seg) };
            self.0[slot] = Some(Mapped { owner, handle, seg });
        }
        seg
    }

    /// Drops the mapping of `slot`, if any (the segment goes away with its last mapping).
    fn unmap(&mut self, slot: usize) {
        if let Some(m) = self.0[slot].take() {
            // SAFETY: attached by `get`, detached once (the entry is taken).
            unsafe { pg_sys::dsm_detach(m.seg) };
        }
    }

    /// Drops the mappings of slots now free or given to another backend.
    fn prune(&mut self, slots: &[board::Slot]) {
        for (i, s) in slots.iter().enumerate() {
            if self.0[i].is_some_and(|m| s.state == State::Free || s.owner != m.owner) {
                self.unmap(i);
            }
        }
    }
}

/// A caller's step taken from the board.
struct Taken {
    slot: usize,
    owner: u32,
    seg: *mut pg_sys::dsm_segment,
    /// How many requests it has (0 when the segment could not be read) and where they start
    /// in the pass's list.
    n_reqs: usize,
    first: usize,
    /// Why its segment could not be read.
    error: Option<String>,
}

/// The worker's entry point (named in the registration).
#[pgrx::pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn turboinfer_batch_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // No database, no user: shown in pg_stat_activity (backend_type "turboinfer batch worker").
    BackgroundWorker::connect_worker_to_spi(None, None);
    // SAFETY: registers a plain callback for this process's exit.
    unsafe { pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0)) };
    start();
    let mut served: Option<(Engine, Server, Runtime)> = None;
    let mut maps = Mappings::new();
    loop {
        if served.is_none() {
            served = load();
        }
        if let Some((engine, server, rt)) = served.as_mut() {
            while !terminating() && serve_once(engine, server, rt, &mut maps) {}
        }
        if terminating() || !BackgroundWorker::wait_latch(Some(IDLE)) {
            break;
        }
    }
    // Exit status 1: the postmaster starts a new worker after RESTART (status 0 would unregister
    // it); at server shutdown nothing is restarted.
    // SAFETY: ends this process through PostgreSQL's exit path (the exit callbacks run).
    unsafe { pg_sys::proc_exit(1) };
}

/// A new generation on the board: every step posted to the worker before is lost (its caller
/// is woken and raises an ERROR), and the slots of callers that went away are freed.
fn start() {
    let mut b = BOARD.exclusive();
    b.generation = b.generation.wrapping_add(1);
    // SAFETY: MyProcPid is this process's pid.
    b.worker_pid = unsafe { pg_sys::MyProcPid };
    b.worker_procno = board::my_procno();
    b.ready = false;
    b.counters = board::Counters::default();
    for s in b.slots.iter_mut() {
        match s.state {
            State::Posted | State::Running | State::Done | State::Cancelled => {
                s.state = State::Idle;
                board::wake(s.procno);
            }
            State::Gone => s.state = State::Free,
            State::Free | State::Idle => {}
        }
    }
}

/// At exit: not ready, and every caller waiting is woken (it sees the worker gone).
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    let mut b = BOARD.exclusive();
    b.ready = false;
    b.worker_pid = 0;
    b.worker_procno = -1;
    for s in b.slots.iter().filter(|s| matches!(s.state, State::Posted | State::Running)) {
        board::wake(s.procno);
    }
}

/// Loads the model `turboinfer.model` names and makes the server; publishes it (or why not).
fn load() -> Option<(Engine, Server, Runtime)> {
    let threads = worker_threads();
    let fail = |text: String| {
        pgrx::log!("turboinfer batch worker: {text}");
        BOARD.exclusive().set_failure(&text);
        None
    };
    let setting = gucs::model_setting();
    let path = match model_path::resolve_existing(&setting, Path::new(MODELS_DIR)) {
        Ok(p) => p,
        Err(e) => return fail(format!("cannot load the model: {e}")),
    };
    let identity = match backend::FileId::of(&path) {
        Ok(id) => id.identity(&path),
        Err(e) => return fail(format!("cannot load the model: {}: {e}", path.display())),
    };
    let mut engine = match Engine::load(&path, &identity) {
        Ok(e) => e,
        Err(e) => return fail(format!("cannot load the model: {}: {e}", path.display())),
    };
    engine.set_weight_budget(gucs::weight_budget());
    let rt = match backend::spawn_runtime(threads) {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start {threads} threads: {e:?}")),
    };
    let n_ctx = gucs::context_tokens();
    let budget = gucs::batch_memory_bytes();
    let server = Server::new(engine.model(), n_ctx, budget);
    let mut b = BOARD.exclusive();
    b.model_key = board::key(&identity);
    b.vocab = u32::try_from(engine.model().config().vocab_size).unwrap_or(0);
    b.n_ctx = u32::try_from(server.n_ctx()).unwrap_or(0);
    b.budget_bytes = budget as u64;
    b.fits = u32::try_from(server.fits()).unwrap_or(u32::MAX);
    b.threads = threads as u32;
    b.set_failure("");
    b.ready = true;
    drop(b);
    pgrx::log!(
        "turboinfer batch worker: serving {}: {} sequences of {} positions in {} MB, {threads} threads",
        path.display(),
        server.fits(),
        server.n_ctx(),
        budget >> 20
    );
    Some((engine, server, rt))
}

/// `turboinfer.threads` as the worker reads it (0: one per CPU). The per-role ceiling does not
/// apply: the worker runs for every caller at once.
fn worker_threads() -> usize {
    match usize::try_from(gucs::THREADS.get()) {
        Ok(n) if n > 0 => n,
        _ => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Takes every posted step that fits in the budget, runs them in one pass and answers each;
/// also retires the sequences of callers that cancelled or went away (their caches stay as
/// prefix donors until the budget needs the room). False when there was nothing to do.
fn serve_once(engine: &Engine, server: &mut Server, rt: &Runtime, maps: &mut Mappings) -> bool {
    gather(server.stats().passes);
    let (mut taken, forget_owners) = take(server.fits(), maps);
    for owner in &forget_owners {
        server.retire_where(|id| (id >> 32) as u32 == *owner);
    }
    if taken.is_empty() {
        publish(server, None);
        return !forget_owners.is_empty();
    }
    // Every caller's requests, in one list.
    let mut all = Vec::new();
    for t in taken.iter_mut() {
        // SAFETY: the segment is attached and at least the size the caller wrote.
        let read = unsafe { segment(t.seg) }.map(|b| wire::read_request(b));
        match read {
            Some(Ok(inc)) => {
                for id in inc.forget.iter().filter(|id| (**id >> 32) as u32 == t.owner) {
                    server.forget(*id);
                }
                // A caller names only its own sequences.
                if inc.reqs.iter().any(|r| (r.seq >> 32) as u32 != t.owner) {
                    t.error = Some("a request names another caller's sequence".into());
                } else {
                    t.first = all.len();
                    t.n_reqs = inc.reqs.len();
                    all.extend(inc.reqs);
                }
            }
            Some(Err(e)) => t.error = Some(e.to_string()),
            None => t.error = Some("the caller's segment is gone".into()),
        }
    }
    let replies = server.step(engine.model(), rt, &all, &mut || !terminating());
    if terminating() {
        // Terminated mid-pass: no answers; the exit callback wakes the callers, which see the
        // worker gone.
        return false;
    }
    for t in taken.iter().filter(|t| t.error.is_none()) {
        let answers: Vec<Result<&[f32], ServeError>> = replies[t.first..t.first + t.n_reqs]
            .iter()
            .map(|r| r.as_ref().map(|r| r.logits.as_slice()).map_err(Clone::clone))
            .collect();
        // SAFETY: as above.
        if let Some(buf) = unsafe { segment(t.seg) } {
            let _ = wire::write_replies(buf, &answers);
        }
    }
    publish(server, Some(taken.len()));
    let mut b = BOARD.exclusive();
    for t in &taken {
        let s = &mut b.slots[t.slot];
        if s.owner != t.owner {
            continue;
        }
        match s.state {
            State::Running => {
                // A step whose segment could not be read has no answers in it: the caller is
                // told by `failed`.
                s.failed = t.error.is_some();
                s.state = State::Done;
                s.answered = server.stats().passes;
                board::wake(s.procno);
            }
            State::Cancelled => {
                let owner = s.owner;
                s.state = State::Idle;
                drop(b);
                server.retire_where(|id| (id >> 32) as u32 == owner);
                b = BOARD.exclusive();
            }
            _ => {}
        }
    }
    true
}

/// Waits up to [`GATHER`] for the callers the last pass answered to post their next step, so
/// that they share the next pass: woken together, they post within a millisecond of each other,
/// and a pass started on the first of them would make the others wait a whole pass (the batch
/// would split into groups taking turns). A caller busy with its own work (validation, its next
/// question) costs the wait once: after that pass it is no longer among the last answered.
fn gather(last_pass: u64) {
    let deadline = std::time::Instant::now() + GATHER;
    loop {
        let waiting_for = {
            let b = BOARD.share();
            b.slots
                .iter()
                .filter(|s| s.answered == last_pass && matches!(s.state, State::Done | State::Idle))
                .count()
        };
        if waiting_for == 0 || std::time::Instant::now() >= deadline || terminating() {
            return;
        }
        // SAFETY: a plain sleep of this process.
        unsafe { pg_sys::pg_usleep(GATHER_POLL_US) };
    }
}

/// The bytes of an attached segment (`None` for a null one).
unsafe fn segment<'a>(seg: *mut pg_sys::dsm_segment) -> Option<&'a mut [u8]> {
    if seg.is_null() {
        return None;
    }
    let addr = pg_sys::dsm_segment_address(seg) as *mut u8;
    let len = pg_sys::dsm_segment_map_length(seg);
    Some(std::slice::from_raw_parts_mut(addr, len))
}

/// Marks the posted steps that fit in `fits` sequences as running and maps their segments
/// (`maps`, which also drops the segments of callers gone); returns them with the owners whose
/// sequences must be forgotten (cancelled, or gone).
fn take(fits: usize, maps: &mut Mappings) -> (Vec<Taken>, Vec<u32>) {
    let mut taken = Vec::new();
    let mut forget = Vec::new();
    let mut handles = Vec::new();
    let slots;
    {
        let mut b = BOARD.exclusive();
        let mut seqs = 0usize;
        for i in 0..MAX_CALLERS {
            let s = &mut b.slots[i];
            match s.state {
                State::Posted => {
                    let n = s.n_seqs as usize;
                    // At least one step per pass; then as many as the budget holds.
                    if !handles.is_empty() && seqs + n > fits {
                        continue;
                    }
                    seqs += n;
                    s.state = State::Running;
                    handles.push((i, s.owner, s.dsm));
                }
                State::Cancelled => {
                    forget.push(s.owner);
                    s.state = State::Idle;
                }
                State::Gone => {
                    forget.push(s.owner);
                    *s = board::Slot::FREE;
                }
                _ => {}
            }
        }
        slots = b.slots;
    }
    // Outside the board's lock: detaching takes PostgreSQL's own DSM lock.
    maps.prune(&slots);
    for (slot, owner, dsm) in handles {
        // A segment that cannot be mapped is a failed read.
        let seg = maps.get(slot, owner, dsm);
        taken.push(Taken { slot, owner, seg, n_reqs: 0, first: 0, error: None });
    }
    (taken, forget)
}

/// Copies the server's counters to the board (`batch`: callers in the pass just run).
fn publish(server: &Server, batch: Option<usize>) {
    let st = server.stats();
    let (seqs, resident) = server.sequences();
    let mut b = BOARD.exclusive();
    let c = &mut b.counters;
    c.server = st;
    c.steps += batch.unwrap_or(0) as u64;
    c.sequences = seqs as u64;
    c.resident = resident as u64;
    c.retired = server.retired() as u64;
    c.resident_bytes = server.resident_bytes() as u64;
}
