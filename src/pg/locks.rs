//! The extension's advisory locks: the lock manager as shared state that needs no shared memory
//! of our own (the library need not be preloaded). Inference slots (`slots`) and the background
//! preparation (`prepare`) each own a `key1`; tags use the two-int4-key form, shown in `pg_locks`
//! as `locktype = 'advisory'`, `classid = key1`, `objid = key2`, `objsubid = 2`.

use pgrx::pg_sys;

/// The lock tag SET_LOCKTAG_ADVISORY(tag, db, key1, key2, 2) of lock.h makes; `db` InvalidOid
/// (which no `pg_advisory_lock` call can produce) spans every database of the cluster.
pub fn advisory(db: pg_sys::Oid, key1: u32, key2: u32) -> pg_sys::LOCKTAG {
    pg_sys::LOCKTAG {
        locktag_field1: db.to_u32(),
        locktag_field2: key1,
        locktag_field3: key2,
        locktag_field4: 2,
        locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
        locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
    }
}

/// Takes `tag` in `mode` without waiting: `session` locks are held until released (or the
/// process exits), others until the end of the (sub)transaction. Whether it was taken.
pub fn try_acquire(tag: &pg_sys::LOCKTAG, mode: pg_sys::LOCKMODE, session: bool) -> bool {
    // SAFETY: a valid tag on the backend thread; without waiting, so no deadlock check and no
    // interrupt can leave the lock manager half-done.
    let r = unsafe { pg_sys::LockAcquire(tag, mode, session, true) };
    r != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL
}

/// Releases a lock taken with [`try_acquire`] (or `LockAcquire`) in the same mode and scope.
pub fn release(tag: &pg_sys::LOCKTAG, mode: pg_sys::LOCKMODE, session: bool) {
    // SAFETY: releases a lock this process holds (a lock not held only gives a WARNING).
    unsafe { pg_sys::LockRelease(tag, mode, session) };
}
