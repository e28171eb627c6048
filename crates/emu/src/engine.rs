//! The emulator's event loop: the simulator's dumbbell of `netcore` links,
//! driven by a real clock and a packet device.
//!
//! Every link call gets the time the event was *due*, not the time the loop
//! got round to it, so a late wake-up delays a packet's write but never
//! shifts the link's schedule (the same arithmetic as the simulator's). A
//! packet read from the device enters its first link at the clock's reading
//! just after the read, after every event due by then has been processed.
//!
//! The loop is generic over [`Io`] (the device and the clock), so tests drive
//! it with a fake device and a virtual clock.

use crate::frame::{Dir, Frame, Pool};
use crate::hist::Hist;
use crate::ipv4;
use netcore::link::{Link, Offered};
use netcore::{Nanos, NS_PER_US};
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io::{self, Write};
use std::rc::Rc;

/// The device and the clock.
pub trait Io {
    /// CLOCK_MONOTONIC (or the fake's virtual time), ns.
    fn now(&mut self) -> Nanos;
    /// Block until a packet may be readable, or until `deadline`. May return
    /// early (a signal, a spurious wake-up): the loop checks again.
    fn wait(&mut self, deadline: Nanos);
    /// Read one packet into `buf`: `Ok(None)` when none is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>>;
    /// Write one packet.
    fn send(&mut self, pkt: &[u8]) -> io::Result<()>;
    /// CPU time used by the process so far, ns.
    fn cpu_ns(&mut self) -> u64;
    /// Time spent busy-waiting in `wait` so far, ns (CPU time that was not work).
    fn spin_ns(&mut self) -> u64 {
        0
    }
}

pub const BOTTLENECK: usize = 0;
pub const REVERSE: usize = 1;

/// Reads handled before the loop looks at its timers again.
const READ_BATCH: usize = 64;
/// The loop wakes at least this often (to notice a stop request).
const MAX_WAIT: Nanos = 100_000_000;

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    StopAt,
    Signal,
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub pkts_read: u64,
    pub pkts_written: u64,
    pub forward_pkts: u64,
    pub reverse_pkts: u64,
    pub forwarded_unclassified: u64,
    pub tun_read_errors: u64,
    pub tun_write_errors: u64,
    pub late_pkts: u64,
}

pub struct Addresses {
    pub receiver: u32,
    /// Sender host IPv4 address → its index.
    pub senders: HashMap<u32, u16>,
}

pub struct Emulator {
    /// Bottleneck, reverse, access out per sender, access back per sender.
    pub links: Vec<Link<Frame>>,
    nsenders: usize,
    heap: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    seq: u64,
    pool: Rc<Pool>,
    addrs: Addresses,
    late_tolerance: Nanos,
    pub c: Counters,
    /// Lateness of the packets leaving the forward (bottleneck) and reverse
    /// paths: this interval and the whole run.
    lat: [Hist; 2],
    lat_total: [Hist; 2],
    late_interval: u64,
    // Sampling.
    t0: Nanos,
    interval: Nanos,
    next_sample: Nanos,
    /// (wall, cpu, spin) at the last sample and at the start.
    last_sample: (Nanos, u64, u64),
    started: (Nanos, u64, u64),
    stats: Box<dyn Write>,
}

/// Event code: link index × 2, + 1 for an arrival (else end of transmission).
fn code(link: usize, arrive: bool) -> u32 {
    (link as u32) << 1 | arrive as u32
}

impl Emulator {
    /// `links` in the order bottleneck, reverse, access out (per sender),
    /// access back (per sender).
    pub fn new(
        links: Vec<Link<Frame>>,
        addrs: Addresses,
        pool: Rc<Pool>,
        t0: Nanos,
        interval: Nanos,
        late_tolerance: Nanos,
        stats: Box<dyn Write>,
    ) -> Emulator {
        let nsenders = (links.len() - 2) / 2;
        assert_eq!(links.len(), 2 + 2 * nsenders);
        assert!(interval > 0);
        Emulator {
            links,
            nsenders,
            heap: BinaryHeap::with_capacity(4096),
            seq: 0,
            pool,
            addrs,
            late_tolerance,
            c: Counters::default(),
            lat: [Hist::default(), Hist::default()],
            lat_total: [Hist::default(), Hist::default()],
            late_interval: 0,
            t0,
            interval,
            next_sample: 0,
            last_sample: (0, 0, 0),
            started: (0, 0, 0),
            stats,
        }
    }

    fn schedule(&mut self, at: Nanos, code: u32) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, code)));
    }

    fn link_of(&self, f: &Frame) -> usize {
        let s = f.sender as usize;
        match (f.dir, f.hop) {
            (Dir::Forward, 0) => 2 + s,
            (Dir::Forward, _) => BOTTLENECK,
            (Dir::Reverse, 0) => REVERSE,
            (Dir::Reverse, _) => 2 + self.nsenders + s,
        }
    }

    fn offer(&mut self, f: Frame, now: Nanos) {
        let l = self.link_of(&f);
        match self.links[l].offer(f, now) {
            Offered::TxStarted(t) => self.schedule(t, code(l, false)),
            Offered::InLine(Some(t)) => self.schedule(t, code(l, true)),
            _ => {}
        }
    }

    /// Process every event due by `now`, each at its own due time.
    fn run_due<I: Io>(&mut self, io: &mut I, now: Nanos) {
        while let Some(&Reverse((at, _, code))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            let l = (code >> 1) as usize;
            if code & 1 == 0 {
                let d = self.links[l].tx_done(at);
                if let Some(t) = d.arrival {
                    self.schedule(t, self::code(l, true));
                }
                if let Some(t) = d.next_tx_done {
                    self.schedule(t, self::code(l, false));
                }
            } else {
                let (mut f, next) = self.links[l].arrive();
                if let Some(t) = next {
                    self.schedule(t, self::code(l, true));
                }
                f.hop += 1;
                if f.hop < 2 {
                    self.offer(f, at);
                } else {
                    self.deliver(io, f, at);
                }
            }
        }
    }

    /// Write a packet that has crossed both its links.
    fn deliver<I: Io>(&mut self, io: &mut I, mut f: Frame, due: Nanos) {
        let t = io.now();
        match io.send(f.bytes_for_write()) {
            Ok(()) => self.c.pkts_written += 1,
            Err(_) => self.c.tun_write_errors += 1,
        }
        let late = t.saturating_sub(due);
        let i = (f.dir == Dir::Reverse) as usize;
        self.lat[i].add(late);
        if late > self.late_tolerance {
            self.late_interval += 1;
            self.c.late_pkts += 1;
        }
    }

    /// A packet just read, at time `t`.
    fn on_packet<I: Io>(&mut self, io: &mut I, buf: Box<[u8]>, len: usize, t: Nanos) {
        self.c.pkts_read += 1;
        let h = ipv4::parse(&buf[..len]);
        let class = h.and_then(|h| {
            if h.dst == self.addrs.receiver {
                self.addrs.senders.get(&h.src).map(|&s| (h, Dir::Forward, s))
            } else if h.src == self.addrs.receiver {
                self.addrs.senders.get(&h.dst).map(|&s| (h, Dir::Reverse, s))
            } else {
                None
            }
        });
        match class {
            Some((h, dir, s)) => {
                match dir {
                    Dir::Forward => self.c.forward_pkts += 1,
                    Dir::Reverse => self.c.reverse_pkts += 1,
                }
                let f = Frame::new(buf, self.pool.clone(), len, &h, dir, s);
                self.offer(f, t);
            }
            None => {
                self.c.forwarded_unclassified += 1;
                match io.send(&buf[..len]) {
                    Ok(()) => self.c.pkts_written += 1,
                    Err(_) => self.c.tun_write_errors += 1,
                }
                self.pool.give(buf);
            }
        }
    }

    /// Run until `stop_at` or until `stop()` says so.
    pub fn run<I: Io>(&mut self, io: &mut I, stop_at: Nanos, stop: &dyn Fn() -> bool) -> StopReason {
        let start = io.now();
        self.started = (start, io.cpu_ns(), io.spin_ns());
        self.last_sample = self.started;
        let k = if start <= self.t0 { 1 } else { (start - self.t0) / self.interval + 1 };
        self.next_sample = self.t0 + k * self.interval;
        let mut buf = self.pool.take();
        loop {
            let now = io.now();
            if now >= stop_at {
                return StopReason::StopAt;
            }
            if stop() {
                return StopReason::Signal;
            }
            self.run_due(io, now);
            let mut got = 0;
            while got < READ_BATCH {
                match io.recv(&mut buf) {
                    Ok(Some(n)) => {
                        got += 1;
                        if n >= buf.len() {
                            // Truncated: larger than any packet the MTU allows.
                            self.c.tun_read_errors += 1;
                            continue;
                        }
                        let t = io.now();
                        self.run_due(io, t);
                        let full = std::mem::replace(&mut buf, self.pool.take());
                        self.on_packet(io, full, n, t);
                    }
                    Ok(None) => break,
                    Err(_) => {
                        self.c.tun_read_errors += 1;
                        break;
                    }
                }
            }
            let now = io.now();
            if now >= self.next_sample {
                let at = self.next_sample;
                self.sample(io, at);
                self.next_sample += self.interval;
                while self.next_sample <= now {
                    self.next_sample += self.interval;
                }
            }
            if got == 0 {
                let due = self.heap.peek().map_or(Nanos::MAX, |Reverse(e)| e.0);
                let deadline = due.min(self.next_sample).min(stop_at).min(now + MAX_WAIT);
                io.wait(deadline);
            }
        }
    }

    fn link_json(&self, l: usize) -> Value {
        let link = &self.links[l];
        let q = link.qdisc().expect("bottleneck and reverse links have a queue");
        let st = q.stats();
        json!({
            "backlog_bytes": q.backlog_bytes(),
            "backlog_pkts": q.backlog_pkts(),
            "drops": st.dropped,
            "random_losses": link.random_losses,
            "ecn_marks": st.ecn_marked,
            "tx_pkts": link.tx_pkts,
            "tx_bytes": link.tx_bytes,
        })
    }

    fn time_us(&self, t: Nanos) -> i64 {
        (t as i64 - self.t0 as i64) / NS_PER_US as i64
    }

    /// CPU and spin time over wall time between two (wall, cpu, spin) readings.
    fn fractions(now: (Nanos, u64, u64), then: (Nanos, u64, u64)) -> (f64, f64) {
        if now.0 <= then.0 {
            return (0.0, 0.0);
        }
        let wall = (now.0 - then.0) as f64;
        (now.1.saturating_sub(then.1) as f64 / wall, now.2.saturating_sub(then.2) as f64 / wall)
    }

    /// One line of the stats file, for the interval ending at `at`.
    fn sample<I: Io>(&mut self, io: &mut I, at: Nanos) {
        let reading = (io.now(), io.cpu_ns(), io.spin_ns());
        let (cpu, spin) = Self::fractions(reading, self.last_sample);
        let mut all = self.lat[0].clone();
        all.merge(&self.lat[1]);
        let mut links = serde_json::Map::new();
        for (i, name) in ["bottleneck", "reverse"].into_iter().enumerate() {
            let mut v = self.link_json(i);
            v["lateness_us"] = lateness_json(&self.lat[i]);
            links.insert(name.into(), v);
        }
        let line = json!({
            "time_us": self.time_us(at),
            "links": links,
            "lateness_us": lateness_json(&all),
            "pkts": all.count,
            "late_pkts": self.late_interval,
            "tun_read_errors": self.c.tun_read_errors,
            "tun_write_errors": self.c.tun_write_errors,
            "forwarded_unclassified": self.c.forwarded_unclassified,
            "cpu_busy_fraction": cpu,
            "spin_fraction": spin,
        });
        self.write_line(&line);
        for i in 0..2 {
            self.lat_total[i].merge(&self.lat[i]);
            self.lat[i].clear();
        }
        self.late_interval = 0;
        self.last_sample = reading;
    }

    fn write_line(&mut self, v: &Value) {
        let mut s = v.to_string();
        s.push('\n');
        // A full disk must not stop the emulator; the summary still returns.
        let _ = self.stats.write_all(s.as_bytes());
        let _ = self.stats.flush();
    }

    /// The run's totals: written as the last line of the stats file and
    /// returned. `extra` adds fields (e.g. the device's kernel counters).
    pub fn finish<I: Io>(&mut self, io: &mut I, reason: StopReason, extra: Value) -> Value {
        let reading = (io.now(), io.cpu_ns(), io.spin_ns());
        let now = reading.0;
        let (cpu, spin) = Self::fractions(reading, self.started);
        for i in 0..2 {
            let h = std::mem::take(&mut self.lat[i]);
            self.lat_total[i].merge(&h);
        }
        let mut all = self.lat_total[0].clone();
        all.merge(&self.lat_total[1]);
        let mut links = serde_json::Map::new();
        for (i, name) in ["bottleneck", "reverse"].into_iter().enumerate() {
            let mut v = self.link_json(i);
            v["lateness_us"] = lateness_json(&self.lat_total[i]);
            links.insert(name.into(), v);
        }
        let c = &self.c;
        let mut v = json!({
            "final": true,
            "stop_reason": match reason { StopReason::StopAt => "stop_at", StopReason::Signal => "signal" },
            "time_us": self.time_us(now),
            "wall_us": now.saturating_sub(self.started.0) / NS_PER_US,
            "links": links,
            "lateness_us": lateness_json(&all),
            "pkts": all.count,
            "late_pkts": c.late_pkts,
            "pkts_read": c.pkts_read,
            "pkts_written": c.pkts_written,
            "forward_pkts": c.forward_pkts,
            "reverse_pkts": c.reverse_pkts,
            "tun_read_errors": c.tun_read_errors,
            "tun_write_errors": c.tun_write_errors,
            "forwarded_unclassified": c.forwarded_unclassified,
            "cpu_busy_fraction": cpu,
            "spin_fraction": spin,
            "pool_buffers": self.pool.allocated(),
        });
        if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
            m.extend(e);
        }
        self.write_line(&v);
        v
    }
}

fn lateness_json(h: &Hist) -> Value {
    let us = |v: Option<u64>| v.map(|v| v as f64 / NS_PER_US as f64);
    json!({
        "p50": us(h.quantile(0.5)),
        "p99": us(h.quantile(0.99)),
        "max": us((h.count > 0).then_some(h.max)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::tests::packet;
    use crate::{addresses, build_links, EmuConfig};
    use std::cell::RefCell;
    use std::collections::VecDeque;

    /// A device fed from a script, on a virtual clock. Every wake-up from
    /// `wait` comes `wake_late` ns after the time asked for.
    struct FakeIo {
        t: Nanos,
        inputs: VecDeque<(Nanos, Vec<u8>)>,
        outputs: Vec<(Nanos, Vec<u8>)>,
        wake_late: Nanos,
    }

    impl Io for FakeIo {
        fn now(&mut self) -> Nanos {
            self.t
        }
        fn wait(&mut self, deadline: Nanos) {
            let next_in = self.inputs.front().map_or(Nanos::MAX, |i| i.0);
            let target = deadline.min(next_in);
            if target > self.t {
                self.t = target + self.wake_late;
            }
        }
        fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
            match self.inputs.front() {
                Some((at, _)) if *at <= self.t => {
                    let (_, p) = self.inputs.pop_front().unwrap();
                    buf[..p.len()].copy_from_slice(&p);
                    Ok(Some(p.len()))
                }
                _ => Ok(None),
            }
        }
        fn send(&mut self, pkt: &[u8]) -> io::Result<()> {
            self.outputs.push((self.t, pkt.to_vec()));
            Ok(())
        }
        fn cpu_ns(&mut self) -> u64 {
            self.t / 4
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Rc<RefCell<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    const S0: [u8; 4] = [10, 1, 0, 2];
    const S1: [u8; 4] = [10, 1, 1, 2];
    const RX: [u8; 4] = [10, 2, 0, 2];

    fn config(buffer_pkts: u64) -> EmuConfig {
        serde_json::from_value(json!({
            "tun": "fake", "receiver_ip": "10.2.0.2",
            "senders": [{"ip": "10.1.0.2", "rate_bps": 10_000_000_000u64, "delay_ns": 1_000_000},
                        {"ip": "10.1.1.2", "rate_bps": 1_000_000_000u64, "delay_ns": 3_000_000}],
            "bottleneck": {"rate_bps": 100_000_000, "delay_ns": 9_000_000, "loss": 0.0,
                           "buffer_bytes": null, "buffer_pkts": buffer_pkts, "qdisc": "fifo"},
            "reverse": null, "seed": 1, "stop_at_monotonic_ns": 0, "sample_interval_ns": 100_000_000,
            "t0_monotonic_ns": 0, "stats_path": "/dev/null", "late_tolerance_ns": 20_000
        }))
        .unwrap()
    }

    fn run(cfg: &EmuConfig, inputs: Vec<(Nanos, Vec<u8>)>, wake_late: Nanos, until: Nanos) -> (FakeIo, Emulator, Sink, Value) {
        cfg.check().unwrap();
        let sink = Sink::default();
        let mut emu = Emulator::new(
            build_links(cfg),
            addresses(cfg),
            Pool::new(2048, 16),
            cfg.t0_monotonic_ns,
            cfg.sample_interval_ns,
            cfg.late_tolerance_ns,
            Box::new(sink.clone()),
        );
        let mut io = FakeIo { t: 0, inputs: inputs.into(), outputs: vec![], wake_late };
        let r = emu.run(&mut io, until, &|| false);
        assert_eq!(r, StopReason::StopAt);
        let summary = emu.finish(&mut io, r, json!({}));
        (io, emu, sink, summary)
    }

    #[test]
    fn forward_and_reverse_delays_and_serialisation() {
        let cfg = config(100);
        let fwd = packet(S0, RX, 1000, 5201, 1500, 0);
        let ack = packet(RX, S1, 5201, 1000, 52, 0);
        let (io, emu, _, _) = run(&cfg, vec![(0, fwd.clone()), (500_000, ack.clone())], 0, 1_000_000_000);
        assert_eq!(io.outputs.len(), 2);
        // Forward: 1500 B at 10 Gbit/s (1.2 us) + 1 ms, then at 100 Mbit/s (120 us) + 9 ms.
        assert_eq!(io.outputs[0], (1_200 + 1_000_000 + 120_000 + 9_000_000, fwd));
        // Reverse: the mirrored return link (52 B at 100 Mbit/s: 4.16 us) + 9 ms,
        // then sender 1's access link back (52 B at 1 Gbit/s: 416 ns) + 3 ms.
        assert_eq!(io.outputs[1], (500_000 + 4_160 + 9_000_000 + 416 + 3_000_000, ack));
        assert_eq!((emu.c.forward_pkts, emu.c.reverse_pkts, emu.c.pkts_written), (1, 1, 2));
        assert_eq!(emu.links[BOTTLENECK].tx_pkts, 1);
        assert_eq!(emu.links[REVERSE].tx_pkts, 1);
    }

    #[test]
    fn bottleneck_rate_and_buffer_limit() {
        let cfg = config(10);
        // 50 full packets at once from sender 0: its 10 Gbit/s access link
        // spaces them 1.2 us apart, far faster than the 100 Mbit/s bottleneck.
        let inputs = (0..50).map(|i| (0, packet(S0, RX, 1000 + i, 5201, 1500, 0))).collect();
        let (io, emu, _, summary) = run(&cfg, inputs, 0, 1_000_000_000);
        // One on the wire and ten queued; the rest dropped at the tail.
        assert_eq!(io.outputs.len(), 11);
        assert_eq!(emu.links[BOTTLENECK].qdisc().unwrap().stats().dropped, 39);
        assert_eq!(summary["links"]["bottleneck"]["drops"], 39);
        for (i, (t, p)) in io.outputs.iter().enumerate() {
            assert_eq!(*t, 1_200 + 1_000_000 + (i as u64 + 1) * 120_000 + 9_000_000, "packet {i}");
            // FIFO order; the survivors are the first eleven.
            assert_eq!(u16::from_be_bytes([p[20], p[21]]), 1000 + i as u16);
        }
        // Dropped frames gave their buffers back.
        assert_eq!(emu.pool.free_count(), emu.pool.allocated() - 1);
    }

    #[test]
    fn throughput_matches_the_bottleneck_rate() {
        let cfg = config(1000);
        // 2000 packets offered at 200 Mbit/s for 120 ms: the output runs at 100 Mbit/s.
        let inputs = (0..1000u64).map(|i| (i * 60_000, packet(S1, RX, 7, 8, 1500, 0))).collect();
        let (io, _, _, _) = run(&cfg, inputs, 0, 1_000_000_000);
        assert_eq!(io.outputs.len(), 1000);
        let span = io.outputs.last().unwrap().0 - io.outputs[0].0;
        assert_eq!(span, 999 * 120_000);
    }

    #[test]
    fn lateness_is_measured_and_does_not_shift_the_schedule() {
        let cfg = config(100);
        let inputs = (0..20u64).map(|i| (i * 1_000_000, packet(S0, RX, 1, 2, 1500, 0))).collect();
        // Every wake-up 30 us late (tolerance 20 us).
        let (io, _, sink, summary) = run(&cfg, inputs, 30_000, 300_000_000);
        assert_eq!(io.outputs.len(), 20);
        for (i, (t, _)) in io.outputs.iter().enumerate() {
            // The loop wakes 30 us late for each packet after the first (it
            // is reading when the first comes), so reads it then; the
            // packet is due 10.1212 ms later and written 30 us after that.
            let read = if i == 0 { 0 } else { i as u64 * 1_000_000 + 30_000 };
            assert_eq!(*t, read + 1_200 + 1_000_000 + 120_000 + 9_000_000 + 30_000, "packet {i}");
        }
        assert_eq!(summary["late_pkts"], 20);
        assert_eq!(summary["lateness_us"]["max"], 30.0);
        let p50 = summary["lateness_us"]["p50"].as_f64().unwrap();
        assert!((p50 - 30.0).abs() < 1.0, "{p50}");
        // Stats lines: samples at 100 and 200 ms, then the final line.
        let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["time_us"], 100_000);
        assert_eq!(lines[1]["time_us"], 200_000);
        assert_eq!(lines[0]["pkts"], 20);
        assert_eq!(lines[0]["late_pkts"], 20);
        assert_eq!(lines[1]["pkts"], 0);
        assert_eq!(lines[1]["lateness_us"]["p99"], Value::Null);
        assert_eq!(lines[2]["final"], true);
        let cpu = lines[1]["cpu_busy_fraction"].as_f64().unwrap();
        assert!((cpu - 0.25).abs() < 0.01, "{cpu}");
    }

    #[test]
    fn unclassified_packets_pass_at_once() {
        let cfg = config(100);
        let mut v6 = vec![0u8; 80];
        v6[0] = 0x60;
        let other = packet([192, 168, 0, 1], RX, 1, 2, 100, 0);
        let between_senders = packet(S0, S1, 1, 2, 100, 0);
        let inputs = vec![(1_000, v6.clone()), (2_000, other.clone()), (3_000, between_senders.clone())];
        let (io, emu, _, summary) = run(&cfg, inputs, 0, 10_000_000);
        assert_eq!(io.outputs, vec![(1_000, v6), (2_000, other), (3_000, between_senders)]);
        assert_eq!(emu.c.forwarded_unclassified, 3);
        assert_eq!(summary["forwarded_unclassified"], 3);
        assert_eq!(summary["pkts"], 0);
    }

    #[test]
    fn ecn_marks_reach_the_wire_with_valid_checksums() {
        let mut cfg = config(100);
        cfg.bottleneck = serde_json::from_value(json!({
            "rate_bps": 100_000_000, "delay_ns": 9_000_000, "loss": 0.0, "buffer_bytes": null,
            "buffer_pkts": 100, "qdisc": {"kind": "step_ecn", "threshold_bytes": 3000}
        }))
        .unwrap();
        // Ten ECT(0) packets at once: those arriving to a backlog of at
        // least 3000 B (two queued packets) are marked CE.
        let inputs = (0..10).map(|i| (0, packet(S0, RX, 1000 + i, 5201, 1500, 2))).collect();
        let (io, _, _, summary) = run(&cfg, inputs, 0, 1_000_000_000);
        assert_eq!(io.outputs.len(), 10);
        let marked: Vec<bool> = io.outputs.iter().map(|(_, p)| p[1] & 3 == 3).collect();
        assert_eq!(marked, [false, false, false, true, true, true, true, true, true, true]);
        for (_, p) in &io.outputs {
            assert_eq!(u16::from_be_bytes([p[10], p[11]]), crate::ipv4::header_checksum(p));
        }
        assert_eq!(summary["links"]["bottleneck"]["ecn_marks"], 7);
    }

    #[test]
    fn a_stop_request_ends_the_loop() {
        let cfg = config(100);
        let mut emu = Emulator::new(build_links(&cfg), addresses(&cfg), Pool::new(2048, 4), 0, 100_000_000, 1, Box::new(io::sink()));
        let mut io = FakeIo { t: 0, inputs: VecDeque::new(), outputs: vec![], wake_late: 0 };
        let calls = std::cell::Cell::new(0);
        let stop = || {
            calls.set(calls.get() + 1);
            calls.get() > 3
        };
        assert_eq!(emu.run(&mut io, u64::MAX, &stop), StopReason::Signal);
        let s = emu.finish(&mut io, StopReason::Signal, json!({"extra": 1}));
        assert_eq!((s["stop_reason"].as_str(), s["extra"].as_i64()), (Some("signal"), Some(1)));
    }

    #[test]
    fn random_loss_is_seeded() {
        let mut cfg = config(100_000);
        cfg.bottleneck.loss = 0.1;
        let inputs: Vec<_> = (0..2000u64).map(|i| (i * 200_000, packet(S0, RX, 1, 2, 100, 0))).collect();
        let (a, _, _, sa) = run(&cfg, inputs.clone(), 0, 1_000_000_000);
        let (b, _, _, _) = run(&cfg, inputs, 0, 1_000_000_000);
        let lost = sa["links"]["bottleneck"]["random_losses"].as_u64().unwrap();
        assert!((150..250).contains(&lost), "{lost}");
        assert_eq!(a.outputs.len() as u64, 2000 - lost);
        assert_eq!(a.outputs, b.outputs);
    }
}
