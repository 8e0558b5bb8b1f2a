//! Helpers over PostgreSQL's node trees shared by validation and its facts.

use pgrx::pg_sys;
use std::ffi::c_void;

/// The pointers of a `List` of nodes (empty for NIL).
pub(super) unsafe fn list_ptrs(l: *mut pg_sys::List) -> Vec<*mut c_void> {
    if l.is_null() {
        return Vec::new();
    }
    let n = usize::try_from((*l).length).unwrap_or(0);
    (0..n).map(|i| (*(*l).elements.add(i)).ptr_value).collect()
}
