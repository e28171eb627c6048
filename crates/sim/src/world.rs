//! The simulated world: the links of a `netcore::net::Network` (the
//! dumbbell expanded, or a general graph), the TCP connections of each
//! flow, the applications that drive them, the samplers, the route events
//! and the path controller, and the event loop.
//!
//! Paths: every packet carries a route id (`netcore::net::Routes`) and the
//! index of the link it is on; it is offered to the next link of its route
//! when it reaches the end of one, and delivered after the last. A route
//! change sets the route of packets sent from then on: packets in flight
//! finish their old route (so a shorter new path reorders them).

use crate::cc::{self, CcaReport};
use crate::config::{Controller, FlowKind, RunConfig};
use crate::jitter::{self, HostJitter, Latency};
use crate::events::EventQueue;
use crate::packet::Packet;
use crate::tcp::{ConnOpts, Out, Receiver, Sender, TimerKind};
use crate::trace::{PcapTrace, Point};
use netcore::link::{Due, Link, Stalls};
use netcore::net::{Network, Routes};
use netcore::noted::{self, Candidate};
use netcore::{Nanos, NS_PER_SEC, NS_PER_US};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    LinkWake(u16),
    LinkArrive(u16),
    Timer(u32, TimerKind),
    FlowStart(u32),
    FlowStop(u32),
    RpcNext(u32),
    Sample,
    Route(u32),
    /// A packet held by host jitter leaves its host (connection direction).
    HostOut(u32),
    /// A paused sender's host runs again: its held ACKs.
    SenderResume(u32),
}

/// The header the load generator's client writes first on every
/// connection (`crates/load/src/proto.rs`, `HEADER_LEN`), on the linux and
/// hosts backends alike; the simulated application writes it too, and,
/// as those backends do, results count the flow's bytes after it.
pub const LOAD_HEADER_BYTES: u64 = 44;

struct Connection {
    sender: Sender,
    receiver: Receiver,
    flow: usize,
    /// An RPC's other connection (the opposite direction of the same
    /// exchange, one connection in Linux): every data segment this one
    /// sends carries that one's receiver's ACK (`Packet::piggyback`).
    peer: Option<usize>,
    /// Bytes its client writes before the flow's own (the load
    /// generator's header; none on an RPC's response stream).
    header: u64,
}

impl Connection {
    /// The flow's own bytes that reached the receiving application.
    fn app_delivered(&self) -> u64 {
        self.receiver.delivered().saturating_sub(self.header)
    }
}

struct Flow {
    kind: FlowKind,
    /// Current routes of the data (and RPC requests) and of the return
    /// direction (ACKs, RPC responses).
    route: (u32, u32),
    /// The routes before the controller moved the flow to its alternative.
    home: Option<(u32, u32)>,
    /// Transfer: bytes to deliver, and when the last one was (from start).
    size: u64,
    completion: Option<Nanos>,
    /// The connection whose data crosses the bottleneck (bulk, RPC requests).
    main: usize,
    /// RPC: the response stream.
    resp: Option<usize>,
    start: Nanos,
    stop: Option<Nanos>,
    request_bytes: u64,
    response_bytes: u64,
    think: Nanos,
    // RPC progress
    stopped: bool,
    requests_issued: u64,
    responses_sent: u64,
    responses_done: u64,
    request_start: Nanos,
}

/// The tables of one run (docs/interfaces.md §2).
#[derive(Serialize, Debug, Default)]
pub struct SimResult {
    pub flows: Vec<FlowSummary>,
    pub samples: Samples,
    pub queue: QueueSeries,
    pub rpcs: Rpcs,
    pub events: Events,
    pub stats: RunStats,
}

#[derive(Serialize, Debug, Default, Clone)]
pub struct FlowSummary {
    pub flow_id: u32,
    pub bytes_delivered: u64,
    pub goodput_bps: f64,
    pub sent_segs: u64,
    pub retrans_segs: u64,
    pub rtt_min_us: Option<f64>,
    pub rtt_mean_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    pub active_start_us: u64,
    pub active_stop_us: u64,
    /// Transfer: start to last byte delivered; None otherwise or unfinished.
    pub completion_us: Option<u64>,
}

#[derive(Serialize, Debug, Default)]
pub struct Samples {
    pub flow_id: Vec<u32>,
    pub time_us: Vec<u64>,
    pub cwnd_bytes: Vec<u64>,
    pub srtt_us: Vec<u64>,
    pub delivered_bytes: Vec<u64>,
    pub retrans_segs: Vec<u64>,
    pub inflight_bytes: Vec<u64>,
    pub pacing_rate_bps: Vec<Option<f64>>,
    pub delivery_rate_bps: Vec<f64>,
    pub cca_state: Vec<&'static str>,
    pub bw_est_bps: Vec<Option<f64>>,
}

#[derive(Serialize, Debug, Default)]
pub struct QueueSeries {
    pub link: Vec<String>,
    pub time_us: Vec<u64>,
    pub backlog_bytes: Vec<u64>,
    pub backlog_pkts: Vec<u64>,
    pub drops: Vec<u64>,
    pub random_losses: Vec<u64>,
    pub ecn_marks: Vec<u64>,
    pub lateness_us: Vec<Option<f64>>,
    /// Cumulative bytes the link sent; fraction of its rate used over the
    /// last sample interval.
    pub tx_bytes: Vec<u64>,
    pub utilisation: Vec<f64>,
}

/// Route changes and the controller's states and actions.
#[derive(Serialize, Debug, Default)]
pub struct Events {
    pub time_us: Vec<u64>,
    /// "route" | "controller"
    pub kind: Vec<&'static str>,
    pub flow_id: Vec<Option<u32>>,
    pub state: Vec<Option<&'static str>>,
    pub link: Vec<Option<String>>,
    pub detail: Vec<String>,
}

#[derive(Serialize, Debug, Default)]
pub struct Rpcs {
    pub flow_id: Vec<u32>,
    pub request_bytes: Vec<u64>,
    pub response_bytes: Vec<u64>,
    pub start_us: Vec<u64>,
    pub latency_us: Vec<f64>,
}

#[derive(Serialize, Debug, Default)]
pub struct RunStats {
    pub events: u64,
    /// Packets the dumbbell's bottleneck sent; with a network, every
    /// queueing link's packets summed.
    pub bottleneck_pkts: u64,
    pub sim_time_us: u64,
    /// Retransmission timeouts and tail loss probes over all connections.
    pub rto_count: u64,
    pub tlp_count: u64,
    /// First timeouts by the state they ended, as Linux's TcpExt counts
    /// them: Recovery (TCPSackRecoveryFail), Loss (TCPLossFailures),
    /// Disorder or with segments SACKed (TCPSackFailures).
    pub rto_in_recovery: u64,
    pub rto_in_loss: u64,
    pub rto_in_disorder: u64,
    /// Entries into fast recovery (TCPSackRecovery).
    pub recoveries: u64,
    /// Retransmissions in flight found lost again (TCPLostRetransmit).
    pub lost_retransmits: u64,
}

struct World {
    now: Nanos,
    end: Nanos,
    events: EventQueue<Ev>,
    links: Vec<Link<Packet>>,
    routes: Routes,
    net: Network,
    dumbbell: bool,
    /// Links that queue (not pipes): sampled into the queue table.
    sampled: Vec<usize>,
    /// Per link: tx_bytes at the last sample; and that sample's time.
    last_tx: Vec<u64>,
    last_sample: Nanos,
    /// Route events: flow indices, new route, new return route (None: unchanged).
    route_events: Vec<(Vec<usize>, u32, Option<u32>)>,
    controller: Option<Controller>,
    /// Per controller alternative (same order): its routes.
    alt_routes: Vec<(u32, Option<u32>)>,
    conns: Vec<Connection>,
    /// Some connection has a peer (an RPC flow): `flush` looks for data to carry ACKs.
    has_peers: bool,
    flows: Vec<Flow>,
    flow_ids: Vec<u32>,
    out: Out,
    jitter: HostJitter,
    /// `[tcp] sender_pauses` (empty: none): per sending host, its pauses;
    /// per connection, its sending host (an index into `host_pauses`) and
    /// the ACKs that reached it during a pause, in order.
    host_pauses: Vec<Stalls>,
    sender_host: Vec<u32>,
    held_acks: Vec<VecDeque<Packet>>,
    sample_interval: Nanos,
    /// The config's `pcap`: one connection's packets as its hosts see
    /// them; `traced` is that connection (u32::MAX: none): a compare where
    /// a packet leaves or reaches a host (0.4-0.5 % more instructions in
    /// bench/sim_regression.py --instructions --quick).
    pcap: Option<PcapTrace>,
    /// Set from another thread to end the run at its next sample (None: never).
    cancel: Option<Cancel>,
    /// Why the run ended early, other than `cancel`: a CCA's fault.
    fault: Option<String>,
    traced: u32,
    res: SimResult,
}

/// Run one simulation.
pub fn simulate(cfg: &RunConfig) -> Result<SimResult, String> {
    simulate_cancellable(cfg, None)
}

/// A flag another thread sets to stop a run (the host process was
/// interrupted): the run ends at its next sample, with [`INTERRUPTED`] for
/// its error, so that the thread running it returns instead of being
/// abandoned inside the simulator.
pub type Cancel = Arc<AtomicBool>;

/// The error of a run stopped by its [`Cancel`] flag.
pub const INTERRUPTED: &str = "interrupted";

/// [`simulate`], stopped early (an error) once `cancel` is set.
pub fn simulate_cancellable(cfg: &RunConfig, cancel: Option<Cancel>) -> Result<SimResult, String> {
    cfg.check()?;
    let mut w = World::build(cfg)?;
    w.cancel = cancel;
    if !w.run() {
        return Err(w.fault.take().unwrap_or_else(|| INTERRUPTED.into()));
    }
    let pcap = w.pcap.take();
    let res = w.finish(cfg);
    if let Some(t) = pcap {
        t.finish()?;
    }
    Ok(res)
}

impl World {
    fn build(cfg: &RunConfig) -> Result<World, String> {
        let topo = cfg.topology()?;
        // The dumbbell's access links are pipes: they never drop (Linux's
        // TSQ keeps real host queues short; a drop there would be an artefact).
        let links = topo.net.build_links(cfg.seed);
        let sampled = (0..links.len()).filter(|&l| links[l].queues()).collect();
        let mut routes = Routes::default();
        let flow_routes: Vec<(u32, u32)> =
            topo.routes.iter().map(|r| (routes.intern(&r.path), routes.intern(&r.return_path))).collect();
        let route_events = topo
            .events
            .iter()
            .map(|(_, fis, p, b)| (fis.clone(), routes.intern(p), b.as_ref().map(|b| routes.intern(b))))
            .collect();
        let alt_routes = topo.controller.as_ref().map_or(vec![], |c| {
            c.alternatives.iter().map(|(_, p, b)| (routes.intern(p), b.as_ref().map(|b| routes.intern(b)))).collect()
        });
        let mut w = World {
            now: 0,
            end: cfg.duration_ns,
            events: EventQueue::new(),
            last_tx: vec![0; links.len()],
            last_sample: 0,
            links,
            routes,
            net: topo.net,
            dumbbell: cfg.network.is_none(),
            sampled,
            route_events,
            controller: topo.controller,
            alt_routes,
            conns: Vec::new(),
            has_peers: false,
            flows: Vec::new(),
            flow_ids: Vec::new(),
            out: Out::default(),
            jitter: HostJitter::new(cfg.tcp.host_jitter_ns, cfg.seed),
            host_pauses: Vec::new(),
            sender_host: Vec::new(),
            held_acks: Vec::new(),
            sample_interval: cfg.sample_interval_ns,
            pcap: None,
            cancel: None,
            fault: None,
            traced: u32::MAX,
            res: SimResult::default(),
        };
        let tcp = std::sync::Arc::new(cfg.tcp.clone());
        for (fi, f) in cfg.flows.iter().enumerate() {
            let (path, back) = flow_routes[fi];
            // Each connection's CCA gets its own seed (BBR's random phase).
            let mk = |salt: u64| -> Result<Box<dyn cc::CongestionControl>, String> {
                cc::build(&f.cca, cfg.seed ^ (salt.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
                    .ok_or_else(|| format!("unknown cca {:?}", f.cca))
            };
            let main = w.conns.len();
            let cca = mk(2 * fi as u64 + 1)?;
            let opts = ConnOpts {
                // ECN when the host enables it or the CCA requires it (DCTCP).
                ecn: cfg.tcp.ecn || cca.needs_ecn(),
                ca_needs_ecn: cca.needs_ecn(),
                cwnd_clamp: f.cwnd_clamp,
                max_pacing_rate: f.max_rate_bps.map(|b| b / 8),
                tick_ns: cfg.tcp.hz.map_or(0, |hz| NS_PER_SEC / hz as u64),
                class: f.queue_class.unwrap_or(0),
            };
            w.conns.push(Connection {
                sender: Sender::new(main as u32, path, tcp.clone(), cca, opts),
                receiver: Receiver::new(main as u32, back, tcp.clone(), opts),
                flow: fi,
                peer: None,
                header: LOAD_HEADER_BYTES,
            });
            let resp = if f.kind == FlowKind::Rpc {
                let id = w.conns.len();
                let cca = mk(2 * fi as u64 + 2)?;
                // The clamp is the client's (the linux backend's sock_ops
                // program clamps the client's socket): the server's
                // responses are not clamped.
                let opts = ConnOpts { cwnd_clamp: None, ..opts };
                w.conns.push(Connection {
                    sender: Sender::new(id as u32, back, tcp.clone(), cca, opts),
                    receiver: Receiver::new(id as u32, path, tcp.clone(), opts),
                    flow: fi,
                    peer: Some(main),
                    header: 0,
                });
                w.conns[main].peer = Some(id);
                w.has_peers = true;
                Some(id)
            } else {
                None
            };
            w.flows.push(Flow {
                kind: f.kind,
                route: (path, back),
                home: None,
                size: f.size_bytes.unwrap_or(0),
                completion: None,
                main,
                resp,
                start: f.start_ns,
                stop: f.stop_ns,
                request_bytes: f.request_bytes.unwrap_or(0),
                response_bytes: f.response_bytes.unwrap_or(0).max(1),
                think: f.think_ns.unwrap_or(0),
                stopped: false,
                requests_issued: 0,
                responses_sent: 0,
                responses_done: 0,
                request_start: 0,
            });
            w.flow_ids.push(f.id);
            w.schedule(f.start_ns, Ev::FlowStart(fi as u32));
            if let Some(stop) = f.stop_ns {
                w.schedule(stop, Ev::FlowStop(fi as u32));
            }
        }
        let read = (cfg.tcp.read_latency_median_ns, cfg.tcp.read_latency_p90_ns);
        if read.0 > 0 {
            for (i, c) in w.conns.iter_mut().enumerate() {
                c.receiver.set_read_latency(Latency::read(read.0, read.1, cfg.seed, i as u32));
            }
        }
        if cfg.tcp.sender_pause_every_ns > 0 {
            let (every, length) = (cfg.tcp.sender_pause_every_ns, cfg.tcp.sender_pause_ns);
            let mut index = vec![None; w.net.nodes.len()];
            for c in 0..w.conns.len() {
                // A connection sends from the first node of its data's path
                // (an RPC's response connection: of the flow's return path).
                let f = &w.flows[w.conns[c].flow];
                let route = if c == f.main { f.route.0 } else { f.route.1 };
                let first = w.routes.link(route, 0).expect("a path has a link");
                let host = w.net.ends(first).0;
                let i = *index[host].get_or_insert_with(|| {
                    w.host_pauses.push(jitter::host_pauses(every, length, cfg.seed, host));
                    w.host_pauses.len() as u32 - 1
                });
                w.sender_host.push(i);
                w.held_acks.push(VecDeque::new());
            }
        }
        let pace = (cfg.tcp.pacing_latency_median_ns, cfg.tcp.pacing_latency_p90_ns);
        if pace.0 > 0 {
            for (i, c) in w.conns.iter_mut().enumerate() {
                c.sender.set_pacing_latency(Latency::pacing(pace.0, pace.1, cfg.seed, i as u32));
            }
        }
        if let Some(pc) = &cfg.pcap {
            let Some(fi) = w.flow_ids.iter().position(|&id| id == pc.flow) else {
                return Err(format!("pcap: no flow has id {} (ids: {:?})", pc.flow, w.flow_ids));
            };
            if w.flows[fi].kind == FlowKind::Rpc {
                return Err(format!("pcap: flow {} is an RPC flow; only bulk and transfer flows can be traced", pc.flow));
            }
            w.traced = w.flows[fi].main as u32;
            w.pcap = Some(PcapTrace::create(std::path::Path::new(&pc.dir), pc.flow)?);
        }
        w.schedule(cfg.sample_interval_ns.min(cfg.duration_ns), Ev::Sample);
        for (i, (at, ..)) in topo.events.iter().enumerate() {
            w.schedule(*at, Ev::Route(i as u32));
        }
        Ok(w)
    }

    fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.events.push(at, ev);
    }

    /// Every event up to the end; false if stopped by `cancel` or a CCA's
    /// fault (looked at once per sample: nothing on the per-packet path).
    fn run(&mut self) -> bool {
        while let Some((at, _, ev)) = self.events.pop() {
            if at > self.end {
                break;
            }
            self.now = at;
            self.res.stats.events += 1;
            match ev {
                Ev::LinkWake(l) => self.on_link_wake(l as usize),
                Ev::LinkArrive(l) => self.on_link_arrive(l as usize),
                Ev::Timer(c, kind) => self.on_timer(c as usize, kind),
                Ev::FlowStart(f) => self.on_flow_start(f as usize),
                Ev::FlowStop(f) => self.on_flow_stop(f as usize),
                Ev::RpcNext(f) => self.issue_request(f as usize),
                Ev::Sample => {
                    self.on_sample();
                    if self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) || self.cca_faulted() {
                        return false;
                    }
                }
                Ev::Route(i) => self.on_route_event(i as usize),
                Ev::SenderResume(c) => {
                    while let Some(a) = self.held_acks[c as usize].pop_front() {
                        self.ack_to_sender(c as usize, &a);
                    }
                }
                Ev::HostOut(k) => {
                    let p = self.jitter.release(k);
                    self.offer(p);
                }
            }
        }
        self.now = self.end;
        !self.cca_faulted()
    }

    fn cca_faulted(&mut self) -> bool {
        if self.fault.is_none() {
            self.fault = self.conns.iter().find_map(|c| c.sender.cca().fault()).map(str::to_owned);
        }
        self.fault.is_some()
    }

    /// Put what an endpoint produced on the wire and on the clock.
    fn flush(&mut self) {
        // By index rather than taking `out` out of the world and putting it
        // back: that moved its two vectors' headers through the stack at
        // every flush and stalled on reading them back (3 % of the
        // headline's time). Nothing below adds to `out`.
        let timers = self.out.timers.len();
        for i in 0..timers {
            let (t, c, kind) = self.out.timers[i];
            self.schedule(t, Ev::Timer(c, kind));
        }
        debug_assert_eq!(self.out.timers.len(), timers, "a timer added while flushing would be lost");
        self.out.timers.clear();
        let pkts = self.out.pkts.len();
        if self.has_peers {
            self.piggyback_acks();
        }
        for i in 0..pkts {
            let p = self.out.pkts[i];
            if self.jitter.enabled() {
                let (at, key) = self.jitter.hold(p, self.now);
                self.schedule(at, Ev::HostOut(key));
            } else {
                self.offer(p);
            }
        }
        debug_assert_eq!(self.out.pkts.len(), pkts, "a packet added while flushing would be lost");
        self.out.pkts.clear();
    }

    /// Put a packet on the link of its current hop.
    fn offer(&mut self, p: Packet) {
        if p.conn == self.traced {
            self.trace(&p, Point::Leaves);
        }
        let l = self.routes.link(p.route, p.hop).expect("a packet is offered within its route");
        self.offer_to(l, p);
    }

    #[cold]
    #[inline(never)]
    fn trace(&mut self, p: &Packet, point: Point) {
        if let Some(t) = &mut self.pcap {
            t.record(self.now, p, point);
        }
    }

    fn offer_to(&mut self, l: usize, p: Packet) {
        let due = self.links[l].offer(p, self.now).due;
        self.schedule_link(l, due);
    }

    fn schedule_link(&mut self, l: usize, due: Due) {
        if let Some(t) = due.arrive {
            self.schedule(t, Ev::LinkArrive(l as u16));
        }
        if let Some(t) = due.wake {
            self.schedule(t, Ev::LinkWake(l as u16));
        }
    }

    fn on_link_wake(&mut self, l: usize) {
        let due = self.links[l].wake(self.now);
        self.schedule_link(l, due);
    }

    fn on_link_arrive(&mut self, l: usize) {
        let (mut p, next) = self.links[l].arrive();
        if let Some(t) = next {
            self.schedule(t, Ev::LinkArrive(l as u16));
        }
        p.hop += 1;
        match self.routes.link(p.route, p.hop) {
            Some(next) => self.offer_to(next, p),
            None => self.deliver(p),
        }
    }

    fn deliver(&mut self, p: Packet) {
        let ci = p.conn as usize;
        let now = self.now;
        if p.conn == self.traced {
            self.trace(&p, Point::Arrives);
        }
        if p.to_receiver {
            let conn = &mut self.conns[ci];
            if p.syn {
                conn.receiver.on_syn(&p, now, &mut self.out);
                self.flush();
                return;
            }
            if p.piggyback {
                // Linux's tcp_rcv_established: the ACK first, then the data.
                // (Host jitter may bring a request before the SYN-ACK that
                // the peer's sender waits for: it takes the ACK from then on.)
                let (other, a) = self.carried_ack(ci, &p);
                if self.conns[other].sender.is_established() {
                    self.ack_to_sender(other, &a);
                }
            }
            let conn = &mut self.conns[ci];
            let new_bytes = conn.receiver.on_data(&p, now, &mut self.out);
            self.flush();
            if new_bytes > 0 {
                self.on_app_read(ci);
            }
        } else {
            if !self.sender_host.is_empty() {
                // A paused host takes its ACKs when it runs again, in order.
                let until = self.sender_paused_until(ci, now);
                if until > now || !self.held_acks[ci].is_empty() {
                    if self.held_acks[ci].is_empty() {
                        self.schedule(until, Ev::SenderResume(ci as u32));
                    }
                    self.held_acks[ci].push_back(p);
                    return;
                }
            }
            self.ack_to_sender(ci, &p);
        }
    }

    /// When connection `c`'s sending host runs something due at `now`: the
    /// end of the pause `now` falls in, or `now` (`[tcp] sender_pauses`:
    /// a host not scheduled for a while takes the ACKs that reached it and
    /// runs the timers that expired, the pacing timer among them, when it
    /// runs again; Linux's pacing credit then catches up half a gap).
    fn sender_paused_until(&mut self, c: usize, now: Nanos) -> Nanos {
        self.host_pauses[self.sender_host[c] as usize].deliver_at(now)
    }

    // Inlined as the code it replaced was: a call per ACK was 1 % more
    // instructions in the headline (cachegrind).
    #[inline(always)]
    fn ack_to_sender(&mut self, ci: usize, p: &Packet) {
        let established_before = self.conns[ci].sender.is_established();
        self.conns[ci].sender.on_ack(p, self.now, &mut self.out);
        self.flush();
        if !established_before && self.conns[ci].sender.is_established() {
            self.on_established(self.conns[ci].flow);
        }
    }

    fn on_timer(&mut self, c: usize, kind: TimerKind) {
        let now = self.now;
        let conn = &mut self.conns[c];
        match kind {
            TimerKind::DelAck => conn.receiver.on_delack_timer(now, &mut self.out),
            TimerKind::CompAck => conn.receiver.on_comp_ack_timer(now, &mut self.out),
            TimerKind::Read => conn.receiver.on_read(&mut self.out),
            _ => {
                let until = if self.sender_host.is_empty() { now } else { self.sender_paused_until(c, now) };
                let sender = &mut self.conns[c].sender;
                if until > now {
                    sender.defer_timer(kind, now, until, &mut self.out);
                } else {
                    sender.on_timer(kind, now, &mut self.out);
                }
            }
        }
        self.flush();
    }

    // ---------------------------------------------------------------- applications

    fn on_flow_start(&mut self, f: usize) {
        let now = self.now;
        let flow = &self.flows[f];
        if let Some(r) = flow.resp {
            // The server's stream shares the connection's handshake.
            self.conns[r].sender.establish(now);
        }
        self.conns[flow.main].sender.connect(now, &mut self.out);
        self.flush();
    }

    /// The client's `connect` returned: as the load generator's client
    /// (`crates/load/src/client.rs`), it writes its header in a `send()` of
    /// its own, then the flow's data (a bulk flow all it can, a transfer
    /// all of it, an RPC flow its first request).
    fn on_established(&mut self, f: usize) {
        let (now, flow) = (self.now, &self.flows[f]);
        let main = flow.main;
        if let Some(r) = flow.resp {
            // The client's socket measured the SYN's RTT; its response
            // stream's receiver, a connection of its own here, takes it.
            let rtt = self.conns[main].sender.srtt_us() * NS_PER_US;
            self.conns[r].receiver.set_handshake_rtt(rtt);
        }
        let header = self.conns[main].header;
        self.conns[main].sender.write(header, now, &mut self.out);
        match flow.kind {
            // A bulk flow stopped before it connected writes nothing more.
            FlowKind::Bulk if !flow.stopped => self.conns[main].sender.set_unlimited(true, now, &mut self.out),
            FlowKind::Bulk => {}
            FlowKind::Transfer => self.conns[main].sender.write(flow.size, now, &mut self.out),
            FlowKind::Rpc => self.issue_request(f),
        }
        self.flush();
    }

    fn on_flow_stop(&mut self, f: usize) {
        let flow = &mut self.flows[f];
        flow.stopped = true;
        if flow.kind == FlowKind::Bulk {
            let main = flow.main;
            self.conns[main].sender.set_unlimited(false, self.now, &mut self.out);
        }
    }

    /// The RPC client sends its next request (closed loop).
    fn issue_request(&mut self, f: usize) {
        let now = self.now;
        let flow = &mut self.flows[f];
        if flow.stopped || flow.requests_issued > flow.responses_done {
            return;
        }
        flow.requests_issued += 1;
        flow.request_start = now;
        let (main, bytes) = (flow.main, flow.request_bytes);
        // The ACK for the last response rides on this request.
        let first = self.out.pkts.len();
        self.conns[main].sender.write(bytes, now, &mut self.out);
        self.ack_unless_data(main, first);
        self.flush();
    }

    /// Every data segment of a connection with a peer carries the peer's
    /// receiver's ACK, and counts as that ACK sent (timers, rcv_wup), as
    /// every segment of one Linux connection does (`tcp_event_ack_sent`).
    fn piggyback_acks(&mut self) {
        for i in 0..self.out.pkts.len() {
            let p = &self.out.pkts[i];
            if !p.to_receiver || p.len == 0 {
                continue;
            }
            let Some(peer) = self.conns[p.conn as usize].peer else { continue };
            // One Linux socket: data sent soon after data received is a
            // reply (`tcp_event_data_sent`), which sets ping-pong mode.
            self.conns[peer].receiver.on_reply_sent(self.now);
            let a = self.conns[peer].receiver.ack_with_data();
            let p = &mut self.out.pkts[i];
            p.piggyback = true;
            p.ack = a.ack;
            p.sack_off = a.sack_off;
            p.nsack = a.nsack;
            p.ts_ecr = a.ts_ecr;
            p.ece = a.ece;
        }
    }

    /// When connection `c` queued no data in `out` from `first` on (its
    /// window or pacer holds the write back), the ACK its peer owes goes
    /// alone now; data would carry it (`piggyback_acks`).
    fn ack_unless_data(&mut self, c: usize, first: usize) {
        let sent = self.out.pkts[first..].iter().any(|p| p.conn == c as u32 && p.to_receiver && p.len > 0);
        if !sent {
            let peer = self.conns[c].peer.expect("an RPC connection has a peer");
            self.conns[peer].receiver.flush_ack(&mut self.out);
        }
    }

    /// The ACK a piggybacked segment of connection `c` carries, as the
    /// peer's sender takes it: which connection, and the ACK, with the
    /// segment's length (Linux's FLAG_DATA: not a duplicate ACK).
    fn carried_ack(&self, c: usize, p: &Packet) -> (usize, Packet) {
        let other = self.conns[c].peer.expect("a piggyback is an RPC's");
        let mut a = Packet {
            conn: other as u32,
            to_receiver: false,
            route: p.route,
            hop: p.hop,
            wire: p.wire,
            len: p.len,
            ack: p.ack,
            nsack: p.nsack,
            ts_val: p.ts_val,
            ts_ecr: p.ts_ecr,
            ece: p.ece,
            class: p.class,
            ..Packet::default()
        };
        a.sack_off = p.sack_off;
        (other, a)
    }

    /// New in-order bytes reached the application of connection `c`.
    fn on_app_read(&mut self, c: usize) {
        let now = self.now;
        let f = self.conns[c].flow;
        let flow = &mut self.flows[f];
        if flow.kind != FlowKind::Rpc {
            if flow.kind == FlowKind::Transfer
                && flow.completion.is_none()
                && self.conns[c].app_delivered() >= flow.size
            {
                flow.completion = Some(now - flow.start);
            }
            return;
        }
        let (main, resp) = (flow.main, flow.resp.expect("rpc flow"));
        if c == main {
            // Server: answer every complete request.
            let due = self.conns[main].app_delivered() / flow.request_bytes;
            let bytes = flow.response_bytes;
            while self.flows[f].responses_sent < due {
                self.flows[f].responses_sent += 1;
                let first = self.out.pkts.len();
                self.conns[resp].sender.write(bytes, now, &mut self.out);
                self.ack_unless_data(resp, first);
            }
            self.flush();
        } else {
            // Client: a complete response ends the request.
            let done = self.conns[resp].receiver.delivered() / flow.response_bytes;
            if done > flow.responses_done {
                flow.responses_done = done;
                let (start, req, rsp) = (flow.request_start, flow.request_bytes, flow.response_bytes);
                let think = flow.think;
                self.res.rpcs.flow_id.push(self.flow_ids[f]);
                self.res.rpcs.request_bytes.push(req);
                self.res.rpcs.response_bytes.push(rsp);
                self.res.rpcs.start_us.push(start / NS_PER_US);
                self.res.rpcs.latency_us.push((now - start) as f64 / NS_PER_US as f64);
                if think == 0 {
                    self.issue_request(f);
                } else {
                    self.schedule(now + think, Ev::RpcNext(f as u32));
                }
            }
        }
    }

    // ---------------------------------------------------------------- samplers

    fn on_sample(&mut self) {
        let t = self.now / NS_PER_US;
        for (fi, flow) in self.flows.iter().enumerate() {
            if self.now < flow.start {
                continue;
            }
            let conn = &self.conns[flow.main];
            let s = &conn.sender;
            let mss = s.c.mss as u64;
            let rep: CcaReport = s.cca().report(&s.c);
            let out = &mut self.res.samples;
            out.flow_id.push(self.flow_ids[fi]);
            out.time_us.push(t);
            out.cwnd_bytes.push(s.c.cwnd as u64 * mss);
            out.srtt_us.push(s.srtt_us());
            out.delivered_bytes.push(conn.app_delivered());
            out.retrans_segs.push(s.stats.retrans_segs);
            out.inflight_bytes.push(s.c.packets_in_flight() as u64 * mss);
            out.pacing_rate_bps.push(s.pacing_rate_bps());
            out.delivery_rate_bps.push(s.stats.delivery_rate_bps);
            out.cca_state.push(rep.state);
            out.bw_est_bps.push(rep.bw_est_bps);
        }
        let dt = self.now - self.last_sample;
        for l in 0..self.links.len() {
            let due = self.links[l].settle(self.now);
            self.schedule_link(l, due);
        }
        for &l in &self.sampled {
            let link = &self.links[l];
            let q = link.queue(self.now).expect("sampled links have a queue");
            let (_, tx_bytes) = link.sent(self.now);
            let out = &mut self.res.queue;
            out.link.push(self.net.links[l].name.clone());
            out.time_us.push(t);
            out.backlog_bytes.push(q.backlog_bytes);
            out.backlog_pkts.push(q.backlog_pkts);
            out.drops.push(q.stats.dropped);
            out.random_losses.push(link.random_losses);
            out.ecn_marks.push(q.stats.ecn_marked);
            out.lateness_us.push(None);
            out.tx_bytes.push(tx_bytes);
            out.utilisation.push(utilisation(link, self.now, self.last_tx[l], dt));
        }
        if self.controller.is_some() {
            self.step_controller(dt);
        }
        for (last, link) in self.last_tx.iter_mut().zip(&self.links) {
            *last = link.sent(self.now).1;
        }
        self.last_sample = self.now;
        let next = self.now + self.sample_interval;
        if next <= self.end {
            self.schedule(next, Ev::Sample);
        }
    }

    fn finish(mut self, cfg: &RunConfig) -> SimResult {
        for (fi, flow) in self.flows.iter().enumerate() {
            let conn = &self.conns[flow.main];
            let s = &conn.sender.stats;
            // A finished transfer was active until its last byte arrived.
            let stop = match flow.completion {
                Some(c) => flow.start + c,
                None => flow.stop.unwrap_or(cfg.duration_ns).min(cfg.duration_ns),
            };
            let active = stop.saturating_sub(flow.start);
            let bytes = conn.app_delivered();
            self.res.flows.push(FlowSummary {
                flow_id: self.flow_ids[fi],
                bytes_delivered: bytes,
                goodput_bps: if active > 0 { bytes as f64 * 8.0 * 1e9 / active as f64 } else { 0.0 },
                sent_segs: s.sent_segs,
                retrans_segs: s.retrans_segs,
                rtt_min_us: s.rtt.min().map(|v| v as f64),
                rtt_mean_us: s.rtt.mean_us(),
                rtt_p99_us: s.rtt.quantile_us(0.99),
                active_start_us: flow.start / NS_PER_US,
                active_stop_us: stop / NS_PER_US,
                completion_us: flow.completion.map(|c| c / NS_PER_US),
            });
        }
        // The events at the end ran: what finished by then counts.
        for l in &mut self.links {
            l.settle(self.end + 1);
        }
        let sent = |l: &Link<Packet>| l.sent(self.end + 1).0;
        self.res.stats.bottleneck_pkts =
            if self.dumbbell { sent(&self.links[0]) } else { self.sampled.iter().map(|&l| sent(&self.links[l])).sum() };
        let stats = &mut self.res.stats;
        for c in &self.conns {
            let s = &c.sender.stats;
            stats.rto_count += s.rto_count;
            stats.tlp_count += s.tlp_count;
            stats.rto_in_recovery += s.rto_in_recovery;
            stats.rto_in_loss += s.rto_in_loss;
            stats.rto_in_disorder += s.rto_in_disorder;
            stats.recoveries += s.recoveries;
            stats.lost_retransmits += s.lost_retransmits;
        }
        self.res.stats.sim_time_us = self.now / NS_PER_US;
        self.res
    }

    // ---------------------------------------------------------------- routes and the controller

    /// Move flow `fi` to new routes; packets already sent keep theirs.
    fn set_route(&mut self, fi: usize, route: (u32, u32)) {
        let flow = &mut self.flows[fi];
        flow.route = route;
        let (main, resp) = (flow.main, flow.resp);
        self.conns[main].sender.set_route(route.0);
        self.conns[main].receiver.set_route(route.1);
        if let Some(r) = resp {
            // The response stream runs against the requests.
            self.conns[r].sender.set_route(route.1);
            self.conns[r].receiver.set_route(route.0);
        }
    }

    fn route_text(&self, route: (u32, u32)) -> String {
        let names = |r: u32| self.routes.path(r).map(|l| self.net.links[l].name.as_str()).collect::<Vec<_>>().join(" ");
        format!("path: {}; return_path: {}", names(route.0), names(route.1))
    }

    fn event_row(&mut self, kind: &'static str, flow: Option<usize>, state: Option<&'static str>, link: Option<String>, detail: String) {
        let ev = &mut self.res.events;
        ev.time_us.push(self.now / NS_PER_US);
        ev.kind.push(kind);
        ev.flow_id.push(flow.map(|f| self.flow_ids[f]));
        ev.state.push(state);
        ev.link.push(link);
        ev.detail.push(detail);
    }

    fn on_route_event(&mut self, i: usize) {
        let (fis, path, back) = self.route_events[i].clone();
        for fi in fis {
            let route = (path, back.unwrap_or(self.flows[fi].route.1));
            self.set_route(fi, route);
            // A flow the controller had moved stays where this event put it.
            self.flows[fi].home = None;
            let detail = self.route_text(route);
            self.event_row("route", Some(fi), None, None, detail);
        }
    }

    /// One controller step over the interval that just ended (`dt` long).
    fn step_controller(&mut self, dt: Nanos) {
        let mut c = self.controller.take().expect("a controller");
        let util = utilisation(&self.links[c.link], self.now, self.last_tx[c.link], dt);
        let candidates: Vec<Candidate> = c
            .alternatives
            .iter()
            .map(|&(fi, ..)| {
                let flow = &self.flows[fi];
                let conn = &self.conns[flow.main];
                let transfer = flow.kind == FlowKind::Transfer;
                let id = self.flow_ids[fi];
                let moved = c.noted.moved().contains(&id);
                let held = flow.home.is_some_and(|home| {
                    let home: Vec<usize> = self.routes.path(home.0).collect();
                    c.noted.held_by(self.routes.path(flow.route.0), &home, |l| {
                        utilisation(&self.links[l], self.now, self.last_tx[l], dt)
                    })
                });
                Candidate {
                    flow: id,
                    rate_bps: conn.sender.stats.delivery_rate_bps,
                    bytes_left: transfer.then(|| flow.size.saturating_sub(conn.app_delivered())),
                    done: flow.completion.is_some() || flow.stopped,
                    // a moved flow that a route event has taken over is no longer the controller's
                    rerouted: moved && flow.home.is_none(),
                    crosses: self.routes.path(flow.route.0).any(|l| l == c.link),
                    held,
                }
            })
            .collect();
        let mut out = Vec::new();
        c.noted.step(self.now, util, &candidates, &mut out);
        let link = self.net.links[c.link].name.clone();
        for e in out {
            match e {
                noted::Event::State { state, why } => {
                    self.event_row("controller", None, Some(state.name()), Some(link.clone()), why)
                }
                noted::Event::Move { flow } | noted::Event::MoveBack { flow } => {
                    let ai = c.alternatives.iter().position(|a| self.flow_ids[a.0] == flow).expect("a candidate");
                    let fi = c.alternatives[ai].0;
                    let (state, route) = if matches!(e, noted::Event::Move { .. }) {
                        let current = self.flows[fi].route;
                        self.flows[fi].home = Some(current);
                        let (p, b) = self.alt_routes[ai];
                        ("action", (p, b.unwrap_or(current.1)))
                    } else {
                        let home = self.flows[fi].home.take().unwrap_or(self.flows[fi].route);
                        ("released", home)
                    };
                    self.set_route(fi, route);
                    let detail = format!("moved: {}", self.route_text(route));
                    self.event_row("controller", Some(fi), Some(state), Some(link.clone()), detail);
                }
            }
        }
        self.controller = Some(c);
    }
}

/// Fraction of the link's rate used since the last sample.
fn utilisation(link: &Link<Packet>, now: Nanos, last_tx: u64, dt: Nanos) -> f64 {
    if dt == 0 {
        return 0.0;
    }
    (link.sent(now).1 - last_tx) as f64 * 8.0 * NS_PER_SEC as f64 / (link.rate_bps as f64 * dt as f64)
}

#[cfg(test)]
mod tests {
    use super::LOAD_HEADER_BYTES;

    /// The simulated application writes the header the real one does.
    #[test]
    fn the_header_is_the_load_generators() {
        assert_eq!(LOAD_HEADER_BYTES, load::proto::HEADER_LEN as u64);
    }
}
