//! TCP-Illinois (Liu, Başar & Srikant, "TCP-Illinois: A loss- and
//! delay-based congestion control algorithm for high-speed networks",
//! Performance Evaluation 2008) with the behaviour of Linux's
//! net/ipv4/tcp_illinois.c.
//!
//! Loss still decides *when* to back off; queueing delay decides *how
//! much*. Once per RTT Illinois takes the average queueing delay d_a (mean
//! RTT of the round minus the base RTT) against the largest one seen, d_m,
//! and sets
//! * α (segments per RTT): 10 while d_a ≤ d_m/100 (after 5 such rounds once
//!   delay has been seen), falling hyperbolically to 0.3 as d_a → d_m;
//! * β (fraction cut on loss): 1/8 while d_a ≤ d_m/10, rising linearly to
//!   1/2 at d_a ≥ 0.8 d_m.
//!
//! Below 15 segments it is Reno (α = 1, β = 1/2); an RTO resets α and β to
//! Reno's. Fixed point as Linux: α ×128, β ×64, RTTs in µs.
//!
//! Engine difference: Linux calls cong_avoid (where the per-RTT update
//! sits) on every ACK and Illinois itself skips growth when not
//! cwnd-limited; the engine only calls it for cwnd-limited flows.

use super::{AckSample, CaState, CongestionControl, Conn};

const ALPHA_SHIFT: u32 = 7;
const ALPHA_SCALE: u32 = 1 << ALPHA_SHIFT;
const ALPHA_MIN: u32 = 3 * ALPHA_SCALE / 10;
const ALPHA_MAX: u32 = 10 * ALPHA_SCALE;
const ALPHA_BASE: u32 = ALPHA_SCALE;
/// Cap on RTT samples so that α's arithmetic cannot overflow (~3.3 s).
const RTT_MAX: u32 = u32::MAX / ALPHA_MAX;
const BETA_SHIFT: u32 = 6;
const BETA_SCALE: u32 = 1 << BETA_SHIFT;
const BETA_MIN: u32 = BETA_SCALE / 8;
const BETA_MAX: u32 = BETA_SCALE / 2;
const BETA_BASE: u32 = BETA_MAX;
/// Linux module parameters at their defaults.
const WIN_THRESH: u32 = 15;
const THETA: u32 = 5;

#[derive(Clone, Debug)]
pub struct Illinois {
    /// Sum and count of RTT samples in this round.
    sum_rtt: u64,
    cnt_rtt: u32,
    /// Smallest and largest RTT ever seen (µs).
    base_rtt: u32,
    max_rtt: u32,
    /// Right edge of the current round (snd_nxt, bytes).
    end_seq: u64,
    alpha: u32,
    beta: u32,
    /// Segments acked by the last ACK.
    acked: u32,
    /// Delay has been above the low threshold; consecutive low rounds since.
    rtt_above: bool,
    rtt_low: u32,
}

impl Default for Illinois {
    fn default() -> Self {
        Illinois {
            sum_rtt: 0,
            cnt_rtt: 0,
            base_rtt: 0x7fff_ffff,
            max_rtt: 0,
            end_seq: 0,
            alpha: ALPHA_MAX,
            beta: BETA_BASE,
            acked: 0,
            rtt_above: false,
            rtt_low: 0,
        }
    }
}

impl Illinois {
    /// α in segments per RTT.
    pub fn alpha(&self) -> f64 {
        self.alpha as f64 / ALPHA_SCALE as f64
    }

    /// β: the fraction of cwnd given up on loss.
    pub fn beta(&self) -> f64 {
        self.beta as f64 / BETA_SCALE as f64
    }

    fn rtt_reset(&mut self, c: &Conn) {
        self.end_seq = c.snd_nxt;
        self.cnt_rtt = 0;
        self.sum_rtt = 0;
    }

    fn max_delay(&self) -> u32 {
        self.max_rtt - self.base_rtt
    }

    fn avg_delay(&self) -> u32 {
        (self.sum_rtt / self.cnt_rtt as u64) as u32 - self.base_rtt
    }

    /// α(d_a): ALPHA_MAX near no delay, hyperbolic down to ALPHA_MIN at d_m.
    fn calc_alpha(&mut self, da: u32, dm: u32) -> u32 {
        let d1 = dm / 100;
        if da <= d1 {
            if !self.rtt_above {
                return ALPHA_MAX;
            }
            // Wait for θ low-delay rounds before jumping back to the maximum.
            self.rtt_low += 1;
            if self.rtt_low < THETA {
                return self.alpha;
            }
            self.rtt_low = 0;
            self.rtt_above = false;
            return ALPHA_MAX;
        }
        self.rtt_above = true;
        // κ1 / (κ2 + d_a) with the curve through (d1, max) and (dm, min).
        let dm = (dm - d1) as u64;
        let da = (da - d1) as u64;
        (dm * ALPHA_MAX as u64 / (dm + da * (ALPHA_MAX - ALPHA_MIN) as u64 / ALPHA_MIN as u64))
            as u32
    }

    /// β(d_a): BETA_MIN below d_m/10, BETA_MAX above 0.8 d_m, linear between.
    fn calc_beta(da: u32, dm: u32) -> u32 {
        let d2 = dm / 10;
        if da <= d2 {
            return BETA_MIN;
        }
        let d3 = 8 * dm / 10;
        if da >= d3 || d3 <= d2 {
            return BETA_MAX;
        }
        ((BETA_MIN as u64 * d3 as u64 + (BETA_MAX - BETA_MIN) as u64 * da as u64
            - BETA_MAX as u64 * d2 as u64)
            / (d3 - d2) as u64) as u32
    }

    fn update_params(&mut self, c: &Conn) {
        if c.cwnd < WIN_THRESH {
            self.alpha = ALPHA_BASE;
            self.beta = BETA_BASE;
        } else if self.cnt_rtt > 0 {
            let dm = self.max_delay();
            let da = self.avg_delay();
            self.alpha = self.calc_alpha(da, dm);
            self.beta = Self::calc_beta(da, dm);
        }
        self.rtt_reset(c);
    }
}

impl CongestionControl for Illinois {
    fn name(&self) -> &'static str {
        "illinois"
    }

    fn init(&mut self, c: &mut Conn) {
        *self = Illinois::default();
        self.rtt_reset(c);
    }

    fn pkts_acked(&mut self, _c: &mut Conn, s: &AckSample) {
        self.acked = s.pkts_acked;
        if s.rtt_us < 0 {
            return;
        }
        let rtt = (s.rtt_us as u64).min(RTT_MAX as u64) as u32;
        self.base_rtt = self.base_rtt.min(rtt);
        self.max_rtt = self.max_rtt.max(rtt);
        self.cnt_rtt += 1;
        self.sum_rtt += rtt as u64;
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        if new_state == CaState::Loss {
            self.alpha = ALPHA_BASE;
            self.beta = BETA_BASE;
            self.rtt_low = 0;
            self.rtt_above = false;
            self.rtt_reset(c);
        }
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if c.snd_una > self.end_seq {
            self.update_params(c);
        }
        if !c.is_cwnd_limited() {
            return;
        }
        if c.in_slow_start() {
            c.slow_start(acked);
            return;
        }
        // cwnd += α / cwnd per acked segment, applied in whole segments.
        c.cwnd_cnt += self.acked;
        self.acked = 1;
        let delta = ((c.cwnd_cnt as u64 * self.alpha as u64) >> ALPHA_SHIFT) as u32;
        if delta >= c.cwnd {
            c.cwnd = (c.cwnd + delta / c.cwnd).min(c.cwnd_clamp);
            c.cwnd_cnt = 0;
        }
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        let cut = ((c.cwnd as u64 * self.beta as u64) >> BETA_SHIFT) as u32;
        (c.cwnd - cut).max(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{one_segment_acked, MSS};

    /// One round: `n` ACKs each carrying `rtt_us`, then the ACK that closes
    /// the round (and triggers the per-RTT update).
    fn round(i: &mut Illinois, c: &mut Conn, rtt_us: i64) {
        let n = c.cwnd;
        c.snd_nxt = c.snd_una + n as u64 * MSS;
        for _ in 0..n {
            c.snd_una += MSS;
            c.is_cwnd_limited_flag = true;
            i.pkts_acked(c, &one_segment_acked(rtt_us, n));
            i.cong_avoid(c, 1);
        }
    }

    fn flow() -> (Illinois, Conn) {
        let mut i = Illinois::default();
        let mut c = Conn::new(1448, 100);
        i.init(&mut c);
        c.ssthresh = 100;
        c.cwnd_clamp = 100; // hold cwnd so that only the parameters move
        (i, c)
    }

    #[test]
    fn alpha_shrinks_and_beta_grows_with_queueing_delay() {
        let (mut i, mut c) = flow();
        // Learn base 20 ms and max 120 ms (d_m = 100 ms).
        round(&mut i, &mut c, 20_000);
        round(&mut i, &mut c, 120_000);
        let mut prev_alpha = f64::INFINITY;
        let mut prev_beta = 0.0;
        let mut seen = Vec::new();
        for q_ms in [2, 5, 10, 20, 40, 60, 80, 100] {
            // Two rounds: the update at the start of the second uses the
            // first's samples only.
            round(&mut i, &mut c, 20_000 + q_ms * 1000);
            round(&mut i, &mut c, 20_000 + q_ms * 1000);
            let (a, b) = (i.alpha(), i.beta());
            seen.push((q_ms, a, b));
            assert!(a <= prev_alpha + 1e-9, "α grew with delay: {seen:?}");
            assert!(b >= prev_beta - 1e-9, "β fell with delay: {seen:?}");
            prev_alpha = a;
            prev_beta = b;
        }
        // End points of the curves.
        let at = |q| seen.iter().find(|s| s.0 == q).unwrap();
        assert!(at(5).1 < 10.0 && at(5).1 > 2.0, "{seen:?}");
        assert!((at(100).1 - 0.3).abs() < 0.02, "{seen:?}");
        assert_eq!(at(5).2, 0.125);
        assert_eq!(at(80).2, 0.5);
        // In between, β is linear in d_a: at 45 % of the way it is 0.3125.
        round(&mut i, &mut c, 20_000 + 45_000);
        round(&mut i, &mut c, 20_000 + 45_000);
        assert!(
            (i.beta() - (0.125 + 0.375 * (45.0 - 10.0) / 70.0)).abs() < 0.02,
            "β {}",
            i.beta()
        );
    }

    #[test]
    fn alpha_is_max_without_queueing_and_returns_after_theta_rounds() {
        let (mut i, mut c) = flow();
        round(&mut i, &mut c, 20_000);
        round(&mut i, &mut c, 20_000);
        assert_eq!(i.alpha(), 10.0);
        round(&mut i, &mut c, 120_000);
        round(&mut i, &mut c, 120_000);
        let low = i.alpha();
        assert!(low < 1.0);
        // Delay gone: α stays put for θ−1 rounds, then jumps back to 10.
        let mut rounds = 0;
        while i.alpha() < 10.0 {
            round(&mut i, &mut c, 20_000);
            rounds += 1;
            assert!(rounds < 10);
        }
        assert_eq!(rounds, THETA as usize + 1);
    }

    #[test]
    fn decrease_uses_beta_and_small_windows_are_reno() {
        let (mut i, mut c) = flow();
        i.beta = BETA_MIN;
        assert_eq!(i.ssthresh(&mut c), 100 - 100 / 8);
        c.cwnd = 10;
        c.cwnd_clamp = 10;
        round(&mut i, &mut c, 20_000);
        round(&mut i, &mut c, 20_000);
        assert_eq!(i.alpha(), 1.0);
        assert_eq!(i.ssthresh(&mut c), 5);
    }

    #[test]
    fn grows_alpha_segments_per_rtt() {
        let (mut i, mut c) = flow();
        c.cwnd_clamp = u32::MAX / 2;
        round(&mut i, &mut c, 20_000);
        round(&mut i, &mut c, 20_000);
        let before = c.cwnd;
        round(&mut i, &mut c, 20_000);
        let grew = c.cwnd - before;
        assert!((9..=10).contains(&grew), "α = 10: grew {grew}");
    }

    #[test]
    fn rto_resets_to_reno() {
        let (mut i, mut c) = flow();
        round(&mut i, &mut c, 20_000);
        round(&mut i, &mut c, 20_000);
        i.set_state(&mut c, CaState::Loss);
        assert_eq!(i.alpha(), 1.0);
        assert_eq!(i.beta(), 0.5);
    }
}
