//! The background preparation's advisory locks (`prepare`, where the protocol is described): their
//! keys and tags, and what `turboinfer_info()` shows of them. Apart from `prepare` so that
//! `turboinfer_info()` need not depend on the worker.

use super::gucs;
use super::locks;
use pgrx::pg_sys;
use pgrx::prelude::*;

/// key1 of the preparation's lock tags: "TI" + "pr" (0x5449_7072 = 1414099058), next to the
/// inference slots' "TI" + "sl" (`slots::KEY1`).
pub const KEY1: u32 = 0x5449_7072;
/// key2 of the lock the waiting worker holds.
pub const WAITING: u32 = 1;
/// key2 of the lock every requesting transaction holds in ShareLock.
pub const REQUESTS: u32 = 2;
/// key2 of the lock the preparing worker holds.
pub const PREPARING: u32 = 3;

/// The lock tag of `key2` in the current database.
pub fn tag(key2: u32) -> pg_sys::LOCKTAG {
    // SAFETY: MyDatabaseId is set once the process is connected to a database.
    locks::advisory(unsafe { pg_sys::MyDatabaseId }, KEY1, key2)
}

/// The preparation as `turboinfer_info()` shows it: the settings (as this session sees them) and,
/// in this database, the worker waiting, the worker preparing and the open transactions it
/// waits for (pids, from `pg_locks`).
pub fn info() -> serde_json::Value {
    let q = format!(
        "WITH l AS (SELECT pid, objid, mode FROM pg_catalog.pg_locks \
           WHERE locktype = 'advisory' AND granted AND classid = {KEY1} AND objsubid = 2 \
             AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())) \
         SELECT json_build_object( \
           'waiting', (SELECT json_agg(pid) FROM l WHERE objid = {WAITING} AND mode = 'ExclusiveLock'), \
           'preparing', (SELECT json_agg(pid) FROM l WHERE objid = {PREPARING}), \
           'requesters', (SELECT json_agg(pid) FROM l WHERE objid = {REQUESTS} AND mode = 'ShareLock'))::text"
    );
    // The read-only SPI path (`select`): a hot standby refuses a transaction id.
    let locks = Spi::connect(|c| c.select(&q, Some(1), &[])?.first().get_one::<String>())
        .ok()
        .flatten()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
    let mut v = serde_json::json!({
        "enabled": gucs::BACKGROUND_PREPARE.get(),
        "delay_ms": gucs::PREPARE_DELAY.get(),
    });
    if let (Some(obj), Some(serde_json::Value::Object(l))) = (v.as_object_mut(), locks) {
        obj.extend(l);
    }
    v
}
