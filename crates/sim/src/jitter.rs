//! Host noise: processing jitter (`[tcp] host_jitter`, `tcp.host_jitter_ns`),
//! the receiving application's read latency (`[tcp] read_latency`) and the
//! sender's pacing timer's lateness (`[tcp] pacing_latency`), the last two
//! drawn by [`Latency`], and the sending hosts' pauses (`[tcp]
//! sender_pauses`, [`host_pauses`], which the world applies).
//!
//! A simulated host hands every packet to the wire at the instant its TCP
//! endpoint produced it, so a run is perfectly regular: an ACK-clocked
//! sender's packets reach a drop-tail queue at exactly the moments a slot
//! frees, and which packets find the queue full is a fixed pattern of the
//! flows' phases. A real host takes a varying time between `tcp_transmit_skb`
//! and the wire (softirq and NAPI batching, interrupt coalescing, GRO, qdisc
//! and driver queues, scheduling). This delays each packet an endpoint emits
//! by a seeded uniform draw in [0, max], keeping each connection direction's
//! packets in order (a host does not reorder one flow), so that drops at a
//! shared queue fall on whichever packets arrive, as they do with real hosts.
//! Zero (the default) holds nothing and draws nothing.

use crate::packet::Packet;
use netcore::rng::Rng;
use netcore::link::Stalls;
use netcore::Nanos;
use std::collections::VecDeque;

/// The run seed's stream for host jitter (links use streams 1, 2, ...).
const STREAM: u64 = 0x4A17_7E55_0000_0001;

pub struct HostJitter {
    max_ns: u64,
    rng: Rng,
    /// Per connection direction (2·conn + to_receiver): packets waiting for
    /// their release time, and the latest release time given out.
    held: Vec<VecDeque<(Nanos, Packet)>>,
    last: Vec<Nanos>,
}

impl HostJitter {
    pub fn new(max_ns: u64, seed: u64) -> HostJitter {
        HostJitter { max_ns, rng: Rng::derive(seed, STREAM), held: Vec::new(), last: Vec::new() }
    }

    pub fn enabled(&self) -> bool {
        self.max_ns > 0
    }

    /// Hold `p`, emitted at `now`; its release time and the key to release it by.
    pub fn hold(&mut self, p: Packet, now: Nanos) -> (Nanos, u32) {
        let key = 2 * p.conn + p.to_receiver as u32;
        let k = key as usize;
        if k >= self.held.len() {
            self.held.resize_with(k + 1, VecDeque::new);
            self.last.resize(k + 1, 0);
        }
        let draw = (self.rng.next_f64() * (self.max_ns + 1) as f64) as u64;
        let at = (now + draw).max(self.last[k]);
        self.last[k] = at;
        self.held[k].push_back((at, p));
        (at, key)
    }

    /// The next packet of connection direction `key`, due now.
    pub fn release(&mut self, key: u32) -> Packet {
        self.held[key as usize].pop_front().expect("a release event per held packet").1
    }
}

/// The run seed's streams for read latency and pacing latency, one
/// sub-stream per connection.
const READ_STREAM: u64 = 0x4A17_7E55_0000_0002;
const PACE_STREAM: u64 = 0x4A17_7E55_0000_0003;
/// The run seed's stream for the sending hosts' pauses, one sub-stream per node.
const PAUSE_STREAM: u64 = 0x4A17_7E55_0000_0004;

/// The pauses of sending host `node` (`[tcp] sender_pauses`): exponential
/// pauses of mean `length` separated by exponential gaps of mean `every`,
/// drawn as a link's far end's are (netcore `Stalls`), a seeded stream per
/// host. The world holds the ACKs that reach the host and the sender
/// timers that expire during a pause until it ends.
pub fn host_pauses(every: Nanos, length: Nanos, seed: u64, node: usize) -> Stalls {
    Stalls::new(every, length, Rng::derive(seed ^ PAUSE_STREAM, node as u64))
}

/// How late a host does something it was due to do: log-normal, given by
/// its median and 90th percentile, one seeded stream per connection and
/// use. A heavy tail is what hosts have: most within tens of µs, a few late
/// by hundreds (docs/sim-model.md). Two uses:
///
/// - [`Latency::read`], the receiving application's read (`[tcp]
///   read_latency`): Linux acknowledges most data from the read
///   (`tcp_cleanup_rbuf`) rather than on arrival while the receive window
///   sits at its clamp (`tcp/receiver.rs`), so a reader late by more than a
///   segment's spacing makes one ACK cover three segments or more;
/// - [`Latency::pacing`], the sender's pacing timer (`[tcp]
///   pacing_latency`): Linux's internal pacing is a soft hrtimer, run from
///   softirq context, which fires late by as much as the host is busy; the
///   burst then leaves late, and `tcp_update_skb_after_send`'s credit
///   shortens the next gap by up to half to catch up (`tcp/sender`).
pub struct Latency {
    /// ln(median in ns) and the spread of the log: ln(p90 / median) / z(0.9).
    mu: f64,
    sigma: f64,
    rng: Rng,
}

/// The 90th percentile of the standard normal.
const Z90: f64 = 1.281_551_565_5;

impl Latency {
    fn new(median_ns: u64, p90_ns: u64, rng: Rng) -> Latency {
        debug_assert!(median_ns > 0 && p90_ns >= median_ns);
        Latency {
            mu: (median_ns as f64).ln(),
            sigma: (p90_ns as f64 / median_ns as f64).ln() / Z90,
            rng,
        }
    }

    /// Connection `conn`'s receiving application's reads.
    pub fn read(median_ns: u64, p90_ns: u64, seed: u64, conn: u32) -> Latency {
        Latency::new(median_ns, p90_ns, Rng::derive(seed ^ READ_STREAM, conn as u64))
    }

    /// Connection `conn`'s sender's pacing timer.
    pub fn pacing(median_ns: u64, p90_ns: u64, seed: u64, conn: u32) -> Latency {
        Latency::new(median_ns, p90_ns, Rng::derive(seed ^ PACE_STREAM, conn as u64))
    }

    /// One latency (Box-Muller: a standard normal from two uniforms).
    pub fn draw(&mut self) -> Nanos {
        let u1 = 1.0 - self.rng.next_f64(); // (0, 1]: ln is finite
        let u2 = self.rng.next_f64();
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        (self.mu + self.sigma * z).exp() as Nanos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_has_its_median_and_p90() {
        let mut r = Latency::read(12_000, 60_000, 9, 4);
        let mut d: Vec<Nanos> = (0..100_000).map(|_| r.draw()).collect();
        d.sort_unstable();
        let (med, p90) = (d[50_000] as f64, d[90_000] as f64);
        assert!((med / 12_000.0 - 1.0).abs() < 0.03, "median {med}");
        assert!((p90 / 60_000.0 - 1.0).abs() < 0.03, "p90 {p90}");
        // The log-normal's tail: P(> 10 x median) = P(z > ln 10 / sigma), 3.7 % here.
        let over = d.iter().filter(|&&x| x > 120_000).count() as f64 / d.len() as f64;
        assert!((0.030..0.045).contains(&over), "{over}");
        // Seeded: one stream per connection and use.
        let seq = |conn, pacing| {
            let mut r = if pacing { Latency::pacing(12_000, 60_000, 9, conn) } else { Latency::read(12_000, 60_000, 9, conn) };
            (0..4).map(|_| r.draw()).collect::<Vec<_>>()
        };
        assert_eq!(seq(4, false), seq(4, false));
        assert_ne!(seq(4, false), seq(5, false));
        assert_ne!(seq(4, false), seq(4, true));
    }

    fn pkt(conn: u32, seq: u64) -> Packet {
        Packet { conn, to_receiver: true, seq, ..Packet::default() }
    }

    #[test]
    fn delays_within_bound_in_order_and_seeded() {
        let run = |seed| {
            let mut j = HostJitter::new(50_000, seed);
            let mut out = Vec::new();
            for i in 0..1000u64 {
                let now = i * 10_000; // faster than the jitter: order must hold
                let (at, key) = j.hold(pkt((i % 3) as u32, i), now);
                assert!(at >= now && at <= now + 50_000 + 20_000, "{at} for {now}");
                out.push((at, key));
            }
            out
        };
        let a = run(1);
        assert_eq!(a, run(1), "same seed, same delays");
        assert_ne!(a, run(2));
        for conn in 0..3u32 {
            let times: Vec<Nanos> = a.iter().filter(|&&(_, k)| k == 2 * conn + 1).map(|&(t, _)| t).collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "a connection's packets stay in order");
        }
        // Spread over the whole range, not a constant offset.
        let d: Vec<u64> = a.iter().enumerate().map(|(i, &(t, _))| t - i as u64 * 10_000).collect();
        assert!(d.iter().any(|&x| x < 10_000) && d.iter().any(|&x| x > 40_000));
    }

    #[test]
    fn release_gives_packets_back_in_order() {
        let mut j = HostJitter::new(1_000, 3);
        for s in 0..5 {
            j.hold(pkt(7, s), 0);
        }
        let seqs: Vec<u64> = (0..5).map(|_| j.release(15).seq).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    }
}
