//! Schema linking by meaning (`turboinfer::nl2sql::link`) with the real encoder
//! (all-MiniLM-L6-v2): tables the question names by another word are found where the question's
//! words find nothing; referenced tables follow; embeddings are reused until a table's
//! description changes; and an nl2sql call over a schema that does not fit shows the linked
//! tables (with a real model).

mod common;

use turboinfer::nl2sql::link::{self, LinkSlot, Linker};
use turboinfer::nl2sql::{
    trim, Hooks, Options, PrefixCache, Progress, SchemaInfo, Table, TableKind,
};
use turboinfer::platform::runtime::Runtime;

const ENCODER: &str = "all-minilm-l6-v2";

/// Eight tables of unrelated subjects; `shipments` references `carriers`. No table shares a word
/// with the questions below (so the question's words cannot pick them).
fn office() -> SchemaInfo {
    let t = |name: &str, cols: &[&str]| {
        cols.iter()
            .fold(Table::new("public", name, TableKind::Table), |t, c| t.column(c, "text", true))
    };
    let mut staff = t("staff", &["id", "full_name", "hired_on", "salary", "department"]);
    staff.comment = Some("people on the payroll".into());
    let tables = vec![
        t("carriers", &["id", "name", "phone"]),
        t("invoices", &["id", "customer_ref", "amount_due", "due_date", "paid"]),
        t("sensor_readings", &["id", "device_id", "celsius", "taken_at"]),
        t("shipments", &["id", "carrier_id", "shipped_at", "delivered_at", "weight_kg"])
            .with_foreign_key(&["carrier_id"], "public", "carriers", &["id"]),
        staff,
        t("support_tickets", &["id", "opened_at", "closed_at", "priority", "subject"]),
        t("recipes", &["id", "title", "cooking_minutes", "servings"]),
        t("league_matches", &["id", "home_team", "away_team", "home_goals", "away_goals"]),
    ];
    let mut s = SchemaInfo::new(tables, Some("public"));
    s.normalize();
    s
}

/// The models directory holding the encoder, `None` without it.
fn models_dir() -> Option<std::path::PathBuf> {
    common::encoder_dir(ENCODER).map(|d| d.parent().unwrap().to_path_buf())
}

fn name_of(s: &SchemaInfo, i: usize) -> &str {
    &s.tables[i].name
}

#[test]
fn tables_are_found_by_meaning_where_words_find_none() {
    let Some(dir) = models_dir() else { return };
    let mut linker = Linker::load(ENCODER, &dir).expect("the encoder loads");
    let rt = Runtime::new(2).unwrap();
    let s = office();
    let mut go = |_: Progress| true;
    for (question, want) in [
        ("How many employees joined last year?", "staff"),
        ("How warm did it get on average yesterday?", "sensor_readings"),
        ("Which parcels arrived late, and with which courier?", "shipments"),
        ("Which football club scored the most?", "league_matches"),
        ("How many help desk requests are still open?", "support_tickets"),
        ("Total unpaid bills", "invoices"),
    ] {
        // The words find nothing: every table scores 0 and the order is the schema's.
        assert_eq!(trim::priority(&s, question), (0..8).collect::<Vec<_>>(), "{question}");
        let (sim, _) = linker.similarity(&rt, &s, question, &mut go).unwrap();
        let order = link::priority(&s, &sim);
        println!(
            "{question:55} -> {:?}",
            order.iter().map(|&i| name_of(&s, i)).collect::<Vec<_>>()
        );
        assert_eq!(name_of(&s, order[0]), want, "{question}: similarities {sim:?}");
    }
    // The table a shipment references comes right after it.
    let (sim, _) = linker
        .similarity(&rt, &s, "Which parcels arrived late, and with which courier?", &mut go)
        .unwrap();
    let order = link::priority(&s, &sim);
    assert_eq!((name_of(&s, order[0]), name_of(&s, order[1])), ("shipments", "carriers"));
}

#[test]
fn tables_are_embedded_once_until_their_description_changes() {
    let Some(dir) = models_dir() else { return };
    let mut linker = Linker::load(ENCODER, &dir).expect("the encoder loads");
    let rt = Runtime::new(2).unwrap();
    let mut s = office();
    let mut reports = 0;
    let mut go = |_: Progress| {
        reports += 1;
        true
    };
    let (first, n) = linker.similarity(&rt, &s, "How many employees?", &mut go).unwrap();
    assert_eq!((n, linker.memo_len()), (8, 8));
    let (again, n) = linker.similarity(&rt, &s, "How many employees?", &mut go).unwrap();
    assert_eq!((n, &again), (0, &first), "the same bits from the memo");
    s.tables[4].comment = Some("everyone we employ".into());
    let (_, n) = linker.similarity(&rt, &s, "How many employees?", &mut go).unwrap();
    assert_eq!(n, 1, "only the changed table is embedded again");
    assert_eq!(reports, 4 + 1, "a progress report before each thread's table");
    // Cancelling stops the call.
    s.tables[0].comment = Some("who carries the goods".into());
    let mut stop = |_: Progress| false;
    assert!(matches!(
        linker.similarity(&rt, &s, "x", &mut stop),
        Err(turboinfer::nl2sql::Nl2SqlError::Cancelled)
    ));
}

#[test]
fn a_stamped_schema_reuses_its_descriptions_and_words_an_unstamped_one_never() {
    let Some(dir) = models_dir() else { return };
    let mut linker = Linker::load(ENCODER, &dir).expect("the encoder loads");
    let rt = Runtime::new(2).unwrap();
    let mut go = |_: Progress| true;
    let q = "Which parcels arrived late, and with which courier?";
    let mut s = office();
    s.stamp = Some(7);
    let (first, _) = linker.similarity(&rt, &s, q, &mut go).unwrap();
    let (again, _) = linker.similarity(&rt, &s, q, &mut go).unwrap();
    assert_eq!(first, again);
    assert_eq!(linker.matches(&s, "staff salaries"), trim::matches(&s, "staff salaries"));
    // Another schema without a stamp: its own tables, never the kept ones.
    let mut other = office();
    other.tables.truncate(3);
    other.tables[0].comment = Some("parcel couriers".into());
    let (sim, _) = linker.similarity(&rt, &other, q, &mut go).unwrap();
    assert_eq!(sim.len(), 3);
    assert_ne!(sim[0], first[0], "the changed description was used");
    assert_eq!(linker.matches(&other, "invoices"), trim::matches(&other, "invoices"));
    // normalize() drops a stamp: reordered tables are no longer what it stood for.
    s.normalize();
    assert_eq!(s.stamp, None);
}

#[test]
fn a_schema_that_does_not_fit_shows_the_linked_tables() {
    let Some(dir) = models_dir() else { return };
    let Some(e) = common::engine("smollm2-135m") else { return };
    let rt = Runtime::new(2).unwrap();
    let s = office();
    // A schema budget of about two tables: the others are left out.
    let opts = Options {
        max_new_tokens: 24,
        context_tokens: 400,
        repair_rounds: 0,
        candidates: 1,
        schema_tokens: 60,
        ..Options::default()
    };
    let q = "Which parcels arrived late, and with which courier?";
    let mut linker = None;
    let mut cache = PrefixCache::new();
    let (mut go, mut accept) = (|_: Progress| true, |_: &str| Ok(()));
    let slot = LinkSlot { linker: &mut linker, encoder: ENCODER, models_dir: &dir, store: None };
    let hooks = Hooks { validate: &mut accept, execute: None, progress: &mut go, link: Some(slot) };
    let o = e.run_with(&rt, &mut cache, &s, q, &opts, hooks).unwrap();
    let l = o.prompt.linking.as_ref().expect("tables were chosen");
    assert_eq!(l.encoder.as_deref(), Some(ENCODER));
    assert_eq!(l.embedded, 8);
    assert_eq!(o.prompt.shown, ["public.carriers", "public.shipments"], "schema order");
    assert_eq!(l.similarity.len(), 2);
    assert!(linker.is_some(), "the linker stays in the slot for the next call");

    // Without an encoder installed the call still answers, by the question's words.
    let mut none = None;
    let slot =
        LinkSlot { linker: &mut none, encoder: "no-such-encoder", models_dir: &dir, store: None };
    let hooks = Hooks { validate: &mut accept, execute: None, progress: &mut go, link: Some(slot) };
    let o = e.run_with(&rt, &mut cache, &s, q, &opts, hooks).unwrap();
    let l = o.prompt.linking.as_ref().unwrap();
    assert_eq!(l.encoder, None);
    assert_eq!(l.fallback.as_deref(), Some("encoder \"no-such-encoder\" is not installed"));
    assert!(!o.prompt.shown.is_empty());
}
