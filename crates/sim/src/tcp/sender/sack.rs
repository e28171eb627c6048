//! The retransmit queue's SACK scoreboard (Linux's
//! `tcp_sacktag_write_queue`, `tcp_check_dsack` and `tcp_clean_rtx_queue`):
//! tagging SACKed segments, D-SACK, cutting and merging skbs, and freeing
//! what the cumulative ACK covers.

use super::*;

impl Sender {
    /// Index of the segment holding sequence `seq` (or the first after it).
    pub(super) fn index_of(&self, seq: u64) -> usize {
        // Segments are mostly one MSS long: try the index that gives, and
        // keep it when it is the partition point (it is called per ACK).
        if let (Some(first), Some(last)) = (self.rtxq.front(), self.rtxq.back()) {
            if seq >= last.end() {
                return self.rtxq.len(); // past the queue, as hints often are
            }
            let guess = (seq.saturating_sub(first.seq) / self.cfg.mss as u64) as usize;
            if self.short_segs == 0 {
                // Contiguous full-sized segments: the guess is the answer.
                debug_assert_eq!(guess, self.rtxq.partition_point(|s| s.end() <= seq));
                return guess;
            }
            if guess < self.rtxq.len()
                && self.rtxq[guess].end() > seq
                && (guess == 0 || self.rtxq[guess - 1].end() <= seq)
            {
                return guess;
            }
        }
        self.rtxq.partition_point(|s| s.end() <= seq)
    }

    /// Mark segments covered by new SACK blocks (Linux `tcp_sacktag_write_queue`),
    /// skipping parts the previous ACK already reported. Returns whether the
    /// ACK carried a D-SACK (FLAG_DSACKING_ACK).
    pub(super) fn sacktag(&mut self, p: &Packet, rs: &mut RateSample) -> bool {
        let cache = self.sack_cache;
        let ncache = self.nsack_cache;
        let first = if self.check_dsack(p) { 1 } else { 0 };
        // In sequence order, as Linux sorts them: RACK keeps the RTT of the
        // last segment it is told about.
        let mut blocks = [(0, 0); crate::packet::MAX_SACK];
        let n = p.nsack as usize - first;
        for (j, b) in blocks[..n].iter_mut().enumerate() {
            *b = p.sack(first + j);
        }
        blocks[..n].sort_unstable();
        for &(start, end) in &blocks[..n] {
            let start = start.max(self.snd_una);
            if start >= end || end > self.snd_nxt {
                continue;
            }
            // Walk [start, end) minus the cached blocks.
            let mut pos = start;
            while pos < end {
                let mut next_pos = end;
                let mut covered_to = None;
                for &(cs, ce) in &cache[..ncache] {
                    if cs <= pos && pos < ce {
                        covered_to = Some(ce);
                        break;
                    }
                    if cs > pos && cs < next_pos {
                        next_pos = cs;
                    }
                }
                if let Some(ce) = covered_to {
                    pos = ce.min(end);
                    continue;
                }
                self.sack_range(pos, next_pos, rs);
                pos = next_pos;
            }
        }
        self.sack_cache = [(0, 0); crate::packet::MAX_SACK];
        for (j, c) in self.sack_cache[..n].iter_mut().enumerate() {
            *c = p.sack(first + j);
        }
        self.nsack_cache = n;
        first == 1
    }

    /// D-SACK (RFC 2883, Linux `tcp_check_dsack`): a first block below the
    /// cumulative ACK, or inside the second block, reports data that arrived
    /// twice. Each such retransmission was unnecessary (`undo_retrans`).
    pub(super) fn check_dsack(&mut self, p: &Packet) -> bool {
        let (start, end) = p.sack(0);
        let dup = start < p.ack || (p.nsack > 1 && start >= p.sack(1).0 && end <= p.sack(1).1);
        if !dup || start >= end {
            return dup;
        }
        if end - start <= self.cfg.mss as u64 && self.tlp_high_seq == Some(end) {
            self.dsack_tlp = true;
        }
        // The simulated network never duplicates a packet: every D-SACK is
        // of a retransmission (Linux checks `dsack_dups <= total_retrans`).
        self.rack.on_dsack(&self.reord, self.dsack_tlp);
        if end <= self.snd_una {
            // Already cumulatively acked: count segments of its length.
            let segs = (end - start).div_ceil(self.cfg.mss as u64).max(1) as u32;
            self.undo.on_dsack(end, segs);
        } else {
            let mut i = self.index_of(start);
            while i < self.rtxq.len() && self.rtxq[i].seq < end {
                let s = self.rtxq[i];
                if s.seq >= start && s.end() <= end && s.flags & EVER_RETRANS != 0 {
                    self.undo.on_dsack(s.end(), 1);
                    // Both copies arrived, the retransmission after data
                    // above it (`tcp_sacktag_one` on a D-SACK).
                    if s.flags & SACKED != 0 {
                        self.reord_low = self.reord_low.min(s.seq);
                    }
                }
                i += 1;
            }
        }
        true
    }

    pub(super) fn sack_range(&mut self, start: u64, end: u64, rs: &mut RateSample) {
        let mut i = self.index_of(start);
        while i < self.rtxq.len() {
            let s = self.rtxq[i];
            if s.end() > end {
                break;
            }
            if s.seq >= start && s.flags & SACKED == 0 {
                self.data_sacked = true;
                if s.flags & EVER_RETRANS == 0 {
                    if s.end() <= self.high_seq {
                        self.orig_sack_acked = true;
                    }
                    // Sent once and SACKed below an earlier SACK: it was
                    // overtaken (`tcp_sacktag_one`).
                    if s.seq < self.prior_fack {
                        self.reord_low = self.reord_low.min(s.seq);
                    }
                    self.first_sackt = self.first_sackt.or(Some(s.tx.sent_ns));
                    self.last_sackt = Some(s.tx.sent_ns);
                }
                self.mark_delivered(i, rs);
                let s = &mut self.rtxq[i];
                if s.flags & LOST != 0 {
                    self.c.lost_out -= 1;
                }
                if s.flags & RETRANS != 0 {
                    self.c.retrans_out -= 1;
                }
                s.flags = (s.flags | SACKED) & !(LOST | RETRANS);
                self.highest_sack = self.highest_sack.max(s.end());
                self.c.sacked_out += 1;
                self.resegment_sacked(i);
            }
            i += 1;
        }
    }

    /// The skbs around a newly SACKed segment `i`, as Linux's SACK tagging
    /// leaves them: an skb only partly SACKed is cut at the SACK's edge
    /// (`tcp_fragment` in `tcp_match_skb_to_sack`; the new skb is charged
    /// its overhead), and a SACKed skb right after a SACKed skb moves its
    /// data into that one and is freed (`tcp_shift_skb_data`; its
    /// overhead leaves the send buffer, which `check_space` may then find
    /// a third free during recovery).
    /// So every skb is wholly SACKed or not at all, and runs SACKed in
    /// sequence order become one skb.
    pub(super) fn resegment_sacked(&mut self, i: usize) {
        if i > 0 && self.rtxq[i - 1].flags & SKB_END == 0 {
            self.rtxq[i - 1].flags |= SKB_END;
            self.sndbuf.add_skb();
        }
        if self.rtxq[i].flags & SKB_END == 0 {
            self.rtxq[i].flags |= SKB_END;
            self.sndbuf.add_skb();
        }
        if i > 0 && self.rtxq[i - 1].flags & SACKED != 0 {
            self.rtxq[i - 1].flags &= !SKB_END;
            self.sndbuf.on_skb_freed();
        }
    }

    /// A segment reached the receiver: count it and feed the rate sample
    /// (Linux `tcp_rate_skb_delivered`) and RACK.
    pub(super) fn mark_delivered(&mut self, i: usize, rs: &mut RateSample) {
        let s = &mut self.rtxq[i];
        self.c.delivered += 1;
        let (end, retrans) = (s.end(), s.flags & EVER_RETRANS != 0);
        self.rate.on_delivered(&self.c, rs, &mut s.tx, end, retrans);
        let sent = s.tx.sent_ns;
        self.rack.advance(sent, end, retrans, self.c.now_ns, self.c.min_rtt_us);
    }

    /// Remove cumulatively acked segments. Returns how many, the send times
    /// of the first and the last of them that were neither retransmitted
    /// nor SACKed before (Linux `first_ackt`, `last_ackt`), and whether a
    /// retransmission was acked.
    pub(super) fn clean_rtx_queue(&mut self, ack: u64, rs: &mut RateSample) -> (u32, Option<(Nanos, Nanos)>, bool) {
        let mut acked = 0;
        let mut ackt: Option<(Nanos, Nanos)> = None;
        let mut retrans_acked = false;
        let mut reord = self.snd_nxt;
        while let Some(s) = self.rtxq.front() {
            if s.end() > ack {
                break;
            }
            let s = *s;
            if s.flags & SACKED == 0 {
                self.mark_delivered(0, rs);
            } else {
                self.c.sacked_out -= 1;
            }
            if s.flags & LOST != 0 && s.flags & SACKED == 0 {
                self.c.lost_out -= 1;
            }
            if s.flags & RETRANS != 0 {
                self.c.retrans_out -= 1;
            }
            if s.flags & SKB_END != 0 {
                self.sndbuf.on_skb_freed();
            }
            if s.flags & EVER_RETRANS != 0 {
                retrans_acked = true;
            } else if s.flags & SACKED == 0 {
                let first = ackt.map_or(s.tx.sent_ns, |(f, _)| f);
                ackt = Some((first, s.tx.sent_ns));
                reord = reord.min(s.seq);
                if s.end() <= self.high_seq {
                    self.orig_sack_acked = true;
                }
            }
            self.c.packets_out -= 1;
            acked += 1;
            if s.len < self.cfg.mss {
                self.short_segs -= 1;
            }
            self.rtxq.pop_front();
        }
        // A ring cycles through all the capacity it ever grew to: after a
        // window's peak, each new segment would take a slot untouched for
        // many round trips (a cache miss per segment with many flows).
        if acked > 0 && self.rtxq.capacity() > 32 && self.rtxq.len() * 4 < self.rtxq.capacity() {
            self.rtxq.shrink_to(self.rtxq.len() * 2);
        }
        if ack > self.snd_una {
            self.snd_una = ack;
            self.c.snd_una = ack;
        }
        // A never-retransmitted hole below the highest SACK filled
        // (`tcp_clean_rtx_queue`): reordering.
        if self.cfg.sack && reord < self.prior_fack {
            self.reord.check(reord, self.fack(), self.cfg.mss);
        }
        (acked, ackt, retrans_acked)
    }
}
