//! A one-way link: random loss at its input, a queue discipline, a
//! transmitter of fixed rate, then a propagation delay. The owner drives it
//! with three calls and schedules the times they return:
//!
//! - [`Link::offer`] a packet arriving at the link's input;
//! - [`Link::tx_done`] when the packet being serialised has left;
//! - [`Link::arrive`] when the head of the propagation line reaches the far end.
//!
//! Packets in propagation keep FIFO order, so only the head needs a timer.
//!
//! A drop-tail FIFO ([`Link::drop_tail`]) needs no event per transmission
//! either: its packets leave in the order they came, each when the one
//! ahead of it has, so the link computes a packet's departure when it
//! admits it, as a pipe does, and keeps only the times (not the packets)
//! to know its backlog and what it has sent at any moment. At one instant
//! the transmitter moves on before an arriving packet is judged (a packet
//! whose serialisation starts at `now` no longer counts as queued), the
//! order in which an event-driven FIFO's own events come first on a
//! dumbbell's bottleneck.
//!
//! Optional jitter ([`Link::with_jitter`]) adds a seeded uniform draw in
//! [0, jitter] to each packet's propagation delay, never letting a packet
//! overtake the one before it: a path whose delay varies from packet to
//! packet (host and router processing, a radio hop's retries) but that does
//! not reorder. Zero (the default) draws nothing.
//!
//! Optional stalls ([`Link::with_stalls`], [`Stalls`]) pause the far end:
//! what reaches it during a pause is delivered when the pause ends. None
//! (the default) draws nothing. Several independent pause processes may
//! overlay ([`Link::with_more_stalls`]): a packet is held while any pauses.

use crate::qdisc::{Limit, Qdisc, QdiscStats};
use crate::rng::Rng;
use crate::{tx_time, Nanos, Pkt};
use std::collections::VecDeque;

/// What a caller must schedule after `offer`.
#[derive(Debug, PartialEq, Eq)]
pub enum Offered {
    /// Lost by the random loss model.
    Lost,
    /// Dropped by the queue discipline.
    Dropped,
    /// Queued behind a busy transmitter: nothing new to schedule.
    Queued,
    /// The transmitter was idle and started: call `tx_done` at this time.
    TxStarted(Nanos),
    /// A pipe or drop-tail link (see [`Link::pipe`], [`Link::drop_tail`])
    /// put the packet straight into the propagation line, its departure
    /// computed; when the line was empty, call `arrive` at this time.
    InLine(Option<Nanos>),
}

/// A queueing link's queue at one moment ([`Link::queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueReading {
    pub backlog_bytes: u64,
    pub backlog_pkts: u64,
    pub stats: QdiscStats,
}

/// Times to schedule after `tx_done`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TxDone {
    /// The propagation line was empty: call `arrive` at this time.
    pub arrival: Option<Nanos>,
    /// The next packet started serialising: call `tx_done` at this time.
    pub next_tx_done: Option<Nanos>,
}

// Hot fields first, in one 64-byte line (a pipe's offer reads and writes
// only these, `line` and `drop_tail` on the next): with a hundred flows each packet meets its own
// access pipe cold, and Rust's own field order spread them over four lines.
#[repr(C, align(64))]
pub struct Link<P: Pkt> {
    pub loss: f64,
    /// None for a pipe or a drop-tail link: a FIFO whose departure times
    /// are computed on arrival, with no event per transmission.
    qdisc: Option<Box<dyn Qdisc<P>>>,
    /// Pipe or drop-tail: when the transmitter is next free.
    free_at: Nanos,
    pub rate_bps: u64,
    pub delay: Nanos,
    /// Packets and bytes that finished serialisation (a pipe counts them
    /// when it takes them; a drop-tail link when a later call finds them
    /// gone: read them with [`Link::sent`]).
    tx_pkts: u64,
    tx_bytes: u64,
    /// Packets propagating (a pipe's and a drop-tail link's: also those
    /// still queued), with their arrival times.
    line: VecDeque<(Nanos, P)>,
    /// A drop-tail link's buffer and what it has not finished sending.
    drop_tail: Option<Box<DropTail>>,
    /// Most extra propagation delay per packet (0: none).
    jitter: Nanos,
    /// Jitter or stalls: one test per packet for both.
    impaired: bool,
    /// Pauses of the far end (None: none); beside `jitter` and `line`, which
    /// every arrival reads anyway.
    stalls: Option<Box<Stalls>>,
    rng: Rng,
    /// Packets lost to the random loss model.
    pub random_losses: u64,
    /// Packet being serialised.
    on_wire: Option<P>,
    /// The jitter's draws: a stream of its own, so that giving a link
    /// jitter leaves its loss model's sequence of draws as it was.
    jitter_rng: Rng,
}

/// A link whose far end pauses now and then: pauses of exponentially
/// distributed length (mean `length`) separated by exponentially distributed
/// times (mean `every`, from one pause's end to the next one's start); a
/// packet that reaches the far end during one is delivered when it ends,
/// with everything else that arrived meanwhile (a host or a virtual machine
/// not scheduled for a while, a receiver that takes a batch of segments at
/// once). Drawn lazily in arrival order from a stream of its own, the
/// first pause an exponential gap after the first arrival: the emulator's
/// clock starts at the machine's uptime, not at 0, and drawing the pauses
/// of hours before it would hold up its first packet.
pub struct Stalls {
    mean_gap: f64,
    mean_len: f64,
    rng: Rng,
    start: Nanos,
    end: Nanos,
    begun: bool,
    /// Another, independent pause process of the same far end, applied
    /// first (`Link::with_more_stalls`).
    also: Option<Box<Stalls>>,
}

impl Stalls {
    pub fn new(mean_gap: Nanos, mean_len: Nanos, rng: Rng) -> Stalls {
        Stalls { mean_gap: mean_gap as f64, mean_len: mean_len as f64, rng, start: 0, end: 0, begun: false, also: None }
    }

    fn exp(&mut self, mean: f64) -> Nanos {
        // 1 - u is in (0, 1]: its log is finite.
        (-(1.0 - self.rng.next_f64()).ln() * mean) as Nanos
    }

    fn draw_after(&mut self, t: Nanos) {
        self.start = t + self.exp(self.mean_gap);
        self.end = self.start + self.exp(self.mean_len);
    }

    /// When a packet reaching the far end at `at` is delivered (`at` never
    /// decreases from one call to the next); the simulator's paused sender
    /// hosts ask it when something due at `at` runs.
    pub fn deliver_at(&mut self, at: Nanos) -> Nanos {
        // Held by the other processes first, then by this one: a packet
        // leaves when none pauses. What comes out keeps its order.
        let at = match self.also.as_mut() {
            Some(s) => s.deliver_at(at),
            None => at,
        };
        if !self.begun {
            self.begun = true;
            self.draw_after(at);
        }
        while self.end <= at {
            let end = self.end;
            self.draw_after(end);
        }
        if at >= self.start {
            self.end
        } else {
            at
        }
    }
}

/// A drop-tail FIFO's queue as times: the packets it took and has not
/// finished sending, oldest first, with when each starts and ends its
/// serialisation. Only the first can be on the wire (the next starts when
/// it ends), so the backlog is the rest, or all of them before the first
/// starts.
struct DropTail {
    limit: Limit,
    unsent: VecDeque<Departure>,
    /// Bytes of `unsent`.
    bytes: u64,
    stats: QdiscStats,
}

#[derive(Clone, Copy)]
struct Departure {
    start: Nanos,
    done: Nanos,
    bytes: u32,
    /// It queued: its serialisation starts when the one before it ends
    /// (an event of the link), not when it arrived.
    waited: bool,
}

impl DropTail {
    /// The bytes and packets still queued (not yet started) at `now`. With
    /// `before_events`, as they were before the link's own events at `now`
    /// (a packet that waited and starts at `now` is still queued), else
    /// after them.
    fn backlog(&self, now: Nanos, before_events: bool) -> (u64, u64) {
        let (mut pkts, mut bytes) = (self.unsent.len() as u64, self.bytes);
        for d in &self.unsent {
            let on_wire = d.start < now || (d.start == now && !(before_events && d.waited));
            if !on_wire {
                break;
            }
            pkts -= 1;
            bytes -= d.bytes as u64;
        }
        (bytes, pkts)
    }
}

impl<P: Pkt> Link<P> {
    pub fn new(rate_bps: u64, delay: Nanos, loss: f64, seed: Rng, qdisc: Box<dyn Qdisc<P>>) -> Link<P> {
        Link::build(rate_bps, delay, loss, seed, Some(qdisc))
    }

    /// A link with an unbounded FIFO and no loss (a fast access link): the
    /// same timing as `new` with an infinite FIFO, at half the events.
    pub fn pipe(rate_bps: u64, delay: Nanos) -> Link<P> {
        Link::build(rate_bps, delay, 0.0, Rng::new(0), None)
    }

    /// A link with a drop-tail FIFO of `limit` (Linux's pfifo or bfifo): the
    /// same timing, drops and counters as `new` with a `Fifo`, without an
    /// event per transmission.
    pub fn drop_tail(rate_bps: u64, delay: Nanos, loss: f64, rng: Rng, limit: Limit) -> Link<P> {
        let mut l = Link::build(rate_bps, delay, loss, rng, None);
        l.drop_tail =
            Some(Box::new(DropTail { limit, unsent: VecDeque::new(), bytes: 0, stats: QdiscStats::default() }));
        l
    }

    fn build(rate_bps: u64, delay: Nanos, loss: f64, rng: Rng, qdisc: Option<Box<dyn Qdisc<P>>>) -> Link<P> {
        assert!(rate_bps > 0, "link rate must be positive");
        Link {
            rate_bps,
            delay,
            loss,
            rng,
            qdisc,
            free_at: 0,
            on_wire: None,
            jitter: 0,
            impaired: false,
            jitter_rng: Rng::new(0),
            stalls: None,
            // Grown on demand: a network of thousands of mostly idle pipes
            // would otherwise cycle each packet through a ring of 1024 slots
            // (a cache miss per packet, and the ring's pages resident).
            line: VecDeque::new(),
            random_losses: 0,
            tx_pkts: 0,
            tx_bytes: 0,
            drop_tail: None,
        }
    }

    /// Each packet's propagation delay gains a draw of `rng` uniform in
    /// [0, jitter], order kept.
    pub fn with_jitter(mut self, jitter: Nanos, rng: Rng) -> Link<P> {
        self.jitter = jitter;
        self.jitter_rng = rng;
        self.impaired = self.jitter != 0 || self.stalls.is_some();
        self
    }

    /// The far end pauses now and then ([`Stalls`]); a mean gap of 0 gives none.
    pub fn with_stalls(mut self, mean_gap: Nanos, mean_len: Nanos, rng: Rng) -> Link<P> {
        self.stalls = (mean_gap > 0 && mean_len > 0).then(|| Box::new(Stalls::new(mean_gap, mean_len, rng)));
        self.impaired = self.jitter != 0 || self.stalls.is_some();
        self
    }

    /// More pause processes of the far end, each `(mean gap, mean length)`
    /// drawn from `rngs`' streams, independent of the first and of each
    /// other: pauses of two scales (a busy host's short and long ones)
    /// overlay. Without a first process (`with_stalls`) they start one.
    pub fn with_more_stalls(mut self, more: &[(Nanos, Nanos)], mut rngs: impl FnMut(usize) -> Rng) -> Link<P> {
        for (k, &(gap, len)) in more.iter().enumerate() {
            if gap == 0 || len == 0 {
                continue;
            }
            let mut s = Box::new(Stalls::new(gap, len, rngs(k)));
            s.also = self.stalls.take();
            self.stalls = Some(s);
        }
        self.impaired = self.jitter != 0 || self.stalls.is_some();
        self
    }

    /// When a packet leaving the transmitter at `done` reaches the far end.
    #[inline]
    fn arrival(&mut self, done: Nanos) -> Nanos {
        let at = done + self.delay;
        if !self.impaired {
            return at;
        }
        self.impaired(at)
    }

    #[cold]
    #[inline(never)]
    fn impaired(&mut self, at: Nanos) -> Nanos {
        let at = if self.jitter == 0 { at } else { self.jittered(at) };
        match self.stalls.as_mut() {
            Some(s) => s.deliver_at(at),
            None => at,
        }
    }

    // Out of line: most links have no jitter, so the draw stays out of the
    // code of every transmission.
    #[cold]
    #[inline(never)]
    fn jittered(&mut self, at: Nanos) -> Nanos {
        let draw = (self.jitter_rng.next_f64() * (self.jitter + 1) as f64) as Nanos;
        // Not before the packet ahead of it in the line (none: it has arrived).
        (at + draw).max(self.line.back().map_or(0, |(t, _)| *t))
    }

    pub fn offer(&mut self, p: P, now: Nanos) -> Offered {
        if self.rng.chance(self.loss) {
            self.random_losses += 1;
            return Offered::Lost;
        }
        let Some(qdisc) = self.qdisc.as_mut() else {
            let start = self.free_at.max(now);
            let done = start + tx_time(p.wire_bytes(), self.rate_bps);
            match self.drop_tail.as_deref_mut() {
                None => {
                    self.tx_pkts += 1;
                    self.tx_bytes += p.wire_bytes() as u64;
                }
                Some(q) => {
                    // What finished by now is sent; what starts now is on the wire.
                    while let Some(d) = q.unsent.front().filter(|d| d.done <= now) {
                        self.tx_pkts += 1;
                        self.tx_bytes += d.bytes as u64;
                        q.bytes -= d.bytes as u64;
                        q.unsent.pop_front();
                    }
                    let (bytes, pkts) = q.backlog(now, false);
                    if !q.limit.admits(bytes, pkts, p.wire_bytes() as u64) {
                        q.stats.dropped += 1;
                        return Offered::Dropped;
                    }
                    q.stats.enqueued += 1;
                    q.bytes += p.wire_bytes() as u64;
                    q.unsent.push_back(Departure { start, done, bytes: p.wire_bytes(), waited: start > now });
                }
            }
            self.free_at = done;
            let was_empty = self.line.is_empty();
            let at = self.arrival(done);
            self.line.push_back((at, p));
            return Offered::InLine(was_empty.then_some(at));
        };
        if self.on_wire.is_some() {
            return match qdisc.enqueue(p, now) {
                Ok(()) => Offered::Queued,
                Err(_) => Offered::Dropped,
            };
        }
        match qdisc.enqueue_dequeue(p, now) {
            Ok(Some(p)) => Offered::TxStarted(self.start(p, now)),
            // A discipline may hold a packet back (shaping); nothing to do yet.
            Ok(None) => Offered::Queued,
            Err(_) => Offered::Dropped,
        }
    }

    /// Start serialising `p`; when it will have left.
    fn start(&mut self, p: P, now: Nanos) -> Nanos {
        let done = now + tx_time(p.wire_bytes(), self.rate_bps);
        self.on_wire = Some(p);
        done
    }

    fn start_next(&mut self, now: Nanos) -> Option<Nanos> {
        let p = self.qdisc.as_mut()?.dequeue(now)?;
        Some(self.start(p, now))
    }

    pub fn tx_done(&mut self, now: Nanos) -> TxDone {
        let p = self.on_wire.take().expect("tx_done with nothing on the wire");
        self.tx_pkts += 1;
        self.tx_bytes += p.wire_bytes() as u64;
        let was_empty = self.line.is_empty();
        let at = self.arrival(now);
        self.line.push_back((at, p));
        TxDone { arrival: was_empty.then_some(at), next_tx_done: self.start_next(now) }
    }

    /// The packet reaching the far end now, and when the next one will.
    pub fn arrive(&mut self) -> (P, Option<Nanos>) {
        let (_, p) = self.line.pop_front().expect("arrive with an empty line");
        if self.line.is_empty() {
            // Restart the ring at its first slot: popping alone moves its
            // start on, and an access pipe (mostly one packet at a time)
            // would write each packet to a slot untouched since the ring
            // last wrapped around, a cache miss per packet with many flows.
            self.line.clear();
        }
        (p, self.line.front().map(|(t, _)| *t))
    }

    /// Does the link queue (a discipline or a drop-tail FIFO), rather than
    /// being a pipe?
    pub fn queues(&self) -> bool {
        self.qdisc.is_some() || self.drop_tail.is_some()
    }

    /// Packets and bytes that finished serialisation before `before` (as
    /// the link's own events at `before` have not yet run); an event-driven
    /// link counts those its `tx_done` calls have seen.
    pub fn sent(&self, before: Nanos) -> (u64, u64) {
        let (mut pkts, mut bytes) = (self.tx_pkts, self.tx_bytes);
        if let Some(q) = self.drop_tail.as_deref() {
            for d in q.unsent.iter().take_while(|d| d.done < before) {
                pkts += 1;
                bytes += d.bytes as u64;
            }
        }
        (pkts, bytes)
    }

    /// The queue at `now` (before the link's own events at `now` run):
    /// backlog in bytes and packets, and the discipline's counters; None
    /// for a pipe.
    pub fn queue(&self, now: Nanos) -> Option<QueueReading> {
        if let Some(q) = self.qdisc.as_deref() {
            return Some(QueueReading { backlog_bytes: q.backlog_bytes(), backlog_pkts: q.backlog_pkts(), stats: q.stats() });
        }
        let q = self.drop_tail.as_deref()?;
        let (backlog_bytes, backlog_pkts) = q.backlog(now, true);
        Some(QueueReading { backlog_bytes, backlog_pkts, stats: q.stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::testutil::P;
    use crate::qdisc::{Fifo, Limit};

    fn link(rate: u64, delay: Nanos, pkts: u64) -> Link<P> {
        Link::new(rate, delay, 0.0, Rng::new(1), Box::new(Fifo::new(Limit::Packets(pkts))))
    }

    #[test]
    fn serialisation_then_propagation() {
        // 1500 B at 100 Mbit/s = 120 us; 1 ms propagation.
        let mut l = link(100_000_000, 1_000_000, 10);
        assert_eq!(l.offer(P(1500, 1), 0), Offered::TxStarted(120_000));
        assert_eq!(l.offer(P(1500, 2), 10), Offered::Queued);
        let d = l.tx_done(120_000);
        assert_eq!(d, TxDone { arrival: Some(1_120_000), next_tx_done: Some(240_000) });
        let d = l.tx_done(240_000);
        assert_eq!(d, TxDone { arrival: None, next_tx_done: None });
        assert_eq!(l.arrive(), (P(1500, 1), Some(1_240_000)));
        assert_eq!(l.arrive(), (P(1500, 2), None));
        assert_eq!(l.sent(Nanos::MAX), (2, 3000));
    }

    /// The drop-tail link against an event-driven link with a `Fifo`, driven
    /// as the simulator drives it (its transmitter's events at an instant
    /// before the packets arriving then): the same packets dropped, the same
    /// arrival times, and the same backlog, counters and bytes sent read at
    /// every instant a packet arrives (before the link's events then).
    #[test]
    fn drop_tail_matches_an_event_driven_fifo() {
        for limit in [Limit::Packets(5), Limit::Bytes(6_000), Limit::Packets(0)] {
            let rate = 100_000_000;
            let mut ev = Link::new(rate, 1_000_000, 0.0, Rng::new(1), Box::new(Fifo::new(limit)));
            let mut dt: Link<P> = Link::drop_tail(rate, 1_000_000, 0.0, Rng::new(1), limit);
            let mut tx_due: Option<Nanos> = None;
            let (mut t, mut last_t, mut x, mut drops) = (0u64, 0u64, 0x9E37_79B9_7F4A_7C15u64, 0);
            for i in 0..5_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Bursts at one instant, gaps shorter and longer than a packet's 120 us.
                t += [0, 0, 30_000, 60_000, 120_000, 119_999, 250_000, 1_000_000][(x % 8) as usize];
                let size = [64, 1500, 1500, 700][((x >> 8) % 4) as usize];
                while let Some(d) = tx_due.filter(|&d| d < t) {
                    tx_due = ev.tx_done(d).next_tx_done;
                }
                // Read once an instant, before its events (as a sample is).
                if i == 0 || t != last_t {
                    assert_eq!(ev.queue(t), dt.queue(t), "reading at {t} ns (packet {i})");
                    assert_eq!(ev.sent(t), dt.sent(t), "sent before {t} ns (packet {i})");
                }
                last_t = t;
                while let Some(d) = tx_due.filter(|&d| d == t) {
                    tx_due = ev.tx_done(d).next_tx_done;
                }
                let kept = match ev.offer(P(size, i), t) {
                    Offered::TxStarted(d) => {
                        tx_due = Some(d);
                        true
                    }
                    Offered::Queued => true,
                    other => {
                        assert_eq!(other, Offered::Dropped);
                        false
                    }
                };
                let got = dt.offer(P(size, i), t);
                assert_eq!(got == Offered::Dropped, !kept, "packet {i} at {t} ns: {got:?}");
                drops += !kept as u32;
            }
            while let Some(d) = tx_due {
                tx_due = ev.tx_done(d).next_tx_done;
            }
            assert_eq!(ev.line, dt.line, "the same packets reach the far end at the same times");
            assert_eq!(ev.sent(Nanos::MAX), dt.sent(Nanos::MAX));
            assert_eq!(ev.queue(Nanos::MAX), dt.queue(Nanos::MAX));
            // The mix does what it is for: drops, and (but for the zero buffer) most packets through.
            assert!(drops > 0, "{limit:?}");
            assert!(limit == Limit::Packets(0) || dt.line.len() > 3_000, "{limit:?}: {}", dt.line.len());
        }
    }

    #[test]
    fn pipe_matches_an_unbounded_fifo() {
        let mut fifo = link(100_000_000, 1_000_000, 1 << 20);
        let mut pipe: Link<P> = Link::pipe(100_000_000, 1_000_000);
        // Offers at 0, 10 and 500 us; each 1500 B takes 120 us.
        let mut fifo_arrivals = vec![];
        let mut t_done = vec![];
        for (i, t) in [0u64, 10_000, 500_000].iter().enumerate() {
            // Drive the FIFO's transmitter up to this time.
            while let Some(&d) = t_done.first() {
                if d > *t {
                    break;
                }
                t_done.remove(0);
                let r = fifo.tx_done(d);
                if let Some(n) = r.next_tx_done {
                    t_done.push(n);
                }
            }
            if let Offered::TxStarted(d) = fifo.offer(P(1500, i as u64), *t) {
                t_done.push(d);
            }
            let _ = pipe.offer(P(1500, i as u64), *t);
        }
        while let Some(d) = t_done.first().copied() {
            t_done.remove(0);
            if let Some(n) = fifo.tx_done(d).next_tx_done {
                t_done.push(n);
            }
        }
        for _ in 0..3 {
            fifo_arrivals.push(fifo.line.front().unwrap().0);
            let a = pipe.line.front().unwrap().0;
            assert_eq!(fifo_arrivals.last().copied(), Some(a));
            fifo.arrive();
            pipe.arrive();
        }
        assert_eq!(fifo_arrivals, vec![1_120_000, 1_240_000, 1_620_000]);
    }

    #[test]
    fn jitter_delays_within_its_bound_and_keeps_order() {
        // 1500 B at 100 Mbit/s = 120 us; 1 ms propagation; up to 500 us more.
        let jitter = 500_000;
        let mut l = link(100_000_000, 1_000_000, 1 << 20).with_jitter(jitter, Rng::derive(3, 9));
        let mut pipe: Link<P> = Link::pipe(100_000_000, 1_000_000).with_jitter(jitter, Rng::derive(3, 9));
        let (mut extra, mut last, mut overtaken) = (vec![], 0, 0);
        // Packets 2 ms apart: each finds the line empty, so its delay is its own draw.
        for i in 0..4000u64 {
            let t = i * 2_000_000;
            let Offered::TxStarted(done) = l.offer(P(1500, i), t) else { panic!("idle transmitter") };
            let at = l.tx_done(done).arrival.expect("an empty line");
            assert_eq!(l.arrive().0, P(1500, i));
            extra.push(at - done - 1_000_000);
            let Offered::InLine(Some(pat)) = pipe.offer(P(1500, i), t) else { panic!("an empty line") };
            assert_eq!(pat, at, "a pipe draws as a queueing link does");
            pipe.arrive();
            last = at;
        }
        assert!(extra.iter().all(|&e| e <= jitter));
        let mean = extra.iter().sum::<u64>() as f64 / extra.len() as f64;
        assert!((0.45..0.55).contains(&(mean / jitter as f64)), "mean extra delay {mean} ns");
        assert!(*extra.iter().max().unwrap() > jitter * 99 / 100 && *extra.iter().min().unwrap() < jitter / 100);
        // Back to back (120 us apart, jitter 500 us): draws would reorder; the line does not.
        let mut times = vec![];
        let mut d = match l.offer(P(1500, 0), last + 10_000_000) {
            Offered::TxStarted(d) => d,
            o => panic!("{o:?}"),
        };
        for i in 1..200u64 {
            assert_eq!(l.offer(P(1500, i), d - 1), Offered::Queued);
            let r = l.tx_done(d);
            d = r.next_tx_done.expect("queued packet starts");
        }
        l.tx_done(d);
        for i in 0..200u64 {
            let head = l.line.front().unwrap().0;
            let (p, _) = l.arrive();
            assert_eq!(p, P(1500, i), "packets arrive in the order sent");
            overtaken += times.last().is_some_and(|&t| head < t) as u32;
            times.push(head);
        }
        assert_eq!(overtaken, 0);
        assert!(times.windows(2).any(|w| w[1] - w[0] != 120_000), "the jitter changed the spacing");
    }

    /// Two overlaid pause processes (short and frequent, long and rare)
    /// hold a packet while either pauses: the share held is about
    /// 1 - (1 - p1)(1 - p2), each p the share of time its process pauses;
    /// never early, never reordered; and the first process alone is as
    /// `with_stalls` alone.
    #[test]
    fn overlaid_stalls_hold_while_either_pauses() {
        let short = (1_000_000u64, 300_000u64); // every 1 ms, 0.3 ms
        let long = (20_000_000u64, 2_000_000u64); // every 20 ms, 2 ms
        let build = |more: &[(Nanos, Nanos)]| {
            Link::<P>::pipe(10_000_000_000, 0)
                .with_stalls(short.0, short.1, Rng::derive(5, 1))
                .with_more_stalls(more, |k| Rng::derive(5, 2 + k as u64))
        };
        let held_share = |mut l: Link<P>| {
            let (n, mut held, mut last) = (300_000u64, 0u64, 0u64);
            for i in 0..n {
                let t = i * 100_000; // one packet every 100 us, 30 s
                l.offer(P(100, i), t);
                let (at, _) = *l.line.back().unwrap();
                let on_time = t + tx_time(100, 10_000_000_000);
                assert!(at >= on_time && at >= last, "never early, never reordered");
                held += (at > on_time) as u64;
                last = at;
                assert_eq!(l.arrive().0, P(100, i));
            }
            held as f64 / n as f64
        };
        let p = |(e, len): (u64, u64)| len as f64 / (e + len) as f64;
        let alone = held_share(build(&[]));
        assert!((alone / p(short) - 1.0).abs() < 0.1, "short alone {alone}");
        let both = held_share(build(&[long]));
        let expect = 1.0 - (1.0 - p(short)) * (1.0 - p(long));
        assert!((both / expect - 1.0).abs() < 0.1, "both {both}, expected about {expect}");
        assert!(both > alone + 0.05);
    }

    /// A stalled far end delivers what reaches it during a pause when the
    /// pause ends, in order; packets outside pauses are on time; pauses
    /// come about every `every` and last about `length` on average.
    #[test]
    fn stalls_hold_deliveries_until_the_pause_ends() {
        let (every, length) = (20_000_000u64, 2_000_000u64); // 20 ms, 2 ms
        let mut l: Link<P> = Link::pipe(10_000_000_000, 1_000_000).with_stalls(every, length, Rng::derive(3, 11));
        let (mut held, mut last, mut pauses, mut paused_ns) = (0u64, 0u64, 0u64, 0u64);
        let n = 500_000u64;
        // One small packet every 100 us over 50 s (about 2,300 pauses): each
        // meets an idle transmitter.
        for i in 0..n {
            let t = i * 100_000;
            let Offered::InLine(_) = l.offer(P(100, i), t) else { panic!("a pipe") };
            let (at, _) = *l.line.back().unwrap();
            let on_time = t + tx_time(100, 10_000_000_000) + 1_000_000;
            assert!(at >= on_time && at >= last, "never early, never reordered");
            if at > on_time {
                held += 1;
                if at != last {
                    pauses += 1; // a new pause's end
                    paused_ns += at - on_time; // at least this long
                }
            }
            last = at;
            assert_eq!(l.arrive().0, P(100, i));
        }
        let frac = held as f64 / n as f64;
        let expect = length as f64 / (every + length) as f64;
        assert!((frac / expect - 1.0).abs() < 0.1, "held {frac:.4}, expected about {expect:.4}");
        // Pauses shorter than the packets' spacing catch none of them.
        let rate = pauses as f64 / 50.0;
        // (an exponential pause outlasts a uniform wait in [0, s] with probability (L/s)(1 - e^(-s/L)))
        let (spacing, l) = (100_000.0, length as f64);
        let caught = l / spacing * (1.0 - (-spacing / l).exp());
        let expect_rate = 1e9 / (every + length) as f64 * caught;
        assert!((rate / expect_rate - 1.0).abs() < 0.1, "{rate} pauses/s, expected about {expect_rate}");
        // The first packet a pause holds waits the rest of it, whose mean is
        // the whole pause's: an exponential has no memory.
        let mean_wait = paused_ns as f64 / pauses as f64;
        assert!((mean_wait / length as f64 - 1.0).abs() < 0.1, "mean first wait {mean_wait} ns");
    }

    /// The pauses start from the first arrival, whatever the clock reads
    /// then (the emulator's is the machine's uptime): the same draws, shifted.
    #[test]
    fn stalls_start_at_the_first_arrival() {
        let times = |t0: Nanos| {
            let mut l: Link<P> = Link::pipe(10_000_000_000, 0).with_stalls(5_000_000, 1_000_000, Rng::derive(7, 3));
            (0..20_000u64)
                .map(|i| {
                    let _ = l.offer(P(100, i), t0 + i * 100_000);
                    let at = l.line.back().unwrap().0 - t0;
                    l.arrive();
                    at
                })
                .collect::<Vec<_>>()
        };
        let (a, b) = (times(0), times(50_000 * 1_000_000_000)); // 0 and 50,000 s of uptime
        assert_eq!(a, b);
        assert!(a.iter().enumerate().any(|(i, &at)| at > i as u64 * 100_000 + 80), "some held");
    }

    #[test]
    fn no_stalls_when_either_mean_is_zero() {
        for (every, length) in [(0, 2_000_000), (20_000_000, 0)] {
            let l: Link<P> = Link::pipe(1_000_000_000, 0).with_stalls(every, length, Rng::new(1));
            assert!(l.stalls.is_none());
        }
    }

    #[test]
    fn zero_jitter_draws_nothing() {
        let mut a = link(100_000_000, 1_000_000, 10);
        let mut b = link(100_000_000, 1_000_000, 10).with_jitter(0, Rng::new(5));
        for i in 0..5u64 {
            let (Offered::TxStarted(da), Offered::TxStarted(db)) = (a.offer(P(1500, i), i * 200_000), b.offer(P(1500, i), i * 200_000)) else {
                panic!("idle transmitters")
            };
            assert_eq!(a.tx_done(da), b.tx_done(db));
            assert_eq!(a.arrive(), b.arrive());
        }
    }

    #[test]
    fn random_loss_rate() {
        let mut l: Link<P> = Link::new(1_000_000_000, 0, 0.02, Rng::derive(9, 1), Box::new(Fifo::new(Limit::Packets(1 << 30))));
        for i in 0..50_000u64 {
            if let Offered::TxStarted(t) = l.offer(P(100, i), 0) {
                let _ = t;
            }
        }
        let rate = l.random_losses as f64 / 50_000.0;
        assert!((0.017..0.023).contains(&rate), "loss rate {rate}");
    }
}
