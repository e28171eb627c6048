//! Per-flow fair queueing, after Linux `sch_fq` without its pacing.
//!
//! - One queue per flow, found by exact flow key (Linux keys by socket, so
//!   flows never share a queue, unlike fq_codel's hash buckets).
//! - Deficit round robin in bytes, "credit" in sch_fq: a new flow starts with
//!   `initial_quantum` (10 MTU) so it can send a first burst; each time a
//!   flow runs out of credit it gets `quantum` (2 MTU) more and goes to the
//!   back of the old list. Flows that become active are put on the new list,
//!   served before the old list; a flow idle for longer than
//!   `refill_delay` (40 ms) comes back with at least one quantum of credit.
//!   An empty new flow passes through the old list once before leaving, so
//!   new flows cannot starve old ones.
//! - Limits: `flow_limit` packets per flow (100) and the port's buffer
//!   (sch_fq: 10000 packets; the spec layer uses it when no buffer is
//!   given): an arriving packet over either is dropped.
//!
//! Not modelled: pacing (the simulator paces in TCP, `[tcp] pacing`), the
//! priority band for control packets, garbage collection of idle flows
//! (flow state lives for the whole run), and `orphan_mask`.

use super::{Limit, Port, Qdisc, QdiscStats};
use crate::{Nanos, Pkt};
use serde::Deserialize;
use std::collections::{HashMap, VecDeque};

#[derive(Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct FqParams {
    pub flow_limit_pkts: u64,
    pub quantum_bytes: u64,
    pub initial_quantum_bytes: u64,
    pub refill_delay_ns: u64,
}

impl Default for FqParams {
    fn default() -> Self {
        // sch_fq: 2 and 10 times psched_mtu (1514 on Ethernet).
        FqParams {
            flow_limit_pkts: 100,
            quantum_bytes: 3028,
            initial_quantum_bytes: 15140,
            refill_delay_ns: 40_000_000,
        }
    }
}

impl FqParams {
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.flow_limit_pkts == 0 {
            return Err("fq: flow_limit_pkts must be positive".into());
        }
        if self.quantum_bytes == 0 {
            return Err("fq: quantum_bytes must be positive".into());
        }
        Ok(())
    }
}

struct Flow<P> {
    q: VecDeque<P>,
    credit: i64,
    /// When it last became empty (or was created).
    age: Nanos,
    /// On neither list.
    detached: bool,
}

pub struct Fq<P> {
    index: HashMap<u64, u32>,
    flows: Vec<Flow<P>>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    bytes: u64,
    pkts: u64,
    limit: Limit,
    p: FqParams,
    stats: QdiscStats,
}

impl<P: Pkt> Fq<P> {
    pub fn new(p: &FqParams, port: &Port) -> Fq<P> {
        Fq {
            index: HashMap::with_capacity(64),
            flows: Vec::with_capacity(64),
            new_flows: VecDeque::with_capacity(64),
            old_flows: VecDeque::with_capacity(64),
            bytes: 0,
            pkts: 0,
            limit: port.limit,
            p: p.clone(),
            stats: QdiscStats::default(),
        }
    }

    fn flow_of(&mut self, key: u64, now: Nanos) -> usize {
        if let Some(&i) = self.index.get(&key) {
            return i as usize;
        }
        let i = self.flows.len();
        self.flows.push(Flow {
            q: VecDeque::new(),
            credit: self.p.initial_quantum_bytes as i64,
            age: now,
            detached: true,
        });
        self.new_flows.reserve(1);
        self.old_flows.reserve(1);
        self.index.insert(key, i as u32);
        i
    }
}

impl<P: Pkt> Qdisc<P> for Fq<P> {
    fn enqueue(&mut self, p: P, now: Nanos) -> Result<(), P> {
        let size = p.wire_bytes() as u64;
        if !self.limit.admits(self.bytes, self.pkts, size) {
            self.stats.dropped += 1;
            return Err(p);
        }
        let i = self.flow_of(p.flow_key(), now);
        let f = &mut self.flows[i];
        if f.q.len() as u64 >= self.p.flow_limit_pkts {
            self.stats.dropped += 1;
            return Err(p);
        }
        if f.detached {
            f.detached = false;
            self.new_flows.push_back(i as u32);
            if now > f.age + self.p.refill_delay_ns {
                f.credit = f.credit.max(self.p.quantum_bytes as i64);
            }
        }
        f.q.push_back(p);
        self.bytes += size;
        self.pkts += 1;
        self.stats.enqueued += 1;
        Ok(())
    }

    fn dequeue(&mut self, now: Nanos) -> Option<P> {
        loop {
            let (i, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (i as usize, true),
                (None, Some(&i)) => (i as usize, false),
                (None, None) => return None,
            };
            let f = &mut self.flows[i];
            if from_new {
                self.new_flows.pop_front();
            } else {
                self.old_flows.pop_front();
            }
            if f.credit <= 0 {
                f.credit += self.p.quantum_bytes as i64;
                self.old_flows.push_back(i as u32);
                continue;
            }
            match f.q.pop_front() {
                Some(p) => {
                    // Still at the head of its list.
                    if from_new {
                        self.new_flows.push_front(i as u32);
                    } else {
                        self.old_flows.push_front(i as u32);
                    }
                    let size = p.wire_bytes() as u64;
                    f.credit -= size as i64;
                    self.bytes -= size;
                    self.pkts -= 1;
                    return Some(p);
                }
                None => {
                    if from_new && !self.old_flows.is_empty() {
                        self.old_flows.push_back(i as u32);
                    } else {
                        f.detached = true;
                        f.age = now;
                    }
                }
            }
        }
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn backlog_pkts(&self) -> u64 {
        self.pkts
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testutil::{byte_shares, cbr, drive, port, E};

    fn fq(flow_limit: u64) -> Fq<E> {
        let p = FqParams {
            flow_limit_pkts: flow_limit,
            quantum_bytes: 3000,
            initial_quantum_bytes: 15000,
            ..FqParams::default()
        };
        Fq::new(&p, &port(100_000_000, Limit::Packets(10_000)))
    }

    #[test]
    fn equal_byte_shares_with_different_packet_sizes() {
        let (a, b) = byte_shares(&mut fq(100_000), 1, 2, 2000, 3_000_000);
        assert!(a.abs_diff(b) <= 15_000, "{a} vs {b}");
    }

    #[test]
    fn backlogged_flows_share_a_link_equally() {
        // Three senders at 60 Mbit/s each (1500, 1000 and 200 B packets) into
        // 100 Mbit/s: each gets a third.
        let rate = 100_000_000;
        let mut q = fq(100);
        let mut arr = Vec::new();
        for (key, size) in [(1u64, 1500u32), (2, 1000), (3, 200)] {
            arr.extend(cbr(E::new(size, key), 60_000_000, 5_000_000_000));
        }
        arr.sort_by_key(|a| a.0);
        let out = drive(&mut q, rate, &arr, 5_000_000_000);
        let got: Vec<f64> = (1..=3)
            .map(|k| out.iter().filter(|(t, p)| *t > 1_000_000_000 && p.flow == k).map(|(_, p)| p.size as f64).sum())
            .collect();
        let total: f64 = got.iter().sum();
        for g in &got {
            assert!((g / total - 1.0 / 3.0).abs() < 0.01, "shares {got:?}");
        }
        assert!(q.stats().dropped > 0, "flow limits drop the excess");
        assert!(q.backlog_pkts() <= 300);
    }

    #[test]
    fn flow_limit_drops_only_that_flow() {
        let mut q = fq(3);
        for _ in 0..3 {
            q.enqueue(E::new(1500, 1), 0).unwrap();
        }
        assert!(q.enqueue(E::new(1500, 1), 0).is_err());
        assert!(q.enqueue(E::new(1500, 2), 0).is_ok());
        assert_eq!(q.stats(), QdiscStats { enqueued: 4, dropped: 1, ecn_marked: 0 });
    }

    #[test]
    fn new_flow_bursts_its_initial_quantum_then_round_robin() {
        let mut q = fq(1000);
        for _ in 0..20 {
            q.enqueue(E::new(1500, 1), 0).unwrap();
        }
        for _ in 0..20 {
            q.enqueue(E::new(1500, 2), 0).unwrap();
        }
        let order: Vec<u64> = (0..24).map(|_| q.dequeue(0).unwrap().flow).collect();
        // 15000 B of credit = 10 packets each, then 2-packet turns.
        let mut want = vec![1; 10];
        want.extend([2; 10]);
        want.extend([1, 1, 2, 2]);
        assert_eq!(order, want);
    }
}
