//! TCP NewReno (RFC 6582) on RFC 5681 congestion control, as a CCA.
//!
//! Linux has no module of this name: its built-in `reno` *is* NewReno once
//! combined with the stack's loss recovery. This model keeps the RFC's
//! choices where they differ from Linux's `reno`, so that studies naming
//! "newreno" (e.g. Cebinae's ns-3 rows) get the RFC algorithm:
//!
//! * slow start: cwnd += min(N, L) per ACK with Appropriate Byte Counting's
//!   limit L = 2 segments (RFC 3465 §2.2, allowed by RFC 5681 §3.1); Linux
//!   lets a stretch ACK open cwnd by everything it acked;
//! * congestion avoidance: one segment per cwnd of acked segments (RFC 5681's
//!   recommended byte counting) — the same as Linux;
//! * on loss, ssthresh = max(FlightSize / 2, 2) segments (RFC 5681 eq. 4,
//!   RFC 6582 §3.2 step 2); Linux's reno halves cwnd instead. For a
//!   cwnd-limited flow FlightSize = cwnd and the two agree.
//!
//! What is the engine's, not the CCA's (crate::tcp::sender): detecting loss
//! by three duplicate ACKs, retransmitting the first hole, treating partial
//! ACKs by retransmitting the next hole and staying in recovery until
//! `recover` (= snd_nxt at entry, the engine's `high_seq`) is acknowledged
//! (RFC 6582 §3.2 steps 1–5, used when SACK is off), setting cwnd to
//! ssthresh on the full ACK (§3.2 step 3, option 2), and the RTO. Where the
//! RFC inflates and deflates cwnd by dupacks, the engine paces the
//! recovery with PRR (RFC 6937) like Linux; the window at exit is the same.

use super::{CongestionControl, Conn};

/// RFC 3465 L: at most this many segments of growth per ACK in slow start.
const ABC_LIMIT: u32 = 2;

#[derive(Clone, Debug, Default)]
pub struct NewReno {}

impl CongestionControl for NewReno {
    fn name(&self) -> &'static str {
        "newreno"
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        // FlightSize is the data sent and not yet cumulatively acked.
        (c.packets_out / 2).max(2)
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        if !c.is_cwnd_limited() {
            return; // RFC 7661: do not grow a window the sender does not use
        }
        if c.in_slow_start() {
            let allowed = acked.min(ABC_LIMIT);
            let before = c.cwnd;
            c.cwnd = (before + allowed).min(c.ssthresh).min(c.cwnd_clamp);
            // The part of the allowance that ssthresh cut off counts towards
            // AI, as in Linux's tcp_slow_start.
            let left = allowed - (c.cwnd - before).min(allowed);
            if c.in_slow_start() || left == 0 {
                return;
            }
            let w = c.cwnd;
            c.cong_avoid_ai(w, left);
            return;
        }
        let w = c.cwnd;
        c.cong_avoid_ai(w, acked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testutil::{acks, cwnd_limited};

    /// One RTT of delayed ACKs (two segments each).
    fn one_rtt(r: &mut NewReno, c: &mut Conn) {
        let w = c.cwnd;
        for _ in 0..w / 2 {
            cwnd_limited(c);
            r.cong_avoid(c, 2);
        }
    }

    #[test]
    fn slow_start_doubles_per_rtt_with_delayed_acks() {
        let mut r = NewReno::default();
        let mut c = Conn::new(1448, 10);
        for expect in [20, 40, 80] {
            one_rtt(&mut r, &mut c);
            assert_eq!(c.cwnd, expect);
        }
    }

    #[test]
    fn stretch_acks_are_limited_to_two_segments_in_slow_start() {
        let mut r = NewReno::default();
        let mut c = Conn::new(1448, 10);
        cwnd_limited(&mut c);
        r.cong_avoid(&mut c, 8);
        assert_eq!(c.cwnd, 12);
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_rtt() {
        let mut r = NewReno::default();
        let mut c = Conn::new(1448, 60);
        c.ssthresh = 60;
        for i in 1..=10 {
            let w = c.cwnd;
            acks(&mut r, &mut c, w);
            assert_eq!(c.cwnd, 60 + i);
        }
    }

    #[test]
    fn halves_on_loss() {
        let mut r = NewReno::default();
        let mut c = Conn::new(1448, 100);
        cwnd_limited(&mut c);
        assert_eq!(r.ssthresh(&mut c), 50);
        // FlightSize, not cwnd: an application-limited flow with 30 out.
        c.packets_out = 30;
        assert_eq!(r.ssthresh(&mut c), 15);
        c.packets_out = 3;
        assert_eq!(r.ssthresh(&mut c), 2);
    }

    #[test]
    fn sawtooth_halves_then_grows_linearly() {
        let mut r = NewReno::default();
        let mut c = Conn::new(1448, 80);
        c.ssthresh = 80;
        cwnd_limited(&mut c);
        // Loss: the engine stores ssthresh and, at the end of recovery, sets
        // cwnd to it.
        c.ssthresh = r.ssthresh(&mut c);
        c.cwnd = c.ssthresh;
        assert_eq!(c.cwnd, 40);
        assert_eq!(r.report(&c).state, "cong_avoid");
        for _ in 0..40 {
            let w = c.cwnd;
            acks(&mut r, &mut c, w);
        }
        assert_eq!(c.cwnd, 80);
    }
}
