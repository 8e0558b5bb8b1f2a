//! Active vocabulary and schema constraints with real models: the active set over the demo
//! schema, unit checks of the chooser with a real tokenizer, and (ignored, run by hand) the
//! measurement over the demo scorecard: agreement of the pruned head with full-vocabulary
//! greedy, decode speed, and which answers the constraints change.
//!
//! Measurement: `cargo test --release --test nl2sql_constrain -- --ignored --nocapture measure`
//! writes `target/constrain-scorecard.json`; then, holding the PostgreSQL lock,
//! `cargo test --release --test nl2sql_constrain -- --ignored --nocapture execute` runs every
//! answer and reference on `turboinfer_demo` (read-only) and prints execution accuracy.

mod common;

use turboinfer::generate::sampler::argmax;
use turboinfer::model::Logits;
use turboinfer::nl2sql::constrain::Constrainer;
use turboinfer::nl2sql::vocab::{ActiveVocab, VocabBase};
use turboinfer::nl2sql::{Options, PrefixCache};
use turboinfer::platform::runtime::Runtime;

/// The scorecard: question and a reference SQL over demo/data.sql.
const QUESTIONS: &[(&str, &str)] = &[
    ("How many users are there?", "SELECT count(*) FROM users"),
    ("How many products are currently available?", "SELECT count(*) FROM products WHERE is_available"),
    ("How many orders have the status delivered?", "SELECT count(*) FROM orders WHERE status = 'delivered'"),
    ("List the names of the countries in Europe.", "SELECT name FROM countries WHERE continent = 'Europe'"),
    ("What is the average product price?", "SELECT avg(price) FROM products"),
    ("How many users signed up in 2023?", "SELECT count(*) FROM users WHERE signed_up_at >= '2023-01-01' AND signed_up_at < '2024-01-01'"),
    ("How many users are there in each country? Show the country code and the count.", "SELECT country_code, count(*) FROM users GROUP BY country_code"),
    ("What are the names and prices of the 5 most expensive products?", "SELECT name, price FROM products ORDER BY price DESC LIMIT 5"),
    ("How many orders were placed by users from France (country code FR)?", "SELECT count(*) FROM orders o JOIN users u ON u.user_id = o.user_id WHERE u.country_code = 'FR'"),
    ("What is the total amount of all payments?", "SELECT sum(amount) FROM payments"),
    ("How many payments were made by card?", "SELECT count(*) FROM payments WHERE method = 'card'"),
    ("Which carrier has the most shipments?", "SELECT carrier FROM shipments GROUP BY carrier ORDER BY count(*) DESC LIMIT 1"),
    ("What is the average review rating?", "SELECT avg(rating) FROM reviews"),
    ("How many shipments are still in transit?", "SELECT count(*) FROM shipments WHERE delivered_at IS NULL"),
    ("How many orders were placed in each month of 2024?", "SELECT date_trunc('month', ordered_at), count(*) FROM orders WHERE ordered_at >= '2024-01-01' AND ordered_at < '2025-01-01' GROUP BY 1"),
    ("What is the name of the category with the most products?", "SELECT c.name FROM categories c JOIN products p ON p.category_id = c.category_id GROUP BY c.category_id, c.name ORDER BY count(*) DESC LIMIT 1"),
    ("Which 3 products have the highest total quantity sold? Show their names.", "SELECT p.name FROM products p JOIN order_items oi ON oi.product_id = p.product_id GROUP BY p.product_id, p.name ORDER BY sum(oi.quantity) DESC LIMIT 3"),
    ("How many users are inactive?", "SELECT count(*) FROM users WHERE NOT is_active"),
    ("What is the total revenue of the order items of delivered orders?", "SELECT sum(oi.quantity * oi.unit_price) FROM order_items oi JOIN orders o ON o.order_id = oi.order_id WHERE o.status = 'delivered'"),
    ("How many users have more than one address?", "SELECT count(*) FROM (SELECT user_id FROM addresses GROUP BY user_id HAVING count(*) > 1) t"),
    ("What is the email of the user who placed the most orders?", "SELECT u.email FROM users u JOIN orders o ON o.user_id = u.user_id GROUP BY u.user_id, u.email ORDER BY count(*) DESC, u.user_id LIMIT 1"),
    ("How many reviews have a rating of 5?", "SELECT count(*) FROM reviews WHERE rating = 5"),
    ("Which continent has the most users?", "SELECT c.continent FROM users u JOIN countries c ON c.country_code = u.country_code GROUP BY c.continent ORDER BY count(*) DESC LIMIT 1"),
];

#[test]
fn active_vocab_covers_the_schema_and_sql() {
    let Some(e) = common::engine("qwen2.5-coder-0.5b") else { return };
    let tok = e.tokenizer();
    let base = VocabBase::new(tok).unwrap();
    let schema = common::demo_schema();
    let q = "Which carrier has the most shipments to 'La Poste'?";
    let plan = e.plan(&schema, q, &Options::default()).unwrap();
    let ids: Vec<u32> = plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect();
    let v = ActiveVocab::build(&base, tok, &schema, &ids, q).unwrap();
    println!(
        "active vocabulary: base {} + schema/question = {} of {}",
        base.len(),
        v.len(),
        tok.vocab_size()
    );
    assert!(v.len() < tok.vocab_size() / 5, "{}", v.len());
    for text in [
        "```sql\nSELECT s.carrier, COUNT(*) AS n FROM shipments s JOIN orders o ON o.order_id = s.order_id WHERE s.carrier = 'La Poste' GROUP BY s.carrier ORDER BY n DESC LIMIT 1;\n```",
        "SELECT \"order_items\".quantity FROM public.order_items WHERE delivered_at IS NULL AND signed_up_at >= NOW() - INTERVAL '30 days'",
        "SELECT date_trunc('month', ordered_at) AS month, sum(unit_price * quantity) FROM order_items",
    ] {
        for id in tok.encode(text, false).unwrap() {
            assert!(v.contains(id), "{:?} of {text:?} missing", String::from_utf8_lossy(tok.piece(id)));
        }
    }
    for &id in tok.eog_ids() {
        assert!(v.contains(id));
    }
    // A word from neither SQL nor the schema nor the question is spelled from short pieces only.
    assert!(tok.encode(" photosynthesis", false).unwrap().iter().any(|&id| !v.contains(id)));
}

/// Logits that rank `prefer` tokens first (in order), everything else at 0.
fn ranked(vocab: usize, prefer: &[u32]) -> Vec<f32> {
    let mut l = vec![0.0f32; vocab];
    for (k, &id) in prefer.iter().enumerate() {
        l[id as usize] = 100.0 - k as f32;
    }
    l
}

#[test]
fn chooser_with_a_real_tokenizer() {
    let Some(e) = common::engine("qwen2.5-coder-0.5b") else { return };
    let tok = e.tokenizer();
    let n = tok.vocab_size();
    let c = Constrainer::new(&common::demo_schema());
    let one = |s: &str| -> u32 {
        let ids = tok.encode(s, false).unwrap();
        assert_eq!(ids.len(), 1, "{s:?} is {ids:?}");
        ids[0]
    };
    // A table that does not exist loses to one that does.
    let (bad, good) = (one(" customers"), one(" users"));
    let p = c.choose(tok, "SELECT count(*) FROM", &ranked(n, &[bad, good]), None);
    assert_eq!((p.id, p.changed), (good, true));
    // Keywords and functions pass untouched.
    let p = c.choose(tok, "SELECT", &ranked(n, &[one(" COUNT"), good]), None);
    assert_eq!((p.id, p.changed), (one(" COUNT"), false));
    // After an alias, only that table's columns.
    let text = "SELECT u.full_name FROM users u WHERE u.";
    let p = c.choose(tok, text, &ranked(n, &[one("name"), one("email")]), None);
    assert_eq!((p.id, p.changed), (one("email"), true));
    // The same on a subset row.
    let rows = vec![one("email"), one("name")];
    let p = c.choose(tok, text, &[5.0, 9.0], Some(&rows));
    assert_eq!((p.id, p.changed), (one("email"), true));
    // Nothing acceptable among the candidates: plain argmax.
    let p = c.choose(tok, text, &[9.0, 5.0], Some(&[one("name"), one("names")]));
    assert_eq!((p.id, p.changed, p.acceptable), (one("name"), false, false));
    // A token the decoder backed out of is never picked again; the next acceptable one is.
    let p = c.choose_excluding(
        tok,
        text,
        &[9.0, 5.0],
        Some(&[one("email"), one("full")]),
        &[one("email")],
    );
    assert_eq!((p.id, p.changed, p.acceptable), (one("full"), true, true));
    // End of generation is no escape from a dead end: only the model's own first choice.
    let eog = tok.eog_ids()[0];
    let p = c.choose(tok, text, &[9.0, 5.0], Some(&[one("name"), eog]));
    assert_eq!((p.id, p.acceptable), (one("name"), false));
    let p = c.choose(tok, text, &[5.0, 9.0], Some(&[one("name"), eog]));
    assert_eq!((p.id, p.acceptable), (eog, true));
}

/// One scorecard answer.
#[derive(Debug, Clone)]
struct Row {
    setting: String,
    question: usize,
    sql: String,
    tokens: usize,
    decode_ms: f64,
    constrained: usize,
}

/// Path of the measurement's output.
fn scorecard_path() -> std::path::PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    dir.join("constrain-scorecard.json")
}

#[test]
#[ignore = "measurement: minutes of model time"]
fn measure() {
    let name =
        std::env::var("TURBOINFER_SCORE_MODEL").unwrap_or_else(|_| "qwen2.5-coder-0.5b".into());
    let Some(e) = common::engine(&name) else { return };
    let rt = Runtime::new(2).unwrap();
    let schema = common::demo_schema();
    let tok = e.tokenizer();
    let base = VocabBase::new(tok).unwrap();
    let vocab = tok.vocab_size();

    // Agreement: plain greedy with the full head; at each step, is the argmax in the active set?
    let (mut steps, mut inside) = (0usize, 0usize);
    let opts = Options { max_new_tokens: 96, context_tokens: 2048, ..Default::default() };
    let mut sizes = Vec::new();
    let mut kv = e.model().new_cache(2048);
    let mut cached: Option<Vec<u32>> = None; // the schema prefix held at the start of `kv`
    for (qi, (q, _)) in QUESTIONS.iter().enumerate() {
        let plan = e.plan(&schema, q, &opts).unwrap();
        let ids: Vec<u32> = plan.prefix_ids.iter().chain(&plan.question_ids).copied().collect();
        let v = ActiveVocab::build(&base, tok, &schema, &ids, q).unwrap();
        sizes.push(v.len());
        // As the engine does: the prefix once (in chunks of 64), then the question on top.
        if cached.as_ref() != Some(&plan.prefix_ids) {
            kv.clear();
            for chunk in plan.prefix_ids.chunks(64) {
                e.model().forward(&rt, &mut kv, chunk, Logits::Last).unwrap();
            }
            cached = Some(plan.prefix_ids.clone());
        }
        kv.truncate(plan.prefix_ids.len());
        let mut logits = Vec::new();
        for chunk in plan.question_ids.chunks(64) {
            logits = e.model().forward(&rt, &mut kv, chunk, Logits::Last).unwrap();
        }
        let mut text = Vec::new();
        for _ in 0..96 {
            let id = argmax(&logits);
            steps += 1;
            if v.contains(id) {
                inside += 1;
            } else {
                println!(
                    "q{qi}: argmax {:?} outside the active set",
                    String::from_utf8_lossy(tok.piece(id))
                );
            }
            if tok.is_eog(id) {
                break;
            }
            text.extend_from_slice(tok.piece(id));
            if turboinfer::nl2sql::sqltext::answer_complete(&String::from_utf8_lossy(&text)) {
                break;
            }
            logits = e.model().forward(&rt, &mut kv, &[id], Logits::Last).unwrap();
        }
        assert_eq!(logits.len(), vocab);
    }
    println!(
        "{name}: active vocabulary {}..{} of {vocab}; argmax inside the set at {inside} of {steps} steps ({:.2}%)",
        sizes.iter().min().unwrap(),
        sizes.iter().max().unwrap(),
        100.0 * inside as f64 / steps as f64
    );

    // The four settings through the engine (one warm prefix cache, accept-all validator), each
    // question under every setting in turn so that load changes on a shared machine hit all alike.
    let settings = [
        ("plain", false, false),
        ("pruning", true, false),
        ("constraints", false, true),
        ("both", true, true),
    ];
    let mut rows = Vec::new();
    let mut cache = PrefixCache::new();
    let mut totals = [(0.0f64, 0usize, 0usize); 4]; // (decode ms, tokens, constrained picks)
    for (qi, (q, _)) in QUESTIONS.iter().enumerate() {
        for (k, &(label, pruning, constraints)) in settings.iter().enumerate() {
            let opts = Options {
                max_new_tokens: 96,
                context_tokens: 2048,
                vocab_pruning: pruning,
                schema_constraints: constraints,
                speculation: false,
                ..Default::default()
            };
            let o =
                e.run(&rt, &mut cache, &schema, q, &opts, &mut |_| true, &mut |_| Ok(())).unwrap();
            totals[k].0 += o.timings.decode_ms;
            totals[k].1 += o.tokens.generated;
            totals[k].2 += o.shaping.constrained_tokens;
            rows.push(Row {
                setting: label.into(),
                question: qi,
                sql: o.sql.clone(),
                tokens: o.tokens.generated,
                decode_ms: o.timings.decode_ms,
                constrained: o.shaping.constrained_tokens,
            });
        }
    }
    for (k, (label, _, _)) in settings.iter().enumerate() {
        let (ms, toks, changed) = totals[k];
        println!("{label:12} decode {:.1} ms/token ({toks} tokens, {:.0} ms), constrained picks {changed}", ms / toks as f64, ms);
    }
    let plain: Vec<&Row> = rows.iter().filter(|r| r.setting == "plain").collect();
    for r in rows.iter().filter(|r| r.setting != "plain") {
        let p = plain[r.question];
        if p.sql != r.sql {
            println!("{} q{}: {:?}\n    plain: {:?}", r.setting, r.question, r.sql, p.sql);
        }
    }
    let json: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| serde_json::json!({"setting": r.setting, "question": r.question, "sql": r.sql, "tokens": r.tokens, "decode_ms": r.decode_ms, "constrained": r.constrained}))
        .collect();
    std::fs::write(scorecard_path(), serde_json::to_string_pretty(&json).unwrap()).unwrap();
}

/// Rows of `sql` on the demo database, sorted (order-insensitive comparison), or the error.
fn run_sql(sql: &str) -> Result<Vec<String>, String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = std::process::Command::new(format!("{root}/scripts/cluster.sh"))
        .args([
            "psql",
            "-d",
            "turboinfer_demo",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            &format!("BEGIN READ ONLY; {sql}; ROLLBACK"),
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("").to_string());
    }
    let mut rows: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| *l != "BEGIN" && *l != "ROLLBACK")
        .map(str::to_string)
        .collect();
    rows.sort();
    Ok(rows)
}

#[test]
#[ignore = "needs the demo database; run under the PostgreSQL lock after `measure`"]
fn execute() {
    let json: Vec<serde_json::Value> = serde_json::from_str(
        &std::fs::read_to_string(scorecard_path()).expect("run `measure` first"),
    )
    .unwrap();
    let rows: Vec<Row> = json
        .iter()
        .map(|v| Row {
            setting: v["setting"].as_str().unwrap().into(),
            question: v["question"].as_u64().unwrap() as usize,
            sql: v["sql"].as_str().unwrap().into(),
            tokens: v["tokens"].as_u64().unwrap() as usize,
            decode_ms: v["decode_ms"].as_f64().unwrap(),
            constrained: v["constrained"].as_u64().unwrap() as usize,
        })
        .collect();
    let refs: Vec<Vec<String>> =
        QUESTIONS.iter().map(|(_, r)| run_sql(r).expect("reference runs")).collect();
    for setting in ["plain", "pruning", "constraints", "both"] {
        let (mut ok, mut valid, mut n) = (0, 0, 0);
        for r in rows.iter().filter(|r| r.setting == setting) {
            n += 1;
            match run_sql(&r.sql) {
                Ok(got) => {
                    valid += 1;
                    if got == refs[r.question] {
                        ok += 1;
                    } else {
                        println!("{setting} q{}: wrong result: {}", r.question, r.sql);
                    }
                }
                Err(e) => println!("{setting} q{}: error {e}: {}", r.question, r.sql),
            }
        }
        println!("{setting:12} executes {valid}/{n}, correct {ok}/{n}");
    }
}
