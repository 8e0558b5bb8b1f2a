//! The numbers a question writes in digits and whether its answer writes them too: "the top 5"
//! answered without `LIMIT 5`, the "2" of "the top 2 states" dropped (the verdict's
//! `number_not_used`, `api/verdict.rs`). Read off the texts alone, no catalog.

/// Whether byte `c` belongs to a name: a letter, digit or `_`, or a byte of a non-ASCII
/// character (a letter of another script, as a name reads it).
fn name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The digits of `b` from `i` on: where they end.
fn digits_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The numbers `text` writes in digits: a run of digits with optional thousands separators
/// (`8,000`) and decimals (`2.5`), not touching a name on either side (`Q1`, `3rd`, `covid19`
/// are names, not numbers). With each: whether `%` or the word "percent" follows.
fn question_numbers(text: &str) -> Vec<(Number, bool)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() || (i > 0 && name_byte(b[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        i = digits_end(b, i);
        let mut whole = text[start..i].to_string();
        // Thousands: a `,` and three digits that no fourth one follows, as often as written.
        while b.get(i) == Some(&b',') && digits_end(b, i + 1) == i + 4 {
            whole.push_str(&text[i + 1..i + 4]);
            i += 4;
        }
        let mut fraction = "";
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let end = digits_end(b, i + 1);
            fraction = &text[i + 1..end];
            i = end;
        }
        if b.get(i).is_some_and(|&c| name_byte(c)) {
            while i < b.len() && name_byte(b[i]) {
                i += 1; // a name that starts with digits ("3rd", "10x"): no number
            }
            continue;
        }
        let rest = text[i..].trim_start();
        let percent = rest.starts_with('%')
            || rest.get(..7).is_some_and(|w| w.eq_ignore_ascii_case("percent"));
        out.push((Number::new(&whole, fraction), percent));
    }
    out
}

/// A number as digits: the integer part without leading zeros ("0" for none), the fraction
/// without trailing zeros (`04` and `4`, `2.50` and `2.5` are one number).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Number {
    whole: String,
    fraction: String,
}

impl Number {
    fn new(whole: &str, fraction: &str) -> Number {
        let w = whole.trim_start_matches('0');
        Number {
            whole: if w.is_empty() { "0".into() } else { w.into() },
            fraction: fraction.trim_end_matches('0').into(),
        }
    }

    /// The number a hundred times smaller (`50` → `0.5`): a percentage as a fraction.
    fn hundredth(&self) -> Number {
        // At least three digits before the point, so that two can move behind it.
        let whole = format!("{:0>3}", self.whole);
        let (w, f) = whole.split_at(whole.len() - 2);
        Number::new(w, &format!("{f}{}", self.fraction))
    }
}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fraction.as_str() {
            "" => write!(f, "{}", self.whole),
            frac => write!(f, "{}.{frac}", self.whole),
        }
    }
}

/// The numbers `question` writes in digits that `sql` writes nowhere, in the question's order,
/// each once: "the top 5" answered without `LIMIT 5`, the "2" of "the top 2 states" dropped. The
/// SQL's numbers are every run of digits in it (string constants, dates and names too:
/// `'2023-01-04'` holds 2023, 1 and 4) and every `digits.digits`; a percentage of the question
/// may be written as a fraction (`50 %` as `0.5`).
pub fn unused_numbers(question: &str, sql: &str) -> Vec<String> {
    let b = sql.as_bytes();
    let mut in_sql: Vec<Number> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        i = digits_end(b, i);
        in_sql.push(Number::new(&sql[start..i], ""));
        if b.get(i) == Some(&b'.') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
            in_sql.push(Number::new(&sql[start..i], &sql[i + 1..digits_end(b, i + 1)]));
        }
        // The digits after a point are a run of their own (the loop goes on from the point).
    }
    let mut out: Vec<String> = Vec::new();
    for (n, percent) in question_numbers(question) {
        let used = in_sql.contains(&n) || (percent && in_sql.contains(&n.hundredth()));
        let shown = n.to_string();
        if !used && !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The question's numbers the query does not write, as a user reads them: dates, leading
    /// zeros, thousands, decimals and percentages match; names with digits are no numbers.
    #[test]
    fn numbers_of_the_question_in_the_query() {
        let cases: [(&str, &str, &[&str]); 13] = [
            ("top 5 customers by sales", "SELECT name FROM c ORDER BY s DESC LIMIT 5", &[]),
            ("top 5 customers by sales", "SELECT name FROM c ORDER BY s DESC", &["5"]),
            // A date as the question writes it, and as the query does.
            (
                "orders between Jan 1, 2023 and Mar 31, 2023",
                "SELECT * FROM o WHERE d BETWEEN '2023-01-01' AND '2023-03-31'",
                &[],
            ),
            ("orders on 2023-04-04", "SELECT * FROM o WHERE d = '2023-04-04'", &[]),
            ("orders over 8,000 dollars", "SELECT * FROM o WHERE amount > 8000", &[]),
            ("orders over 8,000 dollars", "SELECT * FROM o WHERE amount > 8", &["8000"]),
            ("a rating above 4.50", "SELECT * FROM r WHERE rating > 4.5", &[]),
            ("a rating above 4.5", "SELECT * FROM r WHERE rating > 4", &["4.5"]),
            // A percentage as a fraction, or as itself; a fraction is no percentage.
            ("where more than 50% speak it", "SELECT * FROM l WHERE share > 0.5", &[]),
            ("more than 12.5 percent", "SELECT * FROM l WHERE share > 0.125 OR share > 12.5", &[]),
            ("more than 50 people", "SELECT * FROM l WHERE n > 0.5", &["50"]),
            // Names with digits, the same number twice, several numbers in order.
            (
                "Q1 sales of the 3rd region of covid19 in the top 2 of 2 and 7 days",
                "SELECT 1",
                &["2", "7"],
            ),
            ("2.5x faster v1.5 é1 5é", "SELECT 1", &["5"]),
        ];
        for (question, sql, want) in cases {
            assert_eq!(unused_numbers(question, sql), want, "{question:?} / {sql:?}");
        }
    }
}
