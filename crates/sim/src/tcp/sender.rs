//! The sending side of a TCP connection, after Linux: a retransmit queue of
//! segments with SACK scoreboard flags, RACK loss detection (and dupack
//! counting without SACK), PRR during fast recovery, RTO with exponential
//! backoff, pacing, and delivery-rate sampling per
//! draft-cheng-iccrg-delivery-rate-estimation. The congestion controller is
//! called through the `tcp_congestion_ops`-shaped trait in `crate::cc`.

use super::{ConnOpts, Out, TimerKind};
use crate::cc::{AckSample, CaEvent, CaState, CongestionControl, Conn, RateSample, ACK_ECE, INFINITE_SSTHRESH};
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
const APP_LIMITED: u8 = 16;
/// The segment carries PSH: it ends an application write.
const PUSH: u8 = 32;

/// Linux TCP_TIMEOUT_INIT and TCP_RTO_MAX.
const RTO_INIT: Nanos = NS_PER_SEC;
const RTO_MAX: Nanos = 120 * NS_PER_SEC;
/// Linux `tcp_reordering` default: the dupack threshold without SACK.
const DUPTHRESH: u32 = 3;
/// Segments sent before Linux starts pacing (`tp->data_segs_out >= 10`).
const UNPACED_SEGS: u64 = 10;

/// One segment in the retransmit queue (Linux `tcp_skb_cb`).
#[derive(Clone, Copy, Debug)]
struct Seg {
    seq: u64,
    len: u32,
    flags: u8,
    /// Last (re)transmission time.
    sent_ns: Nanos,
    /// Delivery-rate snapshot taken at that transmission.
    first_tx_ns: Nanos,
    delivered_ns: Nanos,
    delivered: u64,
    delivered_ce: u64,
    /// Already counted in a rate sample.
    rate_done: bool,
}

impl Seg {
    fn end(&self) -> u64 {
        self.seq + self.len as u64
    }
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
    /// Bytes the application has handed over so far; `unlimited` for bulk.
    write_seq: u64,
    unlimited: bool,
    /// Bulk sender: ends of the application's writes not yet sent; the
    /// segment holding each gets PSH. See `note_app_refill`.
    push_seqs: VecDeque<u64>,
    rtxq: VecDeque<Seg>,

    // RTT and RTO (RFC 6298 as Linux computes it)
    srtt_ns: Nanos,
    rttvar_ns: Nanos,
    rto_ns: Nanos,
    backoff: u32,
    /// The retransmission timer; it also carries the tail loss probe.
    pub rto_timer: Timer,
    /// When the RTO would fire, and whether the timer is set for a probe.
    rto_deadline: Nanos,
    probe_armed: bool,
    /// A loss probe is outstanding up to this sequence (Linux `tlp_high_seq`).
    tlp_high_seq: Option<u64>,
    pub pace_timer: Timer,
    pub reo_timer: Timer,
    /// Earliest departure of the next burst (Linux's `tcp_wstamp_ns`).
    pace_next_ns: Nanos,
    /// The burst being sent: segments and wire bytes so far, and its goal.
    burst_segs: u32,
    burst_bytes: u64,
    burst_goal: u32,
    last_send_ns: Nanos,

    // loss recovery
    high_seq: u64,
    prr_delivered: u32,
    prr_out: u32,
    rack_xmit_ns: Nanos,
    rack_end_seq: u64,
    rack_rtt_ns: Nanos,
    rack_valid: bool,
    /// Lowest sequence that may hold a lost, not yet retransmitted segment.
    retx_hint: u64,
    /// Lowest sequence of a never-retransmitted segment RACK has not settled.
    rack_hint: u64,
    /// Sequences of retransmissions in flight, oldest transmission first.
    rexmits: VecDeque<u64>,
    /// SACK blocks of the previous ACK, already applied to the scoreboard.
    sack_cache: [(u64, u64); crate::packet::MAX_SACK],
    nsack_cache: usize,
    cwnd_usage_seq: u64,

    // delivery-rate estimation
    first_tx_ns: Nanos,
    delivered_ns: Nanos,
    data_segs_out: u64,
    /// Per-ACK rate-sample scratch: `delivered_ns` snapshot and the send
    /// time / end of the segment the sample is taken from.
    rate_prior_ns: Nanos,
    rs_key: (Nanos, u64),

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
            write_seq: 0,
            unlimited: false,
            push_seqs: VecDeque::new(),
            rtxq: VecDeque::with_capacity(256),
            srtt_ns: 0,
            rttvar_ns: 0,
            rto_ns: RTO_INIT,
            backoff: 0,
            rto_timer: Timer::default(),
            rto_deadline: 0,
            probe_armed: false,
            tlp_high_seq: None,
            pace_timer: Timer::default(),
            reo_timer: Timer::default(),
            pace_next_ns: 0,
            burst_segs: 0,
            burst_bytes: 0,
            burst_goal: 1,
            last_send_ns: 0,
            high_seq: 0,
            prr_delivered: 0,
            prr_out: 0,
            rack_xmit_ns: 0,
            rack_end_seq: 0,
            rack_rtt_ns: 0,
            rack_valid: false,
            retx_hint: 0,
            rack_hint: 0,
            rexmits: VecDeque::new(),
            sack_cache: [(0, 0); crate::packet::MAX_SACK],
            nsack_cache: 0,
            cwnd_usage_seq: 0,
            first_tx_ns: 0,
            delivered_ns: 0,
            data_segs_out: 0,
            rate_prior_ns: 0,
            rs_key: (0, 0),
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
        self.send_syn(now, out);
    }

    fn send_syn(&mut self, now: Nanos, out: &mut Out) {
        let mut p = self.packet(now);
        p.syn = true;
        p.wire = self.cfg.header_bytes + 8; // MSS, SACK-permitted, window scale
        out.pkts.push(p);
        if let Some(t) = self.rto_timer.arm(self.opts.timer_at(now + self.rto_ns)) {
            out.timers.push((t, self.conn_id, TimerKind::Rto));
        }
    }

    /// Start without a handshake (the return stream of an RPC connection,
    /// which shares the handshake of its request stream).
    pub fn establish(&mut self, now: Nanos) {
        self.set_now(now);
        self.state = State::Established;
        self.cca.init(&mut self.c);
    }

    /// A SYN-ACK arrived.
    pub fn on_synack(&mut self, p: &Packet, now: Nanos, out: &mut Out) {
        if self.state != State::SynSent {
            return;
        }
        self.set_now(now);
        self.rto_timer.cancel();
        // A SYN RTT is only trusted when the SYN was not retransmitted (Karn).
        if self.backoff == 0 {
            self.rtt_sample(now.saturating_sub(p.ts_ecr));
        }
        self.backoff = 0;
        self.update_rto();
        self.state = State::Established;
        self.cca.init(&mut self.c);
        self.send(now, out);
    }

    /// Bulk: an endless supply of data from now on.
    pub fn set_unlimited(&mut self, on: bool) {
        self.unlimited = on;
        if !on {
            self.write_seq = self.write_seq.max(self.snd_nxt);
        }
    }

    /// The application writes `bytes` more.
    pub fn write(&mut self, bytes: u64, now: Nanos, out: &mut Out) {
        self.write_seq += bytes;
        if self.state == State::Established {
            self.send(now, out);
        }
    }

    /// Send from now on over this route (a route change; segments already
    /// sent finish their old route).
    pub fn set_route(&mut self, route: u32) {
        self.route = route;
    }

    pub fn srtt_us(&self) -> u64 {
        self.srtt_ns / NS_PER_US
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
        self.unlimited || self.write_seq > self.snd_nxt
    }

    /// Send what cwnd, the receive window, the send buffer and pacing allow
    /// (Linux `tcp_write_xmit` with retransmissions first).
    pub fn send(&mut self, now: Nanos, out: &mut Out) {
        if self.state != State::Established {
            return;
        }
        self.set_now(now);
        let mut cwnd_limited = false;
        let mut sent_any = false;
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
            if let Some(i) = self.next_retransmit() {
                if in_flight >= self.c.cwnd {
                    cwnd_limited = true;
                    break;
                }
                self.transmit(i, true, now, out);
                sent_any = true;
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
            let avail = if self.unlimited { u64::MAX } else { self.write_seq - self.snd_nxt };
            let len = avail.min(self.cfg.mss as u64);
            let outstanding = self.snd_nxt + len - self.snd_una;
            if outstanding > self.cfg.rmem_bytes || outstanding > self.cfg.wmem_bytes {
                break; // receive window or send buffer full
            }
            if self.c.packets_out == 0 {
                self.restart_after_idle(now);
            }
            let i = self.queue_new_segment(len);
            self.transmit(i, false, now, out);
            sent_any = true;
        }
        if self.burst_segs > 0 {
            self.end_burst(now);
        }
        self.cwnd_validate(cwnd_limited);
        if sent_any && self.c.packets_out > 0 {
            if !self.rto_timer.is_armed() {
                self.rto_deadline = now + self.current_rto();
            }
            self.set_xmit_timer(now, out);
        }
    }

    /// A bulk application refills the send buffer as ACKs free it. Linux
    /// sizes the send buffer just above what cwnd needs (`tcp_sndbuf_expand`
    /// runs only when the buffer, not cwnd, held the sender back), so the
    /// buffer is full whenever an ACK frees `freed` bytes: the writer wakes,
    /// appends that much behind the data already queued, and `tcp_sendmsg`
    /// ends the write with `tcp_push`, which sets PSH on its last segment.
    /// (Measured on Linux 6.18 through the emulator, 10 Mbit/s, 40 ms, CUBIC:
    /// 43 % of the data segments carry PSH, a median 2 segments apart.)
    fn note_app_refill(&mut self, freed: u64) {
        if self.unlimited && freed > 0 {
            let queued_end = self.push_seqs.back().map_or(self.snd_nxt, |&e| e.max(self.snd_nxt));
            self.push_seqs.push_back(queued_end + freed);
        }
    }

    /// Take `len` new bytes from the application into the retransmit queue.
    fn queue_new_segment(&mut self, len: u64) -> usize {
        let end = self.snd_nxt + len;
        let mut push = false;
        while let Some(&e) = self.push_seqs.front() {
            if e > end {
                break;
            }
            push |= e > self.snd_nxt;
            self.push_seqs.pop_front();
        }
        self.rtxq.push_back(Seg {
            seq: self.snd_nxt,
            len: len as u32,
            flags: if push { PUSH } else { 0 },
            sent_ns: 0,
            first_tx_ns: 0,
            delivered_ns: 0,
            delivered: 0,
            delivered_ce: 0,
            rate_done: false,
        });
        self.snd_nxt += len;
        self.c.snd_nxt = self.snd_nxt;
        self.rtxq.len() - 1
    }

    /// Segments per paced burst, as Linux's `tcp_tso_autosize`: about 1 ms
    /// of data at the pacing rate (`sk_pacing_shift` = 10), at least 2
    /// segments (1 below 1.2 Mbit/s, BBR's `min_tso_segs`), at most 64 KB.
    fn tso_segs(&self) -> u32 {
        let mss = self.cfg.mss as u64;
        let bytes = self.c.pacing_rate >> 10;
        let min = if self.c.pacing_rate < 1_200_000 / 8 { 1 } else { 2 };
        ((bytes / mss) as u32).max(min).min((65_536 / mss) as u32)
    }

    /// Close a paced burst: the next may leave when this one has, at the
    /// pacing rate. A late start earns credit that shortens the gap by at
    /// most half (Linux `tcp_update_skb_after_send`).
    fn end_burst(&mut self, now: Nanos) {
        let prior = self.pace_next_ns;
        self.pace_next_ns = self.pace_next_ns.max(now);
        if self.c.pacing_rate > 0 {
            let credit = self.pace_next_ns - prior;
            let len_ns = (self.burst_bytes as u128 * NS_PER_SEC as u128 / self.c.pacing_rate as u128) as Nanos;
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
        if idle > self.rto_ns && !self.uses_cong_control() {
            self.c.ssthresh = self.c.ssthresh.max((self.c.cwnd >> 1) + (self.c.cwnd >> 2));
            let restart = self.cfg.init_cwnd.min(self.c.cwnd);
            let mut cwnd = self.c.cwnd;
            let mut left = idle;
            while left > self.rto_ns && cwnd > restart {
                cwnd >>= 1;
                left -= self.rto_ns;
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
        while i < self.rtxq.len() {
            let s = &self.rtxq[i];
            if s.flags & LOST != 0 && s.flags & (RETRANS | SACKED) == 0 {
                self.retx_hint = s.seq;
                return Some(i);
            }
            i += 1;
        }
        self.retx_hint = self.snd_nxt;
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
            if guess < self.rtxq.len()
                && self.rtxq[guess].end() > seq
                && (guess == 0 || self.rtxq[guess - 1].end() <= seq)
            {
                return guess;
            }
        }
        self.rtxq.partition_point(|s| s.end() <= seq)
    }

    fn transmit(&mut self, i: usize, retrans: bool, now: Nanos, out: &mut Out) {
        if self.c.packets_out == 0 {
            self.first_tx_ns = now;
            self.delivered_ns = now;
        }
        let app_limited = self.c.app_limited != 0;
        let (first_tx, delivered_ns, delivered, delivered_ce) =
            (self.first_tx_ns, self.delivered_ns, self.c.delivered, self.c.delivered_ce);
        let s = &mut self.rtxq[i];
        s.sent_ns = now;
        s.first_tx_ns = first_tx;
        s.delivered_ns = delivered_ns;
        s.delivered = delivered;
        s.delivered_ce = delivered_ce;
        s.rate_done = false;
        if app_limited {
            s.flags |= APP_LIMITED;
        } else {
            s.flags &= !APP_LIMITED;
        }
        let (seq, len) = (s.seq, s.len);
        if retrans {
            s.flags |= RETRANS | EVER_RETRANS;
            self.c.retrans_out += 1;
            self.stats.retrans_segs += 1;
            self.rexmits.push_back(seq);
        } else {
            self.c.packets_out += 1;
        }
        // PRR counts what is sent during any cwnd reduction (loss or ECN).
        if matches!(self.c.ca_state, CaState::Recovery | CaState::Cwr) {
            self.prr_out += 1;
        }
        self.stats.sent_segs += 1;
        self.data_segs_out += 1;
        self.last_send_ns = now;
        self.c.lsndtime_us = now / NS_PER_US;
        let mut p = self.packet(now);
        p.seq = seq;
        p.len = len;
        p.wire = len + self.cfg.header_bytes;
        p.psh = self.rtxq[i].flags & PUSH != 0;
        if !retrans && self.cwr_pending {
            p.cwr = true;
            self.cwr_pending = false;
        }
        out.pkts.push(p);
        if self.pacing && self.data_segs_out > UNPACED_SEGS {
            self.burst_segs += 1;
            self.burst_bytes += p.wire as u64;
            if self.burst_segs >= self.burst_goal {
                self.end_burst(now);
            }
        }
    }

    // ---------------------------------------------------------------- ACKs

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
        let prior_delivered = self.c.delivered;
        let prior_lost = self.c.lost;
        let prior_snd_una = self.snd_una;
        let mut rs = RateSample { prior_in_flight, ..RateSample::default() };
        self.rs_key = (0, 0);
        let mut newest: Option<(Nanos, u64, bool)> = None; // (sent, end seq, retransmitted)

        if self.cfg.sack && p.nsack > 0 {
            self.sacktag(p, &mut rs, &mut newest);
        }
        let (acked, seq_rtt_ns, retrans_acked) = self.clean_rtx_queue(p.ack, &mut rs, &mut newest);

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

        // RTT: from the oldest newly acked original transmission, else from
        // the echoed timestamp (which also covers retransmissions, RFC 7323).
        let rtt_ns = match seq_rtt_ns {
            Some(r) => Some(r),
            None if acked > 0 && p.ts_ecr > 0 && retrans_acked => Some(now.saturating_sub(p.ts_ecr)),
            None => None,
        };
        if let Some(r) = rtt_ns {
            self.rtt_sample(r);
        } else if let Some((sent, _, false)) = newest {
            // Only SACKed data this time: still a valid sample for min_rtt.
            let r = now.saturating_sub(sent);
            self.c.min_rtt_us = self.c.min_rtt_us.min((r / NS_PER_US).max(1) as u32);
        }
        if self.snd_una > prior_snd_una {
            self.backoff = 0;
            self.update_rto();
        }
        if self.c.delivered > prior_delivered {
            // Linux passes the CCA `ca_rtt_us`: the RTT of the most recently
            // sent segment this ACK delivered, if it was never retransmitted.
            let ca_rtt_us = match newest {
                Some((sent, _, false)) => (now.saturating_sub(sent) / NS_PER_US) as i64,
                _ => -1,
            };
            // Linux: mss × (delivered − rs.prior_delivered), the data
            // delivered since the newest segment this ACK covers was sent.
            let in_flight = (self.c.delivered - rs.prior_delivered).min(u32::MAX as u64) as u32;
            let s = AckSample { pkts_acked: acked, rtt_us: ca_rtt_us, in_flight };
            self.cca.pkts_acked(&mut self.c, &s);
        }

        // Loss detection.
        if self.cfg.sack {
            self.rack_detect(now, out);
        } else {
            self.dupack_detect(dupack, acked);
        }
        rs.losses = (self.c.lost - prior_lost) as u32;
        rs.acked_sacked = (self.c.delivered - prior_delivered) as u32;
        let ece = p.ece && self.opts.ecn;
        if ece {
            self.c.delivered_ce += rs.acked_sacked as u64;
        }
        self.cca.in_ack_event(&mut self.c, if ece { ACK_ECE } else { 0 });

        self.fastretrans_alert();
        if ece && matches!(self.c.ca_state, CaState::Open | CaState::Disorder) {
            self.enter_cwr();
        }

        self.rate_gen(&mut rs, newest, now);
        let handled = self.cca.cong_control(&mut self.c, &rs);
        if !handled {
            if matches!(self.c.ca_state, CaState::Recovery | CaState::Cwr) {
                self.cwnd_reduction(rs.acked_sacked, rs.losses > 0, self.snd_una > prior_snd_una);
            } else if self.c.is_cwnd_limited() && acked + rs.acked_sacked > 0 {
                self.cca.cong_avoid(&mut self.c, rs.acked_sacked);
            }
            self.update_pacing_rate();
        }
        self.c.cwnd = self.c.cwnd.clamp(1, self.c.cwnd_clamp);
        if self.c.max_pacing_rate < self.c.pacing_rate {
            self.c.pacing_rate = self.c.max_pacing_rate;
        }

        self.note_app_refill(self.snd_una - prior_snd_una);
        if self.tlp_high_seq.is_some_and(|h| self.snd_una >= h) {
            self.tlp_high_seq = None;
        }
        if self.c.packets_out == 0 {
            self.rto_timer.cancel();
            self.probe_armed = false;
        } else if self.snd_una > prior_snd_una {
            self.rto_deadline = now + self.current_rto();
            self.set_xmit_timer(now, out);
        }
        self.send(now, out);
    }

    /// Mark segments covered by new SACK blocks (Linux `tcp_sacktag_write_queue`),
    /// skipping parts the previous ACK already reported.
    fn sacktag(&mut self, p: &Packet, rs: &mut RateSample, newest: &mut Option<(Nanos, u64, bool)>) {
        let cache = self.sack_cache;
        let ncache = self.nsack_cache;
        for b in 0..p.nsack as usize {
            let (mut start, end) = p.sack[b];
            start = start.max(self.snd_una);
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
                self.sack_range(pos, next_pos, rs, newest);
                pos = next_pos;
            }
        }
        self.sack_cache = p.sack;
        self.nsack_cache = p.nsack as usize;
    }

    fn sack_range(&mut self, start: u64, end: u64, rs: &mut RateSample, newest: &mut Option<(Nanos, u64, bool)>) {
        let mut i = self.index_of(start);
        while i < self.rtxq.len() {
            let s = self.rtxq[i];
            if s.end() > end {
                break;
            }
            if s.seq >= start && s.flags & SACKED == 0 {
                self.mark_delivered(i, rs, newest);
                let s = &mut self.rtxq[i];
                if s.flags & LOST != 0 {
                    self.c.lost_out -= 1;
                }
                if s.flags & RETRANS != 0 {
                    self.c.retrans_out -= 1;
                }
                s.flags = (s.flags | SACKED) & !(LOST | RETRANS);
                self.c.sacked_out += 1;
            }
            i += 1;
        }
    }

    /// A segment reached the receiver: count it and feed the rate sample
    /// (Linux `tcp_rate_skb_delivered`) and RACK.
    fn mark_delivered(&mut self, i: usize, rs: &mut RateSample, newest: &mut Option<(Nanos, u64, bool)>) {
        let s = &mut self.rtxq[i];
        self.c.delivered += 1;
        if !s.rate_done {
            s.rate_done = true;
            // The sample is taken from the most recently sent delivered segment.
            if rs.delivered < 0 || (s.sent_ns, s.end()) > self.rs_key {
                self.rs_key = (s.sent_ns, s.end());
                rs.prior_delivered = s.delivered;
                rs.delivered = 0; // marks the sample as started; set in rate_gen
                rs.delivered_ce = s.delivered_ce as i64;
                rs.is_app_limited = s.flags & APP_LIMITED != 0;
                rs.is_retrans = s.flags & EVER_RETRANS != 0;
                rs.interval_us = (s.sent_ns.saturating_sub(s.first_tx_ns) / NS_PER_US) as i64;
                self.rate_prior_ns = s.delivered_ns;
                self.first_tx_ns = s.sent_ns;
            }
        }
        let retrans = s.flags & EVER_RETRANS != 0;
        let cand = (s.sent_ns, s.end(), retrans);
        match newest {
            Some((t, e, _)) if (*t, *e) >= (cand.0, cand.1) => {}
            _ => *newest = Some(cand),
        }
        // RACK: remember the most recently sent segment that was delivered.
        let now = self.c.now_ns;
        let rtt = now.saturating_sub(s.sent_ns);
        // A retransmission acked faster than min RTT was probably the original.
        if retrans && rtt < self.c.min_rtt_us as u64 * NS_PER_US {
            return;
        }
        if !self.rack_valid || (s.sent_ns, s.end()) > (self.rack_xmit_ns, self.rack_end_seq) {
            self.rack_valid = true;
            self.rack_xmit_ns = s.sent_ns;
            self.rack_end_seq = s.end();
            self.rack_rtt_ns = rtt;
        }
    }

    /// Remove cumulatively acked segments. Returns how many, the RTT of the
    /// oldest never-retransmitted one, and whether a retransmission was acked.
    fn clean_rtx_queue(&mut self, ack: u64, rs: &mut RateSample, newest: &mut Option<(Nanos, u64, bool)>) -> (u32, Option<Nanos>, bool) {
        let now = self.c.now_ns;
        let mut acked = 0;
        let mut seq_rtt = None;
        let mut retrans_acked = false;
        while let Some(s) = self.rtxq.front() {
            if s.end() > ack {
                break;
            }
            let s = *s;
            if s.flags & SACKED == 0 {
                self.mark_delivered(0, rs, newest);
            } else {
                self.c.sacked_out -= 1;
            }
            if s.flags & LOST != 0 && s.flags & SACKED == 0 {
                self.c.lost_out -= 1;
            }
            if s.flags & RETRANS != 0 {
                self.c.retrans_out -= 1;
            }
            if s.flags & EVER_RETRANS != 0 {
                retrans_acked = true;
            } else if seq_rtt.is_none() && s.flags & SACKED == 0 {
                seq_rtt = Some(now.saturating_sub(s.sent_ns));
            }
            self.c.packets_out -= 1;
            acked += 1;
            self.rtxq.pop_front();
        }
        if ack > self.snd_una {
            self.snd_una = ack;
            self.c.snd_una = ack;
        }
        (acked, seq_rtt, retrans_acked)
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
        let seq = s.seq;
        if seq < self.retx_hint {
            self.retx_hint = seq;
        }
    }

    /// RACK (RFC 8985): a segment sent before the most recently delivered one
    /// is lost once that one's RTT plus a reordering window has passed.
    fn rack_detect(&mut self, now: Nanos, out: &mut Out) {
        if !self.rack_valid {
            return;
        }
        // Linux tcp_rack_reo_wnd without observed reordering: none in
        // recovery or once DUPTHRESH segments are sacked, else min_rtt/4.
        let reo_wnd = if matches!(self.c.ca_state, CaState::Recovery | CaState::Loss) || self.c.sacked_out >= DUPTHRESH {
            0
        } else {
            (self.c.min_rtt_us as u64 * NS_PER_US / 4).min(self.srtt_ns)
        };
        let mut wait: Option<Nanos> = None;
        let rack_key = (self.rack_xmit_ns, self.rack_end_seq);
        // Original transmissions: sent in sequence order.
        let mut i = self.index_of(self.rack_hint.max(self.snd_una));
        while i < self.rtxq.len() {
            let s = self.rtxq[i];
            if s.flags & EVER_RETRANS != 0 || s.flags & (SACKED | LOST) != 0 {
                i += 1;
                self.rack_hint = s.end();
                continue;
            }
            if (s.sent_ns, s.end()) >= rack_key {
                break;
            }
            let deadline = s.sent_ns + self.rack_rtt_ns + reo_wnd;
            if deadline <= now {
                self.mark_lost(i);
                self.rack_hint = s.end();
                i += 1;
            } else {
                wait = Some(wait.map_or(deadline, |w: Nanos| w.min(deadline)));
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
            if (s.sent_ns, s.end()) >= rack_key {
                break;
            }
            let deadline = s.sent_ns + self.rack_rtt_ns + reo_wnd;
            if deadline <= now {
                self.mark_lost(j);
                self.rexmits.pop_front();
            } else {
                wait = Some(wait.map_or(deadline, |w: Nanos| w.min(deadline)));
                break;
            }
        }
        match wait {
            Some(t) => {
                if let Some(t) = self.reo_timer.arm(self.opts.timer_at(t)) {
                    out.timers.push((t, self.conn_id, TimerKind::Reorder));
                }
            }
            None => self.reo_timer.cancel(),
        }
    }

    /// Without SACK: the head is lost after DUPTHRESH duplicate ACKs, and in
    /// recovery after a partial ACK (NewReno, RFC 6582).
    fn dupack_detect(&mut self, dupack: bool, acked: u32) {
        let head_unmarked = self.rtxq.front().map_or(false, |s| s.flags & (LOST | RETRANS) == 0);
        let trigger = match self.c.ca_state {
            CaState::Open | CaState::Disorder => dupack && self.c.sacked_out >= DUPTHRESH,
            CaState::Recovery => acked > 0 && self.snd_una < self.high_seq,
            _ => false,
        };
        if trigger && head_unmarked {
            self.mark_lost(0);
        }
    }

    /// The loss state machine (Linux `tcp_fastretrans_alert`, simplified:
    /// no undo, since the simulator never reorders).
    fn fastretrans_alert(&mut self) {
        match self.c.ca_state {
            CaState::Recovery | CaState::Loss | CaState::Cwr if self.snd_una >= self.high_seq => {
                let was_recovery = matches!(self.c.ca_state, CaState::Recovery | CaState::Cwr);
                // tcp_end_cwnd_reduction leaves cwnd to a CCA with cong_control.
                if was_recovery && self.c.ssthresh < INFINITE_SSTHRESH && !self.uses_cong_control() {
                    // tcp_end_cwnd_reduction
                    self.c.cwnd = self.c.ssthresh.max(1);
                    self.c.cwnd_cnt = 0;
                }
                self.set_ca_state(CaState::Open);
                if was_recovery {
                    self.cca.cwnd_event(&mut self.c, CaEvent::CompleteCwr);
                }
            }
            _ => {}
        }
        if matches!(self.c.ca_state, CaState::Open | CaState::Disorder | CaState::Cwr) {
            if self.c.lost_out > 0 {
                // Loss takes over from an ECN reduction in progress.
                self.enter_recovery();
            } else if self.c.ca_state == CaState::Cwr {
                // Stay in CWR until the reduction completes.
            } else if self.c.sacked_out > 0 {
                self.set_ca_state(CaState::Disorder);
            } else {
                self.set_ca_state(CaState::Open);
            }
        }
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
        self.c.prior_cwnd = self.c.cwnd;
        self.prr_delivered = 0;
        self.prr_out = 0;
        self.c.ssthresh = self.cca.ssthresh(&mut self.c);
        self.c.cwnd_cnt = 0;
        if self.opts.ecn {
            self.cwr_pending = true;
        }
    }

    /// `tcp_enter_recovery`. A reduction for ECN already under way keeps its
    /// ssthresh (one reduction per window).
    fn enter_recovery(&mut self) {
        if self.c.ca_state == CaState::Cwr {
            self.high_seq = self.snd_nxt;
        } else {
            self.init_cwnd_reduction();
        }
        self.set_ca_state(CaState::Recovery);
    }

    /// `tcp_enter_cwr`: an ECN echo reduces cwnd like a loss, without
    /// retransmitting.
    fn enter_cwr(&mut self) {
        self.init_cwnd_reduction();
        self.set_ca_state(CaState::Cwr);
    }

    /// Proportional rate reduction (RFC 6937, as Linux `tcp_cwnd_reduction`).
    fn cwnd_reduction(&mut self, newly_acked_sacked: u32, newly_lost: bool, una_advanced: bool) {
        if newly_acked_sacked == 0 && !newly_lost {
            return;
        }
        let in_flight = self.c.packets_in_flight() as i64;
        let ssthresh = self.c.ssthresh as i64;
        let delta = ssthresh - in_flight;
        self.prr_delivered += newly_acked_sacked;
        let prr_delivered = self.prr_delivered as i64;
        let prr_out = self.prr_out as i64;
        let mut sndcnt = if delta < 0 {
            let prior = (self.c.prior_cwnd as i64).max(1);
            (ssthresh * prr_delivered + prior - 1) / prior - prr_out
        } else if una_advanced && !newly_lost {
            delta.min((prr_delivered - prr_out).max(newly_acked_sacked as i64) + 1)
        } else {
            delta.min(newly_acked_sacked as i64)
        };
        // Always allow the fast retransmit itself.
        sndcnt = sndcnt.max(if self.prr_out == 0 { 1 } else { 0 });
        self.c.cwnd = (in_flight + sndcnt).max(1) as u32;
    }

    /// Close a rate sample (Linux `tcp_rate_gen`).
    fn rate_gen(&mut self, rs: &mut RateSample, newest: Option<(Nanos, u64, bool)>, now: Nanos) {
        if self.c.app_limited != 0 && self.c.delivered > self.c.app_limited {
            self.c.app_limited = 0;
        }
        if rs.acked_sacked > 0 {
            self.delivered_ns = now;
        }
        if let Some((sent, _, retrans)) = newest {
            if !retrans {
                rs.rtt_us = (now.saturating_sub(sent) / NS_PER_US) as i64;
            }
        }
        if rs.delivered < 0 || rs.interval_us < 0 {
            rs.delivered = -1;
            rs.interval_us = -1;
            return;
        }
        rs.delivered = (self.c.delivered - rs.prior_delivered) as i64;
        rs.delivered_ce = self.c.delivered_ce as i64 - rs.delivered_ce;
        let snd_us = rs.interval_us;
        let ack_us = (now.saturating_sub(self.rate_prior_ns) / NS_PER_US) as i64;
        rs.interval_us = snd_us.max(ack_us);
        // Intervals shorter than min RTT come from ACK compression: unusable.
        if rs.interval_us < self.c.min_rtt_us as i64 {
            rs.interval_us = -1;
            return;
        }
        if rs.interval_us > 0 {
            let bps = rs.delivered as f64 * self.c.mss as f64 * 8.0 * 1e6 / rs.interval_us as f64;
            if !rs.is_app_limited || bps >= self.stats.delivery_rate_bps {
                self.stats.delivery_rate_bps = bps;
            }
        }
    }

    /// Linux `tcp_update_pacing_rate` for CCAs that do not set it themselves:
    /// 200% of cwnd/srtt in slow start, 120% after.
    fn update_pacing_rate(&mut self) {
        if self.srtt_ns == 0 {
            return;
        }
        let factor = if self.c.cwnd < self.c.ssthresh / 2 { 2.0 } else { 1.2 };
        let segs = self.c.cwnd.max(self.c.packets_out) as f64;
        let rate = factor * segs * self.c.mss as f64 * NS_PER_SEC as f64 / self.srtt_ns as f64;
        self.c.pacing_rate = rate as u64;
    }

    // ---------------------------------------------------------------- RTT, RTO

    fn rtt_sample(&mut self, rtt: Nanos) {
        let rtt = rtt.max(1_000);
        self.stats.rtt.add(rtt / NS_PER_US);
        self.c.min_rtt_us = self.c.min_rtt_us.min((rtt / NS_PER_US).max(1) as u32);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt;
            self.rttvar_ns = rtt / 2;
        } else {
            let err = rtt.abs_diff(self.srtt_ns);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = (7 * self.srtt_ns + rtt) / 8;
        }
        self.c.srtt_us = (self.srtt_ns / NS_PER_US).max(1) as u32;
        self.update_rto();
    }

    /// Linux: RTO = srtt + max(4·rttvar, rto_min), so rto_min acts as a floor
    /// on the variance term rather than on the whole timeout.
    fn update_rto(&mut self) {
        if self.srtt_ns == 0 {
            return;
        }
        self.rto_ns = (self.srtt_ns + (4 * self.rttvar_ns).max(self.cfg.min_rto_ns)).min(RTO_MAX);
    }

    fn current_rto(&self) -> Nanos {
        (self.rto_ns << self.backoff.min(16)).min(RTO_MAX)
    }

    // ---------------------------------------------------------------- timers

    pub fn on_timer(&mut self, kind: TimerKind, now: Nanos, out: &mut Out) {
        self.set_now(now);
        let timer = match kind {
            TimerKind::Rto => &mut self.rto_timer,
            TimerKind::Pace => &mut self.pace_timer,
            TimerKind::Reorder => &mut self.reo_timer,
            TimerKind::DelAck => unreachable!("delayed ACK belongs to the receiver"),
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
                self.rack_detect(now, out);
                if self.c.lost > prior_lost {
                    self.fastretrans_alert();
                    if self.c.ca_state == CaState::Recovery && !self.uses_cong_control() {
                        self.cwnd_reduction(0, true, false);
                    }
                    self.send(now, out);
                }
            }
            TimerKind::DelAck => {}
        }
    }

    /// Retransmission timeout (Linux `tcp_retransmit_timer` + `tcp_enter_loss`).
    fn on_rto(&mut self, now: Nanos, out: &mut Out) {
        if self.state == State::SynSent {
            self.backoff += 1;
            self.rto_ns = (self.rto_ns * 2).min(RTO_MAX);
            self.send_syn(now, out);
            return;
        }
        if self.c.packets_out == 0 {
            return;
        }
        self.stats.rto_count += 1;
        let fresh = matches!(self.c.ca_state, CaState::Open | CaState::Disorder)
            || self.snd_una >= self.high_seq
            || (self.c.ca_state == CaState::Loss && self.backoff == 0);
        if fresh {
            self.c.prior_cwnd = self.c.cwnd;
            self.c.ssthresh = self.cca.ssthresh(&mut self.c);
            self.cca.cwnd_event(&mut self.c, CaEvent::Loss);
        }
        // Everything not sacked is presumed lost; retransmissions restart.
        for i in 0..self.rtxq.len() {
            let s = &mut self.rtxq[i];
            if s.flags & RETRANS != 0 {
                s.flags &= !RETRANS;
                self.c.retrans_out -= 1;
            }
            if s.flags & (SACKED | LOST) == 0 {
                s.flags |= LOST;
                self.c.lost_out += 1;
                self.c.lost += 1;
            }
        }
        self.rexmits.clear();
        self.retx_hint = self.snd_una;
        self.rack_hint = self.snd_nxt;
        self.c.cwnd = self.c.packets_in_flight() + 1;
        self.c.cwnd_cnt = 0;
        self.high_seq = self.snd_nxt;
        self.set_ca_state(CaState::Loss);
        self.backoff += 1;
        self.tlp_high_seq = None;
        self.pace_next_ns = now;
        self.send(now, out);
        self.rto_deadline = now + self.current_rto();
        self.set_xmit_timer(now, out);
    }

    /// Arm the retransmission timer for the RTO deadline, or earlier for a
    /// tail loss probe (RFC 8985 §7, Linux `tcp_schedule_loss_probe`): in
    /// the Open state with SACK, when no new data could go out now, after
    /// 2·srtt (plus the minimum RTO when one segment is out, for a delayed
    /// ACK; else 2 ms), never later than the RTO.
    fn set_xmit_timer(&mut self, now: Nanos, out: &mut Out) {
        let mut at = self.rto_deadline;
        self.probe_armed = false;
        let could_send_new = self.c.packets_in_flight() < self.c.cwnd && self.has_data();
        if self.cfg.sack
            && self.c.ca_state == CaState::Open
            && self.tlp_high_seq.is_none()
            && self.srtt_ns > 0
            && !could_send_new
        {
            let extra = if self.c.packets_out == 1 { self.cfg.min_rto_ns } else { 2_000_000 };
            let pto = now + 2 * self.srtt_ns + extra;
            if pto < at {
                at = pto;
                self.probe_armed = true;
            }
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
        let len = if self.unlimited { self.cfg.mss as u64 } else { (self.write_seq - self.snd_nxt).min(self.cfg.mss as u64) };
        let outstanding = self.snd_nxt + len - self.snd_una;
        if len > 0 && outstanding <= self.cfg.rmem_bytes && outstanding <= self.cfg.wmem_bytes {
            let i = self.queue_new_segment(len);
            self.transmit(i, false, now, out);
        } else if let Some(last) = self.rtxq.len().checked_sub(1) {
            if self.rtxq[last].flags & (SACKED | RETRANS) == 0 {
                self.transmit(last, true, now, out);
            }
        }
        self.tlp_high_seq = Some(self.snd_nxt);
        self.rto_deadline = now + self.current_rto();
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

    /// A CCA that records the samples `pkts_acked` sees.
    struct Recorder(std::rc::Rc<std::cell::RefCell<Vec<AckSample>>>);

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
    }

    /// `pkts_acked` gets Linux's `in_flight`: what was delivered since the
    /// newest segment the ACK covers was sent, not what is out now.
    #[test]
    fn ack_sample_in_flight_is_delivered_since_send() {
        let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let mut s = Sender::new(0, 0, &tcp_cfg(), Box::new(Recorder(seen.clone())), ConnOpts::default());
        s.set_unlimited(true);
        let mut out = Out::default();
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
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

    /// (end segment index, PSH) of the data segments in `out`.
    fn sent(out: &Out) -> Vec<(u64, bool)> {
        out.pkts.iter().filter(|p| p.len > 0).map(|p| ((p.seq + p.len as u64) / 1448, p.psh)).collect()
    }

    /// A bulk writer refills what each ACK frees, and each write ends with
    /// PSH (Linux `tcp_push` at the end of `tcp_sendmsg`): the write starts
    /// behind what is already queued.
    #[test]
    fn bulk_refill_writes_end_with_psh() {
        let cca = crate::cc::by_name("reno").unwrap();
        let mut s = Sender::new(0, 0, &tcp_cfg(), cca, ConnOpts::default());
        s.set_unlimited(true);
        let mut out = Out::default();
        s.connect(0, &mut out);
        out.clear();
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        // The initial window is the first write: no ACK has freed anything.
        assert_eq!(sent(&out), (1..=10).map(|i| (i, false)).collect::<Vec<_>>());
        out.clear();
        // Two segments acked: slow start sends four, the refill write of
        // two segments (11, 12) ends with PSH.
        s.on_ack(&ack(2, 20_000_000), 20_000_000, &mut out);
        assert_eq!(sent(&out), vec![(11, false), (12, true), (13, false), (14, false)]);
        out.clear();
        // The next write follows the queued data: segments 15 and 16.
        s.on_ack(&ack(4, 21_000_000), 21_000_000, &mut out);
        assert_eq!(sent(&out), vec![(15, false), (16, true), (17, false), (18, false)]);
        out.clear();
        // One segment acked: a one-segment write.
        s.on_ack(&ack(5, 22_000_000), 22_000_000, &mut out);
        assert_eq!(sent(&out), vec![(19, true), (20, false)]);
    }
}
