//! The settings table of `docs/sql-reference.md` is rendered from the extension's table of
//! settings (`src/pg/gucs/table.rs`, plain Rust, compiled here without PostgreSQL): this test
//! fails when the committed docs and the table disagree, and checks what the table itself must
//! hold (bounds around each default, descriptions that say who may set a setting).
//!
//! After changing the table: `TURBOINFER_UPDATE_DOCS=1 cargo test --test settings_docs` rewrites
//! the section between its markers; review the diff and commit it with the table.

// The table names the engine's defaults as `crate::embed::...` and `crate::nl2sql::...`, as it
// does inside the library.
use turboinfer::{embed, nl2sql};

#[path = "../src/pg/gucs/table.rs"]
mod table;

use std::ffi::CStr;
use table::{Context, Kind, Setting, Unit, SETTINGS};

/// The reference docs, relative to the crate root.
const DOCS: &str = "docs/sql-reference.md";
/// The lines that enclose the generated section (kept in the file).
const BEGIN: &str = "<!-- settings: generated from src/pg/gucs/table.rs by tests/settings_docs.rs (TURBOINFER_UPDATE_DOCS=1 cargo test --test settings_docs) -->";
const END: &str = "<!-- end of settings -->";

/// A table string as text (the names and descriptions are ASCII literals).
fn text(s: &CStr) -> &str {
    s.to_str().expect("a table string is UTF-8")
}

/// The name without the `turboinfer.` prefix, as the docs refer to a related setting.
fn short_name(s: &Setting) -> &str {
    text(s.name).trim_start_matches("turboinfer.")
}

/// A number as the docs write it: a minus sign for negatives (U+2212, as in running text).
fn signed(n: impl ToString) -> String {
    n.to_string().replace('-', "\u{2212}")
}

/// A real at most six decimals long, without trailing zeros (`-2.1`, not the f32 widening's
/// `-2.0999999046325684`; PostgreSQL's `SHOW` prints it the same way).
fn real(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    signed(if s == "-0" { "0" } else { s })
}

/// The "type, default" cell.
fn type_and_default(s: &Setting) -> String {
    let unit = match s.unit {
        None => "",
        Some(Unit::Mb) => " MB",
        Some(Unit::Ms) => " ms",
    };
    let cell = match s.kind {
        Kind::Bool { default } => format!("bool, {}", if default { "on" } else { "off" }),
        Kind::Int { default, min, max } => {
            format!("int{unit} {}–{}, {}", signed(min), signed(max), signed(default))
        }
        Kind::Real { default, min, max } => {
            format!("real {}–{}, {}", real(min), real(max), real(default))
        }
        Kind::Text { default: Some(d) } => format!("string, `{}`", text(d)),
        Kind::Text { default: None } => "string, empty".to_string(),
        Kind::Enum { default, values } => {
            let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
            format!("enum {}, `{default}`", values.join("/"))
        }
    };
    match s.default_note {
        Some(note) => format!("{cell} ({note})"),
        None => cell,
    }
}

/// The "who may set" cell.
fn who(s: &Setting) -> String {
    match (s.context, s.ceiling) {
        (Context::Userset, None) => "anyone".to_string(),
        (Context::Userset, Some(c)) => format!("anyone, up to `{}`", short_name(c)),
        (Context::Suset, _) => "superuser".to_string(),
        (Context::Postmaster, _) => "server start (`postgresql.conf`)".to_string(),
    }
}

/// The generated section: the table's header and one line per setting.
fn render() -> String {
    let mut out = String::from("| setting | type, default | who may set | what it does |\n");
    out.push_str("|---|---|---|---|\n");
    for s in SETTINGS {
        let name = text(s.name);
        out.push_str(&format!("| `{name}` | {} | {} | {} |\n", type_and_default(s), who(s), s.doc));
    }
    out
}

/// The docs split around the generated section: (before and BEGIN line, section, END and after).
fn split(docs: &str) -> (&str, &str, &str) {
    let b = docs.find(BEGIN).expect("the BEGIN marker of the settings section") + BEGIN.len() + 1;
    let e = docs[b..].find(END).expect("the END marker of the settings section") + b;
    (&docs[..b], &docs[b..e], &docs[e..])
}

#[test]
fn docs_match_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(DOCS);
    let docs = std::fs::read_to_string(&path).expect("docs/sql-reference.md");
    let (head, section, tail) = split(&docs);
    let want = render();
    if std::env::var_os("TURBOINFER_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{head}{want}{tail}")).expect("rewrite the docs");
        return;
    }
    assert!(
        section == want,
        "{DOCS} disagrees with src/pg/gucs/table.rs; rewrite it with \
         TURBOINFER_UPDATE_DOCS=1 cargo test --test settings_docs\n--- committed\n{section}\n--- from the table\n{want}"
    );
}

#[test]
fn every_setting_is_consistent() {
    let mut names = std::collections::HashSet::new();
    for s in SETTINGS {
        let name = text(s.name);
        assert!(name.starts_with("turboinfer."), "{name}: outside the reserved prefix");
        assert!(names.insert(name), "{name}: twice in the table");
        match s.kind {
            Kind::Int { default, min, max } => {
                assert!(min <= default && default <= max, "{name}: default outside its bounds")
            }
            Kind::Real { default, min, max } => {
                assert!(min <= default && default <= max, "{name}: default outside its bounds")
            }
            Kind::Enum { default, values } => {
                assert!(values.contains(&default), "{name}: default is not one of its values")
            }
            Kind::Bool { .. } | Kind::Text { .. } => {}
        }
        if s.unit.is_some() {
            assert!(matches!(s.kind, Kind::Int { .. }), "{name}: a unit on a non-integer");
        }
        let (short, long) = (text(s.short), text(s.long));
        assert!(short.ends_with('.'), "{name}: short description without a full stop");
        // What pg_settings says about who may set it agrees with the context.
        match s.context {
            Context::Suset => assert!(long.starts_with("Superuser only."), "{name}: {long}"),
            Context::Postmaster => {
                assert!(long.starts_with("Takes effect at server start."), "{name}: {long}")
            }
            Context::Userset => assert!(!long.contains("Superuser only"), "{name}: {long}"),
        }
        if let Some(c) = s.ceiling {
            assert!(c.context == Context::Suset, "{name}: a ceiling anyone may raise");
            assert!(long.contains(text(c.name)), "{name}: the description omits its ceiling");
            let ints = matches!((c.kind, s.kind), (Kind::Int { .. }, Kind::Int { .. }));
            assert!(ints, "{name}: a ceiling between non-integers");
        }
    }
}
