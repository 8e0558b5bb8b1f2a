//! The SQL lexer of nl2sql: the one place that knows where a token of SQL text starts and ends,
//! by PostgreSQL's lexical rules (`src/backend/parser/scan.l` of PostgreSQL 15, and the manual's
//! "Lexical Structure" chapter). Every scanner of generated SQL (statement end, clause tracking
//! of the constrained decoding, FROM items and error spans of the repairs, GROUP BY ends of the
//! doubts, the draft window) reads its tokens from here.
//!
//! Model output is often cut mid-statement, so the lexer never fails: text that ends inside a
//! string, quoted identifier or block comment gives a last token with `terminated == false`
//! (see [`ended_inside`]), and every other byte belongs to some token. It works on bytes, but
//! every token starts and ends on a character boundary (all bytes of a multi-byte UTF-8
//! character are identifier characters for PostgreSQL, and quotes and delimiters are ASCII).
//!
//! What it knows, as PostgreSQL does:
//! - strings `'it''s'` (doubled quotes), `E'\''` (backslash escapes), `U&'...'`, `B'...'`,
//!   `X'...'`, `N'...'`, and dollar quotes `$$...$$` / `$tag$...$tag$` (a tag cannot start
//!   with a digit: `$1` is a parameter; a `$` inside an identifier never opens one);
//! - quoted identifiers `"a""b"` and `U&"d\0061t"` ([`Token::name`] decodes both);
//! - `--` line comments (to the end of the line or of the input) and `/* */` block comments,
//!   which nest;
//! - identifiers (`[A-Za-z_]` or any non-ASCII character first, then digits and `$` too),
//!   numbers (`1`, `1.5`, `.5`, `1.5e-3`; identifier characters right after a number, a syntax
//!   error since PostgreSQL 15, stay in the number's token), parameters `$1`;
//! - operators: a run of `+ - * / < > = ~ ! @ # % ^ & | ` ?` cut before `--` or `/*`, and
//!   without trailing `+`/`-` unless it has one of `~ ! @ # % ^ & | ` ?` (`=-1` is `=`, `-`,
//!   `1`); and `::`, `:=`, `..`;
//! - punctuation `( ) [ ] , ; : .`; whitespace is space, tab, newline, carriage return and form
//!   feed (PostgreSQL 15) and makes no token; any other character is a one-character
//!   [`Kind::Other`] token.
//!
//! Not modelled (no nl2sql caller needs them): the concatenation of two string constants
//! separated by a newline (two [`Kind::String`] tokens here) and the `UESCAPE` clause (the
//! escape character of `U&` names is always `\`).

use std::borrow::Cow;

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An unquoted identifier or key word, as written (PostgreSQL folds it to lower case).
    Ident,
    /// A double-quoted identifier, `"..."` or `U&"..."`.
    QuotedIdent,
    /// A string constant: `'...'`, `E'...'`, `U&'...'`, `B'...'`, `X'...'`, `N'...'`, `$$...$$`.
    String,
    /// A numeric constant (with any identifier characters glued to it).
    Number,
    /// A positional parameter, `$1`.
    Param,
    /// An operator (`=`, `>=`, `||`, `->>`, `::`, `:=`, `..`).
    Operator,
    /// One of `( ) [ ] , ; : .`.
    Punct,
    /// `-- ...` up to (not including) the line break.
    LineComment,
    /// `/* ... */`, nested ones included.
    BlockComment,
    /// Any other single character (`\`, `{`, a `$` that opens nothing, a control character).
    Other,
}

/// One token of SQL text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    pub kind: Kind,
    /// The token as written (quotes and prefixes included).
    pub text: &'a str,
    /// Byte offset of the token in the lexed text.
    pub start: usize,
    /// False when the text ended inside the token: a string, a quoted identifier or a block
    /// comment without its end. Every other token is terminated.
    pub terminated: bool,
}

impl<'a> Token<'a> {
    /// Byte offset just past the token.
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    /// True for comments (which the parser never sees).
    pub fn is_comment(&self) -> bool {
        matches!(self.kind, Kind::LineComment | Kind::BlockComment)
    }

    /// True for punctuation or an operator spelled exactly `s`.
    pub fn is(&self, s: &str) -> bool {
        matches!(self.kind, Kind::Punct | Kind::Operator | Kind::Other) && self.text == s
    }

    /// True for an unquoted identifier or key word equal to `word` (ASCII case-insensitive).
    pub fn is_word(&self, word: &str) -> bool {
        self.kind == Kind::Ident && self.text.eq_ignore_ascii_case(word)
    }

    /// The name of an identifier: an unquoted one as written (not folded), a quoted one
    /// without its quotes, doubled quotes undone and `U&` escapes decoded; `None` for other
    /// tokens. The name of an unterminated quoted identifier is what was written of it.
    pub fn name(&self) -> Option<Cow<'a, str>> {
        match self.kind {
            Kind::Ident => Some(Cow::Borrowed(self.text)),
            Kind::QuotedIdent => {
                let unicode = !self.text.starts_with('"');
                let body = &self.text[if unicode { 3 } else { 1 }..];
                let body = if self.terminated { &body[..body.len() - 1] } else { body };
                let body = if body.contains("\"\"") {
                    Cow::Owned(body.replace("\"\"", "\""))
                } else {
                    body.into()
                };
                Some(if unicode { Cow::Owned(unicode_unescape(&body)) } else { body })
            }
            _ => None,
        }
    }
}

/// The tokens of `sql`, comments included, whitespace left out.
pub fn lex(sql: &str) -> Tokens<'_> {
    Tokens { sql, pos: 0 }
}

/// The kind of token the text ended inside (a string, quoted identifier or block comment not
/// closed), or `None` when it ended between tokens or after a complete one.
pub fn ended_inside(sql: &str) -> Option<Kind> {
    lex(sql).last().filter(|t| !t.terminated).map(|t| t.kind)
}

/// The token of `tokens` (in order, as [`lex`] gives them) that byte `at` is inside.
pub fn token_at<'t, 'a>(tokens: &'t [Token<'a>], at: usize) -> Option<&'t Token<'a>> {
    let i = tokens.partition_point(|t| t.end() <= at);
    tokens.get(i).filter(|t| t.start <= at)
}

/// The iterator of [`lex`].
#[derive(Debug, Clone)]
pub struct Tokens<'a> {
    sql: &'a str,
    pos: usize,
}

/// Whitespace between tokens (`space` of PostgreSQL 15's scan.l).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')
}

/// A character that may start an identifier (`ident_start`: every byte of a non-ASCII
/// character counts).
fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c >= 0x80
}

/// A character that may continue an identifier (`ident_cont`).
fn is_ident_cont(c: u8) -> bool {
    is_ident_start(c) || c.is_ascii_digit() || c == b'$'
}

/// An operator character (`op_chars`).
fn is_op_char(c: u8) -> bool {
    b"~!@#^&|`?+-*/%<>=".contains(&c)
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let b = self.sql.as_bytes();
        while self.pos < b.len() && is_space(b[self.pos]) {
            self.pos += 1;
        }
        let start = self.pos;
        let c = *b.get(start)?;
        let at = |i: usize| b.get(i).copied();
        let (kind, end, terminated) = match c {
            b'-' if at(start + 1) == Some(b'-') => {
                let end =
                    b[start..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| start + p);
                (Kind::LineComment, end, true)
            }
            b'/' if at(start + 1) == Some(b'*') => {
                let (end, done) = block_comment_end(b, start + 2);
                (Kind::BlockComment, end, done)
            }
            b'\'' => quoted(b, start + 1, b'\'', false, Kind::String),
            b'"' => quoted(b, start + 1, b'"', false, Kind::QuotedIdent),
            b'e' | b'E' if at(start + 1) == Some(b'\'') => {
                quoted(b, start + 2, b'\'', true, Kind::String)
            }
            b'b' | b'B' | b'x' | b'X' | b'n' | b'N' if at(start + 1) == Some(b'\'') => {
                quoted(b, start + 2, b'\'', false, Kind::String)
            }
            b'u' | b'U' if at(start + 1) == Some(b'&') && at(start + 2) == Some(b'\'') => {
                quoted(b, start + 3, b'\'', false, Kind::String)
            }
            b'u' | b'U' if at(start + 1) == Some(b'&') && at(start + 2) == Some(b'"') => {
                quoted(b, start + 3, b'"', false, Kind::QuotedIdent)
            }
            b'$' if at(start + 1).is_some_and(|d| d.is_ascii_digit()) => {
                (Kind::Param, number_junk_end(b, digits_end(b, start + 1)), true)
            }
            b'$' => match dollar_tag_end(b, start) {
                Some(tag_end) => {
                    let tag = &b[start..tag_end];
                    match find(b, tag_end, tag) {
                        Some(p) => (Kind::String, p + tag.len(), true),
                        None => (Kind::String, b.len(), false),
                    }
                }
                None => (Kind::Other, start + 1, true),
            },
            b'0'..=b'9' => (Kind::Number, number_end(b, start), true),
            b'.' if at(start + 1).is_some_and(|d| d.is_ascii_digit()) => {
                (Kind::Number, number_end(b, start), true)
            }
            b'.' if at(start + 1) == Some(b'.') => (Kind::Operator, start + 2, true),
            b':' if matches!(at(start + 1), Some(b':' | b'=')) => (Kind::Operator, start + 2, true),
            c if is_ident_start(c) => {
                let len = b[start..].iter().take_while(|&&c| is_ident_cont(c)).count();
                (Kind::Ident, start + len, true)
            }
            c if is_op_char(c) => (Kind::Operator, operator_end(b, start), true),
            b'(' | b')' | b'[' | b']' | b',' | b';' | b':' | b'.' => (Kind::Punct, start + 1, true),
            _ => (Kind::Other, start + 1, true),
        };
        self.pos = end;
        Some(Token { kind, text: &self.sql[start..end], start, terminated })
    }
}

/// The end of a quoted token whose body starts at `i` (closing quote `q`, doubled to escape;
/// with `backslash`, `\` escapes the next character, as in `E'...'`), its kind, and whether
/// the closing quote was seen.
fn quoted(b: &[u8], mut i: usize, q: u8, backslash: bool, kind: Kind) -> (Kind, usize, bool) {
    while i < b.len() {
        if backslash && b[i] == b'\\' {
            // The escaped byte is ASCII or the lead byte of a character whose other bytes are
            // never a quote or a backslash, so skipping one byte keeps the scan in step.
            i += 2;
            continue;
        }
        if b[i] == q {
            if b.get(i + 1) == Some(&q) {
                i += 2;
                continue;
            }
            return (kind, i + 1, true);
        }
        i += 1;
    }
    (kind, b.len(), false)
}

/// The end of a block comment whose body starts at `i`, and whether it was closed: `/*` inside
/// opens a nested comment, and each needs its own `*/`.
fn block_comment_end(b: &[u8], mut i: usize) -> (usize, bool) {
    let mut depth = 1usize;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            (b'/', Some(b'*')) => {
                depth += 1;
                i += 2;
            }
            (b'*', Some(b'/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return (i, true);
                }
            }
            _ => i += 1,
        }
    }
    (b.len(), false)
}

/// If a dollar-quote delimiter (`$$` or `$tag$`, the tag an identifier without `$`) starts at
/// `i`, the offset just past it.
fn dollar_tag_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    if b.get(j).is_some_and(|&c| is_ident_start(c)) {
        j += b[j..].iter().take_while(|&&c| is_ident_start(c) || c.is_ascii_digit()).count();
    }
    (b.get(j) == Some(&b'$')).then_some(j + 1)
}

/// First offset `>= from` where `needle` occurs in `b`.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| from + p)
}

/// The offset past the ASCII digits starting at `i`.
fn digits_end(b: &[u8], i: usize) -> usize {
    i + b[i..].iter().take_while(|c| c.is_ascii_digit()).count()
}

/// The end of the number starting at `i`: digits, an optional fraction (not before `..`), an
/// optional exponent, then any identifier characters glued to it (PostgreSQL 15 rejects them
/// as trailing junk; they stay in this token).
fn number_end(b: &[u8], i: usize) -> usize {
    let mut j = digits_end(b, i);
    if b.get(j) == Some(&b'.') && b.get(j + 1) != Some(&b'.') {
        j = digits_end(b, j + 1);
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(b.get(j + 1), Some(b'+' | b'-')));
        if b.get(j + 1 + sign).is_some_and(|c| c.is_ascii_digit()) {
            j = digits_end(b, j + 1 + sign);
        }
    }
    number_junk_end(b, j)
}

/// `j` moved past an identifier glued to a number or parameter (one that starts with an
/// identifier's first character, as PostgreSQL 15's `integer_junk` rules do: `$1$` is `$1`, `$`).
fn number_junk_end(b: &[u8], j: usize) -> usize {
    if !b.get(j).is_some_and(|&c| is_ident_start(c)) {
        return j;
    }
    j + b[j..].iter().take_while(|&&c| is_ident_cont(c)).count()
}

/// The end of the operator starting at `i` (see the module documentation).
fn operator_end(b: &[u8], i: usize) -> usize {
    let run = b[i..].iter().take_while(|&&c| is_op_char(c)).count();
    let op = &b[i..i + run];
    // A comment start inside the run ends the operator (at the start it is a comment, lexed
    // before operators).
    let cut = op.windows(2).position(|w| w == b"/*" || w == b"--").map_or(run, |p| p.max(1));
    let mut n = cut;
    if n > 1
        && matches!(op[n - 1], b'+' | b'-')
        && !op[..n - 1].iter().any(|c| b"~!@#^&|`?%".contains(c))
    {
        while n > 1 && matches!(op[n - 1], b'+' | b'-') {
            n -= 1;
        }
    }
    i + n
}

/// The characters of a `U&"..."` body with its escapes decoded: `\XXXX`, `\+XXXXXX` and `\\`
/// (an escape that is not one of these, or names no character, is kept as written: PostgreSQL
/// rejects the name).
fn unicode_unescape(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    while let Some(p) = rest.find('\\') {
        out.push_str(&rest[..p]);
        rest = &rest[p..];
        let hex = |s: &str, n: usize| {
            s.get(..n)
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| char::from_u32(u32::from_str_radix(h, 16).ok()?))
        };
        let (decoded, len) = if rest[1..].starts_with('\\') {
            (Some('\\'), 2)
        } else if rest[1..].starts_with('+') {
            (hex(&rest[2..], 6), 8)
        } else {
            (hex(&rest[1..], 4), 5)
        };
        match decoded {
            Some(ch) => {
                out.push(ch);
                rest = &rest[len..];
            }
            None => {
                out.push('\\');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(kind, text)` of every token of `sql`.
    fn kinds(sql: &str) -> Vec<(Kind, &str)> {
        lex(sql).map(|t| (t.kind, t.text)).collect()
    }

    use Kind::*;

    #[test]
    fn words_numbers_and_operators() {
        assert_eq!(
            kinds("SELECT a.b, x::int FROM t WHERE n >= 1.5e-3 AND m <> .5 OR k != 2 AND p = $1"),
            vec![
                (Ident, "SELECT"),
                (Ident, "a"),
                (Punct, "."),
                (Ident, "b"),
                (Punct, ","),
                (Ident, "x"),
                (Operator, "::"),
                (Ident, "int"),
                (Ident, "FROM"),
                (Ident, "t"),
                (Ident, "WHERE"),
                (Ident, "n"),
                (Operator, ">="),
                (Number, "1.5e-3"),
                (Ident, "AND"),
                (Ident, "m"),
                (Operator, "<>"),
                (Number, ".5"),
                (Ident, "OR"),
                (Ident, "k"),
                (Operator, "!="),
                (Number, "2"),
                (Ident, "AND"),
                (Ident, "p"),
                (Operator, "="),
                (Param, "$1"),
            ]
        );
        // Trailing `+`/`-` leave an operator made only of SQL operator characters.
        assert_eq!(
            kinds("a=-1"),
            vec![(Ident, "a"), (Operator, "="), (Operator, "-"), (Number, "1")]
        );
        assert_eq!(kinds("j->>'k'"), vec![(Ident, "j"), (Operator, "->>"), (String, "'k'")]);
        assert_eq!(kinds("a @- b"), vec![(Ident, "a"), (Operator, "@-"), (Ident, "b")]);
        // A comment start ends an operator.
        assert_eq!(
            kinds("a+/*c*/b =--x"),
            vec![
                (Ident, "a"),
                (Operator, "+"),
                (BlockComment, "/*c*/"),
                (Ident, "b"),
                (Operator, "="),
                (LineComment, "--x")
            ]
        );
        assert_eq!(
            kinds("1e 1e+ 1..2 12abc"),
            vec![
                (Number, "1e"),
                (Number, "1e"),
                (Operator, "+"),
                (Number, "1"),
                (Operator, ".."),
                (Number, "2"),
                (Number, "12abc"),
            ]
        );
        assert_eq!(kinds("a := 1"), vec![(Ident, "a"), (Operator, ":="), (Number, "1")]);
        assert_eq!(
            kinds("arr[1:2]"),
            vec![
                (Ident, "arr"),
                (Punct, "["),
                (Number, "1"),
                (Punct, ":"),
                (Number, "2"),
                (Punct, "]"),
            ]
        );
        assert_eq!(kinds("\\ { $"), vec![(Other, "\\"), (Other, "{"), (Other, "$")]);
    }

    #[test]
    fn strings_and_their_escapes() {
        assert_eq!(kinds("'it''s' x"), vec![(String, "'it''s'"), (Ident, "x")]);
        // A backslash is an ordinary character in a standard string, an escape in E''.
        assert_eq!(kinds(r"'a\' x"), vec![(String, r"'a\'"), (Ident, "x")]);
        assert_eq!(kinds(r"E'\'' x"), vec![(String, r"E'\''"), (Ident, "x")]);
        assert_eq!(kinds(r"e'\\' x"), vec![(String, r"e'\\'"), (Ident, "x")]);
        assert_eq!(kinds(r"E'a''b\'c' x"), vec![(String, r"E'a''b\'c'"), (Ident, "x")]);
        assert_eq!(
            kinds("U&'d\\0061t' B'101' X'ff' N'n'"),
            vec![(String, "U&'d\\0061t'"), (String, "B'101'"), (String, "X'ff'"), (String, "N'n'"),]
        );
        // Only a one-letter prefix makes a string: `name'x'` is an identifier and a string.
        assert_eq!(kinds("name'x'"), vec![(Ident, "name"), (String, "'x'")]);
        assert_eq!(kinds("U&x"), vec![(Ident, "U"), (Operator, "&"), (Ident, "x")]);
    }

    #[test]
    fn dollar_quotes_and_parameters() {
        assert_eq!(kinds("$$a$b$$ x"), vec![(String, "$$a$b$$"), (Ident, "x")]);
        assert_eq!(kinds("$a$ $ $$ $b$ $a$ x"), vec![(String, "$a$ $ $$ $b$ $a$"), (Ident, "x")]);
        assert_eq!(kinds("$fn_1$x$fn_1$"), vec![(String, "$fn_1$x$fn_1$")]);
        // A tag cannot start with a digit; `$` inside an identifier is part of it.
        assert_eq!(kinds("$1$ a$$b$$"), vec![(Param, "$1"), (Other, "$"), (Ident, "a$$b$$")]);
        assert_eq!(kinds("$x"), vec![(Other, "$"), (Ident, "x")]);
    }

    #[test]
    fn comments_nest() {
        assert_eq!(
            kinds("/* a /* b */ c */ x"),
            vec![(BlockComment, "/* a /* b */ c */"), (Ident, "x")]
        );
        assert_eq!(
            kinds("/**/x/*/ */y"),
            vec![(BlockComment, "/**/"), (Ident, "x"), (BlockComment, "/*/ */"), (Ident, "y"),]
        );
        assert_eq!(kinds("x -- c"), vec![(Ident, "x"), (LineComment, "-- c")]);
        assert_eq!(kinds("x --\ny"), vec![(Ident, "x"), (LineComment, "--"), (Ident, "y")]);
        assert_eq!(ended_inside("x -- c"), None, "a line comment may end the input");
    }

    #[test]
    fn quoted_identifiers_and_their_names() {
        let t: Vec<Token> = lex(r#""A""b" U&"d\0061t" U&"\+01F600\\x" "é" "#).collect();
        assert!(t.iter().all(|t| t.kind == QuotedIdent && t.terminated));
        let names: Vec<_> = t.iter().map(|t| t.name().unwrap().into_owned()).collect();
        assert_eq!(names, ["A\"b", "dat", "\u{1F600}\\x", "é"]);
        assert_eq!(lex("Foo").next().unwrap().name().unwrap(), "Foo", "not folded");
        assert_eq!(lex("'x'").next().unwrap().name(), None);
        // An escape naming no character stays as written.
        assert_eq!(lex(r#"U&"\zz""#).next().unwrap().name().unwrap(), r"\zz");
    }

    #[test]
    fn the_input_may_end_inside_any_token() {
        for (sql, kind) in [
            ("SELECT 'abc", String),
            ("SELECT 'it''", String),
            (r"SELECT E'a\'", String),
            (r"SELECT E'a\", String),
            ("SELECT U&'x", String),
            ("SELECT $$abc$", String),
            ("SELECT $t$abc$t", String),
            ("SELECT \"Ab", QuotedIdent),
            ("SELECT U&\"Ab", QuotedIdent),
            ("SELECT /* a */ /* b", BlockComment),
            ("SELECT /* a /* b */", BlockComment),
        ] {
            assert_eq!(ended_inside(sql), Some(kind), "{sql}");
            let last = lex(sql).last().unwrap();
            assert_eq!(last.end(), sql.len(), "{sql}");
        }
        for sql in ["SELECT 'a'", "SELECT \"a\"", "SELECT a", "SELECT 1.", "SELECT $$x$$", "", " "]
        {
            assert_eq!(ended_inside(sql), None, "{sql}");
        }
        assert_eq!(lex("\"ab\"\"").next().unwrap().name().unwrap(), "ab\"");
    }

    #[test]
    fn non_ascii_letters_and_multi_byte_text() {
        assert_eq!(
            kinds("SELECT prénom, 名前, 'ü€' FROM café WHERE x = 'é' -- ☃"),
            vec![
                (Ident, "SELECT"),
                (Ident, "prénom"),
                (Punct, ","),
                (Ident, "名前"),
                (Punct, ","),
                (String, "'ü€'"),
                (Ident, "FROM"),
                (Ident, "café"),
                (Ident, "WHERE"),
                (Ident, "x"),
                (Operator, "="),
                (String, "'é'"),
                (LineComment, "-- ☃"),
            ]
        );
        // Every prefix and suffix of multi-byte text lexes without slicing inside a character,
        // and the tokens cover every non-blank byte, in order.
        let text = "SELECT \"é\"\"ü\", E'ß\\é' /* 😀 /* ✓ */ */ $ä$ x $ä$ 1é ö€ -- ñ\n";
        for (i, _) in text.char_indices() {
            for s in [&text[..i], &text[i..]] {
                let mut pos = 0;
                for t in lex(s) {
                    assert!(t.start >= pos && s[pos..t.start].bytes().all(is_space), "{s:?}");
                    pos = t.end();
                }
                assert!(s[pos..].bytes().all(is_space), "{s:?}");
            }
        }
    }

    #[test]
    fn tokens_are_found_by_offset() {
        let sql = "SELECT 'a b' FROM t";
        let t: Vec<Token> = lex(sql).collect();
        assert_eq!(token_at(&t, 9).map(|t| t.kind), Some(String));
        assert_eq!(token_at(&t, 12).map(|t| t.text), None, "whitespace");
        assert_eq!(token_at(&t, 13).map(|t| t.text), Some("FROM"));
        assert_eq!(token_at(&t, 99), None);
    }
}
