//! Fixed-memory RTT statistics: exact min and mean, p99 from a log-spaced
//! histogram (1% bucket width), so a long run costs no memory per sample.

const BUCKETS: usize = 2048;
/// ln(1.01): each bucket is 1% wider than the previous one.
const LN_STEP: f64 = 0.009950330853168083;

#[derive(Clone, Debug)]
pub struct RttStats {
    pub count: u64,
    pub sum_us: f64,
    pub min_us: u64,
    hist: Vec<u32>,
}

impl Default for RttStats {
    fn default() -> Self {
        RttStats { count: 0, sum_us: 0.0, min_us: u64::MAX, hist: vec![0; BUCKETS] }
    }
}

impl RttStats {
    pub fn add(&mut self, rtt_us: u64) {
        self.count += 1;
        self.sum_us += rtt_us as f64;
        self.min_us = self.min_us.min(rtt_us);
        let b = ((rtt_us.max(1) as f64).ln() / LN_STEP) as usize;
        self.hist[b.min(BUCKETS - 1)] += 1;
    }

    /// A sample that counts towards the minimum only.
    pub fn note_min(&mut self, rtt_us: u64) {
        self.min_us = self.min_us.min(rtt_us);
    }

    pub fn mean_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_us / self.count as f64)
    }

    pub fn min(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min_us)
    }

    /// The q-quantile (0..1), as the geometric middle of its bucket.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (b, &n) in self.hist.iter().enumerate() {
            seen += n as u64;
            if seen >= rank {
                return Some(((b as f64 + 0.5) * LN_STEP).exp());
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_within_one_percent() {
        let mut s = RttStats::default();
        for v in 1..=10_000u64 {
            s.add(v * 10);
        }
        let p99 = s.quantile_us(0.99).unwrap();
        assert!((p99 / 99_000.0 - 1.0).abs() < 0.01, "p99 {p99}");
        let p50 = s.quantile_us(0.5).unwrap();
        assert!((p50 / 50_000.0 - 1.0).abs() < 0.01, "p50 {p50}");
        assert_eq!(s.min(), Some(10));
        assert!((s.mean_us().unwrap() - 50_005.0).abs() < 1e-6);
    }
}
