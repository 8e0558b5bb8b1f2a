//! What the model cannot guess from a column's name and type: the few values a low-cardinality
//! text column holds (`status` is 'active' or 'inactive', not 'Active'), and the format of
//! date-like values stored as text or as unix-epoch integers.
//!
//! The input is the planner's statistics ([`ColumnStats`], read by the glue from `pg_stats`,
//! which only shows columns the role may SELECT); the output is one short note per column,
//! rendered after `-- ` in the prompt. Deterministic: the same statistics give the same note, and
//! the note is part of the prompt, so of the schema fingerprint.

/// Most distinct values for a column to count as an enumeration whose values are listed.
const MAX_ENUM_DISTINCT: u32 = 20;
/// Most values listed for one column.
const MAX_LISTED_VALUES: usize = 8;
/// Longest value listed, in characters: codes and labels, not prose.
const MAX_VALUE_CHARS: usize = 32;
/// Unix-epoch seconds between 2001-09-09 (1e9) and 2038-01-19 (i32 max): the range where an
/// integer time column stored as epoch seconds falls, and few other kinds of numbers do.
const EPOCH_SECONDS: std::ops::RangeInclusive<i64> = 1_000_000_000..=2_147_483_647;

/// The statistics of one column that notes are made from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ColumnStats {
    /// Number of distinct values when the planner estimates an absolute count (`n_distinct` > 0);
    /// `None` when it scales with the table (many distinct values).
    pub distinct: Option<u32>,
    /// Most common values, most frequent first (their text form).
    pub common: Vec<String>,
    /// A few histogram bounds (their text form), for the format of high-cardinality columns.
    pub bounds: Vec<String>,
}

/// How a column's type is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Integer,
    Other,
}

/// The kind of a type as PostgreSQL formats it.
fn kind(data_type: &str) -> Kind {
    let t = data_type.to_ascii_lowercase();
    if t == "text"
        || t.starts_with("character")
        || t.starts_with("varchar")
        || t == "citext"
        || t == "name"
    {
        Kind::Text
    } else if t == "integer" || t == "bigint" || t == "smallint" {
        Kind::Integer
    } else {
        Kind::Other
    }
}

/// The prompt note for column `name` of type `data_type` with statistics `s`, if any.
pub fn note(name: &str, data_type: &str, s: &ColumnStats) -> Option<String> {
    match kind(data_type) {
        Kind::Text => text_note(s),
        Kind::Integer => epoch_note(name, s),
        Kind::Other => None,
    }
}

/// `values: 'a', 'b'` for an enumeration-like text column; `format like '2023-01-31'` for text
/// holding dates or times.
fn text_note(s: &ColumnStats) -> Option<String> {
    let listable: Vec<&String> = s.common.iter().filter(|v| printable(v)).collect();
    if let Some(d) = s.distinct {
        if d <= MAX_ENUM_DISTINCT && !listable.is_empty() && listable.len() == s.common.len() {
            let shown: Vec<String> =
                listable.iter().take(MAX_LISTED_VALUES).map(|v| literal(v)).collect();
            let more = if (d as usize) > shown.len() { ", ..." } else { "" };
            return Some(format!("values: {}{more}", shown.join(", ")));
        }
    }
    let sample = s.bounds.iter().chain(&s.common).find(|v| printable(v) && looks_temporal(v))?;
    Some(format!("text in the format {}", literal(sample)))
}

/// `unix-epoch seconds, e.g. 1672531200` for an integer column whose name says time and whose
/// values all fall in the epoch-seconds range.
fn epoch_note(name: &str, s: &ColumnStats) -> Option<String> {
    let n = name.to_ascii_lowercase();
    let timeish =
        ["time", "date", "epoch", "_at", "_ts", "ts_", "timestamp"].iter().any(|w| n.contains(w))
            || n == "ts";
    if !timeish {
        return None;
    }
    let nums: Vec<i64> =
        s.bounds.iter().chain(&s.common).filter_map(|v| v.trim().parse().ok()).collect();
    if nums.is_empty() || !nums.iter().all(|v| EPOCH_SECONDS.contains(v)) {
        return None;
    }
    Some(format!("unix-epoch seconds, e.g. {} (use TO_TIMESTAMP)", nums[nums.len() / 2]))
}

/// True for a short value without control characters (safe and useful to list).
fn printable(v: &str) -> bool {
    !v.is_empty()
        && v.chars().count() <= MAX_VALUE_CHARS
        && !v.chars().any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
}

/// True when `v` looks like a date or time written as text: digits with date/time separators
/// (`2023-01-31`, `31/01/2023`, `2023-01-31 10:00`, `10:30`), or a month name.
fn looks_temporal(v: &str) -> bool {
    const MONTHS: [&str; 12] =
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
    let t = v.trim();
    let digits = t.chars().filter(char::is_ascii_digit).count();
    let seps = t.chars().filter(|c| matches!(c, '-' | '/' | ':' | '.')).count();
    let only = t.chars().all(|c| c.is_ascii_digit() || " -/:.TZ+".contains(c));
    if only && digits >= 4 && seps >= 1 && t.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return true;
    }
    let lower = t.to_ascii_lowercase();
    lower.len() <= 12
        && MONTHS.iter().any(|m| lower.starts_with(m))
        && lower.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-')
}

/// `v` as a SQL string literal.
fn literal(v: &str) -> String {
    format!("'{}'", v.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(distinct: Option<u32>, common: &[&str], bounds: &[&str]) -> ColumnStats {
        ColumnStats {
            distinct,
            common: common.iter().map(|s| s.to_string()).collect(),
            bounds: bounds.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn enumerations_are_listed() {
        let s = stats(Some(3), &["active", "inactive", "it's"], &[]);
        assert_eq!(
            note("status", "character varying(20)", &s).as_deref(),
            Some("values: 'active', 'inactive', 'it''s'")
        );
        let s = stats(Some(12), &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], &[]);
        assert_eq!(
            note("code", "text", &s).as_deref(),
            Some("values: 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', ...")
        );
        // Many distinct values: nothing (no names or e-mails in the prompt).
        assert_eq!(
            note("email", "text", &stats(None, &["a@x.org"], &["a@x.org", "z@x.org"])),
            None
        );
        // A control character or a long value: not listed.
        assert_eq!(note("s", "text", &stats(Some(2), &["ok", "a\nb"], &[])), None);
        // Non-text enumerations: nothing.
        assert_eq!(note("n", "numeric", &stats(Some(2), &["1", "2"], &[])), None);
    }

    #[test]
    fn date_formats_in_text() {
        assert_eq!(
            note("d", "text", &stats(None, &[], &["2023-01-05", "2023-06-30"])).as_deref(),
            Some("text in the format '2023-01-05'")
        );
        assert_eq!(
            note("d", "character varying(10)", &stats(None, &[], &["05/01/2023"])).as_deref(),
            Some("text in the format '05/01/2023'")
        );
        assert_eq!(
            note("m", "text", &stats(None, &[], &["March"])).as_deref(),
            Some("text in the format 'March'")
        );
        assert_eq!(note("name", "text", &stats(None, &[], &["Alice", "Bob"])), None);
        assert_eq!(
            note("phone", "text", &stats(None, &[], &["555-1234"])).as_deref(),
            Some("text in the format '555-1234'")
        );
    }

    #[test]
    fn epoch_integers() {
        let s = stats(None, &[], &["1672531200", "1680000000", "1690000000"]);
        assert_eq!(
            note("created_ts", "bigint", &s).as_deref(),
            Some("unix-epoch seconds, e.g. 1680000000 (use TO_TIMESTAMP)")
        );
        assert_eq!(
            note("customer_id", "bigint", &s),
            None,
            "an id in the same range is not a time"
        );
        assert_eq!(note("event_time", "integer", &stats(None, &[], &["12", "1672531200"])), None);
    }
}
