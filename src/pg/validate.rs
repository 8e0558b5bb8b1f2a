//! Validation of generated SQL in the caller's session, in two steps, never executing it:
//!
//! 1. **Shape**, with PostgreSQL's own parser (`raw_parser`): exactly one statement, a query
//!    (SELECT / WITH ... SELECT / VALUES / TABLE), no `INTO`, no row locking (`FOR UPDATE/SHARE`),
//!    no data-modifying statement anywhere.
//! 2. **Meaning**, with PostgreSQL's parse analysis (`parse_analyze_fixedparams`) against the
//!    live catalog, with the caller's privileges and search_path: every name resolves, types,
//!    operators and functions match, grouping is right; the caller may SELECT every table and
//!    column it reads (`compat::check_range_table_privileges`); and no function it calls has side effects (volatile
//!    functions, except a few harmless ones; advisory locks, large objects, sequences, NOTIFY,
//!    dblink and set_config whatever their volatility). Analysis runs inside an internal
//!    subtransaction that is always rolled back, so the locks it takes are released and nothing
//!    it touches persists. Analysis calls no function of the statement (it does not plan, so
//!    no constant folding runs either).

use super::nodes::list_ptrs;
use crate::nl2sql::doubt::{self, QueryFacts};
use crate::nl2sql::{Rejection, SchemaInfo};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::{CaughtError, ErrorReportWithLevel};
use pgrx::PgTryBuilder;
use std::ffi::{c_void, CStr, CString};

/// Volatile functions that have no side effect a reader could notice (randomness and clocks).
const HARMLESS_VOLATILE: &[&str] = &[
    "random",
    "random_normal",
    "clock_timestamp",
    "timeofday",
    "gen_random_uuid",
    "uuid_generate_v4",
];

/// Functions refused whatever their declared volatility: locks, large objects, sequences,
/// notifications, remote connections, sleeping and settings.
const SIDE_EFFECT_PREFIXES: &[&str] =
    &["pg_advisory", "pg_try_advisory", "lo_", "dblink", "pg_notify", "pg_sleep"];
const SIDE_EFFECT_FUNCTIONS: &[&str] =
    &["nextval", "setval", "currval", "lastval", "set_config", "setseed", "loread", "lowrite"];

/// The full validation nl2sql() applies: [`check_query`], then [`analyze`]; what the accepted
/// statement does with the catalog's columns.
pub fn validate(sql: &str) -> Result<QueryFacts, Rejection> {
    check_query(sql)?;
    analyze(sql)
}

/// [`validate`], then the doubts about an accepted statement over the catalog `schema` the
/// prompt was built from (`nl2sql::doubt`): an advisory rejection when it looks wrong; else what
/// parse analysis found.
pub fn validate_and_review(sql: &str, schema: &SchemaInfo) -> Result<QueryFacts, Rejection> {
    let facts = validate(sql)?;
    doubt::review(&facts, schema, sql).map_or(Ok(facts), Err)
}

/// A rejection carrying the server's SQLSTATE, message and hint (see `encoding::caught_text`).
pub(super) fn rejection(r: &ErrorReportWithLevel) -> Rejection {
    Rejection {
        message: super::encoding::caught_text(r.message()),
        sqlstate: Some(sqlstate(r.sql_error_code() as i32)),
        hint: r.hint().map(super::encoding::caught_text),
        facts: Vec::new(),
        advisory: false,
        span: None,
        fix: None,
    }
}

/// The five-character SQLSTATE of a packed error code (`MAKE_SQLSTATE`: 6 bits per character).
pub(super) fn sqlstate(code: i32) -> String {
    (0..5).map(|i| (((code >> (6 * i)) & 0x3f) as u8 + b'0') as char).collect()
}

/// True for errors that are not about the statement and must reach the caller: cancellation,
/// shutdown, resources (class 57: operator intervention; 53: insufficient resources; 58: system)
/// and internal errors.
pub(super) fn must_propagate(state: &str) -> bool {
    state.starts_with("57")
        || state.starts_with("53")
        || state.starts_with("58")
        || state == "XX000"
}

/// `Ok` when `sql` is one plain query; otherwise the reason (the parser's message for syntax
/// errors).
pub fn check_query(sql: &str) -> Result<(), Rejection> {
    let Ok(c) = CString::new(server_sql(sql)?) else {
        return Err("the statement contains a NUL character".into());
    };
    // The raw parser only allocates memory: catching its ERROR without a subtransaction is safe
    // (no locks, buffers or other resources are held at that point).
    PgTryBuilder::new(|| unsafe {
        let list = pg_sys::raw_parser(c.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        inspect(list)
    })
    .catch_others(|e| match e {
        CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => Err(rejection(&r)),
        other => other.rethrow(),
    })
    .execute()
}

/// `sql` in the database encoding, for PostgreSQL's parser; a character the encoding cannot
/// represent rejects the statement (a repair round may rewrite it).
fn server_sql(sql: &str) -> Result<Vec<u8>, Rejection> {
    super::encoding::try_to_server(sql).map_err(|reason| {
        Rejection {
            message: format!("the statement contains a character that the database encoding {} cannot represent ({reason})", super::encoding::database_encoding()),
            sqlstate: Some("22021".into()),
            ..Rejection::default()
        }
    })
}

/// What the analysis step found (an error to re-raise is kept until the subtransaction is gone).
enum Analysis {
    Accepted(Box<(QueryFacts, Vec<pg_sys::Oid>)>),
    Rejected(Rejection),
    Propagate(CaughtError),
}

/// Parse analysis of `sql` (already checked by [`check_query`]) in a subtransaction that is
/// always rolled back: the server's error for a statement that does not resolve, a privilege the
/// caller lacks, or a function with side effects; for an accepted statement, its facts.
pub fn analyze(sql: &str) -> Result<QueryFacts, Rejection> {
    analyze_reading(sql).map(|(facts, _)| facts)
}

/// The relations (tables, views, ...) an accepted query reads, anywhere in it (sub-queries and
/// CTEs included), each once in ascending OID order: [`check_query`], then the analysis of
/// [`analyze`] (so the caller may read every one of them). What an approved example records.
pub fn relations_read(sql: &str) -> Result<Vec<pg_sys::Oid>, Rejection> {
    check_query(sql)?;
    let (_, mut oids) = analyze_reading(sql)?;
    oids.sort_by_key(|o| o.to_u32());
    oids.dedup();
    Ok(oids)
}

/// [`analyze`], with the relations the statement reads (unsorted, repeated).
fn analyze_reading(sql: &str) -> Result<(QueryFacts, Vec<pg_sys::Oid>), Rejection> {
    let Ok(c) = CString::new(server_sql(sql)?) else {
        return Err("the answer contains a NUL character".into());
    };
    // SAFETY (of the call inside): parse analysis on the backend thread, in the subtransaction.
    let outcome = match super::subxact::rolled_back(|| unsafe { analyze_in_subtransaction(&c) }) {
        Ok(Ok(found)) => Analysis::Accepted(Box::new(found)),
        Ok(Err(r)) => Analysis::Rejected(r),
        Err(e) => match *e {
            CaughtError::PostgresError(ref r) | CaughtError::ErrorReport(ref r)
                if !must_propagate(&sqlstate(r.sql_error_code() as i32)) =>
            {
                Analysis::Rejected(rejection(r))
            }
            other => Analysis::Propagate(other),
        },
    };
    match outcome {
        Analysis::Accepted(found) => Ok(*found),
        Analysis::Rejected(mut r) => {
            if r.sqlstate.as_deref() == Some("42883") {
                r.facts.extend(function_signatures(&r.message));
            }
            Err(r)
        }
        Analysis::Propagate(e) => e.rethrow(),
    }
}

/// Analyses the statement and checks privileges and functions (inside the subtransaction);
/// reads the facts of an accepted statement.
unsafe fn analyze_in_subtransaction(
    sql: &CStr,
) -> Result<(QueryFacts, Vec<pg_sys::Oid>), Rejection> {
    let list = pg_sys::raw_parser(sql.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
    let stmts = list_ptrs(list);
    let [raw] = stmts.as_slice() else {
        return Err("expected exactly one statement".into());
    };
    let query = super::compat::parse_analyze(*raw as *mut pg_sys::RawStmt, sql.as_ptr());
    let mut w = QueryWalk { functions: Vec::new(), relations: Vec::new() };
    // The top query's privileges here, the rest through PostgreSQL's walker (which calls the
    // guarded callback, so an ERROR inside it comes back through this FFI call, to the catch).
    super::compat::check_range_table_privileges(query);
    w.relations.extend(relations_of((*query).rtable));
    pg_sys::query_tree_walker(query, Some(query_walk), &mut w as *mut QueryWalk as *mut c_void, 0);
    for oid in w.functions {
        if let Some(reason) = side_effect(oid) {
            return Err(Rejection {
                message: reason,
                sqlstate: Some("42501".into()),
                ..Rejection::default()
            });
        }
    }
    Ok((super::facts::query_facts(query), w.relations))
}

/// The relations of a range table (its `RTE_RELATION` entries; a view is one, not expanded).
unsafe fn relations_of(rtable: *mut pg_sys::List) -> Vec<pg_sys::Oid> {
    list_ptrs(rtable)
        .into_iter()
        .map(|p| p as *mut pg_sys::RangeTblEntry)
        .filter(|&rte| (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION)
        .map(|rte| (*rte).relid)
        .collect()
}

/// Why calling function `oid` is not read-only, if it is not.
unsafe fn side_effect(oid: pg_sys::Oid) -> Option<String> {
    let name_ptr = pg_sys::get_func_name(oid);
    if name_ptr.is_null() {
        return None;
    }
    let name = CStr::from_ptr(name_ptr).to_string_lossy().to_string();
    let listed = SIDE_EFFECT_FUNCTIONS.contains(&name.as_str())
        || SIDE_EFFECT_PREFIXES.iter().any(|p| name.starts_with(p));
    let volatile = pg_sys::func_volatile(oid) as u8 == b'v';
    if listed || (volatile && !HARMLESS_VOLATILE.contains(&name.as_str())) {
        Some(format!("function {name}() may have side effects (it is volatile or changes state); only read-only queries are allowed"))
    } else {
        None
    }
}

/// What the analysed-tree walk collects.
struct QueryWalk {
    /// Every function the statement calls (operators, casts and aggregates included).
    functions: Vec<pg_sys::Oid>,
    /// Every relation its range tables read.
    relations: Vec<pg_sys::Oid>,
}

/// Walks an analysed statement (called by PostgreSQL's walkers only, never directly: an ERROR
/// raised here must unwind through a C frame): on each sub-query, checks the caller's
/// privileges on its range table (raising the server's "permission denied" error); on each
/// expression node, collects the functions it calls.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn query_walk(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    if (*node).type_ == pg_sys::NodeTag::T_Query {
        let q = node as *mut pg_sys::Query;
        super::compat::check_range_table_privileges(q);
        let w = &mut *(ctx as *mut QueryWalk);
        w.relations.extend(relations_of((*q).rtable));
        return pg_sys::query_tree_walker(q, Some(query_walk), ctx, 0);
    }
    pg_sys::check_functions_in_node(node, Some(collect_function), ctx);
    pg_sys::expression_tree_walker(node, Some(query_walk), ctx)
}

/// `check_functions_in_node` callback: records the function, never stops the walk.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn collect_function(oid: pg_sys::Oid, ctx: *mut c_void) -> bool {
    let w = &mut *(ctx as *mut QueryWalk);
    w.functions.push(oid);
    false
}

/// The signatures of the functions named in an undefined-function message that the caller may
/// execute (`name(argument types)`), at most a few: what a DBA would look up with `\df name`.
fn function_signatures(message: &str) -> Vec<String> {
    let Some(rest) = message.strip_prefix("function ") else { return Vec::new() };
    let Some(paren) = rest.find('(') else { return Vec::new() };
    let name = rest[..paren].rsplit('.').next().unwrap_or("").trim_matches('"').to_lowercase();
    // The message came through a lossy UTF-8 conversion: only ASCII names are looked up.
    if name.is_empty() || !name.is_ascii() {
        return Vec::new();
    }
    let found: Vec<String> = pgrx::Spi::connect(|client| {
        let rows = client.select(
            "SELECT pg_catalog.convert_to(p.proname::text || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')', 'UTF8') \
             FROM pg_catalog.pg_proc p \
             WHERE p.proname OPERATOR(pg_catalog.=) $1::name AND p.prokind OPERATOR(pg_catalog.=) ANY (ARRAY['f', 'a', 'w']::\"char\"[]) \
               AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE') \
             ORDER BY 1 LIMIT 6",
            None,
            &[name.clone().into()],
        )?;
        let mut out = Vec::new();
        for row in rows {
            if let Some(s) = super::encoding::spi_text(row.get::<Vec<u8>>(1)?) {
                out.push(s);
            }
        }
        Ok::<_, pgrx::spi::SpiError>(out)
    })
    .unwrap_or_default();
    if found.is_empty() {
        vec![format!("No function named {name} exists.")]
    } else {
        vec![format!("Existing {name} functions: {}.", found.join(", "))]
    }
}

/// Checks the parse tree list.
unsafe fn inspect(list: *mut pg_sys::List) -> Result<(), Rejection> {
    let stmts = list_ptrs(list);
    match stmts.len() {
        0 => return Err("the answer contains no SQL statement".into()),
        1 => {}
        n => return Err(format!("expected exactly one statement, found {n}").into()),
    }
    let raw = stmts[0] as *mut pg_sys::RawStmt;
    let node = (*raw).stmt;
    if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_SelectStmt {
        return Err(format!(
            "only a query (SELECT, WITH ... SELECT, VALUES, TABLE) is allowed, not {}",
            statement_kind(node)
        )
        .into());
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
        t if Some(t) == super::compat::MERGE_STMT => "MERGE",
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
unsafe fn check_select(s: *mut pg_sys::SelectStmt) -> Result<(), Rejection> {
    let mut w = Walk { error: None };
    walk(s as *mut pg_sys::Node, &mut w as *mut Walk as *mut c_void);
    w.error.map_or(Ok(()), |e| Err(e.into()))
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
        t if matches!(
            t,
            pg_sys::NodeTag::T_InsertStmt
                | pg_sys::NodeTag::T_UpdateStmt
                | pg_sys::NodeTag::T_DeleteStmt
        ) || Some(t) == super::compat::MERGE_STMT =>
        {
            Some(format!(
                "the query contains {}; only read-only queries are allowed",
                statement_kind(node)
            ))
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
/// statements (one read-only query that resolves against the catalog, with the caller's
/// privileges, and calls no function with side effects), otherwise the reason. Never runs `sql`.
/// The reason comes with the catalog facts nl2sql()'s repair round would show the model (the
/// real columns of the table an alias stands for, the tables that have a missing column, the
/// closest names), over the tables the caller may see on the search path.
#[pgrx::pg_extern(strict, volatile, parallel_unsafe)]
fn nl2sql_check(sql: super::encoding::Text) -> Option<super::encoding::TextOut> {
    let sql = sql.0;
    let r = validate(&sql).err()?;
    Some(reason(r, &sql, &super::catalog::read_schema_cached(None).0))
}

/// `nl2sql_review(sql)`: [`nl2sql_check`], and for a statement that passes it, the doubts
/// nl2sql() sends back to the model once (`nl2sql::doubt`: groups the result does not show,
/// SUM/AVG over identifiers, keys of different tables compared), as "the query runs, but ..."
/// with the facts a repair round would get, and the engine's own fix when a doubt has one that
/// passes without doubt ("nl2sql() rewrites it: ...", used instead of a model round). NULL when
/// it passes and nothing looks doubtful. Never runs `sql`.
#[pgrx::pg_extern(strict, volatile, parallel_unsafe)]
fn nl2sql_review(sql: super::encoding::Text) -> Option<super::encoding::TextOut> {
    let sql = sql.0;
    let (schema, _) = super::catalog::read_schema_cached(None);
    let r = validate_and_review(&sql, &schema).err()?;
    let rewrite = r
        .fix
        .as_deref()
        .filter(|(fixed, _)| validate_and_review(fixed, &schema).is_ok())
        .map(|(fixed, how)| format!("nl2sql() rewrites it ({how}):\n{fixed}"));
    let super::encoding::TextOut(text, what) = reason(r, &sql, &schema);
    Some(super::encoding::TextOut(
        match rewrite {
            Some(w) => format!("{text}\n{w}"),
            None => text,
        },
        what,
    ))
}

/// The message of `r` with the catalog facts a repair round would show, as the result text.
fn reason(r: Rejection, sql: &str, schema: &SchemaInfo) -> super::encoding::TextOut {
    let facts = crate::nl2sql::feedback::feedback(&r, sql, schema);
    let reason = if facts.is_empty() { r.message } else { format!("{}\n{facts}", r.message) };
    super::encoding::TextOut(reason, "the reason")
}
