//! Latency histograms (HDR, microsecond resolution, 3 significant digits)
//! and their summaries as written to result files.
//!
//! Recording is a few arithmetic operations into a preallocated array, so
//! it is done per delivery on the hot path without allocating.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A latency histogram in microseconds.
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    /// An empty histogram covering 1 µs to 1 hour.
    pub fn new() -> Latency {
        // Bounds and precision are constants that hdrhistogram accepts.
        let hist =
            Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap_or_else(|_| unreachable_hist());
        Latency { hist }
    }

    /// Records one latency given in nanoseconds (negative values, from
    /// clock steps, count as zero; values above an hour as an hour).
    pub fn record_ns(&mut self, ns: i64) {
        let us = (ns.max(0) / 1000).max(1) as u64;
        self.hist.saturating_record(us);
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.hist.reset();
    }

    /// Adds another histogram's values.
    pub fn add(&mut self, other: &Latency) {
        let _ = self.hist.add(&other.hist);
    }

    /// The summary (`None` when empty).
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.hist.is_empty() {
            return None;
        }
        let ms = |us: u64| us as f64 / 1e3;
        let h = &self.hist;
        Some(LatencySummary {
            count: h.len(),
            min_ms: ms(h.min()),
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p95_ms: ms(h.value_at_quantile(0.95)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
            mean_ms: h.mean() / 1e3,
        })
    }
}

/// The fallback that `Latency::new` never reaches (the bounds are valid).
fn unreachable_hist() -> Histogram<u64> {
    // Histogram::new(1) cannot fail either; if it somehow did we would
    // rather panic at startup than measure nothing.
    #[allow(clippy::expect_used)]
    Histogram::new(1).expect("hdrhistogram accepts 1 significant digit")
}

/// Percentiles of a latency histogram, in milliseconds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Smallest.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn summarizes() {
        let mut l = Latency::new();
        assert!(l.summary().is_none());
        for ms in 1..=100 {
            l.record_ns(ms * 1_000_000);
        }
        l.record_ns(-5);
        let s = l.summary().unwrap();
        assert_eq!(s.count, 101);
        assert!((s.p50_ms - 50.0).abs() < 0.1, "{s:?}");
        assert!((s.p99_ms - 99.0).abs() < 0.1, "{s:?}");
        assert!((s.max_ms - 100.0).abs() < 0.1, "{s:?}");
        assert!(s.min_ms <= 0.002);
    }
}
