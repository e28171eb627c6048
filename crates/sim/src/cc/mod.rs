//! Congestion control: one file per algorithm behind one trait, shaped like
//! Linux's `struct tcp_congestion_ops`.
//!
//! The TCP engine (`crate::tcp`) owns a [`Conn`] (the subset of Linux's
//! `struct tcp_sock` a CCA may read or write) and calls the hooks in the
//! same order Linux's `tcp_ack()` does:
//!
//! 1. `pkts_acked` after the retransmit queue is cleaned (per-ACK RTT sample);
//! 2. loss-state transitions: on entering fast recovery the engine calls
//!    `ssthresh()`, stores the result in `conn.ssthresh` and then calls
//!    `set_state(Recovery)`; PRR then shrinks cwnd towards ssthresh; on RTO it
//!    calls `ssthresh()`, sets cwnd to 1 and calls `set_state(Loss)` and
//!    `cwnd_event(Loss)`;
//! 3. `cong_control(rs)` if the CCA implements it (returns true) — it then owns
//!    cwnd and pacing rate entirely, like BBR; otherwise, outside recovery and
//!    only when `conn.is_cwnd_limited()`, `cong_avoid(acked)`.
//!
//! When a reduction proves spurious (D-SACK, timestamps or F-RTO; see
//! `crate::tcp`'s undo), the engine sets cwnd to `undo_cwnd()` and restores
//! the ssthresh from before it. As in Linux, only BBR, BBRv3, DCTCP and
//! H-TCP (and a BPF CCA) restore state of their own; the others, CUBIC and
//! BIC included, use Reno's max(cwnd, prior_cwnd).
//!
//! Units follow Linux: cwnd and ssthresh in segments, times in microseconds,
//! pacing rate in bytes per second.

pub mod bbr;
pub mod bbr3;
pub mod bic;
pub mod bpf;
pub mod cubic;
pub mod dctcp;
pub mod highspeed;
pub mod htcp;
pub mod illinois;
pub mod newreno;
pub mod nv;
pub mod reno;
#[cfg(test)]
pub(crate) mod testutil;
pub mod util;
pub mod vegas;
pub mod westwood;

/// Linux's `TCP_INFINITE_SSTHRESH`.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Congestion-avoidance state of the connection (Linux `tcp_ca_state`), in
/// Linux's order, which BBR compares (`prev_ca_state < TCP_CA_Recovery`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CaState {
    Open,
    Disorder,
    Cwr,
    Recovery,
    Loss,
}

/// Events passed to `cwnd_event` (Linux `tcp_ca_event`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaEvent {
    /// First transmission when nothing was in flight (restart after idle).
    TxStart,
    /// RTO fired: the connection entered Loss.
    Loss,
    /// Reduction of cwnd (CWR or recovery) finished.
    CompleteCwr,
    /// ECN: an ACK without / with the ECE echo.
    EcnNoCe,
    EcnIsCe,
}

/// The connection state a CCA may read and write (subset of `struct tcp_sock`).
#[derive(Clone, Debug)]
pub struct Conn {
    /// Current time in microseconds (`tcp_clock_us()`); nanosecond clock kept
    /// for CCAs that want it.
    pub now_us: u64,
    pub now_ns: u64,
    /// Sender MSS (payload bytes of a full segment).
    pub mss: u32,
    /// Bytes on the wire per segment beyond the payload (headers).
    pub header_bytes: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    /// Upper bound on cwnd (`snd_cwnd_clamp`), e.g. a TCP-BPF clamp.
    pub cwnd_clamp: u32,
    /// Additive-increase counter (`snd_cwnd_cnt`).
    pub cwnd_cnt: u32,
    /// Smoothed RTT in microseconds; 0 before the first sample.
    pub srtt_us: u32,
    /// Windowed minimum RTT in microseconds (`tcp_min_rtt`); u32::MAX before the first sample.
    pub min_rtt_us: u32,
    /// Segments sent and not yet cumulatively acked.
    pub packets_out: u32,
    pub sacked_out: u32,
    pub lost_out: u32,
    pub retrans_out: u32,
    /// Total segments delivered (acked or sacked) so far (`tp->delivered`).
    pub delivered: u64,
    /// Of those, delivered with CE marks (`tp->delivered_ce`).
    pub delivered_ce: u64,
    /// Total segments marked lost so far (`tp->lost`).
    pub lost: u64,
    /// `tp->app_limited`: 0 when not app-limited, else the `delivered` value
    /// at which the app-limited phase ends. A CCA may set it (BBR ProbeRTT).
    pub app_limited: u64,
    pub ca_state: CaState,
    /// Pacing rate in bytes per second (`sk_pacing_rate`).
    pub pacing_rate: u64,
    /// Cap on the pacing rate (`sk_max_pacing_rate`), u64::MAX when none.
    pub max_pacing_rate: u64,
    /// Whether the flow used its whole cwnd in the last window (`tp->is_cwnd_limited`).
    pub is_cwnd_limited_flag: bool,
    /// Largest `packets_out` seen in the last window (`tp->max_packets_out`).
    pub max_packets_out: u32,
    /// cwnd before the last reduction (`tp->prior_cwnd`).
    pub prior_cwnd: u32,
    /// ECN in use on this connection.
    pub ecn: bool,
    /// First unacknowledged and next byte to send (`snd_una`, `snd_nxt`).
    pub snd_una: u64,
    pub snd_nxt: u64,
    /// Time of the last data transmission in microseconds (`lsndtime`).
    pub lsndtime_us: u64,
    /// `tp->tcp_wstamp_ns`: when the next packet may leave (a paced
    /// sender's next slot, which may be later than now; else its last
    /// departure). Set before `cong_control`; BBR's
    /// `bbr_packets_in_net_at_edt` counts the packets delivered by then.
    pub wstamp_ns: u64,
    /// CONFIG_HZ of the modelled kernel: the tick of `jiffies`, which
    /// CUBIC's epoch clock counts in.
    pub hz: u64,
    /// The sender is paced (Linux `sk_pacing_status != SK_PACING_NONE`: a
    /// pacing cap, fq, or a CCA that asks for pacing).
    pub paced: bool,
    /// The CCA decides whether the sender is paced (`pacing = "auto"`, no
    /// cap): a BPF CCA may ask for it in any hook, as Linux's
    /// `sk_pacing_status` is read at each transmission.
    pub pacing_auto: bool,
}

impl Conn {
    /// A connection with Linux defaults, for the engine and for CCA unit tests.
    pub fn new(mss: u32, init_cwnd: u32) -> Conn {
        Conn {
            now_us: 0,
            now_ns: 0,
            mss,
            header_bytes: 52,
            cwnd: init_cwnd,
            ssthresh: INFINITE_SSTHRESH,
            cwnd_clamp: u32::MAX / 2,
            cwnd_cnt: 0,
            srtt_us: 0,
            min_rtt_us: u32::MAX,
            packets_out: 0,
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            delivered: 0,
            delivered_ce: 0,
            lost: 0,
            app_limited: 0,
            ca_state: CaState::Open,
            pacing_rate: 0,
            max_pacing_rate: u64::MAX,
            is_cwnd_limited_flag: false,
            max_packets_out: 0,
            prior_cwnd: 0,
            ecn: false,
            snd_una: 0,
            snd_nxt: 0,
            lsndtime_us: 0,
            wstamp_ns: 0,
            hz: 1000,
            paced: false,
            pacing_auto: false,
        }
    }

    /// `tcp_packets_in_flight()`: packets_out - left_out + retrans_out.
    pub fn packets_in_flight(&self) -> u32 {
        (self.packets_out + self.retrans_out).saturating_sub(self.sacked_out + self.lost_out)
    }

    /// `tcp_in_slow_start()`.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// `tcp_is_cwnd_limited()`: in slow start, cwnd may grow while it is less
    /// than twice what was in flight; afterwards only if the flow used it.
    pub fn is_cwnd_limited(&self) -> bool {
        if self.in_slow_start() {
            return self.cwnd < 2 * self.max_packets_out;
        }
        self.is_cwnd_limited_flag
    }

    /// `tcp_slow_start()`: grow cwnd by `acked` up to ssthresh; returns the
    /// part of `acked` left over for congestion avoidance.
    pub fn slow_start(&mut self, acked: u32) -> u32 {
        let cwnd = (self.cwnd + acked).min(self.ssthresh);
        let left = acked - (cwnd - self.cwnd).min(acked);
        self.cwnd = cwnd.min(self.cwnd_clamp);
        left
    }

    /// `tcp_cong_avoid_ai()`: one segment of growth per `w` acked segments.
    pub fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            self.cwnd += 1;
        }
        self.cwnd_cnt += acked;
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            self.cwnd += delta;
        }
        self.cwnd = self.cwnd.min(self.cwnd_clamp);
    }
}

/// Flags passed to `in_ack_event` (Linux `CA_ACK_*`).
pub const ACK_SLOWPATH: u32 = 1;
pub const ACK_WIN_UPDATE: u32 = 2;
/// The ACK carried the ECN echo (ECE).
pub const ACK_ECE: u32 = 4;

/// Per-ACK sample passed to `pkts_acked` (Linux `struct ack_sample`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AckSample {
    /// Segments newly cumulatively acked by this ACK.
    pub pkts_acked: u32,
    /// RTT of the most recently sent segment this ACK delivered (Linux
    /// `ca_rtt_us`), in microseconds; -1 when it was retransmitted or none.
    pub rtt_us: i64,
    /// Segments delivered since the most recently sent segment this ACK
    /// delivered was sent — about what was in flight then (Linux passes
    /// `mss × (tp->delivered − rs->prior_delivered)` in bytes).
    pub in_flight: u32,
}

/// A delivery-rate sample (Linux `struct rate_sample`, per
/// draft-cheng-iccrg-delivery-rate-estimation).
#[derive(Clone, Copy, Debug)]
pub struct RateSample {
    /// `delivered` when the newest acked packet was sent.
    pub prior_delivered: u64,
    /// Segments delivered over the interval; -1 when there is no valid sample.
    pub delivered: i64,
    /// Segments delivered with CE over the interval.
    pub delivered_ce: i64,
    /// Length of the sampling interval in microseconds; -1 when invalid.
    pub interval_us: i64,
    /// RTT of the newest (s)acked, never-retransmitted packet, -1 if none.
    pub rtt_us: i64,
    /// Segments newly marked lost by this ACK.
    pub losses: u32,
    /// Segments newly acked or sacked by this ACK.
    pub acked_sacked: u32,
    /// Packets in flight before this ACK.
    pub prior_in_flight: u32,
    /// The sample was taken while the sender was application-limited.
    pub is_app_limited: bool,
    /// The newest acked packet was a retransmission.
    pub is_retrans: bool,
    /// The ACK was delayed by the receiver.
    pub is_ack_delayed: bool,
}

impl Default for RateSample {
    fn default() -> Self {
        RateSample {
            prior_delivered: 0,
            delivered: -1,
            delivered_ce: 0,
            interval_us: -1,
            rtt_us: -1,
            losses: 0,
            acked_sacked: 0,
            prior_in_flight: 0,
            is_app_limited: false,
            is_retrans: false,
            is_ack_delayed: false,
        }
    }
}

/// What a CCA reports of its own state into the `samples` table.
#[derive(Clone, Copy, Debug, Default)]
pub struct CcaReport {
    /// Short state label ("startup", "probe_bw", "slow_start", "cong_avoid"...).
    pub state: &'static str,
    /// The CCA's bandwidth estimate in bits per second, where it has one.
    pub bw_est_bps: Option<f64>,
}

impl CcaReport {
    /// A window-based CCA's state: slow start below ssthresh, else
    /// congestion avoidance; no bandwidth estimate.
    pub fn window(c: &Conn) -> CcaReport {
        CcaReport { state: if c.in_slow_start() { "slow_start" } else { "cong_avoid" }, bw_est_bps: None }
    }
}

/// The hooks of Linux's `tcp_congestion_ops`, with the same meaning.
pub trait CongestionControl {
    fn name(&self) -> &'static str;

    /// Called once when the connection is set up (`init`).
    fn init(&mut self, _c: &mut Conn) {}

    /// New slow-start threshold on loss (`ssthresh`), in segments.
    fn ssthresh(&mut self, c: &mut Conn) -> u32;

    /// Grow cwnd for `acked` newly acked segments (`cong_avoid`).
    fn cong_avoid(&mut self, _c: &mut Conn, _acked: u32) {}

    /// Called before the engine changes `c.ca_state` to `new_state` (`set_state`).
    fn set_state(&mut self, _c: &mut Conn, _new_state: CaState) {}

    /// Connection events (`cwnd_event`).
    fn cwnd_event(&mut self, _c: &mut Conn, _ev: CaEvent) {}

    /// Called for every ACK before the loss state machine, with `ACK_*`
    /// flags (`in_ack_event`). `c.delivered` / `c.delivered_ce` are already
    /// updated for this ACK.
    fn in_ack_event(&mut self, _c: &mut Conn, _flags: u32) {}

    /// Per-ACK accounting with the RTT sample (`pkts_acked`).
    fn pkts_acked(&mut self, _c: &mut Conn, _s: &AckSample) {}

    /// cwnd to restore when a reduction proves spurious (`undo_cwnd`).
    fn undo_cwnd(&mut self, c: &mut Conn) -> u32 {
        c.cwnd.max(c.prior_cwnd)
    }

    /// Full control of cwnd and pacing from a rate sample (`cong_control`).
    /// Return true when implemented; the engine then skips PRR and `cong_avoid`.
    fn cong_control(&mut self, _c: &mut Conn, _rs: &RateSample) -> bool {
        false
    }

    /// The CCA implements `cong_control` (Linux then skips slow start after
    /// idle and PRR for it).
    fn has_cong_control(&self) -> bool {
        false
    }

    /// The CCA needs ECN on its connections (Linux `TCP_CONG_NEEDS_ECN`,
    /// e.g. DCTCP); its receiver then echoes CE per segment (DCTCP's
    /// accurate echo) instead of RFC 3168's echo-until-CWR.
    fn needs_ecn(&self) -> bool {
        false
    }

    /// The CCA asks for pacing (Linux: `sk_pacing_status = SK_PACING_NEEDED`).
    fn wants_pacing(&self) -> bool {
        false
    }

    /// The send buffer's room per segment of cwnd (`sndbuf_expand`; Linux's
    /// default 2 covers CUBIC's reduction to 0.7 in fast recovery).
    fn sndbuf_expand(&mut self, _c: &mut Conn) -> u32 {
        2
    }

    /// The fewest segments per TSO skb (`min_tso_segs`; Linux's default is
    /// the `tcp_min_tso_segs` sysctl, 2).
    fn min_tso_segs(&mut self, _c: &mut Conn) -> u32 {
        2
    }

    /// A fault that ends the run: a BPF program's (a hook has no way to
    /// return an error; the world asks at every sample).
    fn fault(&self) -> Option<&str> {
        None
    }

    /// The CCA's own state for the `samples` table.
    fn report(&self, c: &Conn) -> CcaReport {
        CcaReport::window(c)
    }
}

/// Names of the algorithms the simulator implements. Linux's names where
/// Linux has the algorithm; "newreno" is the RFC 6582 model (Linux's "reno"
/// is its own NewReno variant) and "bbr3" is Google's BBRv3 (whose Linux
/// module is also called "bbr"; here "bbr" is mainline's v1).
pub const ALGORITHMS: &[&str] = &[
    "reno",
    "newreno",
    "cubic",
    "bbr",
    "bbr3",
    "vegas",
    "bic",
    "highspeed",
    "htcp",
    "illinois",
    "westwood",
    "dctcp",
    "nv",
];

/// Build a CCA by name (see [`ALGORITHMS`]).
pub fn by_name(name: &str) -> Option<Box<dyn CongestionControl>> {
    match name {
        "reno" => Some(Box::new(reno::Reno::default())),
        "newreno" => Some(Box::new(newreno::NewReno::default())),
        "cubic" => Some(Box::new(cubic::Cubic::default())),
        "bbr" => Some(Box::new(bbr::Bbr::default())),
        "bbr3" => Some(Box::new(bbr3::Bbr3::default())),
        "vegas" => Some(Box::new(vegas::Vegas::default())),
        "bic" => Some(Box::new(bic::Bic::default())),
        "highspeed" => Some(Box::new(highspeed::HighSpeed::default())),
        "htcp" => Some(Box::new(htcp::Htcp::default())),
        "illinois" => Some(Box::new(illinois::Illinois::default())),
        "westwood" => Some(Box::new(westwood::Westwood::default())),
        "dctcp" => Some(Box::new(dctcp::Dctcp::default())),
        "nv" => Some(Box::new(nv::Nv::default())),
        n if n.starts_with("bpf:") => bpf::BpfCc::open(&n[4..], 0).ok().map(|b| Box::new(b) as Box<dyn CongestionControl>),
        _ => None,
    }
}

/// Why `name` is not a CCA the simulator can run: a `bpf:OBJECT` that does
/// not load gives the loader's one-line reason.
pub fn check(name: &str) -> Result<(), String> {
    if let Some(path) = name.strip_prefix("bpf:") {
        return bpf::load(path).map(|_| ());
    }
    by_name(name).map(|_| ()).ok_or_else(|| format!("unknown cca {name:?} (known: {ALGORITHMS:?} or bpf:OBJECT)"))
}

/// Build a CCA for one connection; `seed` feeds algorithms with random
/// choices (BBR's initial ProbeBW phase, BBRv3's probe wait, NV's min-RTT
/// period) so runs stay deterministic.
pub fn build(name: &str, seed: u64) -> Option<Box<dyn CongestionControl>> {
    match name {
        "bbr" => Some(Box::new(bbr::Bbr::with_seed(seed))),
        "bbr3" => Some(Box::new(bbr3::Bbr3::with_seed(seed))),
        "nv" => Some(Box::new(nv::Nv::with_seed(seed))),
        n if n.starts_with("bpf:") => bpf::BpfCc::open(&n[4..], seed).ok().map(|b| Box::new(b) as Box<dyn CongestionControl>),
        _ => by_name(name),
    }
}
