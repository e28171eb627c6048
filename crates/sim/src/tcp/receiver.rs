//! The receiving side: in-order delivery, an out-of-order list that yields
//! SACK blocks (most recently changed first, as Linux orders them), delayed
//! ACKs like Linux (quick ACKs at the start, one ACK per two full segments,
//! a timer for the rest), timestamp echo per RFC 7323, and ECN echo.
//!
//! The ACKs Linux sends from the application's read: a bulk receiver's
//! window sits at its clamp, so while the segment that just arrived is
//! unread the right edge would not advance, and `__tcp_ack_snd_check`
//! holds the one-per-two-segments ACK; the read (`tcp_cleanup_rbuf`)
//! sends it, and the ACK of a pushed segment too. By default the
//! application reads at once, which is the same as acknowledging on
//! arrival; with `[tcp] read_latency` (`jitter::Latency`) it reads
//! later, and what arrived meanwhile is acknowledged together.

use super::{ConnOpts, Out, TimerKind};
use crate::cc::util::{jiffies_at_hz, jiffy_start_us, timer_wheel_jiffy, usecs_to_jiffies_hz};
use crate::config::{DelayedAck, TcpConfig};
use crate::jitter::Latency;
use crate::packet::{Packet, MAX_SACK};
use crate::timer::Timer;
use netcore::Nanos;
use std::sync::Arc;

/// Linux TCP_MAX_QUICKACKS.
const QUICKACKS: u32 = 16;
/// The quick ACKs a first CE mark or a Not-ECT segment asks for
/// (`tcp_data_ecn_check`).
const CE_QUICKACKS: u32 = 2;
/// Segments shorter than this do not grow the window (`tcp_event_data_recv`).
const GROW_MIN_LEN: u32 = 128;

/// SACK compression (Linux `__tcp_ack_snd_check`, since 4.19): while data
/// is held out of order, the first TCP_FASTRETRANS_THRESH ACKs after each
/// change of rcv_nxt go out at once; later ones wait on a timer of 5 % of
/// the RTT, at most `tcp_comp_sack_delay_ns`, so that one ACK covers up to
/// `tcp_comp_sack_nr` segments. The defaults of the sysctls.
const COMP_SACK_DUPACKS: u32 = 3;
const COMP_SACK_NR: u32 = 44;
const COMP_SACK_DELAY_NS: Nanos = 1_000_000;
/// `tcp_comp_sack_slack_ns`: the hrtimer's range. It fires at the end of
/// the range unless another timer interrupt comes first: measured at the
/// linux backend's receiver (10 ms path, RTT 10.3 ms), compressed SACKs
/// left 0.63 ms after the segment they answer = 0.515 ms + 0.1 ms + ~15 us
/// of softirq latency (docs/validation/README.md, BBR's RTT).
const COMP_SACK_SLACK_NS: Nanos = 100_000;
/// Linux TCP_NUM_SACKS: the SACK blocks a receiver keeps (it sends at most
/// three of them beside timestamps).
const HELD_SACKS: usize = 4;

/// Receive-buffer memory (`skb->truesize`) of one full-sized segment in
/// Linux: the packet's buffer is a power-of-two block holding the frame,
/// NET_SKB_PAD headroom and `skb_shared_info`, plus the `sk_buff` itself.
/// 2304 bytes for a 1448-byte payload, as measured through the linux
/// backend: window_clamp = 6 MiB × 160/256.
fn segment_truesize(mss: u32, header_bytes: u32) -> u64 {
    const ETH: u32 = 14;
    const NET_SKB_PAD: u32 = 64;
    const SHINFO: u32 = 320;
    const SK_BUFF: u64 = 256;
    (mss + header_bytes + ETH + NET_SKB_PAD + SHINFO).next_power_of_two() as u64 + SK_BUFF
}

/// Linux's receive-window growth (`tcp_grow_window`): the window starts at
/// half the receive buffer (`tcp_win_from_space` with the default scaling
/// ratio of 1/2); the first segment sets the ratio to payload/truesize,
/// which raises `window_clamp`, and `rcv_ssthresh` climbs towards it by
/// two segments per segment received. Every step sets the quick-ACK
/// counter's low bit, so the receiver ACKs every segment until the window
/// has grown, and then for the quick ACKs left.
#[derive(Clone, Copy, Debug)]
struct WindowGrowth {
    rcv_ssthresh: u64,
    window_clamp: u64,
}

/// The largest window the receiver advertises, in bytes of sequence space:
/// Linux's `window_clamp`, the receive buffer scaled by payload/truesize
/// (`tcp_win_from_space` once the first segment set `scaling_ratio`):
/// 0.625 × `rmem` for 1448-byte segments. The simulator's ACKs carry no
/// window, so the sender takes its limit from here.
pub fn max_window(mss: u32, header_bytes: u32, rmem_bytes: u64) -> u64 {
    let ratio = ((mss as u64) << 8) / segment_truesize(mss, header_bytes);
    (rmem_bytes * ratio) >> 8
}

impl WindowGrowth {
    fn new(cfg: &TcpConfig) -> WindowGrowth {
        WindowGrowth { rcv_ssthresh: cfg.rmem_bytes / 2, window_clamp: max_window(cfg.mss, cfg.header_bytes, cfg.rmem_bytes) }
    }

    /// A data segment of `len` bytes arrived: whether the window grew.
    fn grow(&mut self, len: u32, mss: u32) -> bool {
        if len < GROW_MIN_LEN || self.rcv_ssthresh >= self.window_clamp {
            return false;
        }
        let incr = 2 * len.max(mss) as u64;
        self.rcv_ssthresh += incr.min(self.window_clamp - self.rcv_ssthresh);
        true
    }
}

#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// When this range last grew, to order SACK blocks.
    touched: u64,
}

pub struct Receiver {
    conn_id: u32,
    /// The route of the ACKs (against the data).
    route: u32,
    /// Shared by every connection of a run: one copy stays cached.
    cfg: Arc<TcpConfig>,
    opts: ConnOpts,
    rcv_nxt: u64,
    /// rcv_nxt when the last ACK was sent (Linux rcv_wup).
    rcv_wup: u64,
    ooo: Vec<Range>,
    touch: u64,
    /// The SACK blocks of the next ACK: the most recently changed ranges of
    /// `ooo`, newest first, kept up to date as ranges change (a range keeps
    /// its bounds until it is touched again or removed), so that an ACK
    /// need not scan a long out-of-order list.
    sack_blocks: [(u64, u64); MAX_SACK],
    nsack: usize,
    ts_recent: u64,
    /// Data that arrived twice, reported once as the first SACK block of
    /// the next ACK (D-SACK, RFC 2883; Linux `tcp_dsack_set`).
    dsack: Option<(u64, u64)>,
    quickacks: u32,
    /// Linux's ping-pong (interactive) mode, `icsk_ack.pingpong` at
    /// `tcp_pingpong_thresh` 1: set when the application replies within
    /// `ato` of the last in-order data (`on_reply_sent`); left when the
    /// delayed-ACK timer fires with an ACK owed, or when data arrives a
    /// second time. In it neither quick-ACK mode nor PSH makes an ACK go
    /// at once: it waits for the reply's data to carry it.
    pingpong: bool,
    /// CONFIG_HZ of the modelled kernel: the delayed-ACK machinery below
    /// counts jiffies, as Linux's does.
    hz: u64,
    /// TCP_ATO_MIN and TCP_DELACK_MIN (HZ/25, 40 ms) in jiffies: `[tcp]`'s
    /// delayed-ACK time.
    ato_min: u64,
    /// `tcp_delack_max` in jiffies: TCP_DELACK_MAX (HZ/5), or the minimum
    /// RTO less a jiffy if that is less; it bounds every delayed ACK.
    delack_max: u64,
    /// Linux `icsk_ack.ato` in jiffies (0 before any in-order data): how
    /// long a delayed ACK waits, adapted to the gaps between segments
    /// (`adapt_ato`) and doubled when the timer fires (`on_delack_timer`).
    ato: u64,
    /// The jiffy in-order data last arrived (`icsk_ack.lrcvtime`); None before any.
    lrcvtime: Option<u64>,
    /// The jiffy the armed delayed-ACK timer is due (`icsk_ack.timeout`).
    delack_due: u64,
    /// A pushed or short segment arrived since the last ACK (Linux
    /// ICSK_ACK_PUSHED, set in `tcp_measure_rcv_mss`).
    ack_pushed: bool,
    window: WindowGrowth,
    /// RFC 3168: echo ECE from a CE mark until the sender's CWR.
    /// Accurate (DCTCP): the CE state of the latest segment.
    ce_state: bool,
    /// RFC 3168: ECT or CE data has arrived (Linux TCP_ECN_SEEN).
    ect_seen: bool,
    pub delack_timer: Timer,
    /// SACK compression: ACKs held (Linux `compressed_ack`), ACKs sent at
    /// once since rcv_nxt last moved (`dup_ack_counter`) and the rcv_nxt
    /// they count from, and the timer.
    compressed: u32,
    dup_acks: u32,
    comp_rcv_nxt: u64,
    comp_timer: Timer,
    /// When the SYN-ACK left, then the RTT the handshake measured (Linux's
    /// passive-side `srtt_us`, the lower of which and the receiver's own
    /// estimate sets the compression delay: here always the handshake's,
    /// as the receiver's estimate includes queueing).
    synack_ns: Option<Nanos>,
    handshake_rtt_ns: Nanos,
    /// The application's read latency (None: it reads at once), whether a
    /// read is due, and whether that read owes the ACK of a pushed segment.
    read: Option<Box<Latency>>,
    read_due: bool,
    read_pushed: bool,
}

impl Receiver {
    pub fn new(conn_id: u32, route: u32, cfg: Arc<TcpConfig>, opts: ConnOpts) -> Receiver {
        let hz = cfg.kernel_hz.unwrap_or(1000) as u64;
        Receiver {
            conn_id,
            route,
            cfg: cfg.clone(),
            opts,
            rcv_nxt: 0,
            rcv_wup: 0,
            ooo: Vec::new(),
            touch: 0,
            sack_blocks: [(0, 0); MAX_SACK],
            nsack: 0,
            ts_recent: 0,
            dsack: None,
            quickacks: QUICKACKS,
            pingpong: false,
            hz,
            ato_min: usecs_to_jiffies_hz(cfg.delack_ns / 1000, hz),
            delack_max: (hz / 5).min(usecs_to_jiffies_hz(cfg.min_rto_ns / 1000, hz).max(2) - 1),
            ato: 0,
            lrcvtime: None,
            delack_due: 0,
            ack_pushed: false,
            window: WindowGrowth::new(&cfg),
            ce_state: false,
            ect_seen: false,
            delack_timer: Timer::default(),
            compressed: 0,
            dup_acks: 0,
            comp_rcv_nxt: 0,
            comp_timer: Timer::default(),
            synack_ns: None,
            handshake_rtt_ns: 0,
            read: None,
            read_due: false,
            read_pushed: false,
        }
    }

    /// The application reads with this latency instead of at once.
    pub fn set_read_latency(&mut self, r: Latency) {
        self.read = Some(Box::new(r));
    }

    /// Send ACKs over this route from now on.
    pub fn set_route(&mut self, route: u32) {
        self.route = route;
    }

    /// Bytes delivered in order to the application so far.
    pub fn delivered(&self) -> u64 {
        self.rcv_nxt
    }

    /// A SYN: answer with a SYN-ACK echoing its timestamp.
    pub fn on_syn(&mut self, p: &Packet, now: Nanos, out: &mut Out) {
        self.ts_recent = p.ts_val;
        self.synack_ns = Some(now);
        let mut a = self.ack_packet();
        a.syn = true;
        a.wire = self.cfg.header_bytes + 8;
        out.pkts.push(a);
    }

    /// A data segment; returns how many new bytes became readable in order.
    pub fn on_data(&mut self, p: &Packet, now: Nanos, out: &mut Out) -> u64 {
        if let Some(t) = self.synack_ns.take() {
            self.handshake_rtt_ns = now.saturating_sub(t);
        }
        let end = p.seq + p.len as u64;
        let new_data = end > self.rcv_nxt;
        let mut ce_changed = false;
        let mut immediate = false;
        if self.opts.ecn {
            // Linux `tcp_ecn_accept_cwr`: the sender says it cut its window,
            // perhaps to one packet: data with CWR is acknowledged at once.
            if p.cwr && p.len > 0 {
                immediate = true;
            }
            if self.opts.ca_needs_ecn {
                // Linux `tcp_data_ecn_check` (new data only) raises DCTCP's
                // CE events.
                if new_data && p.ce != self.ce_state {
                    // DCTCP: first ACK what arrived under the old CE state,
                    // so the sender sees exactly which bytes were marked.
                    if self.rcv_nxt > self.rcv_wup {
                        self.send_ack(out);
                    }
                    self.ce_state = p.ce;
                    ce_changed = true;
                }
            } else {
                if p.cwr {
                    self.ce_state = false;
                }
                // Linux `tcp_ecn_check_ce` (new data only): the first CE
                // mark since the sender's last CWR gives two quick ACKs, as
                // the sender may have a very small window.
                if p.ce && new_data && !self.ce_state {
                    self.ce_state = true;
                    self.enter_quickack_mode(CE_QUICKACKS);
                }
            }
            // Linux `tcp_data_ecn_check` (new data only): a Not-ECT segment
            // after ECT ones is taken for a retransmission and gets two
            // quick ACKs. DCTCP's retransmissions stay ECT.
            if new_data {
                if p.ect || p.ce {
                    self.ect_seen = true;
                } else if self.ect_seen {
                    self.enter_quickack_mode(CE_QUICKACKS);
                }
            }
        }
        // RFC 7323: keep the timestamp of the segment that the next ACK
        // acknowledges first, so delayed ACKs echo the oldest one.
        if p.seq <= self.rcv_wup {
            self.ts_recent = p.ts_val;
        }
        let before = self.rcv_nxt;
        if new_data && self.window.grow(p.len, self.cfg.mss) {
            self.quickacks |= 1;
        }
        if self.cfg.sack {
            self.note_duplicate(p.seq, end);
        }
        if p.seq <= self.rcv_nxt && end > self.rcv_nxt {
            self.adapt_ato(now);
            self.ack_pushed |= p.psh || p.len < self.cfg.mss;
            self.rcv_nxt = end;
            if !self.ooo.is_empty() {
                // Filling a hole: pull in what now follows; ACK at once if
                // no hole is left (ICSK_ACK_NOW), else as SACK compression
                // says (rcv_nxt moved: the first ACKs go at once).
                let mut k = 0;
                while let Some(r) = self.ooo.get(k) {
                    if r.start > self.rcv_nxt {
                        break;
                    }
                    self.rcv_nxt = self.rcv_nxt.max(r.end);
                    k += 1;
                }
                if k > 0 {
                    self.ooo.drain(..k);
                    let rcv_nxt = self.rcv_nxt;
                    self.drop_sack_blocks(|(s, _)| s <= rcv_nxt);
                    self.refill_sack_blocks();
                }
                immediate = self.ooo.is_empty();
            }
        } else if p.seq > self.rcv_nxt {
            // Linux `tcp_sack_new_ofo_skb`: a new SACK block when the
            // receiver already holds TCP_NUM_SACKS forgets the oldest, so
            // the held (compressed) ACK goes first, before its news is lost.
            if self.compressed > 0 && self.ooo.len() >= HELD_SACKS {
                let i = self.ooo_index(p.seq, true); // the range insert_ooo would join
                if self.ooo.get(i).is_none_or(|r| r.start > end) {
                    self.send_ack(out);
                }
            }
            self.insert_ooo(p.seq, end);
        } else {
            // Data that arrived before (Linux `tcp_data_queue`, old data: a
            // retransmission the sender need not have sent, or whose ACK was
            // lost): an ACK at once, and quick ACKs for what follows, out of
            // ping-pong mode.
            immediate = true;
            self.enter_quickack_mode(QUICKACKS);
        }
        // Linux 6.x: a full-sized segment with PSH (or a short one) sets
        // ICSK_ACK_PUSHED (`tcp_measure_rcv_mss`); when the application has
        // read everything queued, `tcp_cleanup_rbuf` sends the ACK at once,
        // unless the connection is in ping-pong mode (RPC).
        // Applications here read in-order data as soon as it arrives (or
        // after their read latency, below), and nothing is left unread
        // once no out-of-order data is held.
        let pushed = p.psh && !self.pingpong && self.rcv_nxt > before && self.ooo.is_empty();
        let unacked = self.rcv_nxt - self.rcv_wup;
        // Linux `tcp_in_quickack_mode`: quick ACKs only outside ping-pong mode.
        let quick = self.quickacks > 0 && !self.pingpong;
        if ce_changed || self.cfg.delayed_ack == DelayedAck::Off || quick {
            immediate = true;
        }
        // What the read acknowledges: at once, or when a late reader reads.
        if !immediate && (pushed || unacked > self.cfg.mss as u64) {
            match self.read.as_mut() {
                None => immediate = true,
                Some(r) => {
                    self.read_pushed |= pushed;
                    if !self.read_due {
                        self.read_due = true;
                        out.timers.push((now + r.draw(), self.conn_id, TimerKind::Read));
                    }
                }
            }
        }
        if immediate {
            self.send_ack(out);
        } else if !self.ooo.is_empty() {
            self.compress_sack(now, out);
        } else {
            self.send_delayed_ack(now, out);
        }
        self.rcv_nxt - before
    }

    /// Linux `tcp_event_data_recv` on in-order data: `ato` follows the gap
    /// since the last in-order segment, in jiffies. It starts at
    /// TCP_ATO_MIN; a gap of at most half that halves it towards
    /// TCP_ATO_MIN; a gap shorter than `ato` makes it half itself plus the
    /// gap (at most the RTO); a silence longer than the RTO (the sender
    /// "failed to restart its window", such as after its own timeout)
    /// restores the quick ACKs instead. (The first segment's quick ACKs
    /// are the constructor's.)
    fn adapt_ato(&mut self, now: Nanos) {
        let now_j = self.jiffies_at(now);
        let ato_min = self.ato_min;
        if self.ato == 0 {
            self.ato = ato_min;
        } else {
            let m = now_j - self.lrcvtime.unwrap_or(now_j);
            if m <= ato_min / 2 {
                self.ato = self.ato / 2 + ato_min / 2;
            } else if m < self.ato {
                self.ato = (self.ato / 2 + m).min(self.rto_jiffies());
            } else if m > self.rto_jiffies() {
                self.incr_quickack(QUICKACKS);
            }
        }
        self.lrcvtime = Some(now_j);
    }

    /// Linux `tcp_send_delayed_ack`: arm the timer `ato` jiffies ahead,
    /// where an `ato` above TCP_DELACK_MIN is bounded by the receiver's
    /// smoothed RTT (at least TCP_DELACK_MIN) and by half a second
    /// (TCP_DELACK_MAX in ping-pong mode or after a pushed segment), and
    /// every `ato` by `tcp_delack_max` (TCP_DELACK_MAX, or the minimum RTO
    /// less a jiffy if that is less). A timer already armed keeps its
    /// earlier expiry, and one due within a quarter of `ato` sends the ACK
    /// now. The timer runs on the timer wheel's jiffy, as the
    /// retransmission timer does (`timer_wheel_jiffy`).
    fn send_delayed_ack(&mut self, now: Nanos, out: &mut Out) {
        let now_j = self.jiffies_at(now);
        let delack_min = self.ato_min;
        let mut ato = self.ato;
        if ato > delack_min {
            let mut max_ato = if self.pingpong || self.ack_pushed { self.hz / 5 } else { self.hz / 2 };
            if self.handshake_rtt_ns > 0 {
                max_ato = max_ato.min(self.jiffies_of_ns(self.handshake_rtt_ns).max(delack_min));
            }
            ato = ato.min(max_ato);
        }
        ato = ato.min(self.delack_max);
        let mut due = now_j + ato;
        if self.delack_timer.is_armed() {
            if self.delack_due <= now_j + ato / 4 {
                self.send_ack(out);
                return;
            }
            due = due.min(self.delack_due);
        }
        self.delack_due = due;
        let at = jiffy_start_us(timer_wheel_jiffy(due, now_j), self.hz) * 1000;
        if let Some(t) = self.delack_timer.arm(self.opts.timer_at(at)) {
            out.timers.push((t, self.conn_id, TimerKind::DelAck));
        }
    }

    /// `jiffies` at `now`.
    fn jiffies_at(&self, now: Nanos) -> u64 {
        jiffies_at_hz(now / 1000, self.hz)
    }

    /// `usecs_to_jiffies` of a duration (rounds up).
    fn jiffies_of_ns(&self, ns: Nanos) -> u64 {
        usecs_to_jiffies_hz(ns / 1000, self.hz)
    }

    /// An ACK owed while data is held out of order (Linux
    /// `__tcp_ack_snd_check` with a non-empty out-of-order queue).
    fn compress_sack(&mut self, now: Nanos, out: &mut Out) {
        if !self.cfg.sack || !self.cfg.sack_compression || self.compressed >= COMP_SACK_NR {
            self.send_ack(out);
            return;
        }
        if self.comp_rcv_nxt != self.rcv_nxt {
            self.comp_rcv_nxt = self.rcv_nxt;
            self.dup_acks = 0;
        }
        if self.dup_acks < COMP_SACK_DUPACKS {
            self.dup_acks += 1;
            self.send_ack(out);
            return;
        }
        self.compressed += 1;
        if self.comp_timer.is_armed() {
            return;
        }
        // A high-resolution timer: not on the jiffies clock.
        let delay = COMP_SACK_DELAY_NS.min(self.handshake_rtt_ns / 20);
        if let Some(t) = self.comp_timer.arm(now + delay + COMP_SACK_SLACK_NS) {
            out.timers.push((t, self.conn_id, TimerKind::CompAck));
        }
    }

    pub fn on_comp_ack_timer(&mut self, now: Nanos, out: &mut Out) {
        let (expired, again) = self.comp_timer.fire(now);
        if let Some(t) = again {
            out.timers.push((t, self.conn_id, TimerKind::CompAck));
        }
        if expired && self.compressed > 0 {
            self.send_ack(out);
        }
    }

    /// The part of [seq, end) already received: below rcv_nxt, or inside an
    /// out-of-order range (Linux `tcp_data_queue` / `tcp_data_queue_ofo`).
    fn note_duplicate(&mut self, seq: u64, end: u64) {
        if seq < self.rcv_nxt {
            self.dsack = Some((seq, end.min(self.rcv_nxt)));
            return;
        }
        let i = self.ooo_index(seq, false);
        if let Some(r) = self.ooo.get(i).filter(|r| r.start < end) {
            self.dsack = Some((seq.max(r.start), end.min(r.end)));
        }
    }

    /// The first out-of-order range ending after `seq` (at or after it
    /// with `touching`). Segments mostly arrive in order behind the newest
    /// hole, so the last range is tried before a binary search.
    fn ooo_index(&self, seq: u64, touching: bool) -> usize {
        let after = |r: &Range| if touching { r.end >= seq } else { r.end > seq };
        let n = self.ooo.len();
        match n {
            0 => 0,
            _ if !after(&self.ooo[n - 1]) => n,
            1 => 0,
            _ if !after(&self.ooo[n - 2]) => n - 1,
            _ => self.ooo.partition_point(|r| !after(r)),
        }
    }

    fn insert_ooo(&mut self, start: u64, end: u64) {
        self.touch += 1;
        let i = self.ooo_index(start, true);
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
        // The touched range leads; the ranges it absorbed (and its old
        // bounds) lie inside it and leave the blocks.
        let (rs, re) = (self.ooo[i].start, self.ooo[i].end);
        self.drop_sack_blocks(|(s, e)| rs <= s && e <= re);
        let n = self.nsack.min(MAX_SACK - 1);
        self.sack_blocks.copy_within(0..n, 1);
        self.sack_blocks[0] = (rs, re);
        self.nsack = n + 1;
        self.refill_sack_blocks();
    }

    /// Remove the blocks of ranges that are gone.
    fn drop_sack_blocks(&mut self, gone: impl Fn((u64, u64)) -> bool) {
        let mut kept = 0;
        for j in 0..self.nsack {
            if !gone(self.sack_blocks[j]) {
                self.sack_blocks[kept] = self.sack_blocks[j];
                kept += 1;
            }
        }
        self.nsack = kept;
    }

    /// Fewer blocks than ranges allow (some left): choose again from the whole list.
    fn refill_sack_blocks(&mut self) {
        if self.nsack < self.ooo.len().min(MAX_SACK) {
            self.choose_sack_blocks();
        }
    }

    /// The most recently changed ranges first (RFC 2018): one pass keeping
    /// the MAX_SACK latest.
    fn choose_sack_blocks(&mut self) {
        let mut best: [usize; MAX_SACK] = [usize::MAX; MAX_SACK];
        let mut n = 0;
        for (i, r) in self.ooo.iter().enumerate() {
            let mut k = n;
            while k > 0 && r.touched > self.ooo[best[k - 1]].touched {
                k -= 1;
            }
            if k < MAX_SACK {
                let last = n.min(MAX_SACK - 1);
                best.copy_within(k..last, k + 1);
                best[k] = i;
                n = (n + 1).min(MAX_SACK);
            }
        }
        for (slot, &b) in best[..n].iter().enumerate() {
            self.sack_blocks[slot] = (self.ooo[b].start, self.ooo[b].end);
        }
        self.nsack = n;
    }

    /// Send the pending ACK now, alone (the application wrote, and its data
    /// could not go to carry it).
    pub fn flush_ack(&mut self, out: &mut Out) {
        if self.rcv_nxt > self.rcv_wup || self.delack_timer.is_armed() {
            self.send_ack(out);
        }
    }

    /// The ACK a data segment going the other way carries now (an RPC's
    /// two directions are two connections here: `Packet::piggyback`),
    /// counted as sent as Linux counts every segment's ACK.
    pub fn ack_with_data(&mut self) -> Packet {
        let mut a = self.ack_packet();
        self.fill_ack(&mut a);
        a
    }

    /// The late reader reads everything in order: the ACK Linux's
    /// `tcp_cleanup_rbuf` then owes, if no other ACK has covered it since.
    pub fn on_read(&mut self, out: &mut Out) {
        self.read_due = false;
        let pushed = std::mem::take(&mut self.read_pushed);
        let unacked = self.rcv_nxt - self.rcv_wup;
        if unacked > self.cfg.mss as u64 || (pushed && unacked > 0 && self.ooo.is_empty()) {
            self.send_ack(out);
        }
    }

    pub fn on_delack_timer(&mut self, now: Nanos, out: &mut Out) {
        let (expired, again) = self.delack_timer.fire(now);
        if let Some(t) = again {
            out.timers.push((t, self.conn_id, TimerKind::DelAck));
        }
        if expired {
            // Linux `tcp_delack_timer_handler`: the ACK missed its chance.
            // In ping-pong mode the reply did not come to carry it: not
            // interactive after all, and `ato` back to its least; else
            // the segments come further apart than `ato`: doubled, up to
            // the RTO.
            if self.pingpong {
                self.pingpong = false;
                self.ato = self.ato_min;
            } else {
                self.ato = (2 * self.ato).min(self.rto_jiffies());
            }
            self.send_ack(out);
        }
    }

    /// The application on this host sent data the other way at `now`
    /// (Linux `tcp_event_data_sent`): within `ato` jiffies of the last
    /// in-order data it is a reply, and the receiver goes into ping-pong
    /// mode.
    pub fn on_reply_sent(&mut self, now: Nanos) {
        let now_j = self.jiffies_at(now);
        if self.lrcvtime.is_some_and(|t| now_j - t < self.ato) {
            self.pingpong = true;
        }
    }

    /// The RTT its socket measured: the RPC client's, whose response
    /// stream's receiver takes no handshake of its own here (its socket's
    /// SYN measured it). Bounds delayed ACKs, SACK compression and the RTO
    /// as the handshake's sample does on the server.
    pub fn set_handshake_rtt(&mut self, rtt: Nanos) {
        self.handshake_rtt_ns = rtt;
    }

    /// Linux `tcp_incr_quickack`: raise the quick ACKs left to `max`, or to
    /// as many as the window holds two segments per ACK if that is fewer
    /// (but two at least; the advertised window taken as `rcv_ssthresh`,
    /// which bounds it while the application keeps up).
    fn incr_quickack(&mut self, max: u32) {
        let fit = (self.window.rcv_ssthresh / (2 * self.cfg.mss as u64)).min(max as u64) as u32;
        let n = if fit == 0 { 2.min(max) } else { fit };
        self.quickacks = self.quickacks.max(n);
    }

    /// Linux `tcp_enter_quickack_mode`: quick ACKs, out of ping-pong mode,
    /// `ato` at its least.
    fn enter_quickack_mode(&mut self, max: u32) {
        self.incr_quickack(max);
        self.pingpong = false;
        self.ato = self.ato_min;
    }

    /// The receiver's retransmission timeout, as the handshake set it
    /// (Linux's first RTT sample R: R + max(2R, rto_min)); a receiver that
    /// sends no data takes no other sample.
    fn rto_ns(&self) -> Nanos {
        let r = self.handshake_rtt_ns;
        r + (2 * r).max(self.cfg.min_rto_ns)
    }

    /// `icsk_rto` in jiffies.
    fn rto_jiffies(&self) -> u64 {
        self.jiffies_of_ns(self.rto_ns())
    }

    fn ack_packet(&self) -> Packet {
        Packet {
            conn: self.conn_id,
            to_receiver: false,
            route: self.route,
            ack: self.rcv_nxt,
            ts_ecr: self.ts_recent,
            wire: self.cfg.header_bytes,
            class: self.opts.class,
            // Linux `tcp_ecn_send`: pure ACKs are Not-ECT, unless the
            // receiver's CCA needs ECN (a DCTCP receiver's socket stays ECT).
            ect: self.opts.ca_needs_ecn,
            ..Packet::default()
        }
    }

    fn send_ack(&mut self, out: &mut Out) {
        let mut a = self.ack_packet();
        self.fill_ack(&mut a);
        out.pkts.push(a);
    }

    /// Complete the ACK `a` to send now (ECE, SACK blocks), with what
    /// sending it changes (timers, rcv_wup). In place: returning the
    /// packet cost a copy per ACK (12 instructions, cachegrind).
    #[inline(always)]
    fn fill_ack(&mut self, a: &mut Packet) {
        self.delack_timer.cancel();
        self.ack_pushed = false;
        // Linux `tcp_event_ack_sent`: any ACK ends a compression.
        self.comp_timer.cancel();
        self.compressed = 0;
        if self.quickacks > 0 {
            self.quickacks -= 1;
        }
        a.ece = self.opts.ecn && self.ce_state;
        // A D-SACK block goes first and is sent once.
        let mut n = 0;
        if let Some(d) = self.dsack.take() {
            a.set_sack(0, d);
            n = 1;
        }
        if self.cfg.sack && !self.ooo.is_empty() {
            if cfg!(debug_assertions) {
                let (kept, k) = (self.sack_blocks, self.nsack);
                self.choose_sack_blocks();
                assert_eq!(&kept[..k], &self.sack_blocks[..self.nsack], "SACK blocks out of date");
            }
            // The most recently changed blocks first (RFC 2018), after a D-SACK block.
            let k = self.nsack.min(MAX_SACK - n);
            for (j, b) in self.sack_blocks[..k].iter().enumerate() {
                a.set_sack(n + j, *b);
            }
            n += k;
        }
        if n > 0 {
            a.nsack = n as u8;
            a.wire += 4 + 8 * n as u32;
        }
        self.rcv_wup = self.rcv_nxt;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_cfg as tcp_cfg;

    fn seg(seq: u64, psh: bool) -> Packet {
        Packet { to_receiver: true, seq, len: 1448, psh, ..Packet::default() }
    }

    /// Feed full segments until one is not acknowledged at once (window
    /// growth, then 16 quick ACKs): the next segment's sequence number.
    fn leave_quickack_mode(r: &mut Receiver, out: &mut Out) -> u64 {
        let mut seq = 0;
        loop {
            out.clear();
            r.on_data(&seg(seq, false), 0, out);
            seq += 1448;
            if out.pkts.is_empty() {
                return seq;
            }
        }
    }

    /// After quick-ACK mode, a lone full-sized segment waits for the
    /// delayed-ACK timer, but one with PSH is acknowledged at once (Linux
    /// 6.x: ICSK_ACK_PUSHED, then `tcp_cleanup_rbuf` once the reader has
    /// drained the queue).
    #[test]
    fn pushed_segment_is_acked_at_once() {
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        let mut out = Out::default();
        let mut seq = leave_quickack_mode(&mut r, &mut out);
        // The segment without PSH waits for the timer or a second one.
        assert_eq!(out.timers.len(), 1);
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

    /// A late reader: the ACK of two segments waits for the read, which
    /// acknowledges everything that arrived meanwhile in one ACK, and a
    /// pushed segment's ACK too; quick ACKs still go on arrival.
    #[test]
    fn a_late_reader_acknowledges_what_it_reads() {
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        r.set_read_latency(Latency::read(50_000, 200_000, 1, 0));
        let mut out = Out::default();
        let seq = leave_quickack_mode(&mut r, &mut out);
        assert!(seq > 16 * 1448, "quick-ACK mode acknowledges on arrival, late reader or not");
        // Out of quick-ACK mode: the second segment schedules a read and
        // sends nothing; a third finds the read already due.
        out.clear();
        r.on_data(&seg(seq, false), 1_000, &mut out);
        assert!(out.pkts.is_empty());
        let reads: Vec<Nanos> = out.timers.iter().filter(|t| t.2 == TimerKind::Read).map(|t| t.0).collect();
        assert_eq!(reads.len(), 1);
        assert!(reads[0] > 1_000);
        out.clear();
        r.on_data(&seg(seq + 1448, false), 2_000, &mut out);
        assert!(out.pkts.is_empty() && !out.timers.iter().any(|t| t.2 == TimerKind::Read), "one read at a time");
        r.on_read(&mut out);
        assert_eq!(out.pkts.len(), 1);
        assert_eq!(out.pkts[0].ack, seq + 2 * 1448, "one ACK covers the three segments read");
        // A read with nothing owed sends nothing; a pushed segment is owed.
        out.clear();
        r.on_read(&mut out);
        assert!(out.pkts.is_empty());
        r.on_data(&seg(seq + 2 * 1448, true), 3_000, &mut out);
        assert!(out.pkts.is_empty());
        r.on_read(&mut out);
        assert_eq!(out.pkts.len(), 1, "the read acknowledges a pushed segment");
    }

    const MS: Nanos = 1_000_000;

    /// A receiver at CONFIG_HZ `hz` past its quick ACKs (all at time 0)
    /// with nothing left unacknowledged, the handshake's RTT `rtt`, and
    /// the next segment's sequence.
    fn delayed_receiver(hz: u32, rtt: Nanos) -> (Receiver, u64) {
        let cfg = TcpConfig { kernel_hz: Some(hz), ..tcp_cfg() };
        let mut r = Receiver::new(0, 0, cfg.into(), ConnOpts::default());
        r.set_handshake_rtt(rtt);
        let mut out = Out::default();
        let seq = leave_quickack_mode(&mut r, &mut out);
        out.clear();
        r.on_data(&seg(seq, false), 0, &mut out);
        assert_eq!(out.pkts.len(), 1, "the second segment's ACK");
        assert!(!r.delack_timer.is_armed());
        (r, seq + 1448)
    }

    /// Linux's delayed-ACK timer is a `timer_list`: due `ato` jiffies
    /// (TCP_ATO_MIN, 40 ms) after a lone segment, it runs on the wheel's
    /// next jiffy, 40 to 44 ms later at 250 Hz.
    #[test]
    fn delayed_ack_runs_on_the_timer_wheel() {
        for (hz, fires) in [(250, 44 * MS), (1000, 41 * MS)] {
            let (mut r, seq) = delayed_receiver(hz, 10 * MS);
            let mut out = Out::default();
            r.on_data(&seg(seq, false), 0, &mut out);
            assert!(out.pkts.is_empty());
            assert_eq!(r.delack_timer.deadline(), Some(fires), "{hz} Hz");
        }
    }

    /// `ato` (Linux `icsk_ack.ato`): doubled when the timer fires outside
    /// ping-pong mode (up to the RTO), bounded by the RTT when the next
    /// delayed ACK is armed (and by TCP_DELACK_MIN from below), and brought
    /// back by segments that come closer together (`tcp_event_data_recv`).
    #[test]
    fn ato_grows_when_the_timer_fires_and_follows_the_gaps() {
        // 1000 Hz, a 150 ms path: RTO 450 ms.
        let (mut r, seq) = delayed_receiver(1000, 150 * MS);
        let mut out = Out::default();
        assert_eq!(r.ato, 40);
        r.on_data(&seg(seq, false), 0, &mut out);
        r.on_delack_timer(41 * MS, &mut out);
        assert_eq!(out.pkts.len(), 1, "the timer's ACK");
        assert_eq!(r.ato, 80, "doubled");
        // A lone segment 200 ms later (a gap longer than ato leaves it):
        // its ACK waits 80 jiffies, on the wheel's level 1 (8-jiffy buckets).
        out.clear();
        r.on_data(&seg(seq + 1448, false), 200 * MS, &mut out);
        assert!(out.pkts.is_empty());
        assert_eq!(r.ato, 80);
        assert_eq!(r.delack_timer.deadline(), Some(288 * MS));
        r.on_delack_timer(288 * MS, &mut out);
        assert_eq!(r.ato, 160);
        // 100 ms later: a gap under ato makes it half itself plus the gap,
        // and the RTT (150 ms) bounds the wait.
        out.clear();
        r.on_data(&seg(seq + 2 * 1448, false), 300 * MS, &mut out);
        assert_eq!(r.ato, 180);
        assert_eq!(r.delack_timer.deadline(), Some(456 * MS), "300 + 150 ms, on the next 8-jiffy bucket");
        // Segments 10 ms apart halve it towards TCP_ATO_MIN.
        for (i, ato) in [(3, 110), (4, 75), (5, 57), (6, 48), (7, 44), (8, 42), (9, 41), (10, 40)] {
            r.on_data(&seg(seq + i * 1448, false), (280 + 10 * i) * MS, &mut out);
            assert_eq!(r.ato, ato, "segment {i}");
        }
        // On a path shorter than TCP_DELACK_MIN an inflated ato still waits
        // 40 ms: the bound is the RTT or TCP_DELACK_MIN, whichever is more.
        let (mut r, seq) = delayed_receiver(1000, 10 * MS);
        r.on_data(&seg(seq, false), 0, &mut out);
        r.on_delack_timer(41 * MS, &mut out);
        assert_eq!(r.ato, 80);
        r.on_data(&seg(seq + 1448, false), 200 * MS, &mut out);
        assert_eq!(r.delack_timer.deadline(), Some(241 * MS));
        // Ping-pong mode comes with a reply within ato of the last data:
        // 60 ms counts once ato is 80.
        r.on_reply_sent(260 * MS);
        assert!(r.pingpong);
    }

    /// Linux `tcp_send_delayed_ack`: with the timer armed, a segment that
    /// owes a delayed ACK sends it at once when the timer is due within a
    /// quarter of `ato`; otherwise the timer keeps its earlier expiry.
    #[test]
    fn delayed_ack_due_soon_goes_now() {
        let short = |seq| Packet { len: 500, ..seg(seq, false) };
        for (at, now) in [(10 * MS, false), (35 * MS, true)] {
            let (mut r, seq) = delayed_receiver(1000, 0);
            let mut out = Out::default();
            r.on_data(&short(seq), 0, &mut out);
            assert!(out.pkts.is_empty());
            r.on_data(&short(seq + 500), at, &mut out);
            // At 10 ms: ato stays 40, due at 40 > 10 + 10. At 35 ms: ato
            // 20 + 35 = 55, and 40 <= 35 + 13.
            assert_eq!(out.pkts.len(), now as usize, "second segment at {at} ns");
            assert_eq!(r.delack_timer.deadline(), (!now).then_some(41 * MS));
        }
    }

    /// Linux's ping-pong mode comes and goes (`tcp_event_data_sent`,
    /// `tcp_delack_timer_handler`, `tcp_enter_quickack_mode`): a reply
    /// within the delayed-ACK time sets it, a later one does not; a
    /// delayed-ACK timer that fires, or data that arrives twice, ends it,
    /// and quick ACKs resume while any are left.
    #[test]
    fn pingpong_mode_comes_with_replies_and_goes_with_the_timer_or_a_duplicate() {
        let delack = tcp_cfg().delack_ns;
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        let mut out = Out::default();
        r.on_reply_sent(0);
        assert!(!r.pingpong, "no data received yet: not a reply");
        r.on_data(&Packet { len: 1000, ..seg(0, true) }, 0, &mut out);
        r.on_reply_sent(delack);
        assert!(!r.pingpong, "a reply a delayed-ACK time later is not interactive");
        r.on_reply_sent(delack - 1);
        assert!(r.pingpong, "a reply within it is");
        // A lone segment in ping-pong mode waits; its timer fires: out of the mode.
        out.clear();
        r.on_data(&Packet { len: 1000, ..seg(1000, true) }, delack, &mut out);
        assert!(out.pkts.is_empty() && r.delack_timer.is_armed());
        r.on_delack_timer(3 * delack, &mut out);
        assert_eq!(out.pkts.len(), 1, "the timer's ACK");
        assert!(!r.pingpong, "the delayed-ACK timer ends ping-pong mode");
        out.clear();
        r.on_data(&Packet { len: 1000, ..seg(2000, true) }, 3 * delack, &mut out);
        assert_eq!(out.pkts.len(), 1, "quick ACKs again");
        // Back in the mode, a duplicate ends it too.
        r.on_reply_sent(3 * delack);
        assert!(r.pingpong);
        out.clear();
        r.on_data(&Packet { len: 1000, ..seg(2000, true) }, 3 * delack, &mut out);
        assert_eq!(out.pkts.len(), 1, "a duplicate is acknowledged at once");
        assert!(!r.pingpong, "data that arrives twice ends ping-pong mode");
    }

    /// Count the segments of `n` in a row from `seq` (at `now`) that are
    /// acknowledged on arrival; returns that count.
    fn acked_on_arrival(r: &mut Receiver, seq: u64, n: u64, now: Nanos) -> usize {
        let mut out = Out::default();
        (0..n)
            .filter(|i| {
                out.clear();
                r.on_data(&seg(seq + i * 1448, false), now, &mut out);
                !out.pkts.is_empty()
            })
            .count()
    }

    /// Linux `tcp_enter_quickack_mode` on old data: a segment that arrives
    /// twice is acknowledged at once and so are the next 15 (16 quick ACKs
    /// with its own; before, every second one); `tcp_event_data_recv`: so
    /// are 16 segments after a silence longer than the receiver's RTO (here
    /// the 200 ms floor over a handshake RTT of 10 ms: 210 ms), and not
    /// after a shorter one.
    #[test]
    fn old_data_and_a_long_silence_restore_quick_acks() {
        const MS: Nanos = 1_000_000;
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        let mut out = Out::default();
        r.on_syn(&Packet { syn: true, ..Packet::default() }, 0, &mut out);
        let mut seq = 0;
        loop {
            out.clear();
            r.on_data(&seg(seq, false), 10 * MS, &mut out);
            seq += 1448;
            if out.pkts.is_empty() {
                break;
            }
        }
        assert_eq!(r.rto_ns(), 210 * MS);
        // Out of quick-ACK mode: one ACK per two segments (the first of
        // the pair completes the one left unacknowledged above).
        assert_eq!(acked_on_arrival(&mut r, seq, 32, 10 * MS), 16);
        seq += 32 * 1448;
        out.clear();
        r.on_data(&seg(0, false), 11 * MS, &mut out);
        assert_eq!(out.pkts.len(), 1, "old data is acknowledged at once");
        // The old data's own ACK was the first of the 16 (`tcp_dec_quickack_mode`).
        assert_eq!(acked_on_arrival(&mut r, seq, 32, 11 * MS), 15 + 8, "15 quick ACKs left, then every second");
        seq += 32 * 1448;
        // 209 ms later: not yet a silence; 211 ms after that: one.
        assert_eq!(acked_on_arrival(&mut r, seq, 2, 220 * MS), 1);
        seq += 2 * 1448;
        assert_eq!(acked_on_arrival(&mut r, seq, 32, 431 * MS), 16 + 8);
        // A receive window of under two segments per ACK gives fewer.
        r.window.rcv_ssthresh = 6 * 1448;
        r.quickacks = 0;
        r.incr_quickack(QUICKACKS);
        assert_eq!(r.quickacks, 3);
        r.window.rcv_ssthresh = 1448;
        r.quickacks = 0;
        r.incr_quickack(QUICKACKS);
        assert_eq!(r.quickacks, 2);
    }

    /// RFC 3168 ECN as Linux's receiver: the first CE mark after the
    /// sender's CWR gives two quick ACKs (`tcp_ecn_check_ce`) and the ECE
    /// echo until the next CWR; further marks before it give none; a
    /// data segment with CWR is acknowledged at once (`tcp_ecn_accept_cwr`).
    #[test]
    fn ce_asks_for_quick_acks_and_cwr_for_an_ack_now() {
        let opts = ConnOpts { ecn: true, ..ConnOpts::default() };
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), opts);
        let mut out = Out::default();
        let mut seq = leave_quickack_mode(&mut r, &mut out);
        // Complete the pair the loop above left open.
        r.on_data(&seg(seq, false), 0, &mut out);
        seq += 1448;
        let ce = |seq| Packet { ce: true, ..seg(seq, false) };
        let mut acks = Vec::new();
        for i in 0..6 {
            out.clear();
            r.on_data(&ce(seq + i * 1448), 0, &mut out);
            acks.push(out.pkts.iter().map(|a| a.ece).collect::<Vec<_>>());
        }
        seq += 6 * 1448;
        // Two ACKs at once, then one per two segments, all with ECE.
        assert_eq!(acks, vec![vec![true], vec![true], vec![], vec![true], vec![], vec![true]]);
        out.clear();
        r.on_data(&Packet { cwr: true, ..seg(seq, false) }, 0, &mut out);
        assert_eq!(out.pkts.len(), 1, "CWR: an ACK at once");
        assert!(!out.pkts[0].ece, "the echo ends with CWR");
        seq += 1448;
        out.clear();
        r.on_data(&ce(seq), 0, &mut out);
        assert_eq!(out.pkts.len(), 1, "a new CE mark after the CWR: quick ACKs again");
        assert!(out.pkts[0].ece);
        // Without ECN negotiated, none of this.
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        let mut seq = leave_quickack_mode(&mut r, &mut out);
        r.on_data(&seg(seq, false), 0, &mut out);
        seq += 1448;
        out.clear();
        r.on_data(&Packet { cwr: true, ..ce(seq) }, 0, &mut out);
        assert!(out.pkts.is_empty());
    }

    /// DCTCP's echo follows the CE state of new data, with an ACK at once
    /// when it changes; old data (a retransmission the receiver has) does
    /// not change it, as Linux raises the CE events only for new data
    /// (`tcp_data_ecn_check`). Its ACKs are ECT, as Linux's `tcp_ecn_send`
    /// leaves a socket whose CCA needs ECN.
    #[test]
    fn dctcp_echo_follows_new_data_only() {
        let opts = ConnOpts { ecn: true, ca_needs_ecn: true, ..ConnOpts::default() };
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), opts);
        let mut out = Out::default();
        let mut seq = leave_quickack_mode(&mut r, &mut out);
        r.on_data(&seg(seq, false), 0, &mut out);
        seq += 1448;
        let ce = |seq| Packet { ce: true, ect: true, ..seg(seq, false) };
        let mut echo = |r: &mut Receiver, p: Packet| {
            out.clear();
            r.on_data(&p, 0, &mut out);
            out.pkts.iter().map(|a| a.ece).collect::<Vec<_>>()
        };
        assert_eq!(echo(&mut r, ce(seq)), vec![true], "CE: an ACK at once, with ECE");
        assert_eq!(echo(&mut r, seg(seq + 1448, false)), vec![false], "no CE: at once, without");
        assert_eq!(echo(&mut r, ce(seq)), vec![false], "old data, CE-marked: acknowledged, the echo unchanged");
        // A DCTCP receiver's ACKs are ECT (its socket stays ECT); RFC 3168's are not.
        out.clear();
        r.on_data(&seg(seq + 2 * 1448, true), 0, &mut out);
        assert!(out.pkts.iter().all(|a| a.ect) && !out.pkts.is_empty());
        let mut classic = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts { ecn: true, ..ConnOpts::default() });
        out.clear();
        classic.on_data(&seg(0, true), 0, &mut out);
        assert!(out.pkts.iter().all(|a| !a.ect) && !out.pkts.is_empty());
    }

    /// RFC 3168 ECN: a Not-ECT data segment after ECT ones (a Linux
    /// sender's retransmission) gives two quick ACKs, itself and the next
    /// (`tcp_data_ecn_check`); before any ECT data, or without ECN, it
    /// does not.
    #[test]
    fn not_ect_data_after_ect_asks_for_two_quick_acks() {
        let acked_alone = |ecn: bool, ect_first: bool| -> Vec<bool> {
            let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts { ecn, ..ConnOpts::default() });
            let mut out = Out::default();
            let mut seq = leave_quickack_mode(&mut r, &mut out);
            r.on_data(&seg(seq, false), 0, &mut out);
            seq += 1448;
            let ect = |seq| Packet { ect: true, ..seg(seq, false) };
            if ect_first {
                for _ in 0..2 {
                    r.on_data(&ect(seq), 0, &mut out);
                    seq += 1448;
                }
            }
            // One Not-ECT segment, then ECT ones again.
            (0..4)
                .map(|i| {
                    out.clear();
                    let p = if i == 0 { seg(seq, false) } else { ect(seq + i * 1448) };
                    r.on_data(&p, 0, &mut out);
                    !out.pkts.is_empty()
                })
                .collect()
        };
        assert_eq!(acked_alone(true, true), vec![true, true, false, true]);
        assert_eq!(acked_alone(true, false), vec![false, true, false, true]);
        assert_eq!(acked_alone(false, true), vec![false, true, false, true]);
    }

    /// In ping-pong mode (RPC) neither quick-ACK mode nor PSH makes a
    /// receiver ACK a lone small segment at once: the ACK waits for the
    /// application's answer, whose data carries it (`ack_with_data`).
    #[test]
    fn pingpong_receiver_leaves_its_ack_to_the_answer() {
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        let mut out = Out::default();
        // The first request is acknowledged at once (quick-ACK mode); the
        // answer to it, sent at once, puts the receiver in ping-pong mode.
        r.on_data(&Packet { len: 1000, ..seg(0, true) }, 0, &mut out);
        assert_eq!(out.pkts.len(), 1, "not yet interactive: a quick ACK");
        r.on_reply_sent(0);
        let mut seq = 1000;
        for _ in 0..20 {
            out.clear();
            r.on_data(&Packet { len: 1000, ..seg(seq, true) }, 0, &mut out);
            r.on_reply_sent(0);
            seq += 1000;
            assert!(out.pkts.is_empty(), "no ACK of its own for a request (quick ACKs left: {})", r.quickacks);
            assert!(r.delack_timer.is_armed());
            let a = r.ack_with_data();
            assert_eq!(a.ack, seq);
            assert!(!a.to_receiver && a.nsack == 0);
            assert!(!r.delack_timer.is_armed(), "the ACK on data stops the delayed-ACK timer");
            out.clear();
            r.flush_ack(&mut out);
            assert!(out.pkts.is_empty(), "nothing owed any more");
        }
        // Two full segments are still ACKed at once, ping-pong or not.
        out.clear();
        r.on_data(&seg(seq, false), 0, &mut out);
        r.on_data(&seg(seq + 1448, false), 0, &mut out);
        assert_eq!(out.pkts.len(), 1);
    }

    /// While the window grows every segment is ACKed, then the 16 quick
    /// ACKs left: with Linux's default 6 MiB receive buffer, 271 + 16
    /// segments (captured at the linux backend's receiver: 288).
    #[test]
    fn window_growth_keeps_quick_acks() {
        let cfg = tcp_cfg();
        let mut r = Receiver::new(0, 0, cfg.clone().into(), ConnOpts::default());
        assert_eq!(segment_truesize(1448, 52), 2304);
        assert_eq!(r.window.window_clamp, 6_291_456 * 160 / 256);
        let mut out = Out::default();
        let mut immediate = 0;
        for i in 0..400u64 {
            out.clear();
            r.on_data(&seg(i * 1448, false), 0, &mut out);
            if out.pkts.is_empty() {
                break;
            }
            immediate += 1;
        }
        assert_eq!(immediate, 272 + 16);
        assert_eq!(r.window.rcv_ssthresh, r.window.window_clamp);
        // A small buffer has little room to grow.
        let small = TcpConfig { rmem_bytes: 65_536, ..tcp_cfg() };
        let w = WindowGrowth::new(&small);
        assert_eq!((w.rcv_ssthresh, w.window_clamp), (32_768, 40_960));
    }

    /// A segment that arrives twice is reported once, as the first SACK
    /// block of the next ACK (D-SACK, RFC 2883), before the regular blocks.
    #[test]
    fn duplicates_are_reported_by_dsack() {
        let mut r = Receiver::new(0, 0, tcp_cfg().into(), ConnOpts::default());
        let mut out = Out::default();
        let data = |n: u64| Packet { seq: n * 1448, len: 1448, ..Packet::default() };
        r.on_data(&data(0), 0, &mut out);
        r.on_data(&data(2), 0, &mut out);
        out.clear();
        // Segment 0 again: below rcv_nxt.
        r.on_data(&data(0), 0, &mut out);
        let a = out.pkts.last().unwrap();
        assert_eq!(a.nsack, 2);
        assert_eq!(a.sack(0), (0, 1448));
        assert_eq!(a.sack(1), (2 * 1448, 3 * 1448));
        out.clear();
        // Segment 2 again: inside the out-of-order range.
        r.on_data(&data(2), 0, &mut out);
        assert_eq!(out.pkts.last().unwrap().sack(0), (2 * 1448, 3 * 1448));
        out.clear();
        // New data: no D-SACK any more.
        r.on_data(&data(1), 0, &mut out);
        let a = out.pkts.last().unwrap();
        assert_eq!((a.ack, a.nsack), (3 * 1448, 0));
    }
    /// SACK compression as Linux's `__tcp_ack_snd_check`: with a hole, the
    /// first three ACKs go at once, later ones wait for one ACK after 5 % of
    /// the handshake RTT plus the timer slack; filling part of the hole
    /// (rcv_nxt moves) sends at once again, filling all of it too. Without
    /// SACK, with delayed ACKs off (quick ACKs) or with the compression off
    /// (`tcp_comp_sack_nr` = 0), every ACK goes at once.
    #[test]
    fn sack_compression_holds_acks_after_three() {
        const MS: Nanos = 1_000_000;
        let run = |cfg: TcpConfig| {
            let mut r = Receiver::new(0, 0, cfg.clone().into(), ConnOpts::default());
            let mut out = Out::default();
            r.on_syn(&Packet { syn: true, ..Packet::default() }, 0, &mut out);
            r.quickacks = 0;
            r.window.rcv_ssthresh = r.window.window_clamp;
            let data = |n: u64| Packet { seq: n * 1448, len: 1448, ..Packet::default() };
            // Handshake RTT 10 ms; segment 0 in order, 1 lost, 2.. out of order.
            let mut sent = Vec::new();
            for (i, n) in [0u64, 2, 3, 4, 5, 6, 7].iter().enumerate() {
                out.clear();
                r.on_data(&data(*n), 10 * MS + i as u64 * 100_000, &mut out);
                sent.push((out.pkts.len(), out.timers.iter().find(|t| t.2 == TimerKind::CompAck).map(|t| t.0)));
            }
            (r, sent)
        };
        let (mut r, sent) = run(tcp_cfg());
        // 0: delayed (in order, no PSH); 2, 3, 4: at once; 5: timer; 6, 7: held.
        let counts: Vec<usize> = sent.iter().map(|s| s.0).collect();
        assert_eq!(counts, vec![0, 1, 1, 1, 0, 0, 0]);
        let at = sent[4].1.expect("compression timer");
        assert_eq!(at, 10 * MS + 400_000 + 10 * MS / 20 + COMP_SACK_SLACK_NS);
        assert!(sent[5].1.is_none() && sent[6].1.is_none(), "one timer");
        let mut out = Out::default();
        r.on_comp_ack_timer(at, &mut out);
        assert_eq!(out.pkts.len(), 1, "one ACK for the three held");
        assert_eq!(out.pkts[0].sack(0), (2 * 1448, 8 * 1448));
        // The hole filled: at once.
        out.clear();
        r.on_data(&Packet { seq: 1448, len: 1448, ..Packet::default() }, at + MS, &mut out);
        assert_eq!(out.pkts.len(), 1);
        assert_eq!(out.pkts[0].ack, 8 * 1448);
        // Holes at 8, 10, 12, 14: a fifth range while ACKs are held sends
        // the held ACK first (Linux `tcp_sack_new_ofo_skb`).
        let mut now = at + 2 * MS;
        let mut acks = Vec::new();
        for n in [9u64, 11, 13, 15, 17] {
            out.clear();
            now += 100_000;
            r.on_data(&Packet { seq: n * 1448, len: 1448, ..Packet::default() }, now, &mut out);
            acks.push(out.pkts.len());
        }
        assert_eq!(acks, vec![1, 1, 1, 0, 1], "three at once, one held, flushed by the fifth range");
        assert_eq!(out.pkts[0].sack(0), (15 * 1448, 16 * 1448), "the held ACK, without the new range");
        assert!(r.comp_timer.is_armed(), "the new range's ACK is held again");
        for cfg in [
            TcpConfig { sack: false, ..tcp_cfg() },
            TcpConfig { delayed_ack: DelayedAck::Off, ..tcp_cfg() },
            TcpConfig { sack_compression: false, ..tcp_cfg() },
        ] {
            let (_, sent) = run(cfg);
            assert!(sent[1..].iter().all(|s| s.0 == 1 && s.1.is_none()), "{sent:?}");
        }
    }
}
