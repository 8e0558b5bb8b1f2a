//! What an analysed statement does with the catalog's columns ([`QueryFacts`]), read off the
//! tree parse analysis built: the grouping the top query hides, the columns SUM and AVG add up,
//! the equalities between columns. The engine side (`nl2sql::doubt`) decides what is doubtful.
//! Read inside the validation's rolled-back subtransaction; calls nothing of the statement.

use super::nodes::list_ptrs;
use crate::nl2sql::doubt::{ColumnRef, Division, QueryFacts, UnusedJoin};
use pgrx::pg_sys;
use std::collections::HashMap;
use std::ffi::{c_void, CStr};

/// Facts of the analysed statement `query` (the top query).
///
/// # Safety
/// `query` is a valid analysed `Query`; called on the backend thread.
pub(super) unsafe fn query_facts(query: *mut pg_sys::Query) -> QueryFacts {
    let mut w = FactsWalk {
        rtables: vec![(*query).rtable],
        outer: vec![has_outer_join(query)],
        facts: QueryFacts::default(),
    };
    if let Some((groups, at)) = hidden_groups(query) {
        w.facts.hidden_groups = Some(groups);
        w.facts.group_at = at;
        let q = &*query;
        w.facts.ungroupable = q.havingQual.is_null()
            && q.limitCount.is_null()
            && q.limitOffset.is_null()
            && q.distinctClause.is_null()
            && !q.hasWindowFuncs;
    }
    w.facts.repeated_outputs = repeated_outputs(query);
    w.facts.unused_joins = unused_joins(query);
    tables_of((*query).rtable, &mut w.facts.tables);
    pg_sys::query_tree_walker(query, Some(facts_walk), &mut w as *mut FactsWalk as *mut c_void, 0);
    w.facts
}

/// The tables the top query inner-joins and uses nowhere but in their own join's ON condition
/// (none when the query has DISTINCT: there a join that only filters repeats nothing).
unsafe fn unused_joins(query: *mut pg_sys::Query) -> Vec<UnusedJoin> {
    let q = &*query;
    if !q.distinctClause.is_null() || q.jointree.is_null() {
        return Vec::new();
    }
    // Every reference to a top-level range table entry, anywhere (sub-queries too).
    let mut all = VarCounts::default();
    let flags = pg_sys::QTW_IGNORE_JOINALIASES as i32;
    pg_sys::query_tree_walker(
        query,
        Some(count_vars),
        &mut all as *mut VarCounts as *mut c_void,
        flags,
    );
    let mut joins = Vec::new();
    for item in list_ptrs((*q.jointree).fromlist) {
        inner_joins(item as *mut pg_sys::Node, &mut joins);
    }
    let rtable = list_ptrs(q.rtable);
    let mut out = Vec::new();
    // Either side of an inner join (`FROM a JOIN b ON ...`: a as well as b) when it is a table;
    // but a left side is what a COUNT(*) of the query counts (`FROM emp JOIN dept ... GROUP BY
    // dname` counts employees): its rows are used, if by no column.
    let counts_rows = counts_rows(q);
    let sides = joins.iter().flat_map(|&j| {
        let left = (!counts_rows).then_some((j, (*j).larg));
        left.into_iter().chain([(j, (*j).rarg)])
    });
    for (j, side) in sides {
        if side.is_null() || (*side).type_ != pg_sys::NodeTag::T_RangeTblRef {
            continue;
        }
        let Ok(index) = usize::try_from((*(side as *mut pg_sys::RangeTblRef)).rtindex) else {
            continue;
        };
        let Some(&rte) = index.checked_sub(1).and_then(|i| rtable.get(i)) else { continue };
        let rte = rte as *mut pg_sys::RangeTblEntry;
        if rte.is_null() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            continue;
        }
        let mut on = VarCounts::default();
        count_vars((*j).quals, &mut on as *mut VarCounts as *mut c_void);
        let used_on = on.counts.get(&index).copied().unwrap_or(0);
        if used_on == 0 || all.counts.get(&index).copied().unwrap_or(0) != used_on {
            continue;
        }
        let relid = (*rte).relid;
        let (Some(table), Some(schema)) = (
            text(pg_sys::get_rel_name(relid)),
            text(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid))),
        ) else {
            continue;
        };
        let mut columns: Vec<String> = Vec::new();
        for attno in on.columns.get(&index).into_iter().flatten() {
            if let Some(c) = text(pg_sys::get_attname(relid, *attno, true)) {
                if !columns.contains(&c) {
                    columns.push(c);
                }
            }
        }
        out.push(UnusedJoin { schema, table, columns });
    }
    out
}

/// Whether query `q`'s result or HAVING has a `COUNT(*)` of its own level (not of a sub-query).
unsafe fn counts_rows(q: &pg_sys::Query) -> bool {
    #[pgrx::pg_guard]
    unsafe extern "C-unwind" fn walk(node: *mut pg_sys::Node, found: *mut c_void) -> bool {
        if node.is_null() || (*node).type_ == pg_sys::NodeTag::T_Query {
            return false; // a sub-query's count is not this level's
        }
        if (*node).type_ == pg_sys::NodeTag::T_Aggref {
            let a = node as *mut pg_sys::Aggref;
            if (*a).aggstar && (*a).agglevelsup == 0 {
                *(found as *mut bool) = true;
                return true;
            }
        }
        pg_sys::expression_tree_walker(node, Some(walk), found)
    }
    if !q.hasAggs {
        return false;
    }
    let mut found = false;
    let at = &mut found as *mut bool as *mut c_void;
    walk(q.targetList as *mut pg_sys::Node, at);
    if !found {
        walk(q.havingQual, at);
    }
    found
}

/// The inner joins in a FROM item, nested ones included.
unsafe fn inner_joins(node: *mut pg_sys::Node, out: &mut Vec<*mut pg_sys::JoinExpr>) {
    if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_JoinExpr {
        return;
    }
    let j = node as *mut pg_sys::JoinExpr;
    inner_joins((*j).larg, out);
    inner_joins((*j).rarg, out);
    if (*j).jointype == pg_sys::JoinType::JOIN_INNER && !(*j).quals.is_null() {
        out.push(j);
    }
}

/// References to the top query's range table entries (by index), and the columns referenced.
#[derive(Default)]
struct VarCounts {
    /// How many query levels down the walk is (a sub-query's reference to the top query has
    /// `varlevelsup` equal to it).
    depth: u32,
    counts: HashMap<usize, usize>,
    columns: HashMap<usize, Vec<pg_sys::AttrNumber>>,
}

/// Counts the references to the top query's range table entries under `node`.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn count_vars(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let w = &mut *(ctx as *mut VarCounts);
    match (*node).type_ {
        pg_sys::NodeTag::T_Var => {
            let v = node as *mut pg_sys::Var;
            if let (true, Ok(varno)) = ((*v).varlevelsup == w.depth, usize::try_from((*v).varno)) {
                *w.counts.entry(varno).or_default() += 1;
                w.columns.entry(varno).or_default().push((*v).varattno);
            }
            false
        }
        pg_sys::NodeTag::T_Query => {
            w.depth += 1;
            let flags = pg_sys::QTW_IGNORE_JOINALIASES as i32;
            let stop =
                pg_sys::query_tree_walker(node as *mut pg_sys::Query, Some(count_vars), ctx, flags);
            w.depth -= 1;
            stop
        }
        _ => pg_sys::expression_tree_walker(node, Some(count_vars), ctx),
    }
}

/// A parse location (byte offset in the statement, -1 when unknown).
fn location(at: i32) -> Option<usize> {
    usize::try_from(at).ok()
}

/// Adds the base tables of range table `rtable` to `out` (each once).
unsafe fn tables_of(rtable: *mut pg_sys::List, out: &mut Vec<(String, String)>) {
    for p in list_ptrs(rtable) {
        let rte = p as *mut pg_sys::RangeTblEntry;
        if rte.is_null() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
            continue;
        }
        let relid = (*rte).relid;
        let (Some(table), Some(schema)) = (
            text(pg_sys::get_rel_name(relid)),
            text(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid))),
        ) else {
            continue;
        };
        if !out.iter().any(|(s, t)| s == &schema && t == &table) {
            out.push((schema, table));
        }
    }
}

/// The walk's state: the range tables of the enclosing query levels (innermost last), and
/// whether each level has an outer join.
struct FactsWalk {
    rtables: Vec<*mut pg_sys::List>,
    outer: Vec<bool>,
    facts: QueryFacts,
}

/// Whether query `q`'s FROM has a LEFT, RIGHT or FULL join anywhere (its columns may be NULL
/// there whatever their declaration).
unsafe fn has_outer_join(q: *mut pg_sys::Query) -> bool {
    unsafe fn outer(node: *mut pg_sys::Node) -> bool {
        if node.is_null() || (*node).type_ != pg_sys::NodeTag::T_JoinExpr {
            return false;
        }
        let j = node as *mut pg_sys::JoinExpr;
        (*j).jointype != pg_sys::JoinType::JOIN_INNER || outer((*j).larg) || outer((*j).rarg)
    }
    let tree = (*q).jointree;
    !tree.is_null() && list_ptrs((*tree).fromlist).into_iter().any(|n| outer(n as _))
}

impl FactsWalk {
    /// The base-table column `v` stands for, when it is one (not a join, sub-query or CTE column,
    /// not a whole-row or system column).
    unsafe fn column(&self, v: *mut pg_sys::Var) -> Option<ColumnRef> {
        let up = usize::try_from((*v).varlevelsup).ok()?;
        let rtable = *self.rtables.get(self.rtables.len().checked_sub(1 + up)?)?;
        column_of(rtable, v)
    }
}

/// The base-table column of `v` in range table `rtable`.
unsafe fn column_of(rtable: *mut pg_sys::List, v: *mut pg_sys::Var) -> Option<ColumnRef> {
    // A grouped column is a Var of the grouping step from PostgreSQL 18 on: its table's Var then.
    let e = strip(super::compat::grouped_expression(rtable, v as *mut pg_sys::Node));
    if e.is_null() || (*e).type_ != pg_sys::NodeTag::T_Var {
        return None;
    }
    let v = e as *mut pg_sys::Var;
    if (*v).varattno <= 0 {
        return None;
    }
    let index = usize::try_from((*v).varno).ok()?.checked_sub(1)?;
    let rte = *list_ptrs(rtable).get(index)? as *mut pg_sys::RangeTblEntry;
    if rte.is_null() || (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION {
        return None;
    }
    let relid = (*rte).relid;
    let table = text(pg_sys::get_rel_name(relid))?;
    let schema = text(pg_sys::get_namespace_name(pg_sys::get_rel_namespace(relid)))?;
    let column = text(pg_sys::get_attname(relid, (*v).varattno, true))?;
    Some(ColumnRef { schema, table, column })
}

/// True when expression `node` is of an integer type (smallint, integer, bigint).
unsafe fn is_integer(node: *mut pg_sys::Node) -> bool {
    let t = pg_sys::exprType(node);
    t == pg_sys::INT2OID || t == pg_sys::INT4OID || t == pg_sys::INT8OID
}

/// A catalog name (NULL when the object is gone).
unsafe fn text(p: *mut std::ffi::c_char) -> Option<String> {
    (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// `node` without the relabelling casts parse analysis adds (`varchar` → `text` and the like).
unsafe fn strip(mut node: *mut pg_sys::Node) -> *mut pg_sys::Node {
    while !node.is_null() && (*node).type_ == pg_sys::NodeTag::T_RelabelType {
        node = (*(node as *mut pg_sys::RelabelType)).arg as *mut pg_sys::Node;
    }
    node
}

/// The top query's grouping expressions when it aggregates, groups, and returns none of them
/// (not even inside an expression of the result, outside its aggregates): a plain column's
/// name, `None` for anything else; and where the first one is written.
type HiddenGroups = (Vec<Option<ColumnRef>>, Option<usize>);
unsafe fn hidden_groups(q: *mut pg_sys::Query) -> Option<HiddenGroups> {
    if !(*q).hasAggs || !(*q).groupingSets.is_null() || !(*q).setOperations.is_null() {
        return None;
    }
    let groups = list_ptrs((*q).groupClause);
    if groups.is_empty() {
        return None;
    }
    let tles: Vec<*mut pg_sys::TargetEntry> =
        list_ptrs((*q).targetList).into_iter().map(|p| p as *mut pg_sys::TargetEntry).collect();
    // The plain columns the result shows outside aggregates and window functions.
    let mut shown: Vec<(i32, i16)> = Vec::new();
    for &t in tles.iter().filter(|&&t| !(*t).resjunk) {
        let mut vars = OutsideAggregates { vars: Vec::new() };
        outside_aggregates((*t).expr as *mut pg_sys::Node, &mut vars as *mut _ as *mut c_void);
        shown.extend(vars.vars);
    }
    let mut hidden = Vec::new();
    let mut first_at = None;
    for g in groups {
        let g = g as *mut pg_sys::SortGroupClause;
        let t = *tles.iter().find(|&&t| (*t).ressortgroupref == (*g).tleSortGroupRef)?;
        if !(*t).resjunk {
            return None; // a grouping expression is in the result
        }
        let mut vars = OutsideAggregates { vars: Vec::new() };
        outside_aggregates((*t).expr as *mut pg_sys::Node, &mut vars as *mut _ as *mut c_void);
        if vars.vars.iter().any(|v| shown.contains(v)) {
            return None; // the result shows it through an expression (a formatted date, ...)
        }
        let e = super::compat::grouped_expression((*q).rtable, (*t).expr as *mut pg_sys::Node);
        first_at = first_at.or_else(|| location(pg_sys::exprLocation(e)));
        let e = strip(e);
        let col = if !e.is_null() && (*e).type_ == pg_sys::NodeTag::T_Var {
            column_of((*q).rtable, e as *mut pg_sys::Var)
        } else {
            None
        };
        hidden.push(col);
    }
    Some((hidden, first_at))
}

/// The result names of the top query's columns whose expression an earlier column returns
/// (`equal()`: the same tree, whatever the labels), with a plain column's name and location.
unsafe fn repeated_outputs(q: *mut pg_sys::Query) -> Vec<(String, Option<(String, usize)>)> {
    let shown: Vec<*mut pg_sys::TargetEntry> = list_ptrs((*q).targetList)
        .into_iter()
        .map(|p| p as *mut pg_sys::TargetEntry)
        .filter(|&t| !(*t).resjunk)
        .collect();
    let mut out = Vec::new();
    for (j, &t) in shown.iter().enumerate() {
        let again = shown[..j]
            .iter()
            .any(|&e| pg_sys::equal((*e).expr as *const c_void, (*t).expr as *const c_void));
        if again {
            let label = text((*t).resname).unwrap_or_else(|| "?column?".to_string());
            let e = strip(super::compat::grouped_expression(
                (*q).rtable,
                (*t).expr as *mut pg_sys::Node,
            ));
            let written = if !e.is_null() && (*e).type_ == pg_sys::NodeTag::T_Var {
                let v = e as *mut pg_sys::Var;
                column_of((*q).rtable, v).zip(location((*v).location)).map(|(c, at)| (c.column, at))
            } else {
                None
            };
            out.push((label, written));
        }
    }
    out
}

/// The (varno, varattno) of the query level's own columns outside aggregates.
struct OutsideAggregates {
    vars: Vec<(i32, i16)>,
}

/// Expression walker for [`OutsideAggregates`]: stops at aggregates, window functions and
/// sub-queries.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn outside_aggregates(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_Var => {
            let v = node as *mut pg_sys::Var;
            if (*v).varlevelsup == 0 {
                (*(ctx as *mut OutsideAggregates))
                    .vars
                    .push((super::compat::var_number(v), (*v).varattno));
            }
            false
        }
        pg_sys::NodeTag::T_Aggref
        | pg_sys::NodeTag::T_WindowFunc
        | pg_sys::NodeTag::T_SubLink
        | pg_sys::NodeTag::T_Query => false,
        _ => pg_sys::expression_tree_walker(node, Some(outside_aggregates), ctx),
    }
}

/// Walks every query level and expression: SUM/AVG arguments, column equalities, integer
/// divisions by something other than a constant, text columns compared with a string.
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn facts_walk(node: *mut pg_sys::Node, ctx: *mut c_void) -> bool {
    if node.is_null() {
        return false;
    }
    let w = &mut *(ctx as *mut FactsWalk);
    match (*node).type_ {
        pg_sys::NodeTag::T_Query => {
            let q = node as *mut pg_sys::Query;
            tables_of((*q).rtable, &mut w.facts.tables);
            w.rtables.push((*q).rtable);
            w.outer.push(has_outer_join(q));
            let stop = pg_sys::query_tree_walker(q, Some(facts_walk), ctx, 0);
            w.rtables.pop();
            w.outer.pop();
            return stop;
        }
        pg_sys::NodeTag::T_NullTest => {
            let t = node as *mut pg_sys::NullTest;
            let arg = strip((*t).arg as *mut pg_sys::Node);
            let is_var = !arg.is_null() && (*arg).type_ == pg_sys::NodeTag::T_Var;
            if (*t).nulltesttype == pg_sys::NullTestType::IS_NOT_NULL && is_var {
                let v = arg as *mut pg_sys::Var;
                // The level the column belongs to must have no outer join.
                let level = usize::try_from((*v).varlevelsup)
                    .ok()
                    .and_then(|up| w.outer.len().checked_sub(1 + up))
                    .and_then(|i| w.outer.get(i).copied());
                if level == Some(false) {
                    if let Some(c) = w.column(v) {
                        if !w.facts.not_null_tests.contains(&c) {
                            w.facts.not_null_tests.push(c);
                        }
                    }
                }
            }
        }
        pg_sys::NodeTag::T_Aggref => {
            let a = node as *mut pg_sys::Aggref;
            if let Some(name) = text(pg_sys::get_func_name((*a).aggfnoid)) {
                if name == "sum" || name == "avg" {
                    for arg in list_ptrs((*a).args) {
                        let tle = arg as *mut pg_sys::TargetEntry;
                        let mut vars = Vec::new();
                        measured_vars((*tle).expr as *mut pg_sys::Node, &mut vars);
                        for v in vars {
                            if let Some(c) = w.column(v) {
                                w.facts.measured.push((name.clone(), c, location((*v).location)));
                            }
                        }
                    }
                }
            }
        }
        pg_sys::NodeTag::T_OpExpr => {
            let op = node as *mut pg_sys::OpExpr;
            let args = list_ptrs((*op).args);
            let name = text(pg_sys::get_opname((*op).opno));
            if args.len() == 2 && name.as_deref() == Some("/") {
                let (a, b) = (args[0] as *mut pg_sys::Node, args[1] as *mut pg_sys::Node);
                let constant = !strip(b).is_null() && (*strip(b)).type_ == pg_sys::NodeTag::T_Const;
                if is_integer(a) && is_integer(b) && !constant {
                    w.facts.integer_divisions.push(Division {
                        dividend_at: location(pg_sys::exprLocation(a)),
                        operator_at: location((*op).location),
                    });
                }
            }
            if args.len() == 2 && name.as_deref() == Some("=") {
                let (a, b) = (strip(args[0] as _), strip(args[1] as _));
                let var = |n: *mut pg_sys::Node| {
                    (!n.is_null() && (*n).type_ == pg_sys::NodeTag::T_Var)
                        .then_some(n as *mut pg_sys::Var)
                };
                if let (Some(va), Some(vb)) = (var(a), var(b)) {
                    let same_entry =
                        (*va).varno == (*vb).varno && (*va).varlevelsup == (*vb).varlevelsup;
                    if !same_entry {
                        if let (Some(ca), Some(cb)) = (w.column(va), w.column(vb)) {
                            let one_table = ca.schema == cb.schema && ca.table == cb.table;
                            if one_table && (*va).varlevelsup == (*vb).varlevelsup {
                                w.facts.self_joins.push((ca.clone(), cb.clone()));
                            }
                            w.facts.equalities.push((ca, cb));
                        }
                    } else if (*va).varattno == (*vb).varattno {
                        if let Some(c) = w.column(va) {
                            w.facts.self_compared.push(c);
                        }
                    }
                }
                if let Some(filter) = value_filter(w, a, b).or_else(|| value_filter(w, b, a)) {
                    if !w.facts.value_filters.contains(&filter) {
                        w.facts.value_filters.push(filter);
                    }
                }
            }
        }
        _ => {}
    }
    pg_sys::expression_tree_walker(node, Some(facts_walk), ctx)
}

/// `column = 'value'` when `var` is a text column of a base table and `constant` a string
/// constant that is not NULL (both stripped of relabelling casts: a `varchar` column compared
/// with a `text` constant).
unsafe fn value_filter(
    w: &FactsWalk,
    var: *mut pg_sys::Node,
    constant: *mut pg_sys::Node,
) -> Option<(ColumnRef, String)> {
    if var.is_null() || constant.is_null() {
        return None;
    }
    if (*var).type_ != pg_sys::NodeTag::T_Var || (*constant).type_ != pg_sys::NodeTag::T_Const {
        return None;
    }
    let c = constant as *mut pg_sys::Const;
    let text_like =
        |t: pg_sys::Oid| t == pg_sys::TEXTOID || t == pg_sys::VARCHAROID || t == pg_sys::BPCHAROID;
    if (*c).constisnull || !text_like((*c).consttype) || !text_like(pg_sys::exprType(var)) {
        return None;
    }
    let column = w.column(var as *mut pg_sys::Var)?;
    // text, varchar and bpchar are varlena: text_to_cstring detoasts and copies (palloc'd in
    // the current memory context, freed with it).
    let value = text(pg_sys::text_to_cstring((*c).constvalue.cast_mut_ptr()))?;
    Some((column, value))
}

/// The columns whose values an aggregate's argument adds up: the argument itself, through
/// arithmetic, casts, CASE results and COALESCE (a column in a CASE condition or a function's
/// argument only selects or transforms, it is not added up).
unsafe fn measured_vars(node: *mut pg_sys::Node, out: &mut Vec<*mut pg_sys::Var>) {
    let node = strip(node);
    if node.is_null() {
        return;
    }
    match (*node).type_ {
        pg_sys::NodeTag::T_Var => out.push(node as *mut pg_sys::Var),
        pg_sys::NodeTag::T_CoerceViaIO => {
            measured_vars((*(node as *mut pg_sys::CoerceViaIO)).arg as _, out)
        }
        pg_sys::NodeTag::T_FuncExpr => {
            let f = node as *mut pg_sys::FuncExpr;
            let cast = (*f).funcformat == pg_sys::CoercionForm::COERCE_EXPLICIT_CAST
                || (*f).funcformat == pg_sys::CoercionForm::COERCE_IMPLICIT_CAST;
            if cast {
                for a in list_ptrs((*f).args) {
                    measured_vars(a as _, out);
                }
            }
        }
        pg_sys::NodeTag::T_OpExpr => {
            for a in list_ptrs((*(node as *mut pg_sys::OpExpr)).args) {
                measured_vars(a as _, out);
            }
        }
        pg_sys::NodeTag::T_CaseExpr => {
            let c = node as *mut pg_sys::CaseExpr;
            for w in list_ptrs((*c).args) {
                measured_vars((*(w as *mut pg_sys::CaseWhen)).result as _, out);
            }
            measured_vars((*c).defresult as _, out);
        }
        pg_sys::NodeTag::T_CoalesceExpr => {
            for a in list_ptrs((*(node as *mut pg_sys::CoalesceExpr)).args) {
                measured_vars(a as _, out);
            }
        }
        _ => {}
    }
}
