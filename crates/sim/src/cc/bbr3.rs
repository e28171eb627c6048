//! BBR v3 with the behaviour of Google's tcp_bbr.c on the v3 branch of
//! github.com/google/bbr (BBR_VERSION 3), described by the IETF CCWG draft
//! draft-ietf-ccwg-bbr ("BBR Congestion Control").
//!
//! Registered as "bbr3": Linux's v3 module is also called "bbr", which here
//! names the v1 model (bbr.rs) that mainline kernels ship.
//!
//! The model: bw_hi / inflight_hi are long-term upper bounds (bw_hi is the
//! max delivery rate over the last one or two ProbeBW cycles; inflight_hi
//! the most data in flight that did not cause more than 2 % loss or 50 % CE
//! marks); bw_lo / inflight_lo are short-term lower bounds cut to 0.7×
//! (Linux's bbr_beta = 0.3 reduction; by ECN to 1 − α/3) in each round with
//! loss or marks while not probing. The state machine is Startup (pacing gain 2.77, cwnd gain 2) →
//! Drain (0.35) → ProbeBW cycling DOWN (0.91) → CRUISE (1.0, inflight kept
//! 15 % below inflight_hi) → REFILL (1.0 for one round) → UP (1.25, cwnd
//! gain 2.25, inflight_hi raised 1, 2, 4, ... segments per round) → DOWN…
//! A new probe starts after a random 2–3 s of wall clock, or sooner after
//! min(63, BDP) rounds, less a random 0–1 (Reno coexistence). ProbeRTT
//! runs when the 5 s min-RTT window expires: cwnd = ½·BDP for 200 ms and a
//! round.
//! Startup also ends on ≥ 6 loss events in a recovery round with > 2 %
//! loss, or 2 rounds of > 50 % CE.
//!
//! Where the draft and the code differ, this follows the code (ProbeBW_DOWN
//! pacing gain 0.91, not 0.90; Drain gain 1/2.885, not 0.5). Arithmetic
//! follows Linux: bandwidth in segments/µs << 24, gains in 1/256, ECN α in
//! 1/256, min-RTT and ProbeRTT stamps in jiffies (HZ = 1000), other times
//! in µs. Linux's app-limited fast path is kept.
//!
//! What the engine does not give and is reconstructed here:
//! * Linux's `rate_sample.tx_in_flight` (packets in flight when the acked
//!   packet was sent) and `rate_sample.lost` (packets marked lost since):
//!   the CCA keeps a short history of (delivered, lost) at each ACK, finds
//!   `lost` at the send time of the sampled packet from its delivered
//!   snapshot (`rs.prior_delivered`), and takes tx_in_flight = delivered in
//!   the interval + lost in the interval (what was in flight at that send
//!   either got delivered or got marked lost, on a path that does not
//!   reorder);
//! * the `skb_marked_lost` hook: on an ACK that marks losses while probing,
//!   the same check runs once with a sample for the lost packet (tx_in_flight
//!   and lost as above), including Linux's "lost prefix" computation of
//!   inflight_hi;
//! * `rs.is_ece`: remembered from `in_ack_event(ACK_ECE)` of the same ACK;
//! * `tp->delivered_mstamp` and `tp->tcp_wstamp_ns` as in the v1 model (bbr.rs).
//!
//! ECN is used when the connection has ECN and min_rtt ≤ 5 ms (Linux also
//! needs the route's `ecn_low` feature; the simulator has no routes, so an
//! ECN-enabled connection counts as one). Like Linux, BBRv3 does not force
//! ECN on (`needs_ecn` is false), so its receiver echoes RFC 3168-style
//! and the engine counts every segment an ECE-carrying ACK covers as CE,
//! not only the marked ones. PLB (load
//! balancing by rehashing) and TLP-based loss-probe recovery are not
//! modelled.

use super::util::{jiffies, msecs_to_jiffies, us_to_edt};
use netcore::rng::Rng;
use super::{
    CaEvent, CaState, CcaReport, CongestionControl, Conn, RateSample, ACK_ECE, INFINITE_SSTHRESH,
};
use std::collections::VecDeque;

const BW_SCALE: u32 = 24;
const BW_UNIT: u64 = 1 << BW_SCALE;
const BBR_SCALE: u32 = 8;
const BBR_UNIT: u32 = 1 << BBR_SCALE;
/// "No bound" for inflight_hi/lo and bw_lo (Linux's ~0U).
const UNBOUNDED: u32 = u32::MAX;

/// Min-RTT filter window and ProbeRTT timing.
const MIN_RTT_WIN_SEC: u64 = 10;
const PROBE_RTT_MODE_MS: u64 = 200;
const PROBE_RTT_WIN_MS: u64 = 5000;
const PROBE_RTT_CWND_GAIN: u32 = BBR_UNIT / 2;
/// Halve the min_rtt-based TSO allowance per 2^9 µs of min_rtt.
const TSO_RTT_SHIFT: u32 = 9;
const PACING_MARGIN_PERCENT: u64 = 1;
/// Gains.
const STARTUP_PACING_GAIN: u32 = BBR_UNIT * 277 / 100 + 1;
const STARTUP_CWND_GAIN: u32 = BBR_UNIT * 2;
const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
const CWND_GAIN: u32 = BBR_UNIT * 2;
/// Extra cwnd gain in PROBE_UP, in units of BBR_UNIT/4.
const BW_PROBE_CWND_GAIN: u32 = 1;
const CWND_MIN_TARGET: u32 = 4;
const FULL_BW_THRESH: u64 = (BBR_UNIT * 5 / 4) as u64;
const FULL_BW_CNT: u32 = 3;
/// Ack aggregation (as v1).
const EXTRA_ACKED_GAIN: u32 = BBR_UNIT;
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
const EXTRA_ACKED_MAX_US: u64 = 100 * 1000;
/// ECN: only at short RTTs; α EWMA gain 1/16 starting at 1; cut
/// inflight_lo by α/3; probing is too high above 50 % CE; reprobe quickly
/// (half of inflight_hi) once marks stop.
const ECN_MAX_RTT_US: u32 = 5000;
const ECN_ALPHA_GAIN: u32 = BBR_UNIT / 16;
const ECN_ALPHA_INIT: u32 = BBR_UNIT;
const ECN_FACTOR: u32 = BBR_UNIT / 3;
const ECN_THRESH: u32 = BBR_UNIT / 2;
const ECN_REPROBE_GAIN: u32 = BBR_UNIT / 2;
/// Loss response: β = 0.3 cut, probing is too high above 2 % loss, Startup
/// ends on 6 loss events in a round, leave 15 % headroom.
const BETA: u32 = BBR_UNIT * 30 / 100;
const LOSS_THRESH: u32 = BBR_UNIT * 2 / 100;
const FULL_LOSS_CNT: u32 = 6;
const FULL_ECN_CNT: u32 = 2;
const INFLIGHT_HEADROOM: u32 = BBR_UNIT * 15 / 100;
/// Bandwidth-probe spacing: Reno-coexistence bound in rounds, and the
/// wall-clock bound of 2 s + random(1 s).
const BW_PROBE_MAX_ROUNDS: u32 = 63;
const BW_PROBE_RAND_ROUNDS: u32 = 2;
const BW_PROBE_BASE_US: u32 = 2_000_000;
const BW_PROBE_RAND_US: u32 = 1_000_000;
/// Pacing parameters of the sending host (as v1's model).
const PACING_SHIFT: u32 = 10;
const GSO_LEGACY_MAX_SIZE: u64 = 65536;
const MAX_TCP_HEADER: u64 = 320;
/// Below this pacing rate (bits/s) TSO bursts are single segments.
const MIN_TSO_RATE: u64 = 1_200_000;
/// Cap on the (delivered, lost) history.
const HISTORY_MAX: usize = 1 << 14;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// ProbeBW phases (Linux's cycle_idx values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Up,
    Down,
    Cruise,
    Refill,
}

impl Phase {
    fn pacing_gain(self) -> u32 {
        match self {
            Phase::Up => BBR_UNIT * 5 / 4,
            Phase::Down => BBR_UNIT * 91 / 100,
            Phase::Cruise | Phase::Refill => BBR_UNIT,
        }
    }
}

/// What the incoming ACKs say about bandwidth probing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

/// The parts of Linux's rate_sample BBRv3 reads, with the fields the engine
/// lacks filled in (see the module doc).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub rs: RateSample,
    pub tx_in_flight: u32,
    pub lost: u32,
    pub is_ece: bool,
}

#[derive(Clone, Debug)]
pub struct Bbr3 {
    rng: Rng,

    min_rtt_us: u32,
    min_rtt_stamp: u64,
    probe_rtt_done_stamp: Option<u64>,
    probe_rtt_min_us: u32,
    probe_rtt_min_stamp: u64,
    next_rtt_delivered: u64,
    cycle_mstamp: u64,
    mode: Mode,
    prev_ca_state: CaState,
    round_start: bool,
    bw_probe_up_rounds: u32,
    try_fast_path: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    init_cwnd: u32,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    cycle_idx: Phase,
    has_seen_rtt: bool,
    prior_cwnd: u32,
    full_bw: u64,

    ack_epoch_mstamp: u64,
    extra_acked: [u32; 2],
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,

    full_bw_now: bool,
    startup_ecn_rounds: u32,
    loss_in_cycle: bool,
    ecn_in_cycle: bool,
    loss_round_delivered: u64,
    undo_bw_lo: u32,
    undo_inflight_lo: u32,
    undo_inflight_hi: u32,
    bw_latest: u32,
    bw_lo: u32,
    bw_hi: [u32; 2],
    inflight_latest: u32,
    inflight_lo: u32,
    inflight_hi: u32,
    bw_probe_up_cnt: u32,
    bw_probe_up_acks: u32,
    probe_wait_us: u32,
    ecn_eligible: bool,
    ecn_alpha: u32,
    bw_probe_samples: bool,
    prev_probe_too_high: bool,
    stopped_risky_probe: bool,
    rounds_since_probe: u32,
    loss_round_start: bool,
    loss_in_round: bool,
    ecn_in_round: bool,
    ack_phase: AckPhase,
    loss_events_in_round: u32,
    initialized: bool,
    alpha_last_delivered: u64,
    alpha_last_delivered_ce: u64,

    // --- reconstruction of what the engine does not provide ---
    /// tp->delivered_mstamp.
    delivered_mstamp: u64,
    last_delivered: u64,
    /// The current ACK carried ECE (from in_ack_event).
    ack_ece: bool,
    /// (delivered, lost) after each ACK, oldest first.
    history: VecDeque<(u64, u64)>,
    /// Per-ACK scratch: the estimated bw sample (Linux's bbr_context).
    sample_bw: u64,
}

impl Default for Bbr3 {
    fn default() -> Self {
        Bbr3::with_seed(0x00BB_3003)
    }
}

impl Bbr3 {
    /// A BBRv3 instance whose random probe waits come from `seed` (give each
    /// flow its own seed for reproducible, distinct runs).
    pub fn with_seed(seed: u64) -> Self {
        Bbr3 {
            rng: Rng::new(seed),
            min_rtt_us: u32::MAX,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: None,
            probe_rtt_min_us: u32::MAX,
            probe_rtt_min_stamp: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: 0,
            mode: Mode::Startup,
            prev_ca_state: CaState::Open,
            round_start: false,
            bw_probe_up_rounds: 0,
            try_fast_path: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            init_cwnd: 10,
            pacing_gain: STARTUP_PACING_GAIN,
            cwnd_gain: STARTUP_CWND_GAIN,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: Phase::Up,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_mstamp: 0,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            full_bw_now: false,
            startup_ecn_rounds: 0,
            loss_in_cycle: false,
            ecn_in_cycle: false,
            loss_round_delivered: 0,
            undo_bw_lo: 0,
            undo_inflight_lo: 0,
            undo_inflight_hi: 0,
            bw_latest: 0,
            bw_lo: UNBOUNDED,
            bw_hi: [0; 2],
            inflight_latest: 0,
            inflight_lo: UNBOUNDED,
            inflight_hi: UNBOUNDED,
            bw_probe_up_cnt: UNBOUNDED,
            bw_probe_up_acks: 0,
            probe_wait_us: 0,
            ecn_eligible: false,
            ecn_alpha: ECN_ALPHA_INIT,
            bw_probe_samples: false,
            prev_probe_too_high: false,
            stopped_risky_probe: false,
            rounds_since_probe: 0,
            loss_round_start: false,
            loss_in_round: false,
            ecn_in_round: false,
            ack_phase: AckPhase::Init,
            loss_events_in_round: 0,
            initialized: false,
            alpha_last_delivered: 0,
            alpha_last_delivered_ce: 0,
            delivered_mstamp: 0,
            last_delivered: 0,
            ack_ece: false,
            history: VecDeque::with_capacity(256),
            sample_bw: 0,
        }
    }

    // ----- accessors (reporting and tests) -----

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The ProbeBW phase (meaningful in ProbeBW).
    pub fn phase(&self) -> Phase {
        self.cycle_idx
    }

    /// inflight_hi in segments (u32::MAX when unbounded).
    pub fn inflight_hi(&self) -> u32 {
        self.inflight_hi
    }

    /// inflight_lo in segments (u32::MAX when unbounded).
    pub fn inflight_lo(&self) -> u32 {
        self.inflight_lo
    }

    pub fn min_rtt_us(&self) -> u32 {
        self.min_rtt_us
    }

    /// ECN α in [0, 1].
    pub fn ecn_alpha(&self) -> f64 {
        self.ecn_alpha as f64 / BBR_UNIT as f64
    }

    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain as f64 / BBR_UNIT as f64
    }

    /// The bandwidth in use, min(bw_hi, bw_lo), in payload bits/s.
    pub fn bw_bps(&self, c: &Conn) -> f64 {
        self.bw() as f64 * c.mss as f64 * 8.0 * 1e6 / BW_UNIT as f64
    }

    /// The probe wait drawn for the current cycle, in µs.
    pub fn probe_wait_us(&self) -> u32 {
        self.probe_wait_us
    }

    pub fn state_str(&self) -> &'static str {
        match self.mode {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeRtt => "probe_rtt",
            Mode::ProbeBw => match self.cycle_idx {
                Phase::Up => "probe_bw_up",
                Phase::Down => "probe_bw_down",
                Phase::Cruise => "probe_bw_cruise",
                Phase::Refill => "probe_bw_refill",
            },
        }
    }

    // ----- model helpers -----

    fn max_bw(&self) -> u32 {
        self.bw_hi[0].max(self.bw_hi[1])
    }

    fn bw(&self) -> u32 {
        self.max_bw().min(self.bw_lo)
    }

    fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1])
    }

    fn rate_bytes_per_sec(c: &Conn, bw: u64, gain: u32, margin: u64) -> u64 {
        let mut rate = bw as u128 * c.mss as u128;
        rate *= gain as u128;
        rate >>= BBR_SCALE;
        rate *= (1_000_000 / 100 * (100 - margin)) as u128;
        rate >>= BW_SCALE;
        (rate.max(1)).min(u64::MAX as u128) as u64
    }

    fn bw_to_pacing_rate(c: &Conn, bw: u32, gain: u32) -> u64 {
        Self::rate_bytes_per_sec(c, bw as u64, gain, PACING_MARGIN_PERCENT).min(c.max_pacing_rate)
    }

    fn init_pacing_rate_from_rtt(&mut self, c: &mut Conn) {
        let rtt_us = if c.srtt_us != 0 {
            self.has_seen_rtt = true;
            c.srtt_us.max(1) as u64 // Conn::srtt_us is unscaled
        } else {
            1000
        };
        let bw = (c.cwnd as u64 * BW_UNIT / rtt_us).min(u32::MAX as u64) as u32;
        c.pacing_rate = Self::bw_to_pacing_rate(c, bw, STARTUP_PACING_GAIN);
    }

    fn set_pacing_rate(&mut self, c: &mut Conn, bw: u32, gain: u32) {
        let rate = Self::bw_to_pacing_rate(c, bw, gain);
        if !self.has_seen_rtt && c.srtt_us != 0 {
            self.init_pacing_rate_from_rtt(c);
        }
        // Only upward until the pipe is known to be full.
        if self.full_bw_reached || rate > c.pacing_rate {
            c.pacing_rate = rate;
        }
    }

    /// `bbr_tso_segs_goal`: ~1 ms of data at the pacing rate plus an
    /// allowance that halves per 512 µs of min_rtt, within 64 KB.
    fn tso_segs_goal(&self, c: &Conn) -> u32 {
        let mut bytes = c.pacing_rate >> PACING_SHIFT;
        let r = self.min_rtt_us >> TSO_RTT_SHIFT;
        if r < 32 {
            bytes += GSO_LEGACY_MAX_SIZE >> r;
        }
        bytes = bytes.min(GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER);
        ((bytes / c.mss.max(1) as u64) as u32).max(Self::bbr_min_tso_segs(c))
    }

    /// `bbr_min_tso_segs`: single-segment bursts below 1.2 Mbit/s.
    fn bbr_min_tso_segs(c: &Conn) -> u32 {
        if c.pacing_rate < MIN_TSO_RATE >> 3 {
            1
        } else {
            2
        }
    }

    fn save_cwnd(&mut self, c: &Conn) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = c.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(c.cwnd);
        }
    }

    /// ceil(bw · min_rtt · gain) in segments.
    fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return self.init_cwnd;
        }
        let w = bw as u128 * self.min_rtt_us as u128;
        (((w * gain as u128) >> BBR_SCALE).div_ceil(BW_UNIT as u128)).min(u32::MAX as u128) as u32
    }

    /// Room for three TSO bursts, at least 4 segments, +2 while probing up.
    fn quantization_budget(&self, c: &Conn, cwnd: u32) -> u32 {
        let mut cwnd = cwnd.max(3 * self.tso_segs_goal(c)).max(CWND_MIN_TARGET);
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            cwnd = cwnd.saturating_add(2);
        }
        cwnd
    }

    fn inflight(&self, c: &Conn, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(c, self.bdp(bw, gain))
    }

    /// Packets expected in the network when the next packet departs:
    /// inflight, plus the next burst when probing upward, less what the
    /// estimated bandwidth delivers until that departure (as v1).
    fn packets_in_net_at_edt(&self, c: &Conn, inflight_now: u32) -> u32 {
        let delivered_by_edt = (self.bw() as u64).saturating_mul(us_to_edt(c)) >> BW_SCALE;
        let mut at_edt = inflight_now as u64;
        if self.pacing_gain > BBR_UNIT {
            at_edt += self.tso_segs_goal(c) as u64;
        }
        at_edt.saturating_sub(delivered_by_edt) as u32
    }

    fn ack_aggregation_cwnd(&self) -> u32 {
        let max_aggr = (self.bw() as u64 * EXTRA_ACKED_MAX_US / BW_UNIT) as u32;
        let aggr = (EXTRA_ACKED_GAIN * self.extra_acked()) >> BBR_SCALE;
        aggr.min(max_aggr)
    }

    fn probe_rtt_cwnd(&self) -> u32 {
        CWND_MIN_TARGET.max(self.bdp(self.bw(), PROBE_RTT_CWND_GAIN))
    }

    fn set_cwnd(&mut self, c: &mut Conn, acked: u32, bw: u32, gain: u32) {
        let mut cwnd = c.cwnd;
        if acked > 0 {
            let mut target = self.bdp(bw, gain);
            target += self.ack_aggregation_cwnd();
            target = self.quantization_budget(c, target);
            self.try_fast_path = false;
            if self.full_bw_reached {
                // Only cut cwnd once the pipe has been filled.
                cwnd += acked;
                if cwnd >= target {
                    cwnd = target;
                    self.try_fast_path = true;
                }
            } else if cwnd < target || cwnd < 2 * self.init_cwnd {
                cwnd += acked;
            } else {
                self.try_fast_path = true;
            }
            cwnd = cwnd.max(CWND_MIN_TARGET);
        }
        c.cwnd = cwnd.min(c.cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            c.cwnd = c.cwnd.min(self.probe_rtt_cwnd());
        }
    }

    fn update_round_start(&mut self, c: &Conn, rs: &RateSample) {
        self.round_start = false;
        if rs.interval_us > 0 && rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = c.delivered;
            self.round_start = true;
        }
    }

    fn calculate_bw_sample(&mut self, rs: &RateSample) {
        self.sample_bw = 0;
        if rs.interval_us > 0 && rs.delivered >= 0 {
            self.sample_bw = (rs.delivered as u64 * BW_UNIT).div_ceil(rs.interval_us as u64);
        }
    }

    fn sample_bw_u32(&self) -> u32 {
        self.sample_bw.min(u32::MAX as u64) as u32
    }

    fn update_ack_aggregation(&mut self, c: &Conn, rs: &RateSample) {
        if rs.acked_sacked == 0 || rs.delivered < 0 || rs.interval_us <= 0 {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1f);
            let thresh = if self.full_bw_reached {
                EXTRA_ACKED_WIN_RTTS
            } else {
                1
            };
            if self.extra_acked_win_rtts >= thresh {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = self.delivered_mstamp.saturating_sub(self.ack_epoch_mstamp);
        let mut expected = (self.bw() as u64 * epoch_us / BW_UNIT) as u32;
        if self.ack_epoch_acked <= expected
            || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_mstamp = self.delivered_mstamp;
            expected = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xfffff);
        let extra = (self.ack_epoch_acked - expected).min(c.cwnd);
        if extra > self.extra_acked[self.extra_acked_win_idx] {
            self.extra_acked[self.extra_acked_win_idx] = extra;
        }
    }

    fn check_probe_rtt_done(&mut self, c: &mut Conn) {
        match self.probe_rtt_done_stamp {
            Some(t) if jiffies(c) > t => {}
            _ => return,
        }
        self.probe_rtt_min_stamp = jiffies(c); // schedule the next one
        c.cwnd = c.cwnd.max(self.prior_cwnd);
        self.exit_probe_rtt(c);
    }

    fn update_min_rtt(&mut self, c: &mut Conn, rs: &RateSample) {
        let now = jiffies(c);
        let probe_rtt_expired = now > self.probe_rtt_min_stamp + msecs_to_jiffies(c, PROBE_RTT_WIN_MS);
        if rs.rtt_us >= 0
            && ((rs.rtt_us as u64) < self.probe_rtt_min_us as u64
                || (probe_rtt_expired && !rs.is_ack_delayed))
        {
            self.probe_rtt_min_us = rs.rtt_us.min(u32::MAX as i64) as u32;
            self.probe_rtt_min_stamp = now;
        }
        let min_rtt_expired = now > self.min_rtt_stamp + MIN_RTT_WIN_SEC * c.hz;
        if self.probe_rtt_min_us <= self.min_rtt_us || min_rtt_expired {
            self.min_rtt_us = self.probe_rtt_min_us;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }

        if probe_rtt_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt; // dip: drain the queue
            self.save_cwnd(c);
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.next_rtt_delivered = c.delivered;
        }

        if self.mode == Mode::ProbeRtt {
            // Samples taken at this low inflight say nothing about bandwidth.
            c.app_limited = (c.delivered + c.packets_in_flight() as u64).max(1);
            if self.probe_rtt_done_stamp.is_none() && c.packets_in_flight() <= self.probe_rtt_cwnd()
            {
                self.probe_rtt_done_stamp = Some(now + msecs_to_jiffies(c, PROBE_RTT_MODE_MS));
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = c.delivered;
            } else if self.probe_rtt_done_stamp.is_some() {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(c);
                }
            }
        }
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (STARTUP_PACING_GAIN, STARTUP_CWND_GAIN),
            Mode::Drain => (DRAIN_GAIN, STARTUP_CWND_GAIN),
            Mode::ProbeBw => {
                let mut cwnd_gain = CWND_GAIN;
                if self.cycle_idx == Phase::Up {
                    cwnd_gain += BBR_UNIT * BW_PROBE_CWND_GAIN / 4;
                }
                (self.cycle_idx.pacing_gain(), cwnd_gain)
            }
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    fn take_max_bw_sample(&mut self, bw: u32) {
        self.bw_hi[1] = self.bw_hi[1].max(bw);
    }

    /// Keep the max of the last one or two ProbeBW cycles.
    fn advance_max_bw_filter(&mut self) {
        if self.bw_hi[1] == 0 {
            return; // nothing sampled in this window: keep the old one
        }
        self.bw_hi[0] = self.bw_hi[1];
        self.bw_hi[1] = 0;
    }

    fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.full_bw_now = false;
    }

    fn target_inflight(&self, c: &Conn) -> u32 {
        self.inflight(c, self.bw(), BBR_UNIT).min(c.cwnd)
    }

    fn is_probing_bandwidth(&self) -> bool {
        self.mode == Mode::Startup
            || (self.mode == Mode::ProbeBw && matches!(self.cycle_idx, Phase::Refill | Phase::Up))
    }

    fn has_elapsed_in_phase(&self, c: &Conn, interval_us: u32) -> bool {
        c.now_us > self.cycle_mstamp + interval_us as u64
    }

    fn handle_queue_too_high_in_startup(&mut self, c: &Conn) {
        self.full_bw_reached = true;
        let bdp = self.inflight(c, self.max_bw(), BBR_UNIT);
        self.inflight_hi = bdp.max(self.inflight_latest);
    }

    fn check_ecn_too_high_in_startup(&mut self, c: &Conn, ce_ratio: u32) {
        if self.full_bw_reached || !self.ecn_eligible {
            return;
        }
        if ce_ratio >= ECN_THRESH {
            self.startup_ecn_rounds += 1;
        } else {
            self.startup_ecn_rounds = 0;
        }
        if self.startup_ecn_rounds >= FULL_ECN_CNT {
            self.handle_queue_too_high_in_startup(c);
        }
    }

    /// Once per round: α ← (1 − 1/16)·α + 1/16·CE ratio.
    fn update_ecn_alpha(&mut self, c: &Conn) {
        if !self.ecn_eligible && c.ecn && self.min_rtt_us <= ECN_MAX_RTT_US {
            self.ecn_eligible = true;
        }
        if !self.ecn_eligible {
            return;
        }
        let delivered = c.delivered.wrapping_sub(self.alpha_last_delivered);
        let delivered_ce = c.delivered_ce.wrapping_sub(self.alpha_last_delivered_ce);
        if delivered == 0 || delivered > i64::MAX as u64 || delivered_ce > i64::MAX as u64 {
            return;
        }
        let ce_ratio = ((delivered_ce << BBR_SCALE) / delivered) as u32;
        let mut alpha = ((BBR_UNIT - ECN_ALPHA_GAIN) as u64 * self.ecn_alpha as u64) >> BBR_SCALE;
        alpha += (ECN_ALPHA_GAIN as u64 * ce_ratio as u64) >> BBR_SCALE;
        self.ecn_alpha = alpha.min(BBR_UNIT as u64) as u32;
        self.alpha_last_delivered = c.delivered;
        self.alpha_last_delivered_ce = c.delivered_ce;
        self.check_ecn_too_high_in_startup(c, ce_ratio);
    }

    /// Each round of PROBE_UP doubles the growth of inflight_hi.
    fn raise_inflight_hi_slope(&mut self, c: &Conn) {
        let growth_this_round = 1u32 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.bw_probe_up_cnt = (c.cwnd / growth_this_round).max(1);
    }

    fn probe_inflight_hi_upward(&mut self, c: &Conn, rs: &RateSample) {
        if !c.is_cwnd_limited_flag || c.cwnd < self.inflight_hi {
            return; // not using inflight_hi fully: do not raise it
        }
        self.bw_probe_up_acks += rs.acked_sacked;
        if self.bw_probe_up_acks >= self.bw_probe_up_cnt {
            let delta = self.bw_probe_up_acks / self.bw_probe_up_cnt;
            self.bw_probe_up_acks -= delta * self.bw_probe_up_cnt;
            self.inflight_hi = self.inflight_hi.saturating_add(delta);
            self.try_fast_path = false;
        }
        if self.round_start {
            self.raise_inflight_hi_slope(c);
        }
    }

    /// More than 2 % of what was in flight lost, or more than 50 % CE.
    fn is_inflight_too_high(&self, s: &Sample) -> bool {
        if s.lost > 0 && s.tx_in_flight > 0 {
            let loss_thresh = ((s.tx_in_flight as u64 * LOSS_THRESH as u64) >> BBR_SCALE) as u32;
            if s.lost > loss_thresh {
                return true;
            }
        }
        if s.rs.delivered_ce > 0 && s.rs.delivered > 0 && self.ecn_eligible {
            let ecn_thresh = (s.rs.delivered as u64 * ECN_THRESH as u64) >> BBR_SCALE;
            if s.rs.delivered_ce as u64 > ecn_thresh {
                return true;
            }
        }
        false
    }

    /// The inflight at which the loss rate crossed the threshold, for a
    /// lost packet of one segment: solve
    ///   (lost_prev + prefix) / (inflight_prev + prefix) = loss_thresh.
    fn inflight_hi_from_lost_skb(s: &Sample) -> u32 {
        let pcount = 1u32;
        let Some(inflight_prev) = s.tx_in_flight.checked_sub(pcount) else {
            return UNBOUNDED;
        };
        let Some(lost_prev) = s.lost.checked_sub(pcount) else {
            return UNBOUNDED;
        };
        let loss_budget =
            ((inflight_prev as u64 * LOSS_THRESH as u64) + BBR_UNIT as u64 - 1) >> BBR_SCALE;
        let lost_prefix = if lost_prev as u64 >= loss_budget {
            0
        } else {
            ((loss_budget - lost_prev as u64) << BBR_SCALE) / (BBR_UNIT - LOSS_THRESH) as u64
        };
        (inflight_prev as u64 + lost_prefix).min(u32::MAX as u64) as u32
    }

    /// 85 % of inflight_hi (at least 4): the operating point after a probe
    /// found loss or marks, leaving room for other flows.
    fn inflight_with_headroom(&self) -> u32 {
        if self.inflight_hi == UNBOUNDED {
            return UNBOUNDED;
        }
        let headroom =
            (((self.inflight_hi as u64 * INFLIGHT_HEADROOM as u64) >> BBR_SCALE) as u32).max(1);
        self.inflight_hi
            .saturating_sub(headroom)
            .max(CWND_MIN_TARGET)
    }

    fn bound_cwnd_for_inflight_model(&mut self, c: &mut Conn) {
        if !self.initialized {
            return;
        }
        let mut cap = UNBOUNDED;
        if self.mode == Mode::ProbeBw && self.cycle_idx != Phase::Cruise {
            cap = self.inflight_hi; // probe up to the bound
        } else if self.mode == Mode::ProbeRtt
            || (self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Cruise)
        {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo).max(CWND_MIN_TARGET);
        c.cwnd = c.cwnd.min(cap);
    }

    fn ecn_cut(&self) -> u32 {
        BBR_UNIT - ((self.ecn_alpha * ECN_FACTOR) >> BBR_SCALE)
    }

    fn init_lower_bounds(&mut self, c: &Conn, init_bw: bool) {
        if init_bw && self.bw_lo == UNBOUNDED {
            self.bw_lo = self.max_bw();
        }
        if self.inflight_lo == UNBOUNDED {
            self.inflight_lo = c.cwnd;
        }
    }

    /// Cut the short-term bounds by β, but not below what the last round
    /// actually delivered.
    fn loss_lower_bounds(&mut self) {
        let loss_cut = (BBR_UNIT - BETA) as u64;
        self.bw_lo = self
            .bw_latest
            .max(((self.bw_lo as u64 * loss_cut) >> BBR_SCALE) as u32);
        self.inflight_lo = self
            .inflight_latest
            .max(((self.inflight_lo as u64 * loss_cut) >> BBR_SCALE) as u32);
    }

    fn adapt_lower_bounds(&mut self, c: &Conn) {
        if self.is_probing_bandwidth() {
            return; // probing must be free to push inflight up
        }
        let mut ecn_inflight_lo = UNBOUNDED;
        if self.ecn_in_round {
            self.init_lower_bounds(c, false);
            ecn_inflight_lo =
                ((self.inflight_lo as u64 * self.ecn_cut() as u64) >> BBR_SCALE) as u32;
        }
        if self.loss_in_round {
            self.init_lower_bounds(c, true);
            self.loss_lower_bounds();
        }
        self.inflight_lo = self.inflight_lo.min(ecn_inflight_lo);
        self.bw_lo = self.bw_lo.max(1);
    }

    fn reset_lower_bounds(&mut self) {
        self.bw_lo = UNBOUNDED;
        self.inflight_lo = UNBOUNDED;
    }

    fn reset_congestion_signals(&mut self) {
        self.loss_in_round = false;
        self.ecn_in_round = false;
        self.loss_in_cycle = false;
        self.ecn_in_cycle = false;
        self.bw_latest = 0;
        self.inflight_latest = 0;
    }

    fn exit_loss_recovery(&mut self, c: &mut Conn) {
        c.cwnd = c.cwnd.max(self.prior_cwnd);
        self.try_fast_path = false;
    }

    fn update_latest_delivery_signals(&mut self, c: &Conn, rs: &RateSample) {
        self.loss_round_start = false;
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return;
        }
        self.bw_latest = self.bw_latest.max(self.sample_bw_u32());
        self.inflight_latest = self.inflight_latest.max(rs.delivered.max(0) as u32);
        if rs.prior_delivered >= self.loss_round_delivered {
            self.loss_round_delivered = c.delivered;
            self.loss_round_start = true;
        }
    }

    fn advance_latest_delivery_signals(&mut self, rs: &RateSample) {
        if self.loss_round_start {
            self.bw_latest = self.sample_bw_u32();
            self.inflight_latest = rs.delivered.max(0) as u32;
        }
    }

    fn update_congestion_signals(&mut self, c: &Conn, rs: &RateSample) {
        if rs.interval_us <= 0 || rs.acked_sacked == 0 {
            return;
        }
        let bw = self.sample_bw_u32();
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.take_max_bw_sample(bw);
        }
        self.loss_in_round |= rs.losses > 0;
        if !self.loss_round_start {
            return;
        }
        // Once per round trip.
        self.adapt_lower_bounds(c);
        self.loss_in_round = false;
        self.ecn_in_round = false;
    }

    fn is_reno_coexistence_probe_time(&self, c: &Conn) -> bool {
        let rounds = BW_PROBE_MAX_ROUNDS.min(self.target_inflight(c));
        self.rounds_since_probe >= rounds
    }

    /// Randomised wait before the next probe: 0–1 extra rounds for the
    /// Reno bound, 2–3 s of wall clock.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_probe = self.rng.below(BW_PROBE_RAND_ROUNDS);
        self.probe_wait_us = BW_PROBE_BASE_US + self.rng.below(BW_PROBE_RAND_US);
    }

    fn set_cycle_idx(&mut self, p: Phase) {
        self.cycle_idx = p;
        self.try_fast_path = false;
    }

    fn start_bw_probe_refill(&mut self, c: &Conn, bw_probe_up_rounds: u32) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = bw_probe_up_rounds;
        self.bw_probe_up_acks = 0;
        self.stopped_risky_probe = false;
        self.ack_phase = AckPhase::Refilling;
        self.next_rtt_delivered = c.delivered;
        self.set_cycle_idx(Phase::Refill);
    }

    fn start_bw_probe_up(&mut self, c: &Conn) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.next_rtt_delivered = c.delivered;
        self.cycle_mstamp = c.now_us;
        self.reset_full_bw();
        self.full_bw = self.sample_bw;
        self.set_cycle_idx(Phase::Up);
        self.raise_inflight_hi_slope(c);
    }

    fn start_bw_probe_down(&mut self, c: &Conn) {
        self.reset_congestion_signals();
        self.bw_probe_up_cnt = UNBOUNDED;
        self.pick_probe_wait();
        self.cycle_mstamp = c.now_us;
        self.ack_phase = AckPhase::ProbeStopping;
        self.next_rtt_delivered = c.delivered;
        self.set_cycle_idx(Phase::Down);
    }

    fn start_bw_probe_cruise(&mut self) {
        if self.inflight_lo != UNBOUNDED {
            self.inflight_lo = self.inflight_lo.min(self.inflight_hi);
        }
        self.set_cycle_idx(Phase::Cruise);
    }

    /// Loss or marks too high while probing: cut inflight_hi, once per probe.
    fn handle_inflight_too_high(&mut self, c: &Conn, s: &Sample) {
        self.prev_probe_too_high = true;
        self.bw_probe_samples = false;
        if !s.rs.is_app_limited {
            let floor =
                ((self.target_inflight(c) as u64 * (BBR_UNIT - BETA) as u64) >> BBR_SCALE) as u32;
            self.inflight_hi = s.tx_in_flight.max(floor);
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            self.start_bw_probe_down(c);
        }
    }

    /// Returns true when it decided a state transition.
    fn adapt_upper_bounds(&mut self, c: &Conn, s: &Sample) -> bool {
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // The last samples of the probe are in: forget the older cycle.
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            if self.mode == Mode::ProbeBw && !s.rs.is_app_limited {
                self.advance_max_bw_filter();
            }
            // inflight_hi was reached without trouble: probe again, staying
            // at inflight_hi for a round before going beyond.
            if self.mode == Mode::ProbeBw && self.stopped_risky_probe && !self.prev_probe_too_high {
                self.start_bw_probe_refill(c, 0);
                return true;
            }
        }
        if self.is_inflight_too_high(s) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(c, s);
            }
        } else {
            if self.inflight_hi == UNBOUNDED {
                return false;
            }
            // Resilience to random loss: a higher level proved safe.
            if s.tx_in_flight > self.inflight_hi {
                self.inflight_hi = s.tx_in_flight;
            }
            if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
                self.probe_inflight_hi_upward(c, &s.rs);
            }
        }
        false
    }

    fn check_time_to_probe_bw(&mut self, c: &Conn) -> bool {
        // Marks but no loss, and the marks stopped: reprobe quickly.
        if self.ecn_eligible
            && self.ecn_in_cycle
            && !self.loss_in_cycle
            && c.ca_state == CaState::Open
        {
            let v = ((self.inflight_hi as u64 * ECN_REPROBE_GAIN as u64) >> BBR_SCALE).max(1);
            let n = 63 - v.leading_zeros();
            self.start_bw_probe_refill(c, n);
            return true;
        }
        if self.has_elapsed_in_phase(c, self.probe_wait_us)
            || self.is_reno_coexistence_probe_time(c)
        {
            self.start_bw_probe_refill(c, 0);
            return true;
        }
        false
    }

    fn check_time_to_cruise(&self, c: &Conn, inflight: u32, bw: u32) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        inflight <= self.inflight(c, bw, BBR_UNIT)
    }

    fn update_cycle_phase(&mut self, c: &Conn, s: &Sample) {
        if !self.full_bw_reached {
            return;
        }
        if self.adapt_upper_bounds(c, s) {
            return;
        }
        if self.mode != Mode::ProbeBw {
            return;
        }
        let inflight = self.packets_in_net_at_edt(c, s.rs.prior_in_flight);
        let bw = self.max_bw();
        match self.cycle_idx {
            Phase::Cruise => {
                self.check_time_to_probe_bw(c);
            }
            Phase::Refill => {
                // After a round of refilling, samples reflect it: probe up.
                if self.round_start {
                    self.bw_probe_samples = true;
                    self.start_bw_probe_up(c);
                }
            }
            Phase::Up => {
                let mut done = false;
                if self.prev_probe_too_high && inflight >= self.inflight_hi {
                    // Reached the level that hurt last time: stop here.
                    self.stopped_risky_probe = true;
                    done = true;
                } else if c.is_cwnd_limited_flag && c.cwnd >= self.inflight_hi {
                    // inflight_hi limits growth: the plateau test restarts.
                    self.reset_full_bw();
                    self.full_bw = self.sample_bw;
                } else if self.full_bw_now {
                    done = true; // bandwidth stopped growing
                }
                if done {
                    self.prev_probe_too_high = false;
                    self.start_bw_probe_down(c);
                }
            }
            Phase::Down => {
                if self.check_time_to_probe_bw(c) {
                    return;
                }
                if self.check_time_to_cruise(c, inflight, bw) {
                    self.start_bw_probe_cruise();
                }
            }
        }
    }

    fn exit_probe_rtt(&mut self, c: &Conn) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.mode = Mode::ProbeBw;
            // Schedule the next probe afresh, and cruise: inflight is low.
            self.start_bw_probe_down(c);
            self.start_bw_probe_cruise();
        } else {
            self.mode = Mode::Startup;
        }
    }

    fn check_loss_too_high_in_startup(&mut self, c: &Conn, s: &Sample) {
        if self.full_bw_reached {
            return;
        }
        if s.rs.losses > 0 && self.loss_events_in_round < 0xf {
            self.loss_events_in_round += 1;
        }
        if self.loss_round_start
            && c.ca_state == CaState::Recovery
            && self.loss_events_in_round >= FULL_LOSS_CNT
            && self.is_inflight_too_high(s)
        {
            self.handle_queue_too_high_in_startup(c);
            return;
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_now || rs.is_app_limited {
            return;
        }
        let bw_thresh = (self.full_bw * FULL_BW_THRESH) >> BBR_SCALE;
        if self.sample_bw >= bw_thresh {
            self.reset_full_bw();
            self.full_bw = self.sample_bw;
            return;
        }
        if !self.round_start {
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_now = self.full_bw_cnt >= FULL_BW_CNT;
        self.full_bw_reached |= self.full_bw_now;
    }

    fn check_drain(&mut self, c: &mut Conn) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            // Exported for monitoring only: BBR does not use ssthresh.
            c.ssthresh = self.inflight(c, self.max_bw(), BBR_UNIT);
            self.reset_congestion_signals();
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(c, c.packets_in_flight())
                <= self.inflight(c, self.max_bw(), BBR_UNIT)
        {
            self.mode = Mode::ProbeBw;
            self.start_bw_probe_down(c);
        }
    }

    fn update_model(&mut self, c: &mut Conn, s: &Sample) {
        self.update_congestion_signals(c, &s.rs);
        self.update_ack_aggregation(c, &s.rs);
        self.check_loss_too_high_in_startup(c, s);
        self.check_full_bw_reached(&s.rs);
        self.check_drain(c);
        self.update_cycle_phase(c, s);
        self.update_min_rtt(c, &s.rs);
    }

    /// Linux's fast path for app-limited ACKs that bring nothing new.
    fn run_fast_path(&mut self, c: &mut Conn, s: &Sample, update_model: &mut bool) -> bool {
        if self.try_fast_path
            && s.rs.is_app_limited
            && self.sample_bw < self.max_bw() as u64
            && !self.loss_in_round
            && !self.ecn_in_round
        {
            let prev_mode = self.mode;
            let prev_min_rtt = self.min_rtt_us;
            self.check_drain(c);
            self.update_cycle_phase(c, s);
            self.update_min_rtt(c, &s.rs);
            if self.mode == prev_mode && self.min_rtt_us == prev_min_rtt && self.try_fast_path {
                return true;
            }
            *update_model = false;
        }
        false
    }

    /// BBR's processing of one ACK (`bbr_main`).
    pub fn main(&mut self, c: &mut Conn, s: &Sample) {
        let rs = &s.rs;
        self.update_round_start(c, rs);
        if self.round_start {
            self.rounds_since_probe = (self.rounds_since_probe + 1).min(0xff);
            self.update_ecn_alpha(c);
        }
        self.ecn_in_round |= self.ecn_eligible && s.is_ece;
        self.calculate_bw_sample(rs);
        self.update_latest_delivery_signals(c, rs);

        let mut update_model = true;
        if !self.run_fast_path(c, s, &mut update_model) {
            if update_model {
                self.update_model(c, s);
            }
            self.update_gains();
            let bw = self.bw();
            self.set_pacing_rate(c, bw, self.pacing_gain);
            self.set_cwnd(c, rs.acked_sacked, bw, self.cwnd_gain);
            self.bound_cwnd_for_inflight_model(c);
        }
        self.advance_latest_delivery_signals(rs);
        self.prev_ca_state = c.ca_state;
        self.loss_in_cycle |= s.lost > 0;
        self.ecn_in_cycle |= rs.delivered_ce > 0;
    }

    /// `bbr_note_loss`: this round trip is a loss round.
    fn note_loss(&mut self, c: &Conn) {
        if !self.loss_in_round {
            self.loss_round_delivered = c.delivered;
        }
        self.loss_in_round = true;
        self.loss_in_cycle = true;
    }

    /// `bbr_skb_marked_lost`, for the packets this ACK marked lost (see
    /// the module doc for the reconstructed sample).
    pub fn marked_lost(&mut self, c: &Conn, s: &Sample) {
        self.note_loss(c);
        if !self.bw_probe_samples {
            return; // not sent while probing
        }
        // Linux's sample for a lost skb carries only these three fields.
        let mut lost = Sample {
            tx_in_flight: s.tx_in_flight,
            lost: s.lost,
            ..Sample::default()
        };
        lost.rs.is_app_limited = s.rs.is_app_limited;
        if self.is_inflight_too_high(&lost) {
            lost.tx_in_flight = Self::inflight_hi_from_lost_skb(&lost);
            self.handle_inflight_too_high(c, &lost);
        }
    }

    /// c.lost when c.delivered was `delivered` (see the module doc).
    fn lost_at(&mut self, delivered: u64) -> u64 {
        // Keep one entry at or before the queried point: later queries are
        // for later points.
        while self.history.len() >= 2 && self.history[1].0 <= delivered {
            self.history.pop_front();
        }
        match self.history.front() {
            Some(&(d, l)) if d <= delivered => l,
            Some(&(_, l)) => l,
            None => 0,
        }
    }

    fn record_history(&mut self, c: &Conn) {
        if self.history.back() != Some(&(c.delivered, c.lost)) {
            if self.history.len() >= HISTORY_MAX {
                self.history.pop_front();
            }
            self.history.push_back((c.delivered, c.lost));
        }
    }

    /// Complete the engine's rate sample with Linux's tx_in_flight, lost and
    /// is_ece.
    fn build_sample(&mut self, c: &Conn, rs: &RateSample) -> Sample {
        let mut s = Sample {
            rs: *rs,
            is_ece: self.ack_ece,
            ..Sample::default()
        };
        if rs.delivered >= 0 {
            let lost = c.lost.saturating_sub(self.lost_at(rs.prior_delivered));
            s.lost = lost.min(u32::MAX as u64) as u32;
            s.tx_in_flight = (rs.delivered as u64 + lost).min(u32::MAX as u64) as u32;
        }
        s
    }
}

impl CongestionControl for Bbr3 {
    fn name(&self) -> &'static str {
        "bbr3"
    }

    fn init(&mut self, c: &mut Conn) {
        let seed_rng = self.rng.clone();
        *self = Bbr3::with_seed(0);
        self.rng = seed_rng;
        self.initialized = true;
        self.init_cwnd = c.cwnd.min(0x7f);
        self.prior_cwnd = c.prior_cwnd;
        c.ssthresh = INFINITE_SSTHRESH;
        self.next_rtt_delivered = c.delivered;
        self.prev_ca_state = CaState::Open;
        self.probe_rtt_min_us = c.min_rtt_us;
        self.probe_rtt_min_stamp = jiffies(c);
        self.min_rtt_us = c.min_rtt_us;
        self.min_rtt_stamp = jiffies(c);
        self.has_seen_rtt = false;
        self.init_pacing_rate_from_rtt(c);
        self.ack_epoch_mstamp = c.now_us;
        // Start sampling the ECN mark rate after the first full flight.
        self.loss_round_delivered = c.delivered + 1;
        self.last_delivered = c.delivered;
        self.delivered_mstamp = c.now_us;
        self.history.clear();
        self.history.push_back((c.delivered, c.lost));
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        // Entering recovery: remember cwnd and the bounds for undo; BBR
        // itself does not reduce.
        self.save_cwnd(c);
        self.undo_bw_lo = self.bw_lo;
        self.undo_inflight_lo = self.inflight_lo;
        self.undo_inflight_hi = self.inflight_hi;
        c.ssthresh
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        if new_state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            self.reset_full_bw();
            if !self.is_probing_bandwidth() && self.inflight_lo == UNBOUNDED {
                // adapt_lower_bounds needs the cwnd from before the RTO.
                self.inflight_lo = c.cwnd.max(self.prior_cwnd);
            }
        } else if self.prev_ca_state == CaState::Loss {
            self.exit_loss_recovery(c);
        }
    }

    fn cwnd_event(&mut self, c: &mut Conn, ev: CaEvent) {
        if ev == CaEvent::TxStart && c.app_limited != 0 {
            self.idle_restart = true;
            self.ack_epoch_mstamp = c.now_us;
            self.ack_epoch_acked = 0;
            // Restarting from idle and app-limited: no need to go faster.
            if self.mode == Mode::ProbeBw {
                let bw = self.bw();
                self.set_pacing_rate(c, bw, BBR_UNIT);
            } else if self.mode == Mode::ProbeRtt {
                self.check_probe_rtt_done(c);
            }
        }
    }

    fn in_ack_event(&mut self, _c: &mut Conn, flags: u32) {
        self.ack_ece = flags & ACK_ECE != 0;
    }

    fn undo_cwnd(&mut self, _c: &mut Conn) -> u32 {
        self.reset_full_bw();
        self.loss_in_round = false;
        self.bw_lo = self.bw_lo.max(self.undo_bw_lo);
        self.inflight_lo = self.inflight_lo.max(self.undo_inflight_lo);
        self.inflight_hi = self.inflight_hi.max(self.undo_inflight_hi);
        self.try_fast_path = false;
        self.prior_cwnd
    }

    fn cong_control(&mut self, c: &mut Conn, rs: &RateSample) -> bool {
        if c.delivered != self.last_delivered {
            self.last_delivered = c.delivered;
            self.delivered_mstamp = c.now_us;
        }
        let s = self.build_sample(c, rs);
        if rs.losses > 0 {
            self.marked_lost(c, &s);
        }
        self.main(c, &s);
        self.ack_ece = false;
        self.record_history(c);
        true
    }

    fn wants_pacing(&self) -> bool {
        true
    }

    /// `bbr_sndbuf_expand`: room for three windows, as BBR's cwnd gain of 2
    /// and its probing may need.
    fn sndbuf_expand(&mut self, _c: &mut Conn) -> u32 {
        3
    }

    fn min_tso_segs(&mut self, c: &mut Conn) -> u32 {
        Self::bbr_min_tso_segs(c)
    }

    fn has_cong_control(&self) -> bool {
        true
    }

    fn report(&self, c: &Conn) -> CcaReport {
        CcaReport {
            state: self.state_str(),
            bw_est_bps: Some(self.bw_bps(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{rate_sample_one, RateSampler, TxState};
    use std::collections::VecDeque;

    const MSS: u32 = 1448;
    const WIRE: u64 = 1500;

    /// The TSO goal's floor is `bbr_min_tso_segs`: one segment below
    /// 1.2 Mbit/s, else two (with no min RTT yet, no 64 KB allowance).
    #[test]
    fn tso_goal_floor_follows_the_pacing_rate() {
        let b = Bbr3::default();
        let mut c = Conn::new(MSS, 10);
        c.pacing_rate = 100_000;
        assert_eq!(b.tso_segs_goal(&c), 1);
        c.pacing_rate = 1_000_000;
        assert_eq!(b.tso_segs_goal(&c), 2);
        c.pacing_rate = 12_500_000;
        assert_eq!(b.tso_segs_goal(&c), 8);
    }

    /// As v1's `bbr_packets_in_net_at_edt`: the packets the bandwidth
    /// (here `bw_lo` below `bw_hi`) delivers until the next departure come
    /// off inflight.
    #[test]
    fn packets_in_net_at_the_next_departure() {
        let mut b = Bbr3::default();
        let mut c = Conn::new(MSS, 10);
        b.bw_hi = [(BW_UNIT / 50) as u32, 0];
        b.bw_lo = (BW_UNIT / 64) as u32; // a segment every 64 µs
        b.pacing_gain = BBR_UNIT;
        c.now_ns = 5_000_000;
        c.wstamp_ns = 5_000_000;
        assert_eq!(b.packets_in_net_at_edt(&c, 50), 50);
        c.wstamp_ns = 5_640_000;
        assert_eq!(b.packets_in_net_at_edt(&c, 50), 40);
        c.wstamp_ns = 15_000_000;
        assert_eq!(b.packets_in_net_at_edt(&c, 50), 0);
    }

    /// A segment in flight with its rate-sampling state.
    #[derive(Clone, Copy)]
    struct Seg {
        seq: u64,
        sent_ns: u64,
        tx: TxState,
        ce: bool,
    }

    /// One BBRv3 sender on a FIFO bottleneck with a finite buffer (tail
    /// drop), optional CE marking above a queue threshold, a fixed
    /// propagation delay and one ACK per segment; losses are detected by
    /// the next ACK (no reordering) and not retransmitted.
    struct Pipe {
        c: Conn,
        b: Bbr3,
        now_ns: u64,
        pkt_ns: u64,
        prop_ns: u64,
        buf_pkts: u64,
        ce_pkts: Option<u64>,
        link_free_ns: u64,
        next_send_ns: u64,
        next_seq: u64,
        acks: VecDeque<(u64, Seg)>,
        dropped: VecDeque<u64>,
        rate: RateSampler,
        high_seq: u64,
        usage_seq: u64,
        srtt_ns: u64,
        sent: u64,
        lost: u64,
        trace: Vec<Snap>,
    }

    #[derive(Clone, Copy, Debug)]
    struct Snap {
        t_us: u64,
        mode: Mode,
        phase: Phase,
        cwnd: u32,
        cycle_mstamp: u64,
        probe_wait_us: u32,
        bw_bps: f64,
    }

    impl Pipe {
        fn new(rate_bps: f64, rtt_ms: u64, buf_bdp: f64, seed: u64) -> Pipe {
            let mut c = Conn::new(MSS, 10);
            let mut b = Bbr3::with_seed(seed);
            b.init(&mut c);
            let pkt_ns = (WIRE as f64 * 8.0 * 1e9 / rate_bps).round() as u64;
            let bdp = rtt_ms as f64 * 1e6 / pkt_ns as f64;
            Pipe {
                c,
                b,
                now_ns: 0,
                pkt_ns,
                prop_ns: rtt_ms * 1_000_000,
                buf_pkts: (bdp * buf_bdp).round().max(1.0) as u64,
                ce_pkts: None,
                link_free_ns: 0,
                next_send_ns: 0,
                next_seq: 0,
                acks: VecDeque::new(),
                dropped: VecDeque::new(),
                rate: RateSampler::default(),
                high_seq: 0,
                usage_seq: 0,
                srtt_ns: 0,
                sent: 0,
                lost: 0,
                trace: Vec::new(),
            }
        }

        fn bdp_pkts(&self) -> f64 {
            self.prop_ns as f64 / self.pkt_ns as f64
        }

        fn set_now(&mut self, ns: u64) {
            self.now_ns = ns;
            self.c.now_ns = ns;
            self.c.now_us = ns / 1000;
        }

        fn transmit(&mut self) {
            let now = self.now_ns;
            if self.c.packets_out == 0 {
                self.b.cwnd_event(&mut self.c, CaEvent::TxStart);
            }
            let queued = self.link_free_ns.saturating_sub(now).div_ceil(self.pkt_ns);
            let mut seg = Seg { seq: self.next_seq, sent_ns: now, tx: self.rate.on_send(&self.c, now), ce: false };
            self.next_seq += 1;
            self.sent += 1;
            self.c.packets_out += 1;
            self.c.snd_nxt = self.next_seq * MSS as u64;
            if queued > self.buf_pkts {
                self.dropped.push_back(seg.seq);
            } else {
                seg.ce = self.ce_pkts.is_some_and(|k| queued >= k);
                let depart = self.link_free_ns.max(now) + self.pkt_ns;
                self.link_free_ns = depart;
                self.acks.push_back((depart + self.prop_ns, seg));
            }
            let rate = self.c.pacing_rate.max(1);
            self.next_send_ns = self.next_send_ns.max(now) + WIRE * 1_000_000_000 / rate;
        }

        fn try_send(&mut self) {
            let mut cwnd_limited = false;
            while self.next_send_ns <= self.now_ns {
                if self.c.packets_in_flight() >= self.c.cwnd {
                    cwnd_limited = true;
                    break;
                }
                self.transmit();
            }
            // tcp_cwnd_validate, as the engine does it.
            let snd_una = self.c.snd_una / MSS as u64;
            if snd_una >= self.usage_seq || cwnd_limited {
                self.c.is_cwnd_limited_flag = cwnd_limited;
                self.c.max_packets_out = self.c.packets_out;
                self.usage_seq = self.next_seq;
            }
        }

        fn on_ack(&mut self, mut seg: Seg) {
            let now = self.now_ns;
            let prior_in_flight = self.c.packets_in_flight();
            // Earlier segments still missing were dropped.
            let mut losses = 0;
            while self.dropped.front().is_some_and(|&s| s < seg.seq) {
                self.dropped.pop_front();
                losses += 1;
            }
            self.c.lost += losses;
            self.lost += losses;
            self.c.packets_out -= losses as u32 + 1;
            self.c.delivered += 1;
            if seg.ce {
                self.c.delivered_ce += 1;
            }
            self.c.snd_una = (seg.seq + 1) * MSS as u64;
            let rtt = now - seg.sent_ns;
            self.c.min_rtt_us = self.c.min_rtt_us.min((rtt / 1000) as u32);
            self.srtt_ns = if self.srtt_ns == 0 {
                rtt
            } else {
                (7 * self.srtt_ns + rtt) / 8
            };
            self.c.srtt_us = (self.srtt_ns / 1000) as u32;
            let rs = rate_sample_one(&mut self.rate, &mut self.c, &mut seg.tx, losses as u32, prior_in_flight);
            // Loss state machine, as the engine's.
            if losses > 0 && matches!(self.c.ca_state, CaState::Open | CaState::Disorder) {
                self.high_seq = self.next_seq;
                self.c.prior_cwnd = self.c.cwnd;
                self.c.ssthresh = self.b.ssthresh(&mut self.c);
                self.b.set_state(&mut self.c, CaState::Recovery);
                self.c.ca_state = CaState::Recovery;
            } else if self.c.ca_state == CaState::Recovery && seg.seq >= self.high_seq {
                self.b.set_state(&mut self.c, CaState::Open);
                self.c.ca_state = CaState::Open;
            }
            self.b
                .in_ack_event(&mut self.c, if seg.ce { ACK_ECE } else { 0 });
            self.b.cong_control(&mut self.c, &rs);
            self.trace.push(Snap {
                t_us: self.c.now_us,
                mode: self.b.mode,
                phase: self.b.cycle_idx,
                cwnd: self.c.cwnd,
                cycle_mstamp: self.b.cycle_mstamp,
                probe_wait_us: self.b.probe_wait_us,
                bw_bps: self.b.bw_bps(&self.c),
            });
        }

        fn run_until(&mut self, t_s: f64) {
            let end = (t_s * 1e9) as u64;
            loop {
                let next_ack = self.acks.front().map(|a| a.0);
                let can_send = self.c.packets_in_flight() < self.c.cwnd;
                let next_send = if can_send {
                    Some(self.next_send_ns.max(self.now_ns))
                } else {
                    None
                };
                let t = match (next_ack, next_send) {
                    (Some(a), Some(s)) => a.min(s),
                    (Some(a), None) => a,
                    (None, Some(s)) => s,
                    (None, None) => break,
                };
                if t > end {
                    break;
                }
                self.set_now(t);
                if next_ack == Some(t) {
                    let (_, seg) = self.acks.pop_front().unwrap();
                    self.on_ack(seg);
                }
                self.try_send();
            }
            self.set_now(end);
        }

        /// (time µs, state) at each change of mode or ProbeBW phase.
        fn transitions(&self) -> Vec<(u64, &'static str)> {
            let mut out: Vec<(u64, &'static str)> = Vec::new();
            for s in &self.trace {
                let name = Bbr3 {
                    mode: s.mode,
                    cycle_idx: s.phase,
                    ..Bbr3::default()
                }
                .state_str();
                if out.last().is_none_or(|l| l.1 != name) {
                    out.push((s.t_us, name));
                }
            }
            out
        }
    }

    fn sample(delivered: i64, tx_in_flight: u32, lost: u32) -> Sample {
        Sample {
            rs: RateSample {
                delivered,
                interval_us: 20_000,
                acked_sacked: 1,
                ..RateSample::default()
            },
            tx_in_flight,
            lost,
            is_ece: false,
        }
    }

    /// A BBRv3 flow put straight into ProbeBW with a known model.
    fn in_probe_bw(phase: Phase) -> (Bbr3, Conn) {
        let mut c = Conn::new(MSS, 100);
        c.min_rtt_us = 20_000;
        c.srtt_us = 20_000;
        let mut b = Bbr3::with_seed(1);
        b.init(&mut c);
        b.full_bw_reached = true;
        b.mode = Mode::ProbeBw;
        b.cycle_idx = phase;
        b.min_rtt_us = 20_000;
        // 100 segments per 20 ms.
        b.bw_hi = [(100 * BW_UNIT / 20_000) as u32; 2];
        (b, c)
    }

    #[test]
    fn gains_are_the_v3_constants() {
        assert_eq!(STARTUP_PACING_GAIN, 710); // 2.77
        assert_eq!(DRAIN_GAIN, 88); // 1/2.885
        assert_eq!(Phase::Down.pacing_gain(), 232); // 0.91
        assert_eq!(Phase::Up.pacing_gain(), 320); // 1.25
        assert_eq!(LOSS_THRESH, 5); // ~2 %
        assert_eq!(ECN_THRESH, 128); // 0.5
        assert_eq!(BETA, 76); // 0.3 cut → × 0.7
        assert_eq!(INFLIGHT_HEADROOM, 38); // 15 %
        let mut b = Bbr3 {
            mode: Mode::ProbeBw,
            cycle_idx: Phase::Up,
            ..Bbr3::default()
        };
        b.update_gains();
        assert_eq!(b.cwnd_gain, 2 * 256 + 64); // 2.25
        assert!(b.wants_pacing() && b.has_cong_control());
        assert_eq!(b.name(), "bbr3");
    }

    #[test]
    fn startup_drain_then_probe_bw_with_the_right_bandwidth() {
        let mut p = Pipe::new(50e6, 40, 2.0, 7);
        p.run_until(10.0);
        let tr = p.transitions();
        let names: Vec<&str> = tr.iter().map(|t| t.1).collect();
        assert_eq!(
            &names[..3],
            &["startup", "drain", "probe_bw_down"],
            "{tr:?}"
        );
        let payload_bps = 50e6 * MSS as f64 / WIRE as f64;
        let bw = p.trace.last().unwrap().bw_bps;
        assert!((bw / payload_bps - 1.0).abs() < 0.05, "bw {bw}");
        assert_eq!(
            p.b.pacing_gain(),
            p.b.cycle_idx.pacing_gain() as f64 / 256.0
        );
        // Startup paced at 2.77 × the estimate.
        assert!(p.trace.iter().take(50).all(|s| s.mode == Mode::Startup));
    }

    #[test]
    fn probe_bw_cycles_down_cruise_refill_up() {
        // 100 ms RTT, deep buffer: no loss; 63 rounds = 6.3 s, so the 2–3 s
        // wall-clock wait decides when to probe.
        let mut p = Pipe::new(20e6, 100, 4.0, 11);
        p.run_until(30.0);
        assert_eq!(p.lost, 0);
        // ProbeBW phases, with ProbeRTT episodes cut out.
        let mut tr: Vec<&str> = p
            .transitions()
            .iter()
            .map(|t| t.1)
            .filter(|s| s.starts_with("probe_bw"))
            .collect();
        tr.dedup();
        let allowed = [
            ("probe_bw_down", "probe_bw_cruise"),
            ("probe_bw_down", "probe_bw_refill"),
            ("probe_bw_cruise", "probe_bw_refill"),
            ("probe_bw_refill", "probe_bw_up"),
            ("probe_bw_up", "probe_bw_down"),
            // ProbeRTT (cut out) interrupts a phase and exits to cruise.
            ("probe_bw_up", "probe_bw_cruise"),
            ("probe_bw_refill", "probe_bw_cruise"),
        ];
        for w in tr.windows(2) {
            assert!(
                allowed.contains(&(w[0], w[1])),
                "unexpected {} → {}: {tr:?}",
                w[0],
                w[1]
            );
        }
        let full = tr
            .windows(5)
            .filter(|w| {
                w == &[
                    "probe_bw_down",
                    "probe_bw_cruise",
                    "probe_bw_refill",
                    "probe_bw_up",
                    "probe_bw_down",
                ]
            })
            .count();
        assert!(full >= 4, "{full} full cycles: {tr:?}");

        // Each probe starts 2–3 s (the drawn wait) after the cycle began.
        let mut waits = Vec::new();
        for w in p.trace.windows(2) {
            if w[1].phase == Phase::Refill
                && w[0].phase != Phase::Refill
                && w[1].mode == Mode::ProbeBw
            {
                let waited = w[1].t_us - w[1].cycle_mstamp;
                let drawn = w[1].probe_wait_us as u64;
                assert!((2_000_000..3_000_000).contains(&drawn));
                assert!(
                    waited >= drawn && waited <= drawn + 5_000,
                    "waited {waited} for {drawn}"
                );
                waits.push(drawn);
            }
        }
        assert!(waits.len() >= 5, "{waits:?}");
        waits.sort();
        waits.dedup();
        assert!(waits.len() >= 3, "the wait is random: {waits:?}");
    }

    #[test]
    fn small_bdp_probes_on_the_reno_round_bound() {
        // BDP ≈ 33 segments: a Reno flow would probe every ~33 rounds, so
        // BBRv3 probes after min(63, target inflight) rounds, well before 2 s.
        let mut p = Pipe::new(10e6, 40, 4.0, 5);
        p.run_until(20.0);
        let tr = p.transitions();
        let refills: Vec<u64> = tr
            .iter()
            .filter(|t| t.1 == "probe_bw_refill")
            .map(|t| t.0)
            .collect();
        let gaps: Vec<u64> = refills.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() >= 8, "{tr:?}");
        let short = gaps.iter().filter(|&&g| g < 2_000_000).count();
        assert!(short * 2 > gaps.len(), "probe gaps {gaps:?}");
    }

    #[test]
    fn probe_rtt_every_five_seconds() {
        let mut p = Pipe::new(20e6, 40, 2.0, 3);
        p.run_until(32.0);
        let tr = p.transitions();
        let mut entries = Vec::new();
        let mut exits = Vec::new();
        for w in tr.windows(2) {
            if w[1].1 == "probe_rtt" {
                entries.push(w[1].0);
            }
            if w[0].1 == "probe_rtt" {
                exits.push(w[1].0);
            }
        }
        assert!(entries.len() >= 5, "{tr:?}");
        for (i, e) in entries.iter().enumerate() {
            // It lasts at least 200 ms (plus a round), at most ~1 s.
            let x = exits[i];
            assert!(x - e >= 200_000 && x - e < 1_000_000, "ProbeRTT {e}..{x}");
            // The next one comes 5 s after this one ended.
            if let Some(next) = entries.get(i + 1) {
                assert!(
                    (5_000_000..5_050_000).contains(&(next - x)),
                    "gap {} µs",
                    next - x
                );
            }
        }
        // cwnd in ProbeRTT: half the BDP (≥ 4).
        let bdp = p.bdp_pkts();
        let max_cwnd = p
            .trace
            .iter()
            .filter(|s| s.mode == Mode::ProbeRtt)
            .map(|s| s.cwnd)
            .skip(50)
            .max()
            .unwrap();
        assert!(
            (max_cwnd as f64) <= (bdp / 2.0 + 3.0).max(4.0),
            "cwnd {max_cwnd} bdp {bdp}"
        );
    }

    #[test]
    fn loss_above_two_percent_in_probe_up_cuts_inflight_hi() {
        let (mut b, mut c) = in_probe_bw(Phase::Up);
        b.bw_probe_samples = true;
        b.inflight_hi = 300;
        c.cwnd = 300;
        // 1 % lost: below the threshold, inflight_hi stays (and may grow).
        b.adapt_upper_bounds(&c, &sample(99, 100, 1));
        assert_eq!(b.cycle_idx, Phase::Up);
        assert!(b.inflight_hi >= 300);
        // 5 % lost of 250 in flight: too high. inflight_hi falls to what was
        // in flight (or 0.7 × the target if that is more), and the probe
        // ends: UP → DOWN.
        b.adapt_upper_bounds(&c, &sample(238, 250, 12));
        assert_eq!(b.inflight_hi, 250);
        assert_eq!(b.cycle_idx, Phase::Down);
        assert!(b.prev_probe_too_high);
        assert!(!b.bw_probe_samples, "only once per probe");
        // The 0.7 × target floor.
        let (mut b, c) = in_probe_bw(Phase::Up);
        b.bw_probe_samples = true;
        b.adapt_upper_bounds(&c, &sample(10, 20, 5));
        let target = b.target_inflight(&c);
        assert_eq!(b.inflight_hi, ((target as u64 * 180) >> 8) as u32);
    }

    #[test]
    fn lost_packet_sample_finds_where_loss_crossed_two_percent() {
        // 200 in flight before the lost packet, 2 earlier losses: the budget
        // is ceil(200 · 5/256) = 4, so 2 more losses fit: prefix = 2·256/251.
        let s = sample(0, 201, 3);
        assert_eq!(Bbr3::inflight_hi_from_lost_skb(&s), 200 + 2);
        // Earlier losses already over budget: inflight_hi = what was before.
        assert_eq!(Bbr3::inflight_hi_from_lost_skb(&sample(0, 101, 10)), 100);
    }

    #[test]
    fn shallow_buffer_learns_inflight_hi_and_keeps_loss_low() {
        // 0.3 BDP of buffer: Startup and the first probes overflow it.
        let mut p = Pipe::new(50e6, 20, 0.3, 9);
        p.run_until(5.0);
        let bdp = p.bdp_pkts();
        let hi = p.b.inflight_hi;
        assert!(hi != UNBOUNDED, "loss must bound inflight_hi");
        assert!(
            (hi as f64) < 1.5 * (bdp + p.buf_pkts as f64) + 10.0,
            "inflight_hi {hi}, bdp {bdp}"
        );
        let (sent0, lost0) = (p.sent, p.lost);
        p.run_until(30.0);
        let loss = (p.lost - lost0) as f64 / (p.sent - sent0) as f64;
        assert!(loss < 0.01, "steady-state loss {loss}");
        // And still uses the link.
        let payload_bps = 50e6 * MSS as f64 / WIRE as f64;
        let delivered_bps = (p.c.delivered as f64 * MSS as f64 * 8.0) / 30.0;
        assert!(delivered_bps > 0.85 * payload_bps, "{delivered_bps}");
    }

    #[test]
    fn lower_bounds_cut_by_beta_on_loss_rounds_when_not_probing() {
        let (mut b, mut c) = in_probe_bw(Phase::Cruise);
        c.cwnd = 120;
        b.loss_in_round = true;
        b.bw_latest = 10;
        b.inflight_latest = 20;
        b.adapt_lower_bounds(&c);
        let max_bw = b.max_bw();
        assert_eq!(b.bw_lo, ((max_bw as u64 * 180) >> 8) as u32);
        assert_eq!(b.inflight_lo, 120 * 180 / 256);
        // Not below what the last round delivered.
        b.inflight_latest = 90;
        b.adapt_lower_bounds(&c);
        assert_eq!(b.inflight_lo, 90);
        // While probing, no cuts.
        let (mut b, c) = in_probe_bw(Phase::Up);
        b.loss_in_round = true;
        b.adapt_lower_bounds(&c);
        assert_eq!(b.inflight_lo, UNBOUNDED);
        assert_eq!(b.bw_lo, UNBOUNDED);
    }

    #[test]
    fn cruise_keeps_fifteen_percent_headroom_below_inflight_hi() {
        let (mut b, mut c) = in_probe_bw(Phase::Cruise);
        b.inflight_hi = 200;
        c.cwnd = 500;
        b.bound_cwnd_for_inflight_model(&mut c);
        assert_eq!(c.cwnd, 200 - 200 * 38 / 256);
        let (mut b, mut c) = in_probe_bw(Phase::Up);
        b.inflight_hi = 200;
        c.cwnd = 500;
        b.bound_cwnd_for_inflight_model(&mut c);
        assert_eq!(c.cwnd, 200);
    }

    #[test]
    fn ecn_alpha_tracks_marks_and_half_marked_is_too_high() {
        let (mut b, mut c) = in_probe_bw(Phase::Up);
        c.ecn = true;
        c.min_rtt_us = 1000;
        b.min_rtt_us = 1000;
        assert_eq!(b.ecn_alpha(), 1.0);
        for k in 1..=200u64 {
            c.delivered = k * 100;
            c.delivered_ce = k * 25;
            b.update_ecn_alpha(&c);
        }
        assert!(b.ecn_eligible);
        assert!((b.ecn_alpha() - 0.25).abs() < 0.03, "α {}", b.ecn_alpha());
        // inflight_lo is cut by α/3 on a marked round when not probing.
        let mut s = sample(100, 100, 0);
        s.rs.delivered_ce = 40;
        assert!(!b.is_inflight_too_high(&s));
        s.rs.delivered_ce = 60;
        assert!(b.is_inflight_too_high(&s));
        // Not eligible at long RTTs.
        let (mut b, mut c) = in_probe_bw(Phase::Up);
        c.ecn = true;
        b.update_ecn_alpha(&c);
        assert!(!b.ecn_eligible);
    }

    #[test]
    fn ecn_marks_bound_inflight_in_a_short_rtt_path() {
        // A deep buffer (Linux budgets ~90 segments of TSO bursts at 1 ms),
        // marking above 5 packets.
        let mut p = Pipe::new(100e6, 1, 20.0, 2);
        p.c.ecn = true;
        p.ce_pkts = Some(5);
        p.run_until(3.0);
        assert!(p.b.ecn_eligible);
        assert_eq!(p.lost, 0, "marks, not drops, bound the queue");
        assert!(p.b.inflight_hi != UNBOUNDED);
        let bdp = p.bdp_pkts();
        assert!(
            (p.b.inflight_hi as f64) < bdp * 1.5 + 30.0,
            "inflight_hi {} bdp {bdp}",
            p.b.inflight_hi
        );
    }

    #[test]
    fn sample_reconstruction_from_history() {
        let mut b = Bbr3::default();
        let mut c = Conn::new(MSS, 10);
        b.init(&mut c);
        for (d, l) in [(10, 0), (20, 1), (30, 1), (40, 4)] {
            c.delivered = d;
            c.lost = l;
            b.record_history(&c);
        }
        // A packet sent when delivered was 20 (lost 1), acked now at 40/4.
        let rs = RateSample {
            prior_delivered: 20,
            delivered: 20,
            interval_us: 1000,
            ..RateSample::default()
        };
        let s = b.build_sample(&c, &rs);
        assert_eq!(s.lost, 3);
        assert_eq!(s.tx_in_flight, 23);
        // No valid sample: nothing is claimed.
        let s = b.build_sample(&c, &RateSample::default());
        assert_eq!((s.lost, s.tx_in_flight), (0, 0));
    }

    #[test]
    fn same_seed_same_run_other_seed_other_waits() {
        let run = |seed| {
            let mut p = Pipe::new(20e6, 100, 4.0, seed);
            p.run_until(15.0);
            p.trace
                .iter()
                .map(|s| (s.t_us, s.cwnd, s.probe_wait_us))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn rto_keeps_the_pre_rto_window_as_inflight_lo() {
        let (mut b, mut c) = in_probe_bw(Phase::Cruise);
        c.cwnd = 150;
        b.ssthresh(&mut c);
        c.cwnd = 1;
        b.set_state(&mut c, CaState::Loss);
        assert_eq!(b.inflight_lo, 150);
        assert_eq!(b.undo_cwnd(&mut c), 150);
        // Leaving Loss restores cwnd.
        b.set_state(&mut c, CaState::Open);
        assert_eq!(c.cwnd, 150);
    }
}
