//! Undo of spurious cwnd reductions, as Linux's tcp_input.c: a reduction
//! (fast recovery or RTO) remembers where it began (`undo_marker`) and how
//! many retransmissions it made (`undo_retrans`). It proves spurious when
//! every retransmission is reported duplicate by D-SACK (RFC 2883/3708), or
//! when an ACK echoes a timestamp older than the first retransmission: the
//! original arrived (Eifel detection, RFC 3522; Linux `tcp_packet_delayed`).

use super::rtt::TS_TICK_NS;
use crate::cc::{CaState, Conn};
use netcore::Nanos;

#[derive(Clone, Debug, Default)]
pub struct Undo {
    /// snd_una when the reduction began; `None` once undone or when the
    /// reduction may not be undone (Linux `undo_marker` = 0).
    marker: Option<u64>,
    /// Retransmissions not yet shown duplicate; -1 when there were none to
    /// begin with (0 means "all were spurious": undo now).
    retrans: i32,
    /// ssthresh to restore (`prior_ssthresh`; 0 = do not restore).
    pub prior_ssthresh: u32,
    /// Send time of the first retransmission of the episode (`retrans_stamp`),
    /// 0 when there is none.
    retrans_stamp: Nanos,
}

impl Undo {
    /// `tcp_init_undo`: a reduction begins at `snd_una`; retransmissions
    /// already in flight may still draw D-SACKs.
    pub fn init(&mut self, snd_una: u64, retrans_out: u32) {
        self.marker = Some(snd_una);
        self.retrans = if retrans_out > 0 { retrans_out as i32 } else { -1 };
    }

    /// The reduction may no longer be undone (ECN's CWR, or done).
    pub fn disarm(&mut self) {
        self.marker = None;
    }

    pub fn armed(&self) -> bool {
        self.marker.is_some()
    }

    /// A segment was retransmitted at `now` (`tcp_retransmit_skb`).
    pub fn on_retransmit(&mut self, now: Nanos) {
        if self.retrans_stamp == 0 {
            self.retrans_stamp = now.max(1);
        }
        self.retrans = self.retrans.max(0) + 1;
    }

    /// No retransmission is outstanding any more.
    pub fn clear_stamp(&mut self) {
        self.retrans_stamp = 0;
    }

    /// A D-SACK reported `segs` duplicate retransmitted segments ending at
    /// `end_seq`: they were not needed.
    pub fn on_dsack(&mut self, end_seq: u64, segs: u32) {
        if let Some(m) = self.marker {
            if self.retrans > 0 && end_seq > m {
                self.retrans = (self.retrans - segs as i32).max(0);
            }
        }
    }

    /// `tcp_packet_delayed`: the ACK echoes a timestamp from before the
    /// first retransmission, so an original transmission got through; or
    /// nothing has been retransmitted yet (a fast retransmit still held by
    /// pacing or TSQ), so what advanced snd_una was an original (Linux
    /// since 2024: e37ab7373696, "tcp: fix to allow timestamp undo if no
    /// retransmits were sent"; measured on 6.18, docs/sim-model.md). Not so for a non-SACK connection at or above high_seq
    /// (`non_sack_reopen`: `tcp_is_non_sack_preventing_reopen` cleared
    /// the stamp, d0fa59897e04).
    pub fn packet_delayed(&self, ts_ecr: Nanos, non_sack_reopen: bool) -> bool {
        if self.retrans_stamp != 0 {
            return ts_ecr != 0 && ts_ecr / TS_TICK_NS < self.retrans_stamp / TS_TICK_NS;
        }
        !non_sack_reopen
    }

    /// `tcp_may_undo`.
    pub fn may_undo(&self, ts_ecr: Nanos, non_sack_reopen: bool) -> bool {
        self.armed() && (self.retrans == 0 || self.packet_delayed(ts_ecr, non_sack_reopen))
    }

    /// D-SACKs covered every retransmission (`tcp_try_undo_dsack`'s test).
    pub fn all_dsacked(&self) -> bool {
        self.armed() && self.retrans == 0
    }
}

/// `tcp_current_ssthresh`: during a reduction its target, otherwise at
/// least three quarters of cwnd.
pub fn current_ssthresh(c: &Conn) -> u32 {
    if matches!(c.ca_state, CaState::Cwr | CaState::Recovery) {
        c.ssthresh
    } else {
        c.ssthresh.max((c.cwnd >> 1) + (c.cwnd >> 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn undo_needs_a_marker_and_proof() {
        let mut u = Undo::default();
        assert!(!u.may_undo(5 * MS, false));
        u.init(1000, 0);
        u.on_retransmit(10 * MS);
        // The ACK echoes the retransmission itself: no proof.
        assert!(!u.may_undo(10 * MS, false));
        // It echoes an original sent 2 ms before the retransmission.
        assert!(u.may_undo(8 * MS, false));
        u.disarm();
        assert!(!u.may_undo(8 * MS, false));
    }

    /// Linux since 2024 (`tcp_packet_delayed`): with nothing retransmitted yet
    /// (the fast retransmit still waits for its pacing slot), an ACK that
    /// advances snd_una was for an original: the reduction may be undone,
    /// whatever timestamp it echoes; except for a non-SACK connection at
    /// high_seq, whose stamp `tcp_is_non_sack_preventing_reopen` cleared.
    #[test]
    fn nothing_retransmitted_yet_proves_the_packet_delayed() {
        let mut u = Undo::default();
        u.init(1000, 0);
        assert!(u.packet_delayed(0, false) && u.may_undo(0, false));
        assert!(!u.packet_delayed(0, true) && !u.may_undo(0, true));
        u.on_retransmit(10 * MS);
        assert!(!u.packet_delayed(10 * MS, false));
        u.clear_stamp();
        assert!(u.packet_delayed(10 * MS, false));
    }

    /// Eifel detection at Linux's millisecond timestamp granularity: an
    /// original sent in the same millisecond as the retransmission is not
    /// told apart from it.
    #[test]
    fn timestamps_compare_in_milliseconds() {
        let mut u = Undo::default();
        u.init(0, 0);
        u.on_retransmit(10 * MS + 900_000);
        assert!(!u.packet_delayed(10 * MS + 100_000, false));
        assert!(u.packet_delayed(9 * MS + 999_999, false));
        assert!(!u.packet_delayed(0, false), "no echoed timestamp is no evidence");
    }

    #[test]
    fn dsacks_of_every_retransmission_allow_undo() {
        let mut u = Undo::default();
        u.init(1000, 0);
        assert!(!u.all_dsacked(), "nothing retransmitted yet is not 'all duplicate'");
        u.on_retransmit(MS);
        u.on_retransmit(MS);
        u.on_dsack(3000, 1);
        assert!(!u.all_dsacked());
        // A D-SACK below the marker belongs to an earlier episode.
        u.on_dsack(900, 1);
        assert!(!u.all_dsacked());
        u.on_dsack(4000, 1);
        assert!(u.all_dsacked() && u.may_undo(0, false));
    }

    #[test]
    fn retransmissions_in_flight_at_the_start_count() {
        let mut u = Undo::default();
        u.init(0, 2);
        u.on_dsack(100, 1);
        assert!(!u.all_dsacked());
        u.on_dsack(200, 1);
        assert!(u.all_dsacked());
    }

    #[test]
    fn current_ssthresh_is_the_target_during_a_reduction() {
        let mut c = Conn::new(1448, 40);
        c.ssthresh = 20;
        assert_eq!(current_ssthresh(&c), 30);
        c.ca_state = CaState::Recovery;
        assert_eq!(current_ssthresh(&c), 20);
    }
}
