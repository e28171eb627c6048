//! Test packets and drivers shared by the disciplines' unit tests.

use super::{Limit, Port, Qdisc};
use crate::{Nanos, Pkt, NS_PER_SEC};

/// A test packet: wire bytes, flow key, ECT, CE, class.
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// A packet with ECN and class fields, for the AQM tests.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct E {
    pub size: u32,
    pub flow: u64,
    pub ect: bool,
    pub ce: bool,
    pub class: u8,
    /// When the test source created it.
    pub born: Nanos,
}
impl E {
    pub fn new(size: u32, flow: u64) -> E {
        E { size, flow, ..E::default() }
    }
    pub fn ect(mut self) -> E {
        self.ect = true;
        self
    }
    pub fn class(mut self, c: u8) -> E {
        self.class = c;
        self
    }
    pub fn at(mut self, t: Nanos) -> E {
        self.born = t;
        self
    }
}
impl Pkt for E {
    fn wire_bytes(&self) -> u32 {
        self.size
    }
    fn flow_key(&self) -> u64 {
        self.flow
    }
    fn class(&self) -> u8 {
        self.class
    }
    fn ect(&self) -> bool {
        self.ect
    }
    fn mark_ce(&mut self) {
        self.ce = true;
    }
}

/// A port with a fixed seed.
pub fn port(rate_bps: u64, limit: Limit) -> Port {
    Port { rate_bps, limit, seed: 7 }
}

/// Drive a discipline as a link of `rate_bps` would: packets arrive at
/// the given times, the transmitter takes one packet at a time. Returns
/// the departed packets with their departure times.
pub fn drive<Q: Qdisc<E> + ?Sized>(
    q: &mut Q,
    rate_bps: u64,
    arrivals: &[(Nanos, E)],
    until: Nanos,
) -> Vec<(Nanos, E)> {
    let mut out = Vec::new();
    let mut free_at: Nanos = 0; // transmitter busy until
    let mut i = 0;
    let mut now: Nanos = 0;
    loop {
        // Next event: an arrival or the transmitter freeing up.
        let next_arr = arrivals.get(i).map(|a| a.0);
        let tx_ready = if q.backlog_pkts() > 0 { Some(free_at.max(now)) } else { None };
        let t = match (next_arr, tx_ready) {
            (Some(a), Some(d)) => a.min(d),
            (Some(a), None) => a,
            (None, Some(d)) => d,
            (None, None) => break,
        };
        if t > until {
            break;
        }
        now = t;
        if next_arr == Some(t) {
            let _ = q.enqueue(arrivals[i].1, now);
            i += 1;
            continue;
        }
        if let Some(p) = q.dequeue(now) {
            free_at = now + crate::tx_time(p.wire_bytes(), rate_bps);
            out.push((now, p));
        }
    }
    out
}

/// `p` sent at `rate_bps` for `dur` ns from t = 0: one copy per wire time,
/// each stamped with its creation time.
pub fn cbr(p: E, rate_bps: u64, dur: Nanos) -> Vec<(Nanos, E)> {
    let gap = p.size as u64 * 8 * NS_PER_SEC / rate_bps;
    (0..dur / gap).map(|i| (i * gap, p.at(i * gap))).collect()
}

/// Fill a discipline at t = 0 with `rounds` of one 1500 B packet of flow
/// `a` and three 500 B packets of flow `b`, then dequeue until `total`
/// bytes have left: the bytes each flow got.
pub fn byte_shares<Q: Qdisc<E>>(q: &mut Q, a: u64, b: u64, rounds: u32, total: u64) -> (u64, u64) {
    for _ in 0..rounds {
        q.enqueue(E::new(1500, a), 0).unwrap();
        for _ in 0..3 {
            q.enqueue(E::new(500, b), 0).unwrap();
        }
    }
    let (mut ba, mut bb) = (0u64, 0u64);
    while ba + bb < total {
        let p = q.dequeue(0).unwrap();
        *(if p.flow == a { &mut ba } else { &mut bb }) += p.size as u64;
    }
    (ba, bb)
}
