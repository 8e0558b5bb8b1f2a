//! ChatML prompt assembly, as in the fixture prompts:
//!
//! ```text
//! <|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n### Schema\n{DDL}### Question\n   <- prefix
//! {question}<|im_end|>\n<|im_start|>assistant\n                                                      <- question part
//! ```
//!
//! The prefix depends only on the schema (and model), so its KV state is computed once and reused
//! for every question. Template markers are tokenized with special-token parsing; everything else
//! (system text, schema, question, previous answers, parser errors) is tokenized as plain text,
//! so a comment or question containing `<|im_end|>` is just characters, never a control token.

use crate::nl2sql::base::error::Nl2SqlError;
use crate::tokenizer::Tokenizer;

/// The system instruction (identical to the fixtures' prompts).
pub const SYSTEM_PROMPT: &str =
    "You are a PostgreSQL expert. Given the database schema, write one PostgreSQL query that answers the question. Reply with only the SQL.";

/// ChatML markers the model must know as single special tokens.
const CHATML_TOKENS: [&str; 2] = ["<|im_start|>", "<|im_end|>"];

/// One piece of a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Template text with ChatML markers (tokenized with special tokens parsed).
    Template(&'static str),
    /// Untrusted or free text (tokenized as plain text).
    Text(String),
}

impl Segment {
    /// The segment's characters.
    pub fn as_str(&self) -> &str {
        match self {
            Segment::Template(s) => s,
            Segment::Text(s) => s,
        }
    }
}

/// A sequence of segments (a prompt or a part of one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Segments(pub Vec<Segment>);

impl Segments {
    /// The concatenated text.
    pub fn text(&self) -> String {
        self.0.iter().map(Segment::as_str).collect()
    }

    /// A canonical, unambiguous serialisation (kind, byte length, bytes per segment) for hashing:
    /// the same text split into different segment kinds tokenizes differently.
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        for s in &self.0 {
            let kind = match s {
                Segment::Template(_) => 'T',
                Segment::Text(_) => 'X',
            };
            out.push_str(&format!("{kind}{}:{}", s.as_str().len(), s.as_str()));
        }
        out
    }

    /// Token ids of the segments, each tokenized on its own (no BOS: Qwen/SmolLM ChatML adds none).
    pub fn encode(&self, tok: &Tokenizer) -> Result<Vec<u32>, Nl2SqlError> {
        let mut ids = Vec::new();
        for s in &self.0 {
            match s {
                Segment::Template(t) => ids.extend(tok.encode(t, true)?),
                Segment::Text(t) => ids.extend(tok.encode(t, false)?),
            }
        }
        Ok(ids)
    }
}

/// Fails unless the tokenizer has the ChatML markers as special tokens.
pub fn check_chat_template(tok: &Tokenizer) -> Result<(), Nl2SqlError> {
    for t in CHATML_TOKENS {
        match tok.token_id(t) {
            Some(id) if tok.is_special(id) => {}
            _ => {
                return Err(Nl2SqlError::UnsupportedModel(format!(
                "the model's vocabulary has no {t} special token (ChatML chat template required)"
            )))
            }
        }
    }
    Ok(())
}

/// The schema-dependent prefix: system turn, then the user turn up to the question.
pub fn prefix(ddl: &str) -> Segments {
    Segments(vec![
        Segment::Template("<|im_start|>system\n"),
        Segment::Text(SYSTEM_PROMPT.to_string()),
        Segment::Template("<|im_end|>\n<|im_start|>user\n"),
        Segment::Text(format!("### Schema\n{ddl}### Question\n")),
    ])
}

/// PostgreSQL reminders shown after the schema: generic dialect facts a small model gets wrong
/// when it writes from other SQL dialects' habits (measured on the sql-eval development set: wrong
/// table for a column, DATEDIFF, EXTRACT on epoch integers, integer division in ratios).
pub const DIALECT_NOTES: &str = "### Notes\n\
- Use only the tables and columns listed above; qualify each column with its table name or alias, and join a table before using its columns.\n\
- PostgreSQL has no DATEDIFF or DATEADD: subtract dates (the difference of two dates is days) and add intervals (CURRENT_DATE - INTERVAL '1 month'); DATE_TRUNC and EXTRACT work on date and timestamp columns (cast text dates with ::date), and TO_TIMESTAMP converts unix-epoch seconds.\n\
- For ratios and percentages cast to numeric (x::numeric / NULLIF(y, 0)), since integer division truncates.\n";

/// The schema-dependent prefix nl2sql uses: as [`prefix`], with [`DIALECT_NOTES`] after the DDL.
pub fn prefix_with_notes(ddl: &str) -> Segments {
    prefix(&format!("{ddl}{DIALECT_NOTES}"))
}

/// One approved example as a finished exchange, placed where the question would be: its
/// question closing the user turn, the assistant's answer in a SQL fence (as the models write
/// theirs), and the next user turn opened up to where the next question goes.
pub fn example_turn(question: &str, sql: &str) -> Segments {
    earlier_turn(question, &format!("```sql\n{sql}\n```"))
}

/// An earlier exchange of the conversation (an approved example, or a turn of the session's
/// conversation that a follow-up is asked after): its question closing the user turn, the
/// assistant's words `answer` as they were (a SQL fence around the statement), and the next user
/// turn opened up to where the next question goes.
pub fn earlier_turn(question: &str, answer: &str) -> Segments {
    Segments(vec![
        Segment::Text(question.to_string()),
        Segment::Template("<|im_end|>\n<|im_start|>assistant\n"),
        Segment::Text(answer.to_string()),
        Segment::Template("<|im_end|>\n<|im_start|>user\n"),
        Segment::Text("### Question\n".to_string()),
    ])
}

/// The question part with approved examples (`examples.rs`) before it, each as an earlier
/// exchange ([`example_turn`]); with none it is [`question`] exactly, so a database without
/// examples gets the prompt it always got. The schema prefix is the same either way.
pub fn question_with_examples(q: &str, examples: &[(&str, &str)]) -> Segments {
    question_in_conversation(q, examples, &[])
}

/// [`question_with_examples`], then the conversation's earlier turns `earlier` (question, the
/// assistant's words: [`earlier_turn`]) between the examples and the question: a follow-up
/// question (`conversation.rs`). The examples come first so that the turns of one conversation
/// are asked after the same tokens and each turn's prompt begins with the one before it.
pub fn question_in_conversation(
    q: &str,
    examples: &[(&str, &str)],
    earlier: &[(&str, &str)],
) -> Segments {
    let mut segments = Vec::new();
    for (eq, sql) in examples {
        segments.extend(example_turn(eq, sql).0);
    }
    for (eq, answer) in earlier {
        segments.extend(earlier_turn(eq, answer).0);
    }
    segments.extend(question(q).0);
    Segments(segments)
}

/// Longest catalog-facts text of a repair turn (`repair/feedback.rs`), in characters (about 300
/// tokens): enough for a table's columns and a few suggestions, small enough to fit the repair
/// reserve of the context (`planner::REPAIR_RESERVE_TOKENS`).
pub const MAX_FEEDBACK_CHARS: usize = 1200;

/// Text the assistant's repair answer starts with, already in the prompt: the answer then
/// continues inside a SQL fence, so it cannot drift into prose about the error.
pub const REPAIR_SEED: &str = "```sql\n";

/// The question, closing the user turn and opening the assistant's.
pub fn question(q: &str) -> Segments {
    Segments(vec![
        Segment::Text(q.to_string()),
        Segment::Template("<|im_end|>\n<|im_start|>assistant\n"),
    ])
}

/// The repair turn, appended after the question part: the rejected answer as the assistant's
/// turn (in a SQL fence, as the models write their answers: the cache rows of the answer just
/// decoded then serve this turn too, `held.rs`), the server's message (or, when `advisory`, the doubt about a statement that runs) and
/// the catalog facts (`feedback`, may be empty) as a new user turn, and a fresh assistant turn
/// that starts with [`REPAIR_SEED`].
pub fn repair(previous_sql: &str, error: &str, feedback: &str, advisory: bool) -> Segments {
    let facts = if feedback.is_empty() { String::new() } else { format!("{feedback}\n") };
    let verdict = if advisory {
        format!("Check that query: {error}.")
    } else {
        format!("PostgreSQL rejected that query: ERROR: {error}")
    };
    Segments(vec![
        Segment::Text(format!("{REPAIR_SEED}{previous_sql}\n```")),
        Segment::Template("<|im_end|>\n<|im_start|>user\n"),
        Segment::Text(format!(
            "{verdict}\n{facts}Write the corrected query: one SELECT statement that uses only the tables and columns of the schema."
        )),
        Segment::Template("<|im_end|>\n<|im_start|>assistant\n"),
        Segment::Text(REPAIR_SEED.to_string()),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembles_the_fixture_prompt() {
        // The fixtures' prompt for "How many users are there?", character for character.
        let ddl = "CREATE TABLE users (id integer PRIMARY KEY, name text NOT NULL, email text, country text, created_at timestamp);\n\
CREATE TABLE orders (id integer PRIMARY KEY, user_id integer REFERENCES users(id), amount numeric(10,2), status text, ordered_at timestamp);\n";
        let text = prefix(ddl).text() + &question("How many users are there?").text();
        let want = "<|im_start|>system\nYou are a PostgreSQL expert. Given the database schema, write one PostgreSQL query that answers the question. Reply with only the SQL.<|im_end|>\n<|im_start|>user\n### Schema\nCREATE TABLE users (id integer PRIMARY KEY, name text NOT NULL, email text, country text, created_at timestamp);\nCREATE TABLE orders (id integer PRIMARY KEY, user_id integer REFERENCES users(id), amount numeric(10,2), status text, ordered_at timestamp);\n### Question\nHow many users are there?<|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(text, want);
    }

    #[test]
    fn examples_are_earlier_exchanges() {
        assert_eq!(question_with_examples("q?", &[]), question("q?"));
        let t =
            question_with_examples("How many?", &[("Count users", "SELECT count(*) FROM users")])
                .text();
        assert_eq!(
            t,
            "Count users<|im_end|>\n<|im_start|>assistant\n```sql\nSELECT count(*) FROM users\n```<|im_end|>\n<|im_start|>user\n### Question\nHow many?<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn earlier_turns_follow_the_examples() {
        assert_eq!(question_in_conversation("q?", &[], &[]), question("q?"));
        let t = question_in_conversation(
            "By region?",
            &[("Count users", "SELECT count(*) FROM users")],
            &[("How many orders?", "```sql\nSELECT count(*) FROM orders;\n```")],
        )
        .text();
        assert_eq!(
            t,
            "Count users<|im_end|>\n<|im_start|>assistant\n```sql\nSELECT count(*) FROM users\n```<|im_end|>\n<|im_start|>user\n### Question\nHow many orders?<|im_end|>\n<|im_start|>assistant\n```sql\nSELECT count(*) FROM orders;\n```<|im_end|>\n<|im_start|>user\n### Question\nBy region?<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn canonical_form_separates_kinds() {
        let a = Segments(vec![Segment::Template("<|im_end|>")]);
        let b = Segments(vec![Segment::Text("<|im_end|>".into())]);
        assert_eq!(a.text(), b.text());
        assert_ne!(a.canonical(), b.canonical());
        assert_eq!(a.canonical(), "T10:<|im_end|>");
    }

    #[test]
    fn repair_turn_mentions_the_error() {
        let t = repair("SELEC 1", "syntax error at or near \"SELEC\"", "", false).text();
        assert!(t.starts_with("```sql\nSELEC 1\n```<|im_end|>\n<|im_start|>user\nPostgreSQL rejected that query: ERROR: syntax error"));
        assert!(t.ends_with("<|im_start|>assistant\n```sql\n"));
        let t = repair(
            "SELECT x FROM t",
            "column \"x\" does not exist",
            "t has only these columns: y integer.",
            false,
        )
        .text();
        assert!(
            t.contains(
                "does not exist\nt has only these columns: y integer.\nWrite the corrected query"
            ),
            "{t}"
        );
    }
}
