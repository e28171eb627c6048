//! The network description read by the simulator and the emulator alike
//! (docs/interfaces.md §1, "General topologies"): named nodes, directed
//! links (one entry per direction) and each flow's path as link indices.
//!
//! - [`LinkConfig`]: one direction of a link (rate, delay, loss, buffer,
//!   queue discipline); both buffers absent makes it a *pipe* (an unbounded
//!   FIFO that never drops and is not sampled: hosts' access links).
//! - [`Network`]: nodes and links; [`Network::dumbbell`] expands the
//!   dumbbell shorthand into the same graph, [`Network::check`] validates
//!   it, [`Network::path`] / [`Network::flow_route`] turn a flow's link
//!   names into checked link indices, [`Network::build_links`] builds the
//!   links with their seeds (link `i` draws from stream `i + 1` of the run
//!   seed, so the dumbbell's bottleneck and return link keep streams 1 and 2).
//! - [`Routes`]: paths interned to small ids, so a packet carries a route id
//!   and a hop index and an engine finds its next link with two loads.

use crate::link::Link;
use crate::qdisc::{self, Limit, Port, QdiscConfig};
use crate::rng::Rng;
use crate::Pkt;
use serde::Deserialize;
use std::collections::HashMap;

/// One direction of a link: the resolved run config's link object.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkConfig {
    pub rate_bps: u64,
    pub delay_ns: u64,
    #[serde(default)]
    pub loss: f64,
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    #[serde(default)]
    pub buffer_pkts: Option<u64>,
    /// The queue discipline and its parameters (docs/interfaces.md §1):
    /// `{"kind": "fq_codel", "target_ns": ...}`, or just its name.
    #[serde(default, deserialize_with = "qdisc_or_name")]
    pub qdisc: QdiscConfig,
    /// Most extra propagation delay per packet, drawn uniformly, order kept
    /// (`Link::with_jitter`); 0 (absent): none.
    #[serde(default)]
    pub jitter_ns: u64,
    /// Pauses of the far end (`Link::with_stalls`): their mean interval and
    /// mean length; 0 (absent): none.
    #[serde(default)]
    pub stall_every_ns: u64,
    #[serde(default)]
    pub stall_ns: u64,
    /// More pause processes of the far end, overlaid
    /// (`Link::with_more_stalls`): `[mean interval, mean length]` each.
    #[serde(default)]
    pub stall_more_ns: Vec<(u64, u64)>,
}

/// A link's jitter draws from this stream of the link's own seed.
const JITTER_STREAM: u64 = 0x4A17_7E55_0000_0002;
/// Its pauses draw from this one.
const STALL_STREAM: u64 = 0x4A17_7E55_0000_0003;

/// A discipline as a table with `kind`, or a bare name meaning its defaults.
fn qdisc_or_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<QdiscConfig, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(name) => QdiscConfig::by_name(&name)
            .ok_or_else(|| D::Error::custom(format!("unknown qdisc {name:?} (known: {:?})", qdisc::QDISCS))),
        v => QdiscConfig::deserialize(v).map_err(D::Error::custom),
    }
}

impl LinkConfig {
    /// A pipe: no buffer given, so no queue, no drops, not sampled.
    pub fn pipe(rate_bps: u64, delay_ns: u64) -> LinkConfig {
        LinkConfig {
            rate_bps,
            delay_ns,
            loss: 0.0,
            buffer_bytes: None,
            buffer_pkts: None,
            qdisc: QdiscConfig::default(),
            jitter_ns: 0,
            stall_every_ns: 0,
            stall_ns: 0,
            stall_more_ns: Vec::new(),
        }
    }

    pub fn is_pipe(&self) -> bool {
        self.buffer_bytes.is_none() && self.buffer_pkts.is_none()
    }

    /// The port the discipline serves (buffer from buffer_bytes / buffer_pkts).
    pub fn port(&self, seed: u64) -> Port {
        let limit = match (self.buffer_bytes, self.buffer_pkts) {
            (Some(b), _) => Limit::Bytes(b),
            (None, Some(p)) => Limit::Packets(p),
            (None, None) => Limit::Packets(u64::MAX),
        };
        Port { rate_bps: self.rate_bps, limit, seed }
    }

    /// A queueing link's checks (exactly one buffer); `name` prefixes the error.
    pub fn check(&self, name: &str) -> Result<(), String> {
        if self.buffer_bytes.is_some() == self.buffer_pkts.is_some() {
            return Err(format!("{name}: exactly one of buffer_bytes / buffer_pkts"));
        }
        self.check_any(name)
    }

    /// A network link's checks: a queueing link as [`check`](Self::check),
    /// or a pipe (both buffers null) without loss and without a discipline.
    pub fn check_in_network(&self, name: &str) -> Result<(), String> {
        if !self.is_pipe() {
            return self.check(name);
        }
        if self.loss != 0.0 {
            return Err(format!("{name}: a pipe (no buffer) cannot have loss (got {}); give it a buffer", self.loss));
        }
        if self.qdisc != QdiscConfig::default() {
            return Err(format!("{name}: a pipe (no buffer) has no queue discipline; give it a buffer"));
        }
        self.check_any(name)
    }

    fn check_any(&self, name: &str) -> Result<(), String> {
        if self.rate_bps == 0 {
            return Err(format!("{name}.rate_bps must be positive"));
        }
        if !(0.0..1.0).contains(&self.loss) {
            return Err(format!("{name}.loss must be in [0, 1) (got {})", self.loss));
        }
        self.qdisc.check(&self.port(0)).map_err(|e| format!("{name}.qdisc: {e}"))
    }

    /// The link with its discipline, over any packet type (the simulator's
    /// descriptors, the emulator's frames). The discipline draws (RED) and
    /// perturbs its flow hash (fq_codel) from a seed of the link's own
    /// stream, and so does the jitter; the link's loss draws are unchanged.
    pub fn build_link<P: Pkt + 'static>(&self, loss: f64, rng: Rng) -> Link<P> {
        let seed = rng.clone().next_u64();
        let port = self.port(seed);
        // A drop-tail FIFO runs without an event per transmission (link.rs).
        let link = match self.qdisc {
            QdiscConfig::Fifo(_) => Link::drop_tail(self.rate_bps, self.delay_ns, loss, rng, port.limit),
            _ => Link::new(self.rate_bps, self.delay_ns, loss, rng, qdisc::build(&self.qdisc, &port)),
        };
        self.impair(link, seed)
    }

    /// `link` with this link's jitter and stalls, each drawn from its own
    /// stream of `seed`.
    fn impair<P: Pkt + 'static>(&self, link: Link<P>, seed: u64) -> Link<P> {
        link.with_jitter(self.jitter_ns, Rng::derive(seed, JITTER_STREAM))
            .with_stalls(self.stall_every_ns, self.stall_ns, Rng::derive(seed, STALL_STREAM))
            .with_more_stalls(&self.stall_more_ns, |k| Rng::derive(seed, STALL_STREAM + 1 + k as u64))
    }

    /// The link of a network: a pipe, or a queueing link with its own loss.
    pub fn build<P: Pkt + 'static>(&self, rng: Rng) -> Link<P> {
        if self.is_pipe() {
            let seed = rng.clone().next_u64();
            self.impair(Link::pipe(self.rate_bps, self.delay_ns), seed)
        } else {
            self.build_link(self.loss, rng)
        }
    }

    /// The return link a dumbbell without `reverse` gets: the bottleneck's
    /// rate, delay, buffer and discipline, without its loss and jitter
    /// (impairments of one direction, as a study gives them).
    pub fn mirrored(&self) -> LinkConfig {
        LinkConfig { loss: 0.0, jitter_ns: 0, stall_every_ns: 0, stall_ns: 0, stall_more_ns: Vec::new(), ..self.clone() }
    }
}

/// The bottleneck and the return link, seeded alike by every backend
/// (streams 1 and 2 of the run seed). Without a `reverse` link the return
/// path mirrors the bottleneck, without its random loss and jitter.
pub fn bottleneck_links<P: Pkt + 'static>(bottleneck: &LinkConfig, reverse: Option<&LinkConfig>, seed: u64) -> [Link<P>; 2] {
    let forward = bottleneck.build_link(bottleneck.loss, Rng::derive(seed, 1));
    let ret = match reverse {
        Some(r) => r.build_link(r.loss, Rng::derive(seed, 2)),
        None => bottleneck.mirrored().build_link(0.0, Rng::derive(seed, 2)),
    };
    [forward, ret]
}

/// A dumbbell sender's access link (both directions): the `senders` entries.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Access {
    pub rate_bps: u64,
    pub delay_ns: u64,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Host,
    Router,
}

#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
}

/// One directed link of a network: its name, its ends and its config.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(from = "RawLink")]
pub struct NetLink {
    pub name: String,
    pub from: String,
    pub to: String,
    pub config: LinkConfig,
}

/// The JSON form of [`NetLink`]: the link object with `name`, `from`, `to`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: String,
    from: String,
    to: String,
    rate_bps: u64,
    delay_ns: u64,
    #[serde(default)]
    loss: f64,
    #[serde(default)]
    buffer_bytes: Option<u64>,
    #[serde(default)]
    buffer_pkts: Option<u64>,
    #[serde(default, deserialize_with = "qdisc_or_name")]
    qdisc: QdiscConfig,
    #[serde(default)]
    jitter_ns: u64,
    #[serde(default)]
    stall_every_ns: u64,
    #[serde(default)]
    stall_ns: u64,
    #[serde(default)]
    stall_more_ns: Vec<(u64, u64)>,
}

impl From<RawLink> for NetLink {
    fn from(r: RawLink) -> NetLink {
        let config = LinkConfig {
            rate_bps: r.rate_bps,
            delay_ns: r.delay_ns,
            loss: r.loss,
            buffer_bytes: r.buffer_bytes,
            buffer_pkts: r.buffer_pkts,
            qdisc: r.qdisc,
            jitter_ns: r.jitter_ns,
            stall_every_ns: r.stall_every_ns,
            stall_ns: r.stall_ns,
            stall_more_ns: r.stall_more_ns,
        };
        NetLink { name: r.name, from: r.from, to: r.to, config }
    }
}

/// Nodes and directed links: the `network` object of a run config.
#[derive(Deserialize, Debug, Clone, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Network {
    pub nodes: Vec<Node>,
    pub links: Vec<NetLink>,
}

/// A flow's two paths as link indices: data (src → dst) and return (dst → src).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRoute {
    pub path: Vec<usize>,
    pub return_path: Vec<usize>,
}

/// Most links a network may have (a packet names its link in 16 bits).
pub const MAX_LINKS: usize = u16::MAX as usize;
/// Most links on one path (a packet's hop index is 8 bits).
pub const MAX_HOPS: usize = u8::MAX as usize;

impl Network {
    /// The dumbbell shorthand as a graph. Nodes: the sender hosts `s<i>`,
    /// the router `r`, the receiver `d`. Links, in this order (which fixes
    /// their random streams): `bottleneck` (r → d, stream 1), `reverse`
    /// (d → r, stream 2; the bottleneck [`mirrored`](LinkConfig::mirrored) when absent),
    /// then the access pipes `access<i>` (s<i> → r) and `access<i>/back`.
    pub fn dumbbell(senders: &[Access], bottleneck: &LinkConfig, reverse: Option<&LinkConfig>) -> Network {
        let mut nodes: Vec<Node> =
            (0..senders.len()).map(|i| Node { name: format!("s{i}"), kind: NodeKind::Host }).collect();
        nodes.push(Node { name: "r".into(), kind: NodeKind::Router });
        nodes.push(Node { name: "d".into(), kind: NodeKind::Host });
        let link = |name: String, from: &str, to: &str, config: LinkConfig| NetLink {
            name,
            from: from.into(),
            to: to.into(),
            config,
        };
        let reverse = reverse.cloned().unwrap_or_else(|| bottleneck.mirrored());
        let mut links = vec![link("bottleneck".into(), "r", "d", bottleneck.clone()), link("reverse".into(), "d", "r", reverse)];
        for (i, a) in senders.iter().enumerate() {
            links.push(link(format!("access{i}"), &format!("s{i}"), "r", LinkConfig::pipe(a.rate_bps, a.delay_ns)));
        }
        for (i, a) in senders.iter().enumerate() {
            links.push(link(format!("access{i}/back"), "r", &format!("s{i}"), LinkConfig::pipe(a.rate_bps, a.delay_ns)));
        }
        Network { nodes, links }
    }

    /// The dumbbell route of sender `i`'s flows (see [`dumbbell`](Self::dumbbell)):
    /// access then bottleneck; reverse then access back.
    pub fn dumbbell_route(nsenders: usize, i: usize) -> FlowRoute {
        FlowRoute { path: vec![2 + i, 0], return_path: vec![1, 2 + nsenders + i] }
    }

    pub fn node(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    pub fn link(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// Indices of link `l`'s ends (after [`check`](Self::check)).
    pub fn ends(&self, l: usize) -> (usize, usize) {
        let k = &self.links[l];
        (self.node(&k.from).expect("checked network"), self.node(&k.to).expect("checked network"))
    }

    /// Unique names, links between known distinct nodes, each link valid.
    pub fn check(&self) -> Result<(), String> {
        if self.nodes.is_empty() || self.links.is_empty() {
            return Err("network: needs nodes and links".into());
        }
        if self.links.len() > MAX_LINKS {
            return Err(format!("network: at most {MAX_LINKS} links (got {})", self.links.len()));
        }
        let mut seen = HashMap::new();
        for n in &self.nodes {
            if n.name.is_empty() || seen.insert(n.name.as_str(), ()).is_some() {
                return Err(format!("network.nodes: node name {:?} is empty or given twice", n.name));
            }
        }
        let mut seen = HashMap::new();
        for l in &self.links {
            let what = format!("network.links[{:?}]", l.name);
            if l.name.is_empty() || seen.insert(l.name.as_str(), ()).is_some() {
                return Err(format!("{what}: link name is empty or given twice (each direction needs its own name)"));
            }
            for end in [&l.from, &l.to] {
                if self.node(end).is_none() {
                    return Err(format!("{what}: no node {end:?} (nodes: {})", self.node_names()));
                }
            }
            if l.from == l.to {
                return Err(format!("{what}: a link from {:?} to itself", l.from));
            }
            l.config.check_in_network(&what)?;
        }
        Ok(())
    }

    fn node_names(&self) -> String {
        self.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Link names to checked link indices: every link exists, the path starts
    /// at `src`, each link starts where the previous ended, it ends at `dst`
    /// and visits no node twice. `what` names the path in errors
    /// (`"flow 3: path"`).
    pub fn path(&self, what: &str, names: &[String], src: &str, dst: &str) -> Result<Vec<usize>, String> {
        if names.is_empty() {
            return Err(format!("{what}: empty path from {src:?} to {dst:?}"));
        }
        if names.len() > MAX_HOPS {
            return Err(format!("{what}: at most {MAX_HOPS} links"));
        }
        let mut out = Vec::with_capacity(names.len());
        let mut at = src;
        let mut visited = vec![src];
        for name in names {
            let l = self.link(name).ok_or_else(|| {
                let known: Vec<&str> = self.links.iter().map(|l| l.name.as_str()).collect();
                format!("{what}: no link {name:?} (links: {})", known.join(", "))
            })?;
            let k = &self.links[l];
            if k.from != at {
                return Err(if out.is_empty() {
                    format!("{what}: starts with {name:?} from {:?}, not at its source {src:?}", k.from)
                } else {
                    format!("{what}: not contiguous: {name:?} starts at {:?} but the path is at {at:?}", k.from)
                });
            }
            if visited.contains(&k.to.as_str()) {
                return Err(format!("{what}: visits node {:?} twice (a cycle at {name:?})", k.to));
            }
            visited.push(&k.to);
            at = &k.to;
            out.push(l);
        }
        if at != dst {
            return Err(format!("{what}: ends at {at:?}, not at its destination {dst:?}"));
        }
        Ok(out)
    }

    /// The shortest path from `src` to `dst` by delay (ties: fewer links,
    /// then lower link indices), or None when `dst` cannot be reached.
    pub fn shortest_path(&self, src: &str, dst: &str) -> Option<Vec<usize>> {
        let (s, d) = (self.node(src)?, self.node(dst)?);
        let n = self.nodes.len();
        let ends: Vec<(usize, usize)> = (0..self.links.len()).map(|l| self.ends(l)).collect();
        // Dijkstra over (delay, hops) with a plain scan: networks are small.
        let mut best: Vec<Option<(u64, usize)>> = vec![None; n];
        let mut via: Vec<Option<usize>> = vec![None; n];
        let mut done = vec![false; n];
        best[s] = Some((0, 0));
        loop {
            let u = (0..n).filter(|&u| !done[u] && best[u].is_some()).min_by_key(|&u| (best[u], u))?;
            if u == d {
                break;
            }
            done[u] = true;
            let (du, hu) = best[u].expect("reached");
            for (l, &(a, b)) in ends.iter().enumerate() {
                if a != u || done[b] {
                    continue;
                }
                let cand = (du + self.links[l].config.delay_ns, hu + 1);
                if best[b].map_or(true, |cur| cand < cur) {
                    best[b] = Some(cand);
                    via[b] = Some(l);
                }
            }
        }
        let mut path = vec![];
        let mut at = d;
        while at != s {
            let l = via[at].expect("on the path");
            path.push(l);
            at = ends[l].0;
        }
        path.reverse();
        Some(path)
    }

    /// A flow's data and return paths from their link names, or the
    /// shortest paths by delay where a list is absent. `flow` names the
    /// flow in errors (`"flow 3"`).
    pub fn flow_route(
        &self,
        flow: &str,
        src: &str,
        dst: &str,
        path: Option<&[String]>,
        return_path: Option<&[String]>,
    ) -> Result<FlowRoute, String> {
        for (field, node) in [("src", src), ("dst", dst)] {
            if self.node(node).is_none() {
                return Err(format!("{flow}: {field}: no node {node:?} (nodes: {})", self.node_names()));
            }
        }
        if src == dst {
            return Err(format!("{flow}: src and dst are the same node {src:?}"));
        }
        let one = |field: &str, names: Option<&[String]>, a: &str, b: &str| match names {
            Some(n) => self.path(&format!("{flow}: {field}"), n, a, b),
            None => self
                .shortest_path(a, b)
                .ok_or_else(|| format!("{flow}: {field}: no path from {a:?} to {b:?} (disconnected)")),
        };
        Ok(FlowRoute { path: one("path", path, src, dst)?, return_path: one("return_path", return_path, dst, src)? })
    }

    /// Every link, built with its discipline; link `i` draws its randomness
    /// from stream `i + 1` of the run seed.
    pub fn build_links<P: Pkt + 'static>(&self, seed: u64) -> Vec<Link<P>> {
        self.links.iter().enumerate().map(|(i, l)| l.config.build(Rng::derive(seed, i as u64 + 1))).collect()
    }
}

/// Paths interned to route ids. A packet carries its route id and hop
/// index; [`Routes::link`] gives the link of that hop, None past the end.
/// Routes are stored one after another, each closed by a sentinel, and a
/// route's id is where it starts: one load per hop.
#[derive(Debug, Default, Clone)]
pub struct Routes {
    hops: Vec<u16>,
    ids: HashMap<Vec<usize>, u32>,
}

/// Closes each route in `Routes::hops` (never a link index: see MAX_LINKS).
const END: u16 = u16::MAX;

impl Routes {
    /// The id of `path` (link indices), the same id for the same path.
    pub fn intern(&mut self, path: &[usize]) -> u32 {
        assert!(!path.is_empty() && path.len() <= MAX_HOPS, "a route has 1 to {MAX_HOPS} links");
        if let Some(&id) = self.ids.get(path) {
            return id;
        }
        let id = u32::try_from(self.hops.len()).expect("route table fits u32");
        self.hops.extend(path.iter().map(|&l| {
            assert!(l < MAX_LINKS, "at most {MAX_LINKS} links");
            l as u16
        }));
        self.hops.push(END);
        self.ids.insert(path.to_vec(), id);
        id
    }

    /// The link at hop `hop` of route `route`, or None when the route ends
    /// before it (the packet has arrived).
    #[inline]
    pub fn link(&self, route: u32, hop: u8) -> Option<usize> {
        let l = self.hops[route as usize + hop as usize];
        (l != END).then_some(l as usize)
    }

    /// The links of a route.
    pub fn path(&self, route: u32) -> impl Iterator<Item = usize> + '_ {
        self.hops[route as usize..].iter().take_while(|&&l| l != END).map(|&l| l as usize)
    }

    /// Number of distinct routes.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::CodelParams;

    fn qlink(qdisc: &str) -> Result<LinkConfig, serde_json::Error> {
        serde_json::from_str(&format!(r#"{{"rate_bps": 1000000, "delay_ns": 0, "buffer_pkts": 100{qdisc}}}"#))
    }

    #[test]
    fn qdisc_as_table_name_or_absent() {
        assert_eq!(qlink("").unwrap().qdisc, QdiscConfig::default());
        assert_eq!(qlink(r#", "qdisc": "codel""#).unwrap().qdisc, QdiscConfig::Codel(CodelParams::default()));
        let l = qlink(r#", "qdisc": {"kind": "codel", "target_ns": 2000000, "ecn": true}"#).unwrap();
        assert_eq!(l.qdisc, QdiscConfig::Codel(CodelParams { target_ns: 2_000_000, ecn: true, ..CodelParams::default() }));
        let e = qlink(r#", "qdisc": "sfq""#).unwrap_err().to_string();
        assert!(e.contains("unknown qdisc \"sfq\""), "{e}");
        let e = qlink(r#", "qdisc": {"kind": "codel", "targt_ns": 1}"#).unwrap_err().to_string();
        assert!(e.contains("targt_ns"), "{e}");
    }

    #[test]
    fn qdisc_parameters_are_checked() {
        let l = qlink(r#", "qdisc": {"kind": "red", "min_bytes": 9000, "max_bytes": 3000}"#).unwrap();
        let e = l.qdisc.check(&l.port(0)).unwrap_err();
        assert!(e.contains("min_bytes"), "{e}");
    }

    /// a - r1 = r2 - b with two parallel r1 → r2 links (primary, alt).
    fn two_sites() -> Network {
        serde_json::from_str(
            r#"{"nodes": [{"name": "a", "kind": "host"}, {"name": "r1", "kind": "router"},
                          {"name": "r2", "kind": "router"}, {"name": "b", "kind": "host"}],
                "links": [
                  {"name": "primary", "from": "r1", "to": "r2", "rate_bps": 100000000, "delay_ns": 10000000, "buffer_pkts": 100},
                  {"name": "primary/back", "from": "r2", "to": "r1", "rate_bps": 100000000, "delay_ns": 10000000, "buffer_pkts": 100},
                  {"name": "alt", "from": "r1", "to": "r2", "rate_bps": 100000000, "delay_ns": 20000000, "buffer_pkts": 100,
                   "qdisc": "fq"},
                  {"name": "a-r1", "from": "a", "to": "r1", "rate_bps": 1000000000, "delay_ns": 0},
                  {"name": "r1-a", "from": "r1", "to": "a", "rate_bps": 1000000000, "delay_ns": 0},
                  {"name": "r2-b", "from": "r2", "to": "b", "rate_bps": 1000000000, "delay_ns": 0},
                  {"name": "b-r2", "from": "b", "to": "r2", "rate_bps": 1000000000, "delay_ns": 0}]}"#,
        )
        .unwrap()
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_checks_and_routes() {
        let n = two_sites();
        n.check().unwrap();
        assert!(n.links[3].config.is_pipe() && !n.links[0].config.is_pipe());
        let r = n.flow_route("flow 0", "a", "b", Some(&names(&["a-r1", "alt", "r2-b"])), None).unwrap();
        assert_eq!(r.path, vec![3, 2, 5]);
        // Shortest by delay: the primary, and the only way back.
        assert_eq!(r.return_path, vec![6, 1, 4]);
        assert_eq!(n.shortest_path("a", "b"), Some(vec![3, 0, 5]));
        let links: Vec<Link<crate::qdisc::testutil::P>> = n.build_links(7);
        assert!(links[0].queues() && !links[3].queues());
    }

    #[test]
    fn bad_paths_are_named() {
        let n = two_sites();
        let e = |p: &[&str]| n.path("flow 2: path", &names(p), "a", "b").unwrap_err();
        let m = e(&["a-r1", "nope", "r2-b"]);
        assert!(m.starts_with("flow 2: path: no link \"nope\""), "{m}");
        let m = e(&["a-r1", "r2-b"]);
        assert!(m.contains("not contiguous") && m.contains("\"r2-b\""), "{m}");
        let m = e(&["primary", "r2-b"]);
        assert!(m.contains("not at its source \"a\""), "{m}");
        let m = e(&["a-r1", "primary"]);
        assert!(m.contains("ends at \"r2\", not at its destination \"b\""), "{m}");
        let m = e(&["a-r1", "r1-a"]);
        assert!(m.contains("visits node \"a\" twice"), "{m}");
        let m = e(&[]);
        assert!(m.contains("empty path"), "{m}");
        let m = n.flow_route("flow 1", "a", "x", None, None).unwrap_err();
        assert!(m.contains("flow 1: dst: no node \"x\""), "{m}");
        // Disconnected: drop the only way back.
        let mut cut = n.clone();
        cut.links.retain(|l| l.name != "primary/back");
        let m = cut.flow_route("flow 1", "a", "b", None, None).unwrap_err();
        assert!(m.contains("flow 1: return_path: no path from \"b\" to \"a\""), "{m}");
    }

    #[test]
    fn bad_networks_are_named() {
        let check = |f: &dyn Fn(&mut Network)| {
            let mut n = two_sites();
            f(&mut n);
            n.check().unwrap_err()
        };
        let m = check(&|n| n.links[2].name = "primary".into());
        assert!(m.contains("\"primary\"") && m.contains("given twice"), "{m}");
        let m = check(&|n| n.links[3].config.loss = 0.01);
        assert!(m.contains("network.links[\"a-r1\"]: a pipe") && m.contains("loss"), "{m}");
        let m = check(&|n| n.links[0].config.loss = 1.5);
        assert!(m.contains("network.links[\"primary\"].loss"), "{m}");
        let m = check(&|n| n.links[0].to = "mars".into());
        assert!(m.contains("no node \"mars\""), "{m}");
        let m = check(&|n| n.links[0].config.rate_bps = 0);
        assert!(m.contains("rate_bps must be positive"), "{m}");
        let m = check(&|n| n.nodes[1].name = "a".into());
        assert!(m.contains("\"a\" is empty or given twice"), "{m}");
        let m = check(&|n| n.links[0].to = "r1".into());
        assert!(m.contains("to itself"), "{m}");
        let bad: Result<Network, _> = serde_json::from_str(
            r#"{"nodes": [], "links": [{"name": "x", "from": "a", "to": "b", "rate_bps": 1, "delay_ns": 0, "speed": 3}]}"#,
        );
        assert!(bad.unwrap_err().to_string().contains("speed"));
    }

    #[test]
    fn dumbbell_expands_in_stream_order() {
        let b = LinkConfig {
            loss: 0.01,
            buffer_pkts: Some(100),
            stall_every_ns: 50_000_000,
            stall_ns: 2_000_000,
            ..LinkConfig::pipe(100_000_000, 9_000_000)
        };
        let s = vec![Access { rate_bps: 1_000_000_000, delay_ns: 1_000 }; 2];
        let n = Network::dumbbell(&s, &b, None);
        n.check().unwrap();
        let order: Vec<&str> = n.links.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(order, ["bottleneck", "reverse", "access0", "access1", "access0/back", "access1/back"]);
        // The return path mirrors the bottleneck without its impairments.
        assert_eq!(n.links[1].config, LinkConfig { loss: 0.0, stall_every_ns: 0, stall_ns: 0, stall_more_ns: vec![], ..b.clone() });
        assert!(n.links[2].config.is_pipe());
        let r = Network::dumbbell_route(2, 1);
        let p = |v: &[usize]| v.iter().map(|&l| n.links[l].name.clone()).collect::<Vec<_>>();
        assert_eq!(n.flow_route("f", "s1", "d", Some(&p(&r.path)), Some(&p(&r.return_path))).unwrap(), r);
        assert_eq!(n.flow_route("f", "s1", "d", None, None).unwrap(), r);
    }

    #[test]
    fn routes_intern_paths() {
        let mut r = Routes::default();
        let a = r.intern(&[3, 0, 5]);
        let b = r.intern(&[6, 1]);
        assert_eq!(r.intern(&[3, 0, 5]), a);
        assert_ne!(a, b);
        assert_eq!((r.link(a, 0), r.link(a, 2), r.link(a, 3)), (Some(3), Some(5), None));
        assert_eq!(r.path(b).collect::<Vec<_>>(), vec![6, 1]);
        assert_eq!(r.len(), 2);
    }
}
