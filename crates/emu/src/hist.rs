//! A log-linear histogram of nanosecond values (exact below 64 ns, then 32
//! buckets per power of two: within 3.1%), fixed memory, no allocation per
//! value. Used for the lateness of delivery.

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
const BUCKETS: usize = (2 * SUB + (63 - SUB_BITS as u64) * SUB) as usize;

#[derive(Clone)]
pub struct Hist {
    counts: Vec<u64>,
    pub count: u64,
    pub max: u64,
    pub sum: u128,
}

impl Default for Hist {
    fn default() -> Self {
        Hist { counts: vec![0; BUCKETS], count: 0, max: 0, sum: 0 }
    }
}

fn index(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB_BITS;
    let top = v >> shift; // in [SUB, 2 SUB)
    (2 * SUB + (shift as u64 - 1) * SUB + (top - SUB)) as usize
}

/// The middle of bucket `i`.
fn value(i: usize) -> u64 {
    let i = i as u64;
    if i < 2 * SUB {
        return i;
    }
    let shift = (i - 2 * SUB) / SUB + 1;
    let top = (i - 2 * SUB) % SUB + SUB;
    (top << shift) + (1u64 << shift) / 2
}

impl Hist {
    pub fn add(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.count += 1;
        self.max = self.max.max(v);
        self.sum += v as u128;
    }

    /// The q-quantile (0..=1); None when empty. Never above the exact max.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(value(i).min(self.max));
            }
        }
        Some(self.max)
    }

    pub fn merge(&mut self, o: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.count += o.count;
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }

    pub fn clear(&mut self) {
        if self.count > 0 {
            self.counts.iter_mut().for_each(|c| *c = 0);
        }
        self.count = 0;
        self.max = 0;
        self.sum = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..10_000_000u64).step_by(7).chain([u64::MAX / 2, u64::MAX]) {
            let i = index(v);
            assert!(i < BUCKETS);
            assert!(i >= last);
            last = i;
            let m = value(i) as f64;
            assert!((m - v as f64).abs() <= v as f64 * 0.032 + 0.5, "v {v} bucket value {m}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Hist::default();
        assert_eq!(h.quantile(0.5), None);
        for v in 1..=1000u64 {
            h.add(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap() as f64;
        let p99 = h.quantile(0.99).unwrap() as f64;
        assert!((p50 - 500_000.0).abs() < 16_000.0, "{p50}");
        assert!((p99 - 990_000.0).abs() < 32_000.0, "{p99}");
        assert_eq!(h.quantile(1.0), Some(1_000_000));
        let mut g = Hist::default();
        g.add(5);
        g.merge(&h);
        assert_eq!(g.count, 1001);
        h.clear();
        assert_eq!(h.quantile(0.5), None);
    }
}
