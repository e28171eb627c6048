//! Queue disciplines. Each one is a `Qdisc` over any packet type that
//! implements [`Pkt`]; `now` is passed in so the same code runs under the
//! simulator's virtual clock and the emulator's real one.

use crate::{Nanos, Pkt};
use std::collections::VecDeque;

/// Counters every discipline keeps; they feed the `queue` table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    pub enqueued: u64,
    pub dropped: u64,
    pub ecn_marked: u64,
}

pub trait Qdisc<P: Pkt> {
    /// Offer a packet. `Err(p)` gives the packet back when it is dropped.
    fn enqueue(&mut self, p: P, now: Nanos) -> Result<(), P>;
    /// Next packet to transmit, if any.
    fn dequeue(&mut self, now: Nanos) -> Option<P>;
    fn backlog_bytes(&self) -> u64;
    fn backlog_pkts(&self) -> u64;
    fn stats(&self) -> QdiscStats;
}

/// The size limit of a queue: in bytes or in packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Bytes(u64),
    Packets(u64),
}

/// Droptail FIFO (Linux bfifo / pfifo).
pub struct Fifo<P> {
    q: VecDeque<P>,
    limit: Limit,
    bytes: u64,
    stats: QdiscStats,
}

impl<P: Pkt> Fifo<P> {
    pub fn new(limit: Limit) -> Fifo<P> {
        Fifo { q: VecDeque::with_capacity(1024), limit, bytes: 0, stats: QdiscStats::default() }
    }
}

impl<P: Pkt> Qdisc<P> for Fifo<P> {
    fn enqueue(&mut self, p: P, _now: Nanos) -> Result<(), P> {
        let size = p.wire_bytes() as u64;
        let fits = match self.limit {
            Limit::Bytes(b) => self.bytes + size <= b,
            Limit::Packets(n) => (self.q.len() as u64) < n,
        };
        if !fits {
            self.stats.dropped += 1;
            return Err(p);
        }
        self.bytes += size;
        self.stats.enqueued += 1;
        self.q.push_back(p);
        Ok(())
    }

    fn dequeue(&mut self, _now: Nanos) -> Option<P> {
        let p = self.q.pop_front()?;
        self.bytes -= p.wire_bytes() as u64;
        Some(p)
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn backlog_pkts(&self) -> u64 {
        self.q.len() as u64
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

/// Names accepted by [`build`].
pub const QDISCS: &[&str] = &["fifo"];

/// Build a discipline by its study-file name.
pub fn build<P: Pkt + 'static>(name: &str, limit: Limit) -> Option<Box<dyn Qdisc<P>>> {
    match name {
        "fifo" => Some(Box::new(Fifo::new(limit))),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    pub struct P(pub u32, pub u64);
    impl Pkt for P {
        fn wire_bytes(&self) -> u32 {
            self.0
        }
        fn flow_key(&self) -> u64 {
            self.1
        }
        fn ect(&self) -> bool {
            false
        }
        fn mark_ce(&mut self) {}
    }

    #[test]
    fn fifo_packet_limit_drops_tail_and_keeps_order() {
        let mut q = Fifo::new(Limit::Packets(2));
        assert!(q.enqueue(P(100, 1), 0).is_ok());
        assert!(q.enqueue(P(200, 2), 0).is_ok());
        assert_eq!(q.enqueue(P(300, 3), 0), Err(P(300, 3)));
        assert_eq!(q.backlog_bytes(), 300);
        assert_eq!(q.dequeue(0), Some(P(100, 1)));
        assert_eq!(q.dequeue(0), Some(P(200, 2)));
        assert_eq!(q.dequeue(0), None);
        assert_eq!(q.stats(), QdiscStats { enqueued: 2, dropped: 1, ecn_marked: 0 });
    }

    #[test]
    fn fifo_byte_limit() {
        let mut q = Fifo::new(Limit::Bytes(1500));
        assert!(q.enqueue(P(1000, 1), 0).is_ok());
        assert!(q.enqueue(P(600, 1), 0).is_err());
        assert!(q.enqueue(P(500, 1), 0).is_ok());
        assert_eq!(q.backlog_pkts(), 2);
        assert_eq!(q.backlog_bytes(), 1500);
    }
}
