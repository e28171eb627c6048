//! A switch port with two queues, as in the netdev 2.2 experiments where
//! DCTCP (and NV) had a queue of their own and shared the port 50/50 with
//! everything else.
//!
//! - A packet's class is `Pkt::class()`: 0 goes to queue 0, anything else to
//!   queue 1 (flows choose with `queue_class` in the study file).
//! - Each queue is a FIFO with its own buffer (default: the port's buffer)
//!   and, optionally, DCTCP's step marking at `ecn_threshold` (see
//!   `red.rs`: ECT packets arriving to at least that backlog are CE-marked,
//!   others dropped there).
//! - The queues share the port by deficit round robin in bytes: each turn a
//!   queue may send while its deficit is positive, then gets
//!   `weight × quantum` more; a queue found empty is skipped (and starts its
//!   next busy period with one fresh quantum, no banked credit). Work
//!   conserving: an idle queue's share goes to the other.
//!
//! Defaults: weights 1 and 1 (50/50), quantum 1514 B (the spec layer passes
//! mss + 52), no marking.

use super::red::step_mark;
use super::{Fifo, Limit, Port, Qdisc, QdiscStats};
use crate::{Nanos, Pkt};
use serde::Deserialize;

#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct ClassParams {
    /// Share of the port under contention, relative to the other class.
    pub weight: u32,
    /// This queue's buffer; both None = the port's buffer.
    pub buffer_bytes: Option<u64>,
    pub buffer_pkts: Option<u64>,
    /// Step-mark ECT packets arriving to at least this backlog.
    pub ecn_threshold_bytes: Option<u64>,
}

impl Default for ClassParams {
    fn default() -> Self {
        ClassParams { weight: 1, buffer_bytes: None, buffer_pkts: None, ecn_threshold_bytes: None }
    }
}

#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TwoClassParams {
    pub quantum_bytes: u64,
    pub classes: [ClassParams; 2],
}

impl Default for TwoClassParams {
    fn default() -> Self {
        TwoClassParams { quantum_bytes: 1514, classes: [ClassParams::default(), ClassParams::default()] }
    }
}

impl TwoClassParams {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.quantum_bytes == 0 {
            return Err("twoclass: quantum_bytes must be positive".into());
        }
        for (i, c) in self.classes.iter().enumerate() {
            if c.weight == 0 {
                return Err(format!("twoclass: classes[{i}].weight must be positive"));
            }
            if c.buffer_bytes.is_some() && c.buffer_pkts.is_some() {
                return Err(format!("twoclass: classes[{i}]: at most one of buffer_bytes / buffer_pkts"));
            }
            if c.buffer_bytes == Some(0) || c.buffer_pkts == Some(0) || c.ecn_threshold_bytes == Some(0) {
                return Err(format!("twoclass: classes[{i}]: buffer and ecn_threshold_bytes must be positive"));
            }
        }
        Ok(())
    }
}

struct Class<P> {
    fifo: Fifo<P>,
    k: Option<u64>,
    quantum: i64,
    deficit: i64,
}

pub struct TwoClass<P> {
    c: [Class<P>; 2],
    /// The queue whose turn it is.
    cur: usize,
    /// Marks and the markers' drops; the FIFOs count the rest.
    stats: QdiscStats,
}

impl<P: Pkt> TwoClass<P> {
    pub fn new(p: &TwoClassParams, port: &Port) -> TwoClass<P> {
        let class = |c: &ClassParams| {
            let quantum = c.weight as i64 * p.quantum_bytes as i64;
            Class {
                fifo: Fifo::new(match (c.buffer_bytes, c.buffer_pkts) {
                    (Some(b), _) => Limit::Bytes(b),
                    (None, Some(n)) => Limit::Packets(n),
                    (None, None) => port.limit,
                }),
                k: c.ecn_threshold_bytes,
                quantum,
                deficit: quantum,
            }
        };
        TwoClass { c: [class(&p.classes[0]), class(&p.classes[1])], cur: 0, stats: QdiscStats::default() }
    }

    /// Backlog of one queue, in bytes.
    pub fn class_backlog(&self, class: usize) -> u64 {
        self.c[class].fifo.backlog_bytes()
    }
}

impl<P: Pkt> Qdisc<P> for TwoClass<P> {
    fn enqueue(&mut self, p: P, now: Nanos) -> Result<(), P> {
        let c = &mut self.c[(p.class() != 0) as usize];
        let p = match c.k {
            Some(k) => step_mark(p, c.fifo.backlog_bytes(), k, &mut self.stats)?,
            None => p,
        };
        c.fifo.enqueue(p, now)
    }

    fn dequeue(&mut self, now: Nanos) -> Option<P> {
        if self.backlog_pkts() == 0 {
            return None;
        }
        loop {
            let c = &mut self.c[self.cur];
            if c.fifo.backlog_pkts() == 0 {
                c.deficit = c.quantum;
                self.cur ^= 1;
                continue;
            }
            if c.deficit <= 0 {
                c.deficit += c.quantum;
                self.cur ^= 1;
                continue;
            }
            let p = c.fifo.dequeue(now).expect("non-empty");
            c.deficit -= p.wire_bytes() as i64;
            return Some(p);
        }
    }

    fn backlog_bytes(&self) -> u64 {
        self.c[0].fifo.backlog_bytes() + self.c[1].fifo.backlog_bytes()
    }

    fn backlog_pkts(&self) -> u64 {
        self.c[0].fifo.backlog_pkts() + self.c[1].fifo.backlog_pkts()
    }

    fn stats(&self) -> QdiscStats {
        self.stats + self.c[0].fifo.stats() + self.c[1].fifo.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testutil::{cbr, drive, port, E};

    const RATE: u64 = 100_000_000;

    fn two(w0: u32, w1: u32) -> TwoClass<E> {
        let mut p = TwoClassParams { quantum_bytes: 1500, ..TwoClassParams::default() };
        p.classes[0].weight = w0;
        p.classes[1].weight = w1;
        TwoClass::new(&p, &port(RATE, Limit::Packets(1000)))
    }

    /// Each class offered `load0`/`load1` bit/s with 1500 B / 300 B packets.
    fn shares(q: &mut TwoClass<E>, load0: u64, load1: u64) -> (f64, f64) {
        let mut arr = Vec::new();
        for (class, size, load) in [(0u8, 1500u32, load0), (1, 300, load1)] {
            if load == 0 {
                continue;
            }
            arr.extend(cbr(E::new(size, class as u64).class(class), load, 3_000_000_000));
        }
        arr.sort_by_key(|a| a.0);
        let out = drive(q, RATE, &arr, 3_000_000_000);
        let bits = |c: u8| {
            out.iter()
                .filter(|(t, p)| *t >= 1_000_000_000 && p.class == c)
                .map(|(_, p)| p.size as f64 * 8.0)
                .sum::<f64>()
                / 2.0
        };
        (bits(0) / RATE as f64, bits(1) / RATE as f64)
    }

    #[test]
    fn fifty_fifty_when_both_backlogged() {
        let (a, b) = shares(&mut two(1, 1), 80_000_000, 80_000_000);
        assert!((a - 0.5).abs() < 0.01 && (b - 0.5).abs() < 0.01, "{a} {b}");
    }

    #[test]
    fn weights_split_three_to_one() {
        let (a, b) = shares(&mut two(3, 1), 90_000_000, 90_000_000);
        assert!((a - 0.75).abs() < 0.01 && (b - 0.25).abs() < 0.01, "{a} {b}");
    }

    #[test]
    fn work_conserving_when_one_class_is_idle() {
        let (a, b) = shares(&mut two(1, 1), 120_000_000, 0);
        assert!(a > 0.99 && b == 0.0, "{a} {b}");
        let (a, b) = shares(&mut two(1, 1), 0, 120_000_000);
        assert!(b > 0.99 && a == 0.0, "{a} {b}");
        // A light class takes what it needs and leaves the rest.
        let (a, b) = shares(&mut two(1, 1), 120_000_000, 20_000_000);
        assert!((b - 0.2).abs() < 0.01 && a > 0.79, "{a} {b}");
    }

    #[test]
    fn per_class_buffers_and_marking() {
        let mut p = TwoClassParams::default();
        p.classes[0].buffer_pkts = Some(2);
        p.classes[1].ecn_threshold_bytes = Some(3000);
        let mut q: TwoClass<E> = TwoClass::new(&p, &port(RATE, Limit::Packets(1000)));
        for _ in 0..3 {
            let _ = q.enqueue(E::new(1500, 1), 0);
        }
        assert_eq!(q.stats().dropped, 1, "class 0 holds two packets");
        for _ in 0..4 {
            assert!(q.enqueue(E::new(1500, 2).ect().class(1), 0).is_ok());
        }
        assert!(q.enqueue(E::new(1500, 3).class(1), 0).is_err(), "non-ECT above K is dropped");
        assert_eq!(q.stats().ecn_marked, 2);
        assert_eq!(q.class_backlog(1), 6000);
        assert_eq!(q.backlog_pkts(), 6);
    }
}
