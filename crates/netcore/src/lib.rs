//! Pieces shared by the simulator and the real-time emulator. Nothing here
//! reads a clock: every time is an argument, in nanoseconds.

pub mod link;
pub mod net;
pub mod noted;
pub mod qdisc;
pub mod rng;

/// Nanoseconds, the one time unit of the core.
pub type Nanos = u64;

pub const NS_PER_US: u64 = 1_000;
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// What a queue discipline needs to know about a packet, so the same queues
/// serve the simulator's packet descriptors and the emulator's real frames.
pub trait Pkt {
    /// Bytes on the wire.
    fn wire_bytes(&self) -> u32;
    /// Identifies the flow (for per-flow queues and fairness).
    fn flow_key(&self) -> u64;
    /// Traffic class chosen by the host (0 by default); multi-queue
    /// disciplines such as the two-class switch may map classes to queues.
    fn class(&self) -> u8 {
        0
    }
    /// ECN-capable transport (ECT(0)/ECT(1)).
    fn ect(&self) -> bool;
    /// Set the CE codepoint.
    fn mark_ce(&mut self);
}

/// Time to serialise `bytes` at `rate_bps`, rounded up to whole nanoseconds.
pub fn tx_time(bytes: u32, rate_bps: u64) -> Nanos {
    let bits = bytes as u128 * 8 * NS_PER_SEC as u128;
    let r = rate_bps as u128;
    ((bits + r - 1) / r) as Nanos
}
