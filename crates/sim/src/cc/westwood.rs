//! TCP Westwood+ (Mascolo, Casetti, Gerla et al., "TCP Westwood: bandwidth
//! estimation for TCP", MobiCom 2001; Grieco & Mascolo, "Performance
//! evaluation and comparison of Westwood+, New Reno, and Vegas TCP", CCR
//! 2004) with the behaviour of Linux's net/ipv4/tcp_westwood.c.
//!
//! Growth is Reno's. Westwood+ counts the bytes acknowledged over each RTT
//! (at least 50 ms) and passes that rate sample through two cascaded
//! low-pass filters (7/8 old + 1/8 new) to get the bandwidth estimate BWE.
//! After a loss it sets ssthresh — and, at the end of fast recovery, cwnd —
//! to BWE · RTT_min / MSS: the window that would fill the pipe without a
//! queue, instead of blindly halving. During recovery itself ssthresh is
//! Reno's half (Linux's `ssthresh` hook is tcp_reno_ssthresh; the BWE
//! window is applied by the CA_EVENT_COMPLETE_CWR and CA_EVENT_LOSS events).
//!
//! Units as Linux: BWE in bytes per jiffy (HZ = 1000), RTTs in jiffies.
//! The acked byte count comes from `snd_una` on fast-path ACKs and, on
//! slow-path ACKs (`ACK_SLOWPATH`), from Linux's duplicate/delayed-ACK
//! accounting (`westwood_acked_count`). The engine currently flags no ACK
//! as slow-path, so every ACK counts the cumulative advance only: the same
//! bytes over an RTT, credited when the hole is filled rather than per
//! duplicate ACK.

use super::reno::Reno;
use super::util::{jiffies, usecs_to_jiffies};
use super::{AckSample, CaEvent, CcaReport, CongestionControl, Conn, ACK_SLOWPATH};

/// Shortest bandwidth-sampling window: 50 ms (HZ / 20 jiffies).
const RTT_MIN_WINDOW_DIV: u64 = 20;
/// RTT assumed before the first sample: deliberately huge (20 s).
const INIT_RTT_SEC: u64 = 20;

#[derive(Clone, Debug)]
pub struct Westwood {
    /// First filter stage and the estimate (bytes per jiffy).
    bw_ns_est: u64,
    bw_est: u64,
    /// Start of the current sampling window (jiffies).
    rtt_win_sx: u64,
    /// Bytes acknowledged in the current window.
    bk: u64,
    /// snd_una at the last ACK.
    snd_una: u64,
    cumul_ack: u64,
    /// Bytes already counted through duplicate ACKs.
    accounted: u64,
    /// Latest RTT and minimum RTT (jiffies).
    rtt: u64,
    rtt_min: u64,
    first_ack: bool,
    reset_rtt_min: bool,
    /// CONFIG_HZ of the connection (jiffies per second), set at init.
    hz: u64,
}

impl Default for Westwood {
    fn default() -> Self {
        Westwood {
            bw_ns_est: 0,
            bw_est: 0,
            rtt_win_sx: 0,
            bk: 0,
            snd_una: 0,
            cumul_ack: 0,
            accounted: 0,
            rtt: INIT_RTT_SEC * 1000,
            rtt_min: INIT_RTT_SEC * 1000,
            first_ack: true,
            reset_rtt_min: true,
            hz: 1000,
        }
    }
}

/// One low-pass stage: 7/8 old + 1/8 new.
fn do_filter(a: u64, b: u64) -> u64 {
    (7 * a + b) >> 3
}

impl Westwood {
    /// Bandwidth estimate in bytes per second.
    pub fn bw_bytes_per_sec(&self) -> f64 {
        self.bw_est as f64 * self.hz as f64
    }

    /// Minimum RTT in µs.
    pub fn rtt_min_us(&self) -> u64 {
        self.rtt_min * 1_000_000 / self.hz
    }

    /// `tcp_westwood_bw_rttmin`: BWE · RTT_min in segments, at least 2.
    pub fn bw_rttmin(&self, c: &Conn) -> u32 {
        ((self.bw_est * self.rtt_min) / c.mss.max(1) as u64).clamp(2, u32::MAX as u64) as u32
    }

    fn filter(&mut self, delta: u64) {
        let sample = self.bk / delta;
        if self.bw_ns_est == 0 && self.bw_est == 0 {
            // Empty filter: take the first sample as it is.
            self.bw_ns_est = sample;
            self.bw_est = sample;
        } else {
            self.bw_ns_est = do_filter(self.bw_ns_est, sample);
            self.bw_est = do_filter(self.bw_est, self.bw_ns_est);
        }
    }

    /// Close the sampling window when an RTT (≥ 50 ms) has passed.
    fn update_window(&mut self, c: &Conn) {
        let now = jiffies(c);
        let delta = now.saturating_sub(self.rtt_win_sx);
        if self.first_ack {
            // The first sample starts at the first ACK, not at init.
            self.snd_una = c.snd_una;
            self.first_ack = false;
        }
        if self.rtt > 0 && delta > self.rtt.max(self.hz / RTT_MIN_WINDOW_DIV) {
            self.filter(delta);
            self.bk = 0;
            self.rtt_win_sx = now;
        }
    }

    fn update_rtt_min(&mut self) {
        if self.reset_rtt_min {
            self.rtt_min = self.rtt;
            self.reset_rtt_min = false;
        } else {
            self.rtt_min = self.rtt_min.min(self.rtt);
        }
    }

    /// Bytes this (slow-path) ACK stands for: a duplicate ACK counts one MSS
    /// now and is subtracted again from the cumulative ACK that follows.
    fn acked_count(&mut self, c: &Conn) -> u64 {
        let mss = c.mss as u64;
        self.cumul_ack = c.snd_una - self.snd_una;
        if self.cumul_ack == 0 {
            self.accounted += mss;
            self.cumul_ack = mss;
        }
        if self.cumul_ack > mss {
            if self.accounted >= self.cumul_ack {
                self.accounted -= self.cumul_ack;
                self.cumul_ack = mss;
            } else {
                self.cumul_ack -= self.accounted;
                self.accounted = 0;
            }
        }
        self.snd_una = c.snd_una;
        self.cumul_ack
    }
}

impl CongestionControl for Westwood {
    fn name(&self) -> &'static str {
        "westwood"
    }

    fn init(&mut self, c: &mut Conn) {
        *self = Westwood { hz: c.hz, rtt: INIT_RTT_SEC * c.hz, rtt_min: INIT_RTT_SEC * c.hz, ..Westwood::default() };
        self.rtt_win_sx = jiffies(c);
        self.snd_una = c.snd_una;
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        (c.cwnd >> 1).max(2) // tcp_reno_ssthresh
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        Reno::default().cong_avoid(c, acked);
    }

    fn pkts_acked(&mut self, c: &mut Conn, s: &AckSample) {
        if s.rtt_us > 0 {
            self.rtt = usecs_to_jiffies(c, s.rtt_us as u64);
        }
    }

    fn in_ack_event(&mut self, c: &mut Conn, flags: u32) {
        self.update_window(c);
        if flags & ACK_SLOWPATH != 0 {
            let n = self.acked_count(c);
            self.bk += n;
        } else {
            // Fast path: an in-order cumulative ACK.
            self.bk += c.snd_una - self.snd_una;
            self.snd_una = c.snd_una;
        }
        self.update_rtt_min();
    }

    fn cwnd_event(&mut self, c: &mut Conn, ev: CaEvent) {
        match ev {
            CaEvent::CompleteCwr => {
                // End of recovery: the pipe-sized window, not half.
                c.ssthresh = self.bw_rttmin(c);
                c.cwnd = c.ssthresh;
            }
            CaEvent::Loss => {
                c.ssthresh = self.bw_rttmin(c);
                // The path may have changed: relearn RTT_min from the next ACK.
                self.reset_rtt_min = true;
            }
            _ => {}
        }
    }

    fn report(&self, c: &Conn) -> CcaReport {
        CcaReport { bw_est_bps: Some(self.bw_bytes_per_sec() * 8.0), ..CcaReport::window(c) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::MSS;

    /// Drive Westwood with fast-path ACKs of `per_ack` segments at a steady
    /// `rate_bps` for `secs`, each ACK carrying `rtt_us`.
    fn run(w: &mut Westwood, c: &mut Conn, rate_bps: f64, rtt_us: u64, secs: f64, per_ack: u64) {
        let gap_us = (per_ack * MSS) as f64 * 8.0 / rate_bps * 1e6;
        let n = (secs * 1e6 / gap_us) as u64;
        let start = c.now_us;
        for k in 1..=n {
            c.now_us = start + (k as f64 * gap_us) as u64;
            c.snd_una += per_ack * MSS;
            w.pkts_acked(
                c,
                &AckSample {
                    pkts_acked: per_ack as u32,
                    rtt_us: rtt_us as i64,
                    in_flight: 100,
                },
            );
            w.in_ack_event(c, 0);
        }
    }

    #[test]
    fn estimates_the_delivery_rate() {
        let mut w = Westwood::default();
        let mut c = Conn::new(MSS as u32, 10);
        w.init(&mut c);
        run(&mut w, &mut c, 100e6, 20_000, 5.0, 2);
        let bw = w.bw_bytes_per_sec() * 8.0;
        assert!(
            (bw / 100e6 - 1.0).abs() < 0.03,
            "BWE {:.1} Mbit/s",
            bw / 1e6
        );
        assert_eq!(w.rtt_min_us(), 20_000);
        assert!(w.report(&c).bw_est_bps.unwrap() > 90e6);
    }

    #[test]
    fn ssthresh_after_loss_is_bwe_times_rtt_min() {
        for (rate, rtt_us) in [(100e6, 20_000u64), (10e6, 100_000), (50e6, 60_000)] {
            let mut w = Westwood::default();
            let mut c = Conn::new(MSS as u32, 10);
            w.init(&mut c);
            run(&mut w, &mut c, rate, rtt_us, 8.0, 2);
            let bdp = rate / 8.0 * rtt_us as f64 / 1e6 / MSS as f64;
            // Fast recovery: Reno's half first ...
            c.cwnd = (2.0 * bdp) as u32;
            c.ssthresh = w.ssthresh(&mut c);
            assert_eq!(c.ssthresh, c.cwnd / 2);
            // ... then, when recovery completes, the BWE window.
            c.cwnd = c.ssthresh;
            w.cwnd_event(&mut c, CaEvent::CompleteCwr);
            let ss = c.ssthresh as f64;
            assert!(
                (ss / bdp - 1.0).abs() < 0.04,
                "rate {rate} rtt {rtt_us}: ssthresh {ss} BDP {bdp:.1}"
            );
            assert_eq!(c.cwnd, c.ssthresh);
            // RTO: ssthresh from BWE too, and RTT_min relearned.
            c.ssthresh = 2;
            w.cwnd_event(&mut c, CaEvent::Loss);
            assert!((c.ssthresh as f64 / bdp - 1.0).abs() < 0.04);
        }
    }

    #[test]
    fn queueing_does_not_inflate_the_window() {
        // RTT_min is the propagation delay even while ACKs come back late.
        let mut w = Westwood::default();
        let mut c = Conn::new(MSS as u32, 10);
        w.init(&mut c);
        run(&mut w, &mut c, 100e6, 20_000, 1.0, 2);
        run(&mut w, &mut c, 100e6, 40_000, 5.0, 2);
        w.cwnd_event(&mut c, CaEvent::CompleteCwr);
        let bdp = 100e6 / 8.0 * 0.020 / MSS as f64;
        assert!(
            (c.ssthresh as f64 / bdp - 1.0).abs() < 0.04,
            "ssthresh {}",
            c.ssthresh
        );
    }

    #[test]
    fn slow_path_counts_duplicate_acks_once() {
        let mut w = Westwood::default();
        let mut c = Conn::new(MSS as u32, 10);
        w.init(&mut c);
        c.snd_una = 10 * MSS;
        w.in_ack_event(&mut c, 0);
        let base = w.bk;
        // Three dupacks count one MSS each ...
        for _ in 0..3 {
            w.in_ack_event(&mut c, ACK_SLOWPATH);
        }
        assert_eq!(w.bk - base, 3 * MSS);
        // ... and the cumulative ACK that covers them (5 segments) adds the rest.
        c.snd_una += 5 * MSS;
        w.in_ack_event(&mut c, ACK_SLOWPATH);
        assert_eq!(w.bk - base, 5 * MSS);
    }

    #[test]
    fn minimum_window_is_two() {
        let w = Westwood::default();
        let c = Conn::new(MSS as u32, 10);
        assert_eq!(w.bw_rttmin(&c), 2);
    }
}
