//! One ACK (Linux's `tcp_ack`): the scoreboard and the cumulative ACK,
//! the RTT sample, the delivery-rate sample, then the loss state machine
//! (`recovery`), the congestion controller and what may be sent.

use super::*;

impl Sender {
    /// The flags `tcp_in_ack_event` gives the CCA. Linux's header prediction
    /// takes a pure ACK with the timestamp option alone and no ECE on its
    /// fast path; one with SACK blocks or ECE goes the slow path
    /// (CA_ACK_SLOWPATH, and CA_ACK_ECE only there). Either way an ACK that
    /// advances snd_una updates the window (CA_ACK_WIN_UPDATE). The window
    /// field never changes here (no receive-window autotuning).
    pub(super) fn ack_event_flags(&self, p: &Packet, una_advanced: bool) -> u32 {
        let mut flags = if una_advanced { ACK_WIN_UPDATE } else { 0 };
        if p.nsack > 0 || p.ece {
            flags |= ACK_SLOWPATH;
            if p.ece && self.opts.ecn {
                flags |= ACK_ECE;
            }
        }
        flags
    }

    /// Process an ACK (Linux `tcp_ack`) and send what it allows.
    pub fn on_ack(&mut self, p: &Packet, now: Nanos, out: &mut Out) {
        if p.syn {
            self.on_synack(p, now, out);
            return;
        }
        if self.state != State::Established || p.ack > self.snd_nxt || p.ack < self.snd_una {
            return;
        }
        self.set_now(now);
        // Every ACK carries the scaled window, which only the first can
        // raise (after the SYN-ACK's unscaled one); until data is acked
        // this may be that first ACK.
        if self.snd_una == 0 {
            self.sndbuf.see_window(self.peer_window);
        }
        let prior_in_flight = self.c.packets_in_flight();
        let prior_packets = self.c.packets_out;
        let prior_delivered = self.c.delivered;
        let prior_lost = self.c.lost;
        let prior_snd_una = self.snd_una;
        let mut rs = RateSample { prior_in_flight, ..RateSample::default() };
        self.rate.begin_ack();
        self.orig_sack_acked = false;
        self.data_sacked = false;
        self.first_sackt = None;
        self.last_sackt = None;
        self.lost_retrans = false;
        self.dsack_tlp = false;
        self.rack_set_timer = false;

        self.prior_fack = self.fack();
        let mut dsack = false;
        if self.cfg.sack && p.nsack > 0 {
            self.reord_low = self.snd_nxt;
            dsack = self.sacktag(p, &mut rs);
            // As `tcp_sacktag_write_queue`: not while recovering from a
            // timeout that may no longer be undone.
            if self.c.ca_state != CaState::Loss || self.undo.armed() {
                self.reord.check(self.reord_low, self.fack(), self.cfg.mss);
            }
        }
        let prior_sacked = self.c.sacked_out;
        let (acked, ackt, retrans_acked) = self.clean_rtx_queue(p.ack, &mut rs);
        self.rack.update_reo_wnd(rs.prior_delivered, self.c.delivered);

        // Without SACK every duplicate ACK stands for one delivered segment.
        let mut dupack = false;
        if !self.cfg.sack && acked == 0 && p.ack == prior_snd_una && self.c.packets_out > 0 && p.len == 0 {
            dupack = true;
            if self.c.sacked_out < self.c.packets_out {
                self.c.sacked_out += 1;
                self.c.delivered += 1;
            }
        }
        if !self.cfg.sack && acked > 0 {
            self.c.sacked_out = self.c.sacked_out.saturating_sub(acked);
            self.c.sacked_out = self.c.sacked_out.min(self.c.packets_out);
        }

        // RTT as Linux's tcp_clean_rtx_queue and tcp_ack_update_rtt take it.
        // srtt (`seq_rtt_us`): the oldest newly acked original transmission,
        // unless the ACK also covers a retransmission (Karn:
        // FLAG_RETRANS_DATA_ACKED voids it); else the oldest newly SACKed
        // original; else, when snd_una advanced, the echoed timestamp (RFC
        // 7323; in whole milliseconds, `ts_echo_rtt`). The min RTT filter,
        // the CCA's `pkts_acked` and the rate sample (`ca_rtt_us`): the
        // newest of the same segments, a newly SACKed one before a
        // cumulatively acked one; the echo when it stands in for srtt.
        let ackt = if retrans_acked { None } else { ackt };
        let age_us = |t: Nanos| now.saturating_sub(t) / NS_PER_US;
        let mut seq_rtt_ns = ackt.map(|(first, _)| now.saturating_sub(first));
        let mut ca_rtt_us = ackt.map(|(_, last)| age_us(last));
        // FLAG_ACK_MAYBE_DELAYED: one segment shorter than an MSS acked
        // alone with nothing sacked and nothing else delivered since it was
        // sent, typically a lone runt answered by a delayed ACK. Linux
        // compares with `tp->delivered` before `tcp_remove_reno_sacks`
        // counts the acked segment for a connection without SACK.
        // Not with FLAG_CA_ALERT: a new SACK (then `prior_sacked` > 0), a
        // D-SACK or ECE.
        let delivered_now = if self.cfg.sack { self.c.delivered } else { prior_delivered };
        let ece = p.ece && self.opts.ecn;
        let maybe_delayed = ackt.is_some()
            && acked == 1
            && prior_sacked == 0
            && !dsack
            && !ece
            && self.snd_una - prior_snd_una < self.cfg.mss as u64
            && rs.prior_delivered + 1 == delivered_now;
        if let (Some(first), Some(last)) = (self.first_sackt, self.last_sackt) {
            seq_rtt_ns = seq_rtt_ns.or(Some(now.saturating_sub(first)));
            ca_rtt_us = Some(age_us(last));
        }
        if seq_rtt_ns.is_none() && acked > 0 && p.ts_ecr > 0 {
            let echo = ts_echo_rtt(now, p.ts_ecr);
            seq_rtt_ns = Some(echo);
            ca_rtt_us = Some(echo / NS_PER_US);
        }
        rs.rtt_us = ca_rtt_us.map_or(-1, |r| r as i64);
        rs.is_ack_delayed = maybe_delayed;
        if let (Some(seq), Some(ca)) = (seq_rtt_ns, ca_rtt_us) {
            self.rtt_sample(seq, ca, maybe_delayed);
        }
        if self.snd_una > prior_snd_una {
            self.rtt.backoff = 0;
            self.rtt.update_rto();
        }
        // `tcp_clean_rtx_queue` calls the CCA on every ACK that finds data
        // outstanding (`prior_packets`), one that delivers nothing too: with
        // no segment, rs.prior_delivered stays 0 and rtt_us -1, as in Linux.
        if prior_packets > 0 {
            // Linux: mss × (delivered − rs.prior_delivered), the data
            // delivered since the newest segment this ACK covers was sent.
            let in_flight = (self.c.delivered - rs.prior_delivered).min(u32::MAX as u64) as u32;
            let s = AckSample { pkts_acked: acked, rtt_us: rs.rtt_us, in_flight };
            self.cca.pkts_acked(&mut self.c, &s);
        }

        // Loss detection without SACK; with SACK, RACK runs in
        // `fastretrans_alert` (`identify_packet_loss`).
        if !self.cfg.sack {
            self.dupack_detect(dupack, acked);
        }
        rs.acked_sacked = (self.c.delivered - prior_delivered) as u32;
        if ece {
            self.c.delivered_ce += rs.acked_sacked as u64;
        }
        let una_advanced = self.snd_una > prior_snd_una;
        let ack_flags = self.ack_event_flags(p, una_advanced);
        self.cca.in_ack_event(&mut self.c, ack_flags);

        if self.tlp_high_seq.is_some() {
            self.process_tlp_ack(p.ack, una_advanced || acked > 0);
        }
        // Linux's FLAG_NOT_DUP: the window moved, or the ACK came with data
        // (an RPC's segment carrying its peer's ACK, `len` > 0).
        let not_dup = una_advanced || p.len > 0;
        let dubious = !not_dup || self.data_sacked || ece || dsack || self.c.ca_state != CaState::Open;
        let new_first = self.fastretrans_alert(
            &AckInfo {
                una_advanced,
                prior_snd_una,
                dupack: dupack || !not_dup,
                ts_ecr: p.ts_ecr,
                ece,
                dubious,
            },
            out,
        );
        rs.losses = (self.c.lost - prior_lost) as u32;
        if ece && matches!(self.c.ca_state, CaState::Open | CaState::Disorder) {
            self.enter_cwr();
        }

        self.rate_gen(&mut rs, now);
        self.c.wstamp_ns = self.wstamp_ns();
        let handled = self.cca.cong_control(&mut self.c, &rs);
        if !handled {
            if matches!(self.c.ca_state, CaState::Recovery | CaState::Cwr) {
                self.cwnd_reduction(rs.acked_sacked, rs.losses > 0, una_advanced);
            } else if self.c.is_cwnd_limited() && (acked > 0 || (self.data_sacked && self.reord.sacks_raise_cwnd())) {
                // Linux `tcp_may_raise_cwnd`: only an ACK that advances
                // snd_una (FLAG_DATA_ACKED) grows cwnd, by all it newly
                // acked or sacked; SACKs alone wait for it (RFC 5681),
                // unless more reordering than the default has been seen.
                self.cca.cong_avoid(&mut self.c, rs.acked_sacked);
            }
            self.update_pacing_rate();
        }
        self.c.cwnd = self.c.cwnd.clamp(1, self.c.cwnd_clamp);
        if self.c.max_pacing_rate < self.c.pacing_rate {
            self.c.pacing_rate = self.c.max_pacing_rate;
        }

        // `tcp_ack`: an ACK that acked data sets the timer, unless RACK set
        // it for its reordering timeout on this ACK.
        if self.c.packets_out == 0 {
            self.clear_xmit_timer();
        } else if self.snd_una > prior_snd_una && !self.rack_set_timer {
            self.ack_timer_due = true;
        }
        if new_first {
            // Linux `tcp_xmit_recovery` with REXMIT_NEW: new data only; if
            // none could go, F-RTO gives way to conventional recovery.
            self.new_data_first = true;
            self.send(now, out);
            self.new_data_first = false;
            if self.snd_nxt > self.high_seq {
                self.check_space(now, out);
                self.settle_ack_timer(now, out);
                return;
            }
            self.frto.stop();
        }
        self.send(now, out);
        self.check_space(now, out);
        self.settle_ack_timer(now, out);
    }

    /// Close a rate sample (Linux `tcp_rate_gen`); its RTT is the ACK's
    /// `ca_rtt_us`, set in `on_ack` as `tcp_ack_update_rtt` sets it.
    pub(super) fn rate_gen(&mut self, rs: &mut RateSample, now: Nanos) {
        self.rate.gen(&mut self.c, rs, now);
        self.stats.delivery_rate_bps = self.rate.delivery_rate_bps();
    }

    /// One ACK's RTT measurement (`tcp_ack_update_rtt`): `seq_rtt` (ns) for
    /// the estimator and the flow's per-round statistic, `ca_rtt_us` for
    /// the min RTT filter (skipped if the ACK may have been delayed and is
    /// no new minimum) and the flow's minimum.
    pub(super) fn rtt_sample(&mut self, seq_rtt: Nanos, ca_rtt_us: u64, maybe_delayed: bool) {
        let first = self.rtt.srtt_ns() == 0;
        let rtt = self.rtt.sample(seq_rtt);
        // The flow's RTT statistic (docs/analysis.md "RTT statistics"): the
        // first sample, then one per round, the first after the cumulative
        // ACK passes the snd_nxt of the previous counted one — where Linux's
        // tcp_rtt_estimator calls BPF_SOCK_OPS_RTT_CB, which the linux
        // backend counts. The minimum is the min RTT filter's, as the linux
        // backend reads `tcpi_min_rtt`.
        if first || self.snd_una > self.rtt_seq {
            self.stats.rtt.add(rtt / NS_PER_US);
            self.rtt_seq = self.snd_nxt;
        }
        self.c.min_rtt_us = self.min_rtt.update(&self.c, ca_rtt_us, maybe_delayed);
        self.stats.rtt.note_min(self.c.min_rtt_us as u64);
        self.c.srtt_us = (self.rtt.srtt_ns() / NS_PER_US).max(1) as u32;
    }
}
