//! Per-layer counters of the sparse FFN: predicted active neurons, audited true activity and recall,
//! dense fallbacks and time.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One layer's counters (lock-free; updated by the forward pass).
#[derive(Debug, Default)]
pub struct LayerStats {
    /// Tokens that went through this layer's FFN hook.
    pub tokens: AtomicU64,
    /// Sum over tokens of neurons computed (hot + predicted).
    pub predicted_active: AtomicU64,
    /// Tokens computed densely because too many neurons were predicted active.
    pub fallbacks: AtomicU64,
    /// Audit only: sum over tokens of truly active neurons (|silu(gate)*up| > threshold).
    pub true_active: AtomicU64,
    /// Audit only: truly active neurons that were also predicted active.
    pub true_hit: AtomicU64,
    /// Audit only: tokens audited.
    pub audited: AtomicU64,
    /// Nanoseconds spent in the FFN (predictor + gate/up + down, excluding the audit's extra work).
    pub ns: AtomicU64,
    /// CPU time of the calling thread over the same spans (with one worker thread this is the FFN's
    /// compute cost, unaffected by other processes competing for the cores).
    pub cpu_ns: AtomicU64,
}

/// CPU time consumed by the calling thread, in nanoseconds (0 where unavailable).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A snapshot of one layer's counters, as ratios.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerReport {
    pub tokens: u64,
    /// 1 - computed / ffn_dim (what the predictor chose, fallbacks counted as dense).
    pub predicted_sparsity: f64,
    /// 1 - truly active / ffn_dim on audited tokens (NaN without audit).
    pub actual_sparsity: f64,
    /// Truly active neurons that were computed / truly active neurons (NaN without audit).
    pub recall: f64,
    pub fallback_rate: f64,
    /// Mean FFN time per token in microseconds.
    pub us_per_token: f64,
    /// Mean FFN CPU time of the calling thread per token in microseconds.
    pub cpu_us_per_token: f64,
}

/// The counters of every layer summed up (what one nl2sql call reports).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Tokens that went through the hook (layer 0's count; batches left dense are not counted).
    pub tokens: u64,
    /// Neurons computed / neurons, over every layer and token (fallbacks count as all active).
    pub predicted_active_ratio: f64,
    /// Dense fallbacks / token-layers.
    pub fallback_rate: f64,
    /// Wall time in the sparse FFN, all layers, in milliseconds.
    pub ffn_ms: f64,
}

impl Summary {
    /// Sums `layers` (each of `ffn_dim` neurons); zeros when nothing ran.
    pub fn of(layers: &[LayerStats], ffn_dim: usize) -> Summary {
        let sum = |f: fn(&LayerStats) -> &AtomicU64| {
            layers.iter().map(|s| f(s).load(Relaxed)).sum::<u64>()
        };
        let token_layers = sum(|s| &s.tokens);
        let ratio = |n: u64, d: f64| if d > 0.0 { n as f64 / d } else { 0.0 };
        Summary {
            tokens: layers.first().map_or(0, |s| s.tokens.load(Relaxed)),
            predicted_active_ratio: ratio(
                sum(|s| &s.predicted_active),
                token_layers as f64 * ffn_dim as f64,
            ),
            fallback_rate: ratio(sum(|s| &s.fallbacks), token_layers as f64),
            ffn_ms: sum(|s| &s.ns) as f64 / 1e6,
        }
    }
}

impl LayerStats {
    /// Adds one token's counts.
    pub fn add(&self, active: usize, fallback: bool, ns: u64, cpu_ns: u64) {
        self.cpu_ns.fetch_add(cpu_ns, Relaxed);
        self.tokens.fetch_add(1, Relaxed);
        self.predicted_active.fetch_add(active as u64, Relaxed);
        self.fallbacks.fetch_add(fallback as u64, Relaxed);
        self.ns.fetch_add(ns, Relaxed);
    }

    /// Adds one audited token's counts.
    pub fn add_audit(&self, true_active: usize, hit: usize) {
        self.audited.fetch_add(1, Relaxed);
        self.true_active.fetch_add(true_active as u64, Relaxed);
        self.true_hit.fetch_add(hit as u64, Relaxed);
    }

    /// Ratios for a layer of `ffn_dim` neurons.
    pub fn report(&self, ffn_dim: usize) -> LayerReport {
        let t = self.tokens.load(Relaxed);
        let a = self.audited.load(Relaxed);
        let f = ffn_dim as f64;
        let ratio = |num: u64, den: f64| if den > 0.0 { num as f64 / den } else { f64::NAN };
        LayerReport {
            tokens: t,
            predicted_sparsity: 1.0 - ratio(self.predicted_active.load(Relaxed), t as f64 * f),
            actual_sparsity: 1.0 - ratio(self.true_active.load(Relaxed), a as f64 * f),
            recall: ratio(self.true_hit.load(Relaxed), self.true_active.load(Relaxed) as f64),
            fallback_rate: ratio(self.fallbacks.load(Relaxed), t as f64),
            us_per_token: ratio(self.ns.load(Relaxed), t as f64) / 1000.0,
            cpu_us_per_token: ratio(self.cpu_ns.load(Relaxed), t as f64) / 1000.0,
        }
    }

    /// Zeroes every counter.
    pub fn reset(&self) {
        for c in [
            &self.tokens,
            &self.predicted_active,
            &self.fallbacks,
            &self.true_active,
            &self.true_hit,
            &self.audited,
            &self.ns,
            &self.cpu_ns,
        ] {
            c.store(0, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary sums the layers: tokens from layer 0, ratios over token-layers and neurons.
    #[test]
    fn summary_sums_layers() {
        let layers = [LayerStats::default(), LayerStats::default()];
        assert_eq!(Summary::of(&layers, 10), Summary::default());
        layers[0].add(4, false, 1_000_000, 0);
        layers[0].add(10, true, 2_000_000, 0);
        layers[1].add(6, false, 1_000_000, 0);
        layers[1].add(0, false, 0, 0);
        let s = Summary::of(&layers, 10);
        assert_eq!(s.tokens, 2);
        assert!((s.predicted_active_ratio - 20.0 / 40.0).abs() < 1e-12);
        assert!((s.fallback_rate - 0.25).abs() < 1e-12);
        assert!((s.ffn_ms - 4.0).abs() < 1e-12);
        layers.iter().for_each(LayerStats::reset);
        assert_eq!(Summary::of(&layers, 10), Summary::default());
    }
}
