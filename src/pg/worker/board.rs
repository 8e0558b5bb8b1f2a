//! The batch worker's board in shared memory: who the worker is and what it serves, its
//! counters, and one slot per calling backend through which a step is posted and answered.
//!
//! A slot moves through these states, under the board's LWLock:
//!
//! ```text
//! FREE --claim (backend)--> IDLE --post--> POSTED --take (worker)--> RUNNING --answer--> DONE
//!   ^                        ^  ^            |                        |                 |
//!   |                        |  +------------+---- cancel (backend) --+--> CANCELLED    |
//!   |                        |                                              | forget    |
//!   |                        +----------------- (worker) ------------------+           |
//!   |                        +---------------------------- read (backend) -------------+
//!   +-- forget (worker) <-- GONE <-- exit (backend)
//! ```
//!
//! A backend cancelled while its step is posted, running or answered-but-unread marks it
//! `Cancelled`; the worker then forgets every sequence of that owner and sets it `Idle`, and the
//! backend posts nothing before that.
//!
//! The request and its answer travel in the backend's DSM segment (made at its first step and
//! kept; a larger one replaces it when a step needs more); the slot carries its handle. Each
//! side wakes the other by setting its latch.

use crate::serve::ServerStats;
use pgrx::pg_sys;
use pgrx::shmem::PGRXSharedMemory;

/// Calling backends served at once (a backend past this many computes in-process).
pub const MAX_CALLERS: usize = 64;
/// Bytes of the worker's last load failure kept for `turboinfer_info()`.
pub const FAILURE_BYTES: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum State {
    Free = 0,
    Idle,
    Posted,
    Running,
    Done,
    Cancelled,
    Gone,
}

/// One calling backend.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Slot {
    pub state: State,
    /// The claim's number: the high 32 bits of the ids of its sequences.
    pub owner: u32,
    pub pid: i32,
    /// The backend's PGPROC number (its latch).
    pub procno: i32,
    /// The posted step's segment.
    pub dsm: pg_sys::dsm_handle,
    /// Sequences in the posted step (the worker keeps a pass within its memory budget).
    pub n_seqs: u32,
    /// Set with `Done` when the worker could not read the step (no answers in the segment).
    pub failed: bool,
    /// The worker's pass count when it last answered this slot (see `server::gather`).
    pub answered: u64,
}

/// What the worker has done since it started.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct Counters {
    /// The server's own counters (passes, requests, tokens, evictions, ...).
    pub server: ServerStats,
    /// Steps of callers answered (a step of one caller may hold several sequences).
    pub steps: u64,
    pub sequences: u64,
    pub resident: u64,
    /// Caches kept from callers gone, as donors of their prefixes (`Server::retire_where`).
    pub retired: u64,
    pub resident_bytes: u64,
}

/// The board (see the module docs).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Board {
    /// The running worker's pid and PGPROC number (0 / -1: none).
    pub worker_pid: i32,
    pub worker_procno: i32,
    /// Bumped by each worker start: a caller that posted under another generation lost its step.
    pub generation: u32,
    /// The worker has its model and takes steps.
    pub ready: bool,
    /// Identity of the model served (a hash of its path and file identity).
    pub model_key: u64,
    pub vocab: u32,
    /// Positions each sequence may hold.
    pub n_ctx: u32,
    pub budget_bytes: u64,
    /// Sequences whose caches fit in the budget at once.
    pub fits: u32,
    pub threads: u32,
    /// Why the worker is not ready (NUL-padded UTF-8).
    pub failure: [u8; FAILURE_BYTES],
    pub counters: Counters,
    pub next_owner: u32,
    pub slots: [Slot; MAX_CALLERS],
}

// SAFETY: plain old data (no pointers), initialised in the shmem startup hook.
unsafe impl PGRXSharedMemory for Board {}

impl Slot {
    /// A slot nobody holds.
    pub const FREE: Slot = Slot {
        state: State::Free,
        owner: 0,
        pid: 0,
        procno: -1,
        dsm: 0,
        n_seqs: 0,
        failed: false,
        answered: u64::MAX,
    };
}

impl Board {
    pub fn new() -> Board {
        Board {
            worker_pid: 0,
            worker_procno: -1,
            generation: 0,
            ready: false,
            model_key: 0,
            vocab: 0,
            n_ctx: 0,
            budget_bytes: 0,
            fits: 0,
            threads: 0,
            failure: [0; FAILURE_BYTES],
            counters: Counters::default(),
            next_owner: 1,
            slots: [Slot::FREE; MAX_CALLERS],
        }
    }

    /// The failure text.
    pub fn failure(&self) -> String {
        let end = self.failure.iter().position(|&b| b == 0).unwrap_or(FAILURE_BYTES);
        String::from_utf8_lossy(&self.failure[..end]).into_owned()
    }

    /// Sets the failure text (cut to fit, at a character boundary).
    pub fn set_failure(&mut self, text: &str) {
        let mut end = text.len().min(FAILURE_BYTES - 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.failure = [0; FAILURE_BYTES];
        self.failure[..end].copy_from_slice(&text.as_bytes()[..end]);
    }
}

impl Default for Board {
    fn default() -> Board {
        Board::new()
    }
}

/// Sets the latch of the process with PGPROC number `procno` (no-op for -1).
pub fn wake(procno: i32) {
    if procno < 0 {
        return;
    }
    // SAFETY: ProcGlobal->allProcs has MaxBackends + auxiliary entries, set up before any
    // backend runs; procno came from a live process's my_procno(); SetLatch on another
    // process's latch is what latches are for.
    unsafe {
        let procs = (*pg_sys::ProcGlobal).allProcs;
        pg_sys::SetLatch(&mut (*procs.add(procno as usize)).procLatch);
    }
}

/// This process's PGPROC number.
pub fn my_procno() -> i32 {
    crate::pg::compat::my_proc_number()
}

/// A 64-bit FNV-1a hash (the model identity in the board: equal strings, equal keys).
pub fn key(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}
