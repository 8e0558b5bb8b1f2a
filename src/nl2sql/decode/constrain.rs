//! Schema-constrained identifiers: while the model writes a table or column name, only names
//! that exist in the visible schema (or were declared in the text: aliases, CTEs, output
//! columns) are allowed; everything else the model writes (keywords, functions, literals,
//! aliases being declared) passes untouched.
//!
//! A light lexer and clause tracker ([`Names::check`]) decides, for the text generated so far
//! plus one candidate token, whether every identifier the candidate touches is acceptable in its
//! position. [`Constrainer::choose`] walks the top-K logits in order and takes the first
//! acceptable token, falling back to plain argmax when none is.

use crate::nl2sql::decode::sql_words::SQL_WORDS;
use crate::nl2sql::schema::tables::SchemaInfo;
use crate::nl2sql::sql::ident::is_non_unreserved_keyword;
use crate::nl2sql::sql::lexer::{self, Kind, Token};
use crate::tokenizer::Tokenizer;
use std::collections::HashMap;

/// Candidates tried per step, best logit first: deep enough to reach the right spelling when the
/// model's first choice is a non-existent name, shallow enough to stay off the decode's hot path.
pub const TOP_K: usize = 64;

/// Longest qualifier accepted before it is declared: `SELECT o.x ... FROM orders o` uses alias
/// `o` before the FROM clause declares it; such aliases are short (initials, `ord`, `cust`).
const MAX_FORWARD_ALIAS: usize = 4;

/// What a name in the text stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// Table `i` of the schema.
    Table(usize),
    /// A CTE or subquery: its columns are whatever its SELECT list says.
    Derived,
    /// A schema name (a qualifier of table names).
    Schema,
}

/// Which names may fill the next identifier position.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// Anything (keywords, alias declarations, positions the tracker does not model).
    Free,
    /// A relation after FROM / JOIN / `,` in a FROM list (`Some(schema)` after `schema.`).
    Table(Option<String>),
    /// A column of table `i` (after `alias.` / `table.`).
    ColumnOf(usize),
    /// A column of any visible table (after an alias not declared yet).
    AnyColumn,
    /// An expression operand: a column in scope, a keyword, a function, a declared name.
    Expr,
}

/// The clause a parenthesis level is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clause {
    None,
    With,
    Select,
    From,
    Where,
    List,
    Other,
}

/// The pieces the clause tracker reads an operator or punctuation token as, one at a time:
/// `::`, `<=`, `>=`, `<>`, `!=` and `||` whole, every other character alone (`->>` is `-`, `>`,
/// `>`): the tracker's rules are written for these pieces.
fn pieces(op: &str) -> impl Iterator<Item = &str> {
    let mut rest = op;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let two = ["::", "<=", ">=", "<>", "!=", "||"].iter().any(|o| rest.starts_with(o));
        let n = if two { 2 } else { first.len_utf8() };
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        Some(piece)
    })
}

/// True for a token the tracker reads as pieces (see [`pieces`]).
fn is_op(t: &Token) -> bool {
    matches!(t.kind, Kind::Operator | Kind::Punct | Kind::Other)
}

/// The name of an identifier token as the tracker compares it (`lower` for unquoted words,
/// exact for quoted) and whether it was quoted.
fn word_of(t: &Token) -> Option<(String, bool)> {
    let quoted = t.kind == Kind::QuotedIdent;
    let name = t.name()?;
    Some((if quoted { name.into_owned() } else { name.to_lowercase() }, quoted))
}

/// The SQL part of an answer: after an opening code fence's first line (`None` while that
/// line is still being written).
fn sql_part(text: &str) -> Option<(usize, &str)> {
    let t = text.trim_start();
    let lead = text.len() - t.len();
    if t.starts_with("```") {
        let nl = t.find('\n')?;
        return Some((lead + nl + 1, &t[nl + 1..]));
    }
    Some((lead, t))
}

/// False when `sql` (lexed into `toks`) has, at or after byte `from`, a backtick that is an
/// operator character (not inside a string, quoted identifier or comment) and not part of a
/// code fence (a run of three, or one at the start of a line): PostgreSQL has no backtick
/// quoting (`T2.\`date\``, a MySQL habit, never parses).
fn backticks_ok(sql: &str, toks: &[Token], from: usize) -> bool {
    let b = sql.as_bytes();
    toks.iter().filter(|t| t.kind == Kind::Operator && t.end() > from).all(|t| {
        t.text.match_indices('`').map(|(p, _)| t.start + p).filter(|&i| i + 1 > from).all(|i| {
            let line = &sql[sql[..i].rfind('\n').map_or(0, |n| n + 1)..i];
            let fence = (i.saturating_sub(2)..=i).any(|k| b.get(k..k + 3) == Some(b"```"));
            fence || line.chars().all(|c| c.is_whitespace() || c == '`')
        })
    })
}

/// True for words that open an expression operand after them.
fn opens_expr(w: &str) -> bool {
    matches!(
        w,
        "select"
            | "distinct"
            | "where"
            | "and"
            | "or"
            | "not"
            | "on"
            | "by"
            | "having"
            | "when"
            | "then"
            | "else"
            | "case"
            | "between"
            | "is"
            | "like"
            | "ilike"
            | "return"
            | "returning"
            | "set"
            | "all"
            | "any"
            | "some"
    )
}

/// True for a keyword or function name that may stand where a column could.
fn is_keyword(w: &str) -> bool {
    SQL_WORDS.contains(&w) || is_non_unreserved_keyword(w)
}

/// The visible schema's names, lowercase-indexed for lookups.
#[derive(Debug, Clone)]
pub struct Names {
    /// Per table: (schema, name, columns).
    tables: Vec<(String, String, Vec<String>)>,
    /// Aliases known before the text declares them (from an earlier draft of the same answer):
    /// lookup key -> table index. `alias.` then offers only that table's columns.
    hints: HashMap<String, usize>,
    /// Strict mode (repair rounds): only known SQL functions may be called, and a word being
    /// written must still be able to become a known name (a small model otherwise invents a
    /// function or an ever-growing identifier named after the column it was told is missing).
    known_calls_only: bool,
}

/// The tracker's state after a prefix of the text.
#[derive(Debug)]
struct State<'n> {
    names: &'n Names,
    /// Per open parenthesis (and the top level): the clause it is in and whether it opened a
    /// subquery (saw SELECT).
    frames: Vec<(Clause, bool)>,
    /// Declared aliases, CTE names and output-column aliases.
    declared: HashMap<String, Target>,
    /// Tables referenced so far (for the expression scope).
    referenced: Vec<Target>,
    /// The slot the next word fills.
    slot: Slot,
    /// The previous token, when it was a word.
    prev_word: Option<(String, bool)>,
    /// After a relation in FROM: the next plain word (or the word after AS) declares its alias.
    alias_for: Option<Target>,
    /// After `AS` in a SELECT list / WITH: the next word is a declared name.
    declaring: Option<Target>,
    /// The target of `word .` awaiting the word after the dot.
    qualifier: Option<Option<Target>>,
    /// Qualifiers used before their declaration (`SELECT o.x ... FROM orders o`) and the
    /// columns used with them: the alias a relation later declares must have those columns.
    forward: HashMap<String, Vec<String>>,
    /// The undeclared qualifier of the current `AnyColumn` slot.
    forward_of: Option<String>,
    /// The previous token declared a relation's alias (`FROM orders o`): `AS` cannot follow.
    after_alias: bool,
}

impl Names {
    /// The names of every table of `schema` (the tables shown in the prompt).
    pub fn new(schema: &SchemaInfo) -> Names {
        let fold = |s: &str| s.to_string();
        Names {
            tables: schema
                .tables
                .iter()
                .map(|t| {
                    (
                        fold(&t.schema),
                        fold(&t.name),
                        t.columns.iter().map(|c| fold(&c.name)).collect(),
                    )
                })
                .collect(),
            hints: HashMap::new(),
            known_calls_only: false,
        }
    }

    /// Adds alias hints: `(alias as written, unquoted?, table index of the schema)`. A hinted
    /// alias used before its declaration (`SELECT o.x ... FROM orders o`) offers only its
    /// table's columns instead of every visible column.
    pub fn with_hints(mut self, hints: impl IntoIterator<Item = (String, bool, usize)>) -> Names {
        for (alias, quoted, i) in hints {
            if i < self.tables.len() {
                self.hints.insert(key(&alias, quoted), i);
            }
        }
        self
    }

    /// Whether `name` (lowercased when unquoted) equals `real` under SQL identifier rules.
    fn eq(name: &str, quoted: bool, real: &str) -> bool {
        if quoted {
            name == real
        } else {
            name == real.to_lowercase()
        }
    }

    /// Whether `name` could still grow into `real`.
    fn prefix(name: &str, quoted: bool, real: &str) -> bool {
        if quoted {
            real.starts_with(name)
        } else {
            real.to_lowercase().starts_with(name)
        }
    }

    /// True when `text + piece` keeps every identifier `piece` touches acceptable in its position.
    pub fn check(&self, text: &str, piece: &str) -> bool {
        let Some((off, _)) = sql_part(text) else { return true };
        let full = format!("{text}{piece}");
        let Some((off2, sql)) = sql_part(&full) else { return true };
        if off2 != off {
            return true; // the candidate finishes the fence line
        }
        let boundary = text.len() - off;
        let toks: Vec<Token> = lexer::lex(sql).filter(|t| !t.is_comment()).collect();
        if !backticks_ok(sql, &toks, boundary) {
            return false;
        }
        let mut st = State::new(self);
        for (k, t) in toks.iter().enumerate() {
            let word = word_of(t);
            if let Some((name, quoted)) = &word {
                // Complete: its closing quote was seen, or (unquoted) a character follows it.
                let (end, complete) =
                    (t.end(), if *quoted { t.terminated } else { t.end() < sql.len() });
                if end >= boundary || !complete {
                    let next = toks
                        .get(k + 1)
                        .filter(|n| is_op(n) && n.start == end)
                        .and_then(|n| pieces(n.text).next());
                    if !st.accepts(name, *quoted, complete, next) {
                        return false;
                    }
                }
            }
            match word {
                Some((name, _)) => st.feed(t.kind, &name),
                None if is_op(t) => pieces(t.text).for_each(|p| st.feed(t.kind, p)),
                None => st.feed(t.kind, ""),
            }
        }
        true
    }
}

/// Whether `name` (`quoted` or not) is the name `real` when `complete`, else may still become it.
fn fits(name: &str, quoted: bool, complete: bool, real: &str) -> bool {
    if complete {
        Names::eq(name, quoted, real)
    } else {
        Names::prefix(name, quoted, real)
    }
}

impl<'n> State<'n> {
    /// The state before any text.
    fn new(names: &'n Names) -> State<'n> {
        State {
            names,
            frames: vec![(Clause::None, false)],
            declared: HashMap::new(),
            referenced: Vec::new(),
            slot: Slot::Free,
            prev_word: None,
            alias_for: None,
            declaring: None,
            qualifier: None,
            forward: HashMap::new(),
            forward_of: None,
            after_alias: false,
        }
    }

    /// The current clause.
    fn clause(&self) -> Clause {
        self.frames.last().map_or(Clause::None, |f| f.0)
    }

    /// Sets the current clause.
    fn set_clause(&mut self, c: Clause) {
        if let Some(f) = self.frames.last_mut() {
            f.0 = c;
        }
    }

    /// What `name` refers to as a qualifier or relation.
    fn resolve(&self, name: &str, quoted: bool) -> Option<Target> {
        if let Some(t) = self.declared.get(&key(name, quoted)) {
            return Some(*t);
        }
        if let Some(i) = self.names.tables.iter().position(|t| Names::eq(name, quoted, &t.1)) {
            return Some(Target::Table(i));
        }
        self.names.tables.iter().any(|t| Names::eq(name, quoted, &t.0)).then_some(Target::Schema)
    }

    /// Whether `name` is a name of the text or the schema and no keyword: a declared alias,
    /// a table or a column of a visible table.
    fn is_name(&self, name: &str, quoted: bool) -> bool {
        (quoted || !is_keyword(name))
            && (self.declared.contains_key(&key(name, quoted))
                || self.names.tables.iter().any(|t| {
                    Names::eq(name, quoted, &t.1) || t.2.iter().any(|c| Names::eq(name, quoted, c))
                }))
    }

    /// Whether word `name` is acceptable in the current slot; `complete` when a character
    /// follows it, `next` the punctuation right after it.
    fn accepts(&self, name: &str, quoted: bool, complete: bool, next: Option<&str>) -> bool {
        let n = self.names;
        let declared = |p: &dyn Fn(&str) -> bool| self.declared.keys().any(|d| p(d));
        let test = |real: &str| fits(name, quoted, complete, real);
        let call =
            complete && next == Some("(") && (!n.known_calls_only || (!quoted && is_keyword(name)));
        if self.refuses(name, quoted, complete) {
            return false;
        }
        match &self.slot {
            Slot::Free => true,
            Slot::Table(None) => {
                let relation_kw = !quoted
                    && if complete {
                        matches!(name, "lateral" | "only")
                    } else {
                        SQL_WORDS.iter().any(|w| w.starts_with(name))
                    };
                call || relation_kw
                    || n.tables
                        .iter()
                        .any(|t| test(&t.1) || (test(&t.0) && (!complete || next == Some("."))))
                    || declared(&|d| test(d))
            }
            Slot::Table(Some(s)) => n.tables.iter().any(|t| &t.0 == s && test(&t.1)),
            Slot::ColumnOf(i) => n.tables[*i].2.iter().any(|c| test(c)),
            Slot::AnyColumn => n.tables.iter().any(|t| t.2.iter().any(|c| test(c))),
            Slot::Expr => self.accepts_in_expr(name, quoted, complete, next, call),
        }
    }

    /// Whether word `name` is refused whatever the slot: a second alias, two names in a row in a
    /// condition, or the alias of a table whose columns an earlier use of it does not fit.
    fn refuses(&self, name: &str, quoted: bool, complete: bool) -> bool {
        let n = self.names;
        if complete && self.after_alias && !quoted && name == "as" {
            return true; // `FROM orders o AS x`: a second alias is a syntax error
        }
        if complete && self.clause() == Clause::Where {
            // Two names in a row in a condition (`ON o user_id = ...`: a lost dot) never parse.
            if let Some((prev, prev_quoted)) = &self.prev_word {
                if self.is_name(prev, *prev_quoted) && self.is_name(name, quoted) {
                    return true;
                }
            }
        }
        if let Some(Target::Table(i)) = self.alias_for.or(self.declaring) {
            // Declaring an alias of table `i`: refuse a name already used (forward) with a
            // column that table lacks, while other names remain.
            let k = key(name, quoted);
            if let Some(cols) = self.forward.get(&k) {
                let has = |c: &String| {
                    n.tables[i]
                        .2
                        .iter()
                        .any(|real| Names::eq(c, true, real) || Names::eq(c, false, real))
                };
                if (quoted || !is_keyword(&k)) && !cols.iter().all(has) {
                    return true;
                }
            }
        }
        false
    }

    /// [`State::accepts`] in an expression (`call`: the word opens a call's arguments).
    fn accepts_in_expr(
        &self,
        name: &str,
        quoted: bool,
        complete: bool,
        next: Option<&str>,
        call: bool,
    ) -> bool {
        let n = self.names;
        let declared = |p: &dyn Fn(&str) -> bool| self.declared.keys().any(|d| p(d));
        let test = |real: &str| fits(name, quoted, complete, real);
        let keyword = || {
            !quoted
                && (if complete {
                    is_keyword(name)
                } else {
                    SQL_WORDS.iter().any(|w| w.starts_with(name))
                })
        };
        if call || keyword() || declared(&|d| test(d)) {
            return true;
        }
        if !complete {
            // A word being written may still become a function call or a qualifier:
            // only its end is checked. In strict mode (repairs) it must still be able to
            // become a known name: a column, a table or schema (a qualifier), a short
            // alias, or a keyword or function (checked above), so that a word that can
            // only end as an unknown name is never begun.
            return !n.known_calls_only
                || quoted
                || name.chars().count() <= MAX_FORWARD_ALIAS
                || n.tables
                    .iter()
                    .any(|t| test(&t.0) || test(&t.1) || t.2.iter().any(|c| test(c)))
                || n.hints.keys().any(|h| test(h));
        }
        if next == Some(".") {
            // A qualifier: a table, a schema, or an alias declared later.
            if name.chars().count() <= MAX_FORWARD_ALIAS
                || n.tables.iter().any(|t| test(&t.1) || test(&t.0))
            {
                return true;
            }
        }
        let scope: Vec<usize> = self
            .referenced
            .iter()
            .filter_map(|t| if let Target::Table(i) = t { Some(*i) } else { None })
            .collect();
        let derived = self.referenced.contains(&Target::Derived);
        if derived {
            return true;
        }
        // A SELECT list comes before its own FROM: any visible column there.
        let any = scope.is_empty() || self.clause() == Clause::Select;
        let in_scope = |i: usize| any || scope.contains(&i);
        n.tables.iter().enumerate().any(|(i, t)| in_scope(i) && t.2.iter().any(|c| test(c)))
    }

    /// Advances over one token, updating clauses, declarations and the next slot: a literal
    /// (string, number, parameter), a word (`text` its name as [`word_of`] gives it), or one
    /// piece of an operator or punctuation (see [`pieces`]).
    fn feed(&mut self, kind: Kind, text: &str) {
        let prev_word = self.prev_word.take();
        self.after_alias = false;
        let slot = std::mem::replace(&mut self.slot, Slot::Free);
        let qualifier = self.qualifier.take();
        let forward_of = self.forward_of.take();
        match kind {
            // (Comments never reach the tracker: `Names::check` leaves them out.)
            Kind::String | Kind::Number | Kind::Param | Kind::LineComment | Kind::BlockComment => {
                self.alias_for = None;
            }
            Kind::Ident | Kind::QuotedIdent => {
                self.feed_word(text, kind == Kind::QuotedIdent, slot, qualifier, forward_of)
            }
            Kind::Operator | Kind::Punct | Kind::Other => {
                self.feed_punct(text, prev_word, qualifier)
            }
        }
    }

    /// [`State::feed`] of a word `w` (`q`: quoted) in `slot`, after the `qualifier` and alias
    /// `forward_of` the previous token left.
    fn feed_word(
        &mut self,
        w: &str,
        q: bool,
        slot: Slot,
        qualifier: Option<Option<Target>>,
        forward_of: Option<String>,
    ) {
        self.prev_word = Some((key(w, q), q));
        if let (Slot::AnyColumn, Some(alias)) = (&slot, forward_of) {
            self.forward.entry(alias).or_default().push(if q {
                w.to_string()
            } else {
                w.to_lowercase()
            });
            return;
        }
        if let Some(target) = self.declaring.take() {
            if q || !is_keyword(w) {
                self.declared.insert(key(w, q), target);
                return;
            }
        }
        if slot == Slot::Table(None) || matches!(slot, Slot::Table(Some(_))) {
            self.feed_relation(w, q, &slot);
            return;
        }
        if !q && is_keyword(w) {
            self.keyword(w);
            return;
        }
        if let Some(tg) = self.alias_for.take() {
            // `FROM orders o`: an alias declaration.
            self.declared.insert(key(w, q), tg);
            self.after_alias = true;
            return;
        }
        if qualifier.is_some() {
            return; // `alias.column`: an operand
        }
        if self.clause() == Clause::Select && slot == Slot::Free {
            // `SELECT count(*) total`: a word right after an operand is an output alias.
            self.declared.insert(key(w, q), Target::Derived);
        }
    }

    /// [`State::feed`] of a word `w` (`q`: quoted) where a relation is expected (`slot`): a
    /// keyword before it, a schema qualifier, or the relation (then its alias may follow).
    fn feed_relation(&mut self, w: &str, q: bool, slot: &Slot) {
        if !q && is_keyword(w) && !matches!(slot, Slot::Table(Some(_))) {
            // LATERAL, ONLY, a function: the relation comes later.
            self.keyword(w);
            return;
        }
        let target = match slot {
            Slot::Table(Some(s)) => self
                .names
                .tables
                .iter()
                .position(|t| &t.0 == s && Names::eq(w, q, &t.1))
                .map(Target::Table),
            _ => self.resolve(w, q),
        };
        match target {
            Some(Target::Schema) => self.qualifier = Some(Some(Target::Schema)),
            Some(tg) => {
                self.referenced.push(tg);
                self.alias_for = Some(tg);
            }
            None => {
                self.referenced.push(Target::Derived);
                self.alias_for = Some(Target::Derived);
            }
        }
    }

    /// [`State::feed`] of one piece `p` of an operator or punctuation, after `prev_word` and the
    /// `qualifier` the previous token left.
    fn feed_punct(
        &mut self,
        p: &str,
        prev_word: Option<(String, bool)>,
        qualifier: Option<Option<Target>>,
    ) {
        match p {
            "." => self.feed_dot(prev_word, qualifier),
            "(" => self.feed_open(prev_word),
            ")" => {
                let closed = if self.frames.len() > 1 { self.frames.pop() } else { None };
                if let Some((_, true)) = closed {
                    if self.clause() == Clause::From {
                        // `FROM (SELECT ...) sub`: a derived relation in scope.
                        self.referenced.push(Target::Derived);
                        self.alias_for = Some(Target::Derived);
                    }
                }
            }
            "," => {
                self.alias_for = None;
                self.slot = match self.clause() {
                    Clause::From => Slot::Table(None),
                    Clause::With => {
                        self.declaring = Some(Target::Derived);
                        Slot::Free
                    }
                    _ => Slot::Expr,
                };
            }
            "::" => self.slot = Slot::Free,
            ";" => {
                self.frames = vec![(Clause::None, false)];
                self.alias_for = None;
            }
            "=" | "<" | ">" | "<=" | ">=" | "<>" | "!=" | "+" | "-" | "/" | "%" | "||" => {
                self.slot = Slot::Expr
            }
            "*" => self.slot = Slot::Free,
            _ => {}
        }
    }

    /// [`State::feed`] of a `.` after `prev_word`: a schema's table, an alias's or table's
    /// column, or a column of an alias declared later.
    fn feed_dot(&mut self, prev_word: Option<(String, bool)>, qualifier: Option<Option<Target>>) {
        if let Some(Some(Target::Schema)) = qualifier {
            // `schema.` then a table of that schema.
            let schema = prev_word.as_ref().map(|w| w.0.clone()).unwrap_or_default();
            let real = self
                .names
                .tables
                .iter()
                .find(|t| Names::eq(&schema, false, &t.0) || t.0 == schema)
                .map(|t| t.0.clone());
            self.slot = match real {
                Some(s) if self.clause() == Clause::From => Slot::Table(Some(s)),
                _ => Slot::Free,
            };
            return;
        }
        if let Some((w, q)) = prev_word {
            self.alias_for = None;
            self.slot = match self.resolve(&w, q) {
                Some(Target::Table(i)) => Slot::ColumnOf(i),
                Some(Target::Derived) => Slot::Free,
                Some(Target::Schema) if self.clause() == Clause::From => {
                    let real = self
                        .names
                        .tables
                        .iter()
                        .find(|t| Names::eq(&w, q, &t.0))
                        .map(|t| t.0.clone());
                    Slot::Table(real)
                }
                Some(Target::Schema) => Slot::Free,
                None if self.names.hints.contains_key(&w) => Slot::ColumnOf(self.names.hints[&w]),
                None if w.chars().count() <= MAX_FORWARD_ALIAS => {
                    self.forward_of = Some(w.clone());
                    Slot::AnyColumn
                }
                None => Slot::Free,
            };
        }
    }

    /// [`State::feed`] of a `(` after `prev_word`: a call's arguments, a subquery or a list.
    fn feed_open(&mut self, prev_word: Option<(String, bool)>) {
        let func = prev_word.as_ref().is_some_and(|(w, _)| {
            !matches!(
                w.as_str(),
                "in" | "exists"
                    | "from"
                    | "join"
                    | "as"
                    | "any"
                    | "all"
                    | "some"
                    | "lateral"
                    | "using"
                    | "values"
                    | "on"
                    | "where"
                    | "and"
                    | "or"
                    | "not"
            )
        });
        self.alias_for = None;
        self.frames.push((if func { Clause::Other } else { Clause::None }, false));
        self.slot = if prev_word.as_ref().is_some_and(|(w, _)| w == "using") {
            Slot::Free
        } else {
            Slot::Expr
        };
    }

    /// Clause keywords: switch the clause and set the next slot.
    fn keyword(&mut self, w: &str) {
        let alias_for = self.alias_for.take();
        let subquery = self.frames.last().is_some_and(|f| f.1);
        match w {
            "with" => {
                self.set_clause(Clause::With);
                self.declaring = Some(Target::Derived);
            }
            "recursive" if self.clause() == Clause::With => self.declaring = Some(Target::Derived),
            "select" => {
                if let Some(f) = self.frames.last_mut() {
                    *f = (Clause::Select, true);
                }
                self.slot = Slot::Expr;
            }
            "from" | "join" if subquery || self.frames.len() == 1 => {
                self.set_clause(Clause::From);
                self.slot = Slot::Table(None);
            }
            "update" | "into" => {
                self.set_clause(Clause::From);
                self.slot = Slot::Table(None);
            }
            "as" => {
                if let Some(t) = alias_for {
                    self.declaring = Some(t); // `FROM orders AS o`
                } else if self.clause() != Clause::With {
                    self.declaring = Some(Target::Derived);
                }
            }
            "where" | "on" | "having" => {
                self.set_clause(Clause::Where);
                self.slot = Slot::Expr;
            }
            "by" => {
                self.set_clause(Clause::List);
                self.slot = Slot::Expr;
            }
            "limit" | "offset" | "fetch" | "union" | "intersect" | "except" => {
                self.set_clause(Clause::Other)
            }
            _ if opens_expr(w) => self.slot = Slot::Expr,
            _ => {}
        }
        if matches!(
            w,
            "left"
                | "right"
                | "inner"
                | "full"
                | "cross"
                | "natural"
                | "outer"
                | "lateral"
                | "only"
        ) && self.clause() == Clause::From
        {
            // `LEFT JOIN`: the relation follows JOIN; `LATERAL (`: stays in FROM.
            self.slot = Slot::Table(None);
        }
    }
}

/// The lookup key of a declared name (lowercase unless quoted).
fn key(name: &str, quoted: bool) -> String {
    if quoted {
        name.to_string()
    } else {
        name.to_lowercase()
    }
}

/// A pick of [`Constrainer::choose`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    pub id: u32,
    /// True when the constraint replaced the plain argmax.
    pub changed: bool,
    /// False when no token among the top K was acceptable (`id` is then the plain argmax): the
    /// text so far is a dead end the decoder may back out of.
    pub acceptable: bool,
}

/// Picks tokens that keep identifiers inside the schema.
#[derive(Debug, Clone)]
pub struct Constrainer {
    names: Names,
    top_k: usize,
    /// A rejected statement and the byte span of the word its error is about: writing that
    /// statement again through the whole word is refused (see [`Constrainer::with_ban`]).
    bans: Vec<(String, usize, usize)>,
}

impl Constrainer {
    /// A constrainer over the tables of `schema`.
    pub fn new(schema: &SchemaInfo) -> Constrainer {
        Constrainer { names: Names::new(schema), top_k: TOP_K, bans: Vec::new() }
    }

    /// A constrainer over the tables of `schema` that knows the aliases of an earlier draft
    /// (see [`Names::with_hints`]).
    pub fn with_hints(
        schema: &SchemaInfo,
        hints: impl IntoIterator<Item = (String, bool, usize)>,
    ) -> Constrainer {
        Constrainer { names: Names::new(schema).with_hints(hints), top_k: TOP_K, bans: Vec::new() }
    }

    /// Refuses to write, after the same text as `rejected` up to byte `start`, the word
    /// `rejected[start..end]` (the word the server's error is about) again, alone or grown into a
    /// longer word: the repair must put something else there. Tokens that reach into the word and then differ
    /// (`t.sbtx_id` when `t.sbticker_id` was wrong) and any change before it stay free.
    /// Bans add up: each rejected statement of a call keeps its own.
    pub fn with_ban(mut self, rejected: &str, start: usize, end: usize) -> Constrainer {
        let trimmed = rejected.trim_start();
        let lead = rejected.len() - trimmed.len();
        self.bans.push((
            trimmed.trim_end().to_string(),
            start.saturating_sub(lead),
            end.saturating_sub(lead),
        ));
        self
    }

    /// Only functions of the known SQL vocabulary may be called (see [`Names`]).
    pub fn known_calls_only(mut self) -> Constrainer {
        self.names.known_calls_only = true;
        self
    }

    /// True when `piece` after `text` completes a banned word at its place.
    fn banned(&self, text: &str, piece: &str) -> bool {
        self.bans
            .iter()
            .any(|(rejected, start, end)| Self::banned_by(rejected, *start, *end, text, piece))
    }

    /// [`Constrainer::banned`] for one ban.
    fn banned_by(rejected: &str, start: usize, end: usize, text: &str, piece: &str) -> bool {
        let Some((_, before)) = sql_part(text) else { return false };
        let full = format!("{text}{piece}");
        let Some((_, after)) = sql_part(&full) else { return false };
        let (before, after) = (before.trim_start(), after.trim_start());
        // Only the token that writes the word's last character decides.
        if before.len() >= end || after.len() < end {
            return false;
        }
        // Neither the word again nor a longer one grown from it (`dname_count(`: an invented
        // function), so the repair writes another name, a qualifier or another construct there.
        let same = |a: Option<&str>, b: Option<&str>| a.is_some() && a == b;
        same(after.get(..start), rejected.get(..start))
            && after
                .get(start..end)
                .zip(rejected.get(start..end))
                .is_some_and(|(a, r)| a.eq_ignore_ascii_case(r))
    }

    /// The schema names used.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The highest-logit token among the top K whose text keeps `text` acceptable, else the
    /// argmax. `logits` is `[vocab]`.
    pub fn choose(&self, tok: &Tokenizer, text: &str, logits: &[f32]) -> Pick {
        self.choose_excluding(tok, text, logits, &[])
    }

    /// [`Constrainer::choose`] that never picks a token of `excluded` (token ids the decoder
    /// already backed out of at this position). End of generation is acceptable only as the
    /// model's own first choice: taken as a fallback it would end the statement wherever the
    /// constraint left no other way (mid-word, inside parentheses).
    pub fn choose_excluding(
        &self,
        tok: &Tokenizer,
        text: &str,
        logits: &[f32],
        excluded: &[u32],
    ) -> Pick {
        let best = crate::generate::sampler::argmax(logits) as usize;
        // Other special tokens are never acceptable (they are no SQL).
        let accept = |j: usize, first: bool| {
            let id = j as u32;
            if excluded.contains(&id) {
                return false;
            }
            if tok.is_special(id) {
                return first && tok.is_eog(id);
            }
            let piece = String::from_utf8_lossy(tok.piece(id));
            self.names.check(text, &piece) && !self.banned(text, &piece)
        };
        if accept(best, true) {
            return Pick { id: best as u32, changed: false, acceptable: true };
        }
        let mut order: Vec<usize> = (0..logits.len()).collect();
        let k = self.top_k.min(order.len());
        let desc = |a: &usize, b: &usize| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b));
        if k < order.len() {
            order.select_nth_unstable_by(k - 1, desc);
            order.truncate(k);
        }
        order.sort_unstable_by(desc);
        match order.into_iter().find(|&j| j != best && accept(j, false)) {
            Some(j) => Pick { id: j as u32, changed: true, acceptable: true },
            None => Pick { id: best as u32, changed: false, acceptable: false },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::schema::tables::{Table, TableKind};

    /// users(user_id, full_name, country_code), orders(order_id, user_id, status), and
    /// sales.invoices(invoice_id, total).
    fn names() -> Names {
        let users = Table::new("public", "users", TableKind::Table)
            .column("user_id", "integer", false)
            .column("full_name", "text", false)
            .column("country_code", "text", false);
        let orders = Table::new("public", "orders", TableKind::Table)
            .column("order_id", "integer", false)
            .column("user_id", "integer", false)
            .column("status", "text", false);
        let inv = Table::new("sales", "invoices", TableKind::Table)
            .column("invoice_id", "integer", false)
            .column("Total", "numeric", false);
        Names::new(&SchemaInfo::new(vec![users, orders, inv], Some("public")))
    }

    #[test]
    fn tokens_give_words_literals_and_operators() {
        let sql = "SELECT \"A\"\"b\", 'x''y' FROM t WHERE a::date >= 1.5 -- c\n";
        let t: Vec<Token> = lexer::lex(sql).filter(|t| !t.is_comment()).collect();
        assert_eq!(word_of(&t[1]), Some(("A\"b".into(), true)));
        assert_eq!((t[1].start, t[1].end(), t[1].terminated), (7, 13, true));
        assert_eq!(t[3].kind, Kind::String);
        assert!(t.iter().any(|t| t.is("::")) && t.iter().any(|t| t.is(">=")));
        assert_eq!(t.last().map(|t| t.kind), Some(Kind::Number));
        // A word at the end of the text is incomplete: no character follows it.
        let us = lexer::lex("SELECT us").last().unwrap();
        assert!(us.kind == Kind::Ident && us.end() == "SELECT us".len());
        assert_eq!(pieces("->>::<>=").collect::<Vec<_>>(), ["-", ">", ">", "::", "<>", "="]);
    }

    #[test]
    fn tables_after_from_and_join() {
        let n = names();
        assert!(n.check("SELECT * FROM", " users"));
        assert!(n.check("SELECT * FROM", " us"));
        assert!(!n.check("SELECT * FROM", " customers"));
        assert!(!n.check("SELECT * FROM us", "ers2 "));
        assert!(n.check("SELECT * FROM users u JOIN", " orders"));
        assert!(!n.check("SELECT * FROM users u JOIN", " order "));
        assert!(n.check("SELECT * FROM users,", " orders"));
        assert!(n.check("SELECT * FROM sales.", "invoices"));
        assert!(!n.check("SELECT * FROM sales.", "users"));
        assert!(n.check("SELECT * FROM", " generate_series("));
        assert!(n.check("SELECT * FROM", " (SELECT"));
    }

    #[test]
    fn columns_after_alias_dot() {
        let n = names();
        assert!(n.check("SELECT o.status FROM orders o WHERE o.", "status"));
        assert!(!n.check("SELECT o.status FROM orders o WHERE o.", "country_code"));
        assert!(n.check("SELECT * FROM orders AS o JOIN users u ON u.", "country_code"));
        assert!(n.check("SELECT * FROM orders WHERE orders.", "user_id"));
        assert!(!n.check("SELECT * FROM orders WHERE orders.user", "name"));
        // Alias used before its declaration: any visible column.
        assert!(n.check("SELECT u.", "full_name"));
        assert!(!n.check("SELECT u.", "name,"));
        // Quoted column of another schema's table.
        assert!(n.check("SELECT i.\"", "Total\""));
        assert!(!n.check("SELECT i.\"", "total\""));
    }

    #[test]
    fn grammar_slips_that_never_parse() {
        let n = names();
        // Backtick quoting: refused; a closing fence (a run of three, or at a line start) passes.
        assert!(!n.check("SELECT o.", "`status"));
        assert!(n.check("SELECT o.status FROM orders o\n", "```"));
        assert!(n.check("SELECT o.status FROM orders o LIMIT 5", "```"));
        assert!(
            n.check("SELECT o.status FROM orders o WHERE o.status = '", "`x"),
            "inside a literal"
        );
        // A lost dot in a condition: two names in a row.
        assert!(!n.check("SELECT * FROM orders o JOIN users u ON o", " user_id ="));
        assert!(n.check("SELECT * FROM orders o JOIN users u ON o", ".user_id ="));
        assert!(n.check("SELECT * FROM orders o WHERE o.status IS", " NOT NULL"));
        // A second alias after the first.
        assert!(!n.check("SELECT * FROM orders o", " AS x"));
        assert!(n.check("SELECT * FROM orders", " AS o"));
    }

    #[test]
    fn ban_forces_a_different_word_at_the_error() {
        let schema = SchemaInfo::new(
            vec![Table::new("public", "t", TableKind::Table).column("a", "integer", false)],
            Some("public"),
        );
        // The error word: `a_id` at bytes 24..28 of the rejected statement.
        let c = Constrainer::new(&schema).with_ban("SELECT a FROM t WHERE t.a_id = 1", 24, 28);
        // Before and into the word: free; the word written again: refused, whatever follows.
        assert!(!c.banned("```sql\nSELECT a FROM t", " WHERE"));
        assert!(
            !c.banned("```sql\nSELECT a FROM t WHERE t", ".a"),
            "a token reaching into the word"
        );
        assert!(c.banned("```sql\nSELECT a FROM t WHERE t.a", "_id"), "the word written again");
        assert!(c.banned("```sql\nSELECT a FROM t WHERE t.a", "_id ="));
        assert!(
            c.banned("```sql\nSELECT a FROM t WHERE t.a", "_idx("),
            "a longer word grown from it"
        );
        assert!(!c.banned("```sql\nSELECT a FROM t WHERE t.a", "_i"), "not yet the whole word");
        assert!(
            !c.banned("```sql\nSELECT a FROM t WHERE t.a_id", " ="),
            "decided at the word's last character"
        );
        assert!(!c.banned("```sql\nSELECT a FROM t WHERE t.a", "b ="), "another word");
        assert!(!c.banned("```sql\nSELECT b FROM t WHERE t.a_id", " ="), "changed before the word");
        assert!(!Constrainer::new(&schema).banned("```sql\nSELECT a FROM t WHERE t.a_id", " ="));
        // Bans add up.
        let two = c.with_ban("SELECT b FROM t", 7, 8);
        assert!(
            two.banned("```sql\nSELECT", " b")
                && two.banned("```sql\nSELECT a FROM t WHERE t.a", "_id")
        );
    }

    #[test]
    fn repairs_call_only_known_functions() {
        let n = names();
        let mut k = names();
        k.known_calls_only = true;
        assert!(n.check("SELECT ", "billing_city(user_id)"), "any call without the flag");
        assert!(!k.check("SELECT ", "billing_city(user_id)"), "an invented function");
        assert!(k.check("SELECT ", "count(user_id)"));
        assert!(k.check("SELECT ", "date_trunc('month', user_id)"));
        // A word that can only end as an unknown name is not begun in strict mode.
        assert!(!k.check("SELECT DISTINCT ", "billing_city"));
        assert!(k.check("SELECT DISTINCT ", "full_na"), "a column being written");
        assert!(k.check("SELECT DISTINCT ", "coun"), "a function being written");
        assert!(n.check("SELECT DISTINCT ", "billing_city"), "lax without the flag");
    }

    #[test]
    fn hinted_aliases_offer_only_their_table() {
        // An earlier draft said `u` is users (table 2 after normalization order: orders, users, invoices).
        let n = names();
        let users = n.tables.iter().position(|t| t.1 == "users").unwrap();
        let h = names().with_hints([("u".to_string(), true, users)]);
        assert!(n.check("SELECT u.", "status"), "unhinted: any visible column");
        assert!(!h.check("SELECT u.", "status"), "hinted: users has no status");
        assert!(h.check("SELECT u.", "full_name"));
        // Long hinted aliases too (unhinted ones longer than MAX_FORWARD_ALIAS are not checked).
        let h = names().with_hints([("buyers".to_string(), true, users)]);
        assert!(!h.check("SELECT buyers.", "status"));
        assert!(n.check("SELECT buyers.", "status"));
        // Once declared in the text, the declaration wins.
        assert!(h.check("SELECT o.status FROM orders o WHERE o.", "status"));
    }

    #[test]
    fn expressions_allow_keywords_functions_and_declared_names() {
        let n = names();
        assert!(n.check("SELECT", " count(*)"));
        assert!(n.check("SELECT", " date_trunc("));
        assert!(n.check("SELECT", " my_function("));
        assert!(n.check("SELECT count(*) AS", " n_users"));
        assert!(n.check("SELECT count(*) AS n_users FROM users ORDER BY", " n_users"));
        assert!(n.check("SELECT count(*) total", " FROM"));
        assert!(n.check("SELECT", " DISTINCT"));
        assert!(n.check("SELECT EXTRACT(YEAR FROM", " signed_up_at"));
        assert!(n.check("SELECT * FROM users WHERE", " country_code = 'FR'"));
        assert!(!n.check("SELECT * FROM users WHERE", " country = 'FR'"));
        // Columns of tables not in scope are refused once the scope is known.
        assert!(!n.check("SELECT * FROM users WHERE", " status ="));
        // Before FROM, any visible column.
        assert!(n.check("SELECT", " status,"));
        assert!(!n.check("SELECT", " statuses,"));
        // A subquery's SELECT list comes before its FROM; a function name is only checked at its end.
        assert!(n.check("SELECT count(*) FROM orders WHERE user_id IN (SELECT", " user_id"));
        assert!(n.check("SELECT count(*) FROM users WHERE user_id IN (SELECT", " order_id FROM"));
        assert!(n.check("SELECT", " strftime"));
        assert!(n.check("SELECT strftime", "('%Y'"));
        assert!(!n.check("SELECT * FROM users WHERE country", " ="));
        assert!(n.check("SELECT * FROM users WHERE country", "_code ="));
        // An alias used before its declaration must be declared on a table that has its columns.
        let q = "SELECT T1.full_name FROM orders AS";
        assert!(!n.check(q, " T1 "));
        assert!(!n.check(q, " T1"));
        assert!(n.check(q, " T2 "));
        assert!(n.check("SELECT T1.full_name FROM orders AS T2 JOIN users AS", " T1 "));
        assert!(!n.check("SELECT o.full_name FROM orders", " o "));
        assert!(n.check("SELECT o.full_name FROM orders", " ON"));
        assert!(n.check("SELECT o.status FROM orders", " o "));
        // A CTE is a relation with unknown columns.
        assert!(n.check("WITH t AS (SELECT user_id FROM orders) SELECT * FROM", " t"));
        assert!(n.check(
            "WITH t AS (SELECT user_id AS uid FROM orders) SELECT uid FROM t WHERE",
            " x = 1"
        ));
        // Literals and casts are never blocked.
        assert!(n.check("SELECT * FROM users WHERE country_code =", " 'XYZ abc'"));
        assert!(n.check("SELECT now() -", " interval '1 day'"));
        assert!(n.check("SELECT x::", "date"));
    }

    #[test]
    fn code_fence_and_partial_fence_pass() {
        let n = names();
        assert!(n.check("```", "sql"));
        assert!(n.check("```sql\nSELECT * FROM", " users"));
        assert!(!n.check("```sql\nSELECT * FROM", " people"));
    }

    #[test]
    fn comments_and_strings_are_not_names() {
        let n = names();
        let w = "SELECT * FROM users WHERE";
        let f = "SELECT * FROM users WHERE full_name =";
        for (text, piece, ok, why) in [
            (w, " /* no such /* column */ here */ user_id = 1", true, "nested comment"),
            (w, " -- no such column\n user_id = 1", true, "line comment"),
            (f, " E'O\\'Brien' AND user_id = 1", true, "E'' string"),
            (f, " $$no such$$ AND user_id = 1", true, "dollar quote"),
            ("SELECT * FROM users WHERE full_name = $q$", "no such", true, "open dollar quote"),
            ("SELECT * FROM users WHERE full_name = $q$x$q$ AND", " country =", false, "after it"),
            (f, " E'`x\\'`' --`y`\n", true, "backticks in a string and a comment"),
            ("SELECT * FROM users WHERE full_name = E'\\'' AND", " `x", false, "a backtick"),
            ("SELECT u.", "U&\"full\\005Fname\" FROM users u", true, "U&\"\" decoded"),
            ("SELECT u.", "U&\"full\\005Fnam\" FROM users u", false, "U&\"\" decoded"),
        ] {
            assert_eq!(n.check(text, piece), ok, "{why}: {text}{piece}");
        }
    }
}
