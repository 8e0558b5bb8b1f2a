//! Progress NOTICEs of long work (`turboinfer.progress`): a computed schema prefill in nl2sql, and
//! turboinfer_calibrate()'s recording and fitting. Sent from the engine's progress callbacks,
//! which run on the backend thread (where messages may be sent and interrupts are checked).
//!
//! PostgreSQL 15 has no progress view for extensions (pg_stat_progress_* serve built-in
//! commands only), and a wait event would claim the backend waits while it computes: the
//! NOTICEs are all; pg_stat_activity shows the calling statement as `active`.

use super::errors::error_report;
use super::gucs;
use crate::nl2sql::Progress;
use crate::sparse::CalibProgress;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use std::time::{Duration, Instant};

/// Least time between two progress NOTICEs of one prefill: often enough for someone watching
/// psql, and a minute-long prefill still gives only ~60 lines.
const INTERVAL: Duration = Duration::from_secs(1);

/// The long step being reported.
struct Phase {
    /// What runs, e.g. `schema prefill`.
    what: &'static str,
    /// What `done` and `total` count, e.g. `tokens`.
    unit: &'static str,
    total: usize,
    started: Instant,
    /// When the last NOTICE was sent and the count it showed (`None`: none yet).
    last: Option<(Instant, usize)>,
}

/// Turns one call's progress events into NOTICEs.
pub struct Reporter {
    /// `turboinfer.progress` in force at the start of the call (`None`: off).
    after: Option<Duration>,
    start: Instant,
    phase: Option<Phase>,
}

impl Reporter {
    /// A reporter for a call starting now.
    pub fn new() -> Reporter {
        Reporter {
            after: gucs::progress_after_ms().map(|ms| Duration::from_secs_f64(ms / 1000.0)),
            start: Instant::now(),
            phase: None,
        }
    }

    /// One progress event of nl2sql: a computed schema prefill is reported; any other event ends
    /// it ([`Reporter::finish`]).
    pub fn on(&mut self, p: Progress) {
        match p {
            Progress::SchemaPrefill { done, total } => {
                self.step("schema prefill", "tokens", done, total)
            }
            Progress::Linking { done, total } => self.step("schema linking", "tables", done, total),
            _ => self.finish(),
        }
    }

    /// One progress event of turboinfer_calibrate(): recording tokens, then fitting layers.
    pub fn on_calibration(&mut self, p: CalibProgress) {
        match p {
            CalibProgress::Record { done, total } => {
                self.step("calibration, recording", "tokens", done, total)
            }
            CalibProgress::Fit { done, total } => {
                self.step("calibration, fitting", "layers", done, total)
            }
        }
    }

    /// `done` of `total` `unit` of the step `what` (a new `what` ends the previous step): a
    /// NOTICE when the call is older than the setting and the last NOTICE of this step (if any)
    /// is [`INTERVAL`] old with more done.
    fn step(&mut self, what: &'static str, unit: &'static str, done: usize, total: usize) {
        let Some(after) = self.after else { return };
        if self.phase.as_ref().is_some_and(|p| p.what != what) {
            self.finish();
        }
        let now = Instant::now();
        let phase = self.phase.get_or_insert(Phase { what, unit, total, started: now, last: None });
        let due = match phase.last {
            None => now.duration_since(self.start) >= after,
            Some((at, shown)) => done > shown && now.duration_since(at) >= INTERVAL,
        };
        if due {
            phase.last = Some((now, done));
            let pct = done * 100 / total.max(1);
            notice(
                format!("turboinfer: {what} {done}/{total} {unit} ({pct} %)"),
                now.duration_since(phase.started),
            );
        }
    }

    /// Ends the current step: a last NOTICE when it reported any.
    pub fn finish(&mut self) {
        if let Some(Phase { what, unit, total, started, last: Some(_) }) = self.phase.take() {
            notice(format!("turboinfer: {what} done, {total} {unit}"), started.elapsed());
        }
    }
}

/// A NOTICE `message` with the elapsed time in its DETAIL (out of the message so that the text
/// is the same in every run).
fn notice(message: String, elapsed: Duration) {
    error_report(
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        message,
        Some(format!("{:.1} s elapsed", elapsed.as_secs_f64())),
        None,
    )
    .report(PgLogLevel::NOTICE);
}
