//! Follow-up questions: a question answered after the session's earlier turns ("how many orders
//! last month?", then "by region?").
//!
//! The earlier turns go into the prompt as finished exchanges between the approved examples and
//! the question (`prompt::question_in_conversation`): each turn's question and the assistant's
//! words for its answer. A turn answered at the first attempt is shown exactly as the model wrote
//! it, so the next turn's prompt begins with the tokens the KV cache already holds after the
//! schema prefix (the question and the answer just decoded): those rows are kept
//! (`stages/prefix.rs`), only the follow-up's own tokens are prefilled. A repaired or rewritten
//! answer is shown as its final statement in a SQL fence.
//!
//! Which turns there are, and when they are dropped (another role, search path or model), is
//! the caller's business (the PostgreSQL glue keeps them per backend); the engine drops them when
//! the schema prefix they were asked over changed ([`Conversation::fingerprint`]), and the oldest
//! ones beyond `Options::follow_up_tokens`.

use super::outcome::{Attempt, Outcome};
pub use super::outcome::{Dropped, FollowUp};
use crate::generate::fingerprint::Fingerprint;

/// One answered turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The question as asked (cleaned).
    pub question: String,
    /// Its accepted statement.
    pub sql: String,
    /// The assistant's words for it in later prompts.
    pub answer: String,
}

impl Turn {
    /// The turn `outcome` makes of `question` (cleaned), when it enters a conversation: an
    /// answered question with an accepted statement. A refused question, or one whose statement
    /// was still rejected after the repair rounds, is no turn: it leaves the conversation as it
    /// was, so a follow-up after it follows the turn before.
    pub fn of(question: &str, outcome: &Outcome) -> Option<Turn> {
        let accepted = !outcome.refused() && outcome.error.is_none() && !outcome.sql.is_empty();
        accepted.then(|| Turn::answered(question, &outcome.sql, &outcome.attempts))
    }

    /// The turn of `question` answered with the accepted statement `sql` after `attempts`.
    fn answered(question: &str, sql: &str, attempts: &[Attempt]) -> Turn {
        // Answered at the first attempt: the model's own words (the cache holds their rows).
        let answer = match attempts {
            [a] if a.rewritten.is_none() && a.sql == sql => a.raw.clone(),
            _ => format!("```sql\n{sql}\n```"),
        };
        Turn { question: question.to_string(), sql: sql.to_string(), answer }
    }
}

/// The earlier turns a follow-up is asked after.
#[derive(Debug, Clone, Copy)]
pub struct Conversation<'a> {
    /// The conversation's first question: the approved examples and, in a schema too big to
    /// show whole, the tables are chosen by it for every turn, so that each turn's prompt is
    /// the one before it continued.
    pub first_question: &'a str,
    /// The earlier turns, oldest first.
    pub turns: &'a [Turn],
    /// The schema prefix they were asked over: when the prompt's prefix differs (the schema
    /// changed, or the model), the turns are dropped and the question is asked alone.
    pub fingerprint: Fingerprint,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nl2sql::outcome::Attempt;

    fn attempt(raw: &str, sql: &str, error: Option<&str>) -> Attempt {
        Attempt {
            raw: raw.into(),
            sql: sql.into(),
            generated_tokens: 3,
            ids: vec![1, 2, 3],
            stop: crate::nl2sql::StopReason::EndOfStatement,
            error: error.map(str::to_string),
            advisory: false,
            rewritten: None,
            sqlstate: None,
            feedback: String::new(),
            spec: Default::default(),
        }
    }

    #[test]
    fn first_answers_keep_the_model_words() {
        let raw = "```sql\nSELECT count(*) FROM orders;\n```";
        let sql = "SELECT count(*) FROM orders";
        let mut attempts = vec![attempt(raw, sql, None)];
        let t = Turn::answered("How many orders?", sql, &attempts);
        assert_eq!(t.answer, raw, "the model's own words");
        assert_eq!((t.question.as_str(), t.sql.as_str()), ("How many orders?", sql));
        // Repaired: the final statement, fenced.
        attempts.insert(0, attempt("```sql\nSELECT nope\n```", "SELECT nope", Some("no")));
        let t = Turn::answered("How many orders?", sql, &attempts);
        assert_eq!(t.answer, "```sql\nSELECT count(*) FROM orders\n```");
        // Rewritten by the engine: fenced too.
        let mut rewritten = attempt(raw, sql, None);
        rewritten.rewritten = Some("requalified".into());
        let t = Turn::answered("How many orders?", sql, &[rewritten]);
        assert_eq!(t.answer, "```sql\nSELECT count(*) FROM orders\n```");
    }
}
