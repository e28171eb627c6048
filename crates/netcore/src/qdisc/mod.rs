//! Queue disciplines. Each one is a `Qdisc` over any packet type that
//! implements [`Pkt`]; `now` is passed in so the same code runs under the
//! simulator's virtual clock and the emulator's real one. No discipline reads
//! a clock or allocates per packet once its queues have grown to their
//! working size.
//!
//! The registry is [`QdiscConfig`] (one variant per discipline, the resolved
//! run-config JSON `{"kind": "...", ...}`), [`QDISCS`] (their names) and
//! [`build`]. One file per discipline:
//!
//! | kind       | file          | after                                                  |
//! |------------|---------------|--------------------------------------------------------|
//! | `fifo`     | `fifo.rs`     | Linux bfifo / pfifo                                    |
//! | `red`      | `red.rs`      | Linux sch_red (RFC 2309, Floyd & Jacobson 1993)        |
//! | `step_ecn` | `red.rs`      | DCTCP's marking switch (RED with min = max = K)        |
//! | `codel`    | `codel.rs`    | RFC 8289, Linux sch_codel / codel_impl.h               |
//! | `fq_codel` | `fq_codel.rs` | RFC 8290, Linux sch_fq_codel                           |
//! | `fq`       | `fq.rs`       | Linux sch_fq without pacing                            |
//! | `twoclass` | `twoclass.rs` | a two-queue switch port, weighted DRR between classes  |
//! | `cebinae`  | `cebinae.rs`  | Cebinae (SIGCOMM 2022) and its ns-3 artifact           |
//!
//! `pool.rs` keeps the packets of many per-flow queues in one slab (FQ-CoDel).

use crate::{Nanos, Pkt};
use serde::Deserialize;

mod cebinae;
mod codel;
mod fifo;
mod fq;
mod fq_codel;
mod pool;
mod red;
mod twoclass;

pub use cebinae::{Cebinae, CebinaeParams};
pub use codel::{Codel, CodelParams};
pub use fifo::Fifo;
pub use fq::{Fq, FqParams};
pub use fq_codel::{FqCodel, FqCodelParams};
pub use red::{Red, RedParams, StepEcn, StepEcnParams};
pub use twoclass::{ClassParams, TwoClass, TwoClassParams};

/// Counters every discipline keeps; they feed the `queue` table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets accepted into the queue.
    pub enqueued: u64,
    /// Packets dropped: at the tail, early (RED), from the head (CoDel,
    /// FQ-CoDel's overflow), or by a rate filter (Cebinae).
    pub dropped: u64,
    /// Packets whose CE codepoint this discipline set.
    pub ecn_marked: u64,
}

/// Counters of a discipline built from parts (a marker and its FIFO).
impl std::ops::Add for QdiscStats {
    type Output = QdiscStats;
    fn add(self, o: QdiscStats) -> QdiscStats {
        QdiscStats {
            enqueued: self.enqueued + o.enqueued,
            dropped: self.dropped + o.dropped,
            ecn_marked: self.ecn_marked + o.ecn_marked,
        }
    }
}

pub trait Qdisc<P: Pkt> {
    /// Offer a packet. `Err(p)` gives the packet back when it is dropped on
    /// arrival; packets a discipline drops later (from a queue's head) are
    /// only counted in `stats().dropped`.
    fn enqueue(&mut self, p: P, now: Nanos) -> Result<(), P>;
    /// Next packet to transmit, if any.
    fn dequeue(&mut self, now: Nanos) -> Option<P>;
    /// `enqueue` then `dequeue`, for a transmitter that is idle: `Err(p)`
    /// when the packet is dropped on arrival, else what `dequeue` gives. A
    /// discipline may do both at once where that leaves it in the same
    /// state (FQ-CoDel with nothing queued).
    fn enqueue_dequeue(&mut self, p: P, now: Nanos) -> Result<Option<P>, P> {
        self.enqueue(p, now)?;
        Ok(self.dequeue(now))
    }
    fn backlog_bytes(&self) -> u64;
    fn backlog_pkts(&self) -> u64;
    fn stats(&self) -> QdiscStats;
}

/// The size limit of a queue: in bytes or in packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Bytes(u64),
    Packets(u64),
}

impl Limit {
    /// Would a queue holding `bytes` in `pkts` packets still fit one more
    /// packet of `size` bytes?
    #[inline]
    pub fn admits(self, bytes: u64, pkts: u64, size: u64) -> bool {
        match self {
            Limit::Bytes(b) => bytes + size <= b,
            Limit::Packets(n) => pkts < n,
        }
    }

    /// Is a queue holding `bytes` in `pkts` packets over the limit?
    #[inline]
    pub fn exceeded(self, bytes: u64, pkts: u64) -> bool {
        match self {
            Limit::Bytes(b) => bytes > b,
            Limit::Packets(n) => pkts > n,
        }
    }

    /// The limit as bytes, counting a packet as `mtu` bytes.
    pub fn as_bytes(self, mtu: u64) -> u64 {
        match self {
            Limit::Bytes(b) => b,
            Limit::Packets(n) => n * mtu,
        }
    }

    /// Half of it (at least one packet's worth).
    pub fn half(self) -> Limit {
        match self {
            Limit::Bytes(b) => Limit::Bytes((b / 2).max(1)),
            Limit::Packets(n) => Limit::Packets((n / 2).max(1)),
        }
    }
}

/// What a discipline knows about the port it serves.
#[derive(Clone, Copy, Debug)]
pub struct Port {
    /// Transmission rate (RED's idle decay, Cebinae's budgets).
    pub rate_bps: u64,
    /// The port's buffer: the hard limit of the discipline.
    pub limit: Limit,
    /// Seed for the discipline's random draws and hash perturbation.
    pub seed: u64,
}

/// A discipline and its parameters, as the resolved run config carries it:
/// `{"kind": "fq_codel", "target_ns": 5000000, ...}`. Every parameter has
/// the Linux (or paper) default, so `{"kind": "fq_codel"}` alone is valid.
#[derive(Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QdiscConfig {
    Fifo(FifoParams),
    Red(RedParams),
    StepEcn(StepEcnParams),
    Codel(CodelParams),
    FqCodel(FqCodelParams),
    Fq(FqParams),
    #[serde(rename = "twoclass")]
    TwoClass(TwoClassParams),
    Cebinae(CebinaeParams),
}

/// Droptail has no parameters beyond the port's buffer.
#[derive(Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FifoParams {}

/// Names accepted as `kind`, in the order of [`QdiscConfig`].
pub const QDISCS: &[&str] = &["fifo", "red", "step_ecn", "codel", "fq_codel", "fq", "twoclass", "cebinae"];

impl Default for QdiscConfig {
    fn default() -> Self {
        QdiscConfig::Fifo(FifoParams {})
    }
}

impl QdiscConfig {
    /// The discipline's name (its `kind`).
    pub fn name(&self) -> &'static str {
        match self {
            QdiscConfig::Fifo(_) => QDISCS[0],
            QdiscConfig::Red(_) => QDISCS[1],
            QdiscConfig::StepEcn(_) => QDISCS[2],
            QdiscConfig::Codel(_) => QDISCS[3],
            QdiscConfig::FqCodel(_) => QDISCS[4],
            QdiscConfig::Fq(_) => QDISCS[5],
            QdiscConfig::TwoClass(_) => QDISCS[6],
            QdiscConfig::Cebinae(_) => QDISCS[7],
        }
    }

    /// A discipline with every parameter at its default.
    pub fn by_name(name: &str) -> Option<QdiscConfig> {
        Some(match name {
            "fifo" => QdiscConfig::Fifo(FifoParams {}),
            "red" => QdiscConfig::Red(RedParams::default()),
            "step_ecn" => QdiscConfig::StepEcn(StepEcnParams::default()),
            "codel" => QdiscConfig::Codel(CodelParams::default()),
            "fq_codel" => QdiscConfig::FqCodel(FqCodelParams::default()),
            "fq" => QdiscConfig::Fq(FqParams::default()),
            "twoclass" => QdiscConfig::TwoClass(TwoClassParams::default()),
            "cebinae" => QdiscConfig::Cebinae(CebinaeParams::default()),
            _ => return None,
        })
    }

    /// Parameter checks the spec layer should already have made; the error
    /// names the parameter.
    pub fn check(&self, port: &Port) -> Result<(), String> {
        match self {
            QdiscConfig::Fifo(_) => Ok(()),
            QdiscConfig::Red(p) => p.check(port),
            QdiscConfig::StepEcn(p) => p.check(),
            QdiscConfig::Codel(p) => p.check(),
            QdiscConfig::FqCodel(p) => p.check(),
            QdiscConfig::Fq(p) => p.check(),
            QdiscConfig::TwoClass(p) => p.check(),
            QdiscConfig::Cebinae(p) => p.check(),
        }
    }
}

/// Build a discipline for a port. Call [`QdiscConfig::check`] first: a
/// parameter it rejects may panic here.
pub fn build<P: Pkt + 'static>(cfg: &QdiscConfig, port: &Port) -> Box<dyn Qdisc<P>> {
    match cfg {
        QdiscConfig::Fifo(_) => Box::new(Fifo::new(port.limit)),
        QdiscConfig::Red(p) => Box::new(Red::new(p, port)),
        QdiscConfig::StepEcn(p) => Box::new(StepEcn::new(p, port)),
        QdiscConfig::Codel(p) => Box::new(Codel::new(p, port)),
        QdiscConfig::FqCodel(p) => Box::new(FqCodel::new(p, port)),
        QdiscConfig::Fq(p) => Box::new(Fq::new(p, port)),
        QdiscConfig::TwoClass(p) => Box::new(TwoClass::new(p, port)),
        QdiscConfig::Cebinae(p) => Box::new(Cebinae::new(p, port)),
    }
}

#[cfg(test)]
pub(crate) mod testutil;

#[cfg(test)]
mod tests {
    use super::testutil::{port, E};
    use super::*;

    #[test]
    fn every_name_parses_builds_and_names_itself() {
        let port = port(100_000_000, Limit::Packets(100));
        for name in QDISCS {
            let cfg: QdiscConfig = serde_json::from_str(&format!(r#"{{"kind": "{name}"}}"#)).unwrap();
            assert_eq!(cfg.name(), *name);
            assert_eq!(QdiscConfig::by_name(name).as_ref(), Some(&cfg));
            cfg.check(&port).unwrap();
            let mut q = build::<E>(&cfg, &port);
            assert!(q.enqueue(E::new(1500, 1), 0).is_ok());
            assert_eq!(q.backlog_pkts(), 1);
            assert_eq!(q.dequeue(0).map(|p| p.size), Some(1500));
            assert_eq!(q.backlog_bytes(), 0);
        }
        assert!(QdiscConfig::by_name("sfq").is_none());
    }

    #[test]
    fn unknown_parameters_and_kinds_are_errors() {
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "codel", "targt_ns": 1}"#).is_err());
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "fifo", "x": 1}"#).is_err());
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind": "sfq"}"#).is_err());
        let c: QdiscConfig = serde_json::from_str(r#"{"kind": "codel", "target_ns": 1000000}"#).unwrap();
        match c {
            QdiscConfig::Codel(p) => {
                assert_eq!(p.target_ns, 1_000_000);
                assert_eq!(p.interval_ns, 100_000_000);
            }
            _ => panic!("not codel"),
        }
    }
}
