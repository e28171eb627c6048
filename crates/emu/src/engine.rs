//! The emulator's event loop: a network of `netcore` links (the simulator's
//! links and queue disciplines) driven by a real clock and a packet device.
//!
//! Every link call gets the time the event was *due*, not the time the loop
//! got round to it, so a late wake-up delays a packet's write but never
//! shifts the link's schedule (the same arithmetic as the simulator's). A
//! packet read from the device enters the first link of its path at the
//! clock's reading just after the read, after every event due by then has
//! been processed; it is written back when it leaves the last one.
//!
//! The loop only *wakes* for what must happen on time: a packet leaving its
//! last link (a write), a route change, a sample. An event inside the
//! network (a packet finishing serialisation on, or arriving at the end of,
//! a link that is not its last) is processed whenever the loop next runs —
//! always before any packet read later enters a link, and at its own due
//! time, so the schedule is the same — but waking for it would cost a
//! sleep and a wake-up per hop. For that each event carries a *wake key*: a
//! lower bound of the time it can lead to a write (its time plus the least
//! propagation delay left on any path through that link), and the loop
//! sleeps until the smallest key. On a chain of K links this takes the
//! wake-ups per packet from ~2K to ~1.
//!
//! The loop is generic over [`Io`] (the device and the clock), so tests drive
//! it with a fake device and a virtual clock.

use crate::frame::{Frame, Pool, Route, NO_FLOW};
use crate::hist::Hist;
use crate::ipv4;
use crate::route::Routing;
use netcore::link::{Due, Link};
use netcore::{Nanos, NS_PER_US};
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
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

/// A flow moved: (flow index, path, return path; None: the return path stays).
pub type Move = (u16, u16, Option<u16>);

/// Flows moved to new paths at a given time (a route event, or a decision
/// of the controller).
#[derive(Clone, Debug)]
pub struct RouteChange {
    pub at: Nanos,
    pub moves: Vec<Move>,
}

/// One row of the run's `events` table (docs/interfaces.md §2).
#[derive(Clone, Debug, PartialEq)]
pub struct EventRow {
    pub time_us: i64,
    pub kind: &'static str,
    pub flow_id: Option<u32>,
    pub state: Option<String>,
    pub link: Option<String>,
    pub detail: String,
}

impl EventRow {
    fn json(&self) -> Value {
        json!({"time_us": self.time_us, "kind": self.kind, "flow_id": self.flow_id, "state": self.state,
               "link": self.link, "detail": self.detail})
    }
}

/// What the controller sees at each sample (docs/interfaces.md §1, "controller").
pub struct SampleView<'a> {
    /// The end of the interval (monotonic ns).
    pub at: Nanos,
    pub interval: Nanos,
    /// Utilisation of each link over the interval (0 for pipes too: they are measured as well).
    pub utilisation: &'a [f64],
    /// Per flow (routing order): sequence bytes delivered so far, and over the interval.
    pub delivered: &'a [(u64, u64)],
    /// Per flow: its current path and return path.
    pub paths: &'a [u16],
    pub rets: &'a [u16],
    /// The path table and link names (for [`SampleView::path_text`]).
    pub routes: &'a [Vec<u16>],
    pub names: &'a [String],
}

impl SampleView<'_> {
    pub fn path_text(&self, path: u16) -> String {
        path_text(self.routes, self.names, path)
    }

    /// "path: ...; return_path: ..." (the simulator's wording).
    pub fn route_text(&self, path: u16, ret: u16) -> String {
        format!("path: {}; return_path: {}", self.path_text(path), self.path_text(ret))
    }
}

fn path_text(routes: &[Vec<u16>], names: &[String], path: u16) -> String {
    routes[path as usize].iter().map(|&l| names[l as usize].as_str()).collect::<Vec<_>>().join(" ")
}

/// A path controller run at every sample interval (the NOTED controller).
pub trait PathControl {
    /// Decide: flows to move now (flow index, path, return path or None to
    /// keep it), and the rows to record (their time is set by the caller).
    fn on_sample(&mut self, view: &SampleView) -> (Vec<Move>, Vec<EventRow>);
    /// A route event moved flow `id` (a flow the controller had moved stays
    /// where the event put it).
    fn on_route_event(&mut self, _id: u32) {}
}

/// The network the emulator carries packets over.
pub struct Net {
    pub links: Vec<Link<Frame>>,
    /// Directed link names (the `queue` table's `link`).
    pub names: Vec<String>,
    pub routing: Routing,
    /// Route events, sorted by time.
    pub changes: Vec<RouteChange>,
    pub controller: Option<Box<dyn PathControl>>,
}

impl Net {
    /// A path's link names, for an event's detail.
    pub fn path_text(&self, path: u16) -> String {
        path_text(&self.routing.paths, &self.names, path)
    }
}

pub struct Emulator {
    pub net: Net,
    heap: BinaryHeap<Reverse<(Nanos, u64, u32)>>,
    seq: u64,
    /// Per event code (a link's wake, or its head's arrival: at most one of
    /// each is pending): its due time (MAX: none pending), and
    /// what to add for its wake key (the least propagation delay from then to
    /// the end of any path through the link).
    pending: Vec<Nanos>,
    wake_after: Vec<Nanos>,
    pool: Rc<Pool>,
    late_tolerance: Nanos,
    pub c: Counters,
    /// Links that queue (sampled), in link order.
    sampled: Vec<usize>,
    /// Per link: lateness of the packets that crossed it and were delivered
    /// this interval / over the run (used for sampled links only).
    lat: Vec<Hist>,
    lat_total: Vec<Hist>,
    /// All delivered packets, this interval / the run.
    lat_all: Hist,
    lat_all_total: Hist,
    late_interval: u64,
    /// Next route change.
    next_change: usize,
    /// Event rows since the last stats line, and all of them.
    events_new: Vec<EventRow>,
    pub events: Vec<EventRow>,
    /// Per link: tx_bytes at the last sample; per flow: delivered at the last sample.
    last_tx: Vec<u64>,
    last_delivered: Vec<u64>,
    // Sampling.
    t0: Nanos,
    interval: Nanos,
    next_sample: Nanos,
    /// (wall, cpu, spin) at the last sample and at the start.
    last_sample: (Nanos, u64, u64),
    started: (Nanos, u64, u64),
    stats: Box<dyn Write>,
}

/// Event code: link index × 2, + 1 for an arrival (else a wake).
fn code(link: usize, arrive: bool) -> u32 {
    (link as u32) << 1 | arrive as u32
}

impl Emulator {
    pub fn new(net: Net, pool: Rc<Pool>, t0: Nanos, interval: Nanos, late_tolerance: Nanos, stats: Box<dyn Write>) -> Emulator {
        assert!(interval > 0);
        assert_eq!(net.links.len(), net.names.len());
        let n = net.links.len();
        let sampled = (0..n).filter(|&l| net.links[l].queues()).collect();
        let nflows = net.routing.flows.len();
        // Per link: the least propagation delay left after it on any path
        // through it (0 where a path ends there).
        let mut rest = vec![Nanos::MAX; n];
        for p in &net.routing.paths {
            let mut after = 0;
            for &l in p.iter().rev() {
                let l = l as usize;
                rest[l] = rest[l].min(after);
                after += net.links[l].delay;
            }
        }
        // A wake's packets reach the far end after it (`Link::wake` comes
        // a propagation delay early), so both kinds of event may wait as
        // long as what is left of the path after the link.
        let wake_after = (0..2 * n)
            .map(|c| {
                let l = c >> 1;
                if rest[l] == Nanos::MAX { 0 } else { rest[l] }
            })
            .collect();
        Emulator {
            heap: BinaryHeap::with_capacity(4096),
            seq: 0,
            pending: vec![Nanos::MAX; 2 * n],
            wake_after,
            pool,
            late_tolerance,
            c: Counters::default(),
            sampled,
            lat: vec![Hist::default(); n],
            lat_total: vec![Hist::default(); n],
            lat_all: Hist::default(),
            lat_all_total: Hist::default(),
            late_interval: 0,
            next_change: 0,
            events_new: Vec::new(),
            events: Vec::new(),
            last_tx: vec![0; n],
            last_delivered: vec![0; nflows],
            t0,
            interval,
            next_sample: 0,
            last_sample: (0, 0, 0),
            started: (0, 0, 0),
            stats,
            net,
        }
    }

    fn schedule(&mut self, at: Nanos, code: u32) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, code)));
        debug_assert_eq!(self.pending[code as usize], Nanos::MAX, "one pending event per link and kind");
        self.pending[code as usize] = at;
    }

    fn link_of(&self, f: &Frame) -> usize {
        self.net.routing.paths[f.route.path as usize][f.hop as usize] as usize
    }

    fn offer(&mut self, f: Frame, now: Nanos) {
        let l = self.link_of(&f);
        let due = self.net.links[l].offer(f, now).due;
        self.schedule_link(l, due);
    }

    /// Every link's queue brought up to `at`, for a reading.
    fn settle(&mut self, at: Nanos) {
        for l in 0..self.net.links.len() {
            let due = self.net.links[l].settle(at);
            self.schedule_link(l, due);
        }
    }

    fn schedule_link(&mut self, l: usize, due: Due) {
        if let Some(t) = due.arrive {
            self.schedule(t, code(l, true));
        }
        if let Some(t) = due.wake {
            self.schedule(t, code(l, false));
        }
    }

    /// When the loop must be awake next for the network: the smallest wake
    /// key of the pending events (a scan: at most two per link).
    fn next_wake(&self) -> Nanos {
        self.pending
            .iter()
            .zip(&self.wake_after)
            .filter(|(&at, _)| at != Nanos::MAX)
            .map(|(&at, &after)| at + after)
            .min()
            .unwrap_or(Nanos::MAX)
    }

    /// Process every event due by `now`, each at its own due time.
    fn run_due<I: Io>(&mut self, io: &mut I, now: Nanos) {
        loop {
            let next_link = self.heap.peek().map_or(Nanos::MAX, |Reverse(e)| e.0);
            let next_change = self.net.changes.get(self.next_change).map_or(Nanos::MAX, |c| c.at);
            if next_change <= now && next_change <= next_link {
                let ch = self.net.changes[self.next_change].clone();
                self.next_change += 1;
                self.apply(ch.at, &ch.moves);
                continue;
            }
            if next_link > now {
                break;
            }
            let Some(Reverse((at, _, code))) = self.heap.pop() else { break };
            self.pending[code as usize] = Nanos::MAX;
            let l = (code >> 1) as usize;
            if code & 1 == 0 {
                let due = self.net.links[l].wake(at);
                self.schedule_link(l, due);
            } else {
                let (mut f, next) = self.net.links[l].arrive();
                if let Some(t) = next {
                    self.schedule(t, self::code(l, true));
                }
                f.hop += 1;
                if (f.hop as usize) < self.net.routing.paths[f.route.path as usize].len() {
                    self.offer(f, at);
                } else {
                    self.deliver(io, f, at);
                }
            }
        }
    }

    /// Move flows to new paths at `at` and record it (kind "route", or the
    /// controller's action on `link`).
    fn apply(&mut self, at: Nanos, moves: &[Move]) {
        for &(fi, path, ret) in moves {
            let f = &mut self.net.routing.flows[fi as usize];
            f.path = path;
            f.ret = ret.unwrap_or(f.ret);
            let (id, ret) = (f.id, f.ret);
            let detail = format!("path: {}; return_path: {}", self.net.path_text(path), self.net.path_text(ret));
            let row = EventRow { time_us: self.time_us(at), kind: "route", flow_id: Some(id), state: None, link: None, detail };
            self.record(row);
            if let Some(c) = self.net.controller.as_mut() {
                c.on_route_event(id);
            }
        }
    }

    fn record(&mut self, row: EventRow) {
        self.events_new.push(row.clone());
        self.events.push(row);
    }

    /// Write a packet that has crossed every link of its path.
    fn deliver<I: Io>(&mut self, io: &mut I, mut f: Frame, due: Nanos) {
        let t = io.now();
        match io.send(f.bytes_for_write()) {
            Ok(()) => self.c.pkts_written += 1,
            Err(_) => self.c.tun_write_errors += 1,
        }
        let late = t.saturating_sub(due);
        for &l in &self.net.routing.paths[f.route.path as usize] {
            self.lat[l as usize].add(late);
        }
        self.lat_all.add(late);
        if late > self.late_tolerance {
            self.late_interval += 1;
            self.c.late_pkts += 1;
        }
        if f.route.flow != NO_FLOW && f.route.data {
            self.net.routing.flows[f.route.flow as usize].on_delivered(f.seq, f.seq_len, f.syn);
        }
    }

    /// A packet just read, at time `t`.
    fn on_packet<I: Io>(&mut self, io: &mut I, buf: Box<[u8]>, len: usize, t: Nanos) {
        self.c.pkts_read += 1;
        let class: Option<(ipv4::Header, Route)> =
            ipv4::parse(&buf[..len]).and_then(|h| self.net.routing.classify(&h).map(|r| (h, r)));
        match class {
            Some((h, route)) => {
                if self.net.routing.forward[route.path as usize] {
                    self.c.forward_pkts += 1;
                } else {
                    self.c.reverse_pkts += 1;
                }
                let f = Frame::new(buf, self.pool.clone(), len, &h, route);
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
                let due = self.next_wake();
                let change = self.net.changes.get(self.next_change).map_or(Nanos::MAX, |c| c.at);
                let deadline = due.min(change).min(self.next_sample).min(stop_at).min(now + MAX_WAIT);
                io.wait(deadline);
            }
        }
    }

    fn link_json(&self, l: usize, at: Nanos, utilisation: Option<f64>, lat: &Hist) -> Value {
        let link = &self.net.links[l];
        let q = link.queue(at).expect("sampled links have a queue");
        let (tx_pkts, tx_bytes) = link.sent(at);
        let mut v = json!({
            "backlog_bytes": q.backlog_bytes,
            "backlog_pkts": q.backlog_pkts,
            "drops": q.stats.dropped,
            "random_losses": link.random_losses,
            "ecn_marks": q.stats.ecn_marked,
            "tx_pkts": tx_pkts,
            "tx_bytes": tx_bytes,
            "lateness_us": lateness_json(lat),
        });
        if let Some(u) = utilisation {
            v["utilisation"] = json!(u);
        }
        v
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

    /// Per flow (id, delivered bytes so far) for the stats line.
    fn flows_json(&self) -> Value {
        let r = &self.net.routing;
        Value::Object(
            r.flows
                .iter()
                .map(|f| (f.id.to_string(), json!({"delivered_bytes": f.delivered, "path": f.path, "return_path": f.ret})))
                .collect(),
        )
    }

    /// One line of the stats file, for the interval ending at `at`.
    fn sample<I: Io>(&mut self, io: &mut I, at: Nanos) {
        let reading = (io.now(), io.cpu_ns(), io.spin_ns());
        let (cpu, spin) = Self::fractions(reading, self.last_sample);
        self.settle(at);
        // Utilisation of every link over the interval: the controller's input.
        let bits = self.interval as f64 / 1e9;
        let util: Vec<f64> = self
            .net
            .links
            .iter()
            .zip(&self.last_tx)
            .map(|(l, &last)| (l.sent(at).1 - last) as f64 * 8.0 / (l.rate_bps as f64 * bits))
            .collect();
        for (l, last) in self.net.links.iter().zip(self.last_tx.iter_mut()) {
            *last = l.sent(at).1;
        }
        if let Some(mut ctl) = self.net.controller.take() {
            let delivered: Vec<(u64, u64)> =
                self.net.routing.flows.iter().zip(&self.last_delivered).map(|(f, &d)| (f.delivered, f.delivered - d)).collect();
            let paths: Vec<u16> = self.net.routing.flows.iter().map(|f| f.path).collect();
            let rets: Vec<u16> = self.net.routing.flows.iter().map(|f| f.ret).collect();
            let view = SampleView {
                at,
                interval: self.interval,
                utilisation: &util,
                delivered: &delivered,
                paths: &paths,
                rets: &rets,
                routes: &self.net.routing.paths,
                names: &self.net.names,
            };
            let (moves, rows) = ctl.on_sample(&view);
            for mut row in rows {
                row.time_us = self.time_us(at);
                self.record(row);
            }
            for (fi, path, ret) in moves {
                let f = &mut self.net.routing.flows[fi as usize];
                f.path = path;
                f.ret = ret.unwrap_or(f.ret);
            }
            self.net.controller = Some(ctl);
        }
        for (f, d) in self.net.routing.flows.iter().zip(self.last_delivered.iter_mut()) {
            *d = f.delivered;
        }
        let mut links = serde_json::Map::new();
        for &l in &self.sampled {
            links.insert(self.net.names[l].clone(), self.link_json(l, at, Some(util[l]), &self.lat[l]));
        }
        let mut line = json!({
            "time_us": self.time_us(at),
            "links": links,
            "lateness_us": lateness_json(&self.lat_all),
            "pkts": self.lat_all.count,
            "late_pkts": self.late_interval,
            "tun_read_errors": self.c.tun_read_errors,
            "tun_write_errors": self.c.tun_write_errors,
            "forwarded_unclassified": self.c.forwarded_unclassified,
            "cpu_busy_fraction": cpu,
            "spin_fraction": spin,
        });
        if !self.net.routing.flows.is_empty() {
            line["flows"] = self.flows_json();
        }
        if !self.events_new.is_empty() {
            line["events"] = Value::Array(self.events_new.drain(..).map(|e| e.json()).collect());
        }
        self.write_line(&line);
        for l in 0..self.lat.len() {
            let h = std::mem::take(&mut self.lat[l]);
            self.lat_total[l].merge(&h);
        }
        let h = std::mem::take(&mut self.lat_all);
        self.lat_all_total.merge(&h);
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
        self.settle(now);
        for l in 0..self.lat.len() {
            let h = std::mem::take(&mut self.lat[l]);
            self.lat_total[l].merge(&h);
        }
        let h = std::mem::take(&mut self.lat_all);
        self.lat_all_total.merge(&h);
        let mut links = serde_json::Map::new();
        for &l in &self.sampled {
            links.insert(self.net.names[l].clone(), self.link_json(l, now, None, &self.lat_total[l]));
        }
        let c = &self.c;
        let mut v = json!({
            "final": true,
            "stop_reason": match reason { StopReason::StopAt => "stop_at", StopReason::Signal => "signal" },
            "time_us": self.time_us(now),
            "wall_us": now.saturating_sub(self.started.0) / NS_PER_US,
            "links": links,
            "lateness_us": lateness_json(&self.lat_all_total),
            "pkts": self.lat_all_total.count,
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
        if !self.net.routing.flows.is_empty() {
            v["flows"] = self.flows_json();
        }
        if !self.events.is_empty() || self.net.controller.is_some() || !self.net.changes.is_empty() {
            v["events"] = Value::Array(self.events.iter().map(|e| e.json()).collect());
        }
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
    use crate::EmuConfig;
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

    const BOTTLENECK: usize = 0;
    const REVERSE: usize = 1;

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
            cfg.build_net().unwrap(),
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
        assert_eq!(emu.net.links[BOTTLENECK].sent(Nanos::MAX).0, 1);
        assert_eq!(emu.net.links[REVERSE].sent(Nanos::MAX).0, 1);
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
        assert_eq!(emu.net.links[BOTTLENECK].queue(Nanos::MAX).unwrap().stats.dropped, 39);
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
        cfg.bottleneck = Some(serde_json::from_value(json!({
            "rate_bps": 100_000_000, "delay_ns": 9_000_000, "loss": 0.0, "buffer_bytes": null,
            "buffer_pkts": 100, "qdisc": {"kind": "step_ecn", "threshold_bytes": 3000}
        }))
        .unwrap());
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
        let mut emu = Emulator::new(cfg.build_net().unwrap(), Pool::new(2048, 4), 0, 100_000_000, 1, Box::new(io::sink()));
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
        cfg.bottleneck.as_mut().unwrap().loss = 0.1;
        let inputs: Vec<_> = (0..2000u64).map(|i| (i * 200_000, packet(S0, RX, 1, 2, 100, 0))).collect();
        let (a, _, _, sa) = run(&cfg, inputs.clone(), 0, 1_000_000_000);
        let (b, _, _, _) = run(&cfg, inputs, 0, 1_000_000_000);
        let lost = sa["links"]["bottleneck"]["random_losses"].as_u64().unwrap();
        assert!((150..250).contains(&lost), "{lost}");
        assert_eq!(a.outputs.len() as u64, 2000 - lost);
        assert_eq!(a.outputs, b.outputs);
    }

    /// Two hosts, two routers; a direct link and a two-link detour.
    fn graph_config(events: Value) -> EmuConfig {
        let link = |name: &str, from: &str, to: &str, rate: u64, delay: u64, pkts: Option<u64>| {
            json!({"name": name, "from": from, "to": to, "rate_bps": rate, "delay_ns": delay, "loss": 0.0,
                   "buffer_bytes": null, "buffer_pkts": pkts, "qdisc": {"kind": "fifo"}})
        };
        serde_json::from_value(json!({
            "tun": "fake", "seed": 1, "stop_at_monotonic_ns": 0, "sample_interval_ns": 100_000_000,
            "t0_monotonic_ns": 0, "stats_path": "/dev/null", "late_tolerance_ns": 20_000,
            "network": {"nodes": [{"name": "a", "kind": "host"}, {"name": "b", "kind": "host"},
                                  {"name": "r1", "kind": "router"}, {"name": "r2", "kind": "router"},
                                  {"name": "r3", "kind": "router"}],
                        "links": [link("primary", "r1", "r2", 100_000_000, 10_000_000, Some(100)),
                                  link("primary/back", "r2", "r1", 100_000_000, 10_000_000, Some(100)),
                                  link("alt1", "r1", "r3", 50_000_000, 1_000_000, Some(100)),
                                  link("alt2", "r3", "r2", 50_000_000, 1_000_000, Some(100)),
                                  link("alt2/back", "r2", "r3", 50_000_000, 1_000_000, Some(100)),
                                  link("alt1/back", "r3", "r1", 50_000_000, 1_000_000, Some(100)),
                                  link("a-r1", "a", "r1", 10_000_000_000, 0, None),
                                  link("r1-a", "r1", "a", 10_000_000_000, 0, None),
                                  link("b-r2", "b", "r2", 10_000_000_000, 0, None),
                                  link("r2-b", "r2", "b", 10_000_000_000, 0, None)]},
            "hosts": [{"name": "a", "ip": "10.1.0.2"}, {"name": "b", "ip": "10.2.0.2"}],
            "flows": [{"id": 3, "src": "a", "dst": "b", "client_port": 10003, "server_port": 5201,
                       "path": ["a-r1", "primary", "r2-b"], "return_path": ["b-r2", "primary/back", "r1-a"]}],
            "events": events,
        }))
        .unwrap()
    }

    fn with_seq(mut p: Vec<u8>, seq: u32, syn: bool) -> Vec<u8> {
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        if syn {
            p[33] = 0x02;
        }
        p
    }

    #[test]
    fn graph_paths_by_flow_ports_and_a_route_change() {
        let (a, b) = ([10, 1, 0, 2], [10, 2, 0, 2]);
        let cfg = graph_config(json!([{"at_ns": 50_000_000, "flows": [3],
            "path": ["a-r1", "alt1", "alt2", "r2-b"], "return_path": ["b-r2", "alt2/back", "alt1/back", "r1-a"]}]));
        let inputs = vec![
            (0, with_seq(packet(a, b, 10003, 5201, 40, 0), 999, true)),
            (1_000_000, with_seq(packet(a, b, 10003, 5201, 1040, 0), 1000, false)),
            (2_000_000, packet(b, a, 5201, 10003, 40, 0)),
            // Another connection between the same hosts: the shortest path by delay (the detour, 2 ms).
            (3_000_000, packet(a, b, 10009, 5201, 1000, 0)),
            // After the route change at 50 ms: the detour.
            (60_000_000, with_seq(packet(a, b, 10003, 5201, 1040, 0), 2000, false)),
            (61_000_000, packet(b, a, 5201, 10003, 40, 0)),
        ];
        let (io, emu, sink, summary) = run(&cfg, inputs, 0, 300_000_000);
        let tx = |bytes: u64, rate: u64| (bytes * 8 * 1_000_000_000).div_ceil(rate);
        let times: Vec<Nanos> = io.outputs.iter().map(|o| o.0).collect();
        let mut want = vec![
            tx(40, 10_000_000_000) + tx(40, 100_000_000) + 10_000_000 + tx(40, 10_000_000_000),
            1_000_000 + tx(1040, 10_000_000_000) + tx(1040, 100_000_000) + 10_000_000 + tx(1040, 10_000_000_000),
            3_000_000 + tx(1000, 10_000_000_000) + 2 * (tx(1000, 50_000_000) + 1_000_000) + tx(1000, 10_000_000_000),
            2_000_000 + tx(40, 10_000_000_000) + tx(40, 100_000_000) + 10_000_000 + tx(40, 10_000_000_000),
            60_000_000 + tx(1040, 10_000_000_000) + 2 * (tx(1040, 50_000_000) + 1_000_000) + tx(1040, 10_000_000_000),
            61_000_000 + tx(40, 10_000_000_000) + 2 * (tx(40, 50_000_000) + 1_000_000) + tx(40, 10_000_000_000),
        ];
        want.sort();
        assert_eq!(times, want);
        // Two data segments of 1000 payload bytes (20 + 20 bytes of headers) past the SYN.
        assert_eq!(emu.net.routing.flows[0].delivered, 2000);
        assert_eq!(summary["flows"]["3"]["delivered_bytes"], 2000);
        let ev = &summary["events"][0];
        assert_eq!((ev["time_us"].as_i64(), ev["kind"].as_str(), ev["flow_id"].as_u64()), (Some(50_000), Some("route"), Some(3)));
        assert_eq!(ev["detail"], "path: a-r1 alt1 alt2 r2-b; return_path: b-r2 alt2/back alt1/back r1-a");
        // Every queueing link is in the stats, by name, with tx_bytes and utilisation; pipes are not.
        let text = String::from_utf8(sink.0.borrow().clone()).unwrap();
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        let links = first["links"].as_object().unwrap();
        let mut names: Vec<&str> = links.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(names, ["alt1", "alt1/back", "alt2", "alt2/back", "primary", "primary/back"]);
        assert_eq!(links["primary"]["tx_bytes"], 1080);
        let u = links["primary"]["utilisation"].as_f64().unwrap();
        assert!((u - 1080.0 * 8.0 / 1e7).abs() < 1e-12, "{u}");
        assert_eq!(first["events"][0]["kind"], "route");
        assert_eq!(summary["forwarded_unclassified"], 0);
    }

    #[test]
    fn bad_graphs_are_errors_naming_the_field() {
        let mut cfg = graph_config(json!([]));
        cfg.flows[0].path = Some(vec!["a-r1".into(), "alt2".into(), "r2-b".into()]);
        let e = cfg.build_net().err().unwrap();
        assert!(e.contains("flow 3: path") && e.contains("alt2"), "{e}");
        let mut cfg = graph_config(json!([]));
        cfg.flows[0].path = Some(vec!["a-r1".into(), "nosuch".into()]);
        assert!(cfg.build_net().err().unwrap().contains("no link \"nosuch\""));
        let cfg = graph_config(json!([{"at_ns": 1, "flows": [4], "path": [], "return_path": []}]));
        assert!(cfg.build_net().err().unwrap().contains("events[0]: no flow 4"));
    }

    #[test]
    fn the_noted_controller_moves_a_transfer_off_a_saturated_link_and_back() {
        let (a, b) = ([10, 1, 0, 2], [10, 2, 0, 2]);
        let mut cfg = graph_config(json!([]));
        // A 10 Mbit/s primary link: the flow below offers ~16.6 Mbit/s.
        cfg.network.as_mut().unwrap()["links"][0]["rate_bps"] = json!(10_000_000);
        cfg.flows[0].kind = Some("transfer".into());
        cfg.flows[0].size_bytes = Some(100_000_000);
        cfg.controller = Some(json!({"kind": "noted", "link": "primary", "threshold": 0.9, "hold_ns": 200_000_000,
            "release_threshold": 0.5, "release_hold_ns": 100_000_000, "min_bytes": 1000, "min_rate_bps": 0,
            "alternatives": [{"flow": 3, "path": ["a-r1", "alt1", "alt2", "r2-b"]}]}));
        let mut inputs = vec![(0, with_seq(packet(a, b, 10003, 5201, 40, 0), 0, true))];
        for i in 0..1200u32 {
            inputs.push((1_000_000 + i as u64 * 500_000, with_seq(packet(a, b, 10003, 5201, 1040, 0), 1 + i * 1000, false)));
        }
        let (_, emu, _, summary) = run(&cfg, inputs, 0, 1_200_000_000);
        let rows: Vec<(i64, Option<u32>, String)> = emu
            .events
            .iter()
            .map(|e| (e.time_us, e.flow_id, e.state.clone().unwrap()))
            .collect();
        let want = [
            (100_000, None, "decision"),
            (300_000, None, "action"),
            (300_000, Some(3), "action"),
            // The flow stops sending at 601 ms; from the 700 ms sample the
            // link plus the moved flow are below 0.5, for 100 ms at 800 ms.
            (800_000, None, "released"),
            (800_000, Some(3), "released"),
            (900_000, None, "idle"),
        ];
        let want: Vec<(i64, Option<u32>, String)> = want.iter().map(|&(t, f, s)| (t, f, s.to_string())).collect();
        assert_eq!(rows, want, "{:?}", emu.events);
        assert!(emu.events.iter().all(|e| e.kind == "controller" && e.link.as_deref() == Some("primary")));
        assert_eq!(emu.events[2].detail, "moved: path: a-r1 alt1 alt2 r2-b; return_path: b-r2 primary/back r1-a");
        assert!(emu.net.links[2].sent(Nanos::MAX).0 > 500, "the detour carried the flow after the move");
        assert_eq!(summary["events"].as_array().unwrap().len(), 6);
    }

    /// The emulator's own CPU time per packet and hop, on a virtual clock (no
    /// device, no sleeping; the fake device's copies included): `cargo test --release -p emu hop_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn hop_cost() {
        let (a, b) = ([10, 1, 0, 2], [10, 2, 0, 2]);
        for hops in [1usize, 4, 16, 64] {
            let mut links = vec![
                json!({"name": "a-r0", "from": "a", "to": "r0", "rate_bps": 10_000_000_000u64, "delay_ns": 0}),
                json!({"name": "rN-b", "from": format!("r{hops}"), "to": "b", "rate_bps": 10_000_000_000u64, "delay_ns": 0}),
                json!({"name": "b-rN", "from": "b", "to": format!("r{hops}"), "rate_bps": 10_000_000_000u64, "delay_ns": 0}),
                json!({"name": "r0-a", "from": "r0", "to": "a", "rate_bps": 10_000_000_000u64, "delay_ns": 0}),
            ];
            for i in 0..hops {
                links.push(json!({"name": format!("L{i}"), "from": format!("r{i}"), "to": format!("r{}", i + 1),
                    "rate_bps": 1_000_000_000u64, "delay_ns": 9_000_000 / hops as u64, "buffer_pkts": 1000, "qdisc": "fifo"}));
                links.push(json!({"name": format!("L{i}/back"), "from": format!("r{}", i + 1), "to": format!("r{i}"),
                    "rate_bps": 1_000_000_000u64, "delay_ns": 9_000_000 / hops as u64, "buffer_pkts": 1000, "qdisc": "fifo"}));
            }
            let mut nodes = vec![json!({"name": "a", "kind": "host"}), json!({"name": "b", "kind": "host"})];
            nodes.extend((0..=hops).map(|i| json!({"name": format!("r{i}"), "kind": "router"})));
            let cfg: EmuConfig = serde_json::from_value(json!({
                "tun": "fake", "seed": 1, "stop_at_monotonic_ns": 0, "sample_interval_ns": 100_000_000,
                "t0_monotonic_ns": 0, "stats_path": "/dev/null", "late_tolerance_ns": 20_000,
                "network": {"nodes": nodes, "links": links},
                "hosts": [{"name": "a", "ip": "10.1.0.2"}, {"name": "b", "ip": "10.2.0.2"}],
                "flows": [{"id": 0, "src": "a", "dst": "b", "client_port": 10000, "server_port": 5201}],
            }))
            .unwrap();
            // 200k full packets at 0.9 Gbit/s (one every 13.3 us).
            let n = 200_000u64;
            let inputs: Vec<_> = (0..n).map(|i| (i * 13_333, packet(a, b, 10000, 5201, 1500, 0))).collect();
            let start = crate::tun::thread_cpu_ns();
            let (io, ..) = run(&cfg, inputs, 0, n * 13_333 + 100_000_000);
            let ns = (crate::tun::thread_cpu_ns() - start) as f64 / n as f64;
            assert_eq!(io.outputs.len() as u64, n);
            println!("{hops:3} hops: {ns:7.0} ns per packet, {:5.0} ns per hop", ns / (hops + 2) as f64);
        }
    }
}
