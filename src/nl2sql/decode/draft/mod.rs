//! The drafter of speculative decoding: proposes the next few tokens of a SQL answer without a
//! draft model, from (a) SQL templates instantiated with the schema's names, pre-tokenized into
//! a token trie, (b) prompt lookup over the prompt and the answer so far, (c) the backend's
//! earlier answers ([`recall`]), and (d) an adaptive draft length. One drafter is built per
//! schema prefix and kept next to its KV state.

pub mod recall;
pub mod templates;
pub mod window;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::generate::fingerprint::Fingerprint;
use crate::generate::lookup;
pub use crate::generate::trie::TokenTrie;
use crate::nl2sql::plan::trim::words;
use crate::nl2sql::schema::render::Renderer;
use crate::nl2sql::schema::tables::SchemaInfo;
use crate::nl2sql::sql::ident::quote_ident;
use crate::platform::runtime::Runtime;
use crate::tokenizer::{Tokenizer, TokenizerError};
use rayon::prelude::*;
use recall::Recall;
pub use window::{Window, MAX_DRAFT};

/// Longest answer suffix matched against the trie: a clause opening ("JOIN orders o ON o.") is
/// rarely longer, and longer suffixes only cost time.
const MAX_TRIE_SUFFIX: usize = 12;

/// The opening of a fenced SQL answer.
const ANSWER_FENCE: &str = "```sql\n";

/// Most tokens copied after a one-token prompt-lookup match.
const WEAK_LOOKUP: usize = 3;

/// Keywords starting a clause: a template is also inserted from each of them on, so a clause
/// is drafted wherever it appears in the answer, not only at the start of a matching statement.
const CLAUSE_WORDS: &[&str] =
    &["SELECT", "FROM", "JOIN", "LEFT", "WHERE", "ON", "AND", "GROUP", "ORDER", "LIMIT", "HAVING"];

/// Proposes draft tokens for one schema prefix.
#[derive(Debug, Clone)]
pub struct Drafter {
    /// The prefix this drafter was built for (`None`: a lookup-only drafter).
    fingerprint: Option<Fingerprint>,
    /// Template statements and their clause suffixes, tokenized.
    trie: TokenTrie,
    /// Number of statements inserted.
    statements: usize,
    /// Every text tokenized for the trie: its tokens and where its clauses start. The next
    /// prefix's drafter takes over those it shares (a big schema shows each question other
    /// tables, mostly the same ones): tokenizing is deterministic, so its trie is the same.
    encoded: HashMap<String, Encoded>,
    /// The tokens of [`ANSWER_FENCE`], which open every fenced text of the trie (empty: none).
    fence: Vec<u32>,
    /// How the model opened its last answer that started from nothing (its first
    /// [`OPENING_TOKENS`] tokens; empty until one was decoded): models keep a habit there (the
    /// 1.5B fences every answer, the 0.5B writes the statement bare), and an answer's first
    /// draft rides with the prompt's last pass (`speculate::Start::Pending`).
    habit: Arc<Mutex<Vec<u32>>>,
    /// The tokens of the backend's earlier answers ([`Recall`]): the same joins, aliases and
    /// layout recur from one question to the next on a schema.
    recall: Arc<Mutex<Recall>>,
}

/// Tokens of an answer's opening remembered as the model's habit (and drafted at an answer's
/// start): the fence (3 tokens) and the statement's first keyword.
pub const OPENING_TOKENS: usize = 4;

/// A template text's tokens and where its clauses start (`clause_starts`).
#[derive(Debug, Clone)]
struct Encoded {
    ids: Vec<u32>,
    starts: Vec<usize>,
}

/// Where a draft came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Template,
    Lookup,
    Recall,
}

impl Drafter {
    /// A drafter with prompt lookup only (any prompt, no schema).
    pub fn lookup_only() -> Drafter {
        Drafter {
            fingerprint: None,
            trie: TokenTrie::new(),
            statements: 0,
            encoded: HashMap::new(),
            fence: Vec::new(),
            habit: Arc::default(),
            recall: Arc::default(),
        }
    }

    /// Builds the drafter of a schema prefix: instantiates the templates over `schema`'s tables
    /// (those shown in the prompt) and tokenizes them into the trie.
    pub fn for_schema(
        tok: &Tokenizer,
        schema: &SchemaInfo,
        fingerprint: Fingerprint,
    ) -> Result<Drafter, TokenizerError> {
        Drafter::for_schema_after(tok, schema, fingerprint, None, None)
    }

    /// [`Drafter::for_schema`], taking over the tokenized texts of `previous` (the drafter of
    /// the prefix before) that this schema's templates share: the same drafter, built without
    /// tokenizing them again. With `rt`, the other texts are tokenized on its threads: the same
    /// tokens (tokenizing is deterministic), inserted in the same order, so the same trie.
    pub fn for_schema_after(
        tok: &Tokenizer,
        schema: &SchemaInfo,
        fingerprint: Fingerprint,
        previous: Option<Drafter>,
        rt: Option<&Runtime>,
    ) -> Result<Drafter, TokenizerError> {
        let statements = templates::instantiate(schema);
        // Each statement as written on one line and with each clause on its own line (longer
        // queries), each also opened by a Markdown SQL fence, as chat models write their answers
        // (the answer extractor, `sqltext`, reads it): the fence's tokens are then drafted too.
        // With whether its clauses start trie entries of their own (not in the fenced text).
        let texts: Vec<(String, bool)> = statements
            .iter()
            .flat_map(|s| [s.clone(), clauses_on_lines(s)])
            .flat_map(|text| {
                let fenced = format!("{ANSWER_FENCE}{text}");
                [(text, true), (fenced, false)]
            })
            .collect();
        // The model's habit outlives the prefix: the next drafter shares it.
        let habit = previous.as_ref().map(|d| Arc::clone(&d.habit)).unwrap_or_default();
        // So do its earlier answers (a big schema shows each question other tables).
        let recall = previous.as_ref().map(|d| Arc::clone(&d.recall)).unwrap_or_default();
        let mut old = previous.map(|d| d.encoded).unwrap_or_default();
        let mut encoded: HashMap<String, Encoded> = HashMap::new();
        // The texts to tokenize: each once, unless the previous drafter has it.
        let mut new: Vec<&(String, bool)> = Vec::new();
        let mut queued = std::collections::HashSet::new();
        for t in &texts {
            if !queued.insert(t.0.as_str()) {
                continue;
            }
            match old.remove(&t.0) {
                Some(e) => drop(encoded.insert(t.0.clone(), e)),
                None => new.push(t),
            }
        }
        let encode = |(text, clauses): &&(String, bool)| -> Result<Encoded, TokenizerError> {
            let ids = tok.encode(text, false)?;
            let starts = if *clauses { clause_starts(tok, &ids) } else { vec![0] };
            Ok(Encoded { ids, starts })
        };
        let fresh: Vec<Result<Encoded, TokenizerError>> = match rt {
            Some(rt) => rt.install(|| new.par_iter().map(encode).collect()),
            None => new.iter().map(encode).collect(),
        };
        for (t, e) in new.iter().zip(fresh) {
            encoded.insert(t.0.clone(), e?);
        }
        // Every occurrence counts in the trie, in the texts' order.
        let mut trie = TokenTrie::new();
        for (text, _) in &texts {
            let e = &encoded[text];
            for &start in &e.starts {
                trie.insert(&e.ids[start..]);
            }
        }
        // The fence's own tokens: the first tokens of a fenced text (tokenizing splits at the
        // newline, so the fence alone tokenizes as it does in front of a statement).
        let fence = tok.encode(ANSWER_FENCE, false)?;
        let fence = if trie.walk(&fence).is_some() { fence } else { Vec::new() };
        Ok(Drafter {
            fingerprint: Some(fingerprint),
            trie,
            statements: statements.len(),
            encoded,
            fence,
            habit,
            recall,
        })
    }

    /// Remembers how an answer that started from nothing opened (its token `ids`): the first
    /// draft of the next such answer.
    pub fn remember_opening(&self, ids: &[u32]) {
        if let Ok(mut h) = self.habit.lock() {
            h.clear();
            h.extend(ids.iter().take(OPENING_TOKENS));
        }
    }

    /// Remembers the tokens `ids` of a decoded answer: drafts of the answers after it.
    pub fn remember_answer(&self, ids: &[u32]) {
        if let Ok(mut r) = self.recall.lock() {
            r.remember(ids);
        }
    }

    /// The prefix fingerprint this drafter belongs to.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.fingerprint
    }

    /// Template statements instantiated.
    pub fn statements(&self) -> usize {
        self.statements
    }

    /// The template trie.
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// Up to `max` draft tokens following `history` (prompt tokens, then the `generated` answer
    /// tokens at its end). Templates are matched against the answer only, lookup against all of
    /// `history`, the backend's earlier answers ([`Recall`]) against the answer's end; the source
    /// with the longer matched context wins (templates, then lookup, on a tie). A draft
    /// that used its whole allowance is extended from the extended history until `max`; one the
    /// source ended early is not.
    /// At template branch points, tokens of `focus` (sorted) are preferred.
    pub fn propose(
        &self,
        history: &[u32],
        generated: usize,
        max: usize,
        focus: &[u32],
    ) -> Vec<u32> {
        let mut draft = Vec::new();
        let mut h = history.to_vec();
        let answer_start = history.len() - generated.min(history.len());
        while draft.len() < max {
            let want = max - draft.len();
            let Some((_, cont)) = self.propose_once(&h, answer_start, want, focus) else { break };
            let short = cont.len() < want;
            draft.extend_from_slice(&cont);
            h.extend_from_slice(&cont);
            if short {
                // The source stopped on purpose (a template's end or weak branch, a weak match).
                break;
            }
        }
        draft
    }

    /// One proposal: (source, tokens).
    fn propose_once(
        &self,
        history: &[u32],
        answer_start: usize,
        max: usize,
        focus: &[u32],
    ) -> Option<(Source, Vec<u32>)> {
        let answer = &history[answer_start..];
        let t = if answer.is_empty() {
            self.opening(history, max, focus)
        } else {
            self.trie.complete_suffix(answer, MAX_TRIE_SUFFIX, max, focus)
        };
        // A one-token match is a weak hint: copy little.
        let l = lookup::lookup(history, max).map(|(n, mut c)| {
            if n == 1 {
                c.truncate(WEAK_LOOKUP);
            }
            (n, c)
        });
        let best = match (t, l) {
            (Some((ts, tc)), Some((ls, lc))) => {
                Some(if ls > ts { (ls, Source::Lookup, lc) } else { (ts, Source::Template, tc) })
            }
            (Some((ts, tc)), None) => Some((ts, Source::Template, tc)),
            (None, Some((ls, lc))) => Some((ls, Source::Lookup, lc)),
            (None, None) => None,
        };
        // An earlier answer, when it matched more of this one's end than either source.
        let matched = best.as_ref().map_or(0, |b| b.0);
        let r = if answer.is_empty() {
            None
        } else {
            self.recall.lock().ok().and_then(|r| r.lookup(answer, matched + 1, max))
        };
        match r {
            Some((_, rc)) => Some((Source::Recall, rc)),
            None => best.map(|(_, s, c)| (s, c)),
        }
    }
}

impl Drafter {
    /// The first tokens of an answer nothing of which is decoded yet: how the model opened its
    /// last such answer ([`Drafter::remember_opening`]); before any, the templates' most
    /// travelled statement opening after the fence, preceded by the fence itself unless the
    /// prompt already ends with it (a repair turn's seed: then only the statement's opening).
    /// Its match length is the fence's (the habit's length for a habit): a prompt lookup that
    /// matched more of the prompt's end (an approved example's answer, a rejected statement
    /// replayed) still wins. The default model fences every answer (so do llama-server's
    /// greedy answers to the same prompts).
    fn opening(&self, history: &[u32], max: usize, focus: &[u32]) -> Option<(usize, Vec<u32>)> {
        // A repair turn's prompt ends with the fence (its seed): the statement follows.
        let seeded = !self.fence.is_empty() && history.ends_with(&self.fence);
        let habit = self.habit.lock().map(|h| h.clone()).unwrap_or_default();
        if !habit.is_empty() && !seeded {
            let mut draft = habit;
            draft.truncate(max);
            return Some((OPENING_TOKENS, draft));
        }
        let node = self.trie.walk(&self.fence).filter(|_| !self.fence.is_empty())?;
        let mut draft = if seeded { Vec::new() } else { self.fence.clone() };
        if draft.len() < max {
            draft.extend(self.trie.continuation(node, max - draft.len(), focus));
        }
        draft.truncate(max);
        (!draft.is_empty()).then_some((self.fence.len(), draft))
    }
}

/// Question phrases and the SQL words they call for (preferred at template branch points).
const HINTS: &[(&[&str], &[&str])] = &[
    (&["how many", "number of", "count"], &["COUNT"]),
    (&["average", "mean"], &["AVG"]),
    (&["total", "sum", "revenue"], &["SUM"]),
    (
        &["most", "highest", "top", "largest", "expensive", "best", "latest"],
        &["ORDER", "DESC", "LIMIT"],
    ),
    (&["least", "lowest", "cheapest", "smallest", "oldest", "first"], &["ORDER", "ASC", "LIMIT"]),
    (&["per ", "each", "by "], &["GROUP"]),
    (&["distinct", "different", "unique"], &["DISTINCT"]),
    (&["never", "without", "not ", "no "], &["NOT", "NULL"]),
];

/// The focus tokens of a question (sorted, unique): its own tokens `question_ids`, and the
/// tokens of the names of `schema`'s tables and columns that share a word with `question`, as
/// the answer would write them (after a space, or after `(` / `.`), and the SQL words its
/// phrasing calls for ([`HINTS`]: "how many" -> COUNT).
pub fn focus_tokens(
    tok: &Tokenizer,
    schema: &SchemaInfo,
    question: &str,
    question_ids: &[u32],
) -> Result<Vec<u32>, TokenizerError> {
    let q = words(question);
    let r = Renderer::new(schema);
    let mut names = Vec::new();
    for t in &schema.tables {
        if !words(&t.name).is_disjoint(&q) {
            names.push(r.table_name(&t.schema, &t.name));
        }
        names.extend(
            t.columns
                .iter()
                .filter(|c| !words(&c.name).is_disjoint(&q))
                .map(|c| quote_ident(&c.name)),
        );
    }
    let lower = question.to_lowercase();
    for (cues, sql) in HINTS {
        if cues.iter().any(|c| lower.contains(c)) {
            names.extend(sql.iter().map(|w| w.to_string()));
        }
    }
    let mut out = question_ids.to_vec();
    for n in names {
        out.extend(tok.encode(&format!(" {n}"), false)?);
        out.extend(tok.encode(&format!(".{n}"), false)?.into_iter().skip(1));
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// `sql` with a line break instead of the space before each top-level clause keyword (the layout
/// models use for longer queries).
fn clauses_on_lines(sql: &str) -> String {
    // LEFT JOIN is set aside first so that its JOIN stays on the same line.
    let mut out = sql.replace(" LEFT JOIN ", "\u{1}");
    for kw in [" FROM ", " JOIN ", " WHERE ", " GROUP BY ", " ORDER BY ", " LIMIT "] {
        out = out.replace(kw, &format!("\n{}", &kw[1..]));
    }
    out.replace('\u{1}', "\nLEFT JOIN ")
}

/// Token offsets of `ids` where a statement or clause starts: 0 and every token spelling a
/// clause keyword.
fn clause_starts(tok: &Tokenizer, ids: &[u32]) -> Vec<usize> {
    let mut out = vec![0];
    for (i, &id) in ids.iter().enumerate().skip(1) {
        let piece = String::from_utf8_lossy(&tok.token_to_piece(id)).into_owned();
        if CLAUSE_WORDS.iter().any(|w| piece.trim().eq_ignore_ascii_case(w)) {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clauses_move_to_their_own_lines() {
        assert_eq!(
            clauses_on_lines(
                "SELECT a FROM t LEFT JOIN u ON t.x = u.x WHERE b = 1 ORDER BY a LIMIT 3;"
            ),
            "SELECT a\nFROM t\nLEFT JOIN u ON t.x = u.x\nWHERE b = 1\nORDER BY a\nLIMIT 3;"
        );
    }
}
