//! A fixed-size latency histogram (buckets 2 % wide from 1 µs) for the load benchmarks
//! (`umd bench soak`, `umd bench fair`): constant memory however long they run.

use std::time::Duration;

const BUCKETS: usize = 1200;
const WIDTH: f64 = 1.02;

/// Latencies recorded into log-spaced buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    max: Duration,
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            max: Duration::ZERO,
        }
    }

    pub fn record(&mut self, d: Duration) {
        let us = d.as_secs_f64() * 1e6;
        let i = ((us.max(1.0).ln() / WIDTH.ln()) as usize).min(BUCKETS - 1);
        self.counts[i] += 1;
        self.max = self.max.max(d);
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `p` quantile (0–1) in milliseconds, to the bucket's upper edge (0 when empty).
    pub fn percentile_ms(&self, p: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let want = ((total as f64) * p).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return WIDTH.powi(i as i32 + 1) / 1e3;
            }
        }
        unreachable!("the histogram holds `total` samples")
    }

    /// The largest latency recorded, in milliseconds.
    pub fn max_ms(&self) -> f64 {
        self.max.as_secs_f64() * 1e3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_fall_within_one_bucket_of_the_samples() {
        let mut h = Histogram::new();
        for ms in 1..=100 {
            h.record(Duration::from_millis(ms));
        }
        let p50 = h.percentile_ms(0.5);
        let p99 = h.percentile_ms(0.99);
        assert!((50.0..=50.0 * WIDTH * WIDTH).contains(&p50), "{p50}");
        assert!((99.0..=99.0 * WIDTH * WIDTH).contains(&p99), "{p99}");
        assert_eq!(h.count(), 100);
        assert_eq!(h.max_ms(), 100.0);
        assert_eq!(Histogram::new().percentile_ms(0.5), 0.0);
    }
}
