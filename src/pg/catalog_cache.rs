//! The backend's copy of the schemas it read (`catalog`), kept until the catalog changes.
//!
//! Reading the catalog is the one step of nl2sql() that grows with the database, not with the
//! question: ~0.3 s for 5,000 tables (columns, comments and keys of every table the role may
//! see), on every call. The result depends only on the catalog, the role and the
//! schemas asked for, so it is kept here and reused while nothing it depends on changed.
//!
//! "Changed" is PostgreSQL's own cache invalidation: the callbacks registered below run whenever
//! this backend processes an invalidation message for one of the watched system caches (a commit
//! in any backend, this backend's own command, a rollback, WAL replay on a standby), and each
//! call only bumps [`GENERATION`]. An entry is used only while the generation it was read at is
//! still current, so any change (CREATE/ALTER/DROP, GRANT/REVOKE, role membership, ANALYZE)
//! anywhere in the database or cluster costs one re-read. Comments have no system cache: the
//! extension's event trigger on `COMMENT` sends a relation cache invalidation for the commented
//! relation (`turboinfer_catalog_changed`), which every backend's relcache callback sees.
//!
//! Not kept: reads in a REPEATABLE READ or SERIALIZABLE transaction (they see an older catalog
//! than invalidations describe), and nothing when `turboinfer.schema_cache` is off.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pgrx::pg_sys;

use crate::nl2sql::SchemaInfo;

/// Invalidation messages seen for a watched cache since the backend started.
static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The last stamp given to a read (`SchemaInfo::stamp`: one per read, never reused).
static STAMP: AtomicU64 = AtomicU64::new(0);
/// Whether the callbacks are registered (once per backend, on first use).
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Entries kept: a role switching between a few search paths (or `nl2sql(q, schemas)` lists)
/// keeps each; beyond that the least recently used goes. Each holds its schema's text (~4 MB for
/// 5,000 tables with comments).
const ENTRIES: usize = 4;

/// The system caches whose changes can change what `catalog::read_schema_cached` returns.
const WATCHED: [pg_sys::SysCacheIdentifier::Type; 8] = [
    pg_sys::SysCacheIdentifier::RELOID, // relations, their ACLs and row security flags
    pg_sys::SysCacheIdentifier::ATTNUM, // columns, their types and column grants
    pg_sys::SysCacheIdentifier::NAMESPACEOID, // schemas and their USAGE grants
    pg_sys::SysCacheIdentifier::CONSTROID, // primary and foreign keys
    pg_sys::SysCacheIdentifier::TYPEOID, // type names shown for columns
    pg_sys::SysCacheIdentifier::AUTHMEMROLEMEM, // role membership: inherited privileges
    pg_sys::SysCacheIdentifier::AUTHOID, // role attributes (superuser, BYPASSRLS)
    pg_sys::SysCacheIdentifier::STATRELATTINH, // ANALYZE: the values and counts shown
];

/// What a cached read is keyed by: everything besides the catalog it depends on.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Key {
    /// The role whose privileges decided what is visible (`GetUserId`: SET ROLE and SECURITY
    /// DEFINER functions change it).
    pub user: u32,
    /// The schemas read, as resolved (the search path's, or the caller's list).
    pub schemas: Vec<String>,
    /// Whether the list was given by the caller (no fallback to every readable schema).
    pub explicit: bool,
    /// `row_security`: whether `pg_stats` hides the values of tables with row security.
    pub row_security: bool,
}

/// One cached read (with the column statistics read for it so far: `catalog::CatalogStats`).
struct Entry {
    key: Key,
    generation: u64,
    schema: Rc<SchemaInfo>,
}

thread_local! {
    /// Most recently used first.
    static CACHE: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// How a read was served (the explain report's `schema_cache`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// From the cache: nothing watched changed since it was read.
    Hit,
    /// Read from the catalog and kept.
    Miss,
    /// Read from the catalog and not kept (setting off, or a transaction snapshot).
    Off,
}

impl Use {
    pub fn name(self) -> &'static str {
        match self {
            Use::Hit => "hit",
            Use::Miss => "miss",
            Use::Off => "off",
        }
    }
}

/// The schema for `key`: the cached one if nothing watched changed since it was read, else
/// `read()`'s result, kept when `enabled` and the transaction reads the current catalog.
pub(super) fn get_or_read(
    key: Key,
    enabled: bool,
    read: impl FnOnce() -> SchemaInfo,
) -> (Rc<SchemaInfo>, Use) {
    // SAFETY: a plain read of the transaction's isolation level, on the backend thread.
    let snapshot_xact = unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32;
    // Each read stamped: what the engine derives from its tables is kept by stamp.
    let read = || {
        let mut schema = read();
        schema.stamp = Some(STAMP.fetch_add(1, Ordering::Relaxed) + 1);
        schema
    };
    if !enabled || snapshot_xact {
        return (Rc::new(read()), Use::Off);
    }
    register();
    // Taken before reading: a change committed while the catalog is read bumps it after, so the
    // entry is never newer than its generation says.
    let generation = GENERATION.load(Ordering::Relaxed);
    let hit = CACHE.with_borrow_mut(|entries| {
        entries.retain(|e| e.generation == generation);
        let i = entries.iter().position(|e| e.key == key)?;
        let e = entries.remove(i);
        let schema = Rc::clone(&e.schema);
        entries.insert(0, e);
        Some(schema)
    });
    if let Some(schema) = hit {
        return (schema, Use::Hit);
    }
    let schema = Rc::new(read());
    CACHE.with_borrow_mut(|entries| {
        entries.insert(0, Entry { key, generation, schema: Rc::clone(&schema) });
        entries.truncate(ENTRIES);
    });
    (schema, Use::Miss)
}

/// Forgets every cached schema (`turboinfer_cache_clear()`).
pub(super) fn clear() {
    CACHE.with_borrow_mut(Vec::clear);
}

/// Registers the invalidation callbacks, once per backend (they cannot be unregistered; they
/// only bump a counter).
fn register() {
    if REGISTERED.swap(true, Ordering::Relaxed) {
        return;
    }
    for id in WATCHED {
        // SAFETY: registration only appends to the backend's callback list (at most 64 in all;
        // these are 8, once per backend).
        unsafe {
            pg_sys::CacheRegisterSyscacheCallback(
                id as i32,
                Some(syscache_changed),
                pg_sys::Datum::from(0),
            )
        };
    }
    // Relation cache invalidations: row security policies, and comments (the event trigger).
    // SAFETY: as above.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relcache_changed), pg_sys::Datum::from(0))
    };
}

/// A watched system cache changed. Runs inside invalidation processing: only bumps the counter
/// (no allocation, no error).
unsafe extern "C-unwind" fn syscache_changed(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// A relation's cache entry was invalidated (or all of them).
unsafe extern "C-unwind" fn relcache_changed(_arg: pg_sys::Datum, _relid: pg_sys::Oid) {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// `turboinfer_catalog_changed(classid, objid)`: for the extension's `COMMENT` event trigger.
/// Not callable by PUBLIC (only through the trigger). When the object is a relation (or a
/// column of one), queues a relation cache invalidation for
/// it, sent to every backend at commit, so that their cached schemas are read again with the new
/// comment. Does nothing for other objects; changes no data.
#[pgrx::pg_extern(strict, volatile, parallel_unsafe)]
fn turboinfer_catalog_changed(classid: pg_sys::Oid, objid: pg_sys::Oid) {
    if classid != pg_sys::RelationRelationId {
        return;
    }
    // SAFETY: a syscache probe on the backend thread; only an existing relation is invalidated
    // (CacheInvalidateRelcacheByRelid raises an ERROR for a missing one).
    let exists = unsafe {
        pg_sys::SearchSysCacheExists(
            pg_sys::SysCacheIdentifier::RELOID as i32,
            pg_sys::Datum::from(objid),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
            pg_sys::Datum::from(0),
        )
    };
    if exists {
        // SAFETY: the relation exists (checked just above, same transaction and command).
        unsafe { pg_sys::CacheInvalidateRelcacheByRelid(objid) };
    }
}

pgrx::extension_sql!(
    r#"
-- Comments have no system cache: this trigger tells every backend's schema cache
-- (src/pg/catalog_cache.rs) that a relation's or column's comment changed. It fires for every
-- role that runs COMMENT, so it runs as the extension's owner (SECURITY DEFINER, fixed
-- search_path) and calls the one function it needs, which nobody else may call: revoking
-- EXECUTE on this extension's functions from PUBLIC can never make a COMMENT fail.
CREATE FUNCTION turboinfer_comment_changed() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
BEGIN
    FOR c IN SELECT classid, objid FROM pg_catalog.pg_event_trigger_ddl_commands() LOOP
        PERFORM @extschema@.turboinfer_catalog_changed(c.classid, c.objid);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER turboinfer_comment_changed ON ddl_command_end
    WHEN TAG IN ('COMMENT') EXECUTE FUNCTION turboinfer_comment_changed();
REVOKE EXECUTE ON FUNCTION turboinfer_comment_changed() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION turboinfer_catalog_changed(pg_catalog.oid, pg_catalog.oid) FROM PUBLIC;
"#,
    name = "turboinfer_comment_trigger",
    requires = [turboinfer_catalog_changed],
);
