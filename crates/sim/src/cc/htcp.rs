//! H-TCP (Shorten & Leith, "H-TCP: TCP for high-speed and long-distance
//! networks", PFLDnet 2004; Leith, Shorten & Lee, "H-TCP: A framework for
//! congestion control in high-speed and long-distance networks") with the
//! behaviour of Linux's net/ipv4/tcp_htcp.c.
//!
//! The additive increase α grows with the time Δ since the last congestion
//! event: Reno's 1 segment per RTT for the first second (Δ_L = 1 s), then
//!     α(Δ) = 1 + 10 (Δ − Δ_L) + ((Δ − Δ_L) / 2)²
//! scaled by RTT (×8/(10·minRTT/HZ·8) clamped to [0.5, 10], so flows with
//! different RTTs grow alike in segments per second) and multiplied by
//! 2(1 − β) to keep the average rate independent of β. The decrease β
//! adapts to the path: β = minRTT / maxRTT clamped to [0.5, 0.8] (so the
//! queue just drains), unless the achieved throughput changed by more than
//! 20 % since the last congestion event (the "bandwidth switch"), in which
//! case β = 0.5 for fast convergence.
//!
//! Fixed point and clocks as Linux: α and β ×128, RTTs and times in
//! jiffies (HZ = 1000), throughput in segments per second.

use super::util::{jiffies, msecs_to_jiffies, usecs_to_jiffies};
use super::{AckSample, CaState, CongestionControl, Conn};

/// 1.0, 0.5 and 0.8 in ×128 fixed point.
const ALPHA_BASE: u32 = 1 << 7;
const BETA_MIN: u32 = 1 << 6;
const BETA_MAX: u32 = 102;
/// Linux module parameters at their defaults.
const USE_RTT_SCALING: bool = true;
const USE_BANDWIDTH_SWITCH: bool = true;

#[derive(Clone, Debug)]
pub struct Htcp {
    /// α and β ×128.
    alpha: u32,
    beta: u32,
    /// β adaptation is allowed only after one congestion event.
    modeswitch: bool,
    /// Segments acked by the last ACK (for the AI counter).
    pkts_acked: u32,
    /// Segments counted for the throughput sample.
    packetcount: u32,
    /// RTT extremes in jiffies (0 = none yet).
    min_rtt: u32,
    max_rtt: u32,
    /// Time (jiffies) of the last congestion event.
    last_cong: u64,
    undo_last_cong: u64,
    undo_max_rtt: u32,
    undo_old_max_b: u32,
    /// Throughput estimates (segments/s): min, max, previous max, EWMA.
    min_b: u32,
    max_b: u32,
    old_max_b: u32,
    bi: u32,
    /// Start of the current throughput sample (jiffies).
    lasttime: u64,
    /// CONFIG_HZ of the connection (jiffies per second), set at init.
    hz: u64,
}

impl Default for Htcp {
    fn default() -> Self {
        Htcp {
            alpha: ALPHA_BASE,
            beta: BETA_MIN,
            modeswitch: false,
            pkts_acked: 1,
            packetcount: 0,
            min_rtt: 0,
            max_rtt: 0,
            last_cong: 0,
            undo_last_cong: 0,
            undo_max_rtt: 0,
            undo_old_max_b: 0,
            min_b: 0,
            max_b: 0,
            old_max_b: 0,
            hz: 1000,
            bi: 0,
            lasttime: 0,
        }
    }
}

/// Linux `between(seq1, seq2, seq3)`: seq2 <= seq1 <= seq3 modulo 2^32.
fn between(s1: u32, s2: u32, s3: u32) -> bool {
    s3.wrapping_sub(s2) >= s1.wrapping_sub(s2)
}

impl Htcp {
    /// α as a real number (segments per RTT in congestion avoidance).
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / 128.0
    }

    /// β as a real number (the multiplicative decrease factor).
    pub fn beta(&self) -> f64 {
        self.beta as f64 / 128.0
    }

    fn cong_time(&self, now: u64) -> u64 {
        now.saturating_sub(self.last_cong)
    }

    /// Minimum RTTs since the last congestion event.
    fn ccount(&self, now: u64) -> u64 {
        self.cong_time(now) / self.min_rtt.max(1) as u64
    }

    /// `htcp_reset`: a congestion event starts now (undo remembers the last).
    fn reset(&mut self, now: u64) {
        self.undo_last_cong = self.last_cong;
        self.undo_max_rtt = self.max_rtt;
        self.undo_old_max_b = self.old_max_b;
        self.last_cong = now;
    }

    fn measure_rtt(&mut self, c: &Conn, srtt: u32) {
        if self.min_rtt > srtt || self.min_rtt == 0 {
            self.min_rtt = srtt;
        }
        // maxRTT only from the Open state, and only in +20 ms steps, so that
        // one outlier cannot inflate it.
        if c.ca_state == CaState::Open {
            if self.max_rtt < self.min_rtt {
                self.max_rtt = self.min_rtt;
            }
            if self.max_rtt < srtt && srtt as u64 <= self.max_rtt as u64 + msecs_to_jiffies(c, 20) {
                self.max_rtt = srtt;
            }
        }
    }

    fn beta_update(&mut self) {
        if USE_BANDWIDTH_SWITCH {
            let max_b = self.max_b;
            let old_max_b = self.old_max_b;
            self.old_max_b = self.max_b;
            // Throughput moved by more than ±20 %: the path changed, converge
            // fast with β = 0.5.
            if !between(
                5u32.wrapping_mul(max_b),
                4u32.wrapping_mul(old_max_b),
                6u32.wrapping_mul(old_max_b),
            ) {
                self.beta = BETA_MIN;
                self.modeswitch = false;
                return;
            }
        }
        if self.modeswitch && self.min_rtt as u64 > self.hz.div_ceil(100) /* msecs_to_jiffies(10) */ && self.max_rtt > 0 {
            self.beta = ((self.min_rtt << 7) / self.max_rtt).clamp(BETA_MIN, BETA_MAX);
        } else {
            self.beta = BETA_MIN;
            self.modeswitch = true;
        }
    }

    fn alpha_update(&mut self, now: u64) {
        let mut factor: u64 = 1;
        let mut diff = self.cong_time(now);
        let hz = self.hz;
        if diff > hz {
            diff -= hz;
            factor = 1 + (10 * diff + ((diff / 2) * (diff / 2) / hz)) / hz;
        }
        if USE_RTT_SCALING && self.min_rtt > 0 {
            // (1/(10·minRTT in s)) ×8, kept within [0.5, 10] ×8.
            let scale = ((hz << 3) / (10 * self.min_rtt as u64)).clamp(1 << 2, 10 << 3);
            factor = ((factor << 3) / scale).max(1);
        }
        let alpha = 2 * factor * (128 - self.beta as u64);
        self.alpha = if alpha == 0 {
            ALPHA_BASE
        } else {
            alpha.min(u32::MAX as u64) as u32
        };
    }

    fn param_update(&mut self, now: u64) {
        self.beta_update();
        self.alpha_update(now);
        // A slowly fading maxRTT follows route changes.
        if self.min_rtt > 0 && self.max_rtt > self.min_rtt {
            self.max_rtt = self.min_rtt + (self.max_rtt - self.min_rtt) * 95 / 100;
        }
    }
}

impl CongestionControl for Htcp {
    fn name(&self) -> &'static str {
        "htcp"
    }

    fn init(&mut self, c: &mut Conn) {
        *self = Htcp { hz: c.hz, ..Htcp::default() };
        self.last_cong = jiffies(c);
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        self.param_update(jiffies(c));
        ((c.cwnd as u64 * self.beta as u64) >> 7).max(2) as u32
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !c.is_cwnd_limited() {
            return;
        }
        if c.in_slow_start() {
            c.slow_start(acked);
            return;
        }
        // cwnd += α / cwnd per acked segment.
        if ((c.cwnd_cnt as u64 * self.alpha as u64) >> 7) >= c.cwnd as u64 {
            if c.cwnd < c.cwnd_clamp {
                c.cwnd += 1;
            }
            c.cwnd_cnt = 0;
            self.alpha_update(jiffies(c));
        } else {
            c.cwnd_cnt += self.pkts_acked;
        }
        self.pkts_acked = 1;
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        match new_state {
            CaState::Open => {
                if self.undo_last_cong != 0 {
                    self.last_cong = jiffies(c);
                    self.undo_last_cong = 0;
                }
            }
            CaState::Cwr | CaState::Recovery | CaState::Loss => self.reset(jiffies(c)),
            CaState::Disorder => {}
        }
    }

    fn undo_cwnd(&mut self, c: &mut Conn) -> u32 {
        if self.undo_last_cong != 0 {
            self.last_cong = self.undo_last_cong;
            self.max_rtt = self.undo_max_rtt;
            self.old_max_b = self.undo_old_max_b;
            self.undo_last_cong = 0;
        }
        c.cwnd.max(c.prior_cwnd)
    }

    /// `measure_achieved_throughput`.
    fn pkts_acked(&mut self, c: &mut Conn, s: &AckSample) {
        let now = jiffies(c);
        if c.ca_state == CaState::Open {
            self.pkts_acked = s.pkts_acked;
        }
        if s.rtt_us > 0 {
            self.measure_rtt(c, usecs_to_jiffies(c, s.rtt_us as u64) as u32);
        }
        if !USE_BANDWIDTH_SWITCH {
            return;
        }
        if !matches!(c.ca_state, CaState::Open | CaState::Disorder) {
            self.packetcount = 0;
            self.lasttime = now;
            return;
        }
        self.packetcount += s.pkts_acked;
        let alpha_segs = (self.alpha >> 7).max(1);
        if self.packetcount >= c.cwnd.saturating_sub(alpha_segs)
            && now.saturating_sub(self.lasttime) >= self.min_rtt as u64
            && self.min_rtt > 0
        {
            let cur_bi = (self.packetcount as u64 * self.hz / (now - self.lasttime).max(1)) as u32;
            if self.ccount(now) <= 3 {
                // Just after a backoff: start the estimate afresh.
                self.min_b = cur_bi;
                self.max_b = cur_bi;
                self.bi = cur_bi;
            } else {
                self.bi = ((3 * self.bi as u64 + cur_bi as u64) / 4) as u32;
                self.max_b = self.max_b.max(self.bi);
                if self.min_b > self.max_b {
                    self.min_b = self.max_b;
                }
            }
            self.packetcount = 0;
            self.lasttime = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{acks, one_segment_acked};

    /// H-TCP in congestion avoidance on a path with the given RTT; the last
    /// congestion event at t = 0.
    fn flow(rtt_us: u64) -> (Htcp, Conn) {
        let mut h = Htcp::default();
        let mut c = Conn::new(1448, 100);
        h.init(&mut c);
        c.ssthresh = 100;
        h.pkts_acked(&mut c, &one_segment_acked(rtt_us as i64, 100));
        (h, c)
    }

    fn alpha_at(h: &mut Htcp, c: &mut Conn, t_s: f64) -> f64 {
        c.now_us = (t_s * 1e6) as u64;
        h.alpha_update(jiffies(c));
        h.alpha()
    }

    #[test]
    fn alpha_grows_with_time_since_congestion() {
        // 100 ms RTT: the RTT scaling factor is exactly 1.
        let (mut h, mut c) = flow(100_000);
        let mut prev = 0.0;
        for t in [0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0] {
            let a = alpha_at(&mut h, &mut c, t);
            // α = 2(1 − β)·(1 + 10Δ + (Δ/2)²), Δ = t − 1 s, β = 0.5.
            let d = f64::max(t - 1.0, 0.0);
            let want = 1.0 + 10.0 * d + (d / 2.0) * (d / 2.0);
            assert!(
                (a - want).abs() <= 0.02 * want + 1.0,
                "t={t}: α {a}, want {want}"
            );
            assert!(a >= prev, "α must not shrink with time: {a} < {prev}");
            prev = a;
        }
        assert_eq!(
            alpha_at(&mut h, &mut c, 0.9),
            1.0,
            "Reno for the first second"
        );
        assert!(alpha_at(&mut h, &mut c, 8.0) > 70.0);
    }

    #[test]
    fn alpha_counts_seconds_at_any_kernel_hz() {
        // The connection's CONFIG_HZ reaches H-TCP: at HZ=250 (4 ms jiffies)
        // α still follows seconds since the congestion event.
        for hz in [100, 250, 1000] {
            let mut h = Htcp::default();
            let mut c = Conn::new(1448, 100);
            c.hz = hz;
            h.init(&mut c);
            h.pkts_acked(&mut c, &one_segment_acked(100_000, 100));
            assert_eq!(alpha_at(&mut h, &mut c, 0.9), 1.0, "HZ={hz}");
            let a = alpha_at(&mut h, &mut c, 3.0);
            assert!((a - 22.0).abs() <= 1.5, "HZ={hz}: α {a} at 3 s, want 1 + 20 + 1");
        }
    }

    #[test]
    fn rtt_scaling_evens_out_growth_per_second() {
        // At 20 ms the scaling divides by 5 (0.1/0.02), so at the same Δ
        // a 20 ms flow adds a fifth per RTT of what a 100 ms flow does,
        // i.e. the same per second.
        let (mut h100, mut c100) = flow(100_000);
        let (mut h20, mut c20) = flow(20_000);
        let a100 = alpha_at(&mut h100, &mut c100, 6.0);
        let a20 = alpha_at(&mut h20, &mut c20, 6.0);
        assert!((a100 / a20 - 5.0).abs() < 0.6, "{a100} vs {a20}");
    }

    #[test]
    fn growth_per_rtt_follows_alpha() {
        let (mut h, mut c) = flow(100_000);
        c.now_us = 4_000_000;
        h.alpha_update(jiffies(&c));
        let a = h.alpha();
        // A large window: the ACK that triggers an increase is not counted
        // (as in Linux), which only matters when α is near cwnd.
        c.cwnd = 1000;
        c.ssthresh = 1000;
        let before = c.cwnd;
        acks(&mut h, &mut c, before); // one window
        let grew = (c.cwnd - before) as f64;
        assert!((grew - a).abs() <= 0.1 * a + 1.0, "grew {grew}, α {a}");
    }

    #[test]
    fn congestion_event_resets_the_clock() {
        let (mut h, mut c) = flow(100_000);
        c.now_us = 5_000_000;
        h.set_state(&mut c, CaState::Recovery);
        let ss = h.ssthresh(&mut c);
        assert_eq!(ss, 50, "first event: β = 0.5");
        assert_eq!(alpha_at(&mut h, &mut c, 5.5), 1.0);
    }

    #[test]
    fn beta_adapts_to_min_over_max_rtt() {
        let (mut h, mut c) = flow(100_000);
        // Queueing raises the RTT to 150 ms in 20 ms steps.
        for r in [120_000, 140_000, 150_000] {
            h.pkts_acked(
                &mut c,
                &AckSample {
                    pkts_acked: 0,
                    rtt_us: r,
                    in_flight: 100,
                },
            );
        }
        // First event switches mode on, second adapts β = 100/150.
        c.now_us = 1_000_000;
        h.ssthresh(&mut c);
        assert_eq!(h.beta(), 0.5);
        // maxRTT faded by 5 %: 100 + 50·0.95 = 147.5 → 147 jiffies.
        c.now_us = 2_000_000;
        h.ssthresh(&mut c);
        let want = (100u32 << 7) / 147;
        assert_eq!(h.beta, want);
        assert!((0.67..0.69).contains(&h.beta()));
    }

    #[test]
    fn bandwidth_switch_forces_half_on_throughput_change() {
        let (mut h, mut c) = flow(100_000);
        h.modeswitch = true;
        h.min_rtt = 100;
        h.max_rtt = 120;
        h.max_b = 1000;
        h.old_max_b = 500; // doubled: outside ±20 %
        c.now_us = 3_000_000;
        h.ssthresh(&mut c);
        assert_eq!(h.beta(), 0.5);
        h.max_b = 1000; // now steady
        h.max_rtt = 120;
        h.ssthresh(&mut c);
        h.max_rtt = 120;
        h.ssthresh(&mut c);
        assert!(h.beta() > 0.8 - 0.01, "β {}", h.beta());
    }

    #[test]
    fn between_matches_linux() {
        assert!(between(5, 4, 6));
        assert!(between(0, 0, 0));
        assert!(!between(7, 4, 6));
        assert!(!between(3, 4, 6));
    }
}
