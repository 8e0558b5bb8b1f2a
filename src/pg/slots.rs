//! Inference slots (`turboinfer.max_concurrent`): at most N generations run at once, server-wide;
//! the other callers wait in arrival order and can be cancelled while they wait.
//!
//! Built on PostgreSQL's heavyweight lock manager (no shared memory of our own, so the library
//! need not be preloaded): cluster-wide advisory lock tags (database OID 0, which no
//! `pg_advisory_lock` call can produce, key1 = [`KEY1`]) with key2 = 0 for the queue and 1..=N
//! for the slots.
//!
//! A caller first takes the queue lock in ExclusiveLock mode, waiting for it like for any lock:
//! lock waits are first come first served, and they check interrupts, so pg_cancel_backend,
//! statement_timeout and pg_terminate_backend end a waiter. Holding the queue lock, it tries the
//! slot locks without waiting, every [`POLL_MS`] ms (sleeping on its latch, interrupts checked)
//! until one is free, then releases the queue lock and keeps the slot for the model work.
//!
//! All locks are transaction-level: an ERROR (cancel included) releases them with the
//! (sub)transaction. On success the slot is released as soon as the model work ends, not at the
//! end of the transaction.

use super::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// key1 of every turboinfer lock tag: "TI" + "sl" (0x5449_736C = 1414099820).
pub const KEY1: u32 = 0x5449_736C;
/// key2 of the queue lock (slots are 1..=N).
const QUEUE: u32 = 0;
/// How often the head of the queue tries the slots again.
const POLL_MS: i64 = 10;

/// The lock tag of `key2`: cluster-wide (`locks::advisory` with InvalidOid), shown in pg_locks
/// as classid = KEY1, objid = key2, objsubid = 2.
fn tag(key2: u32) -> pg_sys::LOCKTAG {
    super::locks::advisory(pg_sys::InvalidOid, KEY1, key2)
}

const MODE: pg_sys::LOCKMODE = pg_sys::ExclusiveLock as pg_sys::LOCKMODE;

/// A held slot: released when dropped, except while unwinding from an ERROR (then the
/// (sub)transaction's abort releases it; no lock manager call is made in that state).
pub struct Slot {
    key2: Option<u32>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(k) = self.key2.take() {
            if !std::thread::panicking() {
                let t = tag(k);
                // SAFETY: releases a transaction-level lock this backend acquired in `acquire`.
                unsafe { pg_sys::LockRelease(&t, MODE, false) };
            }
        }
    }
}

/// Waits for a free slot (in arrival order; interrupts raise their ERROR while waiting) and
/// returns it. With `turboinfer.max_concurrent = 0` there is no limit and nothing is locked.
pub fn acquire() -> Slot {
    let n = gucs::max_concurrent();
    if n == 0 {
        return Slot { key2: None };
    }
    let queue = tag(QUEUE);
    // SAFETY: a transaction-level lock on a valid tag; a wait checks interrupts and an ERROR
    // (cancel, deadlock, timeout) leaves the lock manager clean (LockErrorCleanup on abort).
    unsafe { pg_sys::LockAcquire(&queue, MODE, false, false) };
    loop {
        for k in 1..=n {
            if super::locks::try_acquire(&tag(k), MODE, false) {
                // SAFETY: releases the queue lock acquired above.
                unsafe { pg_sys::LockRelease(&queue, MODE, false) };
                return Slot { key2: Some(k) };
            }
        }
        super::latch::wait(POLL_MS);
        pgrx::check_for_interrupts!();
    }
}

/// The slots as `turboinfer_info()` shows them: the setting, the backends holding a slot (by
/// slot) and the backends waiting (the head of the queue, which polls the slots, first; then the
/// others in the order they started waiting).
pub fn info() -> serde_json::Value {
    let q = format!(
        "WITH l AS (SELECT pid, objid, granted, waitstart FROM pg_catalog.pg_locks \
           WHERE locktype = 'advisory' AND database = 0 AND classid = {KEY1} AND objsubid = 2) \
         SELECT json_build_object( \
           'holding', COALESCE((SELECT json_agg(pid ORDER BY objid) FROM l WHERE granted AND objid > 0), '[]'), \
           'waiting', COALESCE((SELECT json_agg(pid ORDER BY granted DESC, waitstart, pid) FROM l WHERE objid = 0), '[]'))::text"
    );
    // The read-only SPI path (`select`): `Spi::get_one` would assign a transaction id, which a
    // hot standby refuses.
    let locks = Spi::connect(|c| c.select(&q, Some(1), &[])?.first().get_one::<String>())
        .ok()
        .flatten()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
    let mut v = serde_json::json!({ "max_concurrent": gucs::max_concurrent() });
    if let (Some(obj), Some(serde_json::Value::Object(l))) = (v.as_object_mut(), locks) {
        obj.extend(l);
    }
    v
}
