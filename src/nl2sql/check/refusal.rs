//! "This database cannot answer that": the refusal stage. Before any answer is decoded, the model
//! is asked, over the schema it was shown and the question, whether the tables hold the data the
//! question is about; the log-odds of its "no" against its "yes" decide, with a lower bar when no
//! word of the question appears anywhere in the schema the model was shown (names, comments,
//! sample values): how well any table matches.
//!
//! The check costs one prefill of [`check_turn`] (about 30 tokens) after the question's user
//! turn, which the schema prefix already in the KV cache serves, then the cache is cut back and the
//! assistant's turn opens as usual: the answer of a question that is not refused is bitwise the one
//! decoded without the check (batch = sequential).
//!
//! Most questions do not need the turn ([`Skip`]): when the answer's own first logits, which the
//! question's prefill computes anyway, open a SQL fence with confidence and two or more of the
//! question's words are in the schema, the question is on-topic by two signals and the check's
//! turn is not run (with the default `turboinfer.refusal = auto` and a model measured for it).
//!
//! Measured on the development split (docs/nl2sql-accuracy.md): off-topic questions refused
//! against development questions wrongly refused, the margin chosen on one half and judged on
//! the other.

use crate::kernels::math;
use crate::nl2sql::base::error::Nl2SqlError;
use crate::nl2sql::decode::candidates;
use crate::nl2sql::plan::prompt::{Segment, Segments};
use crate::tokenizer::Tokenizer;

pub use crate::nl2sql::base::options::RefusalMode;

/// The check question, asked as a new user turn after the question.
pub const CHECK_QUESTION: &str =
    "Can this question be answered with a SQL query over the tables of the schema above? Answer yes or no.";

/// The threshold of [`Verdict::refused`] for Qwen2.5-Coder-1.5B-Instruct, the default model:
/// refuse when `log p(no) - log p(yes)` exceeds it. Negative because the model leans to "yes" for
/// every question; what tells an off-topic question is how much less it does. Chosen on one half
/// of the development split and judged on the other (docs/nl2sql-accuracy.md). Also the default
/// of `turboinfer.refusal_margin` (used with `turboinfer.refusal = on`).
pub const DEFAULT_MARGIN: f32 = -2.1;

/// The margin measured for a model, from its GGUF metadata: Qwen2.5-Coder-1.5B-Instruct
/// (architecture `qwen2`, 28 layers of width 1536, a `general.name` naming a coder instruct
/// model) has [`DEFAULT_MARGIN`]; any other model none.
pub fn calibrated_margin(arch: &str, n_layers: usize, dim: usize, name: &str) -> Option<f32> {
    let name = name.to_ascii_lowercase();
    let coder_instruct = name.contains("coder") && name.contains("instruct");
    (arch == "qwen2" && n_layers == 28 && dim == 1536 && coder_instruct).then_some(DEFAULT_MARGIN)
}

/// When the check's turn is skipped ([`Skip`]): the answer's first token is a SQL fence
/// (```` ``` ````) with `log p` above [`Skip::opening`] and at least [`Skip::words`] question
/// words are in the schema text. Qwen2.5-Coder-1.5B-Instruct opens a query about the tables
/// with a fence (median `log p` -0.22 over the development questions), but a world question
/// phrased with the schema's nouns with a bare `SELECT` (73 of the 128 off-topic questions; the
/// fence's median -1.1), and the requests for code that open a fence (a Python function, a
/// regex) name no two words of a schema.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Skip {
    /// The least `log p` of the fence token.
    pub opening: f32,
    /// The least number of matched question words ([`matched_words`]).
    pub words: usize,
}

/// [`Skip`] for Qwen2.5-Coder-1.5B-Instruct: on each half of the development split (its
/// questions, the off-topic questions asked of its databases, its unanswerable ones), the
/// largest bar on a 0.1 grid that loses none of that half's refusals, judged on the other half:
/// half B's (-0.4) loses none of half A's; half A's (-0.6) lost one of half B's and was not
/// kept (docs/nl2sql-accuracy.md, "The check's turn, skipped").
pub const DEFAULT_SKIP: Skip = Skip { opening: -0.4, words: 2 };

impl Skip {
    /// Whether a question with `matched` words in the schema, whose answer opens with a fence
    /// at `log p` `opening`, skips the check's turn.
    pub fn skips(self, opening: f32, matched: usize) -> bool {
        matched >= self.words && opening > self.opening
    }
}

/// The skip rule measured for a model, as [`calibrated_margin`]: [`DEFAULT_SKIP`] for the
/// model with [`DEFAULT_MARGIN`], none for any other (every question is checked).
pub fn calibrated_skip(arch: &str, n_layers: usize, dim: usize, name: &str) -> Option<Skip> {
    calibrated_margin(arch, n_layers, dim, name).map(|_| DEFAULT_SKIP)
}

/// `log p` of the fence token ```` ``` ```` in a full vocabulary row `row` (the logits of the
/// answer's first position): how surely the model opens a SQL block; `None` when the vocabulary
/// has no one-token fence.
pub fn opening_logprob(tok: &Tokenizer, row: &[f32]) -> Result<Option<f32>, Nl2SqlError> {
    let ids = tok.encode("```", false)?;
    let [fence] = ids.as_slice() else {
        return Ok(None);
    };
    Ok(logprob(row, *fence as usize))
}

/// `log p` of entry `id` under the softmax of `row`; `None` when `row` has no such entry.
fn logprob(row: &[f32], id: usize) -> Option<f32> {
    row.get(id).map(|&x| (x as f64 - candidates::log_sum_exp(row)) as f32)
}

/// How much lower the bar is when no word of the question appears in the schema text: such a
/// question names nothing the tables hold, and a weaker "no" suffices (same procedure as
/// [`DEFAULT_MARGIN`]).
pub const NO_MATCH_ALLOWANCE: f32 = 0.9;

/// The check turn: closes nothing (the question's user turn is already closed), opens a user turn
/// with [`CHECK_QUESTION`], and the assistant's turn whose first token is the verdict.
pub fn check_turn() -> Segments {
    Segments(vec![
        Segment::Template("<|im_start|>user\n"),
        Segment::Text(CHECK_QUESTION.to_string()),
        Segment::Template("<|im_end|>\n<|im_start|>assistant\n"),
    ])
}

/// The vocabulary ids that begin a "yes" and a "no" answer (each spelling that is one token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerTokens {
    yes: Vec<u32>,
    no: Vec<u32>,
}

impl AnswerTokens {
    /// The ids of `yes`/`Yes`/`YES` and `no`/`No`/`NO` that the tokenizer encodes as one token;
    /// an error when either answer has none (a vocabulary this check cannot read).
    pub fn new(tok: &Tokenizer) -> Result<AnswerTokens, Nl2SqlError> {
        let ids = |words: [&str; 3]| -> Result<Vec<u32>, Nl2SqlError> {
            let mut v = Vec::new();
            for w in words {
                if let [id] = tok.encode(w, false)?.as_slice() {
                    v.push(*id);
                }
            }
            v.sort_unstable();
            v.dedup();
            Ok(v)
        };
        let (yes, no) = (ids(["yes", "Yes", "YES"])?, ids(["no", "No", "NO"])?);
        if yes.is_empty() || no.is_empty() {
            return Err(Nl2SqlError::UnsupportedModel(
                "the vocabulary has no one-token yes/no answer (the refusal check needs one)"
                    .into(),
            ));
        }
        Ok(AnswerTokens { yes, no })
    }

    /// `log p(no) - log p(yes)` from the logits of the check's first answer token (a full
    /// vocabulary row): the log-sum-exp of each answer's spellings.
    pub fn margin(&self, row: &[f32]) -> f32 {
        self.margin_by(|id| row[id as usize])
    }

    /// The vocabulary rows [`AnswerTokens::margin`] reads, ascending: every spelling of both
    /// answers. The check's last position needs only these rows of the LM head (the full row
    /// reads the whole output matrix, ~190 MB for the 1.5B).
    pub fn rows(&self) -> Vec<u32> {
        let mut v = [self.yes.as_slice(), self.no.as_slice()].concat();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// [`AnswerTokens::margin`] from the logits of [`AnswerTokens::rows`] only (`sub`, in that
    /// order): bitwise the same, since the LM head's entries for a subset of the vocabulary are
    /// those of the full row (`Model::forward_rows`).
    pub fn margin_of_rows(&self, sub: &[f32]) -> f32 {
        let rows = self.rows();
        self.margin_by(|id| rows.binary_search(&id).map_or(f32::NAN, |i| sub[i]))
    }

    /// The margin with each answer id's logit from `logit`.
    fn margin_by(&self, logit: impl Fn(u32) -> f32) -> f32 {
        let lse = |ids: &[u32]| {
            let xs: Vec<f64> = ids.iter().map(|&i| logit(i) as f64).collect();
            let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            m + math::ln_f64(xs.iter().map(|&x| math::exp_f64(x - m)).sum())
        };
        (lse(&self.no) - lse(&self.yes)) as f32
    }
}

/// How many of the question's words appear in `schema_text` (the rendered tables the model was
/// shown: names, comments, sample values): words of four letters or more, singular, not stop
/// words (`trim::words`), found anywhere in the lowercased text, so that `customer` matches a
/// column `sbcustomerid` too. 0 for a question about nothing the schema mentions.
pub fn matched_words(schema_text: &str, question: &str) -> usize {
    let text = schema_text.to_lowercase();
    crate::nl2sql::plan::trim::words(question)
        .iter()
        .filter(|w| w.chars().count() >= 4 && text.contains(w.as_str()))
        .count()
}

/// The outcome of the check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// `log p(no) - log p(yes)`; `None` when the check's turn was skipped ([`Skip`]).
    pub margin: Option<f32>,
    /// `log p` of the answer's opening fence ([`opening_logprob`]), when it was read.
    pub opening: Option<f32>,
    /// Question words found in the schema text ([`matched_words`]).
    pub matched: usize,
    /// The threshold in force (`turboinfer.refusal_margin`).
    pub threshold: f32,
}

impl Verdict {
    /// The bar the margin must pass: the threshold, lowered by [`NO_MATCH_ALLOWANCE`] when no
    /// question word is in the schema.
    pub fn bar(&self) -> f32 {
        if self.matched == 0 {
            self.threshold - NO_MATCH_ALLOWANCE
        } else {
            self.threshold
        }
    }

    /// Whether the question is refused: the margin is above the bar.
    pub fn refused(&self) -> bool {
        self.margin.is_some_and(|m| m > self.bar())
    }

    /// The reason shown to the caller.
    pub fn reason(&self, tables: usize) -> String {
        let words = if self.matched == 0 {
            "none of the question's words appears in the schema, and ".to_string()
        } else {
            String::new()
        };
        format!(
            "{words}the model judged that the {tables} table{} it was shown do not hold the data this question asks about (log-odds of no against yes {:.2}, above {:.2})",
            if tables == 1 { "" } else { "s" },
            self.margin.unwrap_or(f32::NAN),
            self.bar()
        )
    }
}

/// The index in `question_ids` where the assistant's turn opens (its last `<|im_start|>`), i.e.
/// the length of the question's user turn; `None` when there is no such marker.
pub fn assistant_start(tok: &Tokenizer, question_ids: &[u32]) -> Option<usize> {
    let start = tok.token_id("<|im_start|>")?;
    question_ids.iter().rposition(|&t| t == start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words are matched inside concatenated identifiers, in singular, four letters or more.
    #[test]
    fn question_words_are_found_in_the_schema_text() {
        let ddl = "-- sbcustomer.sbcuststatus: possible values: active, closed\n\
                   CREATE TABLE sbcustomer (sbcustid text PRIMARY KEY, sbcustname text);\n";
        assert_eq!(matched_words(ddl, "How many customers are active?"), 2);
        assert_eq!(matched_words(ddl, "Who painted the Mona Lisa?"), 0);
        // Short words and stop words never count (`id`, `how`, `many`).
        assert_eq!(matched_words(ddl, "how many id"), 0);
    }

    /// The bar drops by the allowance when nothing matched; the reason says which bar applied.
    #[test]
    fn the_bar_depends_on_the_match() {
        let v = Verdict { margin: Some(-2.5), opening: None, matched: 3, threshold: -2.1 };
        assert!(!v.refused());
        let v = Verdict { matched: 0, ..v };
        assert_eq!(v.bar(), -2.1 - NO_MATCH_ALLOWANCE);
        assert!(v.refused());
        // A skipped check refuses nothing.
        assert!(!Verdict { margin: None, opening: Some(-0.1), ..v }.refused());
        assert!(v.reason(4).starts_with("none of the question's words"), "{}", v.reason(4));
        assert!(v.reason(1).contains("the 1 table it was shown"), "{}", v.reason(1));
    }

    /// Only the default model's shape and name get the calibrated margin; `auto` checks nothing
    /// for another model, `on` checks every model.
    #[test]
    fn calibration_is_per_model() {
        let q15 = calibrated_margin("qwen2", 28, 1536, "Qwen2.5 Coder 1.5B Instruct GGUF");
        assert_eq!(q15, Some(DEFAULT_MARGIN));
        assert_eq!(calibrated_margin("qwen2", 24, 896, "Qwen2.5 Coder 0.5B Instruct AWQ"), None);
        assert_eq!(calibrated_margin("qwen2", 28, 1536, "Qwen2.5 1.5B"), None);
        assert_eq!(RefusalMode::Auto.threshold(None), None);
        assert_eq!(RefusalMode::Auto.threshold(q15), q15);
        assert_eq!(RefusalMode::Margin(-1.0).threshold(None), Some(-1.0));
        assert_eq!(RefusalMode::Off.threshold(q15), None);
    }

    /// The turn is skipped only with both signals: a sure fence and two matched words; only
    /// the default model has the rule.
    #[test]
    fn the_check_is_skipped_on_two_signals() {
        let s = DEFAULT_SKIP;
        assert!(s.skips(-0.2, 2));
        assert!(!s.skips(-0.2, 1), "a code request opens a fence too");
        assert!(!s.skips(-0.6, 5), "a bare SELECT is how world questions open");
        assert!(!s.skips(s.opening, 2), "the bar itself does not skip");
        let q15 = calibrated_skip("qwen2", 28, 1536, "Qwen2.5 Coder 1.5B Instruct GGUF");
        assert_eq!(q15, Some(DEFAULT_SKIP));
        assert_eq!(calibrated_skip("qwen2", 24, 896, "Qwen2.5 Coder 0.5B Instruct"), None);
    }

    /// `log p` of an entry: its logit minus the log-sum-exp of the row.
    #[test]
    fn logprob_is_the_log_softmax() {
        let row = [0.0f32, 1.0, 2.0];
        let lse = (1.0f64 + 1.0f64.exp() + 2.0f64.exp()).ln();
        assert!((logprob(&row, 2).unwrap() as f64 - (2.0 - lse)).abs() < 1e-6);
        assert_eq!(logprob(&row, 3), None);
    }

    /// The margin is the log-sum-exp of the "no" spellings minus that of the "yes" ones.
    #[test]
    fn margin_is_the_log_odds_of_the_spellings() {
        let t = AnswerTokens { yes: vec![1, 2], no: vec![3] };
        let row = [0.0f32, 1.0, 1.0, 0.5];
        let want = 0.5 - (1.0f64 + 2.0f64.ln()) as f32;
        assert!((t.margin(&row) - want).abs() < 1e-6, "{}", t.margin(&row));
        // From the answer rows alone: the same bits.
        assert_eq!(t.rows(), vec![1, 2, 3]);
        assert_eq!(t.margin_of_rows(&[1.0, 1.0, 0.5]).to_bits(), t.margin(&row).to_bits());
    }
}
