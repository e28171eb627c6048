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
        let mut s = Sender::new(0, 0, tcp_cfg().into(), crate::cc::by_name("reno").unwrap(), ConnOpts::default());
        let mut out = Out::default();
        s.set_unlimited(true, 0, &mut out);
        s.connect(0, &mut out);
        let mut sent = vec![out.pkts.last().unwrap().ts_val];
        for _ in 0..n {
            let (t, _, _) = *out.timers.last().unwrap();
            out.clear();
            s.on_timer(TimerKind::Retransmit, t, &mut out);
            assert!(out.pkts.last().unwrap().syn);
            sent.push(out.pkts.last().unwrap().ts_val);
        }
        // Each SYN timeout counts as Linux's TCPTimeouts counts it.
        assert_eq!(s.stats.rto_count, n as u64);
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
    let mut s = Sender::new(0, 0, tcp_cfg().into(), cca, ConnOpts::default());
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

/// The load generator's client writes its 44-byte header once `connect`
/// returns, then its transfer: the header leaves on its own, pushed (with
/// Nagle nothing is in flight yet), and the initial window goes on with
/// full segments.
#[test]
fn a_header_written_first_leaves_alone_before_the_data() {
    let cca = crate::cc::by_name("reno").unwrap();
    let mut s = Sender::new(0, 0, tcp_cfg().into(), cca, ConnOpts::default());
    let mut out = Out::default();
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
    out.clear();
    s.write(44, 10_000_000, &mut out);
    s.write(20 * 1448, 10_000_000, &mut out);
    let got: Vec<_> = out.pkts.iter().map(|p| (p.seq, p.len, p.psh)).collect();
    assert_eq!(got[0], (0, 44, true), "the header first, alone and pushed");
    assert_eq!(got.len(), 10, "the initial window: the header and nine segments");
    assert!(got[1..].iter().enumerate().all(|(i, &(seq, len, _))| seq == 44 + i as u64 * 1448 && len == 1448));
    // All the data written is there, after it.
    assert_eq!(s.write_seq, 44 + 20 * 1448);
}

/// Linux checks for an application-limited sender at each application
/// write (`tcp_rate_check_app_limited` from `tcp_sendmsg_locked`), and only
/// there: a connection's first write finds nothing unsent and cwnd empty,
/// so the rate samples of what it sends are application-limited until
/// that much is delivered; a write while cwnd is full, or while a lost
/// segment waits for its retransmission, marks nothing.
#[test]
fn the_application_limited_mark_is_set_at_a_write() {
    let rates = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let rec = Box::new(Recorder(Default::default(), rates.clone()));
    let (mut s, mut out) = connected_with(&tcp_cfg(), rec, Some(4 * 1448), 10_000_000);
    assert_eq!(s.snd_nxt, 4 * 1448);
    let mark = s.c.app_limited;
    assert!(mark > 0 && mark <= s.c.delivered.max(1), "marked with nothing in flight: {mark}");
    s.on_ack(&ack(4, 20_000_000), 20_000_000, &mut out);
    assert!(rates.borrow().last().unwrap().is_app_limited, "the first write's segments give application-limited samples");
    assert_eq!(s.c.app_limited, 0, "cleared once more than the mark is delivered");
    // The next write finds everything delivered: marked again.
    s.write(30 * 1448, 20_000_000, &mut out);
    assert_eq!(s.c.app_limited, s.c.delivered);
    // With cwnd full (and data unsent) a write marks nothing.
    s.c.app_limited = 0;
    assert!(s.c.packets_in_flight() >= s.c.cwnd);
    s.write(1448, 20_000_000, &mut out);
    assert_eq!(s.c.app_limited, 0);
    // Nor with a lost segment not yet retransmitted, though cwnd has room.
    let (mut s, mut out) = connected(&tcp_cfg(), "reno", Some(4 * 1448), 10_000_000);
    s.c.app_limited = 0;
    s.c.lost_out = 1;
    s.write(1448, 10_000_000, &mut out);
    assert_eq!(s.c.app_limited, 0);
    s.c.lost_out = 0;
    let mark = s.c.delivered + s.c.packets_in_flight() as u64;
    s.write(1448, 10_000_000, &mut out);
    assert_eq!(s.c.app_limited, mark);
}

/// Linux's `tcp_tso_segs`: ~1 ms at the pacing rate, plus 64 KB halved
/// per 512 µs of min RTT, within 64 KB; the floor is the CCA's.
#[test]
fn tso_size_follows_the_rate_the_min_rtt_and_the_cca() {
    let tso = |cca: &str, rate: u64, min_rtt_us: u32| {
        let mut s = Sender::new(0, 0, tcp_cfg().into(), crate::cc::by_name(cca).unwrap(), ConnOpts::default());
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
    let mut s = Sender::new(0, 0, tcp_cfg().into(), cca, ConnOpts::default());
    let mut out = Out::default();
    s.set_unlimited(true, 0, &mut out);
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
    (s, out)
}

/// TSO deferral: in congestion avoidance with room for one segment
/// (less than the two of a TSO skb at this rate, under a third of
/// cwnd), right after a send, the segment waits for the next ACK when
/// the oldest segment out should be acked within min(srtt/2, 1 ms);
/// with that ACK the two leave together, as one skb ending in PSH.
/// Further from that ACK it goes at once (before Linux 6.18's fix it
/// waited from half an srtt on).
#[test]
fn a_lone_segment_waits_for_the_next_ack() {
    let (mut s, mut out) = bulk_reno_set_up();
    s.c.ssthresh = 2;
    out.clear();
    // Nothing sent for 6 ms: the freed segment goes at once.
    s.on_ack(&ack(1, 16_000_000), 16_000_000, &mut out);
    assert_eq!(sent(&out), vec![(11, false)]);
    out.clear();
    // Sent 0.5 ms ago, the oldest out (sent at 10 ms, srtt 10 ms) acked
    // in 3.5 ms: more than 1 ms away, so it goes.
    s.on_ack(&ack(2, 10_000_000), 16_500_000, &mut out);
    assert_eq!(sent(&out), vec![(12, false)]);
    out.clear();
    // 2.9 ms since that send: it goes, whatever the ACK.
    s.on_ack(&ack(3, 10_000_000), 19_400_000, &mut out);
    assert_eq!(sent(&out), vec![(13, false)]);
    out.clear();
    // 0.2 ms after that send, with the oldest segment's ACK 0.4 ms away:
    // deferred.
    s.on_ack(&ack(4, 10_000_000), 19_600_000, &mut out);
    assert!(out.pkts.is_empty());
    assert_eq!(s.c.cwnd - s.c.packets_in_flight(), 1);
    s.on_ack(&ack(5, 10_000_000), 19_800_000, &mut out);
    assert_eq!(sent(&out), vec![(14, false), (15, true)]);
}

/// `tcp_sendmsg` tops the unsent tail skb of the write queue up to
/// `size_goal` (here 22 segments) before it starts another.
#[test]
fn writes_fill_the_write_queues_skbs_to_the_size_goal() {
    let (mut s, _) = bulk_reno_set_up();
    let segs = |s: &Sender| s.wq_ends.iter().map(|e| e / 1448).collect::<Vec<_>>();
    assert_eq!((s.snd_nxt / 1448, segs(&s)), (10, vec![32]), "one skb unsent, full");
    s.queue_written(5 * 1448, false);
    assert_eq!(segs(&s), vec![32, 37]);
    s.queue_written(20 * 1448, false);
    assert_eq!(segs(&s), vec![32, 54, 57]);
    assert_eq!(s.write_seq, 57 * 1448);
}

/// A write whose first bytes top up the unsent tail skb takes that skb's
/// PSH away (`tcp_sendmsg_locked` clears it at its first copy); a write
/// that finds the tail full starts a new skb, and the old end keeps it.
#[test]
fn a_write_into_the_unsent_tail_takes_its_push_away() {
    // The tail (segments 10 to 32) is untouched and full (22 segments).
    let (mut s, mut out) = bulk_reno_set_up();
    assert_eq!(s.push_seqs.back(), Some(&(32 * 1448)));
    s.sndbuf.expand(200, 3, 2);
    s.app_write(11_000_000, &mut out);
    assert!(s.write_seq > 32 * 1448);
    assert_eq!(s.push_seqs.iter().filter(|&&e| e == 32 * 1448).count(), 1, "the full tail keeps its PSH");
    // Two segments acked: the tail's head leaves, and the next write tops
    // what is left of it up.
    let (mut s, mut out) = bulk_reno_set_up();
    s.on_ack(&ack(2, 16_000_000), 16_000_000, &mut out);
    assert!(s.snd_nxt > 10 * 1448 && s.snd_nxt < 32 * 1448);
    s.sndbuf.expand(200, 3, 2);
    s.app_write(16_000_000, &mut out);
    assert!(s.write_seq > 32 * 1448);
    assert_eq!(s.push_seqs.iter().copied().collect::<Vec<_>>(), vec![s.write_seq], "only the new write's end");
}

/// `tcp_cwnd_test`: an skb takes at most half of cwnd (at least one
/// segment), so that two are in flight. A window clamped to 3 sends one
/// segment per skb, none of them a GSO packet with PSH, where the TSO size
/// (2 here) allows two, as Linux 6.18 did in `bench/delack-ato.toml`.
/// The clamp is the TCP-BPF one: set when the connection is established,
/// with ssthresh, so the initial window of 10 still leaves whole (in
/// two-segment skbs) and the first ACK brings cwnd down to 3.
#[test]
fn an_skb_takes_at_most_half_of_cwnd() {
    let cca = crate::cc::by_name("reno").unwrap();
    let opts = ConnOpts { cwnd_clamp: Some(3), ..ConnOpts::default() };
    let mut s = Sender::new(0, 0, tcp_cfg().into(), cca, opts);
    let mut out = Out::default();
    s.set_unlimited(true, 0, &mut out);
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
    assert_eq!(sent(&out), (1..=10).map(|i| (i, i % 2 == 0)).collect::<Vec<_>>());
    assert_eq!((s.c.cwnd, s.c.ssthresh), (10, 3));
    out.clear();
    s.on_ack(&ack(2, 16_000_000), 16_000_000, &mut out);
    assert_eq!(s.c.cwnd, 3);
    assert!(out.pkts.is_empty(), "8 in flight");
    s.on_ack(&ack(9, 17_000_000), 17_000_000, &mut out);
    assert_eq!(sent(&out), vec![(11, false), (12, false)]);
}

/// `tcp_grow_skb` (Linux 6.10 on): a head skb smaller than what may leave
/// takes the missing bytes from the next skb, so a two-segment GSO packet
/// (with PSH) runs across the write queue's skb boundary where the sender
/// would otherwise send the head's last segment alone and the next one
/// with the following skb.
#[test]
fn the_head_skb_grows_from_the_next_one() {
    let (mut s, mut out) = bulk_reno_set_up();
    s.sndbuf.expand(200, 3, 2);
    s.app_write(11_000_000, &mut out);
    // Make the head skb end one segment after the initial window.
    assert_eq!(s.snd_nxt, 10 * 1448);
    s.wq_ends.push_front(11 * 1448);
    out.clear();
    s.on_ack(&ack(2, 16_000_000), 16_000_000, &mut out);
    // cwnd 12 with 8 in flight: two two-segment skbs, the first across the boundary.
    assert_eq!(sent(&out), vec![(11, false), (12, true), (13, false), (14, true)]);
    assert_eq!(s.wq_ends.front(), Some(&(32 * 1448)), "the head took the next skb's bytes");
}

/// A write's end inside a grown head skb keeps its PSH in that skb's
/// flags (Linux's `tcp_grow_skb` moves bytes, not flags, from the next
/// skb unless it takes it whole): the head skb ending at a write's end
/// one segment past the initial window grows by one segment for a
/// two-segment transmission, and the PSH goes out, and stays in the
/// retransmit queue, on the grown skb's last segment, not on the one
/// that ended the write. A GSO packet's PSH (segment 14) is the wire's
/// only: a retransmission of that segment alone goes without it.
#[test]
fn a_writes_end_inside_a_grown_skb_goes_out_where_the_skb_ends() {
    let (mut s, mut out) = bulk_reno_set_up();
    s.sndbuf.expand(200, 3, 2);
    s.app_write(11_000_000, &mut out);
    s.wq_ends.push_front(11 * 1448);
    s.push_seqs.push_front(11 * 1448);
    out.clear();
    s.on_ack(&ack(2, 16_000_000), 16_000_000, &mut out);
    assert_eq!(sent(&out), vec![(11, false), (12, true), (13, false), (14, true)]);
    let push = |end: u64| s.rtxq.iter().find(|g| g.seq + g.len as u64 == end * 1448).expect("queued").flags & PUSH != 0;
    assert_eq!([11, 12, 13, 14].map(push), [false, true, false, false]);
}

/// A transmission is not bounded by the write queue's skbs: Linux 6.18's
/// `tcp_write_xmit` grows the head skb from the next one (`tcp_grow_skb`)
/// up to what may leave (cwnd's quota, at most half of cwnd, and the TSO
/// size). With cwnd 76, 10 segments in flight and a TSO size of 45, the
/// data written in 22-segment skbs leaves in two skbs of 38 and 28
/// segments, each ending in PSH. (Before Linux 6.10, and in this simulator
/// until session 47, it left 22 segments at a time, as written.)
#[test]
fn a_transmission_runs_across_the_write_queues_skbs() {
    let (mut s, mut out) = bulk_reno_set_up();
    s.sndbuf.expand(200, 3, 2);
    s.app_write(11_000_000, &mut out);
    assert_eq!(s.wq_ends.iter().take(3).map(|e| e / 1448).collect::<Vec<_>>(), vec![32, 54, 76]);
    out.clear();
    s.c.cwnd = 76;
    s.c.pacing_rate = 1 << 30; // 1 ms of it is over 64 KB: 45-segment TSO skbs
    s.send(11_000_000, &mut out);
    let psh: Vec<u64> = sent(&out).into_iter().filter(|&(_, p)| p).map(|(e, _)| e).collect();
    assert_eq!(psh, vec![48, 76]);
    assert_eq!(s.snd_nxt, 76 * 1448);
}

/// A bulk Reno sender with `cwnd`, at 19.8 ms, having just sent: the
/// oldest segment's ACK (SYN RTT 10 ms, sent at 10 ms) is due within
/// 0.2 ms, so TSO deferral may hold data. Returns it and the time.
fn just_sent_with_cwnd(cwnd: u32) -> (Sender, Nanos) {
    let (mut s, _) = bulk_reno_set_up();
    s.c.cwnd = cwnd;
    s.last_send_ns = 19_800_000;
    (s, 19_800_000)
}

/// `tcp_tso_should_defer`'s "middle in queue" rule: with room for fewer
/// segments than a TSO skb, right after a send and with the oldest
/// segment's ACK due within 0.2 ms, the write queue's tail (a write may
/// still grow it) waits for the next ACK, and so does an skb ahead of it
/// that the room cannot take whole; one that it can goes now.
#[test]
fn an_skb_short_of_the_tail_goes_once_it_fits() {
    let (s, now) = just_sent_with_cwnd(100);
    assert!(s.tso_should_defer(now, 4, 45, 3, true), "the tail waits");
    assert!(s.tso_should_defer(now, 4, 45, 5, false), "an skb the room cannot take waits");
    assert!(!s.tso_should_defer(now, 4, 45, 3, false), "an skb ahead of the tail that fits goes");
}

/// The receive window counts in TSO deferral as cwnd does (Linux's
/// `limit`, the smaller of `send_win` and `cong_win`): with cwnd's room for
/// 100 segments but the window's for two, the data waits for the next ACK;
/// with the window's room for a full TSO skb, it goes.
#[test]
fn the_receive_window_counts_in_tso_deferral() {
    let (mut s, now) = just_sent_with_cwnd(200);
    let out_bytes = s.snd_nxt - s.snd_una;
    s.rwnd = out_bytes + 2 * 1448;
    assert!(s.tso_should_defer(now, 100, 45, 45, true), "two segments of window: wait");
    s.rwnd = out_bytes + 45 * 1448;
    assert!(!s.tso_should_defer(now, 100, 45, 45, true), "a TSO skb of window: go");
    s.rwnd = 6 << 20;
    assert!(!s.tso_should_defer(now, 100, 45, 45, true), "cwnd's room alone: go");
}

/// A new connection's first write, as Linux 6.18 takes it (probe on
/// `sock_send_length`, docs/sim-model.md): the SYN-ACK's unscaled window
/// (at most 64 KB) makes skbs of 22 segments; the first fills and, the
/// send head, leaves at once as far as the initial window lets it (ten
/// segments, as five two-segment skbs); the write refills it to 22 and
/// stops, the 46,080-byte buffer being full. The kernel's load generator
/// takes 44,888 bytes after its 44-byte header: 31 segments and the
/// header, 32 packets, as here.
#[test]
fn the_first_write_sends_the_initial_window_and_holds_one_skb() {
    let (s, out) = bulk_reno_set_up();
    assert_eq!(s.write_seq, 32 * 1448);
    assert_eq!(s.snd_nxt, 10 * 1448);
    assert_eq!(sent(&out).len(), 10);
    assert_eq!(s.sndbuf.queued(s.write_seq, s.wq_ends.len() as u64), 32 * 1448 + 6 * 832);
    assert_eq!(s.sndbuf.size_goal(), 22 * 1448);
}

/// `tcp_push_one`: a write that fills an skb while nothing else is
/// unsent sends that skb at once, even where TSO deferral would hold
/// it (room for one segment of a two-segment TSO size, a send 0.4 ms
/// ago, the oldest segment's ACK due now); the rest waits as usual.
#[test]
fn a_write_into_an_empty_queue_is_pushed_at_once() {
    let (mut s, mut out) = all_written_sent();
    s.c.ssthresh = 2;
    s.c.cwnd = s.c.packets_in_flight() + 1;
    s.last_send_ns = 19_600_000;
    out.clear();
    // An ACK's `tcp_check_space`: cwnd has room, so the buffer grows and
    // the waiting writer wakes and writes.
    s.check_space(20_000_000, &mut out);
    assert!(s.write_seq > 46_336);
    assert_eq!(sent(&out), vec![(33, false)]);
    out.clear();
    s.c.cwnd += 1;
    s.send(20_100_000, &mut out);
    assert!(out.pkts.is_empty(), "deferred: one segment of room, a send 0.1 ms ago");
}

/// The same when what is unsent is one skb, the send head (here the 22
/// segments the first write held): a write that tops it up sends it at
/// once, where TSO deferral would hold it (room for one segment, a send
/// 0.1 ms ago, the oldest segment's ACK due in 0.5 ms).
#[test]
fn a_write_topping_up_the_send_head_pushes_it() {
    let (mut s, mut out) = bulk_reno_set_up();
    s.c.ssthresh = 2;
    s.c.cwnd = s.c.packets_in_flight() + 1;
    s.last_send_ns = 19_400_000;
    out.clear();
    s.sndbuf.expand(100, 3, 2);
    s.app_write(19_500_000, &mut out);
    assert_eq!(sent(&out), vec![(11, false)]);
}

/// A bulk sender whose first write (46,336 bytes, see above) is all
/// sent, then cwnd wide open: the writer waits on a full buffer. The
/// segments leave one a time with cwnd full after each, so the
/// `tcp_check_space` after each skb does not grow the buffer (it would
/// with room left in cwnd, and the writer would wake).
fn all_written_sent() -> (Sender, Out) {
    let (mut s, mut out) = bulk_reno_set_up();
    assert_eq!(s.sndbuf_bytes(), 46_080);
    assert_eq!(s.write_seq, 46_336);
    let mut now = 11_000_000;
    while s.has_data() {
        s.c.cwnd = s.c.packets_in_flight() + 1;
        s.send(now, &mut out);
        now += 2_000_000; // past TSO deferral's 1 ms
    }
    assert_eq!(s.snd_nxt, 46_336);
    assert_eq!(s.sndbuf_bytes(), 46_080);
    assert_eq!(s.write_seq, 46_336, "the writer waits");
    s.c.cwnd = 100;
    out.clear();
    (s, out)
}

/// SACKed segments held behind holes keep their charge: the first
/// segment of every two-segment skb is lost, the second SACKed, so no
/// skb is wholly SACKed and none is freed. Still the buffer grows and
/// the writer writes during the recovery: cwnd has room, and every ACK
/// runs `tcp_check_space` whether it freed an skb or not (Linux 5.10
/// dropped SOCK_QUEUE_SHRUNK, which had kept such a writer waiting until
/// the repair's cumulative ACK).
#[test]
fn sacked_segments_behind_holes_free_nothing_but_the_buffer_grows() {
    let (mut s, mut out) = all_written_sent();
    let seg = |k: u64| ((k - 1) * 1448, k * 1448);
    let p = Packet { ack: 0, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[seg(4), seg(2)]);
    s.on_ack(&p, 20_000_000, &mut out);
    let skbs = s.rtxq.iter().filter(|g| g.end() <= 4 * 1448 && g.flags & SKB_END != 0).count();
    assert_eq!(skbs, 4, "one-segment skbs: the SACKs freed none");
    assert_eq!(s.sndbuf_bytes(), 2 * s.c.cwnd.max(10) as u64 * 2304, "grown: cwnd had room");
    assert!(s.write_seq > 46_336, "the writer woke");
}

/// The same, but everything after the first segment is SACKed in one
/// block: each skb, once wholly SACKed, merges into the SACKed one
/// before it and is freed (`tcp_shift_skb_data`). That frees memory
/// during the recovery, so the buffer grows there (not cwnd-limited)
/// and the writer writes before the hole is repaired.
#[test]
fn wholly_sacked_skbs_merge_and_free_the_buffer_during_recovery() {
    let (mut s, mut out) = all_written_sent();
    let p = Packet { ack: 0, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(1448, 46_336)]);
    s.on_ack(&p, 20_000_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Recovery);
    let skbs = s.rtxq.iter().filter(|g| g.end() <= 46_336 && g.flags & SKB_END != 0).count();
    assert_eq!(skbs, 2, "the lost head, cut from its skb, and one SACKed skb are left");
    assert!(s.sndbuf_bytes() > 46_080);
    assert!(s.write_seq > 46_336);
}

/// A sender of `cca` whose SYN-ACK came at `synack_ns` (its RTT), so
/// its initial window went out then; `data` bytes to send, or unlimited.
fn connected(cfg: &TcpConfig, cca: &str, data: Option<u64>, synack_ns: Nanos) -> (Sender, Out) {
    connected_with(cfg, crate::cc::by_name(cca).unwrap(), data, synack_ns)
}

/// `connected` with a CCA given as an object (a test's recorder).
fn connected_with(cfg: &TcpConfig, cca: Box<dyn CongestionControl>, data: Option<u64>, synack_ns: Nanos) -> (Sender, Out) {
    let (s, mut out) = handshaken(cfg, cca, ConnOpts::default(), data, synack_ns);
    out.clear();
    (s, out)
}

/// A sender of `cca` with `opts`, unlimited data, whose SYN-ACK came at
/// 10 ms; `out` holds its initial window.
fn connected_opts(cca: &str, opts: ConnOpts) -> (Sender, Out) {
    handshaken(&tcp_cfg(), crate::cc::by_name(cca).unwrap(), opts, None, 10_000_000)
}

/// The handshake the helpers above share; `out` holds what it sent.
fn handshaken(cfg: &TcpConfig, cca: Box<dyn CongestionControl>, opts: ConnOpts, data: Option<u64>, synack_ns: Nanos) -> (Sender, Out) {
    let mut s = Sender::new(0, 0, cfg.clone().into(), cca, opts);
    let mut out = Out::default();
    match data {
        Some(n) => s.write(n, 0, &mut out),
        None => s.set_unlimited(true, 0, &mut out),
    }
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, synack_ns, &mut out);
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
    let mut s = Sender::new(0, 0, tcp_cfg().into(), Box::new(Recorder(Default::default(), rate.clone())), ConnOpts::default());
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
        let mut s = Sender::new(0, 0, tcp_cfg().into(), Box::new(Recorder(Default::default(), rate.clone())), opts);
        let mut out = Out::default();
        s.write(724, 0, &mut out);
        s.connect(0, &mut out);
        s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
        s.on_ack(&Packet { ack: 724, ts_ecr: 10_000_000, ece, ..Packet::default() }, 60_000_000, &mut out);
        assert_eq!(rate.borrow().last().unwrap().is_ack_delayed, !ece);
    }
}

/// An ECN echo reduces cwnd once per window (RFC 3168 §6.1.2): CWR is
/// held until an ACK covers something above high_seq (Linux
/// `tcp_fastretrans_alert`), because the ACK of high_seq itself left the
/// receiver before the CWR segment reached it and still carries ECE. The
/// simulator once ended CWR at high_seq and cut cwnd twice per mark.
#[test]
fn ece_on_the_ack_of_high_seq_does_not_reduce_again() {
    let opts = ConnOpts { ecn: true, ..ConnOpts::default() };
    let (mut s, mut out) = connected_opts("cubic", opts);
    out.clear();
    let ece_ack = |n: u64| Packet { ack: n * 1448, ts_ecr: 10_000_000, ece: true, ..Packet::default() };
    s.on_ack(&ece_ack(2), 20_000_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Cwr);
    let (high_seq, ssthresh) = (s.high_seq, s.c.ssthresh);
    assert_eq!(high_seq, 10 * 1448, "high_seq is snd_nxt when the echo came");
    assert!(ssthresh < 10);
    // The ACKs up to high_seq, still echoing: one reduction, held.
    s.on_ack(&ece_ack(6), 20_100_000, &mut out);
    s.on_ack(&ece_ack(10), 20_200_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Cwr, "CWR is held at snd_una == high_seq");
    assert_eq!((s.high_seq, s.c.ssthresh), (high_seq, ssthresh), "no second reduction");
    let cwr: Vec<u64> = out.pkts.iter().filter(|p| p.cwr).map(|p| p.seq).collect();
    assert_eq!(cwr, vec![high_seq], "CWR on the first new segment only");
    // The CWR segment acknowledged, without ECE: the reduction ends.
    s.on_ack(&Packet { ack: 11 * 1448, ts_ecr: 20_000_000, ..Packet::default() }, 30_000_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Open);
    assert_eq!((s.c.cwnd, s.c.ssthresh), (ssthresh, ssthresh));
}

/// A loss found during an ECN reduction enters Recovery without a second
/// reduction and keeps the CWR's high_seq (Linux `tcp_enter_recovery`
/// initialises the reduction only outside CWR and Recovery).
#[test]
fn recovery_from_cwr_keeps_its_reduction_and_high_seq() {
    let opts = ConnOpts { ecn: true, ..ConnOpts::default() };
    let (mut s, mut out) = connected_opts("cubic", opts);
    s.on_ack(&Packet { ack: 2 * 1448, ts_ecr: 10_000_000, ece: true, ..Packet::default() }, 20_000_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Cwr);
    let (high_seq, ssthresh, recoveries) = (s.high_seq, s.c.ssthresh, s.stats.recoveries);
    assert!(s.snd_nxt > high_seq, "new data went out under CWR");
    // Segment 2 lost, 3..6 SACKed: RACK marks it, Recovery begins.
    let sack = Packet { ack: 2 * 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(3 * 1448, 6 * 1448)]);
    s.on_ack(&sack, 20_100_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Recovery);
    assert_eq!(s.stats.recoveries, recoveries + 1);
    assert_eq!((s.high_seq, s.c.ssthresh), (high_seq, ssthresh), "the CWR's reduction goes on");
}

/// RFC 3168 §6.1.5 as Linux's `tcp_ecn_send`: with ECN, new data is ECT
/// and retransmissions are not (an ECN queue drops them where it would
/// mark), unless the CCA needs ECN (DCTCP), whose retransmissions stay ECT.
#[test]
fn retransmissions_are_not_ect_unless_the_cca_needs_ecn() {
    for (cca, ecn, resent_ect) in [("cubic", true, false), ("dctcp", true, true), ("cubic", false, false)] {
        let needs = crate::cc::by_name(cca).unwrap().needs_ecn();
        let opts = ConnOpts { ecn: ecn || needs, ca_needs_ecn: needs, ..ConnOpts::default() };
        let (mut s, mut out) = connected_opts(cca, opts);
        assert!(out.pkts.iter().filter(|p| p.len > 0).all(|p| p.ect == ecn), "{cca}: new data");
        out.clear();
        // Segment 1 lost, 2..4 SACKed: RACK marks it lost and resends it.
        s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
        let resent: Vec<&Packet> = out.pkts.iter().filter(|p| p.seq == 0 && p.len > 0).collect();
        assert_eq!(resent.len(), 1, "{cca}: the head resent");
        assert_eq!(resent[0].ect, resent_ect, "{cca}: the retransmission");
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
    let mut s = Sender::new(0, 0, tcp_cfg().into(), Box::new(Recorder(seen.clone(), rate_rtts.clone())), ConnOpts::default());
    let mut out = Out::default();
    s.set_unlimited(true, 0, &mut out);
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
    let at = s.xmit_timer.deadline().unwrap();
    assert!(at > 23_000_000);
    // The same SACK again at 23 ms (before, this ACK marked it).
    s.on_ack(&sacked(1, 3), 23_000_000, &mut out);
    assert_eq!((s.c.lost, s.stats.retrans_segs), (0, 0));
    s.on_timer(TimerKind::Retransmit, at, &mut out);
    assert_eq!((s.c.lost, s.c.ca_state, s.stats.retrans_segs), (1, CaState::Recovery, 1));
}

/// A timeout marks lost what `tcp_timeout_mark_lost` does, through the
/// same marking as RACK (`tcp_mark_skb_lost`), so `lost` counts a
/// retransmission lost again as Linux's `tcp_sum_lost` does. After the
/// reordering timer of the test above, segment 0 is lost and resent,
/// 1..2 are SACKed and the SACK let 10..11 go out; at the RTO the resent
/// 0 and the unsacked 3..11 are lost: 1 + 1 + 9.
#[test]
fn a_timeout_counts_a_lost_retransmission() {
    let (mut s, mut out) = ten_out("reno");
    s.on_ack(&sacked(1, 3), 20_000_000, &mut out);
    let at = s.xmit_timer.deadline().unwrap();
    s.on_timer(TimerKind::Retransmit, at, &mut out);
    assert_eq!((s.c.lost, s.c.retrans_out, s.stats.retrans_segs), (1, 1, 1));
    assert_eq!(s.snd_nxt, 12 * 1448);
    let rto = s.xmit_timer.deadline().unwrap();
    s.on_timer(TimerKind::Retransmit, rto, &mut out);
    assert_eq!((s.c.lost, s.c.lost_out, s.c.ca_state), (11, 10, CaState::Loss));
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
    let (mut s, mut out) = connected_opts("cubic", opts);
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

/// `[tcp] pacing_latency`: the pacing timer fires late by a draw, and the
/// burst leaves then; Linux's credit (`tcp_update_skb_after_send`) brings
/// the next slot closer by that lateness, at most half a burst's time. A
/// sender that looks again before the timer fires leaves it as it is
/// (`tcp_pacing_check` does not restart a queued hrtimer).
#[test]
fn a_late_pacing_timer_sends_late_and_the_credit_catches_up() {
    let opts = ConnOpts { max_pacing_rate: Some(96_500), ..ConnOpts::default() };
    // A window that never fills: every slot sends.
    let cfg = TcpConfig { init_cwnd: 100, ..tcp_cfg() };
    let mut s = Sender::new(0, 0, cfg.into(), crate::cc::by_name("cubic").unwrap(), opts);
    s.set_pacing_latency(Latency::pacing(2_000_000, 4_000_000, 1, 0));
    let mut out = Out::default();
    s.set_unlimited(true, 0, &mut out);
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
    let mut latenesses = Vec::new();
    for _ in 0..3 {
        let slot = s.pace_next_ns;
        let fire = s.pace_timer.deadline().expect("a paced sender waits for its slot");
        assert!(fire > slot, "the timer fires late: at {fire} for the slot at {slot}");
        s.send(slot - 1, &mut out);
        assert_eq!(s.pace_timer.deadline(), Some(fire), "a queued timer is left as it is");
        let before = s.snd_nxt;
        s.on_timer(TimerKind::Pace, fire, &mut out);
        let len = (s.snd_nxt - before) * NS_PER_SEC / s.c.pacing_rate;
        assert!(len > 0, "the late timer sent a burst");
        assert_eq!(s.pace_next_ns, fire + len - (len / 2).min(fire - slot));
        latenesses.push(fire - slot);
    }
    assert!(latenesses.windows(2).any(|w| w[0] != w[1]), "one draw per firing: {latenesses:?}");
}

/// An unlimited CUBIC sender paced at 96.5 kB/s with room in its window,
/// its handshake done at 10 ms and its first paced burst waiting.
fn paced_after_handshake() -> (Sender, Out) {
    let opts = ConnOpts { max_pacing_rate: Some(96_500), ..ConnOpts::default() };
    let cfg = TcpConfig { init_cwnd: 100, ..tcp_cfg() };
    let mut s = Sender::new(0, 0, cfg.into(), crate::cc::by_name("cubic").unwrap(), opts);
    let mut out = Out::default();
    s.set_unlimited(true, 0, &mut out);
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
    (s, out)
}

/// Linux paces each skb, a retransmitted one too (`tcp_pacing_check`
/// before each in `tcp_xmit_retransmit_queue` and in `tcp_write_xmit`):
/// a paced burst of retransmissions is the lost part of one sent skb, and
/// new data waits for the next slot instead of joining it.
#[test]
fn a_paced_sender_resends_one_skb_per_slot_and_new_data_waits() {
    let (mut s, mut out) = paced_after_handshake();
    let ends = |s: &Sender| (0..s.rtxq.len()).filter(|&i| s.rtxq[i].flags & SKB_END != 0).collect::<Vec<_>>();
    // Paced bursts until three skbs have left after the initial window.
    while ends(&s).iter().filter(|&&i| i >= 10).count() < 3 {
        let slot = s.pace_next_ns;
        s.send(slot, &mut out);
    }
    let e = ends(&s);
    let (a, b) = (e[e.len() - 3] + 1, e[e.len() - 2]);
    assert!(b > a, "a paced skb of two segments or more: {e:?}");
    // All before skb a..=b acked, the skb after it SACKed: RACK (no
    // reordering seen) marks a..=b lost, sent before what was delivered.
    let sent_at = s.rtxq[b + 1].tx.sent_ns;
    let nxt = s.snd_nxt;
    let now = s.pace_next_ns.max(sent_at + 20_000_000);
    let p = Packet { ack: a as u64 * 1448, ts_ecr: sent_at, ..Packet::default() }.with_sacks(&[((b as u64 + 1) * 1448, nxt)]);
    out.clear();
    s.on_ack(&p, now, &mut out);
    assert_eq!(s.c.ca_state, CaState::Recovery);
    // The lost skb leaves in slots of at most the TSO size (Linux cuts
    // it there, `__tcp_retransmit_skb`), without new data; new data waits
    // for the slot after the last of it.
    let lost: Vec<u64> = (a..=b).map(|i| i as u64 * 1448).collect();
    let mut resent = Vec::new();
    let mut slots = 0;
    loop {
        let seqs: Vec<u64> = out.pkts.iter().map(|p| p.seq).collect();
        assert!(!seqs.is_empty(), "a slot sent nothing");
        if seqs[0] >= nxt {
            assert!(seqs.iter().all(|&q| q >= nxt), "new data after retransmissions: {seqs:?}");
            break;
        }
        assert!(seqs.iter().all(|&q| q < nxt), "new data joined a burst of retransmissions: {seqs:?}");
        resent.extend(seqs);
        slots += 1;
        let slot = s.pace_next_ns;
        assert!(slot > s.c.now_ns, "the next burst waits for its slot");
        out.clear();
        s.send(slot, &mut out);
    }
    assert_eq!(resent, lost);
    assert!(slots >= 2 && b - a + 1 > 2, "the skb outgrew one slot: {slots} slots, {} segments", b - a + 1);
}

/// The CCA sees Linux's `tcp_wstamp_ns`: an ACK that comes before the
/// paced sender's next slot finds that slot, later than the ACK (BBR counts
/// what the path delivers until then, `bbr_packets_in_net_at_edt`).
#[test]
fn the_cca_sees_the_next_pacing_slot() {
    let (mut s, mut out) = paced_after_handshake();
    let slot = s.pace_next_ns;
    assert!(slot > 10_000_000, "the first paced burst waits for its slot: {slot}");
    let at = slot - 100_000;
    s.on_ack(&ack(2, at), at, &mut out);
    assert_eq!(s.pace_next_ns, slot, "the ACK sent nothing before the slot");
    assert_eq!(s.c.wstamp_ns, slot);
}

/// `tcp_write_xmit` records how the window was used (`tcp_cwnd_validate`)
/// only when new data left or cwnd held it back: a call that sends nothing
/// for another reason, here the pacer, keeps the record, so the ACKs of a
/// window that filled cwnd may still grow it. Once new data leaves with
/// room to spare in cwnd, the record says the flow was not cwnd-limited.
#[test]
fn the_window_use_is_recorded_only_when_data_leaves_or_cwnd_holds_it() {
    let (mut s, mut out) = paced_after_handshake();
    // The last window filled cwnd, and all of it has been acked.
    s.c.is_cwnd_limited_flag = true;
    s.cwnd_usage_seq = s.snd_una;
    let slot = s.pace_next_ns;
    let before = s.snd_nxt;
    s.send(slot - 1, &mut out);
    assert_eq!(s.snd_nxt, before, "the pacer holds the burst");
    assert!(s.c.is_cwnd_limited_flag);
    s.send(slot, &mut out);
    assert!(s.snd_nxt > before, "the burst leaves at its slot");
    assert!(s.c.packets_in_flight() < s.c.cwnd);
    assert!(!s.c.is_cwnd_limited_flag);
}

/// `[tcp] sender_pauses`: a timer that expires while the host is paused
/// runs when the pause ends (the world calls `defer_timer`), and does not
/// run before.
#[test]
fn a_deferred_timer_fires_at_the_pause_end() {
    let (mut s, mut out) = paced_after_handshake();
    let slot = s.pace_timer.deadline().expect("a paced sender waits for its slot");
    let before = s.snd_nxt;
    out.timers.clear();
    s.defer_timer(TimerKind::Pace, slot, slot + 3_000_000, &mut out);
    assert_eq!(s.snd_nxt, before, "nothing leaves during the pause");
    assert_eq!(s.pace_timer.deadline(), Some(slot + 3_000_000));
    assert!(out.timers.contains(&(slot + 3_000_000, 0, TimerKind::Pace)), "{:?}", out.timers);
    s.on_timer(TimerKind::Pace, slot + 3_000_000, &mut out);
    assert!(s.snd_nxt > before, "the burst leaves when the host runs again");
}

/// A spurious timeout (RFC 5682 / Eifel): the ACK after the RTO echoes
/// the original transmission's timestamp, so the window cut is undone
/// and the connection is Open with its old cwnd and ssthresh.
#[test]
fn spurious_rto_is_undone() {
    let (mut s, mut out) = ten_out("reno");
    let rto_at = s.xmit_timer.deadline().unwrap();
    s.on_timer(TimerKind::Retransmit, rto_at, &mut out);
    // The probe timer fires first with ten segments out; then the RTO.
    while s.c.ca_state != CaState::Loss {
        let at = s.xmit_timer.deadline().unwrap().max(s.c.now_ns + 1);
        s.on_timer(TimerKind::Retransmit, at, &mut out);
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
        let at = s.xmit_timer.deadline().unwrap().max(s.c.now_ns + 1);
        s.on_timer(TimerKind::Retransmit, at, &mut out);
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

/// A connection's first timeout counts once more by the state it ends
/// (Linux's TcpExt TCPSackRecoveryFail, TCPLossFailures, TCPSackFailures);
/// the backed-off timeouts after it, and one in the Open state, only in
/// `rto_count`. Entering fast recovery counts as Linux's TCPSackRecovery.
#[test]
fn first_timeouts_count_by_the_state_they_end() {
    let counts = |s: &Sender| (s.stats.rto_count, s.stats.rto_in_recovery, s.stats.rto_in_loss, s.stats.rto_in_disorder);
    let fire_until_rto = |s: &mut Sender, out: &mut Out, n: u64| {
        while s.stats.rto_count < n {
            let t = s.xmit_timer.deadline().unwrap();
            s.on_timer(TimerKind::Retransmit, t, out);
        }
    };
    // Segment 0 lost (1..3 SACKed) and its retransmission too: twice.
    let (mut s, mut out) = ten_out("cubic");
    s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
    assert_eq!((s.c.ca_state, s.stats.recoveries), (CaState::Recovery, 1));
    fire_until_rto(&mut s, &mut out, 2);
    assert_eq!(counts(&s), (2, 1, 0, 0));
    assert_eq!((s.c.ca_state, s.stats.recoveries), (CaState::Loss, 1));
    // Each timeout found the head's retransmission lost (TCPLostRetransmit).
    assert_eq!(s.stats.lost_retransmits, 2);
    // Nothing acknowledged at all: a loss probe, then timeouts in Open.
    let (mut s, mut out) = ten_out("cubic");
    fire_until_rto(&mut s, &mut out, 2);
    assert_eq!(s.stats.tlp_count, 1);
    assert_eq!(counts(&s), (2, 0, 0, 0));
    assert_eq!(s.stats.recoveries, 0);
}

/// Retransmitting the head restarts the retransmission timer (Linux
/// `tcp_xmit_retransmit_queue` re-arms it when the head went out again
/// and no reordering timer is pending), so a repaired head gets a whole
/// RTO to be acknowledged; the timer armed for the original would fire
/// while the retransmission is still on its way.
#[test]
fn head_retransmission_restarts_the_rto() {
    let (mut s, mut out) = ten_out("cubic");
    let first_deadline = s.xmit_timer.deadline().unwrap();
    // Segments 1..3 sacked at 20 ms: segment 0 is lost and resent now.
    s.on_ack(&sacked(1, 4), 20_000_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Recovery);
    assert!(s.rtxq[0].flags & RETRANS != 0, "the head was not retransmitted");
    assert_eq!(s.xmit_pending, XmitTimer::Retrans);
    // A whole RTO from 20 ms, in 1 ms jiffies: over 63 jiffies away, the
    // timer wheel's level 1, which runs it on the next multiple of 8
    // jiffies after its expiry.
    let deadline = s.xmit_timer.deadline().unwrap();
    let expires = 20 + s.current_rto().div_ceil(1_000_000);
    assert_eq!(deadline, ((expires >> 3) + 1) * 8 * 1_000_000);
    assert!(deadline > first_deadline);
    // The old deadline passes without a timeout.
    s.on_timer(TimerKind::Retransmit, first_deadline, &mut out);
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
    // Nothing more comes back; a timeout at 300 ms, while segments 10..19
    // are younger than RACK's RTT (its timing is another test's), resends
    // the head.
    let rto_at = 300_000_000;
    s.set_now(rto_at);
    s.on_rto(rto_at, &mut out);
    assert_eq!(s.c.ca_state, CaState::Loss);
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
/// usecs_to_jiffies(2·srtt + 2 ms) from the current jiffy, run by the
/// timer wheel a jiffy after that): on a 0.3 ms path it fires at the
/// second tick at 250 Hz (8 ms, as Linux's commit 1c2709cfff1d reports
/// for short paths at 250 Hz), the fourth at 1000 Hz.
#[test]
fn loss_probe_fires_on_a_jiffy_tick() {
    for (hz, at) in [(250, 8_000_000), (1000, 4_000_000)] {
        let (s, _) = short_path(hz, None);
        assert_eq!(s.xmit_pending, XmitTimer::LossProbe);
        assert_eq!(s.xmit_timer.deadline(), Some(at), "{hz} Hz");
    }
}

/// Linux 6.x arms the loss probe in Open whether or not new data could
/// still go out (`tcp_schedule_loss_probe` tests only the state, SACK
/// and data out): here the receive window holds the rest back.
#[test]
fn the_probe_is_armed_while_data_waits() {
    let (mut s, mut out) = short_path(1000, None);
    let now = 600_000;
    s.c.cwnd += 10;
    s.rwnd = s.snd_nxt - s.snd_una; // the receive window is full
    assert!(s.has_data() && s.c.packets_in_flight() < s.c.cwnd);
    s.set_now(now);
    s.set_xmit_timer(now, &mut out);
    assert_eq!(s.xmit_pending, XmitTimer::LossProbe);
}

/// With one segment out the probe waits 2·srtt + the minimum RTO, later
/// than the RTO itself; Linux still arms the probe, at the RTO's time.
#[test]
fn single_segment_gets_a_probe_at_the_rto_time() {
    let (s, _) = short_path(1000, Some(1448));
    assert_eq!(s.c.packets_out, 1);
    assert_eq!(s.xmit_pending, XmitTimer::LossProbe);
    // RTO 0.3 + 200 ms from 0.3 ms: 200.3 ms rounds up to 201 jiffies,
    // and the wheel's 8-jiffy buckets at that distance run it at 208.
    assert_eq!(s.xmit_timer.deadline(), Some(208_000_000));
}

/// RACK's reordering timer waits TCP_TIMEOUT_MIN_US more than the
/// reordering window, in jiffies (`tcp_rack_mark_lost`), and the timer
/// wheel runs it a jiffy after that, so it never fires before the window
/// has passed; when it fires it marks what is due and leaves the timer
/// to the RTO (`tcp_rack_reo_timeout` does not arm itself again).
#[test]
fn reordering_timer_is_a_jiffies_timer_and_fires_once() {
    // Segment 2 sacked, segment 1 (sent with it) not: RACK waits
    // min_rtt/4 = 75 µs, plus 2 ms, as jiffies: one at 250 Hz, three at
    // 1000 Hz, each run a jiffy later.
    let sack2 = Packet { ack: 0, ts_ecr: 300_000, ..Packet::default() }.with_sacks(&[(1448, 2 * 1448)]);
    for (hz, at) in [(250, 8_000_000), (1000, 4_000_000)] {
        let (mut s, mut out) = short_path(hz, None);
        s.on_ack(&sack2, 600_000, &mut out);
        assert_eq!(s.c.lost_out, 0);
        assert_eq!(s.xmit_timer.deadline(), Some(at), "{hz} Hz");
        s.on_timer(TimerKind::Retransmit, at, &mut out);
        assert_eq!(s.c.lost_out, 1, "{hz} Hz");
        assert_eq!(s.c.ca_state, CaState::Recovery);
    }
    // The same SACK at 3.95 ms: the window ends at 4.025 ms. Its one jiffy
    // from jiffy 0 ends at the 4 ms tick, before the window does; the
    // wheel runs the timer at the next one (8 ms), when the hole is due.
    let (mut s, mut out) = short_path(250, None);
    s.on_ack(&sack2, 3_950_000, &mut out);
    assert_eq!(s.xmit_timer.deadline(), Some(8_000_000));
    s.on_timer(TimerKind::Retransmit, 8_000_000, &mut out);
    assert_eq!(s.c.lost_out, 1);
    assert!(s.rtxq[0].flags & RETRANS != 0, "the hole was not retransmitted");
    // The head's retransmission re-arms the RTO from now: 200.7 ms (after
    // the SACK's RTT sample) is 51 jiffies from jiffy 2, run on jiffy 54
    // (216 ms).
    assert_eq!(s.xmit_pending, XmitTimer::Retrans);
    assert!((200_000_001..204_000_000).contains(&s.current_rto()), "RTO {}", s.current_rto());
    assert_eq!(s.xmit_timer.deadline(), Some(216_000_000));
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
    assert_eq!(s.xmit_pending, XmitTimer::ReoTimeout);
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
    let at = s.xmit_timer.deadline().unwrap();
    s.on_timer(TimerKind::Retransmit, at, &mut out);
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
    let mut s = Sender::new(0, 0, tcp_cfg().into(), crate::cc::by_name("cubic").unwrap(), ConnOpts::default());
    let mut out = Out::default();
    s.write(10 * 1448, 0, &mut out);
    s.connect(0, &mut out);
    s.on_synack(&Packet { syn: true, ts_ecr: 0, ..Packet::default() }, 10_000_000, &mut out);
    s.on_ack(&ack(8, 20_000_000), 20_000_000, &mut out);
    out.clear();
    assert_eq!(s.xmit_pending, XmitTimer::LossProbe);
    s.on_timer(TimerKind::Retransmit, 100_000_000, &mut out);
    // The write's last segment, with the PSH of its write.
    assert_eq!(sent(&out), vec![(10, true)]);
    assert!(s.tlp_retrans && s.tlp_high_seq == Some(10 * 1448));
    (s, out)
}

/// A probe sent restarts the RTO from now (`tcp_send_loss_probe` clears
/// the pending probe before `tcp_rearm_rto`): the probe went at 100 ms
/// with srtt 10 ms and an RTO of 210 ms, so the RTO is due at 310 ms
/// (run at 312 ms, the timer wheel's next 8-jiffy bucket), not 220 ms
/// (from the head's transmission at 10 ms).
#[test]
fn a_probe_sent_restarts_the_rto_from_now() {
    let (s, _) = probed_tail();
    assert_eq!(s.current_rto(), 210_000_000);
    assert_eq!(s.xmit_pending, XmitTimer::Retrans);
    assert_eq!(s.xmit_timer.deadline(), Some(312_000_000));
}

/// With a probe outstanding the probe timer is still armed, and when it
/// fires it sends nothing: the RTO is re-armed from the head's last
/// transmission (the timer held no RTO while it held the probe), not
/// from now. Ten segments out at 10 ms and no ACK: the probe is new
/// segment 10; then segment 0 is acked at 40 ms (Open: a probe may be
/// armed again) and the probe timer fires with that probe still out.
#[test]
fn a_probe_timer_with_a_probe_out_rearms_the_rto_from_the_head() {
    let (mut s, mut out) = ten_out("reno");
    let probe_at = s.xmit_timer.deadline().unwrap();
    s.on_timer(TimerKind::Retransmit, probe_at, &mut out);
    assert_eq!((s.stats.tlp_count, s.tlp_retrans, s.snd_nxt), (1, false, 11 * 1448));
    s.on_ack(&ack(1, 40_000_000), 40_000_000, &mut out);
    assert_eq!(s.c.ca_state, CaState::Open);
    assert!(s.tlp_high_seq.is_some());
    assert_eq!(s.xmit_pending, XmitTimer::LossProbe);
    let at = s.xmit_timer.deadline().unwrap();
    let sent = s.snd_nxt;
    s.on_timer(TimerKind::Retransmit, at, &mut out);
    assert_eq!((s.stats.tlp_count, s.snd_nxt), (1, sent), "a second probe went out");
    assert_eq!(s.xmit_pending, XmitTimer::Retrans);
    // Segment 1, the head, went out at 10 ms: the RTO is due then plus
    // the RTO, in jiffies from now, and runs on the timer wheel's bucket.
    let now_j = at / 1_000_000;
    let expires = now_j + (10_000_000 + s.current_rto() - at).div_ceil(1_000_000);
    let head_rto = crate::cc::util::timer_wheel_jiffy(expires, now_j) * 1_000_000;
    assert!(head_rto < at + s.current_rto());
    assert_eq!(s.xmit_timer.deadline(), Some(head_rto));
}

/// RACK's reordering timeout takes the one retransmission timer, and an
/// ACK that acks data while RACK sets it again leaves it there (Linux
/// clears FLAG_SET_XMIT_TIMER when `tcp_rack_mark_lost` arms the timer):
/// segments 2..3 SACKed at 20 ms, so 0 and 1 wait for RACK's window;
/// then 0 arrives, and 1 still waits.
#[test]
fn a_reordering_timeout_holds_the_timer_through_an_ack() {
    let (mut s, mut out) = ten_out("reno");
    s.on_ack(&sacked(2, 4), 20_000_000, &mut out);
    assert_eq!((s.c.ca_state, s.c.lost_out), (CaState::Disorder, 0));
    assert_eq!(s.xmit_pending, XmitTimer::ReoTimeout);
    let p = Packet { ack: 1448, ts_ecr: 10_000_000, ..Packet::default() }.with_sacks(&[(2 * 1448, 4 * 1448)]);
    s.on_ack(&p, 20_500_000, &mut out);
    assert_eq!(s.snd_una, 1448);
    assert_eq!(s.c.lost_out, 0);
    assert_eq!(s.xmit_pending, XmitTimer::ReoTimeout);
    let at = s.xmit_timer.deadline().unwrap();
    assert!(at < 20_500_000 + s.current_rto(), "the RTO replaced RACK's timeout");
    s.on_timer(TimerKind::Retransmit, at, &mut out);
    assert_eq!((s.c.lost_out, s.c.ca_state), (1, CaState::Recovery));
}

/// A probe that resends the tail is not a retransmission in flight:
/// Linux sends it with `__tcp_retransmit_skb` alone (no
/// TCPCB_SACKED_RETRANS, nothing in `retrans_out`), so it counts in flight
/// once. RACK judges it by the probe's transmission: a segment written
/// and sent after it is SACKed, and once the probe's RTT plus the
/// reordering window has passed it is lost as a first loss, not a lost
/// retransmission, and fast recovery resends it.
#[test]
fn a_probes_resend_is_in_flight_once_and_rack_judges_it() {
    let (mut s, mut out) = probed_tail();
    let last = s.rtxq.len() - 1;
    assert_eq!(s.rtxq[last].flags & (RETRANS | EVER_RETRANS), EVER_RETRANS);
    assert_eq!((s.c.retrans_out, s.c.packets_out, s.c.packets_in_flight()), (0, 2, 2));
    assert_eq!(s.stats.retrans_segs, 1);
    // New data at 101 ms, SACKed at 111 ms: segment 8 (sent at 10 ms) is
    // lost at once, the probe (100 ms) waits for RACK's window.
    s.write(1448, 101_000_000, &mut out);
    assert_eq!(s.snd_nxt, 11 * 1448);
    let p = Packet { ack: 8 * 1448, ts_ecr: 101_000_000, ..Packet::default() }.with_sacks(&[(10 * 1448, 11 * 1448)]);
    s.on_ack(&p, 111_000_000, &mut out);
    assert_eq!((s.c.ca_state, s.c.lost_out), (CaState::Recovery, 1));
    assert_eq!(s.rtxq[last].flags & LOST, 0);
    assert_eq!(s.xmit_pending, XmitTimer::ReoTimeout);
    let at = s.xmit_timer.deadline().unwrap();
    s.on_timer(TimerKind::Retransmit, at, &mut out);
    assert_eq!(s.rtxq[last].flags & (LOST | RETRANS), LOST | RETRANS, "the probed segment was not resent");
    assert_eq!((s.stats.lost_retransmits, s.c.retrans_out, s.stats.recoveries), (0, 2, 1));
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
