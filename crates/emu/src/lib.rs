//! ccbench's real-time link emulator for the linux backend
//! (docs/interfaces.md §4). It runs in the router namespace, reads every
//! packet between the hosts from one TUN device, carries it over the links
//! of its path (`netcore` links: the simulator's queues, serialisation and
//! delays) on CLOCK_MONOTONIC, and writes it back to the same device when it
//! leaves the last one. The network is the dumbbell (sender access links,
//! bottleneck, return link) or a general graph (`network`, per-flow paths,
//! route changes and the NOTED controller): see [`net`] and [`route`].

pub mod awake;
pub mod cpu;
pub mod engine;
pub mod frame;
pub mod hist;
pub mod ipv4;
pub mod net;
pub mod route;
pub mod tun;

use engine::Emulator;
use frame::Pool;
use serde::Deserialize;
use serde_json::json;
use netcore::net::LinkConfig;
use std::net::Ipv4Addr;

/// The emulator's config (docs/interfaces.md §4): the dumbbell form
/// (`receiver_ip`, `senders`, `bottleneck`, `reverse`) or the network form
/// (`network`, `hosts`, `flows`, `events`, `controller`).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EmuConfig {
    pub tun: String,
    #[serde(default)]
    pub receiver_ip: Option<Ipv4Addr>,
    #[serde(default)]
    pub senders: Vec<SenderLink>,
    #[serde(default)]
    pub bottleneck: Option<LinkConfig>,
    #[serde(default)]
    pub reverse: Option<LinkConfig>,
    /// The general form: the §1 `network` object, the address of every host
    /// node, the flows (with the ports that identify them), route events and
    /// the controller.
    #[serde(default)]
    pub network: Option<serde_json::Value>,
    #[serde(default)]
    pub hosts: Vec<net::HostAddr>,
    #[serde(default)]
    pub flows: Vec<net::EmuFlow>,
    #[serde(default)]
    pub events: Vec<net::EmuEvent>,
    #[serde(default)]
    pub controller: Option<serde_json::Value>,
    pub seed: u64,
    pub stop_at_monotonic_ns: u64,
    pub sample_interval_ns: u64,
    pub t0_monotonic_ns: u64,
    pub stats_path: String,
    pub late_tolerance_ns: u64,
    /// Busy-poll the device for this long before each deadline instead of
    /// sleeping (default [`DEFAULT_SPIN_NS`]); 0 = always sleep.
    #[serde(default)]
    pub spin_ns: Option<u64>,
    /// SCHED_FIFO priority of the emulator thread (1..=99), so other work on
    /// the machine cannot delay packets; absent = [`DEFAULT_RT_PRIORITY`],
    /// null or 0 = normal scheduling. Falls back to normal scheduling when
    /// the kernel refuses (the summary's `rt_priority` says what applied).
    #[serde(default = "default_rt")]
    pub rt_priority: Option<u32>,
    /// The CPU the emulator runs on; the TUN device's received packets are
    /// steered (RPS) to the other CPUs, so the hosts' kernel work runs
    /// beside the emulator instead of inside its writes (see [`cpu`]).
    #[serde(default)]
    pub cpu: cpu::Placement,
    /// With a CPU of its own, keep it from going idle between packets
    /// ([`awake`]); absent = true.
    #[serde(default = "default_true")]
    pub keep_awake: bool,
}

fn default_true() -> bool {
    true
}

pub const DEFAULT_RT_PRIORITY: u32 = 10;

fn default_rt() -> Option<u32> {
    Some(DEFAULT_RT_PRIORITY)
}

/// Busy-wait before a deadline: trades CPU for on-time delivery.
pub const DEFAULT_SPIN_NS: u64 = 20_000;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SenderLink {
    pub ip: Ipv4Addr,
    pub rate_bps: u64,
    pub delay_ns: u64,
}

impl EmuConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.sample_interval_ns == 0 {
            return Err("sample_interval_ns must be positive".into());
        }
        if self.network.is_some() {
            if self.receiver_ip.is_some() || !self.senders.is_empty() || self.bottleneck.is_some() || self.reverse.is_some() {
                return Err("give either network (with hosts, flows) or receiver_ip/senders/bottleneck/reverse, not both".into());
            }
            return Ok(()); // checked while building it (net::build_graph)
        }
        if !self.flows.is_empty() || !self.events.is_empty() || self.controller.is_some() || !self.hosts.is_empty() {
            return Err("flows, hosts, events and controller need a network".into());
        }
        let (Some(receiver), Some(bottleneck)) = (self.receiver_ip, &self.bottleneck) else {
            return Err("receiver_ip and bottleneck are needed (or a network)".into());
        };
        if self.senders.is_empty() {
            return Err("at least one sender is needed".into());
        }
        bottleneck.check("bottleneck")?;
        if let Some(r) = &self.reverse {
            r.check("reverse")?;
        }
        for (i, s) in self.senders.iter().enumerate() {
            if s.rate_bps == 0 {
                return Err(format!("senders[{i}].rate_bps must be positive"));
            }
            if s.ip == receiver || self.senders[..i].iter().any(|o| o.ip == s.ip) {
                return Err(format!("senders[{i}].ip {} is not unique", s.ip));
            }
        }
        Ok(())
    }

    /// The network to emulate: the graph, or the dumbbell expanded into one.
    pub fn build_net(&self) -> Result<engine::Net, String> {
        self.check()?;
        match &self.network {
            Some(_) => net::build_graph(self),
            None => Ok(net::build_dumbbell(self)),
        }
    }
}

/// Run the emulator from its JSON config until `stop_at_monotonic_ns`,
/// SIGINT or SIGTERM; the summary as JSON (also the stats file's last line).
pub fn run_json(input: &str) -> Result<String, String> {
    let cfg: EmuConfig = serde_json::from_str(input).map_err(|e| format!("invalid emulator config: {e}"))?;
    // Build (and so check) the network before touching the device.
    let net = cfg.build_net()?;
    let mtu = tun::dev_mtu(&cfg.tun).unwrap_or(1500);
    let mut io = tun::TunIo::open(&cfg.tun, cfg.spin_ns.unwrap_or(DEFAULT_SPIN_NS))
        .map_err(|e| format!("cannot attach to TUN device {}: {e}", cfg.tun))?;
    let stats = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&cfg.stats_path)
        .map_err(|e| format!("cannot open {}: {e}", cfg.stats_path))?;
    let drops0 = tun::dev_drops(&cfg.tun).unwrap_or((0, 0));
    // Enough buffers for a few thousand packets in flight before any growth.
    let pool = Pool::new((mtu + 64).max(2048), 4096);
    let mut emu = Emulator::new(
        net,
        pool,
        cfg.t0_monotonic_ns,
        cfg.sample_interval_ns,
        cfg.late_tolerance_ns,
        Box::new(stats),
    );
    // Before the real-time priority: pinning moves the thread.
    // "auto" falls back to running unpinned (said in the summary); an
    // explicit CPU that cannot be had is an error.
    let (placed, placement_error) = match cpu::apply(cfg.cpu, &cfg.tun) {
        Ok(p) => (p, None),
        Err(e) if cfg.cpu == cpu::Placement::Auto => (None, Some(e)),
        Err(e) => return Err(e),
    };
    let awake = match (&placed, cfg.keep_awake) {
        (Some(a), true) => {
            awake::KeepAwake::start(a.cpu).map_err(|e| eprintln!("emulator: CPU {} not kept awake: {e}", a.cpu)).ok()
        }
        _ => None,
    };
    let keep_awake = awake.is_some();
    let rt = cfg.rt_priority.filter(|&p| p > 0).and_then(|p| tun::set_realtime(p.min(99)).ok().map(|old| (p, old)));
    let guard = signals::SignalGuard::install();
    let reason = emu.run(&mut io, cfg.stop_at_monotonic_ns, &signals::stop_requested);
    drop(guard);
    if let Some((_, old)) = &rt {
        tun::restore_scheduling(old);
    }
    drop(awake);
    if let Some(a) = &placed {
        cpu::undo(a, &cfg.tun);
    }
    let drops = tun::dev_drops(&cfg.tun).unwrap_or((0, 0));
    let extra = json!({
        // Packets the kernel dropped on the TUN device during the run:
        // tx = towards the emulator (its queue was full: the emulator did
        // not read fast enough), rx = written by the emulator.
        "tun_tx_dropped": drops.1.saturating_sub(drops0.1),
        "tun_rx_dropped": drops.0.saturating_sub(drops0.0),
        "rt_priority": rt.map(|(p, _)| p),
        "spin_ns": io.spin_ns,
        "cpu": placed.as_ref().map(|a| a.cpu),
        "rps_cpus": placed.as_ref().map(|a| a.rps.clone()),
        "placement_error": placement_error,
        "keep_awake": keep_awake,
    });
    let summary = emu.finish(&mut io, reason, extra);
    Ok(summary.to_string())
}
