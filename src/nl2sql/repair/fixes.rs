//! The engine's own rewrites of a rejected statement, tried before a model round
//! (`stages/rewrite.rs` calls them): mixed-case names written without their quotes, quoted
//! ([`requoted`]); a column on the wrong table that exactly one other table has,
//! requalified ([`requalified`]); a table used but not read, joined on its declared key
//! ([`joined`]); an ambiguous column qualified ([`disambiguated`]); a reserved word used as an
//! alias renamed ([`dealiased`]). Each returns the rewritten statement and a note of what it did.
//!
//! Everything here is generic SQL knowledge: no rule names a table, column or value of any
//! particular database.

use crate::nl2sql::check::rejection::{quoted_after, state, undefined_column, Rejection};
use crate::nl2sql::check::statement::{
    from_items, in_string, is_clause_word, resolve, table_for, word_positions, FromItem,
};
use crate::nl2sql::schema::render::Renderer;
use crate::nl2sql::schema::tables::{SchemaInfo, Table};
use crate::nl2sql::sql::ident::quote_ident;
use crate::nl2sql::sql::lexer::{self, Kind, Token};

/// The deterministic repair of mixed-case names written without their double quotes: PostgreSQL
/// folds an unquoted name to lower case, so `FROM Invoice` looks for `invoice` and fails when the
/// table is `"Invoice"` (a schema made by a tool or another database keeps its names' case). When
/// the server says a table or column does not exist, every unquoted word of the statement that
/// is no name of the shown schema as PostgreSQL reads it, but is, ignoring case, exactly one
/// table, column or schema name spelled with capitals, is written quoted in that spelling (what
/// a DBA does first with such an error). Words followed by `(` (function calls) and words that
/// fold to a name of the schema are left alone. Returns the new statement and a note; it still
/// has to pass validation.
pub fn requoted(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    let state = rej.sqlstate.as_deref();
    if state != Some(state::UNDEFINED_TABLE) && state != Some(state::UNDEFINED_COLUMN) {
        return None;
    }
    // Every name of the shown schema by its folded spelling: the spellings it has.
    let mut names: std::collections::HashMap<String, Vec<&str>> = Default::default();
    let all = shown.tables.iter().flat_map(|t| {
        std::iter::once(t.name.as_str())
            .chain(std::iter::once(t.schema.as_str()))
            .chain(t.columns.iter().map(|c| c.name.as_str()))
    });
    for name in all {
        let spellings = names.entry(name.to_lowercase()).or_default();
        if !spellings.contains(&name) {
            spellings.push(name);
        }
    }
    let tokens: Vec<Token<'_>> = lexer::lex(sql).collect();
    let mut out = sql.to_string();
    let mut changed: Vec<&str> = Vec::new();
    for (i, t) in tokens.iter().enumerate().rev() {
        if t.kind != Kind::Ident {
            continue;
        }
        let folded = t.text.to_lowercase();
        let Some(spellings) = names.get(&folded) else { continue };
        // A word that names something as written (folded) is right as it is.
        if spellings.iter().any(|n| *n == folded) {
            continue;
        }
        let [name] = spellings.as_slice() else { continue };
        let call = tokens[i + 1..]
            .iter()
            .find(|n| !matches!(n.kind, Kind::LineComment | Kind::BlockComment))
            .is_some_and(|n| n.text == "(");
        if call {
            continue;
        }
        out.replace_range(t.start..t.start + t.text.len(), &quote_ident(name));
        if !changed.contains(name) {
            changed.push(name);
        }
    }
    (!changed.is_empty()).then(|| {
        changed.reverse();
        let quoted: Vec<String> = changed.iter().map(|n| quote_ident(n)).collect();
        (out, format!("quoted the mixed-case names {}", quoted.join(", ")))
    })
}

/// The deterministic repair of a column put on the wrong table: the server says `q.c` does not
/// exist, and exactly one other table among the statement's FROM items has a column `c`, or
/// several that the statement joins on `c` (a DBA reading the statement would requalify it):
/// every `q.c` becomes `alias.c` (the first owner's). Returns the new statement and a note of
/// the change; it still has to pass validation.
pub fn requalified(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    if rej.sqlstate.as_deref() != Some(state::UNDEFINED_COLUMN) {
        return None;
    }
    let (Some(q), column) = undefined_column(&rej.message)? else { return None };
    let froms = from_items(sql);
    let own = table_for(&q, &froms, shown);
    let owners: Vec<(&FromItem, &Table)> = froms
        .iter()
        .filter(|f| !f.alias.eq_ignore_ascii_case(&q))
        .filter_map(|f| resolve(f, shown).map(|t| (f, t)))
        .filter(|(_, t)| own.is_none_or(|o| !std::ptr::eq(o, *t)))
        .filter(|(_, t)| t.columns.iter().any(|c| c.name == column))
        .collect();
    // One owner; or several that the statement joins on this very column (`t.c = d.c`), whose
    // values then agree: the first in FROM order (the preserved side of a LEFT JOIN chain).
    let aliases: Vec<&str> = owners.iter().map(|(f, _)| f.alias.as_str()).collect();
    let &(owner, table) = owners.first()?;
    if owners.len() > 1 && !joined_on(sql, &aliases, &column) {
        return None;
    }
    // Every `q.c` (plain words, outside quotes), rewritten from the end so offsets hold.
    let spans = qualifier_spans(sql, &q, &column);
    let mut out = sql.to_string();
    for span in spans.iter().rev() {
        out.replace_range(span.clone(), &owner.alias);
    }
    let changed = spans.len();
    (changed > 0).then(|| {
        let note = format!(
            "{q}.{column} -> {}.{column} ({column} is a column of {}, {})",
            owner.alias,
            Renderer::new(shown).table_name(&table.schema, &table.name),
            owner.alias
        );
        (out, note)
    })
}

/// The byte spans of qualifier `q` in every `q.column` of `sql` (unquoted words written without
/// blanks around the dot; strings and comments left alone), in order.
fn qualifier_spans(sql: &str, q: &str, column: &str) -> Vec<std::ops::Range<usize>> {
    let toks: Vec<Token> = lexer::lex(sql).collect();
    let column = column.to_lowercase();
    toks.windows(3)
        .filter(|w| {
            w[0].kind == Kind::Ident
                && w[1].is(".")
                && w[2].kind == Kind::Ident
                && w[0].end() == w[1].start
                && w[1].end() == w[2].start
                && w[0].text.eq_ignore_ascii_case(q)
                && w[2].text.to_lowercase() == column
        })
        .map(|w| w[0].start..w[0].end())
        .collect()
}

/// The deterministic repair of an ambiguous column (`column reference "patient_id" is
/// ambiguous`) that every FROM item having it is joined on (`t.patient_id = p.patient_id`, so
/// the values agree): each unqualified use (not a result label after AS, not a function name)
/// is qualified with the first such item in FROM order (the preserved side of a LEFT JOIN
/// chain). Returns the new statement and a note; it still has to pass validation.
pub fn disambiguated(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    if rej.sqlstate.as_deref() != Some(state::AMBIGUOUS_COLUMN) || !sql.is_ascii() {
        return None;
    }
    let column = quoted_after(&rej.message, "column reference ")?;
    let froms = from_items(sql);
    let owners: Vec<&FromItem> = froms
        .iter()
        .filter(|f| resolve(f, shown).is_some_and(|t| t.columns.iter().any(|c| c.name == column)))
        .collect();
    let aliases: Vec<&str> = owners.iter().map(|f| f.alias.as_str()).collect();
    if owners.len() < 2 || !joined_on(sql, &aliases, &column) {
        return None;
    }
    let lower = sql.to_ascii_lowercase();
    let in_string = in_string(sql);
    let bare: Vec<usize> = word_positions(sql, &column)
        .into_iter()
        .filter(|&p| {
            let before = lower[..p].trim_end();
            let after = sql[p + column.len()..].trim_start();
            !in_string(p)
                && !sql[..p].ends_with('.')
                && !sql[..p].ends_with('"')
                && !before.ends_with(" as")
                && !after.starts_with('(')
        })
        .collect();
    if bare.is_empty() {
        return None;
    }
    let qualifier = quote_ident(&owners[0].alias);
    let mut out = sql.to_string();
    for &p in bare.iter().rev() {
        out.insert_str(p, &format!("{qualifier}."));
    }
    let note = format!("{column} -> {qualifier}.{column} (joined on {column}: the values agree)");
    Some((out, note))
}

/// PostgreSQL's reserved key words and those that cannot name a table alias (the
/// `type_func_name` category), lowercased: `FROM inventory_snapshots is` stops the parser at
/// `is`. From the key-words appendix of the PostgreSQL manual (PostgreSQL 15).
#[rustfmt::skip]
const NOT_AN_ALIAS: &[&str] = &[
    "all", "analyse", "analyze", "and", "any", "array", "as", "asc", "asymmetric", "authorization",
    "binary", "both", "case", "cast", "check", "collate", "collation", "column", "concurrently",
    "constraint", "create", "cross", "current_catalog", "current_date", "current_role",
    "current_schema", "current_time", "current_timestamp", "current_user", "default", "deferrable",
    "desc", "distinct", "do", "else", "end", "except", "false", "fetch", "for", "foreign", "freeze",
    "from", "full", "grant", "group", "having", "ilike", "in", "initially", "inner", "intersect",
    "into", "is", "isnull", "join", "lateral", "leading", "left", "like", "limit", "localtime",
    "localtimestamp", "natural", "not", "notnull", "null", "offset", "on", "only", "or", "order",
    "outer", "overlaps", "placing", "primary", "references", "returning", "right", "select",
    "session_user", "similar", "some", "symmetric", "table", "tablesample", "then", "to",
    "trailing", "true", "union", "unique", "user", "using", "variadic", "verbose", "when", "where",
    "window", "with",
];

/// The deterministic repair of a table alias that is a reserved word (`JOIN inventory_snapshots
/// is ON c.id = is.car_id`): the parser reports a syntax error at the word; when the word
/// follows a table name of a FROM or JOIN item and qualifies columns later (`is.`), the alias
/// and each such qualifier become `<word>_` (when that name is free). Returns the new statement
/// and a note; it still has to pass validation.
pub fn dealiased(rej: &Rejection, sql: &str) -> Option<(String, String)> {
    if rej.sqlstate.as_deref() != Some(state::SYNTAX_ERROR) {
        return None;
    }
    let word = quoted_after(&rej.message, "at or near ")?.to_ascii_lowercase();
    if !NOT_AN_ALIAS.contains(&word.as_str()) || !sql.is_ascii() {
        return None;
    }
    let renamed = format!("{word}_");
    if !word_positions(sql, &renamed).is_empty() {
        return None;
    }
    let lower = sql.to_ascii_lowercase();
    let in_string = in_string(sql);
    let at = word_positions(sql, &word);
    // The alias: right after `FROM|JOIN|, <name>[.<name>] [AS]`.
    let defined = at.iter().copied().filter(|&p| !in_string(p)).find(|&p| {
        let mut before = lower[..p].split_whitespace().rev();
        let mut prev = before.next();
        if prev == Some("as") {
            prev = before.next();
        }
        let comma = prev.is_some_and(|n| n.starts_with(','));
        let named = prev.map(|n| n.trim_start_matches(',')).is_some_and(|n| {
            n.split('.').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !is_clause_word(part)
            })
        });
        let opener = before.next();
        named
            && (comma
                || matches!(opener, Some("from" | "join"))
                || opener.is_some_and(|o| o.ends_with(',')))
    })?;
    let uses: Vec<usize> = at
        .iter()
        .copied()
        .filter(|&p| p != defined && !in_string(p) && sql[p + word.len()..].starts_with('.'))
        .collect();
    if uses.is_empty() {
        return None;
    }
    let mut out = sql.to_string();
    let mut spans = uses;
    spans.push(defined);
    spans.sort_unstable();
    for &p in spans.iter().rev() {
        out.replace_range(p..p + word.len(), &renamed);
    }
    Some((out, format!("alias {word} -> {renamed} ({word} is a reserved word)")))
}

/// The deterministic repair of a table the statement uses but does not read: the server says
/// column `c` (or `q.c`) does not exist and no table among the statement's FROM items has it
/// while exactly one other shown table `t` does, or that the FROM clause lacks table `t`
/// (`missing FROM-clause entry for table "t"`, `t` a shown table's name); and `t` is linked to
/// exactly one FROM item by a declared single-column foreign key (either way). Then
/// `JOIN t ON <the key>` is written right after that item, and every `q.c` becomes `t.c`.
/// Returns the new statement and a note; it still has to pass validation.
pub fn joined(rej: &Rejection, sql: &str, shown: &SchemaInfo) -> Option<(String, String)> {
    let froms = from_items(sql);
    let read: Vec<(&FromItem, &Table)> =
        froms.iter().filter_map(|f| resolve(f, shown).map(|t| (f, t))).collect();
    if read.len() != froms.len() {
        return None; // a sub-select, a CTE or an unknown table among the FROM items
    }
    // The table to join, and the column reference to requalify.
    let (table, moved) = match rej.sqlstate.as_deref() {
        Some(state::UNDEFINED_COLUMN) => {
            let (q, column) = undefined_column(&rej.message)?;
            if read.iter().any(|(_, t)| t.columns.iter().any(|c| c.name == column)) {
                return None; // a FROM item has it: `requalified`'s case
            }
            let mut owners =
                shown.tables.iter().filter(|t| t.columns.iter().any(|c| c.name == column));
            let (table, None) = (owners.next()?, owners.next()) else { return None };
            (table, Some((q, column)))
        }
        Some(state::UNDEFINED_TABLE) => {
            let name = quoted_after(&rej.message, "missing FROM-clause entry for table ")?;
            let mut named = shown.tables.iter().filter(|t| t.name == name);
            let (table, None) = (named.next()?, named.next()) else { return None };
            (table, None)
        }
        _ => return None,
    };
    // Its bare name must be free in the statement: it qualifies the joined table's columns.
    if froms.iter().any(|f| f.alias == table.name || f.table.last() == Some(&table.name)) {
        return None;
    }
    let qualifier = quote_ident(&table.name);
    // The declared single-column keys between `from` and `to`, as join conditions.
    let keys = |from: &Table, from_q: &str, to: &Table, to_q: &str| -> Vec<String> {
        from.foreign_keys
            .iter()
            .filter(|fk| {
                fk.columns.len() == 1 && fk.ref_schema == to.schema && fk.ref_table == to.name
            })
            .map(|fk| {
                let (c, r) = (quote_ident(&fk.columns[0]), quote_ident(&fk.ref_columns[0]));
                format!("{from_q}.{c} = {to_q}.{r}")
            })
            .collect()
    };
    let mut links = Vec::new();
    for &(f, t) in &read {
        let alias = quote_ident(&f.alias);
        let mut on = keys(table, &qualifier, t, &alias);
        on.extend(keys(t, &alias, table, &qualifier));
        match on.len() {
            0 => {}
            1 => links.extend(on.into_iter().map(|on| (f, on))),
            _ => return None, // two keys between them: which one is meant is not clear
        }
    }
    let [(item, on)] = links.as_slice() else { return None };
    let at = declared_end(sql, item)?;
    let name = Renderer::new(shown).table_name(&table.schema, &table.name);
    let join = format!(" JOIN {name} ON {on}");
    // Edits from the end so offsets hold: the `q.c` qualifiers after the join, the join, the
    // qualifiers before it.
    let spans = match &moved {
        Some((Some(q), column)) => qualifier_spans(sql, q, column),
        _ => Vec::new(),
    };
    let mut out = sql.to_string();
    for span in spans.iter().rev().filter(|s| s.start >= at) {
        out.replace_range(span.clone(), &qualifier);
    }
    out.insert_str(at, &join);
    for span in spans.iter().rev().filter(|s| s.start < at) {
        out.replace_range(span.clone(), &qualifier);
    }
    let what = match &moved {
        Some((Some(q), column)) => format!("{q}.{column} -> {qualifier}.{column}: "),
        Some((None, column)) => format!("{column}: "),
        None => String::new(),
    };
    Some((out, format!("{what}joined{join}")))
}

/// The byte offset right after the declaration of FROM item `item` in `sql` (its name, and its
/// alias when it has one), the first time it is declared after FROM, JOIN or a comma.
fn declared_end(sql: &str, item: &FromItem) -> Option<usize> {
    let name = item.table.last()?;
    for p in word_positions(sql, name) {
        let mut before = sql[..p].trim_end();
        // A schema qualifier (`schema.` with the name), possibly quoted.
        if let Some(b) = before.strip_suffix('.') {
            before = b
                .trim_end()
                .trim_end_matches(|c: char| c.is_alphanumeric() || c == '_' || c == '"')
                .trim_end();
        }
        let lower = before.to_lowercase();
        let opens = lower.ends_with(',')
            || ["from", "join"].iter().any(|k| {
                lower.ends_with(k)
                    && !lower[..lower.len() - k.len()]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
        if !opens {
            continue;
        }
        let mut end = p + name.len();
        if sql[end..].starts_with('"') {
            end += 1;
        }
        if item.alias == *name {
            return Some(end);
        }
        let rest = &sql[end..];
        let after_ws = rest.len() - rest.trim_start().len();
        let mut next = &rest[after_ws..];
        let mut skip = after_ws;
        if next.len() > 2
            && next[..2].eq_ignore_ascii_case("as")
            && next[2..].starts_with(char::is_whitespace)
        {
            let t = next[2..].trim_start();
            skip += next.len() - t.len();
            next = t;
        }
        let alias_len = item.alias.len();
        if next.len() >= alias_len
            && next.is_char_boundary(alias_len)
            && next[..alias_len].eq_ignore_ascii_case(&item.alias)
            && !next[alias_len..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        {
            return Some(end + skip + alias_len);
        }
    }
    None
}

/// True when `sql` joins all of `aliases` on `column` with equalities (`a.c = b.c`, written
/// either way round), so that they hold the same value in every row the join yields.
fn joined_on(sql: &str, aliases: &[&str], column: &str) -> bool {
    // Whitespace collapsed, none around `=`, lowercased (aliases are folded the same way).
    let flat = sql.to_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = flat.replace(" =", "=").replace("= ", "=");
    let column = column.to_lowercase();
    let equal = |a: &str, b: &str| {
        let written = format!("{a}.{column}={b}.{column}");
        flat.match_indices(&written).any(|(i, _)| {
            let before = flat[..i].chars().next_back();
            let after = flat[i + written.len()..].chars().next();
            !before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '.')
                && !after.is_some_and(|ch| ch.is_alphanumeric() || ch == '_')
        })
    };
    let mut linked = vec![aliases[0]];
    while linked.len() < aliases.len() {
        let next = aliases
            .iter()
            .find(|a| !linked.contains(a) && linked.iter().any(|l| equal(l, a) || equal(a, l)));
        match next {
            Some(a) => linked.push(a),
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::repair::feedback::tests::{rej, shop};
    use crate::nl2sql::schema::tables::{Table, TableKind};

    /// A schema whose names keep their capitals (as a tool or another database made them).
    fn music() -> SchemaInfo {
        let track = Table::new("public", "Track", TableKind::Table)
            .column("TrackId", "integer", false)
            .column("Name", "text", false)
            .column("GenreId", "integer", true)
            .column("total", "numeric", true);
        let genre = Table::new("public", "Genre", TableKind::Table)
            .column("GenreId", "integer", false)
            .column("Name", "text", true);
        let both = Table::new("public", "odd", TableKind::Table)
            .column("Size", "integer", true)
            .column("SIZE", "integer", true)
            .column("Total", "integer", true);
        let mut s = SchemaInfo::new(vec![track, genre, both], Some("public"));
        s.normalize();
        s
    }

    #[test]
    fn mixed_case_names_written_without_quotes_are_quoted() {
        let s = music();
        let sql = "SELECT COUNT(T1.TrackId), name(x) FROM Track AS T1 INNER JOIN Genre AS T2 ON T1.GenreId = T2.GenreId WHERE T2.Name = 'Rock' -- Track\n AND \"Track\".x = 1";
        let (fixed, note) =
            requoted(&rej(state::UNDEFINED_TABLE, "relation \"track\" does not exist"), sql, &s)
                .expect("quoted");
        assert_eq!(
            fixed,
            "SELECT COUNT(T1.\"TrackId\"), name(x) FROM \"Track\" AS T1 INNER JOIN \"Genre\" AS T2 ON T1.\"GenreId\" = T2.\"GenreId\" WHERE T2.\"Name\" = 'Rock' -- Track\n AND \"Track\".x = 1"
        );
        assert_eq!(
            note,
            "quoted the mixed-case names \"TrackId\", \"Track\", \"Genre\", \"GenreId\", \"Name\""
        );
        // An undefined column too; a word that is a name as folded (total, which one table has
        // in lower case), or two spellings (Size, SIZE): left alone. Nothing to quote: None.
        let sql = "SELECT total, size, Total FROM odd";
        assert_eq!(
            requoted(&rej(state::UNDEFINED_COLUMN, "column x does not exist"), sql, &s),
            None
        );
        let sql = "SELECT TrackId FROM \"Track\"";
        let (fixed, _) =
            requoted(&rej(state::UNDEFINED_COLUMN, "column \"trackid\" does not exist"), sql, &s)
                .expect("quoted");
        assert_eq!(fixed, "SELECT \"TrackId\" FROM \"Track\"");
        // Another error: nothing.
        assert_eq!(requoted(&rej("42601", "syntax error"), sql, &s), None);
        // A lower-case schema: nothing ever changes.
        let plain = "SELECT Name FROM Customers";
        assert_eq!(
            requoted(
                &rej(state::UNDEFINED_TABLE, "relation \"customers\" does not exist"),
                plain,
                &shop()
            ),
            None
        );
    }

    #[test]
    fn a_column_on_the_wrong_alias_is_requalified_when_one_other_table_has_it_or_joined_ones() {
        let s = shop();
        let rej = |m: &str| rej(state::UNDEFINED_COLUMN, m);
        let sql = "SELECT AVG(c.total_price), C.total_price FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.total_price > 1 AND o.status <> 'c.total_price'";
        let (fixed, note) =
            requalified(&rej("column c.total_price does not exist"), sql, &s).expect("one owner");
        assert_eq!(fixed, "SELECT AVG(o.total_price), o.total_price FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.total_price > 1 AND o.status <> 'c.total_price'");
        assert_eq!(note, "c.total_price -> o.total_price (total_price is a column of orders, o)");
        // No other table has it, two have it, or another error: nothing.
        assert_eq!(requalified(&rej("column c.nothing does not exist"), sql, &s), None);
        let two =
            "SELECT c.total_price FROM customers c JOIN orders o ON true JOIN orders o2 ON true";
        assert_eq!(requalified(&rej("column c.total_price does not exist"), two, &s), None);
        // Two that the statement joins on the column itself hold the same value: the first.
        let joined = "SELECT c.total_price FROM customers c JOIN orders o ON o.customer_id = c.id JOIN orders o2 ON o2.total_price\n = O.total_price";
        let (fixed, _) =
            requalified(&rej("column c.total_price does not exist"), joined, &s).expect("joined");
        assert!(fixed.starts_with("SELECT o.total_price FROM"), "{fixed}");
        // Joined on something else, or the equality belongs to longer names: nothing.
        for other in [
            "SELECT c.total_price FROM customers c JOIN orders o ON true JOIN orders o2 ON o2.id = o.id",
            "SELECT c.total_price FROM customers c JOIN orders o ON true JOIN orders o2 ON xo2.total_price = o.total_price",
        ] {
            assert_eq!(requalified(&rej("column c.total_price does not exist"), other, &s), None);
        }
        assert_eq!(requalified(&rej("column \"total_price\" does not exist"), sql, &s), None);
        let other = Rejection {
            sqlstate: Some("42P01".into()),
            ..rej("column c.total_price does not exist")
        };
        assert_eq!(requalified(&other, sql, &s), None);
    }

    /// customers; orders(customer_id → customers); payments(order_id → orders);
    /// transfers(sender_id, receiver_id → customers); audit.events(order_id → orders).
    fn linked_shop() -> SchemaInfo {
        use crate::nl2sql::ForeignKey;
        let fk = |c: &str, s: &str, t: &str| ForeignKey {
            columns: vec![c.into()],
            ref_schema: s.into(),
            ref_table: t.into(),
            ref_columns: vec!["id".into()],
        };
        let customers = Table::new("public", "customers", TableKind::Table)
            .column("id", "integer", false)
            .column("name", "text", true);
        let mut orders = Table::new("public", "orders", TableKind::Table)
            .column("id", "integer", false)
            .column("customer_id", "integer", true)
            .column("total_price", "numeric", true);
        orders.foreign_keys = vec![fk("customer_id", "public", "customers")];
        let mut payments = Table::new("public", "payments", TableKind::Table)
            .column("id", "integer", false)
            .column("order_id", "integer", true)
            .column("paid_on", "date", true);
        payments.foreign_keys = vec![fk("order_id", "public", "orders")];
        let mut transfers = Table::new("public", "transfers", TableKind::Table)
            .column("id", "integer", false)
            .column("sender_id", "integer", true)
            .column("receiver_id", "integer", true)
            .column("amount", "numeric", true);
        transfers.foreign_keys =
            vec![fk("sender_id", "public", "customers"), fk("receiver_id", "public", "customers")];
        let mut events = Table::new("audit", "events", TableKind::Table)
            .column("id", "integer", false)
            .column("order_id", "integer", true)
            .column("happened_at", "timestamp", true);
        events.foreign_keys = vec![fk("order_id", "public", "orders")];
        let mut s =
            SchemaInfo::new(vec![customers, orders, payments, transfers, events], Some("public"));
        s.normalize();
        s
    }

    #[test]
    fn a_table_used_but_not_read_is_joined_on_its_declared_key() {
        let s = linked_shop();
        let col = |m: &str| rej(state::UNDEFINED_COLUMN, m);
        // An unqualified column only a neighbour has: joined right after the item it references.
        let sql = "SELECT c.name, paid_on FROM orders o JOIN customers c ON c.id = o.customer_id WHERE paid_on > '2024-01-01'";
        let (fixed, note) =
            joined(&col("column \"paid_on\" does not exist"), sql, &s).expect("joined");
        assert_eq!(fixed, "SELECT c.name, paid_on FROM orders o JOIN payments ON payments.order_id = o.id JOIN customers c ON c.id = o.customer_id WHERE paid_on > '2024-01-01'");
        assert_eq!(note, "paid_on: joined JOIN payments ON payments.order_id = o.id");
        // On the wrong alias: requalified to the joined table.
        let sql = "SELECT o.paid_on FROM orders AS o WHERE o.paid_on IS NOT NULL";
        let (fixed, note) =
            joined(&col("column o.paid_on does not exist"), sql, &s).expect("joined");
        assert_eq!(fixed, "SELECT payments.paid_on FROM orders AS o JOIN payments ON payments.order_id = o.id WHERE payments.paid_on IS NOT NULL");
        assert_eq!(
            note,
            "o.paid_on -> payments.paid_on: joined JOIN payments ON payments.order_id = o.id"
        );
        // A table named but not in FROM; the referenced side joined to the referencing one.
        let sql = "SELECT count(*) FROM customers c WHERE orders.total_price > 10";
        let r = rej(state::UNDEFINED_TABLE, "missing FROM-clause entry for table \"orders\"");
        let (fixed, _) = joined(&r, sql, &s).expect("joined");
        assert_eq!(fixed, "SELECT count(*) FROM customers c JOIN orders ON orders.customer_id = c.id WHERE orders.total_price > 10");
        // Outside the default schema: the join names the schema.
        let sql = "SELECT happened_at FROM orders";
        let (fixed, _) =
            joined(&col("column \"happened_at\" does not exist"), sql, &s).expect("joined");
        assert_eq!(
            fixed,
            "SELECT happened_at FROM orders JOIN audit.events ON events.order_id = orders.id"
        );
    }

    #[test]
    fn a_table_is_joined_only_when_the_key_is_clear() {
        let s = linked_shop();
        let col = |m: &str| rej(state::UNDEFINED_COLUMN, m);
        for (sql, message) in [
            // Two keys to customers (sender, receiver).
            ("SELECT sum(amount) FROM customers c", "column \"amount\" does not exist"),
            // No key between payments and customers.
            ("SELECT paid_on FROM customers c", "column \"paid_on\" does not exist"),
            // Linked to two FROM items.
            (
                "SELECT total_price FROM customers c, payments p",
                "column \"total_price\" does not exist",
            ),
            // A FROM item has the column: requalification's case, not this one.
            (
                "SELECT c.total_price FROM customers c JOIN orders o ON o.customer_id = c.id",
                "column c.total_price does not exist",
            ),
            // Several tables have it.
            ("SELECT order_id FROM customers c", "column \"order_id\" does not exist"),
            // A CTE among the FROM items.
            (
                "WITH w AS (SELECT 1) SELECT paid_on FROM orders o, w",
                "column \"paid_on\" does not exist",
            ),
            // The bare name is taken already.
            ("SELECT paid_on FROM orders payments", "column \"paid_on\" does not exist"),
        ] {
            assert_eq!(joined(&col(message), sql, &s), None, "{sql}");
        }
        let sql = "SELECT 1 FROM customers c WHERE x.id = 1";
        let r = rej(state::UNDEFINED_TABLE, "missing FROM-clause entry for table \"x\"");
        assert_eq!(joined(&r, sql, &s), None);
    }

    #[test]
    fn an_ambiguous_column_joined_on_is_qualified() {
        let sql = "SELECT ins_type, COUNT(DISTINCT patient_id) AS patient_id FROM outcomes JOIN treatments ON outcomes.treatment_id = treatments.treatment_id JOIN patients ON treatments.patient_id = patients.patient_id GROUP BY ins_type";
        let r = rej("42702", "column reference \"patient_id\" is ambiguous");
        let (fixed, note) = disambiguated(&r, sql, &clinic()).expect("qualified");
        assert_eq!(
            fixed,
            "SELECT ins_type, COUNT(DISTINCT treatments.patient_id) AS patient_id FROM outcomes JOIN treatments ON outcomes.treatment_id = treatments.treatment_id JOIN patients ON treatments.patient_id = patients.patient_id GROUP BY ins_type"
        );
        assert_eq!(
            note,
            "patient_id -> treatments.patient_id (joined on patient_id: the values agree)"
        );
        // Not joined on it: the values may differ, nothing is rewritten.
        let unjoined = "SELECT patient_id FROM treatments JOIN patients ON treatments.doc_id = patients.patient_id";
        assert_eq!(disambiguated(&r, unjoined, &clinic()), None);
    }

    /// outcomes(treatment_id), treatments(treatment_id, patient_id, doc_id), patients(patient_id, ins_type).
    fn clinic() -> SchemaInfo {
        let table = |name: &str, cols: &[&str]| {
            let mut t = Table::new("public", name, crate::nl2sql::TableKind::Table);
            t.columns = cols
                .iter()
                .map(|c| crate::nl2sql::Column {
                    name: (*c).into(),
                    data_type: "integer".into(),
                    ..crate::nl2sql::Column::default()
                })
                .collect();
            t
        };
        SchemaInfo {
            tables: vec![
                table("outcomes", &["treatment_id"]),
                table("treatments", &["treatment_id", "patient_id", "doc_id"]),
                table("patients", &["patient_id", "ins_type"]),
            ],
            ..SchemaInfo::default()
        }
    }

    #[test]
    fn a_reserved_word_alias_is_renamed() {
        let sql = "SELECT c.make, MAX(s.price) FROM cars c JOIN inventory is ON c.id = is.car_id WHERE is.in_stock = FALSE GROUP BY c.make";
        let r = rej("42601", "syntax error at or near \"is\"");
        let (fixed, note) = dealiased(&r, sql).expect("renamed");
        assert_eq!(
            fixed,
            "SELECT c.make, MAX(s.price) FROM cars c JOIN inventory is_ ON c.id = is_.car_id WHERE is_.in_stock = FALSE GROUP BY c.make"
        );
        assert_eq!(note, "alias is -> is_ (is is a reserved word)");
        let listed = "SELECT or.id FROM customers AS c, orders or WHERE or.cid = c.id";
        assert_eq!(
            dealiased(&rej("42601", "syntax error at or near \"or\""), listed).map(|f| f.0),
            Some("SELECT or_.id FROM customers AS c, orders or_ WHERE or_.cid = c.id".into())
        );
        // Not an alias, not used as a qualifier, another error, or the new name taken: nothing.
        for (sql, msg) in [
            ("SELECT a FROM t WHERE x is", "syntax error at or near \"is\""),
            ("SELECT a FROM t is WHERE a > 1", "syntax error at or near \"is\""),
            ("SELECT is.a FROM t is", "syntax error at or near \"FROM\""),
            ("SELECT is.a, is_ FROM t is", "syntax error at or near \"is\""),
        ] {
            assert_eq!(dealiased(&rej("42601", msg), sql), None, "{sql}");
        }
        assert_eq!(dealiased(&rej("42703", "syntax error at or near \"is\""), sql), None);
    }
}
