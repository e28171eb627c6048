//! What each queue discipline costs per packet, alone: `cargo run --release
//! -p netcore --example qdisc_cost [NAME]` (NAME: only the disciplines
//! whose name starts with it, and the FIFO).
//!
//! A 1 Gbit/s port with 100 TCP-like flows: each step, one 1500-byte packet
//! arrives (flows send pairs, as delayed ACKs release them, in a random
//! order of flows) and the transmitter takes one, with about 800 packets
//! standing in the queue, so the disciplines that control a queue drop
//! some. The packet is as large as the simulator's (88 bytes), since
//! moving it is part of the cost. Every discipline runs `ROUNDS` times,
//! interleaved; the best round is printed, in nanoseconds per packet
//! (enqueue and dequeue) and as a multiple of the FIFO's.

use netcore::qdisc::{build, Limit, Port, Qdisc, QdiscConfig, QDISCS};
use netcore::{Nanos, Pkt};
use std::time::Instant;

const FLOWS: u64 = 100;
const STEPS: u64 = 5_000_000;
const ROUNDS: usize = 5;

/// The simulator's packet size and the fields a queue reads.
#[derive(Clone, Copy)]
#[allow(dead_code)] // `pad` stands for the TCP fields a queue never reads
struct Packet {
    flow: u64,
    wire: u32,
    ect: bool,
    ce: bool,
    pad: [u64; 9],
}

impl Pkt for Packet {
    fn wire_bytes(&self) -> u32 {
        self.wire
    }
    fn flow_key(&self) -> u64 {
        self.flow
    }
    fn ect(&self) -> bool {
        self.ect
    }
    fn mark_ce(&mut self) {
        self.ce = true;
    }
}

/// Nanoseconds per packet for one round, and the packets dropped.
fn round(q: &mut dyn Qdisc<Packet>) -> (f64, u64) {
    let pkt = |flow| Packet { flow, wire: 1500, ect: false, ce: false, pad: [0; 9] };
    let mut now: Nanos = 0;
    for i in 0..800 {
        let _ = q.enqueue(pkt(i % FLOWS), now);
    }
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut flow = 0;
    let mut sent = 0u64;
    let t0 = Instant::now();
    for i in 0..STEPS {
        now += 12_000; // 1500 bytes at 1 Gbit/s
        if i % 2 == 0 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            flow = x % FLOWS;
        }
        let _ = q.enqueue(pkt(flow), now);
        if let Some(p) = q.dequeue(now) {
            sent += p.wire as u64;
        }
    }
    let ns = t0.elapsed().as_secs_f64() * 1e9 / STEPS as f64;
    assert!(sent > 0);
    (ns, q.stats().dropped)
}

fn main() {
    let port = Port { rate_bps: 1_000_000_000, limit: Limit::Packets(1667), seed: 7 };
    let mut cases: Vec<(String, QdiscConfig)> =
        QDISCS.iter().map(|n| (n.to_string(), QdiscConfig::by_name(n).expect("a known discipline"))).collect();
    // FQ-CoDel serving each flow runs of 20 packets instead of one or two.
    let mut runs = QdiscConfig::by_name("fq_codel").expect("fq_codel");
    if let QdiscConfig::FqCodel(p) = &mut runs {
        p.quantum_bytes = 20 * 1514;
    }
    cases.push(("fq_codel (quantum 20 packets)".into(), runs));
    if let Some(only) = std::env::args().nth(1) {
        cases.retain(|(name, _)| name == "fifo" || name.starts_with(&only));
    }
    let mut best = vec![f64::MAX; cases.len()];
    let mut drops = vec![0; cases.len()];
    for _ in 0..ROUNDS {
        for (i, (_, cfg)) in cases.iter().enumerate() {
            let mut q = build::<Packet>(cfg, &port);
            let (ns, d) = round(q.as_mut());
            best[i] = best[i].min(ns);
            drops[i] = d;
        }
    }
    println!("{FLOWS} flows, 1 Gbit/s, {STEPS} packets, best of {ROUNDS} interleaved rounds");
    for (i, (name, _)) in cases.iter().enumerate() {
        println!("{name:<32} {:6.1} ns/packet  {:5.2}x the FIFO  ({} dropped)", best[i], best[i] / best[0], drops[i]);
    }
}
