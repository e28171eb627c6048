//! RACK loss detection (RFC 8985, as Linux's tcp_recovery.c): remember the
//! most recently sent segment known to be delivered; a segment sent before
//! it is lost once that segment's RTT plus a reordering window has passed
//! since it was sent. The walk over the retransmit queue stays with the
//! sender, which owns the queue.
//!
//! Also the reordering the connection has observed (tcp_input.c's
//! `tp->reordering`, `tp->reord_seen`), which widens RACK's window, and
//! the window's adaptation to D-SACKs (`tcp_rack_update_reo_wnd`).

use crate::cc::CaState;
use netcore::{Nanos, NS_PER_US};

/// Linux `sysctl_tcp_reordering` (default 3): the initial reordering degree
/// and dupack threshold.
pub const DUPTHRESH: u32 = 3;
/// Linux `sysctl_tcp_max_reordering`: the cap on the learnt degree.
const MAX_REORDERING: u32 = 300;
/// Linux TCP_RACK_RECOVERY_THRESH: recoveries a widened window persists.
const RECOVERY_THRESH: u8 = 16;

/// The reordering the connection has seen (Linux `tp->reordering` and
/// `tp->reord_seen`): the degree in segments is the dupack threshold, and
/// any reordering at all gives RACK a window even in recovery.
#[derive(Clone, Debug)]
pub struct Reordering {
    /// Degree of reordering in segments (`tp->reordering`).
    pub degree: u32,
    /// Reordering events seen (`tp->reord_seen`).
    pub seen: u32,
}

impl Default for Reordering {
    fn default() -> Self {
        Reordering { degree: DUPTHRESH, seen: 0 }
    }
}

impl Reordering {
    /// `tcp_check_sack_reordering`: a never-retransmitted segment starting
    /// at `low_seq` was delivered after data up to `fack` (the highest
    /// SACKed sequence): the distance is the degree of reordering, in
    /// whole segments, never lowered here and capped at MAX_REORDERING.
    pub fn check(&mut self, low_seq: u64, fack: u64, mss: u32) {
        if low_seq >= fack {
            return;
        }
        let metric = fack - low_seq;
        if metric > self.degree as u64 * mss as u64 {
            self.degree = metric.div_ceil(mss as u64).min(MAX_REORDERING as u64) as u32;
        }
        self.seen += 1;
    }

    /// `tcp_enter_loss`: a timeout in Open or Disorder with at least the
    /// default threshold of segments sacked suggests the degree was
    /// overestimated; back to at most the default.
    pub fn on_timeout(&mut self, ca_state: CaState, sacked_out: u32) {
        if ca_state <= CaState::Disorder && sacked_out >= DUPTHRESH {
            self.degree = self.degree.min(DUPTHRESH);
        }
    }

    /// `tcp_may_raise_cwnd`: with more reordering than the default, SACKed
    /// data also grows cwnd, not only data that advances snd_una.
    pub fn sacks_raise_cwnd(&self) -> bool {
        self.degree > DUPTHRESH
    }
}

#[derive(Clone, Debug)]
pub struct Rack {
    /// Send time and end sequence of the most recently sent delivered
    /// segment, and the RTT it measured (Linux `tp->rack`).
    xmit_ns: Nanos,
    end_seq: u64,
    rtt_ns: Nanos,
    valid: bool,
    /// A delivered segment was accepted since loss detection last ran on
    /// an ACK (`tp->rack.advanced`).
    advanced: bool,
    /// The reordering window in multiples of min_rtt/4 (`reo_wnd_steps`),
    /// recoveries it persists for without D-SACK (`reo_wnd_persist`), a
    /// D-SACK not yet acted on (`dsack_seen`) and `tp->delivered` when the
    /// window last grew (`last_delivered`).
    reo_wnd_steps: u8,
    reo_wnd_persist: u8,
    dsack_seen: bool,
    last_delivered: u64,
}

impl Default for Rack {
    fn default() -> Self {
        Rack {
            xmit_ns: 0,
            end_seq: 0,
            rtt_ns: 0,
            valid: false,
            advanced: false,
            reo_wnd_steps: 1,
            reo_wnd_persist: 0,
            dsack_seen: false,
            last_delivered: 0,
        }
    }
}

impl Rack {
    /// Whether a delivered segment has been seen yet.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// `tcp_rack_advance`: a segment sent at `sent_ns` and ending at
    /// `end_seq` was delivered at `now`. A retransmission acked faster than
    /// the min RTT was probably the original's delivery and is skipped.
    /// As in Linux 6.x, the RTT is that of the last segment processed (the
    /// sender calls this in Linux's order: newly SACKed segments in
    /// sequence order, then the cumulatively acked ones), while the send
    /// time and sequence only move forward: an ACK that SACKs new data and
    /// also cumulatively acks a segment that waited longer judges the
    /// others with the longer RTT.
    pub fn advance(&mut self, sent_ns: Nanos, end_seq: u64, retrans: bool, now: Nanos, min_rtt_us: u32) {
        let rtt = now.saturating_sub(sent_ns);
        if retrans && rtt < min_rtt_us as u64 * NS_PER_US {
            return;
        }
        self.rtt_ns = rtt;
        self.advanced = true;
        if !self.valid || (sent_ns, end_seq) > (self.xmit_ns, self.end_seq) {
            self.valid = true;
            self.xmit_ns = sent_ns;
            self.end_seq = end_seq;
        }
    }

    /// `tcp_rack_mark_lost`'s gate: whether a delivered segment was
    /// accepted (`advance`) since the last call, which clears it. Linux
    /// scans for losses on an ACK only then; the reordering timer scans
    /// regardless (`tcp_rack_reo_timeout`).
    pub fn take_advanced(&mut self) -> bool {
        std::mem::take(&mut self.advanced)
    }

    /// `tcp_rack_reo_wnd`: before any reordering is seen, none in recovery
    /// or once as many segments are sacked as the reordering degree (the
    /// dupack threshold); otherwise min_rtt/4 per step, at most srtt.
    pub fn reo_wnd(&self, reord: &Reordering, ca_state: CaState, sacked_out: u32, min_rtt_us: u32, srtt_ns: Nanos) -> Nanos {
        if reord.seen == 0 && (matches!(ca_state, CaState::Recovery | CaState::Loss) || sacked_out >= reord.degree) {
            return 0;
        }
        (min_rtt_us as u64 * NS_PER_US / 4 * self.reo_wnd_steps as u64).min(srtt_ns)
    }

    /// A D-SACK arrived (`tcp_dsack_seen`): once reordering has been seen,
    /// and unless it reports a loss probe (timer-driven, not RACK's doing),
    /// the spurious retransmission may be RACK's: widen the window on this
    /// ACK (`update_reo_wnd`).
    pub fn on_dsack(&mut self, reord: &Reordering, tlp: bool) {
        if reord.seen > 0 && !tlp {
            self.dsack_seen = true;
        }
    }

    /// `tcp_rack_update_reo_wnd`, once per ACK that delivered something
    /// (`prior_delivered` of its rate sample, 0 if none): a D-SACK widens
    /// the window by one step, at most once a round trip (only D-SACKs for
    /// data sent after the last widening count) and up to 255 steps, and
    /// keeps it for RECOVERY_THRESH recoveries; when they have passed
    /// without D-SACK the window is back to one step.
    pub fn update_reo_wnd(&mut self, prior_delivered: u64, delivered: u64) {
        if prior_delivered == 0 {
            return;
        }
        if prior_delivered < self.last_delivered {
            self.dsack_seen = false;
        }
        if self.dsack_seen {
            self.reo_wnd_steps = self.reo_wnd_steps.saturating_add(1);
            self.dsack_seen = false;
            self.last_delivered = delivered;
            self.reo_wnd_persist = RECOVERY_THRESH;
        } else if self.reo_wnd_persist == 0 {
            self.reo_wnd_steps = 1;
        }
    }

    /// A recovery ended without being undone (`tcp_try_undo_recovery`):
    /// one fewer recovery for a widened window to persist.
    pub fn recovery_kept(&mut self) {
        self.reo_wnd_persist = self.reo_wnd_persist.saturating_sub(1);
    }

    /// A recovery was undone by D-SACKs (`tcp_try_undo_dsack`): the window
    /// persists one recovery longer.
    pub fn dsack_undo(&mut self) {
        self.reo_wnd_persist = (self.reo_wnd_persist + 1).min(RECOVERY_THRESH);
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

    /// Linux 6.x `tcp_rack_advance`: the send time and sequence only move
    /// forward, but the RTT is the last delivered segment's, even an older
    /// one's (one ACK that SACKs new data and cumulatively acks old data
    /// leaves the old segment's longer RTT).
    #[test]
    fn only_newer_transmissions_advance_but_the_last_one_sets_the_rtt() {
        let mut r = Rack::default();
        r.advance(5 * MS, 6000, false, 15 * MS, 10_000);
        assert_eq!(r.deadline(4 * MS, 5000, 0), Some(14 * MS));
        // An older segment delivered later does not move RACK's send time
        // back (segment 5000 is still judged), but its 14 ms RTT counts.
        r.advance(2 * MS, 3000, false, 16 * MS, 10_000);
        assert_eq!(r.deadline(4 * MS, 5000, 0), Some(18 * MS));
        assert_eq!(r.deadline(5 * MS, 6000, 0), None);
        // A retransmission "acked" 1 ms after it was sent: the original's
        // ACK, ignored altogether.
        r.advance(20 * MS, 7000, true, 21 * MS, 10_000);
        assert_eq!(r.deadline(6 * MS, 6500, 0), None);
        assert_eq!(r.deadline(4 * MS, 5000, 0), Some(18 * MS));
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
        let (r, none) = (Rack::default(), Reordering::default());
        assert_eq!(r.reo_wnd(&none, CaState::Open, 0, 8_000, 100 * MS), 2 * MS);
        assert_eq!(r.reo_wnd(&none, CaState::Open, 0, 8_000, MS), MS);
        assert_eq!(r.reo_wnd(&none, CaState::Disorder, DUPTHRESH, 8_000, 100 * MS), 0);
        assert_eq!(r.reo_wnd(&none, CaState::Recovery, 0, 8_000, 100 * MS), 0);
        // Once reordering is seen: min_rtt/4 in recovery and past the
        // dupack threshold too.
        let mut seen = Reordering::default();
        seen.check(0, 5 * 1448, 1448);
        assert_eq!(r.reo_wnd(&seen, CaState::Recovery, 0, 8_000, 100 * MS), 2 * MS);
        assert_eq!(r.reo_wnd(&seen, CaState::Disorder, 10, 8_000, 100 * MS), 2 * MS);
    }

    /// `tcp_check_sack_reordering`: the degree is the distance from the
    /// late segment to the highest SACK, in segments rounded up, never
    /// lowered by a shorter event, capped at 300; every event counts.
    #[test]
    fn reordering_degree_is_the_observed_distance() {
        let mut o = Reordering::default();
        // Not below the highest SACK: no reordering.
        o.check(10 * 1448, 10 * 1448, 1448);
        assert_eq!((o.degree, o.seen), (DUPTHRESH, 0));
        // Within the current degree: counted, degree kept.
        o.check(0, 2 * 1448, 1448);
        assert_eq!((o.degree, o.seen), (DUPTHRESH, 1));
        o.check(0, 7 * 1448 + 1, 1448);
        assert_eq!((o.degree, o.seen), (8, 2));
        o.check(0, 5 * 1448, 1448);
        assert_eq!((o.degree, o.seen), (8, 3));
        o.check(0, 1000 * 1448, 1448);
        assert_eq!(o.degree, MAX_REORDERING);
        // A timeout with the default threshold sacked: back to the default.
        o.on_timeout(CaState::Recovery, 10);
        assert_eq!(o.degree, MAX_REORDERING);
        o.on_timeout(CaState::Disorder, 2);
        assert_eq!(o.degree, MAX_REORDERING);
        o.on_timeout(CaState::Disorder, DUPTHRESH);
        assert_eq!(o.degree, DUPTHRESH);
    }

    /// `tcp_rack_update_reo_wnd`: a D-SACK (after reordering was seen)
    /// widens the window one step per round trip; it persists for 16
    /// recoveries without D-SACK, then falls back to one step.
    #[test]
    fn dsacks_widen_the_window_which_decays_after_16_recoveries() {
        let mut r = Rack::default();
        let mut seen = Reordering::default();
        let wnd = |r: &Rack, o: &Reordering| r.reo_wnd(o, CaState::Recovery, 0, 8_000, 100 * MS);
        // Before any reordering a D-SACK does not count.
        r.on_dsack(&seen, false);
        r.update_reo_wnd(5, 10);
        assert_eq!(wnd(&r, &seen), 0);
        seen.check(0, 2 * 1448, 1448);
        assert_eq!(wnd(&r, &seen), 2 * MS);
        // A loss probe's D-SACK does not count.
        r.on_dsack(&seen, true);
        r.update_reo_wnd(5, 10);
        assert_eq!(wnd(&r, &seen), 2 * MS);
        r.on_dsack(&seen, false);
        r.update_reo_wnd(5, 10);
        assert_eq!(wnd(&r, &seen), 4 * MS);
        // A second D-SACK within the same round trip (for data sent before
        // the widening, delivered count 10) does not widen it again.
        r.on_dsack(&seen, false);
        r.update_reo_wnd(9, 12);
        assert_eq!(wnd(&r, &seen), 4 * MS);
        r.on_dsack(&seen, false);
        r.update_reo_wnd(10, 20);
        assert_eq!(wnd(&r, &seen), 6 * MS);
        // Capped by srtt.
        assert_eq!(r.reo_wnd(&seen, CaState::Open, 0, 8_000, 5 * MS), 5 * MS);
        // Fifteen recoveries kept: still wide; the sixteenth: back to 2 ms.
        for _ in 0..15 {
            r.recovery_kept();
            r.update_reo_wnd(30, 40);
        }
        assert_eq!(wnd(&r, &seen), 6 * MS);
        r.recovery_kept();
        r.update_reo_wnd(30, 40);
        assert_eq!(wnd(&r, &seen), 2 * MS);
        // A D-SACK undo adds one recovery of persistence (at most 16).
        r.on_dsack(&seen, false);
        r.update_reo_wnd(40, 50);
        r.dsack_undo();
        assert_eq!(r.reo_wnd_persist, RECOVERY_THRESH);
        for _ in 0..15 {
            r.recovery_kept();
        }
        r.dsack_undo();
        r.recovery_kept();
        r.update_reo_wnd(50, 60);
        assert_eq!(wnd(&r, &seen), 4 * MS);
        r.recovery_kept();
        r.update_reo_wnd(50, 60);
        assert_eq!(wnd(&r, &seen), 2 * MS);
        // Up to 255 steps.
        for k in 0..300u64 {
            r.on_dsack(&seen, false);
            r.update_reo_wnd(100 + 10 * k, 105 + 10 * k);
        }
        assert_eq!(r.reo_wnd_steps, 255);
    }
}
