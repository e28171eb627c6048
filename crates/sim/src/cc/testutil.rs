//! Test senders shared by the CCAs' unit tests: ACK loops for window-based
//! algorithms, a queueing pipe for the delay-based ones, and the engine's
//! delivery-rate sampler for the rate-based ones.

use super::{AckSample, CongestionControl, Conn, RateSample};
use std::collections::VecDeque;

pub const MSS: u64 = 1448;

/// The sender keeps its whole window in flight (what the engine's
/// `tcp_cwnd_validate` finds for a flow that always has data).
pub fn cwnd_limited(c: &mut Conn) {
    c.packets_out = c.cwnd;
    c.max_packets_out = c.cwnd;
    c.is_cwnd_limited_flag = true;
}

/// The sample of an ACK for one segment.
pub fn one_segment_acked(rtt_us: i64, in_flight: u32) -> AckSample {
    AckSample { pkts_acked: 1, rtt_us, in_flight }
}

/// `n` ACKs of one segment each for a cwnd-limited sender; `cong_avoid`
/// only, no RTT samples.
pub fn acks(cc: &mut impl CongestionControl, c: &mut Conn, n: u32) {
    for _ in 0..n {
        cwnd_limited(c);
        cc.cong_avoid(c, 1);
    }
}

/// One flow through a FIFO bottleneck of `bdp` segments per base RTT, one
/// ACK per segment: every segment leaves the queue one serialisation time
/// after the previous one (or on arrival, if the queue is empty) and is
/// acked `base` later; the sender refills cwnd on every ACK. Times in µs.
pub struct QueuePipe<C> {
    pub cc: C,
    pub c: Conn,
    base_us: f64,
    pkt_us: f64,
    /// (send time, ACK arrival time, `delivered` at send) of segments in
    /// flight, in order.
    flight: VecDeque<(f64, f64, u64)>,
    last_departure: f64,
    pub now: f64,
}

impl<C: CongestionControl> QueuePipe<C> {
    pub fn new(mut cc: C, base_us: u64, bdp: u32) -> QueuePipe<C> {
        let mut c = Conn::new(MSS as u32, 10);
        cc.init(&mut c);
        let mut p = QueuePipe {
            cc,
            c,
            base_us: base_us as f64,
            pkt_us: base_us as f64 / bdp as f64,
            flight: VecDeque::new(),
            last_departure: 0.0,
            now: 0.0,
        };
        p.fill();
        p
    }

    fn fill(&mut self) {
        while (self.flight.len() as u32) < self.c.cwnd {
            // Propagation is all on the return path; the queue is first.
            let depart = self.now.max(self.last_departure) + self.pkt_us;
            self.last_departure = depart;
            self.flight.push_back((self.now, depart + self.base_us - self.pkt_us, self.c.delivered));
            self.c.snd_nxt += MSS;
        }
        self.c.packets_out = self.flight.len() as u32;
        self.c.max_packets_out = self.c.packets_out;
        self.c.is_cwnd_limited_flag = true;
    }

    /// Process one ACK; returns its RTT sample (µs).
    pub fn ack(&mut self) -> u64 {
        let (sent, at, delivered_at_send) = self.flight.pop_front().unwrap();
        self.now = at;
        self.c.now_us = at as u64;
        self.c.snd_una += MSS;
        self.c.delivered += 1;
        let in_flight = (self.c.delivered - delivered_at_send) as u32;
        self.c.packets_out = self.flight.len() as u32;
        let rtt = (at - sent) as u64;
        self.cc.pkts_acked(&mut self.c, &one_segment_acked(rtt as i64, in_flight));
        self.cc.cong_avoid(&mut self.c, 1);
        self.fill();
        rtt
    }

    /// About one RTT of ACKs; returns the smallest RTT seen.
    pub fn round(&mut self) -> u64 {
        (0..self.c.cwnd.max(1)).map(|_| self.ack()).min().unwrap()
    }

    /// ACKs for `secs` seconds.
    pub fn run_for(&mut self, secs: f64) {
        let end = self.now + secs * 1e6;
        while self.now < end {
            self.ack();
        }
    }
}

pub use crate::tcp::rate::{RateSampler, TxState};

/// The rate sample of an ACK that delivers the one segment `tx`, through
/// the engine's own sampler (`tcp_rate_skb_delivered` + `tcp_rate_gen`),
/// once `c.delivered` (and `delivered_ce`, `min_rtt_us`) count it.
pub fn rate_sample_one(rate: &mut RateSampler, c: &mut Conn, tx: &mut TxState, losses: u32, prior_in_flight: u32) -> RateSample {
    let mut rs = RateSample { losses, acked_sacked: 1, prior_in_flight, ..RateSample::default() };
    rs.rtt_us = (c.now_ns.saturating_sub(tx.sent_ns) / 1000) as i64;
    rate.begin_ack();
    rate.on_delivered(c, &mut rs, tx, c.snd_una, false);
    rate.gen(c, &mut rs, c.now_ns);
    rs
}
