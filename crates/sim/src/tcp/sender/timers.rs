//! The timers (Linux's tcp_timer.c and the probe of tcp_output.c): the
//! retransmission timer with the tail loss probe it carries, the pacing
//! and reordering timers, and the RTO.

use super::*;

impl Sender {
    pub(super) fn current_rto(&self) -> Nanos {
        self.rtt.current_rto()
    }

    fn timer_mut(&mut self, kind: TimerKind) -> &mut Timer {
        match kind {
            TimerKind::Rto => &mut self.rto_timer,
            TimerKind::Pace => &mut self.pace_timer,
            TimerKind::Reorder => &mut self.reo_timer,
            TimerKind::DelAck | TimerKind::CompAck | TimerKind::Read => unreachable!("the receiver's timers"),
        }
    }

    /// A timer event while the host is paused (`[tcp] sender_pauses`): an
    /// expiry moves to `until`, when the host runs again.
    pub fn defer_timer(&mut self, kind: TimerKind, now: Nanos, until: Nanos, out: &mut Out) {
        let conn_id = self.conn_id;
        let timer = self.timer_mut(kind);
        let (expired, again) = timer.fire(now);
        let again = if expired { timer.arm(until) } else { again };
        if let Some(t) = again {
            out.timers.push((t, conn_id, kind));
        }
    }

    pub fn on_timer(&mut self, kind: TimerKind, now: Nanos, out: &mut Out) {
        self.set_now(now);
        let (expired, again) = self.timer_mut(kind).fire(now);
        if let Some(t) = again {
            out.timers.push((t, self.conn_id, kind));
        }
        if !expired {
            return;
        }
        match kind {
            TimerKind::Rto if self.probe_armed => self.send_loss_probe(now, out),
            TimerKind::Rto => self.on_rto(now, out),
            TimerKind::Pace => self.send(now, out),
            TimerKind::Reorder => {
                let prior_lost = self.c.lost;
                self.rack_detect(now, out, false);
                if self.c.lost > prior_lost {
                    if matches!(self.c.ca_state, CaState::Open | CaState::Disorder | CaState::Cwr) {
                        self.enter_recovery(false);
                    }
                    if self.c.ca_state == CaState::Recovery && !self.uses_cong_control() {
                        self.cwnd_reduction(0, true, false);
                    }
                    self.send(now, out);
                }
            }
            TimerKind::DelAck | TimerKind::CompAck | TimerKind::Read => {}
        }
    }

    /// Retransmission timeout (Linux `tcp_retransmit_timer` + `tcp_enter_loss`).
    pub(super) fn on_rto(&mut self, now: Nanos, out: &mut Out) {
        if self.state == State::SynSent {
            self.rtt.syn_timeout();
            self.send_syn(now, out);
            return;
        }
        if self.c.packets_out == 0 {
            return;
        }
        self.stats.rto_count += 1;
        self.reord.on_timeout(self.c.ca_state, self.c.sacked_out);
        let new_recovery = self.c.ca_state < CaState::Recovery;
        let repeated_timeout = self.rtt.backoff > 0;
        // `tcp_timeout_mark_lost`: the head and everything not sacked that
        // RACK would time out (sent more than its RTT ago) is presumed lost;
        // those retransmissions restart.
        self.rexmits.clear();
        for i in 0..self.rtxq.len() {
            let s = &self.rtxq[i];
            if s.flags & SACKED != 0 {
                continue;
            }
            if i > 0 && !self.rack.timed_out(s.tx.sent_ns, now) {
                if s.flags & RETRANS != 0 {
                    self.rexmits.push_back(s.seq);
                }
                continue;
            }
            self.mark_lost(i);
        }
        let fresh = matches!(self.c.ca_state, CaState::Open | CaState::Disorder)
            || self.snd_una >= self.high_seq
            || (self.c.ca_state == CaState::Loss && self.rtt.backoff == 0);
        if fresh {
            self.undo.prior_ssthresh = current_ssthresh(&self.c);
            self.c.prior_cwnd = self.c.cwnd;
            self.c.ssthresh = self.cca.ssthresh(&mut self.c);
            self.cca.cwnd_event(&mut self.c, CaEvent::Loss);
            self.undo.init(self.snd_una, self.c.retrans_out);
        }
        self.retx_hint = self.snd_una;
        self.retx_end = self.snd_nxt;
        // What the timeout left unmarked (sent within RACK's RTT) stays on
        // RACK's list, as on Linux's time-sorted one: RACK judges it later.
        self.rack_hint = self.snd_una;
        self.c.cwnd = self.c.packets_in_flight() + 1;
        self.c.cwnd_cnt = 0;
        self.high_seq = self.snd_nxt;
        self.set_ca_state(CaState::Loss);
        self.frto.enter_loss(new_recovery, repeated_timeout);
        self.rtt.backoff += 1;
        self.tlp_high_seq = None;
        self.pace_next_ns = now;
        self.send(now, out);
        self.rto_deadline = now + self.current_rto();
        self.set_xmit_timer(now, out);
    }

    /// Arm the retransmission timer for the RTO deadline, or for a tail
    /// loss probe (RFC 8985 §7, Linux `tcp_schedule_loss_probe`): in the
    /// Open or CWR state with SACK, when no new data could go out now, after
    /// 2·srtt plus the minimum RTO when one segment is out (for a delayed
    /// ACK), else plus TCP_TIMEOUT_MIN_US. Linux arms the probe even when
    /// the RTO comes first, at the RTO's time. Both are jiffies timers
    /// (`jiffies_timer_ns`): on a 0.3 ms path at 250 Hz the probe is one
    /// 4 ms jiffy and fires at the next tick.
    pub(super) fn set_xmit_timer(&mut self, now: Nanos, out: &mut Out) {
        let could_send_new = self.could_send_new();
        self.arm_xmit_timer(now, out, could_send_new);
    }

    fn could_send_new(&self) -> bool {
        self.c.packets_in_flight() < self.c.cwnd && self.has_data()
    }

    /// `set_xmit_timer` with whether new data could go out as it was when
    /// the timer was due to be armed.
    fn arm_xmit_timer(&mut self, now: Nanos, out: &mut Out, could_send_new: bool) {
        self.stale_xmit_timer = None;
        let mut at = jiffies_timer_ns(&self.c, self.rto_deadline.saturating_sub(now) / NS_PER_US);
        self.probe_armed = false;
        if self.cfg.sack
            && matches!(self.c.ca_state, CaState::Open | CaState::Cwr)
            && self.tlp_high_seq.is_none()
            && self.rtt.srtt_ns() > 0
            && !could_send_new
        {
            let extra_us = if self.c.packets_out == 1 { self.cfg.min_rto_ns / NS_PER_US } else { TIMEOUT_MIN_US };
            let pto = jiffies_timer_ns(&self.c, 2 * (self.rtt.srtt_ns() / NS_PER_US) + extra_us);
            at = at.min(pto);
            self.probe_armed = true;
        }
        if let Some(t) = self.rto_timer.arm(self.opts.timer_at(at)) {
            out.timers.push((t, self.conn_id, TimerKind::Rto));
        }
    }

    /// `tcp_ack` arms the timer (Linux `tcp_set_xmit_timer`) before the
    /// sends the ACK allows, and every send that sends something arms it
    /// again, which is what the timer then holds. So the ACK's arming is
    /// made here, after those sends, only if none of them re-armed the
    /// timer. Its inputs are then as they were at the ACK: no send moved
    /// the deadline or the segments out, and whether new data could go out
    /// (an application write may have come since) was kept in
    /// `stale_xmit_timer`. Most ACKs send, so this saves one arming per ACK.
    pub(super) fn rearm_stale_xmit_timer(&mut self, now: Nanos, out: &mut Out) {
        if let Some(could_send_new) = self.stale_xmit_timer {
            self.arm_xmit_timer(now, out, could_send_new);
        }
    }

    /// At the ACK: the timer is due to be armed (see `rearm_stale_xmit_timer`).
    pub(super) fn xmit_timer_due(&mut self) {
        self.stale_xmit_timer = Some(self.could_send_new());
    }

    /// The probe: one new segment if there is one (cwnd notwithstanding),
    /// else the last segment again, so that a lost tail is reported by SACK
    /// and repaired by fast recovery instead of waiting for the RTO.
    pub(super) fn send_loss_probe(&mut self, now: Nanos, out: &mut Out) {
        self.probe_armed = false;
        self.stats.tlp_count += 1;
        self.tlp_retrans = false;
        let len = (self.write_seq - self.snd_nxt).min(self.cfg.mss as u64);
        if len > 0 && len <= self.send_win() {
            self.start_skb(1);
            self.transmit_new(len, now, out);
        } else if let Some(last) = self.rtxq.len().checked_sub(1) {
            if self.rtxq[last].flags & (SACKED | RETRANS) == 0 {
                self.retransmit(last, now, out);
                self.tlp_retrans = true;
            }
        }
        self.tlp_high_seq = Some(self.snd_nxt);
        // `tcp_rearm_rto` after a probe: the RTO counts from the last
        // transmission of the head, not from now.
        let head_sent = self.rtxq.front().map_or(now, |h| h.tx.sent_ns);
        self.rto_deadline = head_sent + self.current_rto();
        self.set_xmit_timer(now, out);
    }
}
