//! RACK loss detection (RFC 8985, as Linux's tcp_recovery.c): remember the
//! most recently sent segment known to be delivered; a segment sent before
//! it is lost once that segment's RTT plus a reordering window has passed
//! since it was sent. The walk over the retransmit queue stays with the
//! sender, which owns the queue.

use crate::cc::CaState;
use netcore::{Nanos, NS_PER_US};

/// Linux `tcp_reordering` default: the dupack threshold.
pub const DUPTHRESH: u32 = 3;

#[derive(Clone, Debug, Default)]
pub struct Rack {
    /// Send time and end sequence of the most recently sent delivered
    /// segment, and the RTT it measured (Linux `tp->rack`).
    xmit_ns: Nanos,
    end_seq: u64,
    rtt_ns: Nanos,
    valid: bool,
}

impl Rack {
    /// Whether a delivered segment has been seen yet.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// `tcp_rack_advance`: a segment sent at `sent_ns` and ending at
    /// `end_seq` was delivered at `now`. A retransmission acked faster than
    /// the min RTT was probably the original's delivery and is skipped.
    pub fn advance(&mut self, sent_ns: Nanos, end_seq: u64, retrans: bool, now: Nanos, min_rtt_us: u32) {
        let rtt = now.saturating_sub(sent_ns);
        if retrans && rtt < min_rtt_us as u64 * NS_PER_US {
            return;
        }
        if !self.valid || (sent_ns, end_seq) > (self.xmit_ns, self.end_seq) {
            self.valid = true;
            self.xmit_ns = sent_ns;
            self.end_seq = end_seq;
            self.rtt_ns = rtt;
        }
    }

    /// `tcp_rack_reo_wnd` without observed reordering: none in recovery or
    /// once DUPTHRESH segments are sacked, else min_rtt/4 (at most srtt).
    pub fn reo_wnd(ca_state: CaState, sacked_out: u32, min_rtt_us: u32, srtt_ns: Nanos) -> Nanos {
        if matches!(ca_state, CaState::Recovery | CaState::Loss) || sacked_out >= DUPTHRESH {
            0
        } else {
            (min_rtt_us as u64 * NS_PER_US / 4).min(srtt_ns)
        }
    }

    /// A segment sent at `sent_ns` has been out longer than the RACK RTT
    /// (`tcp_rack_skb_timeout` <= 0 with no reordering window): an RTO
    /// marks it lost. Without any RTT yet, everything has.
    pub fn timed_out(&self, sent_ns: Nanos, now: Nanos) -> bool {
        sent_ns + self.rtt_ns <= now
    }

    /// When a segment sent at `sent_ns`, ending at `end_seq`, counts as lost
    /// (`tcp_rack_detect_loss`); `None` if it was not sent before the
    /// newest delivered segment, so RACK cannot judge it yet.
    pub fn deadline(&self, sent_ns: Nanos, end_seq: u64, reo_wnd: Nanos) -> Option<Nanos> {
        if (sent_ns, end_seq) >= (self.xmit_ns, self.end_seq) {
            return None;
        }
        Some(sent_ns + self.rtt_ns + reo_wnd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn segment_sent_before_the_newest_delivered_one_is_lost_after_its_rtt() {
        let mut r = Rack::default();
        assert!(!r.valid());
        // Segment 2 (sent at 1 ms) delivered at 11 ms: RTT 10 ms.
        r.advance(MS, 2000, false, 11 * MS, 10_000);
        assert!(r.valid());
        // Segment 1, sent at 0, is judged against 10 ms + the window.
        assert_eq!(r.deadline(0, 1000, 2 * MS), Some(12 * MS));
        // Segments sent at or after it cannot be judged.
        assert_eq!(r.deadline(MS, 2000, 0), None);
        assert_eq!(r.deadline(2 * MS, 3000, 0), None);
    }

    #[test]
    fn only_newer_transmissions_advance_and_fast_retransmit_acks_are_ignored() {
        let mut r = Rack::default();
        r.advance(5 * MS, 6000, false, 15 * MS, 10_000);
        // An older segment delivered later does not move RACK back.
        r.advance(2 * MS, 3000, false, 16 * MS, 10_000);
        assert_eq!(r.deadline(4 * MS, 5000, 0), Some(14 * MS));
        // A retransmission "acked" 1 ms after it was sent: the original's ACK.
        r.advance(20 * MS, 7000, true, 21 * MS, 10_000);
        assert_eq!(r.deadline(6 * MS, 6500, 0), None);
        assert_eq!(r.deadline(4 * MS, 5000, 0), Some(14 * MS));
    }

    #[test]
    fn timeout_marks_only_what_has_been_out_longer_than_the_rtt() {
        let mut r = Rack::default();
        assert!(r.timed_out(5 * MS, 5 * MS));
        r.advance(0, 1000, false, 10 * MS, 10_000);
        assert!(r.timed_out(5 * MS, 15 * MS));
        assert!(!r.timed_out(6 * MS, 15 * MS));
    }

    #[test]
    fn reordering_window() {
        assert_eq!(Rack::reo_wnd(CaState::Open, 0, 8_000, 100 * MS), 2 * MS);
        assert_eq!(Rack::reo_wnd(CaState::Open, 0, 8_000, MS), MS);
        assert_eq!(Rack::reo_wnd(CaState::Disorder, DUPTHRESH, 8_000, 100 * MS), 0);
        assert_eq!(Rack::reo_wnd(CaState::Recovery, 0, 8_000, 100 * MS), 0);
    }
}
