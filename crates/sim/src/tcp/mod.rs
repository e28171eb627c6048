//! TCP endpoints. A connection is one [`Sender`] and one [`Receiver`]; data
//! flows one way. An RPC flow uses two connections (request and response
//! streams) that share one handshake.

pub(crate) mod frto;
pub(crate) mod prr;
pub(crate) mod rack;
pub(crate) mod rate;
mod receiver;
pub(crate) mod rtt;
mod sender;
pub(crate) mod sndbuf;
pub(crate) mod undo;

pub use receiver::{max_window, Receiver};
pub use sender::{Sender, SenderStats};


use crate::packet::Packet;
use netcore::Nanos;

/// Linux TCP_TIMEOUT_MIN_US: the least a tail loss probe adds to 2·srtt
/// and RACK's reordering timer to its wait.
pub(crate) const TIMEOUT_MIN_US: u64 = 2_000;

/// Per-connection options beyond the host's `[tcp]` settings.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnOpts {
    /// ECN negotiated: data is ECT and the sender reacts to ECE.
    pub ecn: bool,
    /// The CCA requires ECN (Linux TCP_CONG_NEEDS_ECN, DCTCP): the
    /// receiver echoes CE per segment instead of until CWR, and
    /// retransmissions stay ECT.
    pub ca_needs_ecn: bool,
    pub cwnd_clamp: Option<u32>,
    /// Pacing-rate cap in bytes/s.
    pub max_pacing_rate: Option<u64>,
    /// Timer tick in ns (0 = exact).
    pub tick_ns: u64,
    pub class: u8,
}

impl ConnOpts {
    /// Round a timer deadline up to the next tick.
    pub fn timer_at(&self, at: Nanos) -> Nanos {
        if self.tick_ns == 0 {
            at
        } else {
            at.div_ceil(self.tick_ns) * self.tick_ns
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    /// The retransmission timer: the RTO, the loss probe or RACK's
    /// reordering timeout (`sender::XmitTimer` says which).
    Retransmit,
    Pace,
    DelAck,
    /// The receiver's compressed-SACK timer (Linux `compressed_ack_timer`).
    CompAck,
    /// The receiving application reads (`jitter::Latency::read`).
    Read,
}

/// What an endpoint asks the world to do: packets to put on the wire and
/// timers to schedule. Reused between calls so nothing is allocated per packet.
#[derive(Default)]
pub struct Out {
    pub pkts: Vec<Packet>,
    pub timers: Vec<(Nanos, u32, TimerKind)>,
}

impl Out {
    pub fn clear(&mut self) {
        self.pkts.clear();
        self.timers.clear();
    }
}

/// Linux's defaults as the study files give them, for unit tests.
#[cfg(test)]
pub(crate) fn test_cfg() -> crate::config::TcpConfig {
    crate::config::TcpConfig {
        mss: 1448,
        header_bytes: 52,
        init_cwnd: 10,
        min_rto_ns: 200_000_000,
        delayed_ack: crate::config::DelayedAck::Linux,
        delack_ns: 40_000_000,
        sack: true,
        rmem_bytes: 6 << 20,
        wmem_bytes: 4 << 20,
        ecn: false,
        pacing: crate::config::Pacing::Auto,
        hz: None,
        kernel_hz: None,
        host_jitter_ns: 0,
        sack_compression: true,
        read_latency_median_ns: 0,
        read_latency_p90_ns: 0,
        pacing_latency_median_ns: 0,
        pacing_latency_p90_ns: 0,
        sender_pause_every_ns: 0,
        sender_pause_ns: 0,
    }
}
