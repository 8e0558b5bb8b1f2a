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

/// Checks one SELECT: no INTO, no locking clause, only queries in its WITH, and the same for
/// set-operation arms and sub-selects in FROM.
unsafe fn check_select(s: *mut pg_sys::SelectStmt) -> Result<(), String> {
    if s.is_null() {
        return Ok(());
    }
    if !(*s).intoClause.is_null() {
        return Err("SELECT ... INTO creates a table; only a plain query is allowed".into());
    }
    if !(*s).lockingClause.is_null() {
        return Err("FOR UPDATE/SHARE locks rows; only a plain query is allowed".into());
    }
    if !(*s).withClause.is_null() {
        for cte in list_ptrs((*(*s).withClause).ctes) {
            let cte = cte as *mut pg_sys::CommonTableExpr;
            let q = (*cte).ctequery;
            if q.is_null() || (*q).type_ != pg_sys::NodeTag::T_SelectStmt {
                return Err(format!("WITH contains {}; only queries are allowed", statement_kind(q)));
            }
            check_select(q as *mut pg_sys::SelectStmt)?;
        }
    }
    for item in list_ptrs((*s).fromClause) {
        check_from_item(item as *mut pg_sys::Node)?;
    }
    check_select((*s).larg)?;
    check_select((*s).rarg)
}

/// Checks a FROM item: sub-selects and both sides of joins.
unsafe fn check_from_item(n: *mut pg_sys::Node) -> Result<(), String> {
    if n.is_null() {
        return Ok(());
    }
    match (*n).type_ {
        pg_sys::NodeTag::T_RangeSubselect => {
            let sub = (*(n as *mut pg_sys::RangeSubselect)).subquery;
            if !sub.is_null() && (*sub).type_ == pg_sys::NodeTag::T_SelectStmt {
                check_select(sub as *mut pg_sys::SelectStmt)?;
            }
            Ok(())
        }
        pg_sys::NodeTag::T_JoinExpr => {
            let j = n as *mut pg_sys::JoinExpr;
            check_from_item((*j).larg)?;
            check_from_item((*j).rarg)
        }
        _ => Ok(()),
    }
}
