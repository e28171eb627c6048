//! TCP Vegas (Brakmo & Peterson, IEEE JSAC 1995) with the behaviour of
//! Linux's net/ipv4/tcp_vegas.c.
//!
//! Once per RTT (when the ACK passes the snd_nxt recorded at the start of
//! the previous one) Vegas compares the window it has with the window the
//! path would need without queueing:
//!     diff = cwnd · (rtt − BaseRTT) / BaseRTT      (segments queued)
//! where BaseRTT is the smallest RTT ever seen and rtt the smallest RTT of
//! the last round (the min filters out delayed ACKs). In congestion
//! avoidance it adds one segment when diff < α = 2, removes one when
//! diff > β = 4, and holds otherwise; in slow start it grows like Reno
//! (every RTT, as Linux — not every other RTT as the paper) until diff > γ = 1,
//! then sets cwnd to the actual rate × BaseRTT + 1 and leaves slow start.
//! With two or fewer RTT samples in the round (likely all delayed ACKs) and
//! while Vegas is disabled (outside the Open state, until an RTT of fresh
//! samples after a restart) it behaves like Reno. Losses are handled like
//! Reno (halving); all of Linux's arithmetic is integer, RTTs are µs + 1.
//!
//! Engine differences: the engine calls `cong_avoid` only when the flow is
//! cwnd-limited, so Vegas's per-RTT step is skipped on app-limited ACKs,
//! where Linux would still take it.

use super::reno::Reno;
use super::util::current_ssthresh;
use super::{AckSample, CaEvent, CaState, CcaReport, CongestionControl, Conn};

/// Lower and upper bounds on segments queued in the network, and the slow-
/// start exit threshold (Linux module parameters at their defaults).
const ALPHA: u32 = 2;
const BETA: u32 = 4;
const GAMMA: u32 = 1;

#[derive(Clone, Debug)]
pub struct Vegas {
    /// snd_nxt (bytes) at the start of the current RTT.
    beg_snd_nxt: u64,
    /// Vegas adjustments are on (Open state, fresh samples).
    doing_vegas_now: bool,
    /// RTT samples in this round, and their minimum (µs + 1).
    cnt_rtt: u32,
    min_rtt: u32,
    /// Minimum RTT ever seen (µs + 1): the propagation delay.
    base_rtt: u32,
}

impl Default for Vegas {
    fn default() -> Self {
        Vegas {
            beg_snd_nxt: 0,
            doing_vegas_now: true,
            cnt_rtt: 0,
            min_rtt: 0x7fff_ffff,
            base_rtt: 0x7fff_ffff,
        }
    }
}

impl Vegas {
    /// BaseRTT in µs (u32::MAX-ish before any sample).
    pub fn base_rtt_us(&self) -> u32 {
        self.base_rtt
    }

    /// Whether Vegas (rather than the Reno fallback) is in charge.
    pub fn enabled(&self) -> bool {
        self.doing_vegas_now
    }

    /// `vegas_enable`: start a fresh round of samples at the next send.
    fn enable(&mut self, c: &Conn) {
        self.doing_vegas_now = true;
        self.beg_snd_nxt = c.snd_nxt;
        self.cnt_rtt = 0;
        self.min_rtt = 0x7fff_ffff;
    }

    /// `tcp_vegas_ssthresh`: the smaller of ssthresh and cwnd.
    fn vegas_ssthresh(c: &Conn) -> u32 {
        c.ssthresh.min(c.cwnd)
    }
}

impl CongestionControl for Vegas {
    fn name(&self) -> &'static str {
        "vegas"
    }

    fn init(&mut self, c: &mut Conn) {
        self.base_rtt = 0x7fff_ffff;
        self.enable(c);
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        (c.cwnd >> 1).max(2) // tcp_reno_ssthresh
    }

    fn pkts_acked(&mut self, _c: &mut Conn, s: &AckSample) {
        if s.rtt_us < 0 {
            return;
        }
        // +1 so that neither RTT can be zero.
        let vrtt = (s.rtt_us as u64 + 1).min(u32::MAX as u64) as u32;
        self.base_rtt = self.base_rtt.min(vrtt);
        self.min_rtt = self.min_rtt.min(vrtt);
        self.cnt_rtt += 1;
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        // Samples taken during loss recovery describe a different window.
        if new_state == CaState::Open {
            self.enable(c);
        } else {
            self.doing_vegas_now = false;
        }
    }

    fn cwnd_event(&mut self, c: &mut Conn, ev: CaEvent) {
        // Restarting after idle: everything Vegas knew about the round is stale.
        if ev == CaEvent::TxStart {
            self.init(c);
        }
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !self.doing_vegas_now {
            Reno::default().cong_avoid(c, acked);
            return;
        }
        // `ack` in Linux is the new snd_una.
        if c.snd_una > self.beg_snd_nxt {
            // One RTT has passed: decide, then start the next round.
            self.beg_snd_nxt = c.snd_nxt;
            if self.cnt_rtt <= 2 {
                // Too few samples to trust: probably only delayed ACKs.
                Reno::default().cong_avoid(c, acked);
            } else {
                let rtt = self.min_rtt as u64;
                let base = self.base_rtt as u64;
                let cwnd = c.cwnd as u64;
                let target_cwnd = cwnd * base / rtt;
                let diff = (cwnd * (rtt - base) / base) as u32;
                if diff > GAMMA && c.in_slow_start() {
                    // Going too fast: match the actual rate, leave slow start
                    // (+1 because the division truncates).
                    c.cwnd = c.cwnd.min(target_cwnd as u32 + 1);
                    c.ssthresh = Self::vegas_ssthresh(c);
                } else if c.in_slow_start() {
                    c.slow_start(acked);
                } else if diff > BETA {
                    c.cwnd -= 1;
                    c.ssthresh = Self::vegas_ssthresh(c);
                } else if diff < ALPHA {
                    c.cwnd += 1;
                }
                c.cwnd = c.cwnd.clamp(2, c.cwnd_clamp.max(2));
                c.ssthresh = current_ssthresh(c);
            }
            self.cnt_rtt = 0;
            self.min_rtt = 0x7fff_ffff;
        } else if c.in_slow_start() {
            c.slow_start(acked);
        }
    }

    fn report(&self, c: &Conn) -> CcaReport {
        if !self.doing_vegas_now {
            return CcaReport { state: "reno", bw_est_bps: None };
        }
        CcaReport::window(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{one_segment_acked, QueuePipe, MSS};

    /// A single Vegas flow through a FIFO bottleneck of `bdp` segments per
    /// base RTT.
    fn pipe(base_us: u64, bdp: u32) -> QueuePipe<Vegas> {
        QueuePipe::new(Vegas::default(), base_us, bdp)
    }

    #[test]
    fn keeps_between_alpha_and_beta_packets_queued() {
        for (base_us, bdp) in [(20_000, 100), (10_000, 40), (50_000, 400)] {
            let mut p = pipe(base_us, bdp);
            for _ in 0..4 * bdp {
                p.round();
            }
            assert!(!p.c.in_slow_start());
            // Settled: diff = cwnd·(1 − base/rtt) stays within [α, β]
            // (±1 for the integer arithmetic and the per-RTT step).
            for _ in 0..50 {
                let rtt = p.round() as f64;
                let diff = p.c.cwnd as f64 * (1.0 - (base_us as f64 + 1.0) / (rtt + 1.0));
                assert!(
                    (ALPHA as f64 - 1.0..=BETA as f64 + 1.0).contains(&diff),
                    "bdp {bdp}: cwnd {} rtt {rtt} diff {diff}",
                    p.c.cwnd
                );
                let queued = p.c.cwnd as i64 - bdp as i64;
                assert!(
                    (ALPHA as i64 - 1..=BETA as i64 + 1).contains(&queued),
                    "bdp {bdp}: {queued} queued"
                );
            }
        }
    }

    #[test]
    fn leaves_slow_start_when_a_queue_builds() {
        let mut p = pipe(20_000, 100);
        let mut rounds = 0;
        while p.c.in_slow_start() {
            p.round();
            rounds += 1;
            assert!(rounds < 20);
        }
        // The minimum RTT of a slow-start round lags the queue by a round,
        // so Vegas notices the queue a round or two after the pipe fills,
        // and then sets cwnd from the actual rate rather than doubling on.
        assert!((100..=4 * 100).contains(&p.c.cwnd), "cwnd {}", p.c.cwnd);
        assert!(p.c.ssthresh <= p.c.cwnd);
    }

    #[test]
    fn behaves_like_reno_with_too_few_samples() {
        let mut v = Vegas::default();
        let mut c = Conn::new(1448, 20);
        c.ssthresh = 20;
        v.init(&mut c);
        c.snd_nxt = 20 * MSS;
        // Two samples only, then the round ends: Reno AI, not a Vegas step.
        for _ in 0..2 {
            v.pkts_acked(&mut c, &one_segment_acked(30_000, 20));
        }
        c.snd_una = 21 * MSS;
        c.cwnd_cnt = 19;
        c.is_cwnd_limited_flag = true;
        v.cong_avoid(&mut c, 1);
        assert_eq!(c.cwnd, 21);
    }

    #[test]
    fn disabled_outside_open_and_reenabled_after() {
        let mut v = Vegas::default();
        let mut c = Conn::new(1448, 20);
        v.init(&mut c);
        v.set_state(&mut c, CaState::Recovery);
        assert!(!v.enabled());
        assert_eq!(v.report(&c).state, "reno");
        v.set_state(&mut c, CaState::Open);
        assert!(v.enabled());
        assert_eq!(v.ssthresh(&mut c), 10);
    }

    #[test]
    fn base_rtt_is_the_minimum_sample() {
        let mut v = Vegas::default();
        let mut c = Conn::new(1448, 20);
        v.init(&mut c);
        for r in [30_000, 20_000, 25_000, -1] {
            v.pkts_acked(&mut c, &one_segment_acked(r, 20));
        }
        assert_eq!(v.base_rtt_us(), 20_001);
    }
}
