//! The adaptive draft length: long where SQL is constrained (after FROM / JOIN / ON / WHERE or a
//! table alias and dot, the next tokens are names the prompt spells out), short after literals
//! (numbers and strings come from the question, if at all), and adjusted by how many drafted
//! tokens the model accepted so far in this answer.

use crate::nl2sql::sql::lexer::{self, Kind};

/// Most tokens drafted per verification pass. Measured on the 1.5B model (2 threads, quiet
/// machine, `cargo bench --bench e2e -- --pp N`): a pass over 1+3 tokens costs ~1.6 one-token
/// passes, over 1+7 ~3.3, over 1+12 ~3.4 (the batched kernels turn compute-bound); with ~40-50%
/// of drafted tokens accepted, only short drafts pay for themselves. On the AVX2 tier at depth
/// 1350 (`cargo bench --bench e2e -- --verify 1,2,3,4,5,7 --depth 1350`): 1.24x, 1.67x, 1.76x,
/// 2.16x, 2.82x; replaying recorded answers, no length rule over the same drafts beat these
/// lengths by more than ~3-5 % (docs/nl2sql-accuracy.md).
pub const MAX_DRAFT: usize = 6;

/// Draft length after a keyword that must be followed by a name or condition.
const CONSTRAINED: usize = 4;
/// Draft length in the middle of a literal (a string or number).
const AFTER_LITERAL: usize = 1;
/// Draft length elsewhere.
const DEFAULT: usize = 3;
/// Bound of the learned adjustment, in tokens either way.
const MAX_BONUS: i32 = 2;

/// Keywords after which SQL is constrained to names of the prompt.
const CONSTRAINING: &[&str] =
    &["FROM", "JOIN", "ON", "WHERE", "BY", "SELECT", "AND", "OR", "HAVING"];

/// The adaptive window of one answer.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Learned adjustment in tokens, in `-MAX_BONUS..=MAX_BONUS`.
    bonus: i32,
}

/// Where the SQL text currently is, for the draft length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlState {
    /// After a constraining keyword or `alias.`.
    Constrained,
    /// Inside or right after a string or number literal.
    Literal,
    /// Anything else.
    Free,
}

/// Classifies the end of `text` (the answer so far).
pub fn sql_state(text: &str) -> SqlState {
    // An open string literal.
    if lexer::ended_inside(text) == Some(Kind::String) {
        return SqlState::Literal;
    }
    let trimmed = text.trim_end();
    let Some(last) = trimmed.chars().last() else { return SqlState::Free };
    if last == '\'' || last.is_ascii_digit() && !ends_with_identifier_digit(trimmed) {
        return SqlState::Literal;
    }
    if last == '.' && ends_with_name(&trimmed[..trimmed.len() - 1]) {
        return SqlState::Constrained;
    }
    let word: String = trimmed
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if CONSTRAINING.iter().any(|k| k.eq_ignore_ascii_case(&word)) {
        return SqlState::Constrained;
    }
    SqlState::Free
}

/// True when `s` ends with an identifier (`u`, `t1`, `"My Table"`), not a number.
fn ends_with_name(s: &str) -> bool {
    match s.chars().last() {
        Some('"') => true,
        Some(c) if c.is_alphabetic() || c == '_' => true,
        Some(c) if c.is_ascii_digit() => ends_with_identifier_digit(s),
        _ => false,
    }
}

/// True when the trailing digits of `s` belong to an identifier (`col2`, `t1`).
fn ends_with_identifier_digit(s: &str) -> bool {
    let before = s.trim_end_matches(|c: char| c.is_ascii_digit());
    before.chars().last().is_some_and(|c| c.is_alphabetic() || c == '_')
}

impl Window {
    /// A window with no learned adjustment.
    pub fn new() -> Window {
        Window::default()
    }

    /// How many tokens to draft after `text`.
    pub fn len(&self, text: &str) -> usize {
        let base = match sql_state(text) {
            SqlState::Constrained => CONSTRAINED,
            SqlState::Literal => AFTER_LITERAL,
            SqlState::Free => DEFAULT,
        };
        (base as i32 + self.bonus).clamp(1, MAX_DRAFT as i32) as usize
    }

    /// Learns from one verification: `accepted` of `drafted` tokens were right. All accepted
    /// lengthens the next drafts, none shortens them, a partial acceptance nudges down.
    pub fn update(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        self.bonus = if accepted >= drafted {
            self.bonus + 2
        } else if accepted == 0 {
            self.bonus - 2
        } else if 2 * accepted < drafted {
            self.bonus - 1
        } else {
            self.bonus
        }
        .clamp(-MAX_BONUS, MAX_BONUS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_the_sql_state() {
        assert_eq!(sql_state("SELECT * FROM "), SqlState::Constrained);
        assert_eq!(sql_state("SELECT * FROM users u JOIN"), SqlState::Constrained);
        assert_eq!(sql_state("SELECT u."), SqlState::Constrained);
        assert_eq!(sql_state("select count(*) from users where"), SqlState::Constrained);
        assert_eq!(sql_state("SELECT * FROM users WHERE name = 'Jo"), SqlState::Literal);
        assert_eq!(sql_state("SELECT * FROM users WHERE name = 'Jo'"), SqlState::Literal);
        assert_eq!(sql_state("SELECT * FROM t LIMIT 10"), SqlState::Literal);
        assert_eq!(sql_state("SELECT col2"), SqlState::Free);
        assert_eq!(sql_state("SELECT count"), SqlState::Free);
        assert_eq!(sql_state("SELECT 1."), SqlState::Free);
        assert_eq!(sql_state(""), SqlState::Free);
        // "FROMAGE" is not FROM.
        assert_eq!(sql_state("SELECT fromage"), SqlState::Free);
    }

    #[test]
    fn adapts_to_acceptance_within_bounds() {
        let mut w = Window::new();
        assert_eq!(w.len("SELECT * FROM "), CONSTRAINED);
        assert_eq!(w.len("x = 'a"), AFTER_LITERAL);
        assert_eq!(w.len("SELECT count"), DEFAULT);
        for _ in 0..10 {
            w.update(5, 5);
        }
        assert_eq!(w.len("SELECT * FROM "), MAX_DRAFT);
        assert_eq!(w.len("SELECT count"), DEFAULT + MAX_BONUS as usize);
        for _ in 0..10 {
            w.update(5, 0);
        }
        assert_eq!(w.len("x = 'a"), 1, "never below one token");
        assert_eq!(w.len("SELECT count"), DEFAULT - MAX_BONUS as usize);
        w.update(0, 0);
        assert_eq!(
            w.len("SELECT count"),
            DEFAULT - MAX_BONUS as usize,
            "no draft, nothing learned"
        );
        w.update(4, 3);
        assert_eq!(w.len("SELECT count"), DEFAULT - MAX_BONUS as usize);
        w.update(4, 1);
        assert_eq!(
            w.len("SELECT count"),
            DEFAULT - MAX_BONUS as usize,
            "clamped at the lower bound"
        );
    }
}
