//! Background preparation of schema prefixes (issue #63): after DDL that changes what nl2sql()
//! shows, a dynamic background worker does what `turboinfer_prewarm()` does, so that the first
//! question after a migration finds the prefix's cache file instead of paying its prefill.
//!
//! - [`request`]: the DDL side: the event trigger `turboinfer_schema_changed` (and the end of the
//!   extension's install and upgrade scripts) ask for a preparation; never an error, never a wait.
//! - [`worker`]: the worker: waits until the schema is quiet, prepares, logs, exits.
//!
//! One worker per database at a time, coordinated through the lock manager (no shared memory of
//! our own, so the library need not be preloaded), with advisory lock tags of the database
//! (`prepare_locks`):
//!
//! - `REQUESTS`: every transaction that asked holds it in ShareLock until it ends (commit or
//!   rollback); the worker reads the catalog only once it can take it in ExclusiveLock (probed
//!   without waiting), i.e. once every change it was asked for is committed or gone.
//! - `WAITING`: held (session lock) by the worker while it waits. A request that finds it taken
//!   starts nothing: that worker waits for the requester through `REQUESTS`. The worker lets
//!   it go before its last probe of `REQUESTS`, so a request either is seen by that probe or
//!   finds `WAITING` free and starts the next worker.
//! - `PREPARING`: held (session lock) while preparing: a worker started meanwhile prepares
//!   after it, with the newer catalog (one model in memory per database at a time).

mod request;
mod worker;
