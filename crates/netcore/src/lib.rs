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
    // In u64 when that cannot overflow (always, for packets and rates of
    // this world): the u128 division is a library call, once per packet
    // per link.
    if let Some(sum) = (bytes as u64).checked_mul(8 * NS_PER_SEC).and_then(|b| b.checked_add(rate_bps - 1)) {
        return sum / rate_bps;
    }
    let bits = bytes as u128 * 8 * NS_PER_SEC as u128;
    let r = rate_bps as u128;
    ((bits + r - 1) / r) as Nanos
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The u64 fast path rounds up exactly as the u128 formula, and the
    /// fallback takes over where u64 would overflow.
    #[test]
    fn tx_time_matches_the_wide_formula() {
        let wide = |bytes: u32, rate: u64| {
            let r = rate as u128;
            ((bytes as u128 * 8 * NS_PER_SEC as u128 + r - 1) / r) as Nanos
        };
        for &bytes in &[1u32, 52, 1500, 1502, 65_535, 3_000_000_000, u32::MAX] {
            for &rate in &[1u64, 999, 1_000_000, 1_000_000_000, 3_000_000_007, 10_000_000_000, u64::MAX / 2, u64::MAX] {
                assert_eq!(tx_time(bytes, rate), wide(bytes, rate), "{bytes} B at {rate} bit/s");
            }
        }
        assert_eq!(tx_time(1500, 1_000_000_000), 12_000);
        assert_eq!(tx_time(52, 10_000_000_000), 42); // 41.6 ns, rounded up
    }
}
