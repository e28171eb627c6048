//! Sending (Linux's tcp_output.c): what cwnd, the receive window, the
//! data written and pacing let go now (`tcp_write_xmit`, retransmissions
//! first as in `tcp_xmit_retransmit_queue`); skbs cut as
//! `tcp_mss_split_point` cuts them, TSO sizing (`tcp_tso_segs`) and
//! deferral (`tcp_tso_should_defer`); PSH; the pacer's bursts; restart
//! after idle and `tcp_cwnd_validate`.

use super::*;

impl Sender {
    pub(super) fn has_data(&self) -> bool {
        self.write_seq > self.snd_nxt
    }

    /// Send what cwnd, the receive window, the data written and pacing
    /// allow (Linux `tcp_write_xmit` with retransmissions first). New data
    /// leaves in skbs as `tcp_mss_split_point` cuts them (see `start_skb`).
    pub fn send(&mut self, now: Nanos, out: &mut Out) {
        self.write_xmit(now, out, false);
    }

    /// `send`; `push_one`: for `tcp_push_one`, without TSO deferral.
    pub(super) fn write_xmit(&mut self, now: Nanos, out: &mut Out, push_one: bool) {
        if self.state != State::Established {
            return;
        }
        self.set_now(now);
        let mut cwnd_limited = false;
        let mut sent_new = false;
        // Some new skb left cwnd not yet full (`tcp_should_expand_sndbuf`
        // at its `tcp_check_space`).
        let mut below_cwnd = false;
        // Linux runs `tcp_write_xmit` (and with it `tcp_cwnd_validate`)
        // only with unsent data; retransmissions go through
        // `tcp_xmit_retransmit_queue`, which records nothing.
        let new_data_waiting = !self.rexmit_only && self.has_data();
        // Nothing was out when the first new segment left.
        let mut started_idle = false;
        loop {
            if self.c.paced && self.data_segs_out >= UNPACED_SEGS && self.burst_segs == 0 {
                if self.pace_next_ns > now {
                    let at = self.opts.timer_at(self.pace_next_ns);
                    let at = match self.pace_latency.as_deref_mut() {
                        None => Some(at),
                        // Linux leaves a queued pacing hrtimer as it is
                        // (`tcp_pacing_check`); a new one fires late.
                        Some(l) => (!self.pace_timer.is_armed()).then(|| at + l.draw()),
                    };
                    if let Some(t) = at.and_then(|at| self.pace_timer.arm(at)) {
                        out.timers.push((t, self.conn_id, TimerKind::Pace));
                    }
                    break;
                }
                self.burst_goal = self.tso_segs();
            }
            let in_flight = self.c.packets_in_flight();
            if let Some(i) = if self.new_data_first { None } else { self.next_retransmit() } {
                if in_flight >= self.c.cwnd {
                    break;
                }
                self.retransmit(i, now, out);
                if i == 0 && self.xmit_pending != XmitTimer::ReoTimeout {
                    // `tcp_xmit_retransmit_queue`: resending the head
                    // restarts the RTO (unless RACK's timeout holds the
                    // timer), so the repair gets a whole RTO.
                    let rto_us = self.current_rto() / NS_PER_US;
                    self.reset_xmit_timer(XmitTimer::Retrans, rto_us, out);
                }
                // Linux resends one skb per pacing slot (`tcp_pacing_check`
                // before each in `tcp_xmit_retransmit_queue`, and before the
                // new data after them): the paced burst ends with the lost
                // part of the skb, which new data does not join. (New skbs
                // do share a burst: `tcp_write_xmit` grows the head skb from
                // the next ones, `tcp_grow_skb`; a retransmitted skb is not
                // grown.)
                if self.burst_segs > 0 && !self.resend_continues_skb(i) {
                    self.end_burst(now);
                }
                continue;
            }
            if self.rexmit_only {
                break;
            }
            if in_flight >= self.c.cwnd {
                break;
            }
            if !self.has_data() {
                break;
            }
            let head_end = *self.wq_ends.front().expect("unsent data is in the write queue");
            let mut avail = head_end - self.snd_nxt;
            let mut len = avail.min(self.cfg.mss as u64);
            if len > self.send_win() {
                break; // receive window full
            }
            if self.c.packets_out == 0 {
                self.restart_after_idle(now);
            }
            if self.skb_left == 0 {
                let max_segs = if self.c.paced && self.data_segs_out >= UNPACED_SEGS {
                    self.burst_goal.saturating_sub(self.burst_segs)
                } else {
                    self.tso_segs()
                };
                // The head skb of the write queue: what one transmission may take.
                let mss = self.cfg.mss as u64;
                let room = self.c.cwnd - in_flight;
                // `tcp_cwnd_test`: one skb takes at most half of cwnd, so
                // that at least two are in flight (a window of 3 sends its
                // segments one skb each, none a GSO packet with PSH).
                let quota = room.min((self.c.cwnd / 2).max(1));
                // `tcp_grow_skb` (Linux 6.10 on): a head skb smaller than
                // what may leave takes the missing bytes from the next one,
                // so a transmission runs across the write queue's skbs.
                let want = quota.min(max_segs) as u64 * mss;
                if avail < want && self.wq_ends.len() >= 2 {
                    let grown = (head_end + (want - avail)).min(self.wq_ends[1]);
                    if grown == self.wq_ends[1] {
                        self.wq_ends.pop_front();
                    } else {
                        self.wq_ends[0] = grown;
                    }
                    avail = self.wq_ends[0] - self.snd_nxt;
                    len = avail.min(mss);
                }
                let data_segs = avail.div_ceil(mss).min(u32::MAX as u64) as u32;
                let head_is_tail = self.wq_ends.len() == 1;
                if data_segs > 1 && !push_one && self.tso_should_defer(now, room, max_segs, data_segs, head_is_tail) {
                    // Held by cwnd only if cwnd is the tighter of the two
                    // windows and its room would not take the skb (in
                    // bytes, as Linux's `cong_win` and `send_win`); else
                    // the sender waits for the receiver or for more data.
                    let cong_win = room as u64 * mss;
                    cwnd_limited = cong_win < self.send_win() && cong_win <= avail;
                    break;
                }
                // Cut at the receive window's last whole segment, as
                // `tcp_mss_split_point` cuts it (the outstanding test above
                // leaves room for at least one).
                let wnd_segs = (self.send_win() / mss).min(u32::MAX as u64) as u32;
                self.start_skb(max_segs.min(quota).min(data_segs).min(wnd_segs));
            }
            started_idle |= !sent_new && self.c.packets_out == 0;
            self.transmit_new(len, now, out);
            sent_new = true;
            below_cwnd |= self.skb_left == 0 && self.c.packets_in_flight() < self.c.cwnd;
        }
        if self.skb_left > 0 {
            self.end_skb_early(out);
            below_cwnd |= self.c.packets_in_flight() < self.c.cwnd;
        }
        if self.burst_segs > 0 {
            self.end_burst(now);
        }
        // As `tcp_write_xmit`: a full window counts however the loop ended
        // (the pacer may have stopped it first), and the window's use is
        // recorded only when new data left or cwnd held it back; sending
        // nothing for another reason (the pacer, deferral, the receive
        // window) leaves the last record as it was.
        if new_data_waiting {
            let cwnd_limited = cwnd_limited || self.c.packets_in_flight() >= self.c.cwnd;
            if sent_new || cwnd_limited {
                self.cwnd_validate(cwnd_limited);
            }
        }
        // The timer after new data: `tcp_event_new_data_sent` starts the RTO
        // when nothing was out and replaces a pending probe with it, then
        // `tcp_write_xmit` schedules a probe where one may be, which
        // replaces that RTO (so it is armed only when no probe follows).
        // An ACK's own arming, put off until now (`ack_timer_due`), is
        // replaced by that probe too; else it comes first, as in Linux.
        if sent_new {
            if self.schedule_loss_probe(now, out, false) {
                self.ack_timer_due = false;
            } else {
                self.settle_ack_timer(now, out);
                if started_idle || self.xmit_pending == XmitTimer::LossProbe {
                    self.rearm_rto(now, out);
                }
            }
            self.check_space_after_send(below_cwnd, now, out);
        }
    }

    /// Retransmissions only, as far as cwnd and pacing let them go (Linux
    /// `tcp_xmit_retransmit_queue`: new data waits for the next send).
    pub(super) fn xmit_retransmit_queue(&mut self, now: Nanos, out: &mut Out) {
        self.rexmit_only = true;
        self.write_xmit(now, out, false);
        self.rexmit_only = false;
    }

    /// Linux `tcp_tso_should_defer`: with room in cwnd and the receive
    /// window for less than a full TSO skb (`max_segs`) and less than a
    /// third of the smaller of the two windows, hold the
    /// data for the next ACK, so that the two leave as one larger skb,
    /// unless the head skb (`skb_segs`) is not the write queue's tail and
    /// the room takes it whole (no write will grow it);
    /// only outside loss recovery, while the sender sent within the last
    /// millisecond, and when the oldest segment out should be acked soon:
    /// within min(srtt/2, 1 ms). The 1 ms bound is Linux's since
    /// "tcp: fix tcp_tso_should_defer() vs large RTT" (October 2025, in
    /// 6.18 and the stable kernels): before it, half an srtt, which on long
    /// paths held flows a segment short of cwnd ACK after ACK.
    pub(super) fn tso_should_defer(&self, now: Nanos, room: u32, max_segs: u32, skb_segs: u32, skb_is_tail: bool) -> bool {
        // What may go now, in bytes: the smaller of cwnd's room and what the
        // receive window takes (Linux's `limit`).
        let mss = self.cfg.mss as u64;
        let limit = (room as u64 * mss).min(self.send_win());
        if matches!(self.c.ca_state, CaState::Recovery | CaState::Loss) || limit >= max_segs as u64 * mss {
            return false;
        }
        // An skb short of the write queue's tail gets no more data: it goes
        // once it fits.
        if !skb_is_tail && limit >= skb_segs as u64 * mss {
            return false;
        }
        if now > self.wstamp_ns() + 1_000_000 {
            return false;
        }
        // A third of the smaller window (`tcp_tso_win_divisor`).
        if limit * 3 >= self.rwnd.min(self.c.cwnd as u64 * mss) {
            return false;
        }
        match self.rtxq.front() {
            Some(head) => {
                let srtt = self.rtt.srtt_ns();
                let expected_ack = head.tx.sent_ns + srtt;
                expected_ack.saturating_sub(now) <= (srtt / 2).min(1_000_000)
            }
            None => false,
        }
    }

    /// A new skb of `segs` segments (at least one) leaves: as many as
    /// `tcp_mss_split_point` lets one transmission carry (the TSO size, or
    /// what is left of the paced burst; cwnd's room; what is left of the
    /// write queue's head skb).
    /// It is charged to the send buffer until its last segment is acked.
    pub(super) fn start_skb(&mut self, segs: u32) {
        self.skb_left = segs.max(1);
        self.skb_segs = self.skb_left;
        self.sndbuf.add_skb();
    }

    /// The receive window ended the skb before its planned size: its last
    /// segment so far closes it.
    #[cold]
    pub(super) fn end_skb_early(&mut self, out: &mut Out) {
        let sent = self.skb_segs - self.skb_left;
        self.skb_left = 0;
        if let Some(last) = self.rtxq.back_mut() {
            last.flags |= SKB_END;
            if sent >= 2 {
                if let Some(p) = out.pkts.last_mut().filter(|p| p.seq == last.seq && p.conn == self.conn_id) {
                    p.psh = true;
                }
            }
        }
    }

    /// Take `len` new bytes from the send buffer into the retransmit queue
    /// and send them. PSH marks the end of an application write (where
    /// the write queue's skb that holds it ends: Linux keeps PSH in the
    /// skb's flags, a head grown over the next skb whole takes its flags,
    /// and a split, for cwnd, the receive window or a retransmission,
    /// leaves PSH on the tail), and the last segment of an skb of two or more (`__tcp_transmit_skb` sets it
    /// on every GSO packet, so that the receiver's GRO flushes; measured
    /// on Linux 6.18, CUBIC, 10 Mbit/s, 40 ms: 42.6 % of the segments,
    /// nearly all the ends of two-segment skbs). The segment is built
    /// whole and written once: with many flows its ring slot is a cold
    /// line, and reading it back stalled there.
    pub(super) fn transmit_new(&mut self, len: u64, now: Nanos, out: &mut Out) {
        let seq = self.snd_nxt;
        let end = seq + len;
        let mut push = false;
        while let Some(&e) = self.push_seqs.front() {
            if e > end {
                break;
            }
            push |= e > seq;
            self.push_seqs.pop_front();
        }
        if len < self.cfg.mss as u64 {
            self.short_segs += 1;
        }
        // The write's end goes out where its write-queue skb ends (which
        // also ends the skb being sent).
        self.wq_push |= push;
        let push = self.wq_ends.front() == Some(&end) && {
            self.wq_ends.pop_front();
            std::mem::take(&mut self.wq_push)
        };
        self.skb_left -= 1;
        let at_end = self.skb_left == 0;
        let gso_push = at_end && self.skb_segs >= 2;
        let mut flags = if push { PUSH } else { 0 };
        if at_end {
            flags |= SKB_END;
        }
        let tx = self.rate.on_send(&self.c, now);
        self.rtxq.push_back(Seg { seq, len: len as u32, flags, tx });
        self.snd_nxt = end;
        self.c.snd_nxt = end;
        self.c.packets_out += 1;
        self.emit(seq, len as u32, push || gso_push, false, now, out);
    }

    /// Bytes the receive window takes beyond what is outstanding (Linux's
    /// `tcp_wnd_end` - `snd_nxt`).
    pub(super) fn send_win(&self) -> u64 {
        (self.snd_una + self.rwnd).saturating_sub(self.snd_nxt)
    }

    /// Segments per TSO skb or paced burst, as Linux's `tcp_tso_segs`:
    /// about 1 ms of data at the pacing rate (`sk_pacing_shift` = 10), plus
    /// 64 KB halved per 512 µs of min RTT (`tcp_tso_rtt_log` = 9: whole
    /// 64 KB skbs on sub-millisecond paths), at most 64 KB, at least the
    /// CCA's `min_tso_segs` (2; BBR's 1 below 1.2 Mbit/s).
    pub(super) fn tso_segs(&mut self) -> u32 {
        let mss = self.cfg.mss as u64;
        let mut bytes = self.c.pacing_rate >> 10;
        let r = self.c.min_rtt_us >> 9;
        if r < 32 {
            bytes += 65_536 >> r;
        }
        let min = self.cca.min_tso_segs(&mut self.c);
        ((bytes.min(65_536) / mss) as u32).max(min)
    }

    /// `tcp_wstamp_ns`: the last departure, or the paced next one.
    pub(super) fn wstamp_ns(&self) -> Nanos {
        if self.c.paced {
            self.pace_next_ns.max(self.last_send_ns)
        } else {
            self.last_send_ns
        }
    }

    /// Close a paced burst: the next may leave when this one has, at the
    /// pacing rate. A late start earns credit that shortens the gap by at
    /// most half (Linux `tcp_update_skb_after_send`).
    pub(super) fn end_burst(&mut self, now: Nanos) {
        let prior = self.pace_next_ns;
        self.pace_next_ns = self.pace_next_ns.max(now);
        if self.c.pacing_rate > 0 {
            let credit = self.pace_next_ns - prior;
            // In u64 when it fits (always, in practice): a u128 division is a slow library call.
            let len_ns = match self.burst_bytes.checked_mul(NS_PER_SEC) {
                Some(b) => b / self.c.pacing_rate,
                None => (self.burst_bytes as u128 * NS_PER_SEC as u128 / self.c.pacing_rate as u128) as Nanos,
            };
            self.pace_next_ns += len_ns - (len_ns / 2).min(credit);
        }
        self.burst_segs = 0;
        self.burst_bytes = 0;
    }

    /// `tcp_cwnd_validate`: remember whether the last window used all of cwnd.
    pub(super) fn cwnd_validate(&mut self, cwnd_limited: bool) {
        if self.snd_una >= self.cwnd_usage_seq
            || cwnd_limited
            || (!self.c.is_cwnd_limited_flag && self.c.packets_out > self.c.max_packets_out)
        {
            self.c.is_cwnd_limited_flag = cwnd_limited;
            self.c.max_packets_out = self.c.packets_out;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    /// Before sending into an empty pipe: CA_EVENT_TX_START, and Linux's
    /// slow start after idle (cwnd decays by half per RTO of idleness).
    pub(super) fn restart_after_idle(&mut self, now: Nanos) {
        if self.data_segs_out == 0 {
            return;
        }
        self.cca.cwnd_event(&mut self.c, CaEvent::TxStart);
        let idle = now.saturating_sub(self.last_send_ns);
        let rto = self.rtt.rto_ns();
        if idle > rto && !self.uses_cong_control() {
            self.c.ssthresh = self.c.ssthresh.max((self.c.cwnd >> 1) + (self.c.cwnd >> 2));
            let restart = self.cfg.init_cwnd.min(self.c.cwnd);
            let mut cwnd = self.c.cwnd;
            let mut left = idle;
            while left > rto && cwnd > restart {
                cwnd >>= 1;
                left -= rto;
            }
            self.c.cwnd = cwnd.max(restart);
        }
    }

    pub(super) fn uses_cong_control(&self) -> bool {
        self.cca.has_cong_control()
    }

    /// Index of the first segment marked lost and not yet retransmitted.
    pub(super) fn next_retransmit(&mut self) -> Option<usize> {
        if self.c.lost_out == 0 {
            return None;
        }
        let mut i = self.index_of(self.retx_hint.max(self.snd_una));
        while i < self.rtxq.len() && self.rtxq[i].seq < self.retx_end {
            let s = &self.rtxq[i];
            if s.awaits_resend() {
                self.retx_hint = s.seq;
                return Some(i);
            }
            i += 1;
        }
        debug_assert!(!self.rtxq.iter().any(Seg::awaits_resend));
        self.retx_hint = self.snd_nxt;
        self.retx_end = 0;
        None
    }

    /// Whether the segment after the just resent `i` goes in the same
    /// retransmitted skb: `i` does not end its skb and the next one is
    /// waiting to be resent too.
    fn resend_continues_skb(&self, i: usize) -> bool {
        self.rtxq[i].flags & SKB_END == 0
            && self.rtxq.get(i + 1).is_some_and(Seg::awaits_resend)
    }

    /// Send the queued segment `i` again as a retransmission in flight
    /// (Linux `tcp_retransmit_skb`: TCPCB_SACKED_RETRANS, `retrans_out`,
    /// and the count undo waits to see D-SACKed).
    pub(super) fn retransmit(&mut self, i: usize, now: Nanos, out: &mut Out) {
        self.rtxq[i].flags |= RETRANS;
        self.c.retrans_out += 1;
        self.undo.on_retransmit(now);
        self.resend(i, now, out);
    }

    /// Send the queued segment `i` again, no more (Linux
    /// `__tcp_retransmit_skb`, which a loss probe calls alone): it counts as
    /// retransmitted (Karn, the retransmission counters) and RACK judges
    /// it by this transmission, but it is in flight once, as before.
    pub(super) fn resend(&mut self, i: usize, now: Nanos, out: &mut Out) {
        let tx = self.rate.on_send(&self.c, now);
        let s = &mut self.rtxq[i];
        s.tx = tx;
        s.flags |= EVER_RETRANS;
        let (seq, len, push) = (s.seq, s.len, s.flags & PUSH != 0);
        self.stats.retrans_segs += 1;
        self.rexmits.push_back(seq);
        self.emit(seq, len, push, true, now, out);
    }

    /// What every transmission does beside the queue: counters, the packet,
    /// the paced burst.
    pub(super) fn emit(&mut self, seq: u64, len: u32, push: bool, retrans: bool, now: Nanos, out: &mut Out) {
        // PRR counts what is sent during any cwnd reduction (loss or ECN).
        if matches!(self.c.ca_state, CaState::Recovery | CaState::Cwr) {
            self.prr.on_sent();
        }
        self.stats.sent_segs += 1;
        self.data_segs_out += 1;
        self.last_send_ns = now;
        self.c.lsndtime_us = now / NS_PER_US;
        let mut p = self.packet(now);
        p.seq = seq;
        p.len = len;
        p.wire = len + self.cfg.header_bytes;
        p.psh = push;
        if !retrans && self.cwr_pending {
            p.cwr = true;
            self.cwr_pending = false;
        }
        // RFC 3168 §6.1.5, Linux `tcp_ecn_send`: retransmissions are
        // Not-ECT (an ECN queue drops them where it would mark), unless
        // the CCA needs ECN.
        if retrans && !self.opts.ca_needs_ecn {
            p.ect = false;
        }
        out.pkts.push(p);
        if self.c.paced && self.data_segs_out > UNPACED_SEGS {
            self.burst_segs += 1;
            // Linux paces the headerless skb (`tcp_update_skb_after_send`
            // takes `skb->len` of the write-queue skb): payload bytes, the
            // unit of the pacing rate, not bytes on the wire.
            self.burst_bytes += len as u64;
            if self.burst_segs >= self.burst_goal {
                self.end_burst(now);
            }
        }
    }

    /// Linux `tcp_update_pacing_rate` for CCAs that do not set it themselves:
    /// 200% of cwnd/srtt in slow start, 120% after.
    pub(super) fn update_pacing_rate(&mut self) {
        let srtt_ns = self.rtt.srtt_ns();
        if srtt_ns == 0 {
            return;
        }
        let factor = if self.c.cwnd < self.c.ssthresh / 2 { 2.0 } else { 1.2 };
        let segs = self.c.cwnd.max(self.c.packets_out) as f64;
        let rate = factor * segs * self.c.mss as f64 * NS_PER_SEC as f64 / srtt_ns as f64;
        self.c.pacing_rate = rate as u64;
    }
}
