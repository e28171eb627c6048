//! ccbench's packet-level discrete-event simulator of TCP over a network of
//! links: the dumbbell shorthand or any graph of `netcore::net::Network`,
//! each flow on its own path, with route changes during a run, finite
//! transfers and the NOTED path controller (`netcore::noted`).
//!
//! `simulate_json` is the whole interface (docs/interfaces.md): a resolved
//! run config in, the run's tables (flows, samples, queue, rpcs, events) out.
//! Same config and seed, same bytes out. The model is docs/sim-model.md;
//! the modules:
//!
//! - `config`: the run config, checked, and its [`config::Topology`] (the
//!   network with every flow's paths, route events and controller resolved
//!   to link indices);
//! - `events`: the event queue (a radix heap in (time, sequence) order);
//! - `world`: the event loop, links, connections, applications, samplers;
//! - `tcp`: the endpoints; `cc`: one file per congestion control algorithm;
//! - `packet`: the packet descriptor (a route id and hop index for its path);
//! - `jitter`: hosts' per-packet processing jitter (`[tcp] host_jitter`);
//! - `trace`: a pcap of one flow at its two hosts (the config's `pcap`).

pub mod cc;
pub mod config;
pub mod jitter;
pub mod events;
pub mod packet;
pub mod stats;
pub mod tcp;
pub mod timer;
pub mod trace;
pub mod world;

pub use config::RunConfig;
pub use world::{simulate, simulate_cancellable, Cancel, SimResult, INTERRUPTED, LOAD_HEADER_BYTES};

/// Run one simulation from its JSON config; the JSON result or an error text.
pub fn simulate_json(input: &str) -> Result<String, String> {
    simulate_json_cancellable(input, None)
}

/// [`simulate_json`], stopped early ([`INTERRUPTED`]) once `cancel` is set.
pub fn simulate_json_cancellable(input: &str, cancel: Option<Cancel>) -> Result<String, String> {
    let cfg: RunConfig = serde_json::from_str(input).map_err(|e| format!("invalid run config: {e}"))?;
    let res = simulate_cancellable(&cfg, cancel)?;
    serde_json::to_string(&res).map_err(|e| e.to_string())
}
