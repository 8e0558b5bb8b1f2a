//! Read-ahead of the weights a forward pass is about to read, for a cold page cache.
//!
//! The weights are read in place from shared mappings. After a server restart (or when the page
//! cache dropped them) the first pass faults them in as it goes: each fault reads one small
//! window around the page and the thread waits for it, so the disk sees one short request at a
//! time and the CPU idles while it reads. With read-ahead, entering stage `i` of a pass (a layer;
//! the LM head is the stage after the last layer) asks the kernel for stages `i..=i + depth`
//! (`madvise(MADV_WILLNEED)`): their reads are queued at once, in large requests, and go on while
//! layer `i` computes. Each stage is advised once per model (see [`Readahead::enter`]): a warm
//! pass pays nothing. The kernel may ignore advice; nothing here changes a result bit.
//!
//! A model larger than the memory it may use (a weight budget, `Model::set_weight_budget`) is
//! streamed instead: every pass advises every stage ahead, and gives each stage back to the
//! kernel once computed ([`Readahead::leave`]), so that what stays resident is the few stages
//! around the one computing rather than whatever the page cache's LRU happened to keep (for a
//! cyclic scan larger than the cache, LRU evicts each page just before it is needed again).

use super::weights::{Matrix, ReadFrom, Weights};
use crate::fileio::MappedFile;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Ranges closer than this are advised as one (one call instead of two; the gap is at most a
/// few norm vectors between the matrices of one layer).
const MERGE_GAP: usize = 64 << 10;

/// Which bytes each stage of a pass reads, and how far ahead it has been advised.
#[derive(Debug, Default)]
pub(super) struct Readahead {
    /// Per stage (layer 0..n, then the LM head): merged byte ranges in the model file (`gguf`)
    /// and in the packed weights file (`pack`), ascending.
    stages: Vec<Stage>,
    /// Stages `0..advised` have been advised (advice goes out in order, each stage once).
    advised: AtomicUsize,
    /// Bytes of all stages.
    bytes: usize,
}

/// The byte ranges one stage reads, merged, in the model file and in the pack.
#[derive(Debug, Default)]
struct Stage {
    gguf: Vec<Range<usize>>,
    pack: Vec<Range<usize>>,
}

/// Sorts `v` and merges ranges that overlap or lie within [`MERGE_GAP`] of each other.
fn merged(mut v: Vec<Range<usize>>) -> Vec<Range<usize>> {
    v.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(MERGE_GAP) => {
                last.end = last.end.max(r.end)
            }
            _ => out.push(r),
        }
    }
    out
}

impl Stage {
    /// The stage that multiplies with `matrices`, each where a pass reads it.
    fn of<'a>(matrices: impl IntoIterator<Item = &'a Matrix>) -> Stage {
        let (mut gguf, mut pack) = (Vec::new(), Vec::new());
        for m in matrices {
            match m.reads_from() {
                ReadFrom::Gguf(r) => gguf.push(r),
                ReadFrom::Pack(r) => pack.push(r),
            }
        }
        Stage { gguf: merged(gguf), pack: merged(pack) }
    }

    /// Bytes of all its ranges.
    fn bytes(&self) -> usize {
        self.gguf.iter().chain(&self.pack).map(|r| r.len()).sum()
    }

    /// Calls `f` on each of the stage's ranges, with the file it lies in.
    fn each(&self, gguf: &MappedFile, pack: Option<&MappedFile>, f: fn(&MappedFile, Range<usize>)) {
        for r in &self.gguf {
            f(gguf, r.clone());
        }
        if let Some(p) = pack {
            for r in &self.pack {
                f(p, r.clone());
            }
        }
    }
}

impl Readahead {
    /// The stages of `w` as a pass reads them now (packed copies where attached and used).
    /// Nothing has been advised yet.
    pub(super) fn new(w: &Weights) -> Readahead {
        let mut stages: Vec<Stage> = w.layers.iter().map(|l| Stage::of(l.matrices())).collect();
        stages.push(Stage::of([&w.output]));
        let bytes = stages.iter().map(Stage::bytes).sum();
        Readahead { stages, advised: AtomicUsize::new(0), bytes }
    }

    /// Number of stages (layers, plus the LM head).
    pub(super) fn len(&self) -> usize {
        self.stages.len()
    }

    /// Bytes of the weights a whole pass reads (every stage).
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Stages ahead that fit in `budget` bytes beside the one computing, counting stages of the
    /// mean size (at least 1; the LM head is larger than a layer, so the budget is approximate
    /// near the end of a pass).
    pub(super) fn depth_within(&self, budget: usize) -> usize {
        let mean = (self.bytes / self.stages.len().max(1)).max(1);
        (budget / mean).saturating_sub(1).max(1)
    }

    /// A pass enters stage `stage`: advises every stage up to `stage + depth` that has not been
    /// advised yet, in order (`depth` 0: nothing). With `per_pass`, entering stage 0 starts over
    /// (every pass advises every stage: for weights dropped behind, see [`Readahead::leave`]).
    /// Returns the bytes advised by this call. Safe to call from any thread; concurrent calls
    /// advise each stage once between them.
    pub(super) fn enter(
        &self,
        stage: usize,
        depth: usize,
        per_pass: bool,
        gguf: &MappedFile,
        pack: Option<&MappedFile>,
    ) -> usize {
        if depth == 0 {
            return 0;
        }
        if per_pass && stage == 0 {
            self.advised.store(0, Ordering::Relaxed);
        }
        let want = stage.saturating_add(depth).saturating_add(1).min(self.stages.len());
        let mut done = self.advised.load(Ordering::Relaxed);
        let mut bytes = 0;
        while done < want {
            // Claim stage `done`; another thread may have taken it first.
            match self.advised.compare_exchange(
                done,
                done + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    let s = &self.stages[done];
                    s.each(gguf, pack, MappedFile::will_need);
                    bytes += s.bytes();
                    done += 1;
                }
                Err(now) => done = now,
            }
        }
        bytes
    }

    /// A pass is done with stage `stage`: gives its weights back to the kernel (dropped from
    /// this process's mapping and from the page cache where no other process maps them), so
    /// that a model larger than its memory budget streams through it instead of evicting at
    /// random. The next pass reads them again (advised ahead with `per_pass`).
    pub(super) fn leave(&self, stage: usize, gguf: &MappedFile, pack: Option<&MappedFile>) {
        if let Some(s) = self.stages.get(stage) {
            s.each(gguf, pack, MappedFile::drop_behind);
        }
    }

    /// Stages advised so far.
    pub(super) fn advised(&self) -> usize {
        self.advised.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Overlapping, touching and near ranges merge; far ones stay apart; order does not matter.
    #[test]
    fn ranges_merge_within_the_gap() {
        let far = 10 * MERGE_GAP;
        assert_eq!(merged(vec![100..200, 0..50, 150..300]), vec![0..300]);
        assert_eq!(merged(vec![far..far + 1, 0..10]), vec![0..10, far..far + 1]);
        assert_eq!(merged(vec![0..10, 10 + MERGE_GAP..20 + MERGE_GAP]), vec![0..20 + MERGE_GAP]);
        assert!(merged(vec![]).is_empty());
    }
}
