//! The sending side of a TCP connection, after Linux. This file holds the
//! connection's state, the handshake and the application's writes into the
//! send buffer; the rest is split as Linux splits it:
//! - `output`: sending, skbs, TSO and pacing (tcp_output.c);
//! - `ack`: one ACK's processing (`tcp_ack`);
//! - `sack`: the retransmit queue's SACK scoreboard (`tcp_sacktag_*`);
//! - `recovery`: loss detection, the loss state machine and undo
//!   (`tcp_fastretrans_alert`);
//! - `timers`: the RTO, the tail loss probe, pacing and reordering timers.
//!
//! The parts with state of their own are sibling modules of `sender`:
//! RTT/RTO estimation (`rtt`), RACK (`rack`; duplicate-ACK counting without
//! SACK stays in `recovery`), PRR (`prr`), delivery-rate sampling (`rate`),
//! undo of spurious reductions (`undo`), F-RTO (`frto`) and the send
//! buffer (`sndbuf`). The congestion controller is called through the
//! `tcp_congestion_ops`-shaped trait in `crate::cc`.

use super::frto::{Frto, LossAck, Verdict};
use super::prr::Prr;
use super::rack::{Rack, Reordering};
use super::rate::{RateSampler, TxState};
use super::receiver::max_window;
use super::rtt::{ts_echo_rtt, MinRtt, RttEstimator, TS_TICK_NS};
use super::sndbuf::{SendBuffer, SYN_WINDOW_MAX};
use super::undo::{current_ssthresh, Undo};
use super::{ConnOpts, Out, TimerKind, TIMEOUT_MIN_US};
use crate::cc::util::jiffies_timer_ns;
use crate::cc::{
    AckSample, CaEvent, CaState, CongestionControl, Conn, RateSample, ACK_ECE, ACK_SLOWPATH, ACK_WIN_UPDATE, INFINITE_SSTHRESH,
};
use crate::config::{Pacing, TcpConfig};
use crate::jitter::Latency;
use crate::packet::Packet;
use crate::stats::RttStats;
use crate::timer::Timer;
use netcore::{Nanos, NS_PER_SEC, NS_PER_US};
use std::collections::VecDeque;
use std::sync::Arc;

mod ack;
mod output;
mod recovery;
mod sack;
mod timers;

use timers::XmitTimer;

const SACKED: u8 = 1;
const LOST: u8 = 2;
/// A retransmission of this segment is in flight (Linux TCPCB_SACKED_RETRANS).
const RETRANS: u8 = 4;
const EVER_RETRANS: u8 = 8;
/// RACK marked this original lost: Linux takes it off the time-sorted send
/// list then (`tcp_rack_detect_loss`), and an undo that clears the mark
/// does not put it back, so RACK never judges it again; only its
/// retransmission would be.
const RACK_MARKED: u8 = 16;
/// The segment carries PSH: it ends an application write.
const PUSH: u8 = 32;
/// The last segment of a sent skb (the segments one transmission sent
/// together): acknowledging it frees the skb's charge in the send buffer.
const SKB_END: u8 = 64;

/// Segments sent before Linux starts pacing (`tp->data_segs_out >= 10`).
const UNPACED_SEGS: u64 = 10;

/// One segment in the retransmit queue (Linux `tcp_skb_cb`).
#[derive(Clone, Copy, Debug)]
struct Seg {
    seq: u64,
    len: u32,
    flags: u8,
    /// Last (re)transmission time and the delivery-rate snapshot taken then.
    tx: TxState,
}

impl Seg {
    fn end(&self) -> u64 {
        self.seq + self.len as u64
    }

    /// Marked lost and not yet sent again (nor SACKed since).
    fn awaits_resend(&self) -> bool {
        self.flags & LOST != 0 && self.flags & (RETRANS | SACKED) == 0
    }
}

/// What one ACK brought for the loss state machine.
struct AckInfo {
    una_advanced: bool,
    prior_snd_una: u64,
    /// A duplicate ACK: no progress (the simulator's ACKs carry no data).
    dupack: bool,
    ts_ecr: Nanos,
    ece: bool,
    /// Linux `tcp_ack_is_dubious`: no progress, new SACK or D-SACK
    /// information, ECE, or not in the Open state. Only such an ACK reaches
    /// `tcp_fastretrans_alert` and so RACK's loss detection.
    dubious: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    SynSent,
    Established,
}

pub struct Sender {
    pub c: Conn,
    cca: Box<dyn CongestionControl>,
    conn_id: u32,
    /// The route of the data this side sends.
    route: u32,
    /// Shared by every connection of a run: one copy stays cached.
    cfg: Arc<TcpConfig>,
    opts: ConnOpts,
    state: State,
    /// Set CWR on the next new data segment (RFC 3168).
    cwr_pending: bool,

    snd_una: u64,
    snd_nxt: u64,
    /// snd_nxt when the last per-round RTT sample was counted (Linux's
    /// tp->rtt_seq): see `rtt_sample`.
    rtt_seq: u64,
    /// Bytes the application has handed to the socket so far.
    write_seq: u64,
    /// The application always has more to write (bulk).
    unlimited: bool,
    /// Bytes the application still has to write (not bulk): the send
    /// buffer takes them as it has room.
    app_pending: u64,
    /// Ends of the application's writes not yet sent; the segment holding
    /// each gets PSH (`tcp_push`).
    push_seqs: VecDeque<u64>,
    /// Ends of the unsent skbs of the write queue, oldest first (the last
    /// is `write_seq`): `tcp_sendmsg` fills skbs of `size_goal`, and a
    /// transmission never takes more than what is left of the head skb.
    wq_ends: VecDeque<u64>,
    /// A write's end lies inside the write queue's head skb (one that grew
    /// over the next, `tcp_grow_skb`, takes its flags): its PSH waits for
    /// the segment that ends that skb.
    wq_push: bool,
    sndbuf: SendBuffer,
    /// The window the receiver advertises once scaled: Linux's initial
    /// `rcv_wnd` for a receive buffer of `rmem` (`tcp_select_initial_window`,
    /// half the buffer at the default scaling ratio, in whole segments).
    peer_window: u64,
    /// The receive window: the most data that may be outstanding
    /// (`receiver::max_window`; the window a receiver whose application
    /// reads at once advertises).
    rwnd: u64,
    /// The skb being sent: segments still to go in it, and its size.
    skb_left: u32,
    skb_segs: u32,
    rtxq: VecDeque<Seg>,
    /// Segments in `rtxq` shorter than one MSS: while there are none, a
    /// sequence number gives its segment's index by one division.
    short_segs: usize,

    rtt: RttEstimator,
    min_rtt: MinRtt,
    /// The retransmission timer, and what it is set for: the RTO, the tail
    /// loss probe or RACK's reordering timeout, one at a time as in Linux.
    pub xmit_timer: Timer,
    xmit_pending: XmitTimer,
    /// RACK set the timer for its reordering timeout on this ACK, so the
    /// ACK leaves it (Linux clears FLAG_SET_XMIT_TIMER).
    rack_set_timer: bool,
    /// This ACK's `tcp_set_xmit_timer`, not yet made (`settle_ack_timer`).
    ack_timer_due: bool,
    /// Send retransmissions only (`tcp_xmit_retransmit_queue`).
    rexmit_only: bool,
    /// A loss probe is outstanding up to this sequence (Linux `tlp_high_seq`).
    tlp_high_seq: Option<u64>,
    /// That probe was a retransmission (Linux `tlp_retrans`).
    tlp_retrans: bool,
    pub pace_timer: Timer,
    /// Earliest departure of the next burst (Linux's `tcp_wstamp_ns`).
    pace_next_ns: Nanos,
    /// How late the pacing timer fires (`[tcp] pacing_latency`); None: on time.
    pace_latency: Option<Box<Latency>>,
    /// The burst being sent: segments and payload bytes so far, and its goal.
    burst_segs: u32,
    burst_bytes: u64,
    burst_goal: u32,
    last_send_ns: Nanos,
    /// When the first SYN went out (Linux keeps it as `retrans_stamp` once
    /// the SYN is retransmitted).
    syn_sent_ns: Nanos,

    // loss recovery
    high_seq: u64,
    prr: Prr,
    rack: Rack,
    /// Reordering observed so far (`tp->reordering`, `tp->reord_seen`).
    reord: Reordering,
    /// End of the highest SACKed segment (`tcp_highest_sack_seq` while
    /// anything is sacked): see `fack`.
    highest_sack: u64,
    /// The highest SACK when this ACK arrived (`prior_fack`), and the
    /// lowest never-retransmitted segment it newly SACKed below that
    /// (`sack_state.reord`; snd_nxt if none): a filled hole, reordering.
    prior_fack: u64,
    reord_low: u64,
    undo: Undo,
    frto: Frto,
    /// This ACK's news for the loss state machine (Linux's `flag` bits):
    /// never-retransmitted data below high_seq (s)acked, new SACKs, and a
    /// retransmission found lost.
    orig_sack_acked: bool,
    data_sacked: bool,
    lost_retrans: bool,
    /// Send times of the first and the last never-retransmitted segment
    /// this ACK newly SACKed, in sequence order (Linux `sack->first_sackt`,
    /// `last_sackt`): the oldest and the newest, as originals go out in
    /// sequence order.
    first_sackt: Option<Nanos>,
    last_sackt: Option<Nanos>,
    /// A D-SACK of exactly the loss probe's segment (Linux FLAG_DSACK_TLP).
    dsack_tlp: bool,
    /// F-RTO step 2b: this ACK sends new data before retransmissions.
    new_data_first: bool,
    /// Lowest sequence that may hold a lost, not yet retransmitted segment.
    retx_hint: u64,
    /// No segment ending above this is lost and not yet retransmitted: the
    /// search for the next retransmission stops here instead of walking
    /// the rest of the window (once per retransmission, with many losses).
    retx_end: u64,
    /// Lowest sequence of a never-retransmitted segment RACK has not settled.
    rack_hint: u64,
    /// Sequences of retransmissions in flight, oldest transmission first.
    rexmits: VecDeque<u64>,
    /// SACK blocks of the previous ACK, already applied to the scoreboard.
    sack_cache: [(u64, u64); crate::packet::MAX_SACK],
    nsack_cache: usize,
    cwnd_usage_seq: u64,

    rate: RateSampler,
    data_segs_out: u64,

    // what the samples and flow summaries report
    pub stats: SenderStats,
}

#[derive(Clone, Debug, Default)]
pub struct SenderStats {
    pub sent_segs: u64,
    pub retrans_segs: u64,
    pub rtt: RttStats,
    /// Latest valid delivery rate (bits/s), like `tcpi_delivery_rate`.
    pub delivery_rate_bps: f64,
    pub rto_count: u64,
    pub tlp_count: u64,
    /// First timeouts (no backoff yet) by the state they ended (`on_rto`).
    pub rto_in_recovery: u64,
    pub rto_in_loss: u64,
    pub rto_in_disorder: u64,
    /// Entries into fast recovery (`tcp_enter_recovery`).
    pub recoveries: u64,
    /// Retransmissions in flight marked lost again (`mark_lost`).
    pub lost_retransmits: u64,
    /// Reductions undone as spurious (D-SACK, timestamps or F-RTO).
    pub undo_count: u64,
}

impl Sender {
    pub fn new(conn_id: u32, route: u32, cfg: Arc<TcpConfig>, cca: Box<dyn CongestionControl>, opts: ConnOpts) -> Sender {
        let mut c = Conn::new(cfg.mss, cfg.init_cwnd);
        c.hz = cfg.kernel_hz.map_or(1000, u64::from);
        c.header_bytes = cfg.header_bytes;
        c.ecn = opts.ecn;
        if let Some(clamp) = opts.cwnd_clamp {
            c.cwnd_clamp = clamp;
        }
        if let Some(rate) = opts.max_pacing_rate {
            c.max_pacing_rate = rate;
        }
        // A pacing cap turns pacing on, as SO_MAX_PACING_RATE does in Linux.
        c.paced = opts.max_pacing_rate.is_some()
            || match cfg.pacing {
                Pacing::On => true,
                Pacing::Off => false,
                Pacing::Auto => cca.wants_pacing(),
            };
        c.pacing_auto = opts.max_pacing_rate.is_none() && matches!(cfg.pacing, Pacing::Auto);
        Sender {
            c,
            cca,
            conn_id,
            route,
            cfg: cfg.clone(),
            opts,
            state: State::Idle,
            cwr_pending: false,
            snd_una: 0,
            snd_nxt: 0,
            rtt_seq: 0,
            write_seq: 0,
            unlimited: false,
            app_pending: 0,
            push_seqs: VecDeque::new(),
            wq_ends: VecDeque::new(),
            wq_push: false,
            sndbuf: SendBuffer::new(&cfg),
            peer_window: cfg.rmem_bytes / 2 / cfg.mss as u64 * cfg.mss as u64,
            rwnd: max_window(cfg.mss, cfg.header_bytes, cfg.rmem_bytes),
            skb_left: 0,
            skb_segs: 0,
            rtxq: VecDeque::with_capacity(16),
            short_segs: 0,
            rtt: RttEstimator::new(cfg.min_rto_ns),
            min_rtt: MinRtt::default(),
            xmit_timer: Timer::default(),
            xmit_pending: XmitTimer::Off,
            rack_set_timer: false,
            ack_timer_due: false,
            rexmit_only: false,
            tlp_high_seq: None,
            tlp_retrans: false,
            pace_timer: Timer::default(),
            pace_next_ns: 0,
            pace_latency: None,
            burst_segs: 0,
            burst_bytes: 0,
            burst_goal: 1,
            last_send_ns: 0,
            syn_sent_ns: 0,
            high_seq: 0,
            prr: Prr::default(),
            rack: Rack::default(),
            reord: Reordering::default(),
            highest_sack: 0,
            prior_fack: 0,
            reord_low: 0,
            undo: Undo::default(),
            frto: Frto::default(),
            orig_sack_acked: false,
            data_sacked: false,
            lost_retrans: false,
            first_sackt: None,
            last_sackt: None,
            dsack_tlp: false,
            new_data_first: false,
            retx_hint: 0,
            retx_end: 0,
            rack_hint: 0,
            rexmits: VecDeque::new(),
            sack_cache: [(0, 0); crate::packet::MAX_SACK],
            nsack_cache: 0,
            cwnd_usage_seq: 0,
            rate: RateSampler::default(),
            data_segs_out: 0,
            stats: SenderStats::default(),
        }
    }

    pub fn cca(&self) -> &dyn CongestionControl {
        self.cca.as_ref()
    }

    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }

    fn set_now(&mut self, now: Nanos) {
        self.c.now_ns = now;
        self.c.now_us = now / NS_PER_US;
    }

    /// Open the connection with a SYN (the first RTT sample comes from it).
    pub fn connect(&mut self, now: Nanos, out: &mut Out) {
        self.set_now(now);
        self.state = State::SynSent;
        self.syn_sent_ns = now;
        self.send_syn(now, out);
    }

    fn send_syn(&mut self, now: Nanos, out: &mut Out) {
        let mut p = self.packet(now);
        p.syn = true;
        p.wire = self.cfg.header_bytes + 8; // MSS, SACK-permitted, window scale
        out.pkts.push(p);
        self.xmit_pending = XmitTimer::Retrans;
        if let Some(t) = self.xmit_timer.arm(self.opts.timer_at(now + self.rtt.rto_ns())) {
            out.timers.push((t, self.conn_id, TimerKind::Retransmit));
        }
    }

    /// Start without a handshake (the return stream of an RPC connection,
    /// which shares the handshake of its request stream: the requests have
    /// brought the peer's scaled window by the time it writes).
    pub fn establish(&mut self, now: Nanos) {
        self.set_now(now);
        self.state = State::Established;
        self.clamp_at_established();
        self.cca.init(&mut self.c);
        self.sndbuf.see_window(self.peer_window);
        self.init_buffer_space();
    }

    /// A `cwnd_clamp` is the TCP-BPF clamp of the netdev experiments, which
    /// the linux backend's sock_ops program sets once the connection is
    /// established (`TCP_BPF_SNDCWND_CLAMP`, after `tcp_init_transfer` set
    /// the initial window and before the CCA's `init`): ssthresh becomes
    /// the clamp and cwnd stays the initial window, so the first flight
    /// goes out whole (Linux 6.18: 10 segments under a clamp of 3 in
    /// `bench/delack-ato.toml`) and the send buffer is sized for it; the
    /// first ACK brings cwnd down to the clamp. A CCA whose `init` sets
    /// ssthresh (BBR) overrides it, as in Linux.
    fn clamp_at_established(&mut self) {
        if let Some(clamp) = self.opts.cwnd_clamp {
            self.c.ssthresh = clamp;
        }
    }

    /// `tcp_init_buffer_space` at the start of the transfer: the send buffer
    /// is sized for the initial window (the application, which waited for
    /// the connection, writes next).
    fn init_buffer_space(&mut self) {
        let factor = self.cca.sndbuf_expand(&mut self.c);
        self.sndbuf.expand(self.c.cwnd, self.reord.degree, factor);
    }

    /// A SYN-ACK arrived.
    pub fn on_synack(&mut self, p: &Packet, now: Nanos, out: &mut Out) {
        if self.state != State::SynSent {
            return;
        }
        self.set_now(now);
        self.clear_xmit_timer();
        let syn_retrans = self.rtt.backoff;
        // After a retransmitted SYN Karn voids its own RTT, and
        // `tcp_ack_update_rtt` takes the timestamp echo, in whole ms.
        let rtt = if syn_retrans == 0 { now.saturating_sub(p.ts_ecr) } else { ts_echo_rtt(now, p.ts_ecr) };
        self.rtt_sample(rtt, rtt / NS_PER_US, false);
        self.rtt.backoff = 0;
        self.rtt.update_rto();
        // `tcp_ack` on the SYN-ACK ends in `tcp_update_pacing_rate`: the
        // initial window leaves in skbs sized by that rate.
        if !self.uses_cong_control() {
            self.update_pacing_rate();
        }
        self.state = State::Established;
        // `tcp_init_transfer`: one segment after more than one SYN
        // retransmission, unless the SYN-ACK answers the first SYN
        // (`tcp_try_undo_spurious_syn`: its echo is that SYN's timestamp).
        let spurious = p.ts_ecr / TS_TICK_NS == self.syn_sent_ns / TS_TICK_NS;
        if syn_retrans > 1 && !spurious {
            self.c.cwnd = 1;
        }
        self.clamp_at_established();
        self.cca.init(&mut self.c);
        // The SYN-ACK's window field is unscaled: at most 64 KB.
        self.sndbuf.see_window(self.peer_window.min(SYN_WINDOW_MAX));
        self.init_buffer_space();
        self.app_write(now, out);
        self.send(now, out);
    }

    /// Bulk: an endless supply of data from now on (or, `on` false, no
    /// more writes: what the send buffer holds still goes out, as from a
    /// Linux socket left open).
    pub fn set_unlimited(&mut self, on: bool, now: Nanos, out: &mut Out) {
        self.unlimited = on;
        if on && self.state == State::Established {
            self.app_write(now, out);
            self.send(now, out);
        }
    }

    /// The application writes `bytes` more.
    pub fn write(&mut self, bytes: u64, now: Nanos, out: &mut Out) {
        self.app_pending += bytes;
        if self.state == State::Established {
            self.app_write(now, out);
            self.send(now, out);
        }
    }

    /// The application's `send()` (`tcp_sendmsg`): it hands over what the
    /// send buffer takes, a bulk writer all it can; the write ends with
    /// PSH (`tcp_push`). A writer left with more waits (SOCK_NOSPACE)
    /// until `check_space` wakes it.
    ///
    /// An skb the write fills while it is the send head (nothing else
    /// unsent ahead of it) leaves at once (`tcp_push_one`, without TSO
    /// deferral) as far as cwnd and the pacer let it; the write refills it
    /// and it leaves again, until nothing more can go. So such a write takes
    /// what went out plus one whole skb, then more skbs while the buffer is
    /// below its limit: a new connection's first write takes 10 segments
    /// sent and 22 held (46,336 bytes), as Linux's does (its probe,
    /// docs/sim-model.md).
    #[inline(never)]
    fn app_write(&mut self, now: Nanos, out: &mut Out) {
        let want = if self.unlimited { u64::MAX } else { self.app_pending };
        if want == 0 || self.state != State::Established {
            return;
        }
        self.check_app_limited();
        self.sndbuf.writer_runs();
        let goal = self.sndbuf.size_goal();
        let mut take = 0;
        // Unsent data of at most one skb is that skb: the send head.
        if self.write_seq - self.snd_nxt <= goal {
            loop {
                let unsent = self.write_seq - self.snd_nxt;
                if unsent == 0 && self.sndbuf.room(self.write_seq - self.snd_una, 0, 0) == 0 {
                    break; // a new skb needs the buffer below its limit
                }
                let chunk = (goal - unsent).min(want - take);
                self.queue_written(chunk, take == 0);
                take += chunk;
                if unsent + chunk < goal {
                    break; // the write ended inside the skb: `tcp_push` sends it
                }
                let before = self.snd_nxt;
                self.write_xmit(now, out, true);
                if self.snd_nxt == before {
                    break;
                }
            }
        }
        let room = self.sndbuf.room(self.write_seq - self.snd_una, self.wq_ends.len() as u64, self.tail_room());
        let more = (want - take).min(room);
        self.queue_written(more, take == 0);
        take += more;
        if take > 0 {
            if !self.unlimited {
                self.app_pending -= take;
            }
            self.push_seqs.push_back(self.write_seq);
        }
        if take < want {
            self.sndbuf.set_nospace();
        }
    }

    /// `tcp_rate_check_app_limited`, which Linux runs at every application
    /// write (`tcp_sendmsg_locked`) and nowhere else: less than a segment
    /// unsent, cwnd not full and every lost packet retransmitted mean the
    /// application, not the network, limits the rate, so the delivery-rate
    /// samples of what leaves until that much more is delivered are marked
    /// application-limited. (Linux also wants none of the socket's packets
    /// left in the host's qdisc or NIC; the simulator does not track that,
    /// and TSQ keeps it to a packet or two.)
    fn check_app_limited(&mut self) {
        let in_flight = self.c.packets_in_flight();
        if self.write_seq - self.snd_nxt < self.cfg.mss as u64
            && in_flight < self.c.cwnd
            && self.c.lost_out <= self.c.retrans_out
        {
            self.c.app_limited = (self.c.delivered + in_flight as u64).max(1);
        }
    }

    /// `bytes` more written: they top up the unsent tail skb to
    /// `size_goal`, then fill new skbs of `size_goal` (`tcp_sendmsg`).
    /// A write whose first bytes (`first`) top up the tail takes that
    /// skb's PSH away (`tcp_sendmsg_locked` clears it at its first copy):
    /// the previous write's end is no longer an end. A tail already full
    /// keeps it, and the write starts a new skb. So a window-limited
    /// sender whose one unsent skb the network eats into between writes
    /// marks no write ends at all (Linux 6.18: 4 PSH segments of 415, all
    /// at the start, in `bench/delack-ato.toml`).
    fn queue_written(&mut self, bytes: u64, first: bool) {
        if bytes == 0 {
            return;
        }
        let goal = self.sndbuf.size_goal();
        let new_end = self.write_seq + bytes;
        let mut end = self.write_seq;
        if !self.wq_ends.is_empty() {
            let top = (end + self.tail_room()).min(new_end);
            if first && top > end && self.push_seqs.back() == Some(&end) {
                self.push_seqs.pop_back();
            }
            *self.wq_ends.back_mut().expect("not empty") = top;
            end = top;
        }
        while end < new_end {
            end = (end + goal).min(new_end);
            self.wq_ends.push_back(end);
        }
        self.write_seq = new_end;
    }

    /// What the write queue's tail skb still takes up to `size_goal`
    /// (Linux's `size_goal - skb->len`; a send head cut by a transmission
    /// counts its unsent rest only).
    fn tail_room(&self) -> u64 {
        let start = match self.wq_ends.len() {
            0 => return 0,
            1 => self.snd_nxt,
            n => self.wq_ends[n - 2],
        };
        (start + self.sndbuf.size_goal()).saturating_sub(self.write_seq)
    }

    /// `tcp_check_space` after an ACK's transmissions: while the writer
    /// waits, the buffer grows if cwnd does not hold the sender back
    /// (`tcp_new_space`), and the writer wakes once a third of the buffer
    /// is free. Every ACK looks, whether or not it freed an skb (Linux
    /// 5.10 dropped SOCK_QUEUE_SHRUNK, which had held the buffer's growth
    /// back to the ACKs that freed one).
    pub(super) fn check_space(&mut self, now: Nanos, out: &mut Out) {
        if self.sndbuf.writer_waits() {
            let ran_dry = self.c.packets_in_flight() < self.c.cwnd;
            self.look_at_space(ran_dry, now, out);
        }
    }

    /// `check_space` for what `tcp_write_xmit` sent: `tcp_event_new_data_sent`
    /// runs `tcp_check_space` after each new skb (Linux 5.18), so the
    /// buffer grows if some skb left cwnd not yet full (`below_cwnd`).
    pub(super) fn check_space_after_send(&mut self, below_cwnd: bool, now: Nanos, out: &mut Out) {
        if self.sndbuf.writer_waits() {
            self.look_at_space(below_cwnd, now, out);
        }
    }

    fn look_at_space(&mut self, ran_dry: bool, now: Nanos, out: &mut Out) {
        if ran_dry || self.sndbuf.could_wake(self.write_seq - self.snd_una) {
            self.new_space(ran_dry, now, out);
        }
    }

    /// `tcp_new_space`, out of the per-ACK path; `ran_dry`: cwnd did not
    /// hold the sender back (`tcp_should_expand_sndbuf`).
    #[inline(never)]
    fn new_space(&mut self, ran_dry: bool, now: Nanos, out: &mut Out) {
        if ran_dry {
            let factor = self.cca.sndbuf_expand(&mut self.c);
            self.sndbuf.expand(self.c.cwnd, self.reord.degree, factor);
        }
        let queued = self.sndbuf.queued(self.write_seq - self.snd_una, self.wq_ends.len() as u64);
        if self.sndbuf.wake_writer(queued) {
            self.app_write(now, out);
            self.send(now, out);
        }
    }

    /// The send buffer's size now (`sk_sndbuf`), bytes.
    pub fn sndbuf_bytes(&self) -> u64 {
        self.sndbuf.limit()
    }

    /// The pacing timer fires late by draws of `l` (`[tcp] pacing_latency`).
    pub fn set_pacing_latency(&mut self, l: Latency) {
        self.pace_latency = Some(Box::new(l));
    }

    /// Send from now on over this route (a route change; segments already
    /// sent finish their old route).
    pub fn set_route(&mut self, route: u32) {
        self.route = route;
    }

    pub fn srtt_us(&self) -> u64 {
        self.rtt.srtt_ns() / NS_PER_US
    }

    pub fn pacing_rate_bps(&self) -> Option<f64> {
        self.c.paced.then(|| self.c.pacing_rate as f64 * 8.0)
    }

    fn packet(&self, now: Nanos) -> Packet {
        Packet {
            conn: self.conn_id,
            to_receiver: true,
            route: self.route,
            ts_val: now,
            ect: self.opts.ecn,
            class: self.opts.class,
            ..Packet::default()
        }
    }
}

#[cfg(test)]
mod tests;
