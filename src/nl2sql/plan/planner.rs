//! The prompt of one call ([`Plan`]): every table rendered or, when they do not all fit the
//! context, those the question chooses (`trim.rs`, `link.rs`), the approved examples and a
//! follow-up's earlier turns in the question part, tokenized and fingerprinted. Runs no forward
//! pass (the pipeline's `plan` stage, `stages/plan.rs`, and `Engine::plan` for callers).

use crate::generate::fingerprint::Fingerprint;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::base::options::Options;
use crate::nl2sql::plan::conversation::{Conversation, Turn};
use crate::nl2sql::plan::examples;
use crate::nl2sql::plan::link::{self, LinkReport, Linking};
use crate::nl2sql::plan::prompt::{self, Segments};
use crate::nl2sql::plan::trim;
use crate::nl2sql::schema::render::{self, Renderer};
use crate::nl2sql::schema::tables::SchemaInfo;
use crate::nl2sql::sql::ident::sanitize_question;
use crate::tokenizer::Tokenizer;
use std::borrow::Cow;
use std::sync::OnceLock;

/// Longest question accepted, in characters: a question is a sentence or two; anything longer is
/// more likely a pasted document that would crowd the schema out of the context.
pub const MAX_QUESTION_CHARS: usize = 2000;

/// The prompt of one call.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fingerprint: Fingerprint,
    /// System turn + schema, up to the question.
    pub prefix: Segments,
    pub prefix_ids: Vec<u32>,
    /// The question part: the chosen examples as earlier turns, the question, the start of the
    /// assistant turn (`prompt::question_with_examples`).
    pub question: Segments,
    /// Its tokens.
    pub question_ids: Vec<u32>,
    /// The tokens of the question part without examples (`prompt::question`), when it has some:
    /// what the refusal check reads (`stages/question.rs`).
    pub plain_question_ids: Option<Vec<u32>>,
    /// How many earlier turns of a conversation (the newest) the question part shows after the
    /// examples (`conversation.rs`): 0 for a question asked alone.
    pub earlier: usize,
    /// The examples in the question part (`SchemaInfo::examples`), in prompt order: their ids
    /// and similarity to the question.
    pub examples: Vec<(i64, f64)>,
    /// Qualified names (`schema.table`) of the tables in the prompt, in prompt order.
    pub shown: Vec<String>,
    /// Qualified names of the tables left out for lack of room.
    pub dropped: Vec<String>,
    /// How the shown tables were chosen when not all fit (`None`: all are shown).
    pub linking: Option<LinkReport>,
}

impl Plan {
    /// The whole prompt text (prefix and question part).
    pub fn text(&self) -> String {
        self.prefix.text() + &self.question.text()
    }
}

/// What planning needs of the engine: its tokenizer, the identity prefixes are fingerprinted
/// with (`Engine::prefix_identity`), its model's training context and the length of its longest
/// token (computed on first use).
#[derive(Clone)]
pub struct Planner<'a> {
    /// The tokenizer.
    pub tok: &'a Tokenizer,
    /// The model file's identity, plus the FFN hook's tag when one is attached.
    pub identity: Cow<'a, str>,
    /// The model's training context (`Config::context_length`).
    pub context_length: usize,
    /// `max_piece_bytes`, computed on first use.
    pub max_piece: &'a OnceLock<usize>,
}

impl Planner<'_> {
    /// KV positions a cache gets under `opts` (the model's training context bounds it).
    pub fn capacity(&self, opts: &Options) -> usize {
        opts.context_tokens.clamp(1, self.context_length)
    }

    /// Bytes of the vocabulary's longest token (at least 1): a text of B bytes is at least
    /// B / this many tokens.
    fn max_piece_bytes(&self) -> usize {
        *self.max_piece.get_or_init(|| {
            (0..self.tok.vocab_size() as u32)
                .map(|t| self.tok.piece(t).len())
                .max()
                .unwrap_or(1)
                .max(1)
        })
    }

    /// The newest of `turns` whose earlier-turn prompt text ([`prompt::earlier_turn`]) fits in
    /// `max_tokens`, oldest first.
    fn turns_within<'t>(
        &self,
        turns: &'t [Turn],
        max_tokens: usize,
    ) -> Result<&'t [Turn], Nl2SqlError> {
        let mut total = 0;
        let mut first = turns.len();
        for (i, t) in turns.iter().enumerate().rev() {
            total += prompt::earlier_turn(&t.question, &t.answer).encode(self.tok)?.len();
            if total > max_tokens {
                break;
            }
            first = i;
        }
        Ok(&turns[first..])
    }

    /// Builds the prompt for `question` (already cleaned) over the normalized `schema`
    /// ([`SchemaInfo::normalize`]): renders every table, trims to the context budget if needed,
    /// tokenizes and fingerprints the prefix. With `link`, tables that do not all fit are chosen
    /// by meaning (`link.rs`), else by the question's words (`trim.rs`); with `conv`, the
    /// question follows its earlier turns (the newest within `opts.follow_up_tokens`), and the
    /// examples and tables are chosen by its first question.
    pub fn plan(
        &self,
        schema: &SchemaInfo,
        question: &str,
        opts: &Options,
        link: Option<Linking<'_, '_>>,
        conv: Option<Conversation<'_>>,
    ) -> Result<Plan, Nl2SqlError> {
        if schema.tables.is_empty() {
            return Err(Nl2SqlError::NoTables);
        }
        let capacity = self.capacity(opts);
        // Stored questions are one line like asked ones (a direct INSERT may hold anything).
        let turn = |e: &examples::Example| {
            (sanitize_question(&e.question), examples::statement(&e.sql).to_string())
        };
        // What the examples and (when not all fit) the tables are chosen by: a conversation's
        // first question, so that its turns share their prompt's beginning.
        let chosen_by = conv.map_or(question, |c| c.first_question);
        let earlier = match conv {
            Some(c) => self.turns_within(c.turns, opts.follow_up_tokens)?,
            None => &[],
        };
        let chosen = examples::choose(chosen_by, &schema.examples, opts.examples, |e| {
            let (q, sql) = turn(e);
            prompt::example_turn(&q, &sql).encode(self.tok).map(|ids| ids.len())
        })?;
        let owned: Vec<(String, String)> =
            chosen.iter().map(|&(i, _)| turn(&schema.examples[i])).collect();
        let pairs: Vec<(&str, &str)> =
            owned.iter().map(|(q, s)| (q.as_str(), s.as_str())).collect();
        let turns: Vec<(&str, &str)> =
            earlier.iter().map(|t| (t.question.as_str(), t.answer.as_str())).collect();
        let question_part = prompt::question_in_conversation(question, &pairs, &turns);
        let question_ids = question_part.encode(self.tok)?;
        let plain_question_ids = match pairs.is_empty() {
            true => None,
            false => Some(prompt::question(question).encode(self.tok)?),
        };
        let room = Room {
            capacity,
            fixed: prompt::prefix_with_notes("").encode(self.tok)?.len(),
            question: question_ids.len(),
            reserve: answer_reserve(opts.max_new_tokens, capacity),
        };
        let (shown, prefix, prefix_ids, mut linking) =
            self.tables(schema, chosen_by, opts, link, &room)?;
        let dropped = (0..schema.tables.len())
            .filter(|i| !shown.contains(i))
            .map(|i| schema.tables[i].qualified_name())
            .collect();
        if let Some(r) = linking.as_mut().filter(|r| !r.similarity.is_empty()) {
            r.similarity = shown.iter().map(|&i| r.similarity[i]).collect();
        }
        let fingerprint = Fingerprint::of(&self.identity, &prefix.canonical());
        Ok(Plan {
            fingerprint,
            prefix,
            prefix_ids,
            question: question_part,
            question_ids,
            plain_question_ids,
            earlier: earlier.len(),
            examples: chosen.iter().map(|&(i, score)| (schema.examples[i].id, score)).collect(),
            shown: shown.iter().map(|&i| schema.tables[i].qualified_name()).collect(),
            dropped,
            linking,
        })
    }

    /// The tables the prompt shows (indices into `schema`, in prompt order), its prefix and the
    /// prefix's tokens, and how the tables were chosen when not all fit (`None`: all are shown).
    fn tables(
        &self,
        schema: &SchemaInfo,
        chosen_by: &str,
        opts: &Options,
        link: Option<Linking<'_, '_>>,
        room: &Room,
    ) -> Result<Shown, Nl2SqlError> {
        // Each table's block, rendered when first needed: thousands of tables are never all
        // rendered (only those the budget visits).
        let mut blocks = Blocks::new(schema, self.tok);
        if let Some((all_prefix, all_ids)) = self.all_tables(schema, &mut blocks, room)? {
            let all = home_first(schema, (0..schema.tables.len()).collect());
            return Ok((all, all_prefix, all_ids, None));
        }
        let (order, report) = link::order(schema, chosen_by, link)?;
        let (shown, prefix, ids) = self.trimmed(schema, &order, &mut blocks, opts, room)?;
        Ok((shown, prefix, ids, Some(report)))
    }

    /// The prefix of every table and its tokens, when the whole schema fits next to the question
    /// and the reserve.
    fn all_tables(
        &self,
        schema: &SchemaInfo,
        blocks: &mut Blocks,
        room: &Room,
    ) -> Result<Option<(Segments, Vec<u32>)>, Nl2SqlError> {
        let capacity = room.capacity;
        // The whole schema, when it can fit: a text of B bytes is at least B / (longest token)
        // tokens, so a schema of thousands of tables is never tokenized whole, nor rendered
        // whole when a lower bound of its bytes already rules it out.
        let can_fit = |bytes: usize| bytes / self.max_piece_bytes() <= capacity;
        // Then the same with the tables rendered without lazy statistics (they only add notes):
        // none are read for a schema that cannot fit, every table's in one go for one that can.
        let fits_bare = can_fit(schema.tables.iter().map(render::min_bytes).sum())
            && can_fit(blocks.bare_bytes());
        if !fits_bare {
            return Ok(None);
        }
        let all: Vec<usize> = (0..schema.tables.len()).collect();
        schema.prefetch_stats(&all);
        let text = blocks.concat(&home_first(schema, all));
        if !can_fit(text.len()) {
            return Ok(None);
        }
        let all_prefix = prompt::prefix_with_notes(&text);
        let ids = all_prefix.encode(self.tok)?;
        Ok(Some((all_prefix, ids))
            .filter(|(_, ids)| ids.len() + room.question + room.reserve <= capacity))
    }

    /// The tables of `order` (best first) that fit the schema budget, walked home tables first
    /// (`trim::select_home_first`), with their prefix and its tokens.
    fn trimmed(
        &self,
        schema: &SchemaInfo,
        order: &[usize],
        blocks: &mut Blocks,
        opts: &Options,
        room: &Room,
    ) -> Result<(Vec<usize>, Segments, Vec<u32>), Nl2SqlError> {
        let (capacity, reserve) = (room.capacity, room.reserve);
        let overhead = room.fixed + room.question + reserve;
        let mut budget = capacity.saturating_sub(overhead);
        if opts.schema_tokens > 0 {
            budget = budget.min(opts.schema_tokens);
        }
        // Token counts of the tables visited only (tokenizing thousands costs seconds).
        let n = schema.tables.len();
        let home = |i: usize| is_home(schema, i);
        // The walk visits the home tables first, then the others in order.
        let (at_home, away): (Vec<usize>, Vec<usize>) = order.iter().partition(|&&i| home(i));
        blocks.visit_in(&[at_home, away].concat());
        loop {
            let mut sel =
                trim::select_home_first(order, n, home, &mut |i| blocks.tokens(i), budget)?;
            if sel.shown.is_empty() && opts.schema_tokens > 0 {
                // A small setting still shows the first table that fits the context.
                let room = capacity.saturating_sub(overhead);
                sel = trim::select_counted(order, n, &mut |i| blocks.tokens(i), room)?;
            }
            if sel.shown.is_empty() {
                let smallest = (0..n)
                    .map(|i| blocks.tokens(i))
                    .try_fold(usize::MAX, |m, c| c.map(|c| m.min(c)))?;
                return Err(Nl2SqlError::ContextTooSmall {
                    needed: overhead + smallest,
                    available: capacity,
                });
            }
            sel.shown = home_first(schema, sel.shown);
            let text = blocks.concat(&sel.shown);
            let prefix = prompt::prefix_with_notes(&text);
            let ids = prefix.encode(self.tok)?;
            let total = ids.len() + room.question + reserve;
            if total <= capacity {
                return Ok((sel.shown, prefix, ids));
            }
            // Tokens merged differently across table boundaries: shrink and pick again.
            budget = budget.saturating_sub(total - capacity);
        }
    }
}

/// The tables a plan shows (indices, in prompt order), its prefix, the prefix's tokens and how
/// the tables were chosen (`None`: all are shown).
type Shown = (Vec<usize>, Segments, Vec<u32>, Option<LinkReport>);

/// The context a plan fills: its positions, and the tokens besides the schema's.
struct Room {
    /// KV positions of the call ([`Planner::capacity`]).
    capacity: usize,
    /// The prefix without tables (system turn, notes).
    fixed: usize,
    /// The question part.
    question: usize,
    /// Kept free after the prompt ([`answer_reserve`]).
    reserve: usize,
}

/// Checks and cleans `question` (one line, not blank, not too long).
pub fn clean_question(question: &str) -> Result<String, Nl2SqlError> {
    let q = sanitize_question(question);
    if q.is_empty() {
        return Err(Nl2SqlError::EmptyQuestion);
    }
    let chars = q.chars().count();
    if chars > MAX_QUESTION_CHARS {
        return Err(Nl2SqlError::QuestionTooLong { chars, max: MAX_QUESTION_CHARS });
    }
    Ok(q)
}

/// `schema` normalized ([`SchemaInfo::normalize`]): borrowed when it already is (a schema from
/// the catalog is), else the one copy a call makes.
pub fn normalized(schema: &SchemaInfo) -> Cow<'_, SchemaInfo> {
    if schema.is_normalized() {
        return Cow::Borrowed(schema);
    }
    let mut s = schema.clone();
    s.normalize();
    Cow::Owned(s)
}

/// Tables whose lazy statistics (`SchemaInfo::lazy_stats`) are read together: the one a plan
/// renders and those after it in the order it visits them, so a walk over a big schema costs one
/// catalog query per this many tables, not one per table. As many as the walk's tail of misses
/// (`trim::MAX_MISSES`), the most it visits past the last table that fits.
const STATS_BATCH: usize = trim::MAX_MISSES;

/// The tables' blocks of a plan (`Renderer::table`) and their token counts, each computed when
/// first asked for.
struct Blocks<'a> {
    schema: &'a SchemaInfo,
    renderer: Renderer<'a>,
    tok: &'a Tokenizer,
    /// [table] the rendered block.
    text: Vec<Option<String>>,
    /// [table] the block's tokens on its own.
    tokens: Vec<Option<usize>>,
    /// The order the tables will be visited in ([`Blocks::visit_in`]), and [table] its place
    /// there: whose statistics to read along with a table's.
    order: Vec<usize>,
    place: Vec<usize>,
}

impl<'a> Blocks<'a> {
    fn new(schema: &'a SchemaInfo, tok: &'a Tokenizer) -> Blocks<'a> {
        let n = schema.tables.len();
        Blocks {
            schema,
            renderer: Renderer::new(schema),
            tok,
            text: vec![None; n],
            tokens: vec![None; n],
            order: Vec::new(),
            place: Vec::new(),
        }
    }

    /// Bytes of every table's block rendered without lazy statistics (not kept): a lower
    /// bound of their text with them.
    fn bare_bytes(&self) -> usize {
        self.schema.tables.iter().map(|t| self.renderer.table(t).len()).sum()
    }

    /// The tables will mostly be asked for in `order`.
    fn visit_in(&mut self, order: &[usize]) {
        self.place = vec![usize::MAX; self.text.len()];
        for (p, &i) in order.iter().enumerate() {
            self.place[i] = p;
        }
        self.order = order.to_vec();
    }

    /// Table `i`'s block (its statistics read first, with those of the next tables in the
    /// visiting order not rendered yet).
    fn text(&mut self, i: usize) -> &str {
        if self.text[i].is_none() {
            let mut batch = vec![i];
            if let Some(&p) = self.place.get(i).filter(|&&p| p != usize::MAX) {
                let next = self.order[p + 1..].iter().filter(|&&j| self.text[j].is_none());
                batch.extend(next.take(STATS_BATCH - 1));
            }
            self.schema.prefetch_stats(&batch);
            let t = self.schema.table_with_stats(i);
            self.text[i] = Some(self.renderer.table(&t));
        }
        self.text[i].as_deref().expect("rendered above")
    }

    /// The tokens of table `i`'s block.
    fn tokens(&mut self, i: usize) -> Result<usize, Nl2SqlError> {
        if let Some(n) = self.tokens[i] {
            return Ok(n);
        }
        let n = self.tok.encode(self.text(i), false)?.len();
        self.tokens[i] = Some(n);
        Ok(n)
    }

    /// The blocks of tables `indices`, in that order.
    fn concat(&mut self, indices: &[usize]) -> String {
        indices.iter().map(|&i| self.text(i).to_string()).collect()
    }
}

/// The order tables are shown in: those of the default schema (the search path's first, named
/// unqualified) first, then the others, each group in `schema`'s (normalized) order. The home
/// schema's tables are the ones an unqualified query names, and putting them first makes the
/// prompts of a big schema begin alike from one question to the next (the tables chosen from
/// elsewhere vary), so the next call keeps that beginning's keys and values
/// ([`PrefixCache`]'s partial reuse).
fn home_first(schema: &SchemaInfo, mut indices: Vec<usize>) -> Vec<usize> {
    indices.sort_by_key(|&i| (!is_home(schema, i), i));
    indices
}

/// Whether table `i` lives in the default schema (shown unqualified).
fn is_home(schema: &SchemaInfo, i: usize) -> bool {
    schema.default_schema.as_deref() == Some(schema.tables[i].schema.as_str())
}

/// The tables of the normalized `schema` shown in the prompt (`shown`: qualified names), with
/// their statistics. The chosen examples are in the plan's question part; the stages need only
/// tables.
pub fn shown_tables(schema: &SchemaInfo, shown: &[String]) -> SchemaInfo {
    let indices: Vec<usize> = (0..schema.tables.len())
        .filter(|&i| shown.contains(&schema.tables[i].qualified_name()))
        .collect();
    schema.subset_with_stats(&indices)
}

/// Tokens kept free for the repair turn's instruction, the server's message (capped at
/// `stages::repair_turn::MAX_ERROR_CHARS`) and the catalog facts (capped at [`prompt::MAX_FEEDBACK_CHARS`]), at most
/// roughly one token per 3 characters of SQL-ish English.
pub const REPAIR_RESERVE_TOKENS: usize = 160 + prompt::MAX_FEEDBACK_CHARS / 3;

/// Positions kept free after the prompt: room for an answer and a repair round (repair turn +
/// second answer). An answer budget above a quarter of the context is not reserved in full (it
/// would leave no room for the schema): such answers end at `context_full` instead.
fn answer_reserve(max_new_tokens: usize, capacity: usize) -> usize {
    // The repair turn's share is capped at an eighth of the context, so a small context still
    // has room for a schema (a longer repair turn than fits is simply not run).
    2 * max_new_tokens.min(capacity / 4) + REPAIR_RESERVE_TOKENS.min(capacity / 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_is_capped_by_the_context() {
        assert_eq!(answer_reserve(128, 8192), 2 * 128 + REPAIR_RESERVE_TOKENS);
        assert_eq!(answer_reserve(4096, 8192), 2 * 2048 + REPAIR_RESERVE_TOKENS);
        assert_eq!(answer_reserve(128, 512), 2 * 128 + 64, "an eighth of a small context");
    }

    #[test]
    fn questions_are_checked() {
        assert!(matches!(clean_question(" \n\t"), Err(Nl2SqlError::EmptyQuestion)));
        assert_eq!(clean_question(" how many\nusers? ").unwrap(), "how many users?");
        let long = "x".repeat(MAX_QUESTION_CHARS + 1);
        assert!(
            matches!(clean_question(&long), Err(Nl2SqlError::QuestionTooLong { chars, max }) if chars == MAX_QUESTION_CHARS + 1 && max == MAX_QUESTION_CHARS)
        );
        assert!(clean_question(&"x".repeat(MAX_QUESTION_CHARS)).is_ok());
    }
}
