//! Loss detection and the loss state machine (Linux's
//! `tcp_fastretrans_alert` and its helpers): marking segments lost (RACK,
//! or duplicate ACKs without SACK), entering and leaving Recovery, CWR and
//! Loss, PRR's window during a reduction, the tail loss probe's outcome,
//! and undoing reductions found spurious.

use super::*;

impl Sender {
    /// Mark segment `i` lost (Linux `tcp_mark_skb_lost`): a lost
    /// retransmission goes back to the to-send list, and `lost` counts a
    /// segment newly lost or a retransmission lost again (`tcp_sum_lost`),
    /// `lost_retransmits` the latter (TcpExt TCPLostRetransmit).
    pub(super) fn mark_lost(&mut self, i: usize) {
        let s = &mut self.rtxq[i];
        if s.flags & SACKED != 0 {
            return;
        }
        if s.flags & LOST == 0 || s.flags & RETRANS != 0 {
            self.c.lost += 1;
        }
        if s.flags & RETRANS != 0 {
            s.flags &= !RETRANS;
            self.c.retrans_out -= 1;
            self.stats.lost_retransmits += 1;
        }
        if s.flags & LOST == 0 {
            s.flags |= LOST;
            self.c.lost_out += 1;
        }
        let (seq, end) = (s.seq, s.end());
        if seq < self.retx_hint {
            self.retx_hint = seq;
        }
        self.retx_end = self.retx_end.max(end);
    }

    /// RACK (RFC 8985): a segment sent before the most recently delivered one
    /// is lost once that one's RTT plus a reordering window has passed.
    /// Segments still inside it are waited for as Linux's
    /// `tcp_rack_mark_lost` does: the reordering timer is armed for the
    /// last of them plus TCP_TIMEOUT_MIN_US, in jiffies. `arm` is false
    /// when that timer has just fired: `tcp_rack_reo_timeout` does not arm
    /// it again, so what is not yet due waits for the next ACK or the RTO.
    pub(super) fn rack_detect(&mut self, now: Nanos, out: &mut Out, arm: bool) {
        if !self.rack.valid() {
            return;
        }
        let reo_wnd = self.rack.reo_wnd(&self.reord, self.c.ca_state, self.c.sacked_out, self.c.min_rtt_us, self.rtt.srtt_ns());
        let mut wait: Option<Nanos> = None;
        // Original transmissions: sent in sequence order.
        let mut i = self.index_of(self.rack_hint.max(self.snd_una));
        while i < self.rtxq.len() {
            let s = self.rtxq[i];
            if s.flags & (EVER_RETRANS | SACKED | LOST | RACK_MARKED) != 0 {
                i += 1;
                self.rack_hint = s.end();
                continue;
            }
            let Some(deadline) = self.rack.deadline(s.tx.sent_ns, s.end(), reo_wnd) else {
                break;
            };
            if deadline <= now {
                self.mark_lost(i);
                self.rtxq[i].flags |= RACK_MARKED;
                self.rack_hint = s.end();
                i += 1;
            } else {
                // Later originals were sent later: wait for the last one
                // sent before RACK's segment.
                let mut last = deadline;
                for s in self.rtxq.range(i + 1..) {
                    if s.flags & (EVER_RETRANS | SACKED | LOST | RACK_MARKED) != 0 {
                        continue;
                    }
                    match self.rack.deadline(s.tx.sent_ns, s.end(), reo_wnd) {
                        Some(d) => last = last.max(d),
                        None => break,
                    }
                }
                wait = Some(last);
                break;
            }
        }
        // Segments sent again, oldest transmission first: a retransmission
        // in flight, or a loss probe's (Linux judges all but what is marked
        // lost and not yet sent again).
        let on_list = |s: &Seg| s.flags & SACKED == 0 && (s.flags & RETRANS != 0 || s.flags & LOST == 0);
        while let Some(&seq) = self.rexmits.front() {
            let j = self.index_of(seq);
            let live = j < self.rtxq.len() && self.rtxq[j].seq == seq && on_list(&self.rtxq[j]);
            if !live {
                self.rexmits.pop_front();
                continue;
            }
            let s = self.rtxq[j];
            let Some(deadline) = self.rack.deadline(s.tx.sent_ns, s.end(), reo_wnd) else {
                break;
            };
            if deadline <= now {
                self.mark_lost(j);
                // FLAG_LOST_RETRANS: a retransmission in flight was lost
                // (Linux sees `retrans_out` fall), not a probe's.
                self.lost_retrans |= s.flags & RETRANS != 0;
                self.rexmits.pop_front();
            } else {
                let mut last = deadline;
                for &seq in self.rexmits.iter().skip(1) {
                    let k = self.index_of(seq);
                    if k >= self.rtxq.len() || self.rtxq[k].seq != seq || !on_list(&self.rtxq[k]) {
                        continue;
                    }
                    let r = self.rtxq[k];
                    match self.rack.deadline(r.tx.sent_ns, r.end(), reo_wnd) {
                        Some(d) => last = last.max(d),
                        None => break,
                    }
                }
                wait = Some(wait.map_or(last, |w: Nanos| w.max(last)));
                break;
            }
        }
        // `tcp_rack_mark_lost`: the one retransmission timer waits for the
        // last of them (at most an RTO), replacing the RTO or probe it held.
        // Nothing to wait for leaves the timer as it is.
        if let (Some(t), true) = (wait, arm) {
            let remaining_us = (t - now) / NS_PER_US;
            let delay_us = (remaining_us + TIMEOUT_MIN_US).min(self.current_rto() / NS_PER_US);
            self.reset_xmit_timer(XmitTimer::ReoTimeout, delay_us, out);
            self.rack_set_timer = true;
        }
    }

    /// Without SACK: the head is lost after as many duplicate ACKs as the
    /// reordering degree (3; the learning of it from duplicate ACKs,
    /// `tcp_check_reno_reordering`, is not modelled), and in recovery
    /// after a partial ACK (NewReno, RFC 6582; `tcp_newreno_mark_lost`).
    pub(super) fn dupack_detect(&mut self, dupack: bool, acked: u32) {
        let head_unmarked = self.rtxq.front().map_or(false, |s| s.flags & (LOST | RETRANS) == 0);
        let trigger = match self.c.ca_state {
            CaState::Open | CaState::Disorder => dupack && self.c.sacked_out >= self.reord.degree,
            CaState::Recovery => acked > 0 && self.snd_una < self.high_seq,
            _ => false,
        };
        if trigger && head_unmarked {
            self.mark_lost(0);
        }
    }

    /// The loss state machine (Linux `tcp_fastretrans_alert`), with undo of
    /// spurious reductions and F-RTO. Returns true when F-RTO wants new data
    /// sent before retransmissions (Linux REXMIT_NEW).
    pub(super) fn fastretrans_alert(&mut self, a: &AckInfo, out: &mut Out) -> bool {
        if a.ece {
            self.undo.prior_ssthresh = 0;
        }
        let state = self.c.ca_state;
        if state == CaState::Open {
            self.undo.clear_stamp();
        } else if self.snd_una >= self.high_seq {
            match state {
                // Held until something above high_seq is acknowledged: the
                // ACK of high_seq itself left the receiver before the CWR
                // segment reached it, so may still carry ECE.
                CaState::Cwr if self.snd_una > self.high_seq => self.end_cwnd_reduction(),
                CaState::Recovery => {
                    if self.try_undo_recovery(a.ts_ecr) {
                        return false;
                    }
                    self.end_cwnd_reduction();
                }
                _ => {}
            }
        }
        match self.c.ca_state {
            CaState::Recovery => {
                if a.una_advanced && self.try_undo_partial(a.ts_ecr, a.prior_snd_una) {
                    return false;
                }
                if self.try_undo_dsack() {
                    self.try_keep_open();
                }
                self.identify_packet_loss(a, out);
                if self.c.ca_state != CaState::Recovery && self.c.lost_out > 0 {
                    self.enter_recovery(a.ece);
                }
                false
            }
            CaState::Loss => {
                let new_first = self.process_loss(a);
                self.identify_packet_loss(a, out);
                // Leave Loss when undone, or for fast recovery when a
                // retransmission is lost again.
                if self.c.ca_state == CaState::Open || self.lost_retrans {
                    self.open_or_recover(a, out);
                    return false;
                }
                new_first
            }
            _ => {
                self.open_or_recover(a, out);
                false
            }
        }
    }

    /// The default branch of `tcp_fastretrans_alert`: fast recovery when a
    /// loss is known (`tcp_time_to_recover`), else `tcp_try_to_open`.
    pub(super) fn open_or_recover(&mut self, a: &AckInfo, out: &mut Out) {
        if self.c.ca_state <= CaState::Disorder {
            self.try_undo_dsack();
        }
        self.identify_packet_loss(a, out);
        if self.c.lost_out > 0 {
            // Loss takes over from an ECN reduction in progress.
            self.enter_recovery(a.ece);
            return;
        }
        if !self.any_retrans_done() {
            self.undo.clear_stamp();
        }
        if self.c.ca_state != CaState::Cwr {
            self.try_keep_open();
        }
    }

    /// `tcp_identify_packet_loss` with SACK: RACK's loss detection on an
    /// ACK, as `tcp_rack_mark_lost` runs it: only on a dubious ACK (which
    /// reaches `tcp_fastretrans_alert`), with segments still out, and only
    /// if a segment RACK accepted was delivered since the last run
    /// (`tp->rack.advanced`), so an ACK that brings nothing new for RACK
    /// does not scan again. What is not yet due waits for the reordering
    /// timer armed then.
    pub(super) fn identify_packet_loss(&mut self, a: &AckInfo, out: &mut Out) {
        if self.cfg.sack && a.dubious && !self.rtxq.is_empty() && self.rack.take_advanced() {
            self.rack_detect(self.c.now_ns, out, true);
        }
    }

    /// `tcp_try_keep_open`: Disorder while anything is sacked, lost or
    /// retransmitted, else Open.
    pub(super) fn try_keep_open(&mut self) {
        let left_out = self.c.sacked_out + self.c.lost_out > 0;
        let target = if left_out || self.any_retrans_done() { CaState::Disorder } else { CaState::Open };
        if self.c.ca_state != target {
            self.set_ca_state(target);
            self.high_seq = self.snd_nxt;
        }
    }

    /// The highest SACKed sequence, snd_una when nothing is sacked (Linux
    /// `tcp_highest_sack_seq`, the "forward-most" ACK).
    pub(super) fn fack(&self) -> u64 {
        if self.c.sacked_out > 0 && self.cfg.sack {
            self.highest_sack.max(self.snd_una)
        } else {
            self.snd_una
        }
    }

    /// `tcp_any_retrans_done`.
    pub(super) fn any_retrans_done(&self) -> bool {
        self.c.retrans_out > 0 || self.rtxq.front().is_some_and(|s| s.flags & EVER_RETRANS != 0)
    }

    /// `tcp_end_cwnd_reduction`: cwnd = ssthresh unless the reduction was
    /// undone; a CCA with `cong_control` keeps cwnd.
    pub(super) fn end_cwnd_reduction(&mut self) {
        let reduced = self.c.ca_state == CaState::Cwr || self.undo.armed();
        if reduced && self.c.ssthresh < INFINITE_SSTHRESH && !self.uses_cong_control() {
            self.c.cwnd = self.c.ssthresh.max(1);
            self.c.cwnd_cnt = 0;
        }
        self.set_ca_state(CaState::Open);
        self.cca.cwnd_event(&mut self.c, CaEvent::CompleteCwr);
    }

    /// `tcp_process_tlp_ack` (RFC 8985 §7.4): once the ACKs reach the loss
    /// probe's end, the episode ends. A retransmitted probe that got a
    /// D-SACK, or a pure duplicate ACK, means original and probe both
    /// arrived: no loss. An ACK beyond it means the probe repaired a loss
    /// that no other mechanism saw: reduce cwnd once, as for ECN.
    pub(super) fn process_tlp_ack(&mut self, ack: u64, progress: bool) {
        let Some(high) = self.tlp_high_seq else { return };
        if ack < high {
            return;
        }
        if !self.tlp_retrans || self.dsack_tlp {
            self.tlp_high_seq = None;
        } else if ack > high {
            self.init_cwnd_reduction();
            self.set_ca_state(CaState::Cwr);
            self.end_cwnd_reduction();
            self.try_keep_open();
        } else if !progress && !self.data_sacked {
            self.tlp_high_seq = None;
        }
    }

    /// `tcp_undo_cwnd_reduction`: back to the cwnd (the CCA's `undo_cwnd`)
    /// and ssthresh from before the reduction; with `unmark_loss`, segments
    /// marked lost are in flight again and RACK judges them afresh.
    pub(super) fn undo_cwnd_reduction(&mut self, unmark_loss: bool) {
        if unmark_loss {
            for s in self.rtxq.iter_mut() {
                s.flags &= !LOST;
            }
            self.c.lost_out = 0;
            self.retx_hint = self.snd_una;
            self.rack_hint = self.snd_una;
        }
        if self.undo.prior_ssthresh != 0 {
            self.c.cwnd = self.cca.undo_cwnd(&mut self.c).clamp(1, self.c.cwnd_clamp);
            if self.undo.prior_ssthresh > self.c.ssthresh {
                self.c.ssthresh = self.undo.prior_ssthresh;
                self.cwr_pending = false;
            }
        }
        self.undo.disarm();
        self.stats.undo_count += 1;
    }

    /// `tcp_try_undo_recovery`, at the end of Recovery or Loss. Without
    /// SACK the state holds until an ACK above high_seq (RFC 6582).
    pub(super) fn try_undo_recovery(&mut self, ts_ecr: Nanos) -> bool {
        if self.undo.may_undo(ts_ecr, self.non_sack_reopen()) {
            self.undo_cwnd_reduction(false);
        } else {
            self.rack.recovery_kept();
        }
        if self.non_sack_holds() {
            return true;
        }
        self.set_ca_state(CaState::Open);
        false
    }

    /// A non-SACK connection at or above high_seq, whose retransmission
    /// stamp `tcp_is_non_sack_preventing_reopen` may have cleared: a zero
    /// stamp is no evidence for undo there (`tcp_packet_delayed`).
    pub(super) fn non_sack_reopen(&self) -> bool {
        !self.cfg.sack && self.snd_una >= self.high_seq
    }

    /// `tcp_is_non_sack_preventing_reopen`.
    pub(super) fn non_sack_holds(&mut self) -> bool {
        if !self.cfg.sack && self.snd_una == self.high_seq {
            if !self.any_retrans_done() {
                self.undo.clear_stamp();
            }
            return true;
        }
        false
    }

    /// `tcp_try_undo_partial`: a partial ACK echoing an original's
    /// timestamp, so the hole at `prior_snd_una` was filled by a delayed
    /// original (reordering); undo once no retransmission is in flight.
    pub(super) fn try_undo_partial(&mut self, ts_ecr: Nanos, prior_snd_una: u64) -> bool {
        if self.undo.armed() && self.undo.packet_delayed(ts_ecr, self.non_sack_reopen()) {
            self.reord.check(prior_snd_una, self.fack(), self.cfg.mss);
            if self.c.retrans_out > 0 {
                return true;
            }
            if !self.any_retrans_done() {
                self.undo.clear_stamp();
            }
            self.undo_cwnd_reduction(true);
            self.try_keep_open();
        }
        false
    }

    /// `tcp_try_undo_dsack`: D-SACKs showed every retransmission needless.
    pub(super) fn try_undo_dsack(&mut self) -> bool {
        if self.undo.all_dsacked() {
            self.rack.dsack_undo();
            self.undo_cwnd_reduction(false);
            return true;
        }
        false
    }

    /// `tcp_try_undo_loss`: the RTO proved spurious.
    pub(super) fn try_undo_loss(&mut self, frto_undo: bool, ts_ecr: Nanos) -> bool {
        if !(frto_undo || self.undo.may_undo(ts_ecr, self.non_sack_reopen())) {
            return false;
        }
        self.undo_cwnd_reduction(true);
        if !self.non_sack_holds() && (frto_undo || self.cfg.sack) {
            self.set_ca_state(CaState::Open);
        }
        true
    }

    /// `tcp_process_loss`: an ACK in the Loss state, with F-RTO.
    pub(super) fn process_loss(&mut self, a: &AckInfo) -> bool {
        let recovered = self.snd_una >= self.high_seq;
        if a.una_advanced && self.try_undo_loss(false, a.ts_ecr) {
            return false;
        }
        let la = LossAck {
            una_advanced: a.una_advanced,
            orig_sack_acked: self.orig_sack_acked,
            sacked_or_dupack: self.data_sacked || a.dupack,
            recovered,
            can_send_new: self.can_send_new(),
        };
        match self.frto.on_ack(&la, self.snd_nxt, &mut self.high_seq) {
            Verdict::Spurious => {
                self.try_undo_loss(true, a.ts_ecr);
                return false;
            }
            Verdict::SendNew => return true,
            Verdict::Continue => {}
        }
        if recovered {
            self.try_undo_recovery(a.ts_ecr);
        }
        false
    }

    /// Data is written and not sent, and the receive window takes more.
    pub(super) fn can_send_new(&self) -> bool {
        self.has_data() && self.cfg.mss as u64 <= self.send_win()
    }

    pub(super) fn set_ca_state(&mut self, s: CaState) {
        if self.c.ca_state != s {
            self.cca.set_state(&mut self.c, s);
            self.c.ca_state = s;
        }
    }

    /// `tcp_init_cwnd_reduction`: the start of PRR towards a new ssthresh;
    /// CWR is signalled to the receiver on the next new segment.
    pub(super) fn init_cwnd_reduction(&mut self) {
        self.high_seq = self.snd_nxt;
        self.tlp_high_seq = None;
        self.c.prior_cwnd = self.c.cwnd;
        self.prr.start();
        self.c.ssthresh = self.cca.ssthresh(&mut self.c);
        self.c.cwnd_cnt = 0;
        if self.opts.ecn {
            self.cwr_pending = true;
        }
    }

    /// `tcp_enter_recovery`. A reduction for ECN already under way keeps its
    /// ssthresh, PRR counts and high_seq (one reduction per window: the
    /// recovery ends where the CWR would have, and a loss beyond it starts
    /// a new one). The ssthresh to restore on undo is kept unless ECN asked
    /// for the reduction.
    pub(super) fn enter_recovery(&mut self, ece: bool) {
        self.stats.recoveries += 1;
        self.undo.prior_ssthresh = 0;
        self.undo.init(self.snd_una, self.c.retrans_out);
        if self.c.ca_state != CaState::Cwr {
            if !ece {
                self.undo.prior_ssthresh = current_ssthresh(&self.c);
            }
            self.init_cwnd_reduction();
        }
        self.set_ca_state(CaState::Recovery);
    }

    /// `tcp_enter_cwr`: an ECN echo reduces cwnd like a loss, without
    /// retransmitting, and is never undone.
    pub(super) fn enter_cwr(&mut self) {
        self.undo.prior_ssthresh = 0;
        self.undo.disarm();
        self.init_cwnd_reduction();
        self.set_ca_state(CaState::Cwr);
    }

    /// Proportional rate reduction (RFC 6937, as Linux `tcp_cwnd_reduction`).
    pub(super) fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: bool, una_advanced: bool) {
        let in_flight = self.c.packets_in_flight();
        if let Some(cwnd) = self.prr.cwnd(in_flight, self.c.ssthresh, self.c.prior_cwnd, newly_acked_sacked, newly_lost, una_advanced) {
            self.c.cwnd = cwnd;
        }
    }
}
