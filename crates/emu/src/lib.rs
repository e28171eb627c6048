//! ccbench's real-time link emulator for the linux backend
//! (docs/interfaces.md §4). It runs in the router namespace, reads every
//! packet between the sender hosts and the receiver from one TUN device,
//! carries it over the simulator's dumbbell of `netcore` links (access link,
//! bottleneck; return link, access link back) on CLOCK_MONOTONIC, and writes
//! it back to the same device when it reaches the far end.

pub mod cpu;
pub mod engine;
pub mod frame;
pub mod hist;
pub mod ipv4;
pub mod tun;

use engine::{Addresses, Emulator};
use frame::{Frame, Pool};
use netcore::link::Link;
use serde::Deserialize;
use serde_json::json;
use sim::config::{bottleneck_links, LinkConfig};
use std::collections::HashMap;
use std::net::Ipv4Addr;

/// The emulator's config (docs/interfaces.md §4).
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct EmuConfig {
    pub tun: String,
    pub receiver_ip: Ipv4Addr,
    pub senders: Vec<SenderLink>,
    pub bottleneck: LinkConfig,
    #[serde(default)]
    pub reverse: Option<LinkConfig>,
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
        if self.senders.is_empty() {
            return Err("at least one sender is needed".into());
        }
        if self.sample_interval_ns == 0 {
            return Err("sample_interval_ns must be positive".into());
        }
        self.bottleneck.check("bottleneck")?;
        if let Some(r) = &self.reverse {
            r.check("reverse")?;
        }
        for (i, s) in self.senders.iter().enumerate() {
            if s.rate_bps == 0 {
                return Err(format!("senders[{i}].rate_bps must be positive"));
            }
            if s.ip == self.receiver_ip || self.senders[..i].iter().any(|o| o.ip == s.ip) {
                return Err(format!("senders[{i}].ip {} is not unique", s.ip));
            }
        }
        Ok(())
    }
}

/// The links in the simulator's order and with its seeds: bottleneck,
/// reverse, access out per sender, access back per sender.
pub fn build_links(cfg: &EmuConfig) -> Vec<Link<Frame>> {
    let mut links = Vec::with_capacity(2 + 2 * cfg.senders.len());
    links.extend(bottleneck_links(&cfg.bottleneck, cfg.reverse.as_ref(), cfg.seed));
    for _direction in 0..2 {
        for s in &cfg.senders {
            links.push(Link::pipe(s.rate_bps, s.delay_ns));
        }
    }
    links
}

pub fn addresses(cfg: &EmuConfig) -> Addresses {
    Addresses {
        receiver: u32::from(cfg.receiver_ip),
        senders: cfg.senders.iter().enumerate().map(|(i, s)| (u32::from(s.ip), i as u16)).collect::<HashMap<_, _>>(),
    }
}

/// Run the emulator from its JSON config until `stop_at_monotonic_ns`,
/// SIGINT or SIGTERM; the summary as JSON (also the stats file's last line).
pub fn run_json(input: &str) -> Result<String, String> {
    let cfg: EmuConfig = serde_json::from_str(input).map_err(|e| format!("invalid emulator config: {e}"))?;
    cfg.check()?;
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
        build_links(&cfg),
        addresses(&cfg),
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
    let rt = cfg.rt_priority.filter(|&p| p > 0).and_then(|p| tun::set_realtime(p.min(99)).ok().map(|old| (p, old)));
    let guard = signals::SignalGuard::install();
    let reason = emu.run(&mut io, cfg.stop_at_monotonic_ns, &signals::stop_requested);
    drop(guard);
    if let Some((_, old)) = &rt {
        tun::restore_scheduling(old);
    }
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
    });
    let summary = emu.finish(&mut io, reason, extra);
    Ok(summary.to_string())
}
