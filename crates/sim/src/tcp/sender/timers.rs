//! The timers (Linux's tcp_timer.c and the probe of tcp_output.c): the
//! one retransmission timer, which carries the RTO, the tail loss probe
//! and RACK's reordering timeout in turn (Linux `icsk_pending`), and the
//! pacing timer.

use super::*;
use crate::tcp::rtt::RTO_INIT;

/// What the retransmission timer is set for (Linux `icsk_pending`). Linux
/// has one timer for all three: arming one replaces the one pending, and
/// how the RTO is re-armed depends on which it replaces (`tcp_rearm_rto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum XmitTimer {
    Off,
    Retrans,
    LossProbe,
    ReoTimeout,
}

impl Sender {
    pub(super) fn current_rto(&self) -> Nanos {
        self.rtt.current_rto()
    }

    fn timer_mut(&mut self, kind: TimerKind) -> &mut Timer {
        match kind {
            TimerKind::Retransmit => &mut self.xmit_timer,
            TimerKind::Pace => &mut self.pace_timer,
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
            // `tcp_write_timer_handler`: what the timer was set for.
            TimerKind::Retransmit => match self.xmit_pending {
                XmitTimer::ReoTimeout => self.on_reo_timeout(now, out),
                XmitTimer::LossProbe => self.send_loss_probe(now, out),
                XmitTimer::Retrans => {
                    self.xmit_pending = XmitTimer::Off;
                    self.on_rto(now, out);
                }
                XmitTimer::Off => {}
            },
            TimerKind::Pace => self.send(now, out),
            TimerKind::DelAck | TimerKind::CompAck | TimerKind::Read => {}
        }
    }

    /// `tcp_rack_reo_timeout`: what waited out the reordering window is
    /// lost; outside Recovery that starts it, with one PRR step (Linux
    /// counts one segment delivered), and the lost are resent
    /// (retransmissions only, `tcp_xmit_retransmit_queue`). RACK's timer is
    /// not armed again here; the RTO then counts from the head's last
    /// transmission, as the timer held no RTO meanwhile.
    fn on_reo_timeout(&mut self, now: Nanos, out: &mut Out) {
        let prior_lost = self.c.lost;
        self.rack_detect(now, out, false);
        if self.c.lost > prior_lost {
            if self.c.ca_state != CaState::Recovery {
                self.enter_recovery(false);
                if !self.uses_cong_control() {
                    self.cwnd_reduction(1, true, false);
                }
            }
            self.xmit_retransmit_queue(now, out);
        }
        if self.xmit_pending != XmitTimer::Retrans {
            self.rearm_rto(now, out);
        }
    }

    /// Retransmission timeout (Linux `tcp_retransmit_timer` + `tcp_enter_loss`).
    pub(super) fn on_rto(&mut self, now: Nanos, out: &mut Out) {
        // Every firing with something outstanding counts, the SYN's too
        // (Linux's TCPTimeouts).
        if self.state == State::SynSent {
            self.stats.rto_count += 1;
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
        // Linux counts a connection's first timeout once more by the state it
        // ends: Recovery, Loss, or Disorder / anything SACKed (TcpExt
        // TCPSackRecoveryFail, TCPLossFailures, TCPSackFailures).
        if !repeated_timeout {
            match self.c.ca_state {
                CaState::Recovery => self.stats.rto_in_recovery += 1,
                CaState::Loss => self.stats.rto_in_loss += 1,
                _ if self.c.ca_state == CaState::Disorder || self.c.sacked_out > 0 => self.stats.rto_in_disorder += 1,
                _ => {}
            }
        }
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
                if s.flags & EVER_RETRANS != 0 {
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
        // `tcp_retransmit_timer`: the backed-off RTO, from now.
        let rto_us = self.current_rto() / NS_PER_US;
        self.reset_xmit_timer(XmitTimer::Retrans, rto_us, out);
    }

    /// Set the one timer for `what`, due `delay_us` from now in jiffies
    /// (`inet_csk_reset_xmit_timer`), replacing what it held.
    pub(super) fn reset_xmit_timer(&mut self, what: XmitTimer, delay_us: u64, out: &mut Out) {
        self.xmit_pending = what;
        let at = jiffies_timer_ns(&self.c, delay_us);
        if let Some(t) = self.xmit_timer.arm(self.opts.timer_at(at)) {
            out.timers.push((t, self.conn_id, TimerKind::Retransmit));
        }
    }

    /// Nothing out: no timer (`inet_csk_clear_xmit_timer`).
    pub(super) fn clear_xmit_timer(&mut self) {
        self.xmit_pending = XmitTimer::Off;
        self.xmit_timer.cancel();
    }

    /// How far ahead of now the RTO of the head's last transmission falls,
    /// in µs (`tcp_rto_delta_us`; negative once past).
    fn rto_delta_us(&self, now: Nanos) -> i64 {
        let head_sent = self.rtxq.front().map_or(now, |h| h.tx.sent_ns);
        (head_sent + self.current_rto()) as i64 / NS_PER_US as i64 - (now / NS_PER_US) as i64
    }

    /// `tcp_rearm_rto`: the RTO from now, unless it replaces a loss probe or
    /// a reordering timeout: then from the head's last transmission, since
    /// the timer held no RTO meanwhile.
    pub(super) fn rearm_rto(&mut self, now: Nanos, out: &mut Out) {
        if self.c.packets_out == 0 {
            self.clear_xmit_timer();
            return;
        }
        let rto_us = match self.xmit_pending {
            XmitTimer::LossProbe | XmitTimer::ReoTimeout => self.rto_delta_us(now).max(1) as u64,
            XmitTimer::Off | XmitTimer::Retrans => self.current_rto() / NS_PER_US,
        };
        self.reset_xmit_timer(XmitTimer::Retrans, rto_us, out);
    }

    /// `tcp_schedule_loss_probe` (RFC 8985 §7): in the Open or CWR state
    /// with SACK and data out, a probe 2·srtt ahead plus the minimum RTO
    /// when one segment is out (for a delayed ACK), else plus
    /// TCP_TIMEOUT_MIN_US; not after the RTO (`advancing_rto`: a full RTO
    /// from now, as an ACK that advanced snd_una restarts it; else the
    /// head's). A jiffies timer: on a 0.3 ms path at 250 Hz the probe is one
    /// 4 ms jiffy and fires at the next tick. Whether a probe is then
    /// outstanding is the handler's business (`send_loss_probe`).
    pub(super) fn schedule_loss_probe(&mut self, now: Nanos, out: &mut Out, advancing_rto: bool) -> bool {
        if !self.cfg.sack
            || self.c.packets_out == 0
            || !matches!(self.c.ca_state, CaState::Open | CaState::Cwr)
        {
            return false;
        }
        let srtt_us = self.rtt.srtt_ns() / NS_PER_US;
        let mut timeout_us = if srtt_us == 0 {
            RTO_INIT / NS_PER_US // TCP_TIMEOUT_INIT: no RTT sample yet
        } else if self.c.packets_out == 1 {
            2 * srtt_us + self.cfg.min_rto_ns / NS_PER_US
        } else {
            2 * srtt_us + TIMEOUT_MIN_US
        };
        let rto_delta_us = if advancing_rto { (self.current_rto() / NS_PER_US) as i64 } else { self.rto_delta_us(now) };
        if rto_delta_us > 0 {
            timeout_us = timeout_us.min(rto_delta_us as u64);
        }
        self.reset_xmit_timer(XmitTimer::LossProbe, timeout_us, out);
        true
    }

    /// `tcp_set_xmit_timer`, on an ACK that acked data (unless RACK set
    /// its reordering timer on it): a loss probe if one may be, else the RTO.
    pub(super) fn set_xmit_timer(&mut self, now: Nanos, out: &mut Out) {
        if !self.schedule_loss_probe(now, out, true) {
            self.rearm_rto(now, out);
        }
    }

    /// The arming `tcp_ack` made (`tcp_set_xmit_timer`) before the sends
    /// the ACK allows, made now if still due. Most ACKs send new data, and
    /// the probe `tcp_write_xmit` then schedules replaces the ACK's arming
    /// (`write_xmit` drops it); the sends in between leave its inputs as
    /// they were (retransmissions keep the head's time unless they resend
    /// the head, which sets the same RTO), so putting it off saves an
    /// arming per ACK with the same timer.
    pub(super) fn settle_ack_timer(&mut self, now: Nanos, out: &mut Out) {
        if self.ack_timer_due {
            self.ack_timer_due = false;
            self.set_xmit_timer(now, out);
        }
    }

    /// `tcp_send_loss_probe`: one new segment if there is one (cwnd
    /// notwithstanding), else the last segment again, so that a lost tail
    /// is reported by SACK and repaired by fast recovery instead of waiting
    /// for the RTO. At most one probe is outstanding; a probe sent restarts
    /// the RTO from now, one not sent re-arms it from the head.
    pub(super) fn send_loss_probe(&mut self, now: Nanos, out: &mut Out) {
        if self.tlp_high_seq.is_some() {
            self.rearm_rto(now, out);
            return;
        }
        self.tlp_retrans = false;
        let len = (self.write_seq - self.snd_nxt).min(self.cfg.mss as u64);
        let sent = if len > 0 && len <= self.send_win() {
            // `tcp_write_xmit` with push_one = 2: one segment.
            self.start_skb(1);
            self.transmit_new(len, now, out);
            true
        } else {
            match self.rtxq.len().checked_sub(1) {
                Some(last) if self.rtxq[last].flags & (SACKED | RETRANS) == 0 => {
                    self.resend(last, now, out);
                    self.tlp_retrans = true;
                    true
                }
                _ => false,
            }
        };
        if sent {
            self.tlp_high_seq = Some(self.snd_nxt);
            self.stats.tlp_count += 1;
            self.xmit_pending = XmitTimer::Off;
        }
        self.rearm_rto(now, out);
    }
}
