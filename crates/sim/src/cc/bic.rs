//! BIC TCP (Xu, Harfoush & Rhee, "Binary Increase Congestion Control for
//! Fast, Long Distance Networks", INFOCOM 2004) with the behaviour of
//! Linux's net/ipv4/tcp_bic.c.
//!
//! After a loss BIC remembers W_max, the window where it happened (reduced
//! a little more by fast convergence if the window is shrinking), cuts cwnd
//! by β = 819/1024 ≈ 0.8 and then binary-searches back towards W_max: each
//! RTT cwnd grows by half the remaining distance — (W_max − cwnd)/B with
//! B = 4 per RTT in Linux's counter form — but never more than
//! max_increment = 16 segments per RTT, and slowly (cwnd / smooth_part·B)
//! within one step of W_max. Past W_max it probes by "max probing": slow
//! at first, then faster, again at most 16 segments per RTT. Below
//! low_window = 14 segments it is Reno (halving, +1 per RTT). The per-ACK
//! increment is scaled by the measured ACK ratio (delayed ACKs), like Linux.
//!
//! Time is kept in jiffies (HZ = 1000) as Linux does for the HZ/32 rate
//! limit on recomputing the counter.

use super::util::jiffies;
use super::{AckSample, CaState, CongestionControl, Conn};

const BETA_SCALE: u32 = 1024;
/// Binary search goes to (max + min) / B.
const BICTCP_B: u32 = 4;
/// Linux module parameters at their defaults.
const FAST_CONVERGENCE: bool = true;
const MAX_INCREMENT: u32 = 16;
const LOW_WINDOW: u32 = 14;
const BETA: u32 = 819;
const SMOOTH_PART: u32 = 20;
/// The ACK ratio is kept ×16.
const ACK_RATIO_SHIFT: u32 = 4;

#[derive(Clone, Debug)]
pub struct Bic {
    /// ACKs per one-segment increase.
    cnt: u32,
    /// W_max: cwnd at the last loss (after fast convergence).
    last_max_cwnd: u32,
    /// cwnd and time (jiffies) at the last recomputation of `cnt`.
    last_cwnd: u32,
    last_time: u64,
    /// Start of the current epoch (jiffies), None between loss and growth.
    epoch_start: Option<u64>,
    /// Segments per ACK × 16, EWMA with weight 1/16.
    delayed_ack: u32,
}

impl Default for Bic {
    fn default() -> Self {
        Bic {
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            epoch_start: None,
            delayed_ack: 2 << ACK_RATIO_SHIFT,
        }
    }
}

impl Bic {
    /// W_max in segments.
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }

    /// The current ACKs-per-increment counter.
    pub fn cnt(&self) -> u32 {
        self.cnt
    }

    fn reset(&mut self) {
        *self = Bic::default();
    }

    /// `bictcp_update`: choose how many ACKs make one segment of growth.
    fn update(&mut self, cwnd: u32, now: u64, hz: u64) {
        if self.last_cwnd == cwnd && now.saturating_sub(self.last_time) <= hz / 32 {
            return;
        }
        self.last_cwnd = cwnd;
        self.last_time = now;
        if self.epoch_start.is_none() {
            self.epoch_start = Some(now);
        }
        // Small windows: Reno.
        if cwnd <= LOW_WINDOW {
            self.cnt = cwnd;
            return;
        }
        if cwnd < self.last_max_cwnd {
            // Binary search towards W_max.
            let dist = (self.last_max_cwnd - cwnd) / BICTCP_B;
            self.cnt = if dist > MAX_INCREMENT {
                cwnd / MAX_INCREMENT // linear increase, capped
            } else if dist <= 1 {
                cwnd * SMOOTH_PART / BICTCP_B // creep up to W_max
            } else {
                cwnd / dist
            };
        } else {
            // Max probing beyond W_max: slow, then accelerate, then linear.
            self.cnt = if cwnd < self.last_max_cwnd + BICTCP_B {
                cwnd * SMOOTH_PART / BICTCP_B
            } else if cwnd < self.last_max_cwnd + MAX_INCREMENT * (BICTCP_B - 1) {
                cwnd * (BICTCP_B - 1) / (cwnd - self.last_max_cwnd)
            } else {
                cwnd / MAX_INCREMENT
            };
        }
        // No loss yet (W_max unknown): at most 5 % growth per RTT.
        if self.last_max_cwnd == 0 && self.cnt > 20 {
            self.cnt = 20;
        }
        // Delayed ACKs: each ACK stands for delayed_ack/16 segments.
        self.cnt = ((self.cnt << ACK_RATIO_SHIFT) / self.delayed_ack).max(1);
    }
}

impl CongestionControl for Bic {
    fn name(&self) -> &'static str {
        "bic"
    }

    fn init(&mut self, _c: &mut Conn) {
        // Linux's initial_ssthresh parameter defaults to 0: ssthresh untouched.
        self.reset();
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        self.epoch_start = None;
        // Fast convergence: a window shrinking since the last loss gives
        // bandwidth away by remembering a lower W_max.
        self.last_max_cwnd = if c.cwnd < self.last_max_cwnd && FAST_CONVERGENCE {
            c.cwnd * (BETA_SCALE + BETA) / (2 * BETA_SCALE)
        } else {
            c.cwnd
        };
        if c.cwnd <= LOW_WINDOW {
            (c.cwnd >> 1).max(2)
        } else {
            (c.cwnd * BETA / BETA_SCALE).max(2)
        }
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !c.is_cwnd_limited() {
            return;
        }
        let mut acked = acked;
        if c.in_slow_start() {
            acked = c.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.update(c.cwnd, jiffies(c), c.hz);
        let cnt = self.cnt;
        c.cong_avoid_ai(cnt, acked);
    }

    fn set_state(&mut self, _c: &mut Conn, new_state: CaState) {
        if new_state == CaState::Loss {
            self.reset();
        }
    }

    fn pkts_acked(&mut self, c: &mut Conn, s: &AckSample) {
        // ratio = 15/16 ratio + 1/16 sample, in ×16 fixed point.
        if c.ca_state == CaState::Open {
            self.delayed_ack =
                (self.delayed_ack + s.pkts_acked).wrapping_sub(self.delayed_ack >> ACK_RATIO_SHIFT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{cwnd_limited, one_segment_acked};

    /// One RTT (`rtt_us`) of single-segment ACKs for a cwnd-limited flow.
    fn one_rtt(b: &mut Bic, c: &mut Conn, rtt_us: u64) {
        let w = c.cwnd;
        for _ in 0..w {
            c.now_us += rtt_us / w as u64;
            cwnd_limited(c);
            b.pkts_acked(c, &one_segment_acked(rtt_us as i64, w));
            b.cong_avoid(c, 1);
        }
    }

    fn after_loss_at(w: u32) -> (Bic, Conn) {
        let mut b = Bic::default();
        let mut c = Conn::new(1448, w);
        b.init(&mut c);
        // Settle the ACK ratio at one segment per ACK.
        for _ in 0..200 {
            b.pkts_acked(&mut c, &one_segment_acked(10_000, w));
        }
        c.ssthresh = b.ssthresh(&mut c);
        c.cwnd = c.ssthresh;
        (b, c)
    }

    #[test]
    fn reduction_is_beta_and_sets_w_max() {
        let (b, c) = after_loss_at(1000);
        assert_eq!(b.w_max(), 1000);
        assert_eq!(c.cwnd, 1000 * 819 / 1024);
        // Small windows halve like Reno.
        let mut b = Bic::default();
        let mut c = Conn::new(1448, 12);
        assert_eq!(b.ssthresh(&mut c), 6);
    }

    /// The counter `update` picks, for a given ACK ratio (×16).
    fn cnt_at(w_max: u32, cwnd: u32, ratio16: u32) -> u32 {
        let mut b = Bic {
            last_max_cwnd: w_max,
            delayed_ack: ratio16,
            ..Bic::default()
        };
        b.update(cwnd, 1000, 1000);
        b.cnt()
    }

    #[test]
    fn counter_follows_the_binary_search() {
        // One ACK per segment (ratio 1.0 = 16/16): cnt = ACKs per +1.
        // Far below W_max: capped at max_increment = 16 per RTT.
        assert_eq!(cnt_at(1000, 800, 16), 800 / 16);
        // Within 64 of W_max: a quarter of the distance per RTT.
        assert_eq!(cnt_at(1000, 960, 16), 960 / 10);
        assert_eq!(cnt_at(1000, 980, 16), 980 / 5);
        // Within 4: creep (1/5 segment per RTT).
        assert_eq!(cnt_at(1000, 998, 16), 998 * 20 / 4);
        // Just past W_max: slow, then accelerating, then linear at 16.
        assert_eq!(cnt_at(1000, 1002, 16), 1002 * 20 / 4);
        assert_eq!(cnt_at(1000, 1010, 16), 1010 * 3 / 10);
        assert_eq!(cnt_at(1000, 1040, 16), 1040 * 3 / 40);
        assert_eq!(cnt_at(1000, 1100, 16), 1100 / 16);
        // Reno below low_window; 5 %/RTT cap before any loss.
        assert_eq!(cnt_at(1000, 14, 16), 14);
        assert_eq!(cnt_at(0, 800, 16), 20);
        // Two segments per ACK halve the counter.
        assert_eq!(cnt_at(1000, 960, 32), 960 / 10 / 2);
    }

    #[test]
    fn binary_search_towards_w_max() {
        let (mut b, mut c) = after_loss_at(1000);
        // Linux's integer EWMA of the ACK ratio sticks at 31/16 with one
        // segment per ACK, so the linear cap is max_increment·31/16 per RTT.
        assert_eq!(b.delayed_ack, 31);
        let cap = MAX_INCREMENT as f64 * 31.0 / 16.0;
        let mut prev = c.cwnd;
        let mut steps = Vec::new();
        for _ in 0..30 {
            one_rtt(&mut b, &mut c, 100_000);
            steps.push(c.cwnd - prev);
            prev = c.cwnd;
        }
        // Far from W_max: linear at the cap.
        for s in &steps[..3] {
            assert!((*s as f64 - cap).abs() <= 2.0, "{steps:?}");
        }
        // Then the steps shrink as the distance halves ...
        let first_small = steps.iter().position(|&s| (s as f64) < cap - 2.0).unwrap();
        let near = &steps[first_small..first_small + 4];
        for w in near.windows(2) {
            assert!(w[1] < w[0], "steps must shrink near W_max: {steps:?}");
        }
        // ... and cwnd settles just around W_max (creeping, not jumping).
        assert!((995..=1003).contains(&c.cwnd), "cwnd {} {steps:?}", c.cwnd);
        assert!(steps[20..].iter().all(|&s| s <= 1), "{steps:?}");
    }

    #[test]
    fn probes_beyond_w_max_slowly_then_linearly() {
        let (mut b, mut c) = after_loss_at(500);
        c.cwnd = 501;
        c.ssthresh = 400;
        let before = c.cwnd;
        one_rtt(&mut b, &mut c, 100_000);
        assert!(c.cwnd - before <= 1, "just past W_max the growth is slow");
        c.cwnd = 600;
        let before = c.cwnd;
        one_rtt(&mut b, &mut c, 100_000);
        let step = c.cwnd - before;
        assert!(
            (30..=33).contains(&step),
            "far past W_max: linear at 16·31/16 per RTT, got {step}"
        );
    }

    #[test]
    fn fast_convergence_lowers_w_max_when_shrinking() {
        let (mut b, mut c) = after_loss_at(1000);
        c.cwnd = 900;
        b.ssthresh(&mut c);
        assert_eq!(b.w_max(), 900 * (1024 + 819) / 2048);
    }

    /// Linux quirk kept: the counter is divided by the ACK ratio, which
    /// compensated for delayed ACKs when cong_avoid counted ACKs; since
    /// tcp_cong_avoid_ai counts acked segments, the per-RTT growth is the
    /// same whether each ACK covers one segment or two.
    #[test]
    fn delayed_acks_give_the_same_growth_per_rtt() {
        let (mut b, mut c) = after_loss_at(1000);
        c.cwnd = 600;
        c.ssthresh = 500;
        let before = c.cwnd;
        one_rtt(&mut b, &mut c, 100_000);
        let single = c.cwnd - before;
        let (mut b, mut c) = after_loss_at(1000);
        for _ in 0..300 {
            b.pkts_acked(
                &mut c,
                &AckSample {
                    pkts_acked: 2,
                    rtt_us: 10_000,
                    in_flight: 1000,
                },
            );
        }
        assert_eq!(b.delayed_ack, 32);
        c.cwnd = 600;
        c.ssthresh = 500;
        let before = c.cwnd;
        let w = c.cwnd;
        for _ in 0..w / 2 {
            c.now_us += 200;
            c.is_cwnd_limited_flag = true;
            b.cong_avoid(&mut c, 2);
        }
        let double = c.cwnd - before;
        assert!(single.abs_diff(double) <= 2, "{single} vs {double}");
    }

    #[test]
    fn loss_state_forgets_w_max() {
        let (mut b, mut c) = after_loss_at(1000);
        b.set_state(&mut c, CaState::Loss);
        assert_eq!(b.w_max(), 0);
    }
}
