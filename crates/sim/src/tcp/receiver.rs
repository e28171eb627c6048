//! The receiving side: in-order delivery, an out-of-order list that yields
//! SACK blocks (most recently changed first, as Linux orders them), delayed
//! ACKs like Linux (quick ACKs at the start, one ACK per two full segments,
//! a timer for the rest), timestamp echo per RFC 7323, and ECN echo.

use super::{ConnOpts, Out, TimerKind};
use crate::config::{DelayedAck, TcpConfig};
use crate::packet::{Packet, MAX_SACK};
use crate::timer::Timer;
use netcore::Nanos;

/// Linux TCP_MAX_QUICKACKS.
const QUICKACKS: u32 = 16;

#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// When this range last grew, to order SACK blocks.
    touched: u64,
}

pub struct Receiver {
    conn_id: u32,
    forward: bool,
    sender_host: u16,
    cfg: TcpConfig,
    opts: ConnOpts,
    rcv_nxt: u64,
    /// rcv_nxt when the last ACK was sent (Linux rcv_wup).
    rcv_wup: u64,
    ooo: Vec<Range>,
    touch: u64,
    ts_recent: u64,
    quickacks: u32,
    /// RFC 3168: echo ECE from a CE mark until the sender's CWR.
    /// Accurate (DCTCP): the CE state of the latest segment.
    ce_state: bool,
    pub delack_timer: Timer,
}

impl Receiver {
    pub fn new(conn_id: u32, forward: bool, sender_host: u16, cfg: &TcpConfig, opts: ConnOpts) -> Receiver {
        Receiver {
            conn_id,
            forward,
            sender_host,
            cfg: cfg.clone(),
            opts,
            rcv_nxt: 0,
            rcv_wup: 0,
            ooo: Vec::new(),
            touch: 0,
            ts_recent: 0,
            quickacks: QUICKACKS,
            ce_state: false,
            delack_timer: Timer::default(),
        }
    }

    /// Bytes delivered in order to the application so far.
    pub fn delivered(&self) -> u64 {
        self.rcv_nxt
    }

    /// A SYN: answer with a SYN-ACK echoing its timestamp.
    pub fn on_syn(&mut self, p: &Packet, out: &mut Out) {
        self.ts_recent = p.ts_val;
        let mut a = self.ack_packet();
        a.syn = true;
        a.wire = self.cfg.header_bytes + 8;
        out.pkts.push(a);
    }

    /// A data segment; returns how many new bytes became readable in order.
    pub fn on_data(&mut self, p: &Packet, now: Nanos, out: &mut Out) -> u64 {
        let mut ce_changed = false;
        if self.opts.ecn {
            if self.opts.accurate_ecn {
                if p.ce != self.ce_state {
                    // DCTCP: first ACK what arrived under the old CE state,
                    // so the sender sees exactly which bytes were marked.
                    if self.rcv_nxt > self.rcv_wup {
                        self.send_ack(out);
                    }
                    self.ce_state = p.ce;
                    ce_changed = true;
                }
            } else if p.cwr {
                self.ce_state = p.ce;
            } else if p.ce {
                self.ce_state = true;
            }
        }
        // RFC 7323: keep the timestamp of the segment that the next ACK
        // acknowledges first, so delayed ACKs echo the oldest one.
        if p.seq <= self.rcv_wup {
            self.ts_recent = p.ts_val;
        }
        let end = p.seq + p.len as u64;
        let before = self.rcv_nxt;
        let mut immediate = false;
        if p.seq <= self.rcv_nxt && end > self.rcv_nxt {
            self.rcv_nxt = end;
            if !self.ooo.is_empty() {
                // Filling a hole: pull in what now follows, and ACK at once.
                immediate = true;
                while let Some(r) = self.ooo.first() {
                    if r.start > self.rcv_nxt {
                        break;
                    }
                    self.rcv_nxt = self.rcv_nxt.max(r.end);
                    self.ooo.remove(0);
                }
            }
        } else if p.seq > self.rcv_nxt {
            self.insert_ooo(p.seq, end);
            immediate = true;
        } else {
            immediate = true; // duplicate
        }
        // Linux 6.x: a full-sized segment with PSH (or a short one) sets
        // ICSK_ACK_PUSHED (`tcp_measure_rcv_mss`); when the application has
        // read everything queued, `tcp_cleanup_rbuf` sends the ACK at once.
        // Applications here read in-order data as soon as it arrives, and
        // nothing is left unread once no out-of-order data is held.
        if p.psh && self.rcv_nxt > before && self.ooo.is_empty() {
            immediate = true;
        }
        let unacked = self.rcv_nxt - self.rcv_wup;
        if ce_changed || self.cfg.delayed_ack == DelayedAck::Off || self.quickacks > 0 || unacked > self.cfg.mss as u64 {
            immediate = true;
        }
        if immediate {
            self.send_ack(out);
        } else if !self.delack_timer.is_armed() {
            if let Some(t) = self.delack_timer.arm(self.opts.timer_at(now + self.cfg.delack_ns)) {
                out.timers.push((t, self.conn_id, TimerKind::DelAck));
            }
        }
        self.rcv_nxt - before
    }

    fn insert_ooo(&mut self, start: u64, end: u64) {
        self.touch += 1;
        let i = self.ooo.partition_point(|r| r.end < start);
        if i < self.ooo.len() && self.ooo[i].start <= end {
            // Overlaps or touches range i; absorb any that follow.
            let r = &mut self.ooo[i];
            r.start = r.start.min(start);
            r.end = r.end.max(end);
            r.touched = self.touch;
            while i + 1 < self.ooo.len() && self.ooo[i + 1].start <= self.ooo[i].end {
                let next = self.ooo.remove(i + 1);
                self.ooo[i].end = self.ooo[i].end.max(next.end);
            }
        } else {
            self.ooo.insert(i, Range { start, end, touched: self.touch });
        }
    }

    /// Send the pending ACK now (the application is about to write, so the
    /// ACK would ride on its data, or a timer expired).
    pub fn flush_ack(&mut self, out: &mut Out) {
        if self.rcv_nxt > self.rcv_wup || self.delack_timer.is_armed() {
            self.send_ack(out);
        }
    }

    pub fn on_delack_timer(&mut self, now: Nanos, out: &mut Out) {
        let (expired, again) = self.delack_timer.fire(now);
        if let Some(t) = again {
            out.timers.push((t, self.conn_id, TimerKind::DelAck));
        }
        if expired {
            self.send_ack(out);
        }
    }

    fn ack_packet(&self) -> Packet {
        Packet {
            conn: self.conn_id,
            to_receiver: false,
            // ACKs travel against the data.
            forward: !self.forward,
            sender_host: self.sender_host,
            ack: self.rcv_nxt,
            ts_ecr: self.ts_recent,
            wire: self.cfg.header_bytes,
            class: self.opts.class,
            ..Packet::default()
        }
    }

    fn send_ack(&mut self, out: &mut Out) {
        self.delack_timer.cancel();
        if self.quickacks > 0 {
            self.quickacks -= 1;
        }
        let mut a = self.ack_packet();
        a.ece = self.opts.ecn && self.ce_state;
        if self.cfg.sack && !self.ooo.is_empty() {
            // The most recently changed blocks first (RFC 2018).
            let mut picked: [usize; MAX_SACK] = [usize::MAX; MAX_SACK];
            let mut n = 0;
            while n < MAX_SACK {
                let mut best: Option<usize> = None;
                for (i, r) in self.ooo.iter().enumerate() {
                    if picked[..n].contains(&i) {
                        continue;
                    }
                    if best.map_or(true, |b| r.touched > self.ooo[b].touched) {
                        best = Some(i);
                    }
                }
                match best {
                    Some(b) => {
                        picked[n] = b;
                        a.sack[n] = (self.ooo[b].start, self.ooo[b].end);
                        n += 1;
                    }
                    None => break,
                }
            }
            a.nsack = n as u8;
            a.wire += 4 + 8 * n as u32;
        }
        self.rcv_wup = self.rcv_nxt;
        out.pkts.push(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_cfg as tcp_cfg;

    fn seg(seq: u64, psh: bool) -> Packet {
        Packet { to_receiver: true, seq, len: 1448, psh, ..Packet::default() }
    }

    /// After quick-ACK mode, a lone full-sized segment waits for the
    /// delayed-ACK timer, but one with PSH is acknowledged at once (Linux
    /// 6.x: ICSK_ACK_PUSHED, then `tcp_cleanup_rbuf` once the reader has
    /// drained the queue).
    #[test]
    fn pushed_segment_is_acked_at_once() {
        let mut r = Receiver::new(0, true, 0, &tcp_cfg(), ConnOpts::default());
        let mut out = Out::default();
        let mut seq = 0;
        // Leave quick-ACK mode: every segment so far is ACKed immediately.
        for _ in 0..QUICKACKS {
            out.clear();
            r.on_data(&seg(seq, false), 0, &mut out);
            assert_eq!(out.pkts.len(), 1);
            seq += 1448;
        }
        out.clear();
        r.on_data(&seg(seq, false), 0, &mut out);
        assert!(out.pkts.is_empty(), "a lone segment without PSH waits");
        assert_eq!(out.timers.len(), 1);
        seq += 1448;
        out.clear();
        r.on_data(&seg(seq, false), 0, &mut out);
        assert_eq!(out.pkts.len(), 1, "two segments are ACKed");
        seq += 1448;
        out.clear();
        r.on_data(&seg(seq, true), 0, &mut out);
        assert_eq!(out.pkts.len(), 1, "a lone PSH segment is ACKed at once");
        assert_eq!(out.pkts[0].ack, seq + 1448);
        assert!(!r.delack_timer.is_armed());
    }
}
