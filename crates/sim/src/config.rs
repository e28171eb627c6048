//! The resolved run config (docs/interfaces.md §1): every unit already
//! converted to integers in bits/s, nanoseconds and bytes.

pub use netcore::net::{bottleneck_links, Access, LinkConfig, Network};
pub use netcore::net::FlowRoute;
pub use netcore::noted::{ControllerConfig, Noted};
use serde::Deserialize;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub seed: u64,
    pub duration_ns: u64,
    pub sample_interval_ns: u64,
    pub tcp: TcpConfig,
    /// The dumbbell form: `senders`, `bottleneck`, `reverse` ...
    #[serde(default)]
    pub senders: Vec<Access>,
    #[serde(default)]
    pub bottleneck: Option<LinkConfig>,
    #[serde(default)]
    pub reverse: Option<LinkConfig>,
    /// ... or a general network (docs/interfaces.md §1, "General topologies").
    #[serde(default)]
    pub network: Option<Network>,
    pub flows: Vec<FlowConfig>,
    /// Route changes, sorted by time.
    #[serde(default)]
    pub events: Vec<RouteEvent>,
    #[serde(default)]
    pub controller: Option<ControllerConfig>,
    /// Write a packet trace of one flow (`trace.rs`). Not a study setting:
    /// for tools that compare a simulated run with a captured kernel run.
    #[serde(default)]
    pub pcap: Option<PcapConfig>,
}

/// Trace flow `flow` (its id) into `dir`/sender.pcap and `dir`/receiver.pcap.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct PcapConfig {
    pub flow: u32,
    pub dir: String,
}

/// Moves flows to a new path at a given time (the connections survive).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RouteEvent {
    pub at_ns: u64,
    /// Flow ids.
    pub flows: Vec<u32>,
    /// Link names, each flow's src → dst.
    pub path: Vec<String>,
    /// Link names, dst → src; absent: the return path stays as it is.
    #[serde(default)]
    pub return_path: Option<Vec<String>>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct TcpConfig {
    pub mss: u32,
    pub header_bytes: u32,
    pub init_cwnd: u32,
    pub min_rto_ns: u64,
    pub delayed_ack: DelayedAck,
    pub delack_ns: u64,
    pub sack: bool,
    pub rmem_bytes: u64,
    pub wmem_bytes: u64,
    pub ecn: bool,
    pub pacing: Pacing,
    /// Host timer frequency: timers (RTO, delayed ACK, reordering, pacing)
    /// fire only on ticks of 1/hz. None = no extra rounding (the
    /// retransmission timers still count `kernel_hz` jiffies, as Linux's).
    #[serde(default)]
    pub hz: Option<u32>,
    /// CONFIG_HZ of the modelled kernel: the jiffies of the CCA clocks and
    /// of the retransmission timers (RTO, loss probe, RACK). None = 1000.
    #[serde(default)]
    pub kernel_hz: Option<u32>,
    /// Hosts' per-packet processing jitter: each packet an endpoint emits
    /// leaves after a seeded uniform delay in [0, this] (`jitter.rs`). 0 = none.
    #[serde(default)]
    pub host_jitter_ns: u64,
    /// Linux's SACK compression at the receiver (`tcp/receiver.rs`);
    /// false = Linux with `tcp_comp_sack_nr` = 0.
    #[serde(default = "yes")]
    pub sack_compression: bool,
    /// The receiving application's read latency (`jitter::Latency::read`):
    /// its median and 90th percentile; 0 = reads at once (the default).
    #[serde(default)]
    pub read_latency_median_ns: u64,
    #[serde(default)]
    pub read_latency_p90_ns: u64,
    /// How late the sender's pacing timer fires (`jitter::Latency::pacing`):
    /// its median and 90th percentile; 0 = on time (the default).
    #[serde(default)]
    pub pacing_latency_median_ns: u64,
    #[serde(default)]
    pub pacing_latency_p90_ns: u64,
    /// Pauses of each sending host (`[tcp] sender_pauses`): exponential
    /// gaps of this mean between exponential pauses of this mean length;
    /// 0 = none (the default). See `World::sender_paused_until`.
    #[serde(default)]
    pub sender_pause_every_ns: u64,
    #[serde(default)]
    pub sender_pause_ns: u64,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DelayedAck {
    /// Linux: quick ACKs at the start, then one ACK per two full segments or
    /// after the delayed-ACK timer.
    Linux,
    /// Every segment acknowledged at once.
    Off,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pacing {
    /// Pace when the CCA asks for it (Linux without the fq qdisc).
    Auto,
    On,
    Off,
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FlowKind {
    Bulk,
    Rpc,
    /// `size_bytes`, then done.
    Transfer,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub id: u32,
    pub cca: String,
    /// Dumbbell: the sender host's index.
    #[serde(default)]
    pub sender: Option<usize>,
    /// Network: the flow's end hosts and paths (link names; absent = the
    /// shortest path by delay).
    #[serde(default)]
    pub src: Option<String>,
    #[serde(default)]
    pub dst: Option<String>,
    #[serde(default)]
    pub path: Option<Vec<String>>,
    #[serde(default)]
    pub return_path: Option<Vec<String>>,
    pub kind: FlowKind,
    /// Transfer: bytes to deliver.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    pub start_ns: u64,
    #[serde(default)]
    pub stop_ns: Option<u64>,
    #[serde(default)]
    pub request_bytes: Option<u64>,
    #[serde(default)]
    pub response_bytes: Option<u64>,
    #[serde(default)]
    pub think_ns: Option<u64>,
    /// Upper bound on cwnd in segments (what a TCP-BPF clamp does).
    #[serde(default)]
    pub cwnd_clamp: Option<u32>,
    /// Cap on the pacing rate in bits/s (SO_MAX_PACING_RATE; turns pacing on).
    #[serde(default)]
    pub max_rate_bps: Option<u64>,
    /// Traffic class for multi-queue disciplines (the two-class switch).
    #[serde(default)]
    pub queue_class: Option<u8>,
}


/// The run's network resolved to indices: what the world is built from.
pub struct Topology {
    pub net: Network,
    /// Per flow (config order): its initial paths.
    pub routes: Vec<FlowRoute>,
    /// Route changes: time, flow indices, new path, new return path (None: unchanged).
    pub events: Vec<(u64, Vec<usize>, Vec<usize>, Option<Vec<usize>>)>,
    pub controller: Option<Controller>,
}

/// A NOTED controller with its watched link and each candidate's alternative.
pub struct Controller {
    pub noted: Noted,
    pub link: usize,
    /// Flow index, alternative path, alternative return path (None: unchanged).
    pub alternatives: Vec<(usize, Vec<usize>, Option<Vec<usize>>)>,
}

impl RunConfig {
    /// Checks the spec layer should already have made; a failure here is a
    /// bug upstream, reported as an error rather than a panic.
    pub fn check(&self) -> Result<(), String> {
        if self.duration_ns == 0 {
            return Err("duration_ns must be positive".into());
        }
        if self.sample_interval_ns == 0 {
            return Err("sample_interval_ns must be positive".into());
        }
        if self.tcp.hz == Some(0) {
            return Err("tcp.hz must be positive".into());
        }
        if self.tcp.mss == 0 || self.tcp.init_cwnd == 0 {
            return Err("tcp.mss and tcp.init_cwnd must be positive".into());
        }
        for (what, med, p90) in [
            ("read_latency", self.tcp.read_latency_median_ns, self.tcp.read_latency_p90_ns),
            ("pacing_latency", self.tcp.pacing_latency_median_ns, self.tcp.pacing_latency_p90_ns),
        ] {
            if (med == 0) != (p90 == 0) || p90 < med {
                return Err(format!("tcp.{what}: median {med} ns and p90 {p90} ns: both 0, or 0 < median <= p90"));
            }
        }
        if (self.tcp.sender_pause_every_ns == 0) != (self.tcp.sender_pause_ns == 0) {
            return Err(format!(
                "tcp.sender_pauses: every {} ns and length {} ns: both 0 or both positive",
                self.tcp.sender_pause_every_ns, self.tcp.sender_pause_ns
            ));
        }
        if self.tcp.rmem_bytes > i32::MAX as u64 {
            // Linux's tcp_rmem is an int; SACK blocks travel as 32-bit
            // offsets from the ACK, which this bound keeps exact (packet.rs).
            return Err(format!("tcp.rmem_bytes must be below 2 GiB (got {}), as Linux's tcp_rmem", self.tcp.rmem_bytes));
        }
        match (&self.network, &self.bottleneck) {
            (Some(_), None) if self.senders.is_empty() && self.reverse.is_none() => {}
            (Some(_), _) => return Err("network: give either network or senders/bottleneck/reverse, not both".into()),
            (None, None) => return Err("bottleneck (or a network) is needed".into()),
            (None, Some(b)) => {
                if self.senders.is_empty() {
                    return Err("at least one sender is needed".into());
                }
                b.check("bottleneck")?;
                if let Some(r) = &self.reverse {
                    r.check("reverse")?;
                }
                for s in &self.senders {
                    if s.rate_bps == 0 {
                        return Err("sender access rate_bps must be positive".into());
                    }
                }
            }
        }
        let mut ids: Vec<u32> = self.flows.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("flow id {} given twice", w[0]));
        }
        for f in &self.flows {
            if let Err(e) = crate::cc::check(&f.cca) {
                return Err(format!("flow {}: {e}", f.id));
            }
            if f.cwnd_clamp == Some(0) || f.max_rate_bps == Some(0) {
                return Err(format!("flow {}: cwnd_clamp and max_rate_bps must be positive", f.id));
            }
            if f.kind == FlowKind::Rpc && f.request_bytes.unwrap_or(0) == 0 {
                return Err(format!("flow {}: rpc needs request_bytes > 0", f.id));
            }
            if (f.kind == FlowKind::Transfer) != f.size_bytes.is_some() || f.size_bytes == Some(0) {
                return Err(format!("flow {}: size_bytes (> 0) is given for transfer flows and only for them", f.id));
            }
        }
        if let Some(ControllerConfig::Noted(c)) = &self.controller {
            c.check()?;
        }
        Ok(())
    }

    /// The network (the dumbbell expanded, or the one given), every flow's
    /// paths, the route events and the controller, checked against it.
    pub fn topology(&self) -> Result<Topology, String> {
        let dumbbell = self.network.is_none();
        let net = match &self.network {
            Some(n) => n.clone(),
            None => {
                let b = self.bottleneck.as_ref().ok_or("bottleneck (or a network) is needed")?;
                Network::dumbbell(&self.senders, b, self.reverse.as_ref())
            }
        };
        net.check()?;
        let mut routes = Vec::with_capacity(self.flows.len());
        for f in &self.flows {
            let what = format!("flow {}", f.id);
            let r = if dumbbell {
                if f.src.is_some() || f.dst.is_some() || f.path.is_some() || f.return_path.is_some() {
                    return Err(format!("{what}: src/dst/path belong to a network; a dumbbell flow gives its sender"));
                }
                let s = f.sender.ok_or_else(|| format!("{what}: sender is needed"))?;
                if s >= self.senders.len() {
                    return Err(format!("{what}: sender {s} does not exist"));
                }
                Network::dumbbell_route(self.senders.len(), s)
            } else {
                if f.sender.is_some() {
                    return Err(format!("{what}: sender belongs to the dumbbell; a network flow gives src and dst"));
                }
                let (Some(src), Some(dst)) = (&f.src, &f.dst) else {
                    return Err(format!("{what}: src and dst are needed"));
                };
                net.flow_route(&what, src, dst, f.path.as_deref(), f.return_path.as_deref())?
            };
            routes.push(r);
        }
        let flow_index = |id: u32, what: &str| {
            self.flows.iter().position(|f| f.id == id).ok_or_else(|| format!("{what}: no flow {id}"))
        };
        // A flow's ends, to check a new path against.
        let ends = |fi: usize| {
            let r = &routes[fi];
            let name = |n: usize| net.nodes[n].name.clone();
            (name(net.ends(r.path[0]).0), name(net.ends(*r.path.last().expect("non-empty")).1))
        };
        let mut events = Vec::with_capacity(self.events.len());
        let mut last = 0;
        for (i, e) in self.events.iter().enumerate() {
            let what = format!("events[{i}]");
            if e.at_ns < last {
                return Err(format!("{what}: events must be sorted by at_ns"));
            }
            last = e.at_ns;
            if e.flows.is_empty() {
                return Err(format!("{what}: no flows"));
            }
            let mut fis = Vec::with_capacity(e.flows.len());
            let (mut path, mut back) = (vec![], None);
            for &id in &e.flows {
                let fi = flow_index(id, &what)?;
                let (src, dst) = ends(fi);
                let w = format!("{what} (flow {id})");
                path = net.path(&format!("{w}: path"), &e.path, &src, &dst)?;
                back = e.return_path.as_ref().map(|p| net.path(&format!("{w}: return_path"), p, &dst, &src)).transpose()?;
                fis.push(fi);
            }
            events.push((e.at_ns, fis, path, back));
        }
        let controller = match &self.controller {
            None => None,
            Some(ControllerConfig::Noted(c)) => {
                let link = net.link(&c.link).ok_or_else(|| format!("controller.link: no link {:?}", c.link))?;
                let mut alternatives = Vec::with_capacity(c.alternatives.len());
                for a in &c.alternatives {
                    let what = format!("controller.alternatives (flow {})", a.flow);
                    let fi = flow_index(a.flow, &what)?;
                    let (src, dst) = ends(fi);
                    let path = net.path(&format!("{what}: path"), &a.path, &src, &dst)?;
                    let back =
                        a.return_path.as_ref().map(|p| net.path(&format!("{what}: return_path"), p, &dst, &src)).transpose()?;
                    alternatives.push((fi, path, back));
                }
                Some(Controller { noted: Noted::new(c.clone(), net.links[link].config.rate_bps), link, alternatives })
            }
        };
        Ok(Topology { net, routes, events, controller })
    }
}
