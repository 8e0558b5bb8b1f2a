//! A conversation carried by the client: the earlier turns of a follow-up, sealed into an opaque
//! text token that the caller passes back with its next question, so that the server keeps
//! nothing between calls.
//!
//! Why the client carries it: behind a transaction-mode pooler two clients share a backend
//! between transactions, and one client's next transaction may run on another backend. A
//! conversation kept in a backend is then either shown to the wrong client or missing; one the
//! client holds follows that client wherever its calls run, and no other client can reach it.
//!
//! What a token is: `tic1.` and the base64url (no padding) of a JSON object with the caller's
//! scope (opaque here: the glue's role, schemas, row security and model digest), the first
//! question, the schema prefix fingerprint and the turns (question, accepted SQL, the
//! assistant's words). It is not encrypted: it holds what the client asked and was answered,
//! nothing else. It is not signed either: a client that rewrites one only changes the text of
//! its own earlier turns, which it could as well have typed into its question; the schema
//! shown, the validation and any execution still use the caller's privileges.

use crate::generate::fingerprint::Fingerprint;
use crate::nl2sql::plan::conversation::{Conversation, Turn};
use serde_json::{json, Value};

/// The token's prefix: `tic1` = TurboInfer conversation, format 1 (a later format gets a new
/// prefix, so an old client's token is recognised and refused with a clear message).
pub const PREFIX: &str = "tic1.";

/// The longest token accepted, in bytes. 32 turns (`turboinfer.follow_up_turns`' maximum) of a
/// long question and a 2,000-character statement each, in base64, stay under it; anything longer
/// is not a token this server wrote, and is refused before being decoded.
pub const MAX_TOKEN_BYTES: usize = 256 * 1024;

/// Why a token cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the conversation token is {bytes} bytes long; the limit is {max}")]
    TooLong { bytes: usize, max: usize },
    #[error("the conversation token does not start with \"{PREFIX}\"")]
    Prefix,
    #[error("the conversation token is not valid base64url")]
    Base64,
    #[error("the conversation token's content is malformed: {0}")]
    Malformed(&'static str),
}

/// A conversation as a token carries it: the turns, what they were asked over, and the caller's
/// scope (which the engine does not read).
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// Who asked, under what (the glue's; compared by the glue before the turns are used).
    pub scope: Value,
    /// The conversation's first question (see [`Conversation::first_question`]).
    pub first_question: String,
    /// The schema prefix the turns were asked over.
    pub fingerprint: Fingerprint,
    /// The turns, oldest first.
    pub turns: Vec<Turn>,
}

impl Carried {
    /// The engine's view of these turns.
    pub fn conversation(&self) -> Conversation<'_> {
        Conversation {
            first_question: &self.first_question,
            turns: &self.turns,
            fingerprint: self.fingerprint,
        }
    }

    /// The token of this conversation.
    pub fn encode(&self) -> String {
        let turns: Vec<Value> = self
            .turns
            .iter()
            .map(|t| json!({ "q": t.question, "s": t.sql, "a": t.answer }))
            .collect();
        let body = json!({
            "scope": self.scope,
            "first": self.first_question,
            "fp": hex(&self.fingerprint.0),
            "turns": turns,
        });
        let text = body.to_string();
        format!("{PREFIX}{}", base64::encode_config(text.as_bytes(), base64::URL_SAFE_NO_PAD))
    }

    /// The conversation a token carries, keeping at most `max_turns` (the newest): a token
    /// written under a larger `turboinfer.follow_up_turns` is cut, not refused.
    pub fn decode(token: &str, max_turns: usize) -> Result<Carried, TokenError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::TooLong { bytes: token.len(), max: MAX_TOKEN_BYTES });
        }
        let b64 = token.trim().strip_prefix(PREFIX).ok_or(TokenError::Prefix)?;
        let bytes =
            base64::decode_config(b64, base64::URL_SAFE_NO_PAD).map_err(|_| TokenError::Base64)?;
        let body: Value =
            serde_json::from_slice(&bytes).map_err(|_| TokenError::Malformed("not JSON"))?;
        let text = |v: &Value, what: &'static str| {
            v.as_str().map(str::to_string).ok_or(TokenError::Malformed(what))
        };
        let fingerprint = body
            .get("fp")
            .and_then(Value::as_str)
            .and_then(unhex32)
            .map(Fingerprint)
            .ok_or(TokenError::Malformed("no schema fingerprint"))?;
        let first_question = text(&body["first"], "no first question")?;
        let list = body["turns"].as_array().ok_or(TokenError::Malformed("no turns"))?;
        if list.is_empty() {
            return Err(TokenError::Malformed("no turns"));
        }
        let mut turns = list
            .iter()
            .map(|t| {
                Ok(Turn {
                    question: text(&t["q"], "a turn without its question")?,
                    sql: text(&t["s"], "a turn without its SQL")?,
                    answer: text(&t["a"], "a turn without its answer")?,
                })
            })
            .collect::<Result<Vec<_>, TokenError>>()?;
        let extra = turns.len().saturating_sub(max_turns.max(1));
        turns.drain(..extra);
        let scope = body.get("scope").cloned().unwrap_or(Value::Null);
        Ok(Carried { scope, first_question, fingerprint, turns })
    }
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The 32 bytes of a 64-digit hex string.
fn unhex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(turns: usize) -> Carried {
        Carried {
            scope: json!({ "role": 10, "schemas": ["public"] }),
            first_question: "How many orders?".into(),
            fingerprint: Fingerprint([7; 32]),
            turns: (0..turns)
                .map(|i| Turn {
                    question: format!("question {i} «é»"),
                    sql: format!("SELECT {i}"),
                    answer: format!("```sql\nSELECT {i}\n```"),
                })
                .collect(),
        }
    }

    #[test]
    fn a_token_carries_its_conversation_exactly() {
        let c = sample(3);
        let token = c.encode();
        assert!(token.starts_with(PREFIX));
        assert!(token[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        assert_eq!(Carried::decode(&token, 32).unwrap(), c);
        // Kept to the newest turns.
        let cut = Carried::decode(&token, 2).unwrap();
        assert_eq!(cut.turns, c.turns[1..].to_vec());
        assert_eq!(Carried::decode(&token, 0).unwrap().turns.len(), 1);
    }

    #[test]
    fn bad_tokens_are_refused_with_a_reason() {
        assert_eq!(Carried::decode("hello", 4), Err(TokenError::Prefix));
        assert_eq!(Carried::decode("tic1.***", 4), Err(TokenError::Base64));
        let not_json = format!("{PREFIX}{}", base64::encode_config("{", base64::URL_SAFE_NO_PAD));
        assert_eq!(Carried::decode(&not_json, 4), Err(TokenError::Malformed("not JSON")));
        let mut c = sample(1);
        c.turns.clear();
        assert_eq!(Carried::decode(&c.encode(), 4), Err(TokenError::Malformed("no turns")));
        let no_fp = json!({ "first": "q", "turns": [{ "q": "q", "s": "s", "a": "a" }] });
        let t = format!(
            "{PREFIX}{}",
            base64::encode_config(no_fp.to_string(), base64::URL_SAFE_NO_PAD)
        );
        assert_eq!(Carried::decode(&t, 4), Err(TokenError::Malformed("no schema fingerprint")));
        let long = format!("{PREFIX}{}", "A".repeat(MAX_TOKEN_BYTES));
        assert!(matches!(Carried::decode(&long, 4), Err(TokenError::TooLong { .. })));
    }

    #[test]
    fn a_turn_with_a_missing_field_is_malformed() {
        let body = json!({ "first": "q", "fp": hex(&[1; 32]), "turns": [{ "q": "q", "s": "s" }] });
        let t =
            format!("{PREFIX}{}", base64::encode_config(body.to_string(), base64::URL_SAFE_NO_PAD));
        assert_eq!(Carried::decode(&t, 4), Err(TokenError::Malformed("a turn without its answer")));
    }
}
