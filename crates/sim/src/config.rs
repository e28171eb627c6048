//! The resolved run config (docs/interfaces.md §1): every unit already
//! converted to integers in bits/s, nanoseconds and bytes.

use netcore::link::Link;
use netcore::qdisc::{self, Limit, Port, QdiscConfig};
use netcore::rng::Rng;
use netcore::Pkt;
use serde::Deserialize;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    pub seed: u64,
    pub duration_ns: u64,
    pub sample_interval_ns: u64,
    pub tcp: TcpConfig,
    pub senders: Vec<Access>,
    pub bottleneck: LinkConfig,
    #[serde(default)]
    pub reverse: Option<LinkConfig>,
    pub flows: Vec<FlowConfig>,
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
    /// fire only on ticks of 1/hz. None = exact (Linux's high-resolution timers).
    #[serde(default)]
    pub hz: Option<u32>,
    /// CONFIG_HZ of the modelled kernel, for jiffies-based CCA clocks
    /// (CUBIC). None = 1000.
    #[serde(default)]
    pub kernel_hz: Option<u32>,
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

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Access {
    pub rate_bps: u64,
    pub delay_ns: u64,
}

#[derive(Deserialize, Debug, Clone)]
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
}

/// A discipline as a table with `kind`, or a bare name meaning its defaults.
fn qdisc_or_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<QdiscConfig, D::Error> {
    use serde::de::Error;
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(name) => QdiscConfig::by_name(&name)
            .ok_or_else(|| D::Error::custom(format!("unknown qdisc {name:?} (known: {:?})", netcore::qdisc::QDISCS))),
        v => QdiscConfig::deserialize(v).map_err(D::Error::custom),
    }
}

impl LinkConfig {
    /// The port the discipline serves (buffer from buffer_bytes / buffer_pkts).
    pub fn port(&self, seed: u64) -> Port {
        let limit = match (self.buffer_bytes, self.buffer_pkts) {
            (Some(b), _) => Limit::Bytes(b),
            (None, Some(p)) => Limit::Packets(p),
            (None, None) => Limit::Packets(u64::MAX),
        };
        Port { rate_bps: self.rate_bps, limit, seed }
    }

    /// Checks the spec layer should already have made; `name` prefixes the error.
    pub fn check(&self, name: &str) -> Result<(), String> {
        if self.rate_bps == 0 {
            return Err(format!("{name}.rate_bps must be positive"));
        }
        if !(0.0..1.0).contains(&self.loss) {
            return Err(format!("{name}.loss must be in [0, 1)"));
        }
        if self.buffer_bytes.is_some() == self.buffer_pkts.is_some() {
            return Err(format!("{name}: exactly one of buffer_bytes / buffer_pkts"));
        }
        self.qdisc.check(&self.port(0)).map_err(|e| format!("{name}.qdisc: {e}"))
    }

    /// The link with its discipline, over any packet type (the simulator's
    /// descriptors, the emulator's frames). The discipline draws (RED) and
    /// perturbs its flow hash (fq_codel) from a seed of the link's own
    /// stream; the link's loss draws are unchanged.
    pub fn build_link<P: Pkt + 'static>(&self, loss: f64, rng: Rng) -> Link<P> {
        let seed = rng.clone().next_u64();
        let q = qdisc::build(&self.qdisc, &self.port(seed));
        Link::new(self.rate_bps, self.delay_ns, loss, rng, q)
    }
}

/// The bottleneck and the return link, seeded alike by every backend
/// (streams 1 and 2 of the run seed). Without a `reverse` link the return
/// path mirrors the bottleneck, without its random loss.
pub fn bottleneck_links<P: Pkt + 'static>(
    bottleneck: &LinkConfig,
    reverse: Option<&LinkConfig>,
    seed: u64,
) -> [Link<P>; 2] {
    let forward = bottleneck.build_link(bottleneck.loss, Rng::derive(seed, 1));
    let ret = match reverse {
        Some(r) => r.build_link(r.loss, Rng::derive(seed, 2)),
        None => bottleneck.build_link(0.0, Rng::derive(seed, 2)),
    };
    [forward, ret]
}

#[derive(Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FlowKind {
    Bulk,
    Rpc,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub id: u32,
    pub cca: String,
    pub sender: usize,
    pub kind: FlowKind,
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
        if self.senders.is_empty() {
            return Err("at least one sender is needed".into());
        }
        let mut links: Vec<(&str, &LinkConfig)> = vec![("bottleneck", &self.bottleneck)];
        if let Some(r) = &self.reverse {
            links.push(("reverse", r));
        }
        for (name, l) in links {
            l.check(name)?;
        }
        for s in &self.senders {
            if s.rate_bps == 0 {
                return Err("sender access rate_bps must be positive".into());
            }
        }
        for f in &self.flows {
            if f.sender >= self.senders.len() {
                return Err(format!("flow {}: sender {} does not exist", f.id, f.sender));
            }
            if crate::cc::by_name(&f.cca).is_none() {
                return Err(format!("flow {}: unknown cca {:?} (known: {:?})", f.id, f.cca, crate::cc::ALGORITHMS));
            }
            if f.cwnd_clamp == Some(0) || f.max_rate_bps == Some(0) {
                return Err(format!("flow {}: cwnd_clamp and max_rate_bps must be positive", f.id));
            }
            if f.kind == FlowKind::Rpc && f.request_bytes.unwrap_or(0) == 0 {
                return Err(format!("flow {}: rpc needs request_bytes > 0", f.id));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod qdisc_tests {
    use super::*;
    use netcore::qdisc::CodelParams;

    fn link(qdisc: &str) -> Result<LinkConfig, serde_json::Error> {
        serde_json::from_str(&format!(r#"{{"rate_bps": 1000000, "delay_ns": 0, "buffer_pkts": 100{qdisc}}}"#))
    }

    #[test]
    fn qdisc_as_table_name_or_absent() {
        assert_eq!(link("").unwrap().qdisc, QdiscConfig::default());
        assert_eq!(link(r#", "qdisc": "codel""#).unwrap().qdisc, QdiscConfig::Codel(CodelParams::default()));
        let l = link(r#", "qdisc": {"kind": "codel", "target_ns": 2000000, "ecn": true}"#).unwrap();
        assert_eq!(
            l.qdisc,
            QdiscConfig::Codel(CodelParams { target_ns: 2_000_000, ecn: true, ..CodelParams::default() })
        );
        let e = link(r#", "qdisc": "sfq""#).unwrap_err().to_string();
        assert!(e.contains("unknown qdisc \"sfq\""), "{e}");
        let e = link(r#", "qdisc": {"kind": "codel", "targt_ns": 1}"#).unwrap_err().to_string();
        assert!(e.contains("targt_ns"), "{e}");
    }

    #[test]
    fn qdisc_parameters_are_checked() {
        let l = link(r#", "qdisc": {"kind": "red", "min_bytes": 9000, "max_bytes": 3000}"#).unwrap();
        let e = l.qdisc.check(&l.port(0)).unwrap_err();
        assert!(e.contains("min_bytes"), "{e}");
    }
}
