//! TCP Reno / NewReno congestion avoidance, as Linux's built-in `reno`
//! (`tcp_reno_cong_avoid`, `tcp_reno_ssthresh`, `tcp_reno_undo_cwnd` in
//! net/ipv4/tcp_cong.c; RFC 5681).
//!
//! Slow start grows cwnd by one segment per acked segment up to ssthresh
//! (Linux's ABC with L = acked, no byte counting); congestion avoidance adds
//! one segment per cwnd acked segments; a loss halves the window (floor 2).
//! Loss recovery itself (PRR, RTO) is the engine's business.

use super::{CongestionControl, Conn};

#[derive(Clone, Debug, Default)]
pub struct Reno {}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        // Multiplicative decrease by 1/2, never below 2 segments.
        (c.cwnd >> 1).max(2)
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        // Growing a window the sender does not use would only let it burst
        // later (RFC 7661); Linux checks this in the CCA itself.
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
        // Whatever slow start did not consume crosses into AI at 1/cwnd.
        let w = c.cwnd;
        c.cong_avoid_ai(w, acked);
    }

    // undo_cwnd: the trait default is Linux's tcp_reno_undo_cwnd,
    // max(cwnd, prior_cwnd); report: the trait default (slow_start /
    // cong_avoid).
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::acks;
    use crate::cc::CaState;

    /// One RTT of ACKs for a cwnd-limited flow: every segment of the current
    /// window is acked individually.
    fn one_rtt(r: &mut Reno, c: &mut Conn) {
        let w = c.cwnd;
        acks(r, c, w);
    }

    #[test]
    fn slow_start_doubles_per_rtt() {
        let mut r = Reno::default();
        let mut c = Conn::new(1448, 10);
        r.init(&mut c);
        for expect in [20, 40, 80, 160] {
            one_rtt(&mut r, &mut c);
            assert_eq!(c.cwnd, expect);
            assert_eq!(r.report(&c).state, "slow_start");
        }
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_carries_over() {
        let mut r = Reno::default();
        let mut c = Conn::new(1448, 10);
        c.ssthresh = 15;
        c.max_packets_out = 10;
        // 8 segments acked at once: 5 take cwnd to ssthresh, 3 go to AI.
        r.cong_avoid(&mut c, 8);
        assert_eq!(c.cwnd, 15);
        assert_eq!(c.cwnd_cnt, 3);
        assert_eq!(r.report(&c).state, "cong_avoid");
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_rtt() {
        let mut r = Reno::default();
        let mut c = Conn::new(1448, 50);
        c.ssthresh = 50;
        for i in 1..=20 {
            one_rtt(&mut r, &mut c);
            assert_eq!(c.cwnd, 50 + i, "after {i} RTTs");
        }
        assert_eq!(r.report(&c).state, "cong_avoid");
    }

    #[test]
    fn no_growth_when_not_cwnd_limited() {
        let mut r = Reno::default();
        let mut c = Conn::new(1448, 10);
        c.max_packets_out = 4; // slow start: cwnd 10 >= 2 * 4
        r.cong_avoid(&mut c, 5);
        assert_eq!(c.cwnd, 10);
        c.ssthresh = 10;
        c.is_cwnd_limited_flag = false;
        for _ in 0..100 {
            r.cong_avoid(&mut c, 1);
        }
        assert_eq!(c.cwnd, 10);
    }

    #[test]
    fn ssthresh_halves_with_floor_of_two() {
        let mut r = Reno::default();
        let mut c = Conn::new(1448, 100);
        assert_eq!(r.ssthresh(&mut c), 50);
        c.cwnd = 101;
        assert_eq!(r.ssthresh(&mut c), 50);
        c.cwnd = 3;
        assert_eq!(r.ssthresh(&mut c), 2);
        c.cwnd = 1;
        assert_eq!(r.ssthresh(&mut c), 2);
    }

    #[test]
    fn undo_restores_prior_cwnd() {
        let mut r = Reno::default();
        let mut c = Conn::new(1448, 100);
        let ss = r.ssthresh(&mut c);
        c.prior_cwnd = c.cwnd;
        c.ssthresh = ss;
        r.set_state(&mut c, CaState::Recovery);
        c.cwnd = ss;
        assert_eq!(r.undo_cwnd(&mut c), 100);
    }
}
