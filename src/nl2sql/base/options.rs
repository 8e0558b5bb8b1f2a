//! The settings of one nl2sql call and their defaults.

/// Default answer budget: long enough for a CTE with a window function written the way the
/// models format SQL (one clause per line, indented: 150-300 tokens); on the sql-eval
/// development set 256 cut 2 of 104 answers. Only answers that need it use it.
pub const DEFAULT_MAX_NEW_TOKENS: usize = 384;
/// Default KV cache positions: a schema prompt of the default `DEFAULT_SCHEMA_TOKENS` with the
/// question, an answer of `DEFAULT_MAX_NEW_TOKENS` and its repair turns, with room to spare.
pub const DEFAULT_CONTEXT_TOKENS: usize = 4096;
/// Default repair rounds after a rejected answer.
pub const DEFAULT_REPAIR_ROUNDS: usize = 2;
/// Default repair budget (see [`Options::repair_tokens`]): no new repair round or rescue branch
/// once the answer and its repairs decoded this many tokens. A repair round rewrites the whole
/// statement, so a long rejected line costs a new long answer per round. On the development
/// split (2026-12-05, counterfactuals from three side-by-side runs' records, `benches/sqleval/run
/// audit`) the lines that passed 200 tokens (A 6, B 4 of 52 calls) all ended wrong, and stopping
/// them there lost no right answer on either half, with or without column comments. Chosen on
/// half B as the smallest budget that loses nothing there (150 loses a right branch after 176
/// tokens), judged on half A: no answer lost, its p90 against llama-server 1.13x -> 0.90x
/// side by side (docs/nl2sql-accuracy.md, "The repair budget").
pub const DEFAULT_REPAIR_TOKENS: usize = 200;
/// Default candidate answers (see [`Options::candidates`]): the first answer and one branch. The
/// stage audit of the development split (docs/nl2sql-accuracy.md, 2026-11-27): with and without
/// column comments, the first branch turned one wrong answer right on one half (+1, +1) and 3
/// missing answers into valid SQL; the second and third branches gained no right answer on either
/// half in either run (one more valid answer per run) for about two thirds of the branches' time
/// (warm p90 ~17 → ~15 s).
pub const DEFAULT_CANDIDATES: usize = 2;
/// Default sampled candidates (`stages/samples.rs`): none (see docs/nl2sql-accuracy.md for what
/// they gained and cost on the development split).
pub const DEFAULT_SAMPLES: usize = 0;

/// Default approved examples shown per question (`examples.rs`): the nearest few, as the
/// few-shot text-to-SQL methods show (DAIL-SQL and its kin use 3-5).
pub const DEFAULT_EXAMPLES: usize = 3;

/// Default most prompt tokens of schema when the whole schema does not fit the context
/// (`Options::schema_tokens`): about what the schemas of the development databases take whole
/// (1,000-1,300 tokens with their column comments), so that a question over thousands of tables
/// is prefilled like one over a dozen instead of filling the context (a 3,600-token prompt
/// prefills at ~70 tokens/s on 2 cores with the 1.5B model: ~50 s without a cached prefix).
pub const DEFAULT_SCHEMA_TOKENS: usize = 1536;

/// Default most prompt tokens of a follow-up's earlier turns: a turn is its question and its
/// statement, ~50-250 tokens (sql-eval's answers are 30-200 tokens), so about four turns, and
/// with the default schema budget (1,536) and answer reserve the prompt still fits the default
/// context (4,096) with a repair round.
pub const DEFAULT_FOLLOW_UP_TOKENS: usize = 1024;

/// Settings of one call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Most tokens generated per attempt.
    pub max_new_tokens: usize,
    /// KV cache size (clamped to the model's training context): prompt + answer + repair.
    pub context_tokens: usize,
    /// Speculative decoding (template + prompt-lookup drafts verified in one batched pass);
    /// the answer is the same, the number of forward passes is not.
    pub speculation: bool,
    /// Most repair rounds after a rejected answer (each: the server's error and catalog facts
    /// as a new turn, then a fresh answer).
    pub repair_rounds: usize,
    /// The repair budget: once the answer and its repairs (the attempts of the line) decoded
    /// this many tokens, no further repair round and no branch to rescue a rejected or doubted
    /// line is decoded (the engine's own rewrites, which decode nothing, still run; an attempt
    /// cut off at `max_new_tokens` is not counted); 0 = no budget.
    pub repair_tokens: usize,
    /// Candidate answers (`candidates.rs`): 1 = the greedy line only; n > 1 adds up to n - 1
    /// branches off the first answer, decoded when the caller executes candidates or when the
    /// greedy line ends rejected.
    pub candidates: usize,
    /// Sampled candidate answers decoded together (`stages/samples.rs`); weighed with the
    /// branches, when candidates are weighed.
    pub samples: usize,
    /// Keep the cache rows a repair turn or a branch shares with what the cache holds after
    /// the question (`held.rs`): exact (the same answers), fewer prompt tokens; off only to
    /// compare.
    pub keep_rows: bool,
    /// Whether and how the refusal check runs (`refusal.rs`); without it a question the shown
    /// tables cannot answer gets a query like any other.
    pub refusal: RefusalMode,
    /// Most approved examples (`SchemaInfo::examples`) shown before the question, the most
    /// similar ones within `examples::TOKEN_BUDGET`; 0 shows none.
    pub examples: usize,
    /// Most prompt tokens of schema when not every table fits the context: the tables the
    /// question is most likely about (`link.rs`, or its words: `trim.rs`) up to this many;
    /// 0 fills the context.
    pub schema_tokens: usize,
    /// Most prompt tokens of a follow-up's earlier turns (`conversation.rs`): the oldest turns
    /// beyond it are left out.
    pub follow_up_tokens: usize,
}

impl Default for Options {
    /// 384 new tokens (a CTE with a window function is 150+), 4096 positions, greedy decoding
    /// with speculation (exact: the same answer in fewer forward passes), two repair rounds within
    /// 200 decoded tokens, 2 candidates, the refusal check.
    fn default() -> Self {
        Options {
            max_new_tokens: DEFAULT_MAX_NEW_TOKENS,
            context_tokens: DEFAULT_CONTEXT_TOKENS,
            speculation: true,
            repair_rounds: DEFAULT_REPAIR_ROUNDS,
            repair_tokens: DEFAULT_REPAIR_TOKENS,
            candidates: DEFAULT_CANDIDATES,
            samples: DEFAULT_SAMPLES,
            keep_rows: true,
            refusal: RefusalMode::Auto,
            examples: DEFAULT_EXAMPLES,
            schema_tokens: DEFAULT_SCHEMA_TOKENS,
            follow_up_tokens: DEFAULT_FOLLOW_UP_TOKENS,
        }
    }
}

/// Whether and how the refusal check runs (`turboinfer.refusal`, `refusal.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RefusalMode {
    /// Never: every question gets a query.
    Off,
    /// With the margin calibrated for the loaded model (`refusal::calibrated_margin`); no check for a
    /// model without one (a model's yes/no log-odds mean nothing until measured: Qwen2.5-Coder-0.5B's
    /// barely differ between a real question and an off-topic one).
    Auto,
    /// Always, with this margin (`turboinfer.refusal_margin`).
    Margin(f32),
}

impl RefusalMode {
    /// The threshold in force for a model whose calibrated margin is `calibrated`, or `None`
    /// when no check runs.
    pub fn threshold(self, calibrated: Option<f32>) -> Option<f32> {
        match self {
            RefusalMode::Off => None,
            RefusalMode::Auto => calibrated,
            RefusalMode::Margin(m) => Some(m),
        }
    }
}
