//! The sending side of a TCP connection, after Linux: a retransmit queue of
//! segments with SACK scoreboard flags, the loss state machine, sending and
//! pacing, and the timers. It orchestrates the parts Linux also keeps apart:
//! RTT/RTO estimation (`rtt`), RACK loss detection (`rack`; dupack counting
//! without SACK stays here), PRR (`prr`), delivery-rate sampling (`rate`),
//! undo of spurious reductions (`undo`), F-RTO (`frto`) and the send
//! buffer the application writes into (`sndbuf`). The congestion
//! controller is called through the `tcp_congestion_ops`-shaped trait in
//! `crate::cc`.

use super::frto::{Frto, LossAck, Verdict};
use super::prr::Prr;
use super::rack::{Rack, Reordering};
use super::rate::{RateSampler, TxState};
use super::rtt::{ts_echo_rtt, MinRtt, RttEstimator, TS_TICK_NS};
use super::sndbuf::SendBuffer;
use super::undo::{current_ssthresh, Undo};
use super::{ConnOpts, Out, TimerKind, TIMEOUT_MIN_US};
use crate::cc::util::jiffies_timer_ns;
use crate::cc::{
    AckSample, CaEvent, CaState, CongestionControl, Conn, RateSample, ACK_ECE, ACK_SLOWPATH, ACK_WIN_UPDATE, INFINITE_SSTHRESH,
};
use crate::config::{Pacing, TcpConfig};
use crate::packet::Packet;
use crate::stats::RttStats;
use crate::timer::Timer;
use netcore::{Nanos, NS_PER_SEC, NS_PER_US};
use std::collections::VecDeque;

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
    cfg: TcpConfig,
    opts: ConnOpts,
    pacing: bool,
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
    sndbuf: SendBuffer,
    /// A write just filled an skb with nothing else unsent: `tcp_sendmsg`
    /// sends it at once (`tcp_push_one`), without TSO deferral.
    push_one: bool,
    /// The skb being sent: segments still to go in it, and its size.
    skb_left: u32,
    skb_segs: u32,
    rtxq: VecDeque<Seg>,
    /// Segments in `rtxq` shorter than one MSS: while there are none, a
    /// sequence number gives its segment's index by one division.
    short_segs: usize,

    rtt: RttEstimator,
    min_rtt: MinRtt,
    /// The retransmission timer; it also carries the tail loss probe.
    pub rto_timer: Timer,
    /// When the RTO would fire, and whether the timer is set for a probe.
    rto_deadline: Nanos,
    probe_armed: bool,
    /// A loss probe is outstanding up to this sequence (Linux `tlp_high_seq`).
    tlp_high_seq: Option<u64>,
    /// That probe was a retransmission (Linux `tlp_retrans`).
    tlp_retrans: bool,
    pub pace_timer: Timer,
    pub reo_timer: Timer,
    /// Earliest departure of the next burst (Linux's `tcp_wstamp_ns`).
    pace_next_ns: Nanos,
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
    /// Reductions undone as spurious (D-SACK, timestamps or F-RTO).
    pub undo_count: u64,
}

impl Sender {
    pub fn new(conn_id: u32, route: u32, cfg: &TcpConfig, cca: Box<dyn CongestionControl>, opts: ConnOpts) -> Sender {
        let mut c = Conn::new(cfg.mss, cfg.init_cwnd);
        c.hz = cfg.kernel_hz.map_or(1000, u64::from);
        c.header_bytes = cfg.header_bytes;
        c.ecn = opts.ecn;
        if let Some(clamp) = opts.cwnd_clamp {
            c.cwnd_clamp = clamp;
            c.cwnd = c.cwnd.min(clamp);
        }
        if let Some(rate) = opts.max_pacing_rate {
            c.max_pacing_rate = rate;
        }
        // A pacing cap turns pacing on, as SO_MAX_PACING_RATE does in Linux.
        let pacing = opts.max_pacing_rate.is_some()
            || match cfg.pacing {
                Pacing::On => true,
                Pacing::Off => false,
                Pacing::Auto => cca.wants_pacing(),
            };
        Sender {
            c,
            cca,
            conn_id,
            route,
            cfg: cfg.clone(),
            opts,
            pacing,
            state: State::Idle,
            cwr_pending: false,
            snd_una: 0,
            snd_nxt: 0,
            rtt_seq: 0,
            write_seq: 0,
            unlimited: false,
            app_pending: 0,
            push_seqs: VecDeque::new(),
            sndbuf: SendBuffer::new(cfg),
            push_one: false,
            skb_left: 0,
            skb_segs: 0,
            rtxq: VecDeque::with_capacity(16),
            short_segs: 0,
            rtt: RttEstimator::new(cfg.min_rto_ns),
            min_rtt: MinRtt::default(),
            rto_timer: Timer::default(),
            rto_deadline: 0,
            probe_armed: false,
            tlp_high_seq: None,
            tlp_retrans: false,
            pace_timer: Timer::default(),
            reo_timer: Timer::default(),
            pace_next_ns: 0,
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
        if let Some(t) = self.rto_timer.arm(self.opts.timer_at(now + self.rtt.rto_ns())) {
            out.timers.push((t, self.conn_id, TimerKind::Rto));
        }
    }

    /// Start without a handshake (the return stream of an RPC connection,
    /// which shares the handshake of its request stream).
    pub fn establish(&mut self, now: Nanos) {
        self.set_now(now);
        self.state = State::Established;
        self.cca.init(&mut self.c);
        self.init_buffer_space();
    }

    /// `tcp_init_buffer_space` at the start of the transfer: the send buffer
    /// is sized for the initial window; then the application, which waited
    /// for the connection, writes.
    fn init_buffer_space(&mut self) {
        let factor = self.cca.sndbuf_expand(&mut self.c);
        self.sndbuf.expand(self.c.cwnd, self.reord.degree, factor);
        self.app_write();
    }

    /// A SYN-ACK arrived.
    pub fn on_synack(&mut self, p: &Packet, now: Nanos, out: &mut Out) {
        if self.state != State::SynSent {
            return;
        }
        self.set_now(now);
        self.rto_timer.cancel();
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
        self.cca.init(&mut self.c);
        self.init_buffer_space();
        self.send(now, out);
    }

    /// Bulk: an endless supply of data from now on (or, `on` false, no
    /// more writes: what the send buffer holds still goes out, as from a
    /// Linux socket left open).
    pub fn set_unlimited(&mut self, on: bool) {
        self.unlimited = on;
        if on && self.state == State::Established {
            self.app_write();
        }
    }

    /// The application writes `bytes` more.
    pub fn write(&mut self, bytes: u64, now: Nanos, out: &mut Out) {
        self.app_pending += bytes;
        if self.state == State::Established {
            self.app_write();
            self.send(now, out);
        }
    }

    /// The application's `send()` (`tcp_sendmsg`): it hands over what the
    /// send buffer takes, a bulk writer all it can; the write ends with
    /// PSH (`tcp_push`). A writer left with more waits (SOCK_NOSPACE)
    /// until `check_space` wakes it.
    #[inline(never)]
    fn app_write(&mut self) {
        let want = if self.unlimited { u64::MAX } else { self.app_pending };
        if want == 0 || self.state != State::Established {
            return;
        }
        let take = want.min(self.sndbuf.room(self.write_seq - self.snd_una, self.write_seq - self.snd_nxt));
        // `tcp_push_one` once the write fills an skb that is the send head.
        self.push_one |= self.write_seq == self.snd_nxt && take >= self.sndbuf.size_goal();
        if take > 0 {
            self.write_seq += take;
            if !self.unlimited {
                self.app_pending -= take;
            }
            self.push_seqs.push_back(self.write_seq);
        }
        if take < want {
            self.sndbuf.set_nospace();
        }
    }

    /// `tcp_check_space` after an ACK's transmissions: when the ACK freed
    /// an skb while the writer waits, the buffer grows if cwnd did not
    /// hold the sender back (`tcp_new_space`: it ran out of data), and the
    /// writer wakes once a third of the buffer is free.
    fn check_space(&mut self, now: Nanos, out: &mut Out) {
        if !self.sndbuf.writer_waits_and_shrunk() {
            return;
        }
        let ran_dry = self.c.packets_in_flight() < self.c.cwnd;
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
        let queued = self.sndbuf.queued(self.write_seq - self.snd_una, self.write_seq - self.snd_nxt);
        if self.sndbuf.wake_writer(queued) {
            self.app_write();
            self.send(now, out);
        }
    }

    /// The send buffer's size now (`sk_sndbuf`), bytes.
    pub fn sndbuf_bytes(&self) -> u64 {
        self.sndbuf.limit()
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
        self.pacing.then(|| self.c.pacing_rate as f64 * 8.0)
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

    // ---------------------------------------------------------------- sending

    fn has_data(&self) -> bool {
        self.write_seq > self.snd_nxt
    }

    /// Send what cwnd, the receive window, the data written and pacing
    /// allow (Linux `tcp_write_xmit` with retransmissions first). New data
    /// leaves in skbs as `tcp_mss_split_point` cuts them (see `start_skb`).
    pub fn send(&mut self, now: Nanos, out: &mut Out) {
        if self.state != State::Established {
            return;
        }
        self.set_now(now);
        let mut cwnd_limited = false;
        let mut sent_any = false;
        let mut head_resent = false;
        loop {
            if self.pacing && self.data_segs_out >= UNPACED_SEGS && self.burst_segs == 0 {
                if self.pace_next_ns > now {
                    if let Some(t) = self.pace_timer.arm(self.opts.timer_at(self.pace_next_ns)) {
                        out.timers.push((t, self.conn_id, TimerKind::Pace));
                    }
                    break;
                }
                self.burst_goal = self.tso_segs();
            }
            let in_flight = self.c.packets_in_flight();
            if let Some(i) = if self.new_data_first { None } else { self.next_retransmit() } {
                if in_flight >= self.c.cwnd {
                    cwnd_limited = true;
                    break;
                }
                self.retransmit(i, now, out);
                sent_any = true;
                head_resent |= i == 0;
                continue;
            }
            if in_flight >= self.c.cwnd {
                cwnd_limited = true;
                break;
            }
            if !self.has_data() {
                // Linux tcp_rate_check_app_limited: the app left cwnd unused.
                self.c.app_limited = (self.c.delivered + in_flight as u64).max(1);
                break;
            }
            let avail = self.write_seq - self.snd_nxt;
            let len = avail.min(self.cfg.mss as u64);
            let outstanding = self.snd_nxt + len - self.snd_una;
            if outstanding > self.cfg.rmem_bytes {
                break; // receive window full
            }
            if self.c.packets_out == 0 {
                self.restart_after_idle(now);
            }
            if self.skb_left == 0 {
                let max_segs = if self.pacing && self.data_segs_out >= UNPACED_SEGS {
                    self.burst_goal.saturating_sub(self.burst_segs)
                } else {
                    self.tso_segs()
                };
                let data_segs = avail.div_ceil(self.cfg.mss as u64).min(u32::MAX as u64) as u32;
                let room = self.c.cwnd - in_flight;
                if data_segs > 1 && !self.push_one && self.tso_should_defer(now, room, max_segs) {
                    cwnd_limited = true;
                    break;
                }
                self.push_one = false;
                self.start_skb(max_segs.min(room).min(data_segs));
            }
            self.transmit_new(len, now, out);
            sent_any = true;
        }
        self.push_one = false;
        if self.skb_left > 0 {
            self.end_skb_early(out);
        }
        if self.burst_segs > 0 {
            self.end_burst(now);
        }
        self.cwnd_validate(cwnd_limited);
        if sent_any && self.c.packets_out > 0 {
            // Linux `tcp_xmit_retransmit_queue`: resending the head restarts
            // the timer (unless RACK's reordering timer holds it), so the
            // repair gets a whole RTO; new data only starts a stopped one.
            if !self.rto_timer.is_armed() || (head_resent && !self.reo_timer.is_armed()) {
                self.rto_deadline = now + self.current_rto();
            }
            self.set_xmit_timer(now, out);
        }
    }

    /// Linux `tcp_tso_should_defer`: with room in cwnd for less than a
    /// full TSO skb (`max_segs`) and less than a third of cwnd, hold the
    /// data for the next ACK, which should come soon (the oldest segment
    /// out was sent at least half an RTT ago), so that the two leave as
    /// one larger skb; only outside loss recovery and while the sender
    /// sent within the last millisecond.
    fn tso_should_defer(&self, now: Nanos, room: u32, max_segs: u32) -> bool {
        if matches!(self.c.ca_state, CaState::Recovery | CaState::Loss) || room >= max_segs {
            return false;
        }
        // `tcp_wstamp_ns`: the last departure, or the paced next one.
        let wstamp = if self.pacing { self.pace_next_ns.max(self.last_send_ns) } else { self.last_send_ns };
        if now > wstamp + 1_000_000 {
            return false;
        }
        if room as u64 * 3 >= self.c.cwnd as u64 {
            return false;
        }
        match self.rtxq.front() {
            Some(head) => now.saturating_sub(head.tx.sent_ns) >= self.rtt.srtt_ns() / 2,
            None => false,
        }
    }

    /// A new skb of `segs` segments (at least one) leaves: as many as
    /// `tcp_mss_split_point` lets one transmission carry (the TSO size, or
    /// what is left of the paced burst; cwnd's room; the data written).
    /// It is charged to the send buffer until its last segment is acked.
    fn start_skb(&mut self, segs: u32) {
        self.skb_left = segs.max(1);
        self.skb_segs = self.skb_left;
        self.sndbuf.add_skb();
    }

    /// The receive window ended the skb before its planned size: its last
    /// segment so far closes it.
    #[cold]
    fn end_skb_early(&mut self, out: &mut Out) {
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
    /// and send them. PSH marks the end of an application write, and the
    /// last segment of an skb of two or more (`__tcp_transmit_skb` sets it
    /// on every GSO packet, so that the receiver's GRO flushes; measured
    /// on Linux 6.18, CUBIC, 10 Mbit/s, 40 ms: 42.6 % of the segments,
    /// nearly all the ends of two-segment skbs). The segment is built
    /// whole and written once: with many flows its ring slot is a cold
    /// line, and reading it back stalled there.
    fn transmit_new(&mut self, len: u64, now: Nanos, out: &mut Out) {
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
        let mut flags = if push { PUSH } else { 0 };
        self.skb_left -= 1;
        let gso_push = self.skb_left == 0 && self.skb_segs >= 2;
        if self.skb_left == 0 {
            flags |= SKB_END;
        }
        let tx = self.rate.on_send(&self.c, now);
        self.rtxq.push_back(Seg { seq, len: len as u32, flags, tx });
        self.snd_nxt = end;
        self.c.snd_nxt = end;
        self.c.packets_out += 1;
        self.emit(seq, len as u32, push || gso_push, false, now, out);
    }

    /// Segments per TSO skb or paced burst, as Linux's `tcp_tso_segs`:
    /// about 1 ms of data at the pacing rate (`sk_pacing_shift` = 10), plus
    /// 64 KB halved per 512 µs of min RTT (`tcp_tso_rtt_log` = 9: whole
    /// 64 KB skbs on sub-millisecond paths), at most 64 KB, at least the
    /// CCA's `min_tso_segs` (2; BBR's 1 below 1.2 Mbit/s).
    fn tso_segs(&mut self) -> u32 {
        let mss = self.cfg.mss as u64;
        let mut bytes = self.c.pacing_rate >> 10;
        let r = self.c.min_rtt_us >> 9;
        if r < 32 {
            bytes += 65_536 >> r;
        }
        let min = self.cca.min_tso_segs(&mut self.c);
        ((bytes.min(65_536) / mss) as u32).max(min)
    }

    /// Close a paced burst: the next may leave when this one has, at the
    /// pacing rate. A late start earns credit that shortens the gap by at
    /// most half (Linux `tcp_update_skb_after_send`).
    fn end_burst(&mut self, now: Nanos) {
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
    fn cwnd_validate(&mut self, cwnd_limited: bool) {
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
    fn restart_after_idle(&mut self, now: Nanos) {
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

    fn uses_cong_control(&self) -> bool {
        self.cca.has_cong_control()
    }

    /// Index of the first segment marked lost and not yet retransmitted.
    fn next_retransmit(&mut self) -> Option<usize> {
        if self.c.lost_out == 0 {
            return None;
        }
        let mut i = self.index_of(self.retx_hint.max(self.snd_una));
        while i < self.rtxq.len() && self.rtxq[i].seq < self.retx_end {
            let s = &self.rtxq[i];
            if s.flags & LOST != 0 && s.flags & (RETRANS | SACKED) == 0 {
                self.retx_hint = s.seq;
                return Some(i);
            }
            i += 1;
        }
        debug_assert!(!self.rtxq.iter().any(|s| s.flags & LOST != 0 && s.flags & (RETRANS | SACKED) == 0));
        self.retx_hint = self.snd_nxt;
        self.retx_end = 0;
        None
    }

    /// Index of the segment holding sequence `seq` (or the first after it).
    fn index_of(&self, seq: u64) -> usize {
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

    /// Send the queued segment `i` again.
    fn retransmit(&mut self, i: usize, now: Nanos, out: &mut Out) {
        let tx = self.rate.on_send(&self.c, now);
        let s = &mut self.rtxq[i];
        s.tx = tx;
        s.flags |= RETRANS | EVER_RETRANS;
        let (seq, len, push) = (s.seq, s.len, s.flags & PUSH != 0);
        self.c.retrans_out += 1;
        self.stats.retrans_segs += 1;
        self.undo.on_retransmit(now);
        self.rexmits.push_back(seq);
        self.emit(seq, len, push, true, now, out);
    }

    /// What every transmission does beside the queue: counters, the packet,
    /// the paced burst.
    fn emit(&mut self, seq: u64, len: u32, push: bool, retrans: bool, now: Nanos, out: &mut Out) {
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
        out.pkts.push(p);
        if self.pacing && self.data_segs_out > UNPACED_SEGS {
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

    // ---------------------------------------------------------------- ACKs

    /// The flags `tcp_in_ack_event` gives the CCA. Linux's header prediction
    /// takes a pure ACK with the timestamp option alone and no ECE on its
    /// fast path; one with SACK blocks or ECE goes the slow path
    /// (CA_ACK_SLOWPATH, and CA_ACK_ECE only there). Either way an ACK that
    /// advances snd_una updates the window (CA_ACK_WIN_UPDATE). The window
    /// field never changes here (no receive-window autotuning).
    fn ack_event_flags(&self, p: &Packet, una_advanced: bool) -> u32 {
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
        let dubious = !una_advanced || self.data_sacked || ece || dsack || self.c.ca_state != CaState::Open;
        let new_first = self.fastretrans_alert(
            &AckInfo {
                una_advanced,
                prior_snd_una,
                dupack: dupack || !una_advanced,
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

        if self.c.packets_out == 0 {
            self.rto_timer.cancel();
            self.probe_armed = false;
        } else if self.snd_una > prior_snd_una {
            self.rto_deadline = now + self.current_rto();
            self.set_xmit_timer(now, out);
        }
        if new_first {
            // Linux `tcp_xmit_recovery` with REXMIT_NEW: new data only; if
            // none could go, F-RTO gives way to conventional recovery.
            self.new_data_first = true;
            self.send(now, out);
            self.new_data_first = false;
            if self.snd_nxt > self.high_seq {
                self.check_space(now, out);
                return;
            }
            self.frto.stop();
        }
        self.send(now, out);
        self.check_space(now, out);
    }

    /// Mark segments covered by new SACK blocks (Linux `tcp_sacktag_write_queue`),
    /// skipping parts the previous ACK already reported. Returns whether the
    /// ACK carried a D-SACK (FLAG_DSACKING_ACK).
    fn sacktag(&mut self, p: &Packet, rs: &mut RateSample) -> bool {
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
    fn check_dsack(&mut self, p: &Packet) -> bool {
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

    fn sack_range(&mut self, start: u64, end: u64, rs: &mut RateSample) {
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
    /// overhead leaves the send buffer, and SOCK_QUEUE_SHRUNK lets
    /// `check_space` grow the buffer or wake the writer during recovery).
    /// So every skb is wholly SACKed or not at all, and runs SACKed in
    /// sequence order become one skb.
    fn resegment_sacked(&mut self, i: usize) {
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
    fn mark_delivered(&mut self, i: usize, rs: &mut RateSample) {
        let s = &mut self.rtxq[i];
        self.c.delivered += 1;
        let (end, retrans) = (s.end(), s.flags & EVER_RETRANS != 0);
        self.rate.on_delivered(rs, &mut s.tx, end, retrans);
        let sent = s.tx.sent_ns;
        self.rack.advance(sent, end, retrans, self.c.now_ns, self.c.min_rtt_us);
    }

    /// Remove cumulatively acked segments. Returns how many, the send times
    /// of the first and the last of them that were neither retransmitted
    /// nor SACKed before (Linux `first_ackt`, `last_ackt`), and whether a
    /// retransmission was acked.
    fn clean_rtx_queue(&mut self, ack: u64, rs: &mut RateSample) -> (u32, Option<(Nanos, Nanos)>, bool) {
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

    fn mark_lost(&mut self, i: usize) {
        let s = &mut self.rtxq[i];
        if s.flags & SACKED != 0 {
            return;
        }
        if s.flags & RETRANS != 0 {
            // A lost retransmission: it goes back to the to-send list.
            s.flags &= !RETRANS;
            self.c.retrans_out -= 1;
        }
        if s.flags & LOST == 0 {
            s.flags |= LOST;
            self.c.lost_out += 1;
        }
        self.c.lost += 1;
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
    fn rack_detect(&mut self, now: Nanos, out: &mut Out, arm: bool) {
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
        // Retransmissions in flight, oldest transmission first.
        while let Some(&seq) = self.rexmits.front() {
            let j = self.index_of(seq);
            let live = j < self.rtxq.len() && self.rtxq[j].seq == seq && self.rtxq[j].flags & RETRANS != 0;
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
                self.lost_retrans = true;
                self.rexmits.pop_front();
            } else {
                let mut last = deadline;
                for &seq in self.rexmits.iter().skip(1) {
                    let k = self.index_of(seq);
                    if k >= self.rtxq.len() || self.rtxq[k].seq != seq || self.rtxq[k].flags & RETRANS == 0 {
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
        match wait {
            Some(t) if arm => {
                let remaining_us = (t - now) / NS_PER_US;
                let at = jiffies_timer_ns(&self.c, remaining_us + TIMEOUT_MIN_US);
                if let Some(t) = self.reo_timer.arm(self.opts.timer_at(at)) {
                    out.timers.push((t, self.conn_id, TimerKind::Reorder));
                }
            }
            Some(_) => {}
            None => self.reo_timer.cancel(),
        }
    }

    /// Without SACK: the head is lost after as many duplicate ACKs as the
    /// reordering degree (3; the learning of it from duplicate ACKs,
    /// `tcp_check_reno_reordering`, is not modelled), and in recovery
    /// after a partial ACK (NewReno, RFC 6582; `tcp_newreno_mark_lost`).
    fn dupack_detect(&mut self, dupack: bool, acked: u32) {
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
    fn fastretrans_alert(&mut self, a: &AckInfo, out: &mut Out) -> bool {
        if a.ece {
            self.undo.prior_ssthresh = 0;
        }
        let state = self.c.ca_state;
        if state == CaState::Open {
            self.undo.clear_stamp();
        } else if self.snd_una >= self.high_seq {
            match state {
                CaState::Cwr => self.end_cwnd_reduction(),
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
    fn open_or_recover(&mut self, a: &AckInfo, out: &mut Out) {
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
    fn identify_packet_loss(&mut self, a: &AckInfo, out: &mut Out) {
        if self.cfg.sack && a.dubious && !self.rtxq.is_empty() && self.rack.take_advanced() {
            self.rack_detect(self.c.now_ns, out, true);
        }
    }

    /// `tcp_try_keep_open`: Disorder while anything is sacked, lost or
    /// retransmitted, else Open.
    fn try_keep_open(&mut self) {
        let left_out = self.c.sacked_out + self.c.lost_out > 0;
        let target = if left_out || self.any_retrans_done() { CaState::Disorder } else { CaState::Open };
        if self.c.ca_state != target {
            self.set_ca_state(target);
            self.high_seq = self.snd_nxt;
        }
    }

    /// The highest SACKed sequence, snd_una when nothing is sacked (Linux
    /// `tcp_highest_sack_seq`, the "forward-most" ACK).
    fn fack(&self) -> u64 {
        if self.c.sacked_out > 0 && self.cfg.sack {
            self.highest_sack.max(self.snd_una)
        } else {
            self.snd_una
        }
    }

    /// `tcp_any_retrans_done`.
    fn any_retrans_done(&self) -> bool {
        self.c.retrans_out > 0 || self.rtxq.front().is_some_and(|s| s.flags & EVER_RETRANS != 0)
    }

    /// `tcp_end_cwnd_reduction`: cwnd = ssthresh unless the reduction was
    /// undone; a CCA with `cong_control` keeps cwnd.
    fn end_cwnd_reduction(&mut self) {
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
    fn process_tlp_ack(&mut self, ack: u64, progress: bool) {
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
    fn undo_cwnd_reduction(&mut self, unmark_loss: bool) {
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
    fn try_undo_recovery(&mut self, ts_ecr: Nanos) -> bool {
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
    fn non_sack_reopen(&self) -> bool {
        !self.cfg.sack && self.snd_una >= self.high_seq
    }

    /// `tcp_is_non_sack_preventing_reopen`.
    fn non_sack_holds(&mut self) -> bool {
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
    fn try_undo_partial(&mut self, ts_ecr: Nanos, prior_snd_una: u64) -> bool {
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
    fn try_undo_dsack(&mut self) -> bool {
        if self.undo.all_dsacked() {
            self.rack.dsack_undo();
            self.undo_cwnd_reduction(false);
            return true;
        }
        false
    }

    /// `tcp_try_undo_loss`: the RTO proved spurious.
    fn try_undo_loss(&mut self, frto_undo: bool, ts_ecr: Nanos) -> bool {
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
    fn process_loss(&mut self, a: &AckInfo) -> bool {
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
    fn can_send_new(&self) -> bool {
        let outstanding = self.snd_nxt + self.cfg.mss as u64 - self.snd_una;
        self.has_data() && outstanding <= self.cfg.rmem_bytes
    }

    fn set_ca_state(&mut self, s: CaState) {
        if self.c.ca_state != s {
            self.cca.set_state(&mut self.c, s);
            self.c.ca_state = s;
        }
    }

    /// `tcp_init_cwnd_reduction`: the start of PRR towards a new ssthresh;
    /// CWR is signalled to the receiver on the next new segment.
    fn init_cwnd_reduction(&mut self) {
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
    /// ssthresh (one reduction per window). The ssthresh to restore on undo
    /// is kept unless ECN asked for the reduction.
    fn enter_recovery(&mut self, ece: bool) {
        self.undo.prior_ssthresh = 0;
        self.undo.init(self.snd_una, self.c.retrans_out);
        if self.c.ca_state == CaState::Cwr {
            self.high_seq = self.snd_nxt;
        } else {
            if !ece {
                self.undo.prior_ssthresh = current_ssthresh(&self.c);
            }
            self.init_cwnd_reduction();
        }
        self.set_ca_state(CaState::Recovery);
    }

    /// `tcp_enter_cwr`: an ECN echo reduces cwnd like a loss, without
    /// retransmitting, and is never undone.
    fn enter_cwr(&mut self) {
        self.undo.prior_ssthresh = 0;
        self.undo.disarm();
        self.init_cwnd_reduction();
        self.set_ca_state(CaState::Cwr);
    }

    /// Proportional rate reduction (RFC 6937, as Linux `tcp_cwnd_reduction`).
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: bool, una_advanced: bool) {
        let in_flight = self.c.packets_in_flight();
        if let Some(cwnd) = self.prr.cwnd(in_flight, self.c.ssthresh, self.c.prior_cwnd, newly_acked_sacked, newly_lost, una_advanced) {
            self.c.cwnd = cwnd;
        }
    }

    /// Close a rate sample (Linux `tcp_rate_gen`); its RTT is the ACK's
    /// `ca_rtt_us`, set in `on_ack` as `tcp_ack_update_rtt` sets it.
    fn rate_gen(&mut self, rs: &mut RateSample, now: Nanos) {
        self.rate.gen(&mut self.c, rs, now);
        self.stats.delivery_rate_bps = self.rate.delivery_rate_bps();
    }

    /// Linux `tcp_update_pacing_rate` for CCAs that do not set it themselves:
    /// 200% of cwnd/srtt in slow start, 120% after.
    fn update_pacing_rate(&mut self) {
        let srtt_ns = self.rtt.srtt_ns();
        if srtt_ns == 0 {
            return;
        }
        let factor = if self.c.cwnd < self.c.ssthresh / 2 { 2.0 } else { 1.2 };
        let segs = self.c.cwnd.max(self.c.packets_out) as f64;
        let rate = factor * segs * self.c.mss as f64 * NS_PER_SEC as f64 / srtt_ns as f64;
        self.c.pacing_rate = rate as u64;
    }

    // ---------------------------------------------------------------- RTT, RTO

    /// One ACK's RTT measurement (`tcp_ack_update_rtt`): `seq_rtt` (ns) for
    /// the estimator and the flow's per-round statistic, `ca_rtt_us` for
    /// the min RTT filter (skipped if the ACK may have been delayed and is
    /// no new minimum) and the flow's minimum.
    fn rtt_sample(&mut self, seq_rtt: Nanos, ca_rtt_us: u64, maybe_delayed: bool) {
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

    fn current_rto(&self) -> Nanos {
        self.rtt.current_rto()
    }

    // ---------------------------------------------------------------- timers

    pub fn on_timer(&mut self, kind: TimerKind, now: Nanos, out: &mut Out) {
        self.set_now(now);
        let timer = match kind {
            TimerKind::Rto => &mut self.rto_timer,
            TimerKind::Pace => &mut self.pace_timer,
            TimerKind::Reorder => &mut self.reo_timer,
            TimerKind::DelAck | TimerKind::CompAck => unreachable!("ACK timers belong to the receiver"),
        };
        let (expired, again) = timer.fire(now);
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
            TimerKind::DelAck | TimerKind::CompAck => {}
        }
    }

    /// Retransmission timeout (Linux `tcp_retransmit_timer` + `tcp_enter_loss`).
    fn on_rto(&mut self, now: Nanos, out: &mut Out) {
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
            let s = &mut self.rtxq[i];
            if s.flags & SACKED != 0 {
                continue;
            }
            if i > 0 && !self.rack.timed_out(s.tx.sent_ns, now) {
                if s.flags & RETRANS != 0 {
                    self.rexmits.push_back(s.seq);
                }
                continue;
            }
            if s.flags & RETRANS != 0 {
                s.flags &= !RETRANS;
                self.c.retrans_out -= 1;
            }
            if s.flags & LOST == 0 {
                s.flags |= LOST;
                self.c.lost_out += 1;
                self.c.lost += 1;
            }
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
    fn set_xmit_timer(&mut self, now: Nanos, out: &mut Out) {
        let mut at = jiffies_timer_ns(&self.c, self.rto_deadline.saturating_sub(now) / NS_PER_US);
        self.probe_armed = false;
        let could_send_new = self.c.packets_in_flight() < self.c.cwnd && self.has_data();
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

    /// The probe: one new segment if there is one (cwnd notwithstanding),
    /// else the last segment again, so that a lost tail is reported by SACK
    /// and repaired by fast recovery instead of waiting for the RTO.
    fn send_loss_probe(&mut self, now: Nanos, out: &mut Out) {
        self.probe_armed = false;
        self.stats.tlp_count += 1;
        self.tlp_retrans = false;
        let len = (self.write_seq - self.snd_nxt).min(self.cfg.mss as u64);
        let outstanding = self.snd_nxt + len - self.snd_una;
        if len > 0 && outstanding <= self.cfg.rmem_bytes {
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

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::test_cfg as tcp_cfg;

    fn ack(n: u64, at: Nanos) -> Packet {
        Packet { ack: n * 1448, ts_ecr: at - 10_000_000, ..Packet::default() }
    }

    /// A CCA that records the samples `pkts_acked` sees, and the rate
    /// samples `cong_control` sees (it leaves cwnd to the engine).
    struct Recorder(std::rc::Rc<std::cell::RefCell<Vec<AckSample>>>, std::rc::Rc<std::cell::RefCell<Vec<RateSample>>>);

    impl CongestionControl for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn ssthresh(&mut self, c: &mut Conn) -> u32 {
            c.cwnd / 2
        }
        fn pkts_acked(&mut self, _c: &mut Conn, s: &AckSample) {
            self.0.borrow_mut().push(*s);
        }
        fn cong_control(&mut self, _c: &mut Conn, rs: &RateSample) -> bool {
            self.1.borrow_mut().push(*rs);
            false
        }
    }

    /// An unlimited sender with `Recorder` as its CCA, its ten initial
    /// segments out at 10 ms, and the `pkts_acked` samples it records.
    fn recorded() -> (Sender, Out, std::rc::Rc<std::cell::RefCell<Vec<AckSample>>>) {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (s, out) = connected_with(&tcp_cfg(), Box::new(Recorder(seen.clone(), Default::default())), None, 10_000_000);
        (s, out, seen)
    }

    /// `pkts_acked` gets Linux's `in_flight`: what was delivered since the
    /// newest segment the ACK covers was sent, not what is out now.
    #[test]
    fn ack_sample_in_flight_is_delivered_since_send() {
        let (mut s, mut out, seen) = recorded();
        // Ten segments out; the first ACK covers two of them, both sent
        // before anything was delivered.
        s.on_ack(&ack(2, 20_000_000), 20_000_000, &mut out);
        assert_eq!(seen.borrow().last().unwrap().in_flight, 2);
        // Segments 11 and 12 went out after that ACK (delivered = 2); when
        // they are acked, 12 segments have been delivered: 10 since.
        s.on_ack(&ack(10, 21_000_000), 21_000_000, &mut out);
        s.on_ack(&ack(12, 30_000_000), 30_000_000, &mut out);
        assert_eq!(seen.borrow().last().unwrap().in_flight, 10);
    }

    /// The retransmit queue's ring shrinks with what it holds once a big
    /// window has been acked, and its contents stay in order.
    #[test]
    fn retransmit_queue_shrinks_after_a_peak() {
        let cfg = TcpConfig { init_cwnd: 400, ..tcp_cfg() };
        let (mut s, mut out) = connected(&cfg, "reno", Some(400 * 1448), 10_000_000);
        assert_eq!(s.rtxq.len(), 400);
        assert!(s.rtxq.capacity() >= 400);
        s.on_ack(&ack(395, 20_000_000), 20_000_000, &mut out);
        assert_eq!(s.rtxq.len(), 5);
        assert!(s.rtxq.capacity() <= 32, "capacity {}", s.rtxq.capacity());
        let seqs: Vec<u64> = s.rtxq.iter().map(|g| g.seq / 1448).collect();
        assert_eq!(seqs, (395..400).collect::<Vec<_>>());
    }

    /// A duplicate ACK that delivers nothing still reaches `pkts_acked`
    /// (Linux calls it at the end of `tcp_clean_rtx_queue` whenever data
    /// was outstanding), with no segment and no RTT.
    #[test]
    fn pkts_acked_on_an_ack_that_delivers_nothing() {
        let (mut s, mut out, seen) = recorded();
        s.on_ack(&ack(0, 20_000_000), 20_000_000, &mut out);
        let got = *seen.borrow().last().expect("pkts_acked was called");
        assert_eq!((got.pkts_acked, got.rtt_us), (0, -1));
    }

    /// The flags `in_ack_event` sees: a cumulative ACK without options takes
    /// Linux's fast path (window update only); one with SACK blocks the
    /// slow path; a duplicate without SACK neither.
    #[test]
    fn in_ack_event_flags_follow_header_prediction() {
        struct Flags(std::rc::Rc<std::cell::RefCell<Vec<u32>>>);
        impl CongestionControl for Flags {
            fn name(&self) -> &'static str {
                "flags"
            }
            fn ssthresh(&mut self, c: &mut Conn) -> u32 {
                c.cwnd / 2
            }
            fn in_ack_event(&mut self, _c: &mut Conn, flags: u32) {
                self.0.borrow_mut().push(flags);
            }
        }
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let (mut s, mut out) = connected_with(&tcp_cfg(), Box::new(Flags(seen.clone())), None, 10_000_000);
        s.on_ack(&ack(2, 20_000_000), 20_000_000, &mut out);
        s.on_ack(&ack(2, 20_100_000), 20_100_000, &mut out);
        s.on_ack(&ack(2, 20_200_000).with_sacks(&[(3 * 1448, 4 * 1448)]), 20_200_000, &mut out);
        s.on_ack(&ack(5, 20_300_000).with_sacks(&[(6 * 1448, 7 * 1448)]), 20_300_000, &mut out);
        assert_eq!(*seen.borrow(), vec![ACK_WIN_UPDATE, 0, ACK_SLOWPATH, ACK_SLOWPATH | ACK_WIN_UPDATE]);
    }

    /// After SYN timeouts, as Linux: the SYN-ACK's RTT comes from the
    /// timestamp echo in whole milliseconds (Karn voids the SYN's own), and
    /// more than one retransmission starts the transfer at one segment,
    /// unless the SYN-ACK answers the first SYN.
    #[test]
    fn handshake_after_syn_retransmissions() {
        // (srtt in µs, cwnd) after `n` SYN timeouts and a SYN-ACK that
        // echoes SYN number `echo`, 30.5 ms after the last SYN left.
        fn handshake(n: usize, echo: usize) -> (u64, u32) {
            let mut s = Sender::new(0, 0, &tcp_cfg(), crate::cc::by_name("reno").unwrap(), ConnOpts::default());
            s.set_unlimited(true);
            let mut out = Out::default();
            s.connect(0, &mut out);
            let mut sent = vec![out.pkts.last().unwrap().ts_val];
            for _ in 0..n {
                let (t, _, _) = *out.timers.last().unwrap();
                out.clear();
                s.on_timer(TimerKind::Rto, t, &mut out);
                assert!(out.pkts.last().unwrap().syn);
                sent.push(out.pkts.last().unwrap().ts_val);
            }
            let now = sent.last().unwrap() + 30_500_000;
            s.on_synack(&Packet { syn: true, ts_ecr: sent[echo], ..Packet::default() }, now, &mut out);
            (s.srtt_us(), s.c.cwnd)
        }
        assert_eq!(handshake(0, 0), (30_500, 10));
        assert_eq!(handshake(1, 1), (30_000, 10));
        assert_eq!(handshake(2, 2), (30_000, 1));
        // The SYN-ACK of the first SYN: spurious retransmissions.
        assert_eq!(handshake(2, 0).1, 10);
    }

    /// (end segment index, PSH) of the data segments in `out`.
    fn sent(out: &Out) -> Vec<(u64, bool)> {
        out.pkts.iter().filter(|p| p.len > 0).map(|p| ((p.seq + p.len as u64) / 1448, p.psh)).collect()
    }

    /// PSH ends every skb of two or more segments (GSO) and every
    /// application write. The SYN-ACK's 10 ms RTT sets a pacing rate of
    /// 2 × 10 segments per 10 ms, about two segments per millisecond, so
    /// the initial window leaves in two-segment skbs, as Linux's did.
    #[test]
    fn psh_ends_each_multi_segment_skb_and_each_write() {
        let cca = crate::cc::by_name("reno").unwrap();
        let mut s = Sender::new(0, 0, &tcp_cfg(), cca, ConnOpts::default());
        let mut out = Out::default();
        s.write(11 * 1448 + 100, 0, &mut out);
        s.connect(0, &mut out);
        out.clear();
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        assert_eq!(sent(&out), (1..=10).map(|i| (i, i % 2 == 0)).collect::<Vec<_>>());
        out.clear();
        // One segment acked: cwnd 11, room for two; the skb holds the last
        // full segment and the write's runt, which ends the write.
        s.on_ack(&ack(1, 20_000_000), 20_000_000, &mut out);
        let got: Vec<_> = out.pkts.iter().map(|p| (p.len, p.psh)).collect();
        assert_eq!(got, vec![(1448, false), (100, true)]);
    }

    /// Linux's `tcp_tso_segs`: ~1 ms at the pacing rate, plus 64 KB halved
    /// per 512 µs of min RTT, within 64 KB; the floor is the CCA's.
    #[test]
    fn tso_size_follows_the_rate_the_min_rtt_and_the_cca() {
        let tso = |cca: &str, rate: u64, min_rtt_us: u32| {
            let mut s = Sender::new(0, 0, &tcp_cfg(), crate::cc::by_name(cca).unwrap(), ConnOpts::default());
            s.c.pacing_rate = rate;
            s.c.min_rtt_us = min_rtt_us;
            s.tso_segs()
        };
        assert_eq!(tso("reno", 12_500_000, 10_000), 8); // 12,207 bytes per ms
        assert_eq!(tso("reno", 12_500_000, 1_000), 31); // + 32 KB
        assert_eq!(tso("reno", 12_500_000, 200), 45); // + 64 KB, capped at 64 KB
        assert_eq!(tso("reno", 100_000, 10_000), 2); // tcp_min_tso_segs
        assert_eq!(tso("bbr", 100_000, 10_000), 1); // bbr_min_tso_segs below 1.2 Mbit/s
    }

    /// A bulk Reno sender whose SYN-ACK came at 10 ms (its RTT): its
    /// initial window went out then.
    fn bulk_reno_set_up() -> (Sender, Out) {
        let cca = crate::cc::by_name("reno").unwrap();
        let mut s = Sender::new(0, 0, &tcp_cfg(), cca, ConnOpts::default());
        s.set_unlimited(true);
        let mut out = Out::default();
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        (s, out)
    }

    /// TSO deferral: in congestion avoidance with room for one segment
    /// (less than the two of a TSO skb at this rate, under a third of
    /// cwnd), right after a send and with the oldest segment out for more
    /// than half an RTT, the segment waits for the next ACK; with that
    /// ACK the two leave together, as one skb ending in PSH.
    #[test]
    fn a_lone_segment_waits_for_the_next_ack() {
        let (mut s, mut out) = bulk_reno_set_up();
        s.c.ssthresh = 2;
        out.clear();
        // Nothing sent for 6 ms: the freed segment goes at once.
        s.on_ack(&ack(1, 16_000_000), 16_000_000, &mut out);
        assert_eq!(sent(&out), vec![(11, false)]);
        out.clear();
        // Sent 0.5 ms ago, oldest out 6.5 ms (srtt 10 ms): deferred.
        s.on_ack(&ack(2, 10_000_000), 16_500_000, &mut out);
        assert!(out.pkts.is_empty());
        assert_eq!(s.c.cwnd - s.c.packets_in_flight(), 1);
        s.on_ack(&ack(3, 10_000_000), 17_000_000, &mut out);
        assert_eq!(sent(&out), vec![(12, false), (13, true)]);
    }

    /// `tcp_push_one`: a write that fills an skb while nothing else is
    /// unsent sends that skb at once, even where TSO deferral would hold
    /// it (room for one segment of a two-segment TSO size, a send 0.4 ms
    /// ago, the oldest segment out 10 ms); the rest waits as usual.
    #[test]
    fn a_write_into_an_empty_queue_is_pushed_at_once() {
        let (mut s, mut out) = all_written_sent();
        s.c.ssthresh = 2;
        s.c.cwnd = s.c.packets_in_flight() + 1;
        s.last_send_ns = 19_600_000;
        out.clear();
        s.sndbuf.expand(100, 3, 2); // as `tcp_new_space` would have
        s.app_write();
        assert!(s.write_seq > 65_160);
        s.send(20_000_000, &mut out);
        assert_eq!(sent(&out), vec![(46, false)]);
        out.clear();
        s.c.cwnd += 1;
        s.send(20_100_000, &mut out);
        assert!(out.pkts.is_empty(), "deferred: one segment of room, a send 0.1 ms ago");
    }

    /// A bulk sender whose first write (65,160 bytes: one skb of 45
    /// segments fills the new connection's 46,080-byte buffer) is all
    /// sent, cwnd wide open: the writer waits on a full buffer.
    fn all_written_sent() -> (Sender, Out) {
        let (mut s, mut out) = bulk_reno_set_up();
        assert_eq!(s.sndbuf_bytes(), 46_080);
        assert_eq!(s.write_seq, 65_160);
        s.c.cwnd = 100;
        s.send(11_000_000, &mut out);
        assert_eq!(s.snd_nxt, 65_160);
        assert!(!s.has_data());
        out.clear();
        (s, out)
    }

    /// SACKed segments held behind holes keep their charge: the first
    /// segment of every two-segment skb is lost, the second SACKed, so no
    /// skb is wholly SACKed and none is freed. The writer stays blocked
    /// and the sender has nothing new to send though cwnd has room; the
    /// repair's cumulative ACK frees the buffer, which grows (the sender
    /// was not cwnd-limited, `tcp_new_space`), and the writer writes.
    #[test]
    fn sacked_segments_behind_holes_keep_the_send_buffer_full() {
        let (mut s, mut out) = all_written_sent();
        let seg = |k: u64| ((k - 1) * 1448, k * 1448);
        let evens: Vec<u64> = (2..=44).step_by(2).collect();
        for (n, chunk) in evens.chunks(3).enumerate() {
            let blocks: Vec<_> = chunk.iter().rev().map(|&k| seg(k)).collect();
            let p = Packet { ack: 0, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&blocks);
            s.on_ack(&p, 20_000_000 + n as u64 * 100_000, &mut out);
        }
        assert_eq!(s.c.ca_state, CaState::Recovery);
        assert_eq!(s.c.sacked_out, 22);
        let skbs = s.rtxq.iter().filter(|g| g.end() <= 65_160 && g.flags & SKB_END != 0).count();
        assert_eq!(skbs, 45, "each two-segment skb cut in two at its SACK");
        assert_eq!(s.write_seq, 65_160, "the SACKs freed nothing: the writer still waits");
        assert_eq!(s.sndbuf_bytes(), 46_080);
        assert!(out.pkts.iter().all(|p| p.seq / 1448 % 2 == 0 && p.seq < 65_160), "only repairs of the holes");
        out.clear();
        s.on_ack(&Packet { ack: 65_160, ts_ecr: 10_000_000, ..Packet::default() }, 30_000_000, &mut out);
        assert_eq!(s.sndbuf_bytes(), 2 * s.c.cwnd.max(10) as u64 * 2304);
        assert!(s.write_seq > 65_160);
        assert!(out.pkts.iter().any(|p| p.seq == 65_160));
    }

    /// The same, but everything after the first segment is SACKed in one
    /// block: each skb, once wholly SACKed, merges into the SACKed one
    /// before it and is freed (`tcp_shift_skb_data`). That frees memory
    /// during the recovery, so the buffer grows there (not cwnd-limited)
    /// and the writer writes before the hole is repaired.
    #[test]
    fn wholly_sacked_skbs_merge_and_free_the_buffer_during_recovery() {
        let (mut s, mut out) = all_written_sent();
        let p = Packet { ack: 0, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(1448, 65_160)]);
        s.on_ack(&p, 20_000_000, &mut out);
        assert_eq!(s.c.ca_state, CaState::Recovery);
        let skbs = s.rtxq.iter().filter(|g| g.end() <= 65_160 && g.flags & SKB_END != 0).count();
        assert_eq!(skbs, 2, "the lost head, cut from its skb, and one SACKed skb are left");
        assert!(s.sndbuf_bytes() > 46_080);
        assert!(s.write_seq > 65_160);
    }

    /// A sender of `cca` whose SYN-ACK came at `synack_ns` (its RTT), so
    /// its initial window went out then; `data` bytes to send, or unlimited.
    fn connected(cfg: &TcpConfig, cca: &str, data: Option<u64>, synack_ns: Nanos) -> (Sender, Out) {
        connected_with(cfg, crate::cc::by_name(cca).unwrap(), data, synack_ns)
    }

    /// `connected` with a CCA given as an object (a test's recorder).
    fn connected_with(cfg: &TcpConfig, cca: Box<dyn CongestionControl>, data: Option<u64>, synack_ns: Nanos) -> (Sender, Out) {
        let mut s = Sender::new(0, 0, cfg, cca, ConnOpts::default());
        let mut out = Out::default();
        match data {
            Some(n) => s.write(n, 0, &mut out),
            None => s.set_unlimited(true),
        }
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, synack_ns, &mut out);
        out.clear();
        (s, out)
    }

    /// A connection with ten segments out at t = 10 ms (SYN RTT 10 ms).
    fn ten_out(cca: &str) -> (Sender, Out) {
        connected(&tcp_cfg(), cca, None, 10_000_000)
    }

    /// The ACK of `ten_out`'s receiver holding segments `a..b` out of order
    /// (nothing cumulatively acked; it echoes the first transmissions).
    fn sacked(a: u64, b: u64) -> Packet {
        Packet { ack: 0, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(a * 1448, b * 1448)])
    }

    /// Which ACK gives an RTT sample, as Linux's `tcp_clean_rtx_queue` and
    /// `tcp_ack_update_rtt` pick it: a SACK alone measures from the oldest
    /// newly SACKed original; an ACK that also covers a retransmission
    /// gives no cumulative sample (Karn), only the echoed timestamp.
    #[test]
    fn rtt_samples_as_linux_picks_them() {
        // Segments 0..9 went out at 10 ms (SYN RTT 10 ms).
        let (mut s, mut out) = ten_out("reno");
        assert_eq!(s.c.srtt_us, 10_000);
        s.on_ack(&sacked(1, 2), 13_000_000, &mut out);
        // srtt + (3 ms - srtt) / 8: the SACKed original's 3 ms (before, a
        // SACK alone only lowered min_rtt).
        assert_eq!(s.c.srtt_us, 9_125);

        // Segment 0 lost: three SACKed, it is retransmitted at 20 ms.
        let (mut s, mut out) = ten_out("reno");
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        assert_eq!(s.stats.retrans_segs, 1);
        assert_eq!(s.c.min_rtt_us, 10_000);
        // At 21 ms the cumulative ACK covers the retransmission and the
        // original segment 4 (11 ms): not that, the echo of 20 ms (1 ms).
        s.on_ack(&Packet { ack: 5 * 1448, ts_ecr: 20_000_000, ..Packet::default() }, 21_000_000, &mut out);
        assert_eq!(s.c.min_rtt_us, 1_000);
    }

    /// The min RTT filter takes the newest segment an ACK delivered
    /// (`ca_rtt_us`, `tcp_update_rtt_min`), srtt the oldest. Segments 0..9
    /// went out at 10 ms, 10..13 at 20 ms (after the ACK of two); at 25 ms
    /// one ACK covers 2..11: srtt takes segment 2's 15 ms, the min RTT
    /// segment 11's 5 ms (before, the oldest's: it stayed at the SYN's 10).
    #[test]
    fn min_rtt_takes_the_newest_segment_acked() {
        let (mut s, mut out) = ten_out("reno");
        s.on_ack(&ack(2, 20_000_000), 20_000_000, &mut out);
        assert_eq!((s.c.min_rtt_us, s.snd_nxt), (10_000, 14 * 1448));
        let srtt = s.rtt.srtt_ns();
        s.on_ack(&ack(12, 25_000_000), 25_000_000, &mut out);
        assert_eq!(s.c.min_rtt_us, 5_000);
        assert_eq!(s.rtt.srtt_ns(), (7 * srtt + 15_000_000) / 8);
        assert_eq!(s.stats.rtt.min(), Some(5_000));
    }

    /// Linux's min RTT is a windowed minimum (`tcp_min_rtt_wlen`, 300 s of
    /// jiffies), not the minimum of the whole connection; and a sample
    /// from an ACK that may have been delayed (one runt acked alone) is
    /// kept out unless it is a new minimum (FLAG_ACK_MAYBE_DELAYED).
    #[test]
    fn min_rtt_is_windowed_and_skips_maybe_delayed_acks() {
        let mut f = MinRtt::default();
        let mut c = Conn::new(1448, 10);
        assert_eq!(f.update(&c, 10_000, false), 10_000);
        c.now_us = 100_000_000;
        assert_eq!(f.update(&c, 30_000, true), 10_000, "a delayed ACK above the minimum");
        assert_eq!(f.update(&c, 20_000, false), 10_000);
        // 300 s after the 10 ms sample it has aged out; the 20 ms one
        // (taken at 100 s) is the minimum now.
        c.now_us = 300_001_000;
        assert_eq!(f.update(&c, 40_000, false), 20_000);
        // A write of half a segment into an idle connection, acked alone
        // 50 ms later by a delayed ACK: srtt takes it, the min RTT filter
        // does not, and the rate sample says the ACK may have been delayed
        // (BBR then does not refresh an expired min RTT with it).
        let rate = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut s = Sender::new(0, 0, &tcp_cfg(), Box::new(Recorder(Default::default(), rate.clone())), ConnOpts::default());
        let mut out = Out::default();
        s.write(724, 0, &mut out);
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        s.on_ack(&Packet { ack: 724, ts_ecr: 10_000_000, ..Packet::default() }, 60_000_000, &mut out);
        assert_eq!(s.c.min_rtt_us, 10_000);
        assert_eq!(s.rtt.srtt_ns(), (7 * 10_000_000 + 50_000_000) / 8);
        let last = *rate.borrow().last().unwrap();
        assert!(last.is_ack_delayed && last.rtt_us == 50_000);
    }

    /// The same lone runt acked alone is not "maybe delayed" when the ACK
    /// carries ECE (FLAG_CA_ALERT): the rate sample says so.
    #[test]
    fn ack_with_ece_is_not_maybe_delayed() {
        for ece in [false, true] {
            let rate = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let opts = ConnOpts { ecn: true, ..ConnOpts::default() };
            let mut s = Sender::new(0, 0, &tcp_cfg(), Box::new(Recorder(Default::default(), rate.clone())), opts);
            let mut out = Out::default();
            s.write(724, 0, &mut out);
            s.connect(0, &mut out);
            s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
            s.on_ack(&Packet { ack: 724, ts_ecr: 10_000_000, ece, ..Packet::default() }, 60_000_000, &mut out);
            assert_eq!(rate.borrow().last().unwrap().is_ack_delayed, !ece);
        }
    }

    /// `pkts_acked` and the rate sample get Linux's `ca_rtt_us`: when the
    /// ACK covers a retransmission (Karn voids the cumulative sample) the
    /// echoed timestamp stands in for it too, where the simulator gave -1
    /// because the newest delivered segment was a retransmission.
    #[test]
    fn cca_rtt_is_the_echo_when_karn_voids_the_sample() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let rate_rtts = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut s = Sender::new(0, 0, &tcp_cfg(), Box::new(Recorder(seen.clone(), rate_rtts.clone())), ConnOpts::default());
        s.set_unlimited(true);
        let mut out = Out::default();
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        // Segment 0 lost: three SACKed at 20 ms, it is retransmitted then.
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        assert_eq!(s.stats.retrans_segs, 1);
        // The SACK of originals sent at 10 ms: 10 ms for the CCA too.
        assert_eq!((seen.borrow().last().unwrap().rtt_us, rate_rtts.borrow().last().unwrap().rtt_us), (10_000, 10_000));
        // The cumulative ACK of the retransmission and segment 4: the echo
        // of 20 ms, 1 ms.
        s.on_ack(&Packet { ack: 5 * 1448, ts_ecr: 20_000_000, ..Packet::default() }, 21_000_000, &mut out);
        assert_eq!(seen.borrow().last().unwrap().rtt_us, 1_000);
        assert_eq!(rate_rtts.borrow().last().unwrap().rtt_us, 1_000);
    }

    /// The echo that stands in when Karn voids the ACK's sample counts
    /// whole milliseconds of Linux's timestamp clock: segment 0 lost and
    /// retransmitted at 20 ms, its ACK 0.3 ms later echoing 20 ms gives
    /// 1 ms (before, 0.3 ms, which became the min RTT).
    #[test]
    fn echo_sample_is_in_whole_milliseconds() {
        let (mut s, mut out) = ten_out("reno");
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        assert_eq!(s.stats.retrans_segs, 1);
        let srtt = s.rtt.srtt_ns();
        s.on_ack(&Packet { ack: 5 * 1448, ts_ecr: 20_000_000, ..Packet::default() }, 20_300_000, &mut out);
        assert_eq!(s.c.min_rtt_us, 1_000);
        assert_eq!(s.rtt.srtt_ns(), (7 * srtt + 1_000_000) / 8);
    }

    /// Linux's `tcp_rack_mark_lost` scans for losses on an ACK only if a
    /// segment was delivered since its last scan (`tp->rack.advanced`):
    /// an ACK repeating known SACKs marks nothing even once a segment is
    /// due; the reordering timer armed at the last scan does. Segments
    /// 0..9 went out at 10 ms; at 20 ms segments 1 and 2 are SACKed, so
    /// segment 0 is due at 10 + 10 + 2.5 ms (RACK's RTT plus min_rtt/4).
    #[test]
    fn rack_scans_on_an_ack_only_when_it_advanced() {
        let (mut s, mut out) = ten_out("reno");
        s.on_ack(&sacked(1, 3), 20_000_000, &mut out);
        assert_eq!((s.c.lost, s.c.ca_state), (0, CaState::Disorder));
        let at = s.reo_timer.deadline().unwrap();
        assert!(at > 23_000_000);
        // The same SACK again at 23 ms (before, this ACK marked it).
        s.on_ack(&sacked(1, 3), 23_000_000, &mut out);
        assert_eq!((s.c.lost, s.stats.retrans_segs), (0, 0));
        s.on_timer(TimerKind::Reorder, at, &mut out);
        assert_eq!((s.c.lost, s.c.ca_state, s.stats.retrans_segs), (1, CaState::Recovery, 1));
    }

    /// RACK's RTT is the last delivered segment's, in Linux's order (Linux
    /// 6.x `tcp_rack_advance`, called by `tcp_sacktag_one` for newly SACKed
    /// segments in sequence order, then by `tcp_clean_rtx_queue` for the
    /// cumulatively acked ones). Segments 0..9 went out at 10 ms, 10..13 at
    /// 20 ms (min RTT 10 ms, window 2.5 ms); at 34 ms segment 10 (RTT 14
    /// ms) is SACKed, so 3..9 (out 24 ms) look lost, unless the same ACK
    /// also cumulatively acks segment 2, whose 24 ms RTT is processed last.
    #[test]
    fn rack_takes_the_rtt_of_the_last_segment_processed() {
        let at = 34_000_000;
        let ack_with = |una: u64, blocks: &[(u64, u64)]| {
            let b: Vec<(u64, u64)> = blocks.iter().map(|&(a, e)| (a * 1448, e * 1448)).collect();
            Packet { ack: una * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&b)
        };
        let four_more = || {
            let (mut s, mut out) = ten_out("reno");
            s.on_ack(&ack(2, 20_000_000), 20_000_000, &mut out);
            assert_eq!(s.snd_nxt, 14 * 1448);
            (s, out)
        };
        // SACK only: segments 2..9 lost.
        let (mut s, mut out) = four_more();
        s.on_ack(&ack_with(2, &[(10, 11)]), at, &mut out);
        assert_eq!(s.c.lost, 8);
        // The same SACK with segment 2 cumulatively acked: nothing lost.
        let (mut s, mut out) = four_more();
        s.on_ack(&ack_with(3, &[(10, 11)]), at, &mut out);
        assert_eq!((s.c.lost, s.c.ca_state), (0, CaState::Disorder));
        // Blocks go in sequence order whatever order the ACK lists them in:
        // segment 10 after segment 7, so its 14 ms RTT is the one kept.
        let (mut s, mut out) = four_more();
        s.on_ack(&ack_with(2, &[(10, 11), (7, 8)]), at, &mut out);
        assert_eq!(s.c.lost, 7);
    }

    /// The route change of docs/sim-model.md ("Reordering detection"), as
    /// Linux 6.18 handled it: RACK marks delayed originals lost and fast
    /// recovery starts, but the retransmission waits for its pacing slot;
    /// the next ACK cumulatively acks a delayed original, and with nothing
    /// retransmitted yet that proves the packet delayed (`tcp_packet_delayed`
    /// since 2024): the recovery is undone at once. The segments RACK
    /// marked are off its time-sorted list for good: RACK does not judge
    /// them again. Paced at 96.5 kB/s: segment 10 went out at 20 ms, the
    /// next pacing slot is 7.5 ms later (15 ms less Linux's credit).
    #[test]
    fn delayed_originals_undo_recovery_before_any_retransmission() {
        let opts = ConnOpts { max_pacing_rate: Some(96_500), ..ConnOpts::default() };
        let mut s = Sender::new(0, 0, &tcp_cfg(), crate::cc::by_name("cubic").unwrap(), opts);
        s.set_unlimited(true);
        let mut out = Out::default();
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        // Paced bursts of two segments (`tcp_min_tso_segs`), even at this rate.
        s.on_ack(&ack(2, 20_000_000), 20_000_000, &mut out);
        assert_eq!(s.snd_nxt, 12 * 1448);
        let cwnd = s.c.cwnd;
        let with = |una: u64, end: u64| {
            Packet { ack: una * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(10 * 1448, end * 1448)])
        };
        // Segment 10 SACKed at 25 ms (RTT 5 ms): 2..9 (out 15 ms) lost.
        s.on_ack(&with(2, 11), 25_000_000, &mut out);
        assert_eq!((s.c.lost, s.c.ca_state, s.stats.retrans_segs), (8, CaState::Recovery, 0));
        // Segment 2 arrives: partial undo, window restored, nothing sent.
        s.on_ack(&with(3, 11), 25_060_000, &mut out);
        assert_eq!((s.c.ca_state, s.c.lost_out, s.stats.retrans_segs), (CaState::Disorder, 0, 0));
        assert!(s.c.cwnd >= cwnd, "cwnd {} not restored to {cwnd}", s.c.cwnd);
        // The next pacing slot (35 ms): new data, segments 13 and 14;
        // segment 12 is SACKed 1 ms later. 3..9 have been out 25 ms, but
        // RACK judged them already.
        let slot = s.pace_timer.deadline().unwrap();
        s.on_timer(TimerKind::Pace, slot, &mut out);
        assert_eq!(s.snd_nxt, 14 * 1448);
        s.on_ack(&with(3, 12), slot + 1_000_000, &mut out);
        assert_eq!((s.c.lost, s.c.ca_state, s.stats.retrans_segs), (8, CaState::Disorder, 0));
    }

    /// A spurious timeout (RFC 5682 / Eifel): the ACK after the RTO echoes
    /// the original transmission's timestamp, so the window cut is undone
    /// and the connection is Open with its old cwnd and ssthresh.
    #[test]
    fn spurious_rto_is_undone() {
        let (mut s, mut out) = ten_out("reno");
        let rto_at = s.rto_deadline;
        s.on_timer(TimerKind::Rto, rto_at, &mut out);
        // The probe timer fires first with ten segments out; then the RTO.
        while s.c.ca_state != CaState::Loss {
            let at = s.rto_deadline.max(s.c.now_ns + 1);
            s.on_timer(TimerKind::Rto, at, &mut out);
        }
        assert!(s.c.cwnd <= 2);
        let now = s.c.now_ns + 1_000_000;
        s.on_ack(&Packet { ack: 5 * 1448, ts_ecr: 10_000_000, ..Packet::default() }, now, &mut out);
        assert_eq!(s.stats.undo_count, 1);
        assert_eq!(s.c.ca_state, CaState::Open);
        assert_eq!(s.c.ssthresh, INFINITE_SSTHRESH);
        assert!(s.c.cwnd >= 10, "cwnd {} not restored", s.c.cwnd);
        assert_eq!(s.c.lost_out, 0);
    }

    /// A real timeout: the ACK echoes the retransmission. F-RTO step 2b
    /// sends new data rather than retransmitting more; the next ACK that
    /// only SACKs the new data shows the loss was real (step 3a).
    #[test]
    fn real_rto_sends_new_data_then_recovers_conventionally() {
        let (mut s, mut out) = ten_out("reno");
        while s.c.ca_state != CaState::Loss {
            let at = s.rto_deadline.max(s.c.now_ns + 1);
            s.on_timer(TimerKind::Rto, at, &mut out);
        }
        let rexmit_at = s.c.now_ns;
        out.clear();
        // The head's retransmission is acked; segments 2..10 are still lost.
        s.on_ack(&Packet { ack: 1448, ts_ecr: rexmit_at, ..Packet::default() }, rexmit_at + 1_000_000, &mut out);
        assert_eq!(s.stats.undo_count, 0);
        assert_eq!(s.c.ca_state, CaState::Loss);
        let first = sent(&out);
        assert!(!first.is_empty() && first.iter().all(|&(end, _)| end > 10), "new data first, got {first:?}");
        out.clear();
        // The new data is sacked above the holes: retransmissions resume.
        // (Segment 11, the loss probe sent before the timeout, is an
        // original: its SACK would prove the timeout spurious.)
        let (end, _) = *first.last().unwrap();
        let p = Packet { ack: 1448, ts_ecr: rexmit_at, ..Packet::default() }.with_sacks(&[((end - 1) * 1448, end * 1448)]);
        s.on_ack(&p, rexmit_at + 2_000_000, &mut out);
        assert_eq!(s.stats.undo_count, 0);
        assert!(sent(&out).iter().any(|&(end, _)| end <= 10), "no retransmission after step 3a");
    }

    /// D-SACKs for every retransmission of a fast recovery undo it (Linux
    /// `tcp_try_undo_dsack`), restoring the CCA's cwnd (`undo_cwnd`).
    #[test]
    fn dsack_of_every_retransmission_undoes_recovery() {
        let (mut s, mut out) = ten_out("cubic");
        // Segments 2..4 sacked after segment 1: RACK marks 1 lost at once
        // (three sacked), recovery retransmits it.
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        assert_eq!(s.c.ca_state, CaState::Recovery);
        let prior = s.c.prior_cwnd;
        assert!(s.c.ssthresh < prior);
        // The original arrived after all, then the rest of the window: the
        // receiver reports the retransmission as a duplicate.
        let d = Packet { ack: 10 * 1448, ts_ecr: 20_000_000, ..Packet::default() }.with_sacks(&[(0, 1448)]);
        s.on_ack(&d, 31_000_000, &mut out);
        assert_eq!(s.stats.undo_count, 1);
        assert!(matches!(s.c.ca_state, CaState::Open | CaState::Disorder));
        assert!(s.c.cwnd >= prior, "cwnd {} < prior {}", s.c.cwnd, prior);
    }

    /// A real loss repaired by fast retransmit is not undone.
    #[test]
    fn real_fast_recovery_is_kept() {
        let (mut s, mut out) = ten_out("cubic");
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        let ssthresh = s.c.ssthresh;
        // The retransmission's ACK echoes the retransmission.
        s.on_ack(&Packet { ack: 10 * 1448, ts_ecr: 20_000_000, ..Packet::default() }, 30_000_000, &mut out);
        assert_eq!(s.stats.undo_count, 0);
        assert_eq!(s.c.ssthresh, ssthresh);
    }

    /// Retransmitting the head restarts the retransmission timer (Linux
    /// `tcp_xmit_retransmit_queue` re-arms it when the head went out again
    /// and no reordering timer is pending), so a repaired head gets a whole
    /// RTO to be acknowledged; the timer armed for the original would fire
    /// while the retransmission is still on its way.
    #[test]
    fn head_retransmission_restarts_the_rto() {
        let (mut s, mut out) = ten_out("cubic");
        let first_deadline = s.rto_deadline;
        // Segments 1..3 sacked at 20 ms: segment 0 is lost and resent now.
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        assert_eq!(s.c.ca_state, CaState::Recovery);
        assert!(s.rtxq[0].flags & RETRANS != 0, "the head was not retransmitted");
        assert!(!s.reo_timer.is_armed());
        assert_eq!(s.rto_deadline, 20_000_000 + s.current_rto());
        assert!(s.rto_deadline > first_deadline);
        // The old deadline passes without a timeout.
        s.on_timer(TimerKind::Rto, first_deadline, &mut out);
        assert_eq!(s.stats.rto_count, 0);
        assert_eq!(s.c.ca_state, CaState::Recovery);
    }

    /// A timeout marks lost the head and what RACK has timed out (Linux
    /// `tcp_timeout_mark_lost`); a segment sent within RACK's RTT before it
    /// stays unmarked, and RACK judges it on later ACKs as any other: once
    /// a segment sent after it is delivered and its RTT plus the
    /// reordering window has passed, it is lost.
    #[test]
    fn rack_judges_what_a_timeout_left_unmarked() {
        let (mut s, mut out) = ten_out("reno");
        // Half the window is acked late (RACK's RTT 190 ms) and the window
        // opens: segments 10..19 go out at 200 ms.
        s.on_ack(&Packet { ack: 5 * 1448, ts_ecr: 10_000_000, ..Packet::default() }, 200_000_000, &mut out);
        // Nothing more comes back: the loss probe (new segment 20), then
        // the timeout, which resends the head.
        while s.c.ca_state != CaState::Loss {
            let at = s.rto_deadline.max(s.c.now_ns + 1);
            s.on_timer(TimerKind::Rto, at, &mut out);
        }
        let rto_at = s.c.now_ns;
        let unmarked: Vec<u64> =
            s.rtxq.iter().filter(|g| g.flags & (LOST | SACKED | EVER_RETRANS) == 0).map(|g| g.seq).collect();
        assert!(!unmarked.is_empty(), "the timeout marked every segment: nothing left for RACK to judge");
        // The head's retransmission is acked: F-RTO sends new data.
        s.on_ack(&Packet { ack: 6 * 1448, ts_ecr: rto_at, ..Packet::default() }, rto_at + 20_000_000, &mut out);
        let later = s.rtxq.iter().find(|g| g.tx.sent_ns > rto_at && g.flags & EVER_RETRANS == 0).map(|g| (g.seq, g.end()));
        let (a, b) = later.expect("no new data after the timeout");
        // A segment sent after the timeout is sacked long after the
        // unmarked ones were due.
        let sack = Packet { ack: s.snd_una, ts_ecr: rto_at, ..Packet::default() }.with_sacks(&[(a, b)]);
        s.on_ack(&sack, rto_at + 300_000_000, &mut out);
        for seq in unmarked {
            let g = s.rtxq[s.index_of(seq)];
            assert!(g.flags & (LOST | EVER_RETRANS) != 0, "segment {} (sent at {} ns) never judged", seq / 1448, g.tx.sent_ns);
        }
    }

    /// A CUBIC sender on a 0.3 ms path (the SYN's RTT) whose initial window
    /// went out at 0.3 ms, modelling a kernel of `hz` (CONFIG_HZ); `data`
    /// bytes to send, or unlimited.
    fn short_path(hz: u32, data: Option<u64>) -> (Sender, Out) {
        connected(&TcpConfig { kernel_hz: Some(hz), ..tcp_cfg() }, "cubic", data, 300_000)
    }

    /// The loss probe is a jiffies timer (Linux `tcp_schedule_loss_probe`:
    /// usecs_to_jiffies(2·srtt + 2 ms) from the current jiffy): on a 0.3 ms
    /// path it fires at the next tick at 250 Hz, the third at 1000 Hz.
    #[test]
    fn loss_probe_fires_on_a_jiffy_tick() {
        for (hz, at) in [(250, 4_000_000), (1000, 3_000_000)] {
            let (s, _) = short_path(hz, None);
            assert!(s.probe_armed);
            assert_eq!(s.rto_timer.deadline(), Some(at), "{hz} Hz");
        }
    }

    /// With one segment out the probe waits 2·srtt + the minimum RTO, later
    /// than the RTO itself; Linux still arms the probe, at the RTO's time.
    #[test]
    fn single_segment_gets_a_probe_at_the_rto_time() {
        let (s, _) = short_path(1000, Some(1448));
        assert_eq!(s.c.packets_out, 1);
        assert!(s.probe_armed);
        // RTO 0.3 + 200 ms from 0.3 ms: 200.3 ms rounds up to 201 jiffies.
        assert_eq!(s.rto_timer.deadline(), Some(201_000_000));
    }

    /// RACK's reordering timer waits TCP_TIMEOUT_MIN_US more than the
    /// reordering window, in jiffies (`tcp_rack_mark_lost`); when it fires
    /// before the window has passed (a 250 Hz tick can come sooner), Linux's
    /// `tcp_rack_reo_timeout` does not arm it again.
    #[test]
    fn reordering_timer_is_a_jiffies_timer_and_fires_once() {
        // Segment 2 sacked, segment 1 (sent with it) not: RACK waits
        // min_rtt/4 = 75 µs, plus 2 ms, as jiffies.
        let sack2 = Packet { ack: 0, ts_ecr: 300_000, ..Packet::default() }.with_sacks(&[(1448, 2 * 1448)]);
        for (hz, at) in [(250, 4_000_000), (1000, 3_000_000)] {
            let (mut s, mut out) = short_path(hz, None);
            s.on_ack(&sack2, 600_000, &mut out);
            assert_eq!(s.c.lost_out, 0);
            assert_eq!(s.reo_timer.deadline(), Some(at), "{hz} Hz");
            s.on_timer(TimerKind::Reorder, at, &mut out);
            assert_eq!(s.c.lost_out, 1, "{hz} Hz");
            assert_eq!(s.c.ca_state, CaState::Recovery);
        }
        // The same SACK at 3.95 ms: the window ends at 4.025 ms, the timer
        // (one jiffy) fires at the 4 ms tick and finds nothing due.
        let (mut s, mut out) = short_path(250, None);
        s.on_ack(&sack2, 3_950_000, &mut out);
        assert_eq!(s.reo_timer.deadline(), Some(4_000_000));
        s.on_timer(TimerKind::Reorder, 4_000_000, &mut out);
        assert_eq!(s.c.lost_out, 0);
        assert!(!s.reo_timer.is_armed());
    }

    /// An ACK that only SACKs (the hole not yet judged lost) does not grow
    /// cwnd; the next one that advances snd_una grows it by what that ACK
    /// newly delivered, so the sacked segment's growth is not made up
    /// (Linux `tcp_may_raise_cwnd` and `tcp_newly_delivered`).
    #[test]
    fn only_cumulative_acks_raise_cwnd() {
        let (mut s, mut out) = ten_out("reno");
        s.on_ack(&sacked(1, 2), 20_000_000, &mut out);
        assert_eq!(s.c.ca_state, CaState::Disorder);
        assert_eq!(s.c.cwnd, 10);
        // Segment 1 arrives late: the cumulative ACK delivers one more.
        s.on_ack(&Packet { ack: 2 * 1448, ts_ecr: 10_000_000, ..Packet::default() }, 20_100_000, &mut out);
        assert_eq!(s.c.cwnd, 11);
    }

    /// `ten_out` whose segments 2 and 3 overtook segment 1, which came 1 ms
    /// later, before RACK's window (min_rtt/4, under the dupack threshold)
    /// ran out: the filled hole is reordering (`tcp_clean_rtx_queue` ->
    /// `tcp_check_sack_reordering`).
    fn reordered_once() -> (Sender, Out) {
        let (mut s, mut out) = ten_out("cubic");
        s.on_ack(&sacked(1, 3), 20_000_000, &mut out);
        assert_eq!(s.c.ca_state, CaState::Disorder);
        assert_eq!(s.reord.seen, 0);
        s.on_ack(&Packet { ack: 3 * 1448, ts_ecr: 10_000_000, ..Packet::default() }, 21_000_000, &mut out);
        assert_eq!((s.reord.seen, s.reord.degree), (1, 3));
        assert_eq!(s.stats.retrans_segs, 0);
        (s, out)
    }

    /// The same reordering again, with four segments overtaking segment 4:
    /// past the dupack threshold RACK's window would be 0 and recovery
    /// would start, but reordering has been seen, so RACK keeps its
    /// min_rtt/4 window and the late original arrives within it.
    #[test]
    fn learnt_reordering_does_not_start_recovery_again() {
        let (mut s, mut out) = reordered_once();
        let p = Packet { ack: 3 * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(4 * 1448, 8 * 1448)]);
        s.on_ack(&p, 21_500_000, &mut out);
        assert_eq!(s.c.sacked_out, 4);
        assert_eq!((s.c.ca_state, s.c.lost_out), (CaState::Disorder, 0));
        assert!(s.reo_timer.is_armed());
        s.on_ack(&Packet { ack: 8 * 1448, ts_ecr: 10_000_000, ..Packet::default() }, 22_000_000, &mut out);
        assert_eq!(s.c.ca_state, CaState::Open);
        assert_eq!((s.stats.retrans_segs, s.c.ssthresh), (0, INFINITE_SSTHRESH));
        // Segment 4 was five segments behind the highest ACK.
        assert_eq!((s.reord.seen, s.reord.degree), (2, 5));
        // With more reordering than the default, an ACK that only SACKs
        // grows cwnd too (`tcp_may_raise_cwnd`; compare
        // `only_cumulative_acks_raise_cwnd`).
        let cwnd = s.c.cwnd;
        let p = Packet { ack: 8 * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(9 * 1448, 10 * 1448)]);
        s.on_ack(&p, 22_100_000, &mut out);
        assert_eq!(s.c.cwnd, cwnd + 1);
    }

    /// Reordering longer than RACK's window: the spurious retransmission
    /// draws a D-SACK, which undoes the recovery and widens the window by
    /// one min_rtt/4 step on the next ACK that delivers data sent after
    /// the last widening (`tcp_rack_update_reo_wnd`).
    #[test]
    fn dsack_after_reordering_widens_the_rack_window() {
        let (mut s, mut out) = reordered_once();
        let wnd = |s: &Sender| s.rack.reo_wnd(&s.reord, CaState::Recovery, 0, s.c.min_rtt_us, s.rtt.srtt_ns());
        let step = s.c.min_rtt_us as u64 * NS_PER_US / 4;
        assert_eq!(wnd(&s), step);
        let p = Packet { ack: 3 * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(4 * 1448, 8 * 1448)]);
        s.on_ack(&p, 21_500_000, &mut out);
        let at = s.reo_timer.deadline().unwrap();
        s.on_timer(TimerKind::Reorder, at, &mut out);
        assert_eq!(s.c.ca_state, CaState::Recovery);
        assert_eq!(s.stats.retrans_segs, 1);
        // The original, then the D-SACK of its retransmission.
        s.on_ack(&Packet { ack: 8 * 1448, ts_ecr: 10_000_000, ..Packet::default() }, at + 500_000, &mut out);
        let d = Packet { ack: 8 * 1448, ts_ecr: at, ..Packet::default() }.with_sacks(&[(3 * 1448, 4 * 1448)]);
        s.on_ack(&d, at + 1_000_000, &mut out);
        assert_eq!(s.stats.undo_count, 1);
        assert_eq!(wnd(&s), step, "no data delivered yet: the widening waits");
        s.on_ack(&Packet { ack: 12 * 1448, ts_ecr: 20_000_000, ..Packet::default() }, at + 2_000_000, &mut out);
        // Two steps of the min RTT, which this ACK's newest segment lowered.
        assert!(s.c.min_rtt_us as u64 * NS_PER_US / 4 < step);
        assert_eq!(wnd(&s), 2 * (s.c.min_rtt_us as u64 * NS_PER_US / 4));
    }

    /// Ten segments written, eight acked, the probe timer fired (2·srtt +
    /// 2 ms after that ACK): the last segment went out again as a probe.
    fn probed_tail() -> (Sender, Out) {
        let mut s = Sender::new(0, 0, &tcp_cfg(), crate::cc::by_name("cubic").unwrap(), ConnOpts::default());
        let mut out = Out::default();
        s.write(10 * 1448, 0, &mut out);
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        s.on_ack(&ack(8, 20_000_000), 20_000_000, &mut out);
        out.clear();
        assert!(s.probe_armed);
        s.on_timer(TimerKind::Rto, 100_000_000, &mut out);
        // The write's last segment, with the PSH of its write.
        assert_eq!(sent(&out), vec![(10, true)]);
        assert!(s.tlp_retrans && s.tlp_high_seq == Some(10 * 1448));
        (s, out)
    }

    /// A D-SACK of the probe: original and probe both arrived, no loss.
    #[test]
    fn dsacked_loss_probe_is_no_loss() {
        let (mut s, mut out) = probed_tail();
        let now = s.c.now_ns + 10_000_000;
        let d = Packet { ack: 10 * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(9 * 1448, 10 * 1448)]);
        s.on_ack(&d, now, &mut out);
        assert_eq!(s.tlp_high_seq, None);
        assert_eq!(s.c.ssthresh, INFINITE_SSTHRESH);
    }

    /// No D-SACK: the probe repaired a lost tail, and the first ACK beyond
    /// it reduces cwnd once (Linux TCPLossProbeRecovery).
    #[test]
    fn loss_repaired_by_the_probe_reduces_cwnd() {
        let (mut s, mut out) = probed_tail();
        let now = s.c.now_ns + 10_000_000;
        s.on_ack(&Packet { ack: 10 * 1448, ts_ecr: now - 10_000_000, ..Packet::default() }, now, &mut out);
        assert_eq!(s.c.ssthresh, INFINITE_SSTHRESH);
        assert!(s.tlp_high_seq.is_some());
        s.write(1448, now, &mut out);
        s.on_ack(&Packet { ack: 11 * 1448, ts_ecr: now, ..Packet::default() }, now + 10_000_000, &mut out);
        assert!(s.c.ssthresh < INFINITE_SSTHRESH);
        assert_eq!(s.tlp_high_seq, None);
        assert_eq!(s.c.ca_state, CaState::Open);
    }
}
