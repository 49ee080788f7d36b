//! Operation latencies, recorded in an HDR histogram (nanoseconds, 3
//! significant digits) and printed in db_bench's `--histogram=1` layout:
//!
//! ```text
//! Count: 1000 Average: 2.5012  StdDev: 1.20
//! Min: 1  Median: 2.3100  Max: 45
//! Percentiles: P50: 2.31 P75: 2.80 P99: 6.10 P99.9: 20.03 P99.99: 45.06
//! ------------------------------------------------------
//! (       2,       3 ]      812  81.200%  95.100% ################
//! ```
//!
//! Times print in microseconds. The percentiles come from the HDR
//! histogram; the bucket lines use RocksDB's bucket limits (1, 2, 3, 4, 6,
//! 10, 15, 22, ... each about 1.5 times the last, cut to two significant
//! digits) so that the two tools' tables line up.

use hdrhistogram::Histogram;

/// Highest latency tracked: an hour. Longer ones are clamped.
const LATENCY_NANOS_MAX: u64 = 3_600 * 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// Latencies of one kind of operation.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> LatencyHistogram {
        let hist = Histogram::new_with_bounds(1, LATENCY_NANOS_MAX, SIGNIFICANT_DIGITS)
            .expect("valid histogram bounds");
        LatencyHistogram { hist }
    }

    /// Records one operation of `nanos`.
    pub fn record(&mut self, nanos: u64) {
        self.hist
            .saturating_record(nanos.clamp(1, LATENCY_NANOS_MAX));
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.hist.add(&other.hist);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at percentile `p` (0-100), in microseconds.
    pub fn percentile_micros(&self, p: f64) -> f64 {
        self.hist.value_at_quantile(p / 100.0) as f64 / 1000.0
    }

    /// db_bench's text for this histogram.
    pub fn report(&self) -> String {
        let n = self.hist.len();
        let us = |nanos: f64| nanos / 1000.0;
        let mut r = format!(
            "Count: {n} Average: {:.4}  StdDev: {:.2}\n",
            us(self.hist.mean()),
            us(self.hist.stdev())
        );
        let (min, max) = if n == 0 {
            (0, 0)
        } else {
            (self.hist.min() / 1000, self.hist.max() / 1000)
        };
        r.push_str(&format!(
            "Min: {min}  Median: {:.4}  Max: {max}\n",
            self.percentile_micros(50.0)
        ));
        r.push_str(&format!(
            "Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n",
            self.percentile_micros(50.0),
            self.percentile_micros(75.0),
            self.percentile_micros(99.0),
            self.percentile_micros(99.9),
            self.percentile_micros(99.99)
        ));
        r.push_str("------------------------------------------------------\n");
        if n == 0 {
            return r;
        }
        let limits = bucket_limits();
        let mut counts = vec![0u64; limits.len()];
        for v in self.hist.iter_recorded() {
            let micros = v.value_iterated_to() / 1000;
            counts[bucket_index(&limits, micros)] += v.count_at_value();
        }
        let mult = 100.0 / n as f64;
        let mut cumulative = 0;
        for (b, &count) in counts.iter().enumerate() {
            if count == 0 {
                continue;
            }
            cumulative += count;
            let left = if b == 0 { 0 } else { limits[b - 1] };
            r.push_str(&format!(
                "{} {left:>7}, {:>7} ] {count:>8} {:>7.3}% {:>7.3}% ",
                if b == 0 { '[' } else { '(' },
                limits[b],
                mult * count as f64,
                mult * cumulative as f64
            ));
            // 20 marks for 100%.
            let marks = (mult * count as f64 / 5.0 + 0.5) as usize;
            r.push_str(&"#".repeat(marks));
            r.push('\n');
        }
        r
    }
}

/// RocksDB's `HistogramBucketMapper` limits, in microseconds.
fn bucket_limits() -> Vec<u64> {
    let mut limits = vec![1u64, 2];
    let mut v = 2.0f64;
    loop {
        v *= 1.5;
        if v > u64::MAX as f64 {
            break;
        }
        let mut b = v as u64;
        let mut pow10 = 1u64;
        while b / 10 > 10 {
            b /= 10;
            pow10 *= 10;
        }
        limits.push(b * pow10);
    }
    limits
}

/// The first bucket whose limit is >= `value` (RocksDB's lower_bound).
fn bucket_index(limits: &[u64], value: u64) -> usize {
    limits.partition_point(|&l| l < value).min(limits.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_limits_are_rocksdbs() {
        let l = bucket_limits();
        assert_eq!(
            l[..20],
            [
                1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110, 170, 250, 380, 580, 870, 1300, 1900,
                2900
            ]
        );
        assert_eq!(bucket_index(&l, 0), 0);
        assert_eq!(bucket_index(&l, 1), 0);
        assert_eq!(bucket_index(&l, 5), 4);
        assert_eq!(bucket_index(&l, 6), 4);
        assert_eq!(bucket_index(&l, 7), 5);
    }

    #[test]
    fn report_layout() {
        let mut h = LatencyHistogram::new();
        for i in 1..=100u64 {
            h.record(i * 1000); // 1..100 us
        }
        let r = h.report();
        let lines: Vec<&str> = r.lines().collect();
        assert!(lines[0].starts_with("Count: 100 Average: 50.5"), "{r}");
        assert!(lines[1].starts_with("Min: 1  Median: 50."), "{r}");
        assert!(lines[2].starts_with("Percentiles: P50: 50.0"), "{r}");
        assert!(lines[2].contains(" P99.99: 100.0"), "{r}");
        assert_eq!(lines[3], "-".repeat(54));
        assert!(
            lines[4].starts_with("[       0,       1 ]        1   1.000%   1.000% "),
            "{r}"
        );
        assert!(lines.last().unwrap().contains(" 100.000% "), "{r}");
        let mut other = LatencyHistogram::new();
        other.record(5_000);
        h.merge(&other);
        assert_eq!(h.count(), 101);
        assert!(LatencyHistogram::new()
            .report()
            .starts_with("Count: 0 Average: 0.0000"));
    }
}
