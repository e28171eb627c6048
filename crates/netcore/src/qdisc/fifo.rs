//! Droptail FIFO (Linux bfifo / pfifo): the port's buffer in bytes or
//! packets; a packet that does not fit is dropped at the tail.

use super::{Limit, Qdisc, QdiscStats};
use crate::{Nanos, Pkt};
use std::collections::VecDeque;

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
        if !self.limit.admits(self.bytes, self.q.len() as u64, size) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testutil::P;

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
