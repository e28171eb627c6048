//! RED, after Linux `sch_red` / `include/net/red.h` (Floyd & Jacobson 1993,
//! RFC 2309; RFC 7567 for ECN), and the step marker DCTCP needs.
//!
//! RED, per arriving packet:
//! - the average queue `qavg` (bytes) is an EWMA of the backlog seen by
//!   arriving packets, `qavg += W·(backlog − qavg)`. After an idle period the
//!   average instead decays as if `m` small packets had arrived to an empty
//!   queue, `qavg *= (1 − W)^m`, `m = idle time / (avpkt / link rate)`.
//! - below `min` nothing happens; at or above `max` every packet is marked
//!   ("hard mark"); in between the probability is
//!   `p_b = max_p · (qavg − min) / (max − min)`, spaced by Linux's count
//!   method: after each mark a uniform `R` is drawn and the next mark comes
//!   at the first packet where `count · p_b ≥ R`, so marks are about
//!   `1/(2 p_b)` packets apart and never bunch.
//! - a mark is a CE mark when `ecn` is on and the packet is ECN-capable,
//!   else a drop. Above `max` ECT packets are marked too, unless `harddrop`
//!   (Linux's `harddrop` flag) makes them drops.
//! - then the hard limit (the port's buffer) tail-drops.
//!
//! Defaults (tc-red(8)): `max` = limit/4, `min` = max/3, `max_p` = 2%,
//! `avpkt` = 1000 B, `burst` = (2·min + max)/(3·avpkt) packets; the EWMA
//! weight `W` is the largest power of 1/2 that lets `burst` back-to-back
//! packets into an empty queue without the average passing `min` (tc's
//! `tc_red_eval_ewma`).
//!
//! Differences from Linux, on purpose:
//! - the idle decay uses the exact `(1 − W)^m` and the port's real rate,
//!   where Linux looks the exponent up in a 256-entry table tc built from
//!   the `bandwidth` option (default 10 Mbit/s);
//! - `gentle` (Floyd 2000, as in ns-2) is offered though sch_red lacks it:
//!   between `max` and `2·max` the probability rises from `max_p` to 1
//!   instead of jumping to 1. Off by default;
//! - adaptive RED and `nodrop` are not modelled.
//!
//! [`StepEcn`] marks every ECT packet that arrives to a backlog of at least
//! `threshold` bytes (the instantaneous queue, as the DCTCP paper's switch
//! does); a non-ECT packet there is dropped, as Linux RED configured for
//! DCTCP (`min = max = K`, probability 1, `ecn`) drops it. Linux recipes for
//! that configuration still average the queue with W = 1/2; here the queue
//! is not averaged at all.

use super::{Fifo, Port, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::{Nanos, Pkt, NS_PER_SEC};
use serde::Deserialize;

/// Bytes per packet when a packet limit must be read as bytes.
const MTU_GUESS: u64 = 1500;

#[derive(Deserialize, Clone, Debug, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RedParams {
    /// Average backlog where early marking starts (default max/3).
    pub min_bytes: Option<u64>,
    /// Average backlog where every packet is marked (default limit/4).
    pub max_bytes: Option<u64>,
    /// Marking probability reached at `max` (0 < max_p ≤ 1).
    pub max_p: f64,
    /// Burst, in packets of `avpkt`, the average lets through; sets W.
    pub burst_pkts: Option<u64>,
    /// Typical packet size: sizes the burst and the idle decay.
    pub avpkt_bytes: u64,
    pub ecn: bool,
    pub harddrop: bool,
    pub gentle: bool,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams {
            min_bytes: None,
            max_bytes: None,
            max_p: 0.02,
            burst_pkts: None,
            avpkt_bytes: 1000,
            ecn: false,
            harddrop: false,
            gentle: false,
        }
    }
}

/// RED's parameters with every default applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RedResolved {
    pub min: u64,
    pub max: u64,
    pub burst: u64,
    pub w: f64,
}

impl RedParams {
    pub(crate) fn resolve(&self, port: &Port) -> Result<RedResolved, String> {
        let max = self.max_bytes.unwrap_or(port.limit.as_bytes(MTU_GUESS) / 4);
        let min = self.min_bytes.unwrap_or(max / 3);
        if self.avpkt_bytes == 0 {
            return Err("red: avpkt_bytes must be positive".into());
        }
        if max == 0 {
            return Err("red: max_bytes must be positive".into());
        }
        if min > max {
            return Err(format!("red: min_bytes ({min}) must not exceed max_bytes ({max})"));
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return Err(format!("red: max_p must be in (0, 1] (got {})", self.max_p));
        }
        let burst = self.burst_pkts.unwrap_or((2 * min + max) / (3 * self.avpkt_bytes));
        let w = ewma_weight(min, burst, self.avpkt_bytes).ok_or_else(|| {
            format!("red: burst_pkts {burst} is too small for min_bytes {min}: at least {}", 1 + min / self.avpkt_bytes)
        })?;
        Ok(RedResolved { min, max, burst, w })
    }

    pub(crate) fn check(&self, port: &Port) -> Result<(), String> {
        self.resolve(port).map(|_| ())
    }
}

/// tc's choice of the EWMA weight: the largest W = 2^-k (k = 1..31) for
/// which `burst` packets arriving together to an empty queue keep the
/// average below `min`, i.e. `burst + 1 − min/avpkt ≤ (1 − (1 − W)^burst)/W`.
pub(crate) fn ewma_weight(min: u64, burst: u64, avpkt: u64) -> Option<f64> {
    let a = burst as f64 + 1.0 - min as f64 / avpkt as f64;
    if a < 1.0 {
        return None;
    }
    let mut w = 0.5f64;
    for _ in 1..32 {
        if a <= (1.0 - (1.0 - w).powf(burst as f64)) / w {
            return Some(w);
        }
        w /= 2.0;
    }
    None
}

/// What RED decided for one arriving packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    /// Early, probabilistic mark.
    Prob,
    /// Average above max (or 2·max with gentle).
    Hard,
}

pub struct Red<P> {
    /// The hard limit behind the marker (Linux: the child bfifo).
    fifo: Fifo<P>,
    min: f64,
    max: f64,
    max_p: f64,
    w: f64,
    ecn: bool,
    harddrop: bool,
    gentle: bool,
    /// Serialisation time of one `avpkt` packet: the unit of idle decay.
    pkt_ns: f64,
    qavg: f64,
    /// Packets since the last mark; -1 outside the marking region (Linux).
    qcount: i64,
    /// The uniform draw the count is compared against.
    qr: f64,
    idle_since: Option<Nanos>,
    rng: Rng,
    /// Early drops and marks; the FIFO counts the rest.
    stats: QdiscStats,
}

impl<P: Pkt> Red<P> {
    pub fn new(p: &RedParams, port: &Port) -> Red<P> {
        let r = p.resolve(port).expect("red parameters checked");
        Red {
            fifo: Fifo::new(port.limit),
            min: r.min as f64,
            max: r.max as f64,
            max_p: p.max_p,
            w: r.w,
            ecn: p.ecn,
            harddrop: p.harddrop,
            gentle: p.gentle,
            pkt_ns: p.avpkt_bytes as f64 * 8.0 * NS_PER_SEC as f64 / port.rate_bps as f64,
            qavg: 0.0,
            qcount: -1,
            qr: 0.0,
            idle_since: None,
            rng: Rng::derive(port.seed, 0x52ED),
            stats: QdiscStats::default(),
        }
    }

    /// The current average queue in bytes.
    pub fn qavg(&self) -> f64 {
        self.qavg
    }

    /// Update the average for an arrival at `now` and decide.
    fn decide(&mut self, now: Nanos) -> Verdict {
        match self.idle_since.take() {
            Some(t0) => {
                // As if m tiny packets had found the queue empty meanwhile.
                let m = now.saturating_sub(t0) as f64 / self.pkt_ns;
                self.qavg *= (1.0 - self.w).powf(m);
            }
            None => self.qavg += self.w * (self.fifo.backlog_bytes() as f64 - self.qavg),
        }
        let top = if self.gentle { 2.0 * self.max } else { self.max };
        if self.qavg < self.min {
            self.qcount = -1;
            return Verdict::Pass;
        }
        if self.qavg >= top {
            self.qcount = -1;
            return Verdict::Hard;
        }
        let p_b = if self.qavg < self.max {
            self.max_p * (self.qavg - self.min) / (self.max - self.min)
        } else {
            self.max_p + (1.0 - self.max_p) * (self.qavg - self.max) / self.max
        };
        self.qcount += 1;
        if self.qcount == 0 {
            // Just entered the region: draw, do not mark yet.
            self.qr = self.rng.next_f64();
            return Verdict::Pass;
        }
        if p_b * self.qcount as f64 >= self.qr {
            self.qcount = 0;
            self.qr = self.rng.next_f64();
            return Verdict::Prob;
        }
        Verdict::Pass
    }
}

impl<P: Pkt> Qdisc<P> for Red<P> {
    fn enqueue(&mut self, mut p: P, now: Nanos) -> Result<(), P> {
        let v = self.decide(now);
        if v != Verdict::Pass {
            // A mark is CE on an ECN-capable packet, else a drop; harddrop
            // makes marks above max drops regardless.
            if self.ecn && p.ect() && !(v == Verdict::Hard && self.harddrop) {
                p.mark_ce();
                self.stats.ecn_marked += 1;
            } else {
                self.stats.dropped += 1;
                return Err(p);
            }
        }
        // The hard limit may still drop a marked packet.
        self.fifo.enqueue(p, now)
    }

    fn dequeue(&mut self, now: Nanos) -> Option<P> {
        let p = self.fifo.dequeue(now);
        if p.is_none() && self.idle_since.is_none() {
            self.idle_since = Some(now);
        }
        p
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.backlog_bytes()
    }

    fn backlog_pkts(&self) -> u64 {
        self.fifo.backlog_pkts()
    }

    fn stats(&self) -> QdiscStats {
        self.stats + self.fifo.stats()
    }
}

/// DCTCP-style marking threshold.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct StepEcnParams {
    /// K: mark when a packet arrives to at least this backlog.
    pub threshold_bytes: u64,
}

impl Default for StepEcnParams {
    fn default() -> Self {
        // The DCTCP paper's K = 20 packets (1 Gbit/s); the spec layer
        // replaces it with BDP/7 by default.
        StepEcnParams { threshold_bytes: 20 * MTU_GUESS }
    }
}

impl StepEcnParams {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.threshold_bytes == 0 {
            return Err("step_ecn: threshold_bytes must be positive".into());
        }
        Ok(())
    }
}

/// The step marker: `Ok` with the packet CE-marked when the backlog is at
/// or above `k`, `Err` (drop) when it is there and not ECN-capable.
#[inline]
pub(crate) fn step_mark<P: Pkt>(mut p: P, backlog_bytes: u64, k: u64, stats: &mut QdiscStats) -> Result<P, P> {
    if backlog_bytes < k {
        return Ok(p);
    }
    if p.ect() {
        p.mark_ce();
        stats.ecn_marked += 1;
        Ok(p)
    } else {
        stats.dropped += 1;
        Err(p)
    }
}

/// A FIFO with the step marker in front.
pub struct StepEcn<P> {
    fifo: Fifo<P>,
    k: u64,
    /// Marks and the marker's drops; the FIFO counts the rest.
    stats: QdiscStats,
}

impl<P: Pkt> StepEcn<P> {
    pub fn new(p: &StepEcnParams, port: &Port) -> StepEcn<P> {
        StepEcn { fifo: Fifo::new(port.limit), k: p.threshold_bytes, stats: QdiscStats::default() }
    }
}

impl<P: Pkt> Qdisc<P> for StepEcn<P> {
    fn enqueue(&mut self, p: P, now: Nanos) -> Result<(), P> {
        let p = step_mark(p, self.fifo.backlog_bytes(), self.k, &mut self.stats)?;
        self.fifo.enqueue(p, now)
    }

    fn dequeue(&mut self, now: Nanos) -> Option<P> {
        self.fifo.dequeue(now)
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.backlog_bytes()
    }

    fn backlog_pkts(&self) -> u64 {
        self.fifo.backlog_pkts()
    }

    fn stats(&self) -> QdiscStats {
        self.stats + self.fifo.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testutil::{port, E};
    use crate::qdisc::Limit;

    const MBIT100: u64 = 100_000_000;

    /// Hold the instantaneous queue at `level` bytes (dequeue whenever it is
    /// above), offer `n` packets, and return the fractions (dropped, marked).
    fn fractions(q: &mut Red<E>, level: u64, n: usize, ect: bool) -> (f64, f64) {
        let before = q.stats();
        let mut marked = 0u64;
        let mut t = 0;
        for i in 0..n {
            t += 10_000;
            let p = if ect { E::new(1000, i as u64).ect() } else { E::new(1000, i as u64) };
            let _ = q.enqueue(p, t);
            while q.backlog_bytes() > level {
                let p = q.dequeue(t).unwrap();
                marked += p.ce as u64;
            }
        }
        let s = q.stats();
        ((s.dropped - before.dropped) as f64 / n as f64, marked as f64 / n as f64)
    }

    fn red(ecn: bool) -> Red<E> {
        let p = RedParams { min_bytes: Some(30_000), max_bytes: Some(90_000), max_p: 0.1, ecn, ..RedParams::default() };
        Red::new(&p, &port(MBIT100, Limit::Bytes(1_000_000)))
    }

    #[test]
    fn tc_defaults_and_weight() {
        // tc-red(8): max = limit/4, min = max/3, burst = (2 min + max)/(3 avpkt).
        let r = RedParams::default().resolve(&port(MBIT100, Limit::Bytes(400_000))).unwrap();
        assert_eq!((r.min, r.max), (33_333, 100_000));
        assert_eq!(r.burst, (2 * 33_333 + 100_000) / 3000);
        // The tc-red(8) example: min 30000, avpkt 1000, burst 55: a = 55 + 1 - 30
        // = 26; (1 - (1 - W)^55)/W is 16 at W = 1/16 and 26.4 at W = 1/32.
        assert_eq!(ewma_weight(30_000, 55, 1000), Some(1.0 / 32.0));
        // A burst shorter than min/avpkt cannot be absorbed.
        assert_eq!(ewma_weight(30_000, 20, 1000), None);
    }

    #[test]
    fn probability_rises_between_min_and_max() {
        // p_b = 0.1 (qavg - min)/(max - min); with Linux's spacing the mark
        // rate is 1 / E[ceil(R/p_b)] ~ 2 p_b / (1 + p_b).
        let mut last = 0.0;
        for (level, p_b) in [(20_000u64, 0.0), (45_000, 0.025), (60_000, 0.05), (75_000, 0.075)] {
            let mut q = red(false);
            let _ = fractions(&mut q, level, 20_000, false); // let the average settle
            let (drop, mark) = fractions(&mut q, level, 100_000, false);
            assert_eq!(mark, 0.0);
            let want = 2.0 * p_b / (1.0 + p_b);
            assert!((drop - want).abs() <= 0.15 * want + 1e-9, "level {level}: drop rate {drop}, want {want}");
            assert!(drop >= last, "level {level}: {drop} < {last}");
            last = drop;
        }
        // Above max every packet is dropped.
        let mut q = red(false);
        let _ = fractions(&mut q, 95_000, 20_000, false);
        assert!(q.qavg() >= 90_000.0);
        assert_eq!(q.enqueue(E::new(1000, 1), 1), Err(E::new(1000, 1)));
    }

    #[test]
    fn ecn_marks_ect_and_drops_the_rest() {
        let mut q = red(true);
        let _ = fractions(&mut q, 60_000, 20_000, true);
        let (drop, mark) = fractions(&mut q, 60_000, 100_000, true);
        assert_eq!(drop, 0.0, "ECT packets are marked, not dropped");
        let want = 2.0 * 0.05 / 1.05;
        assert!((mark - want).abs() < 0.15 * want, "mark rate {mark}, want {want}");
        assert!(q.stats().ecn_marked > 0);
        // The same queue drops non-ECT packets at the same rate.
        let (drop, mark) = fractions(&mut q, 60_000, 100_000, false);
        assert!(mark < 1e-3, "only ECT packets still queued from before are marked");
        assert!((drop - want).abs() < 0.15 * want, "drop rate {drop}");
        // Above max: ECT marked (Linux without harddrop), non-ECT dropped.
        let _ = fractions(&mut q, 95_000, 20_000, true);
        let (drop, mark) = fractions(&mut q, 95_000, 1_000, true);
        assert_eq!(drop, 0.0);
        assert!(mark > 0.99);
        let (drop, _) = fractions(&mut q, 95_000, 1_000, false);
        assert_eq!(drop, 1.0);
    }

    #[test]
    fn harddrop_drops_ect_above_max() {
        let p = RedParams {
            min_bytes: Some(30_000),
            max_bytes: Some(90_000),
            ecn: true,
            harddrop: true,
            ..RedParams::default()
        };
        let mut q: Red<E> = Red::new(&p, &port(MBIT100, Limit::Bytes(1_000_000)));
        let _ = fractions(&mut q, 95_000, 20_000, true);
        let (drop, _) = fractions(&mut q, 95_000, 1_000, true);
        assert_eq!(drop, 1.0);
    }

    #[test]
    fn gentle_ramps_to_one_between_max_and_twice_max() {
        let p = RedParams {
            min_bytes: Some(30_000),
            max_bytes: Some(90_000),
            max_p: 0.1,
            gentle: true,
            ..RedParams::default()
        };
        let mut q: Red<E> = Red::new(&p, &port(MBIT100, Limit::Bytes(1_000_000)));
        let _ = fractions(&mut q, 135_000, 20_000, false);
        let (drop, _) = fractions(&mut q, 135_000, 50_000, false);
        // p_b = 0.1 + 0.9 * 0.5 = 0.55 -> rate ~ 2 p_b/(1+p_b) = 0.71 (the
        // queue then fills less, so the average sits a little lower).
        assert!((0.5..0.8).contains(&drop), "gentle drop rate {drop}");
    }

    #[test]
    fn average_decays_over_idle_time() {
        let mut q = red(false);
        let _ = fractions(&mut q, 60_000, 20_000, false);
        while q.dequeue(1_000_000_000).is_some() {}
        assert!(q.dequeue(1_000_000_000).is_none()); // idle from t = 1 s
        let before = q.qavg();
        // 10 ms idle at 100 Mbit/s = 125 avpkt times; W = 2^-k.
        let _ = q.enqueue(E::new(1000, 1), 1_010_000_000);
        let expect = before * (1.0 - q.w).powf(125.0);
        assert!((q.qavg() - expect).abs() < 1.0, "{} vs {}", q.qavg(), expect);
        assert!(q.qavg() < before);
    }

    #[test]
    fn hard_limit_tail_drops() {
        let p = RedParams { min_bytes: Some(30_000), max_bytes: Some(90_000), ..RedParams::default() };
        let mut q: Red<E> = Red::new(&p, &port(MBIT100, Limit::Packets(3)));
        for i in 0..3 {
            assert!(q.enqueue(E::new(1000, i), 0).is_ok());
        }
        assert!(q.enqueue(E::new(1000, 9), 0).is_err());
        assert_eq!(q.stats().dropped, 1);
    }

    #[test]
    fn step_marks_at_threshold_and_drops_non_ect() {
        let mut q: StepEcn<E> =
            StepEcn::new(&StepEcnParams { threshold_bytes: 3000 }, &port(MBIT100, Limit::Packets(100)));
        assert!(q.enqueue(E::new(1500, 1).ect(), 0).is_ok()); // backlog 0
        assert!(q.enqueue(E::new(1500, 1).ect(), 0).is_ok()); // 1500
        assert!(q.enqueue(E::new(1500, 1).ect(), 0).is_ok()); // 3000: marked
        assert!(q.enqueue(E::new(1500, 2), 0).is_err()); // non-ECT above K
        let ce: Vec<bool> = std::iter::from_fn(|| q.dequeue(0)).map(|p| p.ce).collect();
        assert_eq!(ce, vec![false, false, true]);
        assert_eq!(q.stats(), QdiscStats { enqueued: 3, dropped: 1, ecn_marked: 1 });
        // Below K non-ECT passes.
        assert!(q.enqueue(E::new(1500, 2), 0).is_ok());
    }
}
