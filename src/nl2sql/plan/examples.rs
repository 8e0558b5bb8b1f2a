//! Approved examples, engine side: question → SQL pairs that someone at the database has checked
//! (stored by the PostgreSQL side, `src/pg/examples.rs`, in the extension's table
//! `nl2sql_examples`, and read with the caller's privileges). For each question the few most
//! similar ones go into the prompt as earlier turns of the conversation
//! (`prompt::question_with_examples`), after the cached schema prefix, so that the model copies
//! the database's own joins and conventions.
//!
//! Similarity is lexical: the cosine of the two questions' word sets (`trim::words`: lowercase,
//! singular, no stop words), each word weighted by its inverse document frequency over the
//! stored questions, so that a word every example shares (the domain's main noun) counts for
//! little and a rarer one (`refund`, `weekly`) for much.

use crate::nl2sql::plan::trim;
pub use crate::nl2sql::schema::tables::Example;
use std::collections::{BTreeSet, HashMap};

/// Most prompt tokens the examples of one question may take. Three examples of the lengths
/// people write (a question of 10–30 tokens, a query of 40–200) fit; a fourth long one does
/// not, so that the examples never crowd the schema (whose tables are trimmed to what is left
/// of the context after the question part) and their prefill stays a fraction of a second.
pub const TOKEN_BUDGET: usize = 768;

/// A statement as stored and shown: without surrounding blanks and trailing semicolons.
pub fn statement(sql: &str) -> &str {
    sql.trim().trim_end_matches(';').trim_end()
}

/// The examples of `examples` that share a word with `question`, most similar first (ties: the
/// earlier stored first), at most `k`, with their similarity in (0, 1].
pub fn rank(question: &str, examples: &[Example], k: usize) -> Vec<(usize, f64)> {
    if k == 0 || examples.is_empty() {
        return Vec::new();
    }
    let docs: Vec<BTreeSet<String>> = examples.iter().map(|e| trim::words(&e.question)).collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for d in &docs {
        for w in d {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    let n = docs.len() as f64;
    // Smoothed so that a word in every example still weighs a little (ln 2), never nothing.
    let idf = |w: &str| (1.0 + n / df.get(w).copied().unwrap_or(0).max(1) as f64).ln();
    let q = trim::words(question);
    let norm = |d: &BTreeSet<String>| d.iter().map(|w| idf(w).powi(2)).sum::<f64>().sqrt();
    let qn = norm(&q);
    let mut scored: Vec<(usize, f64)> = docs
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let shared: f64 = d.intersection(&q).map(|w| idf(w).powi(2)).sum();
            (shared > 0.0).then(|| (i, shared / (qn * norm(d))))
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(examples[a.0].id.cmp(&examples[b.0].id)));
    scored.truncate(k);
    scored
}

/// The examples to show: the best of [`rank`] whose token counts (`tokens(i)`) fit
/// [`TOKEN_BUDGET`] together (one that does not fit is skipped, a later shorter one may go in),
/// in prompt order: least similar first, so that the most similar one is the turn right before
/// the question.
pub fn choose<E>(
    question: &str,
    examples: &[Example],
    k: usize,
    mut tokens: impl FnMut(&Example) -> Result<usize, E>,
) -> Result<Vec<(usize, f64)>, E> {
    let mut used = 0;
    let mut chosen = Vec::new();
    for (i, score) in rank(question, examples, examples.len()) {
        if chosen.len() == k {
            break;
        }
        let t = tokens(&examples[i])?;
        if used + t <= TOKEN_BUDGET {
            used += t;
            chosen.push((i, score));
        }
    }
    chosen.reverse();
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(id: i64, q: &str) -> Example {
        Example { id, question: q.into(), sql: format!("SELECT {id}") }
    }

    /// A shared rare word outranks a shared common one; a question sharing nothing is never
    /// chosen; ties keep the store's order.
    #[test]
    fn rarer_shared_words_rank_higher() {
        let store = [
            ex(1, "How many customers signed up last month?"),
            ex(2, "Total refunds per customer"),
            ex(3, "Which customers have the most orders?"),
            ex(4, "Average weather in Paris"),
        ];
        let r = rank("What was the total refund amount for each customer?", &store, 3);
        assert_eq!(r[0].0, 1, "{r:?}");
        assert!(r.iter().all(|&(i, s)| i != 3 && s > 0.0 && s <= 1.0 + 1e-12), "{r:?}");
        // The same words: the shorter question is the closer one.
        assert_eq!(rank("customers", &store, 1)[0].0, 1);
        let twins = [ex(5, "refunds"), ex(2, "refund")];
        assert_eq!(rank("refund", &twins, 2).iter().map(|r| r.0).collect::<Vec<_>>(), [1, 0]);
        assert!(rank("the of and", &store, 3).is_empty());
        assert!(rank("customers", &store, 0).is_empty());
        assert!(rank("customers", &[], 3).is_empty());
    }

    /// The budget skips an example that does not fit and keeps a later one that does; the
    /// chosen ones come least similar first.
    #[test]
    fn the_budget_skips_what_does_not_fit() {
        let store = [ex(1, "refund customer month"), ex(2, "refund customer"), ex(3, "refund")];
        let long = |e: &Example| Ok::<_, ()>(if e.id == 1 { TOKEN_BUDGET } else { 10 });
        let c = choose("refund customer month", &store, 2, long).unwrap();
        assert_eq!(c.iter().map(|c| c.0).collect::<Vec<_>>(), [0]);
        let short = |_: &Example| Ok::<_, ()>(10);
        let c = choose("refund customer month", &store, 2, short).unwrap();
        assert_eq!(c.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 0]);
        let over = |e: &Example| Ok::<_, ()>(if e.id == 1 { TOKEN_BUDGET + 1 } else { 10 });
        let c = choose("refund customer month", &store, 2, over).unwrap();
        assert_eq!(c.iter().map(|c| c.0).collect::<Vec<_>>(), [2, 1]);
    }
}
