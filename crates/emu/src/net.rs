//! The network the emulator carries packets over, built from its config:
//! the dumbbell (the simulator's links in its order and with its seeds:
//! bottleneck stream 1, reverse stream 2, access links as pipes), or a
//! general graph (docs/interfaces.md §1 `network`: link i draws from stream
//! i + 1, both buffers null = a pipe), with per-flow paths, route events and
//! the path controller.

use crate::engine::{EventRow, Move, Net, PathControl, RouteChange, SampleView};
use crate::route::{FlowRoute, Routing};
use crate::EmuConfig;
use netcore::net::{Access, Network};
use netcore::noted::{Candidate, ControllerConfig, Event, Noted};
use netcore::Nanos;
use serde::Deserialize;
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The load generator's connection header, counted in a flow's sequence
/// space before its application bytes (crates/load/src/proto.rs).
const LOAD_HEADER_BYTES: u64 = 44;

/// A host node of the network and the address of its namespace.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct HostAddr {
    pub name: String,
    pub ip: Ipv4Addr,
}

/// A flow as the emulator needs it: its two ends, the ports that identify
/// its connection, its paths; kind, size and times for the controller.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EmuFlow {
    pub id: u32,
    pub src: String,
    pub dst: String,
    /// The port the load client binds for this flow, and the server's.
    pub client_port: u16,
    pub server_port: u16,
    /// Link names, src → dst and dst → src (absent: the shortest path by delay).
    #[serde(default)]
    pub path: Option<Vec<String>>,
    #[serde(default)]
    pub return_path: Option<Vec<String>>,
    /// "bulk" | "rpc" | "transfer".
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub size_bytes: Option<u64>,
    #[serde(default)]
    pub start_ns: u64,
    #[serde(default)]
    pub stop_ns: Option<u64>,
}

/// A route change: at `at_ns` after t0, these flows take this path (and
/// this return path; absent: the return path stays).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EmuEvent {
    pub at_ns: u64,
    pub flows: Vec<u32>,
    pub path: Vec<String>,
    #[serde(default)]
    pub return_path: Option<Vec<String>>,
}

fn to_u16(p: &[usize]) -> Vec<u16> {
    p.iter().map(|&l| l as u16).collect()
}

/// The links of a network and their names.
fn links_of(network: &Network, seed: u64) -> (Vec<netcore::link::Link<crate::frame::Frame>>, Vec<String>) {
    (network.build_links(seed), network.links.iter().map(|l| l.name.clone()).collect())
}

/// The dumbbell, expanded by `netcore` (links bottleneck, reverse, access
/// out per sender, access back per sender); sender i's packets to the
/// receiver take its flows' dumbbell route, the receiver's to it the return.
pub fn build_dumbbell(cfg: &EmuConfig) -> Net {
    let bottleneck = cfg.bottleneck.as_ref().expect("checked");
    let receiver = u32::from(cfg.receiver_ip.expect("checked"));
    let access: Vec<Access> = cfg.senders.iter().map(|s| Access { rate_bps: s.rate_bps, delay_ns: s.delay_ns }).collect();
    let network = Network::dumbbell(&access, bottleneck, cfg.reverse.as_ref());
    let (links, names) = links_of(&network, cfg.seed);
    let mut routing = Routing::default();
    for (i, s) in cfg.senders.iter().enumerate() {
        let route = Network::dumbbell_route(cfg.senders.len(), i);
        let fwd = routing.intern(&to_u16(&route.path), true);
        let rev = routing.intern(&to_u16(&route.return_path), false);
        routing.add_pair(u32::from(s.ip), receiver, fwd);
        routing.add_pair(receiver, u32::from(s.ip), rev);
    }
    Net { links, names, routing, changes: Vec::new(), controller: None }
}

/// A general network (docs/interfaces.md §1): every link of it, each flow's
/// paths (its packets recognised by their ports), default paths between
/// host pairs (shortest by delay), route events and the controller.
pub fn build_graph(cfg: &EmuConfig) -> Result<Net, String> {
    let network: Network =
        serde_json::from_value(cfg.network.clone().expect("checked")).map_err(|e| format!("network: {e}"))?;
    network.check()?;
    let mut ip_of: HashMap<&str, u32> = HashMap::new();
    for (i, h) in cfg.hosts.iter().enumerate() {
        match network.node(&h.name).map(|n| network.nodes[n].kind) {
            Some(netcore::net::NodeKind::Host) => {}
            Some(_) => return Err(format!("hosts[{i}]: {:?} is a router", h.name)),
            None => return Err(format!("hosts[{i}]: no node {:?}", h.name)),
        }
        if ip_of.values().any(|&a| a == u32::from(h.ip)) || ip_of.insert(&h.name, u32::from(h.ip)).is_some() {
            return Err(format!("hosts[{i}]: {:?} or its address {} given twice", h.name, h.ip));
        }
    }
    let ip = |name: &str, what: &str| -> Result<u32, String> {
        ip_of.get(name).copied().ok_or_else(|| format!("{what}: {name:?} is not a host with an address (hosts)"))
    };
    let (links, names) = links_of(&network, cfg.seed);
    let mut routing = Routing::default();
    for f in &cfg.flows {
        let what = format!("flow {}", f.id);
        let r = network.flow_route(&what, &f.src, &f.dst, f.path.as_deref(), f.return_path.as_deref())?;
        let (p, rp) = (routing.intern(&to_u16(&r.path), true), routing.intern(&to_u16(&r.return_path), false));
        routing.add_flow(FlowRoute::new(f.id, (ip(&f.src, &what)?, f.client_port), (ip(&f.dst, &what)?, f.server_port), p, rp))?;
    }
    // Anything else between two hosts: the shortest path by delay.
    let mut hosts: Vec<(&str, u32)> = ip_of.iter().map(|(&n, &a)| (n, a)).collect();
    hosts.sort();
    for &(a, aip) in &hosts {
        for &(b, bip) in &hosts {
            if a != b {
                if let Some(p) = network.shortest_path(a, b) {
                    let i = routing.intern(&to_u16(&p), false);
                    routing.add_pair(aip, bip, i);
                }
            }
        }
    }
    let mut changes = Vec::new();
    let mut pending = Vec::new();
    let mut last_at = 0;
    for (k, e) in cfg.events.iter().enumerate() {
        let what = format!("events[{k}]");
        if e.at_ns < last_at {
            return Err(format!("{what}: events must be sorted by at_ns"));
        }
        last_at = e.at_ns;
        let mut moves = Vec::new();
        for &id in &e.flows {
            let (fi, f) = flow_of(&routing, cfg, id, &what)?;
            let w = format!("{what}: flow {id}");
            let p = network.path(&format!("{w}: path"), &e.path, &f.src, &f.dst)?;
            let r = match &e.return_path {
                Some(r) => Some(to_u16(&network.path(&format!("{w}: return_path"), r, &f.dst, &f.src)?)),
                None => None,
            };
            moves.push((fi, to_u16(&p), r));
        }
        pending.push((cfg.t0_monotonic_ns + e.at_ns, moves));
    }
    for (at, moves) in pending {
        let moves = moves
            .into_iter()
            .map(|(fi, p, r)| (fi, routing.intern(&p, true), r.map(|r| routing.intern(&r, false))))
            .collect();
        changes.push(RouteChange { at, moves });
    }
    let controller: Option<Box<dyn PathControl>> = match &cfg.controller {
        None => None,
        Some(v) => {
            let ControllerConfig::Noted(c) =
                serde_json::from_value::<ControllerConfig>(v.clone()).map_err(|e| format!("controller: {e}"))?;
            c.check()?;
            let link = network.link(&c.link).ok_or_else(|| format!("controller.link: no link {:?}", c.link))?;
            let mut alts = HashMap::new();
            for (k, a) in c.alternatives.iter().enumerate() {
                let what = format!("controller.alternatives[{k}]");
                let (fi, f) = flow_of(&routing, cfg, a.flow, &what)?;
                let p = network.path(&format!("{what}.path"), &a.path, &f.src, &f.dst)?;
                let r = match &a.return_path {
                    Some(r) => Some(routing.intern(&to_u16(&network.path(&format!("{what}.return_path"), r, &f.dst, &f.src)?), false)),
                    None => None,
                };
                alts.insert(a.flow, (fi, routing.intern(&to_u16(&p), true), r));
            }
            let flows = cfg
                .flows
                .iter()
                .map(|f| FlowFacts {
                    transfer: f.kind.as_deref() == Some("transfer"),
                    size: f.size_bytes,
                    start_ns: f.start_ns,
                    stop_ns: f.stop_ns,
                })
                .collect();
            let rate = network.links[link].config.rate_bps;
            Some(Box::new(NotedCtl {
                noted: Noted::new(c.clone(), rate),
                link: c.link.clone(),
                link_index: link,
                alts,
                before: HashMap::new(),
                flows,
                t0: cfg.t0_monotonic_ns,
                events: Vec::new(),
            }))
        }
    };
    Ok(Net { links, names, routing, changes, controller })
}

/// Flow `id`'s index in the routing and its config.
fn flow_of<'c>(routing: &Routing, cfg: &'c EmuConfig, id: u32, what: &str) -> Result<(u16, &'c EmuFlow), String> {
    let fi = routing.flow_index(id).ok_or_else(|| format!("{what}: no flow {id}"))?;
    Ok((fi, cfg.flows.iter().find(|f| f.id == id).expect("flow exists")))
}

/// A flow's kind, size and times (the controller's candidates).
struct FlowFacts {
    transfer: bool,
    size: Option<u64>,
    start_ns: u64,
    stop_ns: Option<u64>,
}

/// netcore's NOTED state machine, fed from the emulator's samples: the
/// watched link's utilisation, each candidate's delivered bytes (TCP
/// sequence numbers seen leaving the network) and rate over the interval.
struct NotedCtl {
    noted: Noted,
    link: String,
    link_index: usize,
    /// Flow id → (flow index, alternative path, alternative return path).
    alts: HashMap<u32, (u16, u16, Option<u16>)>,
    /// Flow id → (path, return path) before it was moved.
    before: HashMap<u32, (u16, u16)>,
    /// Per flow (routing order): what makes it a candidate.
    flows: Vec<FlowFacts>,
    t0: Nanos,
    events: Vec<Event>,
}

impl PathControl for NotedCtl {
    fn on_sample(&mut self, v: &SampleView) -> (Vec<Move>, Vec<EventRow>) {
        let since_t0 = v.at.saturating_sub(self.t0);
        let mut cands: Vec<Candidate> = Vec::with_capacity(self.alts.len());
        let mut ids: Vec<u32> = self.alts.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let fi = self.alts[&id].0 as usize;
            let facts = &self.flows[fi];
            let (total, recent) = v.delivered[fi];
            let app = total.saturating_sub(LOAD_HEADER_BYTES);
            let bytes_left = facts.transfer.then(|| facts.size.unwrap_or(0).saturating_sub(app));
            let done = since_t0 < facts.start_ns
                || total == 0
                || facts.stop_ns.is_some_and(|s| since_t0 >= s)
                || bytes_left == Some(0);
            let links = &v.routes[v.paths[fi] as usize];
            let moved = self.noted.moved().contains(&id);
            let home = self.before.get(&id).map(|&(p, _)| &v.routes[p as usize]);
            let held = home.is_some_and(|h| self.noted.held_by(links.iter().copied(), h, |l| v.utilisation[l as usize]));
            cands.push(Candidate {
                flow: id,
                rate_bps: recent as f64 * 8.0 / (v.interval as f64 / 1e9),
                bytes_left,
                done,
                // a moved flow that a route event has taken over is no longer the controller's
                rerouted: moved && home.is_none(),
                crosses: links.iter().any(|&l| l as usize == self.link_index),
                held,
            });
        }
        self.events.clear();
        self.noted.step(v.at, v.utilisation[self.link_index], &cands, &mut self.events);
        let mut moves = Vec::new();
        let mut rows = Vec::new();
        let row = |flow_id, state: &str, detail: String| EventRow {
            time_us: 0,
            kind: "controller",
            flow_id,
            state: Some(state.to_string()),
            link: Some(self.link.clone()),
            detail,
        };
        for e in &self.events {
            match e {
                Event::State { state, why } => rows.push(row(None, state.name(), why.clone())),
                Event::Move { flow } => {
                    let &(fi, p, r) = &self.alts[flow];
                    let now = (v.paths[fi as usize], v.rets[fi as usize]);
                    self.before.insert(*flow, now);
                    moves.push((fi, p, r));
                    let text = v.route_text(p, r.unwrap_or(now.1));
                    rows.push(row(Some(*flow), "action", format!("moved: {text}")));
                }
                Event::MoveBack { flow } => {
                    let fi = self.alts[flow].0;
                    // Home, or where a route event has put it since (it stays).
                    let current = (v.paths[fi as usize], v.rets[fi as usize]);
                    let (p, r) = self.before.remove(flow).unwrap_or(current);
                    moves.push((fi, p, Some(r)));
                    rows.push(row(Some(*flow), "released", format!("moved: {}", v.route_text(p, r))));
                }
            }
        }
        (moves, rows)
    }

    fn on_route_event(&mut self, id: u32) {
        self.before.remove(&id);
    }
}
