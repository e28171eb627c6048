//! The resolved run config (docs/interfaces.md §1): every unit already
//! converted to integers in bits/s, nanoseconds and bytes.

pub use netcore::net::{bottleneck_links, Access, LinkConfig};
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
