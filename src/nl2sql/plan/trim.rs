//! Deterministic schema trimming when the whole schema does not fit the context budget.
//!
//! Order of preference: tables whose name or column names share a word with the question
//! (name matches weigh more), then their foreign-key neighbours, then every other table in
//! schema order. Tables are added whole, greedily in that order, while they fit; a table that
//! does not fit is skipped (never cut), and later smaller ones may still go in. When the tables
//! span several schemas, those of the search path's first schema go first: all of them, with
//! only the tables of other schemas ranked ahead of every home table, when they fit that way;
//! else within half the budget ([`select_home_first`]). The kept tables are rendered in schema
//! order, the home schema's first, so the prompt does not depend on the order they were picked
//! in.

use crate::nl2sql::schema::tables::{SchemaInfo, Table};
use std::collections::BTreeSet;

/// Weight of a question word found in a table's name (vs. 1 for a column name).
const NAME_MATCH_WEIGHT: u32 = 3;

/// Weight of a question word found inside a longer word of a table's name: names written run
/// together (`sbcustomer`, `dailyprice`: PostgreSQL folds `sbCustomer` to lower case, so the
/// word boundaries are gone) or behind a prefix every table of a schema shares. Below a whole
/// word, since a word can also hide by chance inside another (`rate` in `corporate`).
const NAME_PART_WEIGHT: u32 = 2;

/// Shortest question word looked for inside a name word: shorter ones (`id`, `day`, `age`) sit
/// inside too many unrelated names to say anything.
const MIN_PART_CHARS: usize = 4;

/// Question words too common to say anything about which table is meant.
const STOP_WORDS: &[&str] = &[
    "a", "all", "an", "and", "are", "as", "at", "by", "can", "did", "do", "does", "each", "for",
    "from", "give", "has", "have", "how", "in", "is", "it", "list", "many", "me", "much", "number",
    "of", "on", "or", "per", "show", "that", "the", "their", "there", "this", "to", "total", "was",
    "were", "what", "when", "where", "which", "who", "with",
];

/// Which tables to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Indices of kept tables, ascending (schema order).
    pub shown: Vec<usize>,
    /// Indices of dropped tables, ascending.
    pub dropped: Vec<usize>,
    /// Sum of the kept tables' token counts.
    pub tokens: usize,
}

/// Lowercase words of `s` (split on anything not a letter or digit, so `order_items` gives
/// `order`, `item`), singularised, without stop words.
pub fn words(s: &str) -> BTreeSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| singular(&w.to_lowercase()))
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

/// A crude English singular: `categories` -> `category`, `addresses` -> `address`, `users` -> `user`.
fn singular(w: &str) -> String {
    if w.len() > 4 && w.ends_with("ies") {
        format!("{}y", &w[..w.len() - 3])
    } else if w.len() > 4
        && (w.ends_with("sses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes"))
    {
        w[..w.len() - 2].to_string()
    } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

/// A table's words as [`matches`] compares them: its name's and its columns' names' ([`words`]).
#[derive(Clone, Debug)]
pub struct TableWords {
    name: BTreeSet<String>,
    columns: BTreeSet<String>,
}

impl TableWords {
    pub fn of(t: &Table) -> TableWords {
        TableWords {
            name: words(&t.name),
            columns: t.columns.iter().flat_map(|c| words(&c.name)).collect(),
        }
    }

    /// How strongly the table matches the question's words `q`.
    fn score(&self, q: &BTreeSet<String>) -> u32 {
        q.iter()
            .map(|w| {
                if self.name.contains(w) {
                    NAME_MATCH_WEIGHT
                } else if w.len() >= MIN_PART_CHARS
                    && self.name.iter().any(|n| n.len() > w.len() && n.contains(w.as_str()))
                {
                    NAME_PART_WEIGHT
                } else if self.columns.contains(w) {
                    1
                } else {
                    0
                }
            })
            .sum()
    }
}

/// The tables that share a word with the question, best match first (ties by schema order).
pub fn matches(schema: &SchemaInfo, question: &str) -> Vec<usize> {
    let tables: Vec<TableWords> = schema.tables.iter().map(TableWords::of).collect();
    matches_in(&tables, question)
}

/// [`matches`] over the tables' words computed before (one per table, in schema order).
pub fn matches_in(tables: &[TableWords], question: &str) -> Vec<usize> {
    let q = words(question);
    let scores: Vec<u32> = tables.iter().map(|t| t.score(&q)).collect();
    let mut matched: Vec<usize> = (0..tables.len()).filter(|&i| scores[i] > 0).collect();
    matched.sort_by(|&a, &b| scores[b].cmp(&scores[a]).then(a.cmp(&b)));
    matched
}

/// The order in which tables are offered to the budget: matches (best first), their FK
/// neighbours, then the rest; ties broken by schema order.
pub fn priority(schema: &SchemaInfo, question: &str) -> Vec<usize> {
    let n = schema.tables.len();
    let matched = matches(schema, question);
    let mut order = matched.clone();
    let mut seen = vec![false; n];
    for &i in &order {
        seen[i] = true;
    }
    for &i in &matched {
        for j in schema.fk_neighbours(i) {
            if !seen[j] {
                seen[j] = true;
                order.push(j);
            }
        }
    }
    order.extend((0..n).filter(|&i| !seen[i]));
    order
}

/// Picks whole tables, in [`priority`] order, whose token counts (`table_tokens[i]`) fit in
/// `budget`. All tables are kept when they all fit.
pub fn select(
    schema: &SchemaInfo,
    question: &str,
    table_tokens: &[usize],
    budget: usize,
) -> Selection {
    assert_eq!(table_tokens.len(), schema.tables.len(), "one token count per table");
    let total: usize = table_tokens.iter().sum();
    if total <= budget {
        let n = schema.tables.len();
        return Selection { shown: (0..n).collect(), dropped: Vec::new(), tokens: total };
    }
    select_in(&priority(schema, question), table_tokens, budget)
}

/// Picks whole tables in the order `order` (every table index once) whose token counts fit in
/// `budget`, as [`select`] does.
pub fn select_in(order: &[usize], table_tokens: &[usize], budget: usize) -> Selection {
    select_counted(order, table_tokens.len(), |i| Ok::<_, ()>(table_tokens[i]), budget)
        .expect("counts never fail")
}

/// Consecutive tables that do not fit after which [`select_counted`] stops looking: on a
/// schema of thousands of tables the rest would all be counted for a few more tokens.
pub const MAX_MISSES: usize = 32;

/// [`select_in`] over `n` tables whose token counts `count(i)` are asked only for the tables
/// visited: the walk stops when the budget is full or after [`MAX_MISSES`] tables in a row
/// that did not fit.
pub fn select_counted<E>(
    order: &[usize],
    n: usize,
    mut count: impl FnMut(usize) -> Result<usize, E>,
    budget: usize,
) -> Result<Selection, E> {
    let mut keep = vec![false; n];
    let used = walk(order, &mut keep, 0, &mut count, budget)?;
    Ok(selection(keep, used))
}

/// The part of the budget a home schema is sure of: half. Not tuned on any data: enough for a
/// home schema of a few dozen tables to be shown whole, while the tables the question points at
/// elsewhere keep at least the other half.
pub const HOME_SHARE_DIVISOR: usize = 2;

/// [`select_counted`] where the tables `home(i)` holds for (those of the search path's first
/// schema, the ones an unqualified query names) go first. The tables of other schemas that the
/// ranking puts ahead of every home table are those the question points at more than at
/// anything at home (`order` follows each table with the tables its keys reference, so those
/// come along); call them the tables ahead.
/// - **The home schema fits its share** (`budget / HOME_SHARE_DIVISOR`): it is shown whole, and
///   the tables ahead get the rest of the budget, as many as fit.
/// - **Else, it fits beside the tables ahead**: those go in first, as many as fit the budget,
///   then the whole home schema.
/// - **Else**: the home tables in `order`'s order within the share, then every table by rank
///   within what is left.
///
/// In the first two cases the prompt is the home schema plus the few tables the question is
/// about elsewhere: about as short as the home schema's own, and beginning alike from one
/// question to the next. The user's own schema comes first, as PostgreSQL resolves an
/// unqualified name to it first. When every table (or none) is at home this is
/// [`select_counted`].
pub fn select_home_first<E>(
    order: &[usize],
    n: usize,
    home: impl Fn(usize) -> bool,
    mut count: impl FnMut(usize) -> Result<usize, E>,
    budget: usize,
) -> Result<Selection, E> {
    let home_order: Vec<usize> = order.iter().copied().filter(|&i| home(i)).collect();
    if home_order.is_empty() || home_order.len() == order.len() {
        // One schema (or none at home): nothing to put first.
        return select_counted(order, n, count, budget);
    }
    let ahead = &order[..order.iter().position(|&i| home(i)).unwrap_or(order.len())];
    let share = budget / HOME_SHARE_DIVISOR;
    let mut keep = vec![false; n];
    if let Some(used) = walk_all(&home_order, &mut keep, 0, &mut count, share)? {
        // Whole within its share: what ranks ahead of it gets the rest.
        let used = walk(ahead, &mut keep, used, &mut count, budget)?;
        return Ok(selection(keep, used));
    }
    let used = walk(ahead, &mut keep, 0, &mut count, budget)?;
    if let Some(used) = walk_all(&home_order, &mut keep, used, &mut count, budget)? {
        // Whole beside what ranks ahead of it.
        return Ok(selection(keep, used));
    }
    let mut keep = vec![false; n];
    let used = walk(&home_order, &mut keep, 0, &mut count, share)?;
    let used = walk(order, &mut keep, used, &mut count, budget)?;
    Ok(selection(keep, used))
}

/// Marks every table of `order` in `keep` and returns the tokens used, if they all fit in
/// `budget` on top of `used`; `None` (and `keep` unchanged for them) if not. Stops counting at
/// the first table that does not fit.
fn walk_all<E>(
    order: &[usize],
    keep: &mut [bool],
    mut used: usize,
    count: &mut impl FnMut(usize) -> Result<usize, E>,
    budget: usize,
) -> Result<Option<usize>, E> {
    for &i in order {
        used += count(i)?;
        if used > budget {
            return Ok(None);
        }
    }
    order.iter().for_each(|&i| keep[i] = true);
    Ok(Some(used))
}

/// Marks in `keep` the tables of `order` not kept yet that fit in `budget` on top of `used`
/// tokens, stopping after [`MAX_MISSES`] misses in a row; returns the tokens used.
fn walk<E>(
    order: &[usize],
    keep: &mut [bool],
    mut used: usize,
    count: &mut impl FnMut(usize) -> Result<usize, E>,
    budget: usize,
) -> Result<usize, E> {
    let mut misses = 0;
    for &i in order {
        if used >= budget || misses >= MAX_MISSES {
            break;
        }
        if keep[i] {
            continue;
        }
        let t = count(i)?;
        if used + t <= budget {
            used += t;
            keep[i] = true;
            misses = 0;
        } else {
            misses += 1;
        }
    }
    Ok(used)
}

fn selection(keep: Vec<bool>, used: usize) -> Selection {
    let n = keep.len();
    Selection {
        shown: (0..n).filter(|&i| keep[i]).collect(),
        dropped: (0..n).filter(|&i| !keep[i]).collect(),
        tokens: used,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::schema::tables::{ForeignKey, Table, TableKind};

    /// addresses, categories, order_items, orders, products, reviews, users (after normalize).
    fn shop() -> SchemaInfo {
        let fk = |cols: &str, t: &str| ForeignKey {
            columns: vec![cols.into()],
            ref_schema: "public".into(),
            ref_table: t.into(),
            ref_columns: vec!["id".into()],
        };
        let users = Table::new("public", "users", TableKind::Table)
            .column("id", "integer", false)
            .column("email", "text", false);
        let mut orders = Table::new("public", "orders", TableKind::Table)
            .column("id", "integer", false)
            .column("user_id", "integer", false);
        orders.foreign_keys.push(fk("user_id", "users"));
        let mut items = Table::new("public", "order_items", TableKind::Table)
            .column("order_id", "integer", false)
            .column("product_id", "integer", false);
        items.foreign_keys.push(fk("order_id", "orders"));
        items.foreign_keys.push(fk("product_id", "products"));
        let mut products = Table::new("public", "products", TableKind::Table)
            .column("id", "integer", false)
            .column("price", "numeric", false);
        products.foreign_keys.push(fk("category_id", "categories"));
        let categories =
            Table::new("public", "categories", TableKind::Table).column("id", "integer", false);
        let addresses =
            Table::new("public", "addresses", TableKind::Table).column("city", "text", false);
        let reviews =
            Table::new("public", "reviews", TableKind::Table).column("rating", "integer", false);
        let mut s = SchemaInfo::new(
            vec![users, orders, items, products, categories, addresses, reviews],
            Some("public"),
        );
        s.normalize();
        s
    }

    fn names(s: &SchemaInfo, idx: &[usize]) -> Vec<String> {
        idx.iter().map(|&i| s.tables[i].name.clone()).collect()
    }

    #[test]
    fn words_are_split_singularised_and_filtered() {
        let w: Vec<String> = words("How many order_items per Category? addresses, boxes, status")
            .into_iter()
            .collect();
        assert_eq!(w, ["address", "box", "category", "item", "order", "status"]);
    }

    #[test]
    fn run_together_names_match_inside() {
        let mut s = SchemaInfo::default();
        s.tables.push(Table::new("public", "sbdailyprice", TableKind::Table).column(
            "sbdpclose",
            "numeric",
            true,
        ));
        s.tables.push(Table::new("public", "sbcustomer", TableKind::Table).column(
            "sbcustname",
            "text",
            true,
        ));
        s.tables
            .push(Table::new("public", "corporate", TableKind::Table).column("id", "int", true));
        s.tables.push(Table::new("public", "customer", TableKind::Table).column("id", "int", true));
        // A whole word first, then the name it hides in; a short word (`day`) is not looked for.
        assert_eq!(matches(&s, "which customers"), vec![3, 1]);
        assert_eq!(matches(&s, "the daily prices"), vec![0]);
        assert!(matches(&s, "each day").is_empty());
    }

    #[test]
    fn everything_fits_keeps_everything() {
        let s = shop();
        let sel = select(&s, "how many users?", &[10; 7], 70);
        assert_eq!(sel.shown, (0..7).collect::<Vec<_>>());
        assert!(sel.dropped.is_empty());
        assert_eq!(sel.tokens, 70);
    }

    #[test]
    fn matches_then_neighbours_then_rest() {
        let s = shop();
        let p = priority(&s, "average price of products by user");
        // products: name (3) + column price (1); users: name (3); order_items and orders match
        // through product_id / user_id columns (1 each); then the neighbours; then the rest.
        assert_eq!(
            names(&s, &p),
            ["products", "users", "order_items", "orders", "categories", "addresses", "reviews"]
        );
    }

    #[test]
    fn trimming_keeps_whole_tables_within_budget() {
        let s = shop();
        let tokens = [10, 10, 10, 10, 10, 10, 10];
        let sel = select(&s, "how many users?", &tokens, 25);
        assert_eq!(names(&s, &sel.shown), ["orders", "users"]);
        assert_eq!(
            names(&s, &sel.dropped),
            ["addresses", "categories", "order_items", "products", "reviews"]
        );
        assert_eq!(sel.tokens, 20);
        // A big matched table is skipped, not cut; smaller ones still fill the budget.
        let mut big = tokens;
        big[s.find("public", "users").unwrap()] = 100;
        let sel = select(&s, "how many users?", &big, 25);
        assert!(!sel.shown.contains(&s.find("public", "users").unwrap()));
        assert_eq!(sel.tokens, 20);
        // Deterministic.
        assert_eq!(sel, select(&s, "how many users?", &big, 25));
        // Nothing fits.
        let sel = select(&s, "x", &tokens, 5);
        assert!(sel.shown.is_empty());
        assert_eq!(sel.dropped.len(), 7);
    }

    #[test]
    fn home_tables_go_first_within_their_share() {
        // Tables 0-5, 10 tokens each; 1, 3 and 5 at home; the ranking prefers 0, 2, 4.
        let order = [0, 2, 4, 1, 3, 5];
        let home = |i: usize| i % 2 == 1;
        let count = |_: usize| Ok::<_, ()>(10);
        let pick = |budget| select_home_first(&order, 6, home, count, budget).unwrap().shown;
        // Room for everything ranked ahead of the home schema and the whole home schema.
        assert_eq!(pick(60), [0, 1, 2, 3, 4, 5]);
        // 40: home (30) is more than half, and 0, 2 and 4 leave it 10; so half of 40 holds two
        // home tables (in ranking order), the rest goes by rank.
        assert_eq!(pick(40), [0, 1, 2, 3]);
        // A home table too big for the share is skipped there; a smaller one goes in.
        let pick_big = |budget| {
            select_home_first(
                &order,
                6,
                home,
                |i| Ok::<_, ()>(if i == 3 { 25 } else { 10 }),
                budget,
            )
            .unwrap()
            .shown
        };
        assert_eq!(pick_big(40), [0, 1, 2, 5]);
        // All at home, or none: the plain walk.
        let plain = select_counted(&order, 6, count, 30).unwrap();
        assert_eq!(select_home_first(&order, 6, |_| true, count, 30).unwrap(), plain);
        assert_eq!(select_home_first(&order, 6, |_| false, count, 30).unwrap(), plain);
    }

    #[test]
    fn a_whole_home_schema_admits_only_what_ranks_ahead_of_it() {
        // Tables 0-7, 10 tokens each; 1 and 3 at home. The ranking: 4, 6, 7 (others), then
        // home table 3, then 0, 1, 2, 5.
        let order = [4, 6, 7, 3, 0, 1, 2, 5];
        let home = |i: usize| i == 1 || i == 3;
        let count = |_: usize| Ok::<_, ()>(10);
        let pick =
            |order: &[usize], budget| select_home_first(order, 8, home, count, budget).unwrap();
        // Home within its share (20 of 40): shown whole, and only 4, 6 and 7 from elsewhere.
        let sel = pick(&order, 80);
        assert_eq!(sel.shown, [1, 3, 4, 6, 7]);
        assert_eq!(sel.tokens, 50);
        // A home table ranked first: nothing from elsewhere, whatever the room.
        assert_eq!(pick(&[1, 4, 6, 3, 0, 2, 5, 7], 80).shown, [1, 3]);
        // The tables ahead get what the home schema leaves: 25 of 45, two of them.
        assert_eq!(pick(&order, 45).shown, [1, 3, 4, 6]);

        // Home tables of 20 tokens: 40, more than half of 70 or 60.
        let count = |i: usize| Ok::<_, ()>(if home(i) { 20 } else { 10 });
        let pick = |budget| select_home_first(&order, 8, home, count, budget).unwrap().shown;
        // 70: the three ahead (30), then the whole home schema beside them.
        assert_eq!(pick(70), [1, 3, 4, 6, 7]);
        // 60: not both; half of 60 for home (table 3, ranked first), then by rank: 4, 6, 7, 0.
        assert_eq!(pick(60), [0, 3, 4, 6, 7]);
    }
}
