//! Validation of generated SQL with PostgreSQL's own parser (`raw_parser`): exactly one
//! statement, a query (SELECT / WITH ... SELECT / VALUES / TABLE), no `INTO`, no row locking
//! (`FOR UPDATE/SHARE`), no data-modifying statement in a `WITH`. Nothing is analysed or run.

use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::PgTryBuilder;
use std::ffi::{c_void, CString};

/// `Ok` when `sql` is one plain query; otherwise the reason (the parser's message for syntax
/// errors).
pub fn check_query(sql: &str) -> Result<(), String> {
    let Ok(c) = CString::new(sql) else {
        return Err("the statement contains a NUL character".into());
    };
    // The raw parser only allocates memory: catching its ERROR without a subtransaction is safe
    // (no locks, buffers or other resources are held at that point).
    PgTryBuilder::new(|| unsafe {
        let list = pg_sys::raw_parser(c.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        inspect(list)
    })
    .catch_others(|e| match e {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => Err(r.message().to_string()),
        other => other.rethrow(),
    })
    .execute()
}

/// The pointers of a `List` of nodes (empty for NIL).
unsafe fn list_ptrs(l: *mut pg_sys::List) -> Vec<*mut c_void> {
    if l.is_null() {
        return Vec::new();
    }
    let n = usize::try_from((*l).length).unwrap_or(0);
    (0..n).map(|i| (*(*l).elements.add(i)).ptr_value).collect()
}

/// Checks the parse tree list.
unsafe fn inspect(list: *mut pg_sys::List) -> Result<(), String> {
    let stmts = list_ptrs(list);
    match stmts.len() {
        0 => return Err("the answer contains no SQL statement".into()),
        1 => {}
        n => return Err(format!("expected exactly one statement, found {n}")),
    }
    let raw = stmts[0] as *mut pg_sys::RawStmt;
    let node = (*raw).stmt;
    if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_SelectStmt {
        return Err(format!("only a query (SELECT, WITH ... SELECT, VALUES, TABLE) is allowed, not {}", statement_kind(node)));
    }
    check_select(node as *mut pg_sys::SelectStmt)
}

/// A readable name for a top-level statement node.
unsafe fn statement_kind(node: *mut pg_sys::Node) -> &'static str {
    if node.is_null() {
        return "an empty statement";
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_InsertStmt => "INSERT",
        pg_sys::NodeTag::T_UpdateStmt => "UPDATE",
        pg_sys::NodeTag::T_DeleteStmt => "DELETE",
        pg_sys::NodeTag::T_MergeStmt => "MERGE",
        pg_sys::NodeTag::T_ExplainStmt => "EXPLAIN",
        pg_sys::NodeTag::T_TransactionStmt => "a transaction command",
        pg_sys::NodeTag::T_VariableSetStmt => "SET",
        pg_sys::NodeTag::T_CopyStmt => "COPY",
        _ => "a utility or DDL statement",
    }
}

/// What the tree walk found wrong (the first problem wins).
struct Walk {
    error: Option<String>,
}

/// Checks every node of a raw parse tree below (and including) `s`: each SELECT anywhere (set
/// operation arms, WITH queries, FROM sub-selects, sub-links in any expression) must have no
/// INTO and no locking clause, and no data-modifying statement may appear anywhere (e.g. in a
/// WITH). The walk is PostgreSQL's own `raw_expression_tree_walker`, which knows every node a
/// raw SELECT can contain.
unsafe fn check_select(s: *mut pg_sys::SelectStmt) -> Result<(), String> {
    let mut w = Walk { error: None };
    walk(s as *mut pg_sys::Node, &mut w as *mut Walk as *mut c_void);
    w.error.map_or(Ok(()), Err)
}

/// Tree walker callback: records the first forbidden node and stops (returns true) there.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let w = &mut *(ctx as *mut Walk);
    let problem = match (*node).type_ {
        pg_sys::NodeTag::T_SelectStmt => {
            let s = node as *mut pg_sys::SelectStmt;
            if !(*s).intoClause.is_null() {
                Some("SELECT ... INTO creates a table; only a plain query is allowed".to_string())
            } else if !(*s).lockingClause.is_null() {
                Some("FOR UPDATE/SHARE locks rows; only a plain query is allowed".to_string())
            } else {
                None
            }
        }
        pg_sys::NodeTag::T_InsertStmt | pg_sys::NodeTag::T_UpdateStmt | pg_sys::NodeTag::T_DeleteStmt | pg_sys::NodeTag::T_MergeStmt => {
            Some(format!("the query contains {}; only read-only queries are allowed", statement_kind(node)))
        }
        _ => None,
    };
    if let Some(p) = problem {
        w.error = Some(p);
        return true;
    }
    pg_sys::raw_expression_tree_walker(node, Some(walk), ctx)
}

/// `nl2sql_check(sql)`: NULL when `sql` passes the validation nl2sql() applies to generated
/// statements (one read-only query), otherwise the reason. Parses only; never runs `sql`.
#[pgrx::pg_extern(strict, stable, parallel_safe)]
fn nl2sql_check(sql: &str) -> Option<String> {
    check_query(sql).err()
}
