//! CUBIC (RFC 9438) with the behaviour of Linux's net/ipv4/tcp_cubic.c,
//! including HyStart (Ha & Rhee, "Taming the Elephants", as Linux does it).
//!
//! Window growth in congestion avoidance follows
//!     W(t) = C·(t − K)³ + W_max,   K = cbrt(W_max·(1 − β)/C)
//! with C = 0.4 and β = 0.7, evaluated like Linux:
//! * time is kept in jiffies (of the connection's CONFIG_HZ, `Conn::hz`,
//!   1000 unless `[tcp] kernel_hz` says otherwise) and converted to 1/1024 s, and
//!   the target is taken one min-RTT ahead (t + delay_min);
//! * cwnd does not jump to the target: a counter `cnt` (ACKs per +1 segment)
//!   is derived from the distance to the target and applied through
//!   `tcp_cong_avoid_ai`; growth is capped at 1 segment per 2 ACKs (1.5×
//!   per RTT) and, before the first loss, at 5 % per RTT;
//! * the TCP-friendly (Reno-emulation) estimate grows by one segment per
//!   cwnd·15/8 ACKs (Linux's integer form of 3(1−β)/(1+β)) and caps `cnt`
//!   when Reno would be faster;
//! * `cnt` is recomputed at most once per jiffy, and not at all while cwnd
//!   is unchanged for up to HZ/32.
//!
//! Units: cwnd in segments, RTTs in µs, `k` in 1/1024 s, epoch times in
//! jiffies — the same split Linux uses.

use super::{AckSample, CaEvent, CaState, CongestionControl, Conn};
use super::util::{jiffies, jiffies_at, usecs_to_jiffies};

/// β scaled by 1024 (Linux module parameter `beta` = 717 ≈ 0.7).
const BETA_SCALE: u32 = 1024;
const BETA: u32 = 717;
/// CUBIC's own time unit: 2^10 ticks per second.
const BICTCP_HZ: u32 = 10;
/// C scaled by 1024 (Linux `bic_scale` = 41, ×10 → 410/1024 ≈ 0.4).
const CUBE_RTT_SCALE: u128 = 41 * 10;
/// 2^(10 + 3·BICTCP_HZ) / (C·1024): turns (W_max − cwnd) into K³ in
/// (1/1024 s)³ units.
const CUBE_FACTOR: u64 = (1u64 << (10 + 3 * BICTCP_HZ)) / (41 * 10);
/// Reno-emulation step: tcp_cwnd grows by one per cwnd·FRIENDLY_SCALE/8
/// ACKs, with FRIENDLY_SCALE = 8(1+β)/(3(1−β)) in Linux's integer arithmetic
/// (= 15).
const FRIENDLY_SCALE: u32 = 8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA);

/// HyStart parameters (Linux module defaults).
const HYSTART_ACK_TRAIN: u8 = 0x1;
const HYSTART_DELAY: u8 = 0x2;
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_ACK_DELTA_US: u64 = 2000;
const HYSTART_MIN_SAMPLES: u8 = 8;
const HYSTART_DELAY_MIN_US: u32 = 4000;
const HYSTART_DELAY_MAX_US: u32 = 16000;
/// `sk_gso_max_size` default (GSO_LEGACY_MAX_SIZE), used for HyStart's
/// ack-delay cushion.
const GSO_MAX_SIZE: u64 = 65536;

#[derive(Clone, Debug)]
pub struct Cubic {
    // --- tunables (Linux module parameters, at their defaults) ---
    fast_convergence: bool,
    tcp_friendliness: bool,
    hystart: bool,
    hystart_detect: u8,

    // --- cubic state (struct bictcp) ---
    /// ACKs per one-segment increase of cwnd.
    cnt: u32,
    /// W_max: cwnd just before the last reduction (after fast convergence).
    last_max_cwnd: u32,
    /// cwnd and time (jiffies) at the last recomputation of `cnt`.
    last_cwnd: u32,
    last_time: u64,
    /// Origin point of the cubic curve (W_max, or cwnd if above it).
    origin_point: u32,
    /// K in 1/1024 s.
    k: u64,
    /// Minimum RTT seen (µs); 0 = none yet.
    delay_min: u32,
    /// Start of the current congestion-avoidance epoch (jiffies).
    epoch_start: Option<u64>,
    /// ACKs counted for the Reno emulation.
    ack_cnt: u32,
    /// Reno-emulated cwnd (W_est).
    tcp_cwnd: u32,

    // --- HyStart ---
    sample_cnt: u8,
    found: bool,
    /// Start of the current round and time of the last ACK in the train (µs).
    round_start: u64,
    last_ack: u64,
    /// End of the round as a segment sequence number (snd_nxt at its start).
    end_seq: u64,
    /// Minimum RTT within the current round (µs).
    curr_rtt: u32,

}

impl Default for Cubic {
    fn default() -> Self {
        Cubic {
            fast_convergence: true,
            tcp_friendliness: true,
            hystart: true,
            hystart_detect: HYSTART_ACK_TRAIN | HYSTART_DELAY,
            cnt: 0,
            last_max_cwnd: 0,
            last_cwnd: 0,
            last_time: 0,
            origin_point: 0,
            k: 0,
            delay_min: 0,
            epoch_start: None,
            ack_cnt: 0,
            tcp_cwnd: 0,
            sample_cnt: 0,
            found: false,
            round_start: 0,
            last_ack: 0,
            end_seq: 0,
            curr_rtt: u32::MAX,
        }
    }
}

/// Floor of the cube root, exact and platform-independent. (Linux uses a
/// table lookup plus one Newton step, ~0.2 % error; exact is at least as
/// faithful to the specification.)
fn cube_root(a: u64) -> u64 {
    let (mut lo, mut hi) = (0u64, 1u64 << 22); // (2^22)^3 > u64::MAX
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if (mid as u128).pow(3) <= a as u128 {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Segment sequence numbers: Linux compares byte sequence numbers snd_una /
/// snd_nxt; the engine exposes segment counters, from which
/// snd_una ≈ delivered − sacked_out and snd_nxt ≈ snd_una + packets_out.
fn snd_una_seg(c: &Conn) -> u64 {
    c.delivered.saturating_sub(c.sacked_out as u64)
}

fn snd_nxt_seg(c: &Conn) -> u64 {
    snd_una_seg(c) + c.packets_out as u64
}

impl Cubic {
    /// W_max in segments (`last_max_cwnd`).
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }

    /// K of the current epoch in seconds.
    pub fn k_seconds(&self) -> f64 {
        self.k as f64 / (1u64 << BICTCP_HZ) as f64
    }

    /// Minimum RTT CUBIC has seen (µs), 0 before any sample.
    pub fn delay_min_us(&self) -> u32 {
        self.delay_min
    }

    /// HyStart has found the slow-start exit point.
    pub fn hystart_found(&self) -> bool {
        self.found
    }

    /// `bictcp_reset`: forget everything, W_max and delay_min included.
    fn reset(&mut self) {
        *self = Cubic {
            fast_convergence: self.fast_convergence,
            tcp_friendliness: self.tcp_friendliness,
            hystart: self.hystart,
            hystart_detect: self.hystart_detect,
            ..Cubic::default()
        };
    }

    /// Start a new HyStart round: it ends when everything sent so far is acked.
    fn hystart_reset(&mut self, c: &Conn) {
        self.round_start = c.now_us;
        self.last_ack = c.now_us;
        self.end_seq = snd_nxt_seg(c);
        self.curr_rtt = u32::MAX;
        self.sample_cnt = 0;
    }

    /// Recompute `cnt` (`bictcp_update`).
    fn update(&mut self, c: &Conn, cwnd: u32, acked: u32) {
        let now = jiffies(c);
        self.ack_cnt = self.ack_cnt.saturating_add(acked);

        // Nothing changed since the last computation: keep cnt.
        if self.last_cwnd == cwnd && now.saturating_sub(self.last_time) <= c.hz / 32 {
            return;
        }

        // The cubic part is evaluated at most once per jiffy; a cwnd
        // reduction clears epoch_start and forces it.
        if !(self.epoch_start.is_some() && now == self.last_time) {
            self.last_cwnd = cwnd;
            self.last_time = now;

            let epoch_start = match self.epoch_start {
                Some(e) => e,
                None => {
                    // New epoch: K is the time to climb back to W_max.
                    self.epoch_start = Some(now);
                    self.ack_cnt = acked;
                    self.tcp_cwnd = cwnd;
                    if self.last_max_cwnd <= cwnd {
                        self.k = 0;
                        self.origin_point = cwnd;
                    } else {
                        self.k = cube_root(CUBE_FACTOR * (self.last_max_cwnd - cwnd) as u64);
                        self.origin_point = self.last_max_cwnd;
                    }
                    now
                }
            };

            // t = time since epoch start plus one min RTT (aim where the
            // curve will be when this window's ACKs return), in 1/1024 s.
            let t_j = now - epoch_start + usecs_to_jiffies(c, self.delay_min as u64);
            let t = (t_j << BICTCP_HZ) / c.hz;
            let offs = t.abs_diff(self.k) as u128;
            // C·(t−K)³ in segments (u128: no overflow for long epochs).
            let delta = (CUBE_RTT_SCALE * offs * offs * offs) >> (10 + 3 * BICTCP_HZ);
            let delta = delta.min(u32::MAX as u128) as u32;
            let target = if t < self.k {
                self.origin_point.saturating_sub(delta)
            } else {
                self.origin_point.saturating_add(delta)
            };

            // Spread the climb to the target over one window of ACKs.
            self.cnt = if target > cwnd {
                cwnd / (target - cwnd)
            } else {
                100u32.saturating_mul(cwnd) // almost flat at the plateau
            };

            // Before any loss the available bandwidth is unknown: do not be
            // slower than 5 % per RTT.
            if self.last_max_cwnd == 0 && self.cnt > 20 {
                self.cnt = 20;
            }
        }

        // TCP-friendly region: never grow slower than a Reno flow with the
        // same average (AIMD with β = 0.7 and α = 3(1−β)/(1+β)).
        if self.tcp_friendliness {
            let per_seg = ((cwnd as u64 * FRIENDLY_SCALE as u64) >> 3).max(1) as u32;
            if self.ack_cnt > per_seg {
                let n = (self.ack_cnt - 1) / per_seg;
                self.ack_cnt -= n * per_seg;
                self.tcp_cwnd = self.tcp_cwnd.saturating_add(n);
            }
            if self.tcp_cwnd > cwnd {
                let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
                self.cnt = self.cnt.min(max_cnt);
            }
        }

        // At most one segment per two ACKs (1.5× per RTT).
        self.cnt = self.cnt.max(2);
    }

    /// HyStart's cushion for TSO/GRO aggregation delay, from the pacing
    /// rate Linux maintains for every flow (≤ 1 ms).
    fn hystart_ack_delay(c: &Conn) -> u64 {
        if c.pacing_rate == 0 {
            return 0;
        }
        (GSO_MAX_SIZE * 4 * 1_000_000 / c.pacing_rate).min(1000)
    }

    fn hystart_update(&mut self, c: &mut Conn, delay: u32) {
        if snd_una_seg(c) > self.end_seq {
            self.hystart_reset(c);
        }

        // Too small a window to judge.
        if c.cwnd < HYSTART_LOW_WINDOW {
            return;
        }

        if self.hystart_detect & HYSTART_ACK_TRAIN != 0 {
            let now = c.now_us;
            // Closely spaced ACKs form a train; a train longer than half the
            // min RTT (a whole one when paced) means the pipe is full.
            if now.saturating_sub(self.last_ack) <= HYSTART_ACK_DELTA_US {
                self.last_ack = now;
                let mut threshold = self.delay_min as u64 + Self::hystart_ack_delay(c);
                if !c.paced {
                    threshold >>= 1;
                }
                if now.saturating_sub(self.round_start) > threshold {
                    self.found = true;
                    c.ssthresh = c.cwnd;
                }
            }
        }

        if self.hystart_detect & HYSTART_DELAY != 0 {
            // The round's minimum RTT, once 8 samples are in, against the
            // path minimum plus clamp(delay_min/8, 4 ms, 16 ms).
            self.curr_rtt = self.curr_rtt.min(delay);
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt += 1;
            } else {
                let thresh =
                    (self.delay_min >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
                if self.curr_rtt > self.delay_min.saturating_add(thresh) {
                    self.found = true;
                    c.ssthresh = c.cwnd;
                }
            }
        }
    }
}

impl CongestionControl for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn init(&mut self, c: &mut Conn) {
        self.reset();
        if self.hystart {
            self.hystart_reset(c);
        }
        // initial_ssthresh is 0 in Linux: ssthresh stays as the engine set it.
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        self.epoch_start = None; // end of epoch
                                 // Fast convergence: if this loss came before regaining the previous
                                 // W_max, another flow is probably taking bandwidth: release some by
                                 // remembering a lower W_max, (1+β)/2 of cwnd.
        if c.cwnd < self.last_max_cwnd && self.fast_convergence {
            self.last_max_cwnd =
                ((c.cwnd as u64 * (BETA_SCALE + BETA) as u64) / (2 * BETA_SCALE) as u64) as u32;
        } else {
            self.last_max_cwnd = c.cwnd;
        }
        ((c.cwnd as u64 * BETA as u64 / BETA_SCALE as u64) as u32).max(2)
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
        self.update(c, c.cwnd, acked);
        let cnt = self.cnt;
        c.cong_avoid_ai(cnt, acked);
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        // After an RTO nothing of the old curve is trusted.
        if new_state == CaState::Loss {
            self.reset();
            self.hystart_reset(c);
        }
    }

    fn cwnd_event(&mut self, c: &mut Conn, ev: CaEvent) {
        if ev != CaEvent::TxStart {
            return;
        }
        // Restart after idle: shift the epoch by the idle time since the
        // last data was sent (tp->lsndtime, in jiffies) so the curve
        // resumes where it left off instead of jumping ahead.
        let Some(epoch) = self.epoch_start else {
            return;
        };
        let now = jiffies(c);
        let lsnd = jiffies_at(c, c.lsndtime_us);
        if now > lsnd {
            let shifted = epoch + (now - lsnd);
            self.epoch_start = Some(shifted.min(now));
        }
    }

    fn pkts_acked(&mut self, c: &mut Conn, s: &AckSample) {
        if s.rtt_us < 0 {
            return; // duplicate ACK without a timestamp
        }
        // Ignore delay samples during the first second after a reduction.
        if let Some(e) = self.epoch_start {
            if jiffies(c).saturating_sub(e) < c.hz {
                return;
            }
        }
        let delay = (s.rtt_us.min(u32::MAX as i64) as u32).max(1);
        if self.delay_min == 0 || self.delay_min > delay {
            self.delay_min = delay;
        }
        if !self.found && c.in_slow_start() && self.hystart {
            self.hystart_update(c, delay);
        }
    }

    // undo_cwnd: Linux CUBIC uses tcp_reno_undo_cwnd = the trait default.
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::one_segment_acked;
    use crate::cc::INFINITE_SSTHRESH;

    const C: f64 = 0.4;
    const B: f64 = 0.7;

    /// Deliver one ACK for one segment at `c.now_us` with RTT `rtt_us` from a
    /// cwnd-limited sender that refills its window after each ACK.
    fn ack(cc: &mut Cubic, c: &mut Conn, rtt_us: u64) {
        c.packets_out = c.packets_out.saturating_sub(1);
        c.delivered += 1;
        cc.pkts_acked(c, &one_segment_acked(rtt_us as i64, c.packets_out + 1));
        c.is_cwnd_limited_flag = true;
        c.max_packets_out = c.max_packets_out.max(c.cwnd);
        if c.ca_state == CaState::Open {
            cc.cong_avoid(c, 1);
        }
        c.packets_out = c.cwnd; // send to fill the window
        c.max_packets_out = c.cwnd;
    }

    /// One round trip: the whole window is acked, ACKs evenly spread.
    fn rtt_round(cc: &mut Cubic, c: &mut Conn, rtt_us: u64) {
        let n = c.cwnd as u64;
        let start = c.now_us;
        for i in 1..=n {
            c.now_us = start + rtt_us * i / n;
            ack(cc, c, rtt_us);
        }
    }

    /// A connection in congestion avoidance that has measured `rtt_us`, with
    /// a loss at `w_max`: returns after the reduction to β·W_max.
    fn after_loss(cc: &mut Cubic, w_max: u32, rtt_us: u64) -> Conn {
        let mut c = Conn::new(1448, w_max);
        cc.init(&mut c);
        c.ssthresh = w_max;
        c.packets_out = w_max;
        // One window of ACKs that only feed RTT samples (no growth yet).
        for i in 1..=w_max as u64 {
            c.now_us = 1_000_000 + rtt_us * i / w_max as u64;
            cc.pkts_acked(&mut c, &one_segment_acked(rtt_us as i64, w_max));
        }
        loss(cc, &mut c);
        c
    }

    /// Fast-recovery entry as the engine does it; PRR ends at ssthresh.
    fn loss(cc: &mut Cubic, c: &mut Conn) {
        let ss = cc.ssthresh(c);
        c.ssthresh = ss;
        c.prior_cwnd = c.cwnd;
        cc.set_state(c, CaState::Recovery);
        c.ca_state = CaState::Recovery;
        c.cwnd = ss;
        cc.set_state(c, CaState::Open);
        c.ca_state = CaState::Open;
        cc.cwnd_event(c, CaEvent::CompleteCwr);
    }

    /// A new connection in slow start at `now_us` with its window in flight.
    fn slow_start_at(init_cwnd: u32, now_us: u64) -> (Cubic, Conn) {
        let mut cc = Cubic::default();
        let mut c = Conn::new(1448, init_cwnd);
        c.now_us = now_us;
        cc.init(&mut c);
        c.packets_out = c.cwnd;
        (cc, c)
    }

    /// The epoch clock counts in the kernel's jiffies: with CONFIG_HZ=250
    /// the min RTT added to t rounds up to whole 4 ms ticks (4.001 ms → 8 ms,
    /// against 5 ms at HZ=1000), which aims the window further ahead.
    #[test]
    fn epoch_clock_follows_kernel_hz() {
        let cnt_at = |hz: u64| {
            let mut cc = Cubic::default();
            let mut c = Conn::new(1448, 10_000);
            c.hz = hz;
            cc.init(&mut c);
            c.ssthresh = 10_000;
            c.packets_out = 10_000;
            c.now_us = 1_000_000;
            cc.pkts_acked(&mut c, &one_segment_acked(4_001, 10_000));
            loss(&mut cc, &mut c); // W_max = 10000, cwnd = 7002
            c.now_us = 3_000_000; // a new epoch starts at the next ACK
            c.is_cwnd_limited_flag = true;
            c.max_packets_out = c.cwnd;
            cc.cong_avoid(&mut c, 1);
            // The kernel's arithmetic, by hand: t in 1/1024 s, K from
            // W_max − cwnd, target = W_max − C·(K − t)³.
            let cwnd = c.cwnd;
            let t = (((4_001 * hz).div_ceil(1_000_000)) << 10) / hz;
            let k = cube_root(CUBE_FACTOR * (10_000 - cwnd) as u64);
            let offs = (k - t) as u128;
            let target = 10_000 - ((410 * offs * offs * offs) >> 40) as u32;
            (cc.cnt, cwnd / (target - cwnd))
        };
        let (got250, want250) = cnt_at(250);
        let (got1000, want1000) = cnt_at(1000);
        assert_eq!(got250, want250);
        assert_eq!(got1000, want1000);
        assert_ne!(got250, got1000);
    }

    /// On a 0.3 ms path at 250 Hz (studies/loss-sweep) the epoch's first
    /// cnt is about cwnd (the target is one segment above it) and, the
    /// cubic part running once per jiffy, holds until the next tick: cwnd
    /// climbs about a segment per RTT for the rest of that jiffy, then
    /// nearly stops. Growth per loss is thus (rest of the jiffy) / RTT.
    #[test]
    fn first_jiffy_of_an_epoch_grows_at_its_first_cnt() {
        let rtt = 300u64;
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, 40, rtt);
        assert_eq!(c.cwnd, 28);
        c.hz = 250;
        c.now_us = 1_004_000; // a tick: the epoch starts with a whole jiffy left
        let start = c.cwnd;
        while c.now_us + rtt <= 1_008_000 {
            rtt_round(&mut cc, &mut c, rtt);
        }
        let first = c.cwnd - start;
        assert_eq!(cc.epoch_start, Some(251));
        assert!((10..=20).contains(&first), "grew {first} in the first jiffy");
        c.now_us = 1_008_000;
        let mid = c.cwnd;
        while c.now_us + rtt <= 1_012_000 {
            rtt_round(&mut cc, &mut c, rtt);
        }
        assert!(c.cwnd - mid <= 1, "grew {} in the second jiffy", c.cwnd - mid);
    }

    fn w_cubic(t: f64, w_max: f64) -> f64 {
        let k = (w_max * (1.0 - B) / C).cbrt();
        C * (t - k).powi(3) + w_max
    }

    #[test]
    fn cube_root_is_exact_floor() {
        for x in [0u64, 1, 7, 8, 26, 27, 1000, 999, 1 << 40, u64::MAX] {
            let r = cube_root(x) as u128;
            assert!(r.pow(3) <= x as u128 && (r + 1).pow(3) > x as u128, "x={x}");
        }
    }

    #[test]
    fn reduction_is_beta_and_sets_w_max() {
        let mut cc = Cubic::default();
        let mut c = Conn::new(1448, 100);
        cc.init(&mut c);
        assert_eq!(cc.ssthresh(&mut c), 70); // 100·717/1024
        assert_eq!(cc.w_max(), 100);
        c.cwnd = 2;
        assert_eq!(cc.ssthresh(&mut c), 2);
    }

    #[test]
    fn cwnd_follows_cubic_curve_below_and_above_w_max() {
        let w_max = 200u32;
        let rtt = 100_000u64; // 100 ms: the cubic region (Reno emulation is slower)
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, w_max, rtt);
        assert_eq!(c.cwnd, 140);
        assert!(!c.in_slow_start());

        let k = (w_max as f64 * (1.0 - B) / C).cbrt();
        let t0 = c.now_us; // the epoch starts with the next ACK
        let mut checked_below = 0;
        let mut checked_above = 0;
        let mut next_check = 0.2;
        let mut worst: f64 = 0.0;
        while (c.now_us - t0) as f64 / 1e6 < k + 5.0 {
            rtt_round(&mut cc, &mut c, rtt);
            let t = (c.now_us - t0) as f64 / 1e6;
            if t >= next_check {
                next_check += 0.2;
                let w = w_cubic(t, w_max as f64);
                let err = (c.cwnd as f64 - w).abs() / w;
                worst = worst.max(err);
                assert!(err < 0.10, "t={t:.2}s cwnd={} W(t)={w:.1}", c.cwnd);
                if w < w_max as f64 - 1.0 {
                    checked_below += 1;
                } else if w > w_max as f64 + 1.0 {
                    checked_above += 1;
                }
            }
        }
        assert!(
            checked_below >= 15 && checked_above >= 10,
            "{checked_below} {checked_above}"
        );
        // K as CUBIC computed it (Linux's C is 410/1024).
        assert!(
            (cc.k_seconds() - k).abs() / k < 0.01,
            "K={} vs {k}",
            cc.k_seconds()
        );
        // Concave then convex: well past W_max by the end.
        assert!(c.cwnd as f64 > 1.15 * w_max as f64, "cwnd {}", c.cwnd);
        assert!(worst < 0.03, "worst relative error {worst}");
    }

    #[test]
    fn tcp_friendly_region_grows_like_reno() {
        // Short RTT, small window: the cubic curve barely moves within a few
        // hundred RTTs, so the Reno emulation (≈0.53 segments/RTT) rules.
        let rtt = 1_000u64;
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, 40, rtt);
        let start = c.cwnd;
        assert_eq!(start, 28);
        for _ in 0..200 {
            rtt_round(&mut cc, &mut c, rtt);
        }
        let per_rtt = (c.cwnd - start) as f64 / 200.0;
        let alpha = 3.0 * (1.0 - B) / (1.0 + B);
        assert!(
            (per_rtt - alpha).abs() / alpha < 0.15,
            "{per_rtt} vs {alpha}"
        );
        // The pure cubic curve would be at (much) less:
        let t = 200.0 * rtt as f64 / 1e6;
        assert!(w_cubic(t + 0.001, 40.0) < c.cwnd as f64 - 50.0);
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, 200, 50_000);
        assert_eq!(cc.w_max(), 200);
        // Grow a little (still below W_max), then lose again.
        for _ in 0..5 {
            rtt_round(&mut cc, &mut c, 50_000);
        }
        let cwnd = c.cwnd;
        assert!(cwnd < 200);
        loss(&mut cc, &mut c);
        let expect = (cwnd as u64 * (1024 + 717) / 2048) as u32; // cwnd·(1+β)/2
        assert_eq!(cc.w_max(), expect);
        assert!(cc.w_max() < cwnd);
        assert_eq!(c.cwnd, (cwnd * 717 / 1024).max(2));
        // Without fast convergence, W_max would be the cwnd at loss.
        let mut cc2 = Cubic {
            fast_convergence: false,
            ..Cubic::default()
        };
        let mut c2 = after_loss(&mut cc2, 200, 50_000);
        c2.cwnd = cwnd;
        cc2.ssthresh(&mut c2);
        assert_eq!(cc2.w_max(), cwnd);
    }

    #[test]
    fn growth_before_first_loss_is_at_least_5_percent_per_rtt() {
        let mut cc = Cubic::default();
        let mut c = Conn::new(1448, 100);
        cc.init(&mut c);
        c.ssthresh = 100; // congestion avoidance, no W_max yet
        c.now_us = 1_000_000;
        for _ in 0..10 {
            rtt_round(&mut cc, &mut c, 20_000);
        }
        // ≈ 1/20 per ACK → ×1.05 per RTT → ×1.63 over 10 RTTs.
        assert!(c.cwnd >= 155 && c.cwnd <= 170, "cwnd {}", c.cwnd);
    }

    /// Slow start with ACKs spaced wider than the ACK-train delta, so only the
    /// delay detector can fire; the RTT rises by 10 ms once cwnd ≥ 40.
    #[test]
    fn hystart_delay_increase_exits_slow_start() {
        let (mut cc, mut c) = slow_start_at(10, 1_000);
        let base = 40_000u64;
        let mut queue_at = None;
        for _ in 0..10_000 {
            if !c.in_slow_start() {
                break;
            }
            c.now_us += 2_500; // > hystart_ack_delta (2 ms)
            if queue_at.is_none() && c.cwnd >= 40 {
                queue_at = Some(c.cwnd);
            }
            let rtt = if queue_at.is_some() {
                base + 10_000
            } else {
                base
            };
            ack(&mut cc, &mut c, rtt);
        }
        assert!(cc.hystart_found());
        assert!(!c.in_slow_start());
        assert_eq!(c.ssthresh, c.cwnd);
        assert_eq!(cc.report(&c).state, "cong_avoid");
        assert_eq!(cc.delay_min_us(), base as u32);
        // The round began with the delay increase (cwnd 40 = a round
        // boundary): 8 samples are collected, the 9th ACK checks them.
        let q = queue_at.unwrap();
        assert_eq!(c.cwnd, q + 8, "exit at {} (queue from {q})", c.cwnd);
    }

    #[test]
    fn hystart_delay_needs_more_than_threshold() {
        // RTT rises by 3 ms on a 40 ms path: below the 4 ms minimum threshold.
        let (mut cc, mut c) = slow_start_at(10, 0);
        c.cwnd_clamp = 300;
        for _ in 0..2000 {
            c.now_us += 2_500;
            let rtt = if c.cwnd >= 40 { 43_000 } else { 40_000 };
            ack(&mut cc, &mut c, rtt);
        }
        assert!(!cc.hystart_found());
        assert_eq!(c.ssthresh, INFINITE_SSTHRESH);
    }

    #[test]
    fn hystart_ack_train_exits_slow_start() {
        // Constant RTT, ACKs 1 ms apart (a busy bottleneck): the train of a
        // round outlasts delay_min/2 = 20 ms once cwnd > ~20.
        let (mut cc, mut c) = slow_start_at(10, 0);
        for _ in 0..10_000 {
            if !c.in_slow_start() {
                break;
            }
            c.now_us += 1_000;
            ack(&mut cc, &mut c, 40_000);
        }
        assert!(cc.hystart_found());
        assert_eq!(c.ssthresh, c.cwnd);
        assert!(c.cwnd >= 16 && c.cwnd <= 64, "exit at {}", c.cwnd);
    }

    /// Paced (Linux: `sk_pacing_status` is not SK_PACING_NONE: a pacing
    /// cap, fq or a CCA that asks for pacing), the ACK train must outlast
    /// a whole delay_min, not half of it: pacing spreads a round's ACKs on
    /// purpose. With the train above, slow start ends on the first ACK
    /// more than 20 ms into a round unpaced, more than 40 ms paced.
    #[test]
    fn hystart_ack_train_waits_a_whole_min_rtt_when_paced() {
        let exit = |paced: bool| {
            let (mut cc, mut c) = slow_start_at(10, 0);
            c.paced = paced;
            while c.in_slow_start() {
                c.now_us += 1_000;
                ack(&mut cc, &mut c, 40_000);
            }
            assert!(cc.hystart_found());
            (c.now_us - cc.round_start, c.cwnd)
        };
        let ((unpaced, w_unpaced), (paced, w_paced)) = (exit(false), exit(true));
        assert_eq!(unpaced, 21_000, "unpaced: the train's length at the exit");
        assert_eq!(paced, 41_000, "paced: the train's length at the exit");
        assert!(w_paced > w_unpaced, "paced exits later: cwnd {w_paced} against {w_unpaced}");
    }

    #[test]
    fn hystart_inactive_below_low_window() {
        let (mut cc, mut c) = slow_start_at(4, 0);
        c.cwnd_clamp = 15;
        for _ in 0..200 {
            c.now_us += 100;
            let rtt = if c.delivered > 20 { 80_000 } else { 10_000 };
            ack(&mut cc, &mut c, rtt);
        }
        assert!(!cc.hystart_found());
    }

    #[test]
    fn loss_state_resets_everything() {
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, 200, 50_000);
        rtt_round(&mut cc, &mut c, 50_000);
        assert!(cc.epoch_start.is_some());
        assert!(cc.delay_min > 0 && cc.w_max() > 0);
        cc.set_state(&mut c, CaState::Loss);
        assert!(cc.epoch_start.is_none());
        assert_eq!(cc.w_max(), 0);
        assert_eq!(cc.delay_min, 0);
        assert!(!cc.found);
        assert_eq!(cc.end_seq, snd_nxt_seg(&c));
    }

    #[test]
    fn tx_start_after_idle_shifts_epoch() {
        let rtt = 50_000u64;
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, 200, rtt);
        for _ in 0..10 {
            rtt_round(&mut cc, &mut c, rtt);
        }
        let epoch = cc.epoch_start.unwrap();
        let cwnd_before = c.cwnd;
        let last_ack = c.now_us;
        // The last segment went out 20 ms before its ACK (the RTT samples
        // say 50 ms: the idle time is the sender's, not an estimate).
        c.lsndtime_us = last_ack - 20_000;
        // Idle for 3 s after the last segment was acked, then send again.
        c.packets_out = 0;
        c.now_us = last_ack + 3_000_000;
        cc.cwnd_event(&mut c, CaEvent::TxStart);
        // Idle time counted from the last send (tp->lsndtime): 3.02 s.
        assert_eq!(cc.epoch_start.unwrap(), epoch + 3_020);
        // So growth resumes where it stopped rather than 3 s along the curve.
        c.packets_out = c.cwnd;
        rtt_round(&mut cc, &mut c, rtt);
        assert!(c.cwnd <= cwnd_before + 5, "{} vs {}", c.cwnd, cwnd_before);
        // An epoch never starts in the future.
        let mut cc2 = Cubic::default();
        let mut c2 = after_loss(&mut cc2, 200, rtt);
        rtt_round(&mut cc2, &mut c2, rtt);
        c2.now_us += 10_000_000;
        cc2.cwnd_event(&mut c2, CaEvent::TxStart);
        assert!(cc2.epoch_start.unwrap() <= jiffies(&c2));
    }

    #[test]
    fn delay_samples_ignored_right_after_reduction() {
        let mut cc = Cubic::default();
        let mut c = after_loss(&mut cc, 100, 50_000);
        rtt_round(&mut cc, &mut c, 50_000); // starts the epoch
        let e = cc.epoch_start.unwrap();
        c.now_us = e * 1000 + 500_000;
        cc.pkts_acked(&mut c, &one_segment_acked(10_000, 10));
        assert_eq!(cc.delay_min_us(), 50_000);
        c.now_us = e * 1000 + 1_000_000;
        cc.pkts_acked(&mut c, &one_segment_acked(10_000, 10));
        assert_eq!(cc.delay_min_us(), 10_000);
    }

    #[test]
    fn report_states() {
        let mut cc = Cubic::default();
        let mut c = Conn::new(1448, 10);
        cc.init(&mut c);
        assert_eq!(cc.report(&c).state, "slow_start");
        c.ssthresh = 5;
        assert_eq!(cc.report(&c).state, "cong_avoid");
        assert!(cc.report(&c).bw_est_bps.is_none());
    }
}
