//! ccbench's packet-level discrete-event simulator of TCP over a dumbbell.
//!
//! `simulate_json` is the whole interface (docs/interfaces.md): a resolved
//! run config in, the run's tables out. Same config and seed, same bytes out.

pub mod cc;
pub mod config;
pub mod packet;
pub mod stats;
pub mod tcp;
pub mod timer;
pub mod world;

pub use config::RunConfig;
pub use world::{simulate, SimResult};

/// Run one simulation from its JSON config; the JSON result or an error text.
pub fn simulate_json(input: &str) -> Result<String, String> {
    let cfg: RunConfig = serde_json::from_str(input).map_err(|e| format!("invalid run config: {e}"))?;
    let res = simulate(&cfg)?;
    serde_json::to_string(&res).map_err(|e| e.to_string())
}
