//! The network the emulator carries packets over, built from its config:
//! the dumbbell (the simulator's links in its order and with its seeds:
//! bottleneck stream 1, reverse stream 2, access links as pipes), or a
//! general graph (docs/interfaces.md §1 `network`: link i draws from stream
//! i + 1, both buffers null = a pipe), with per-flow paths, route events and
//! the path controller.

use crate::engine::{Net, RouteChange};
use crate::frame::Frame;
use crate::route::{FlowRoute, Routing};
use crate::EmuConfig;
use netcore::link::Link;
use netcore::rng::Rng;
use serde::Deserialize;
use sim::config::{bottleneck_links, LinkConfig};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// A host node of the network and the address of its namespace.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct HostAddr {
    pub name: String,
    pub ip: Ipv4Addr,
}

/// A flow as the emulator needs it: its two ends and paths.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EmuFlow {
    pub id: u32,
    pub src: String,
    pub dst: String,
    /// The port the load client binds for this flow, and the server's.
    pub client_port: u16,
    pub server_port: u16,
    /// Link names, src → dst and dst → src.
    pub path: Vec<String>,
    pub return_path: Vec<String>,
    /// "bulk" | "rpc" | "transfer" (the controller's eligibility).
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub size_bytes: Option<u64>,
}

/// A route change: at `at_ns` after t0, these flows take these paths.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EmuEvent {
    pub at_ns: u64,
    pub flows: Vec<u32>,
    pub path: Vec<String>,
    pub return_path: Vec<String>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct NodeCfg {
    name: String,
    kind: String,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
struct NetworkCfg {
    nodes: Vec<NodeCfg>,
    links: Vec<serde_json::Value>,
}

/// The dumbbell: links bottleneck, reverse, access out per sender, access
/// back per sender; sender i → receiver over (access i, bottleneck), back
/// over (reverse, access i back).
pub fn build_dumbbell(cfg: &EmuConfig) -> Net {
    let bottleneck = cfg.bottleneck.as_ref().expect("checked");
    let receiver = u32::from(cfg.receiver_ip.expect("checked"));
    let n = cfg.senders.len();
    let mut links: Vec<Link<Frame>> = Vec::with_capacity(2 + 2 * n);
    links.extend(bottleneck_links(bottleneck, cfg.reverse.as_ref(), cfg.seed));
    let mut names = vec!["bottleneck".to_string(), "reverse".to_string()];
    for back in [false, true] {
        for (i, s) in cfg.senders.iter().enumerate() {
            links.push(Link::pipe(s.rate_bps, s.delay_ns));
            names.push(if back { format!("access{i}/back") } else { format!("access{i}") });
        }
    }
    let mut routing = Routing::default();
    for (i, s) in cfg.senders.iter().enumerate() {
        let ip = u32::from(s.ip);
        let fwd = routing.intern(&[2 + i as u16, 0], true);
        let rev = routing.intern(&[1, (2 + n + i) as u16], false);
        routing.add_pair(ip, receiver, fwd);
        routing.add_pair(receiver, ip, rev);
    }
    Net { links, names, routing, changes: Vec::new(), controller: None }
}

/// The graph's topology, for paths.
struct Graph {
    nodes: HashMap<String, usize>,
    host: Vec<bool>,
    /// Per link: (from, to, delay).
    ends: Vec<(usize, usize, u64)>,
    by_name: HashMap<String, u16>,
}

impl Graph {
    /// A path given by link names: the link indices, checked to run from
    /// `src` to `dst`, contiguous and without visiting a node twice.
    fn path(&self, names: &[String], src: usize, dst: usize, what: &str) -> Result<Vec<u16>, String> {
        if names.is_empty() {
            return Err(format!("{what}: empty path"));
        }
        let mut at = src;
        let mut seen = vec![src];
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let &l = self.by_name.get(n).ok_or_else(|| format!("{what}: no link named {n:?}"))?;
            let (from, to, _) = self.ends[l as usize];
            if from != at {
                return Err(format!("{what}: link {n:?} does not start where the path is"));
            }
            if seen.contains(&to) {
                return Err(format!("{what}: the path visits a node twice (at link {n:?})"));
            }
            seen.push(to);
            at = to;
            out.push(l);
        }
        if at != dst {
            return Err(format!("{what}: the path does not end at the flow's destination"));
        }
        Ok(out)
    }

    /// The shortest path by delay from host `src` to host `dst` through
    /// routers only (ties: fewer links, then lower link indices); None if
    /// there is none.
    fn shortest(&self, src: usize, dst: usize) -> Option<Vec<u16>> {
        let n = self.host.len();
        let mut best: Vec<Option<(u64, usize)>> = vec![None; n];
        let mut via: Vec<Option<u16>> = vec![None; n];
        let mut done = vec![false; n];
        best[src] = Some((0, 0));
        loop {
            let u = (0..n).filter(|&v| !done[v] && best[v].is_some()).min_by_key(|&v| best[v])?;
            if u == dst {
                break;
            }
            done[u] = true;
            if u != src && self.host[u] {
                continue; // hosts do not forward
            }
            let (d, h) = best[u].unwrap();
            for (l, &(from, to, delay)) in self.ends.iter().enumerate() {
                if from != u || done[to] {
                    continue;
                }
                let cand = (d + delay, h + 1);
                if best[to].map_or(true, |b| cand < b) {
                    best[to] = Some(cand);
                    via[to] = Some(l as u16);
                }
            }
        }
        let mut path = Vec::new();
        let mut at = dst;
        while at != src {
            let l = via[at]?;
            path.push(l);
            at = self.ends[l as usize].0;
        }
        path.reverse();
        Some(path)
    }
}

/// A general network (docs/interfaces.md §1): every link of it, each flow's
/// paths (identified by its ports), default paths between host pairs
/// (shortest by delay), route events.
pub fn build_graph(cfg: &EmuConfig) -> Result<Net, String> {
    let netv = cfg.network.as_ref().expect("checked");
    let ncfg: NetworkCfg = serde_json::from_value(netv.clone()).map_err(|e| format!("network: {e}"))?;
    let mut nodes = HashMap::new();
    let mut host = Vec::new();
    for (i, n) in ncfg.nodes.iter().enumerate() {
        if nodes.insert(n.name.clone(), i).is_some() {
            return Err(format!("network.nodes[{i}]: node {:?} given twice", n.name));
        }
        host.push(match n.kind.as_str() {
            "host" => true,
            "router" => false,
            k => return Err(format!("network.nodes[{i}].kind: {k:?} (allowed: host, router)")),
        });
    }
    let mut links: Vec<Link<Frame>> = Vec::with_capacity(ncfg.links.len());
    let mut names = Vec::with_capacity(ncfg.links.len());
    let mut ends = Vec::with_capacity(ncfg.links.len());
    let mut by_name = HashMap::new();
    for (i, v) in ncfg.links.iter().enumerate() {
        let mut v = v.clone();
        let obj = v.as_object_mut().ok_or_else(|| format!("network.links[{i}]: not an object"))?;
        let mut take = |k: &str| -> Result<String, String> {
            match obj.remove(k) {
                Some(serde_json::Value::String(s)) => Ok(s),
                _ => Err(format!("network.links[{i}].{k}: a string is needed")),
            }
        };
        let (name, from, to) = (take("name")?, take("from")?, take("to")?);
        let what = format!("network.links[{i}] ({name})");
        let node = |n: &str| nodes.get(n).copied().ok_or_else(|| format!("{what}: no node named {n:?}"));
        let (a, b) = (node(&from)?, node(&to)?);
        let lc: LinkConfig = serde_json::from_value(v).map_err(|e| format!("{what}: {e}"))?;
        let link = if lc.buffer_bytes.is_none() && lc.buffer_pkts.is_none() {
            if lc.rate_bps == 0 {
                return Err(format!("{what}.rate_bps must be positive"));
            }
            if lc.loss != 0.0 {
                return Err(format!("{what}: a link without a buffer (a pipe) cannot have loss"));
            }
            Link::pipe(lc.rate_bps, lc.delay_ns)
        } else {
            lc.check(&what)?;
            lc.build_link(lc.loss, Rng::derive(cfg.seed, i as u64 + 1))
        };
        if by_name.insert(name.clone(), i as u16).is_some() {
            return Err(format!("{what}: link name {name:?} given twice"));
        }
        links.push(link);
        names.push(name);
        ends.push((a, b, lc.delay_ns));
    }
    let g = Graph { nodes, host, ends, by_name };
    let mut ip_of: HashMap<usize, u32> = HashMap::new();
    for (i, h) in cfg.hosts.iter().enumerate() {
        let &n = g.nodes.get(&h.name).ok_or_else(|| format!("hosts[{i}]: no node named {:?}", h.name))?;
        if !g.host[n] {
            return Err(format!("hosts[{i}]: {:?} is a router", h.name));
        }
        if ip_of.values().any(|&a| a == u32::from(h.ip)) {
            return Err(format!("hosts[{i}]: address {} given twice", h.ip));
        }
        ip_of.insert(n, u32::from(h.ip));
    }
    let host_ip = |name: &str, what: &str| -> Result<(usize, u32), String> {
        let &n = g.nodes.get(name).ok_or_else(|| format!("{what}: no node named {name:?}"))?;
        let &ip = ip_of.get(&n).ok_or_else(|| format!("{what}: {name:?} is not a host with an address"))?;
        Ok((n, ip))
    };
    let mut routing = Routing::default();
    for f in &cfg.flows {
        let what = format!("flow {}", f.id);
        let (s, sip) = host_ip(&f.src, &what)?;
        let (d, dip) = host_ip(&f.dst, &what)?;
        let p = g.path(&f.path, s, d, &format!("{what}: path"))?;
        let r = g.path(&f.return_path, d, s, &format!("{what}: return_path"))?;
        let (p, r) = (routing.intern(&p, true), routing.intern(&r, false));
        routing.add_flow(FlowRoute::new(f.id, (sip, f.client_port), (dip, f.server_port), p, r))?;
    }
    // Default paths between every two hosts (anything that is not a flow's
    // connection: shortest by delay).
    let mut hosts: Vec<(usize, u32)> = ip_of.iter().map(|(&n, &ip)| (n, ip)).collect();
    hosts.sort();
    for &(a, aip) in &hosts {
        for &(b, bip) in &hosts {
            if a != b {
                if let Some(p) = g.shortest(a, b) {
                    let i = routing.intern(&p, false);
                    routing.add_pair(aip, bip, i);
                }
            }
        }
    }
    let mut changes = Vec::new();
    let mut last_at = 0;
    for (k, e) in cfg.events.iter().enumerate() {
        let what = format!("events[{k}]");
        if e.at_ns < last_at {
            return Err(format!("{what}: events must be sorted by at_ns"));
        }
        last_at = e.at_ns;
        let mut moves = Vec::new();
        for &id in &e.flows {
            let fi = routing.flow_index(id).ok_or_else(|| format!("{what}: no flow {id}"))?;
            let f = cfg.flows.iter().find(|f| f.id == id).expect("flow exists");
            let (s, _) = host_ip(&f.src, &what)?;
            let (d, _) = host_ip(&f.dst, &what)?;
            let p = g.path(&e.path, s, d, &format!("{what}: path of flow {id}"))?;
            let r = g.path(&e.return_path, d, s, &format!("{what}: return_path of flow {id}"))?;
            moves.push((fi, routing.intern(&p, true), routing.intern(&r, false)));
        }
        changes.push(RouteChange { at: cfg.t0_monotonic_ns + e.at_ns, moves });
    }
    let controller = None;
    if cfg.controller.is_some() {
        return Err("controller: not supported by the emulator yet".into());
    }
    Ok(Net { links, names, routing, changes, controller })
}
