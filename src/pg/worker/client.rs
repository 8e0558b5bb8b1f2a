//! A backend's side of the batch worker: the `Transport` its nl2sql calls use when the worker
//! serves their model, one slot on the board for the backend's life.
//!
//! A step: write the requests into this backend's DSM segment, post its handle in the slot, wake
//! the worker, wait on this backend's latch (wait event `Extension` in `pg_stat_activity`) until
//! the slot says done, read the answers. While waiting, a cancel, `statement_timeout` or
//! termination marks the slot cancelled (the worker forgets this backend's sequences at its next
//! step) and raises its ERROR; a worker that exited or restarted fails the step with an ERROR.
//!
//! The segment is made at the first step and kept for the backend's life (grown when a step needs
//! more; the worker keeps it mapped too): a fresh segment per step cost a page fault per page of
//! its logits area on both sides, every step (a draft check's rows are megabytes).

use super::board::{self, State};
use super::BOARD;
use crate::nl2sql::seq::Transport;
use crate::nl2sql::{Engine, Nl2SqlError};
use crate::pg::latch;
use crate::serve::{wire, Request, SeqId, ServeError};
use pgrx::pg_sys;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How often a waiting backend looks at the board even if nobody wakes it (a worker killed
/// without its exit callback cannot wake anyone).
const POLL_MS: i64 = 200;

/// This backend's claim on the board.
pub struct Client {
    slot: usize,
    owner: u32,
    /// The worker generation this client's sequences live in.
    generation: u32,
    vocab: usize,
    forgotten: RefCell<Vec<SeqId>>,
    epoch: Cell<u64>,
    /// Set once the worker this client talked to is gone: every later step fails at once.
    dead: Cell<bool>,
}

thread_local! {
    /// The backend's client (made at its first call the worker can serve).
    static CLIENT: RefCell<Option<Rc<Client>>> = const { RefCell::new(None) };
    /// The slot this backend claimed and its owner number (see `claim`).
    static SLOT: Cell<Option<(usize, u32)>> = const { Cell::new(None) };
    /// The last sequence number this backend gave (ids stay unique across clients).
    static NEXT: Cell<u32> = const { Cell::new(0) };
    /// This backend's segment (null before the first step), mapped for the backend's life.
    static SEGMENT: Cell<*mut pg_sys::dsm_segment> = const { Cell::new(std::ptr::null_mut()) };
    /// Steps this backend sent to the worker and the milliseconds it waited for them (the
    /// worker's passes included), since it started: `turboinfer_stat` takes a call's share.
    static WAITED: Cell<(u64, f64)> = const { Cell::new((0, 0.0)) };
}

/// Steps this backend sent to the batch worker, and milliseconds spent waiting for their
/// answers, since the backend started (see `track`).
pub fn waited() -> (u64, f64) {
    WAITED.get()
}

/// Segments are sized in these steps, so that a caller whose steps vary by a few rows does not
/// make a new one each time.
const SEGMENT_GRAIN: usize = 1 << 20;

/// This backend's segment, at least `size` bytes: the one it has, or a larger new one (the old
/// one goes away once the worker maps the new one and drops it).
fn segment(size: usize) -> *mut pg_sys::dsm_segment {
    let seg = SEGMENT.get();
    // SAFETY: a segment made below, mapped until the backend exits.
    if !seg.is_null() && unsafe { pg_sys::dsm_segment_map_length(seg) } >= size {
        return seg;
    }
    let len = size.div_ceil(SEGMENT_GRAIN) * SEGMENT_GRAIN;
    // SAFETY: a new segment (ERROR when there is no room: nothing is changed then); its mapping
    // is pinned to the backend, not to this transaction.
    let new = unsafe {
        let new = pg_sys::dsm_create(len, 0);
        pg_sys::dsm_pin_mapping(new);
        new
    };
    if !seg.is_null() {
        // SAFETY: the old segment, detached once (the slot is idle: the worker is not using it).
        unsafe { pg_sys::dsm_detach(seg) };
    }
    SEGMENT.set(new);
    new
}

/// The transport for a call of `engine` needing `capacity` positions, when the worker serves it
/// (ready, the same model file, room for that context, no sparse FFN); `None`: compute here.
pub fn transport(engine: &Engine, capacity: usize) -> Option<Rc<dyn Transport>> {
    if !super::enabled() || engine.model().ffn_hook().is_some() {
        return None;
    }
    let (ready, key, n_ctx, generation, vocab) = {
        let b = BOARD.share();
        (b.ready, b.model_key, b.n_ctx as usize, b.generation, b.vocab as usize)
    };
    if !ready
        || key != board::key(engine.identity())
        || capacity > n_ctx
        || vocab != engine.model().config().vocab_size
    {
        return None;
    }
    CLIENT.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(cl) = c.as_ref().filter(|cl| cl.generation == generation && !cl.dead.get()) {
            return Some(cl.clone() as Rc<dyn Transport>);
        }
        let (slot, owner) = claim()?;
        let cl = Rc::new(Client {
            slot,
            owner,
            generation,
            vocab,
            forgotten: RefCell::new(Vec::new()),
            epoch: Cell::new(0),
            dead: Cell::new(false),
        });
        *c = Some(cl.clone());
        Some(cl as Rc<dyn Transport>)
    })
}

/// This backend's slot and owner number, claimed at its first call the worker serves and kept
/// for its life (the exit callback gives the slot back; a new worker generation keeps the
/// slots of live backends). `None`: every slot is taken.
fn claim() -> Option<(usize, u32)> {
    if let Some(c) = SLOT.get() {
        return Some(c);
    }
    let mut b = BOARD.exclusive();
    let i = b.slots.iter().position(|s| s.state == State::Free)?;
    let owner = b.next_owner;
    b.next_owner = b.next_owner.wrapping_add(1).max(1);
    // SAFETY: MyProcPid is this process's pid.
    let pid = unsafe { pg_sys::MyProcPid };
    b.slots[i] = board::Slot {
        state: State::Idle,
        owner,
        pid,
        procno: board::my_procno(),
        ..board::Slot::FREE
    };
    drop(b);
    // SAFETY: registers a plain callback for this process's exit.
    unsafe { pg_sys::before_shmem_exit(Some(on_exit), pg_sys::Datum::from(0)) };
    SLOT.set(Some((i, owner)));
    Some((i, owner))
}

/// Waits until the slot is idle (the worker has taken in a cancelled step: it forgets the
/// sequences before the next step of this backend is read). False when the worker is gone.
fn wait_idle(slot: usize) -> bool {
    loop {
        let (state, ready, worker) = {
            let b = BOARD.share();
            (b.slots[slot].state, b.ready, b.worker_procno)
        };
        match state {
            State::Idle => return true,
            _ if !ready => return false,
            _ => board::wake(worker),
        }
        latch::wait(POLL_MS);
        pgrx::check_for_interrupts!();
    }
}

/// At backend exit: the slot goes to the worker to forget its sequences, then free.
unsafe extern "C-unwind" fn on_exit(_code: i32, _arg: pg_sys::Datum) {
    if let Some((slot, _)) = SLOT.get() {
        let mut b = BOARD.exclusive();
        let ready = b.ready;
        let s = &mut b.slots[slot];
        if s.state != State::Free && s.pid == pg_sys::MyProcPid {
            // A ready worker forgets the sequences, then frees the slot; a new worker frees it.
            s.state = if ready { State::Gone } else { State::Free };
        }
    }
}

/// True when a cancel, timeout or termination is pending (its ERROR comes from
/// `check_for_interrupts!`).
fn stop_pending() -> bool {
    // SAFETY: reads of flags PostgreSQL's signal handlers set.
    unsafe {
        pg_sys::InterruptPending != 0
            && (pg_sys::QueryCancelPending != 0 || pg_sys::ProcDiePending != 0)
    }
}

/// An attached segment's bytes.
unsafe fn bytes<'a>(seg: *mut pg_sys::dsm_segment) -> &'a mut [u8] {
    let addr = pg_sys::dsm_segment_address(seg) as *mut u8;
    std::slice::from_raw_parts_mut(addr, pg_sys::dsm_segment_map_length(seg))
}

impl Client {
    fn gone(&self, why: &str) -> Nl2SqlError {
        self.dead.set(true);
        self.epoch.set(self.epoch.get() + 1);
        Nl2SqlError::Transport(why.to_string())
    }

    /// One step: post it and wait for its answer (see the module docs).
    fn step_once(
        &self,
        reqs: &[Request],
    ) -> Result<Vec<Result<Vec<f32>, ServeError>>, Nl2SqlError> {
        if self.dead.get() {
            return Err(self.gone("the batch worker restarted; run the statement again"));
        }
        if !wait_idle(self.slot) {
            return Err(self
                .gone("the batch worker exited; it is being restarted, run the statement again"));
        }
        let forget: Vec<SeqId> = self.forgotten.borrow_mut().drain(..).collect();
        let seg = segment(wire::size(reqs, &forget, self.vocab));
        // SAFETY: the segment is mapped here, at least the size the step needs.
        let buf = unsafe { bytes(seg) };
        if let Err(e) = wire::write_request(buf, reqs, &forget, self.vocab) {
            return Err(Nl2SqlError::Transport(e.to_string()));
        }
        let worker = {
            let mut b = BOARD.exclusive();
            if !b.ready || b.generation != self.generation {
                drop(b);
                return Err(self.gone("the batch worker restarted; run the statement again"));
            }
            let s = &mut b.slots[self.slot];
            s.dsm = unsafe { pg_sys::dsm_segment_handle(seg) };
            s.n_seqs = reqs.len() as u32;
            s.failed = false;
            s.state = State::Posted;
            b.worker_procno
        };
        board::wake(worker);
        loop {
            latch::wait(POLL_MS);
            let (state, failed, ready, generation, pid) = {
                let b = BOARD.share();
                let s = &b.slots[self.slot];
                (s.state, s.failed, b.ready, b.generation, b.worker_pid)
            };
            if state == State::Done {
                BOARD.exclusive().slots[self.slot].state = State::Idle;
                let out = match failed {
                    true => Err(Nl2SqlError::Transport(
                        "the batch worker could not read the step".into(),
                    )),
                    false => {
                        wire::read_replies(buf).map_err(|e| Nl2SqlError::Transport(e.to_string()))
                    }
                };
                return out;
            }
            // SAFETY: kill with signal 0 only checks that the process exists.
            let alive = pid != 0 && unsafe { libc::kill(pid, 0) } == 0;
            if !ready
                || generation != self.generation
                || !alive
                || state != State::Posted && state != State::Running
            {
                return Err(self.gone("the batch worker exited during this call; it is being restarted, run the statement again"));
            }
            if stop_pending() {
                {
                    let mut b = BOARD.exclusive();
                    let s = &mut b.slots[self.slot];
                    // Answered or not, this backend drops the step: the worker forgets its
                    // sequences (their positions are unknown here now) before its next step.
                    if matches!(s.state, State::Posted | State::Running | State::Done) {
                        s.state = State::Cancelled;
                    }
                }
                // The segment stays: the next step waits until the worker is done with it
                // (`wait_idle`).
                self.epoch.set(self.epoch.get() + 1);
                board::wake(worker);
                pgrx::check_for_interrupts!();
                return Err(Nl2SqlError::Cancelled);
            }
        }
    }
}

impl Transport for Client {
    fn step(&self, reqs: &[Request]) -> Result<Vec<Result<Vec<f32>, ServeError>>, Nl2SqlError> {
        // Counted on the way out, an ERROR (cancel) included.
        struct Timed(std::time::Instant);
        impl Drop for Timed {
            fn drop(&mut self) {
                let (steps, ms) = WAITED.get();
                WAITED.set((steps + 1, ms + crate::platform::clock::ms_since(self.0)));
            }
        }
        let _timed = Timed(std::time::Instant::now());
        self.step_once(reqs)
    }

    fn new_seq(&self) -> SeqId {
        let n = NEXT.get().wrapping_add(1);
        NEXT.set(n);
        (self.owner as u64) << 32 | n as u64
    }

    fn forget(&self, seq: SeqId) {
        self.forgotten.borrow_mut().push(seq);
    }

    fn epoch(&self) -> u64 {
        self.epoch.get()
    }
}
