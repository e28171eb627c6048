//! A one-way link: random loss at its input, a queue discipline, a
//! transmitter of fixed rate, then a propagation delay. The owner drives it
//! with three calls and schedules the times they return ([`Due`]):
//!
//! - [`Link::offer`] a packet arriving at the link's input;
//! - [`Link::arrive`] when the head of the propagation line reaches the far end;
//! - [`Link::wake`] when the transmitter asked for a look;
//!
//! and [`Link::settle`] before reading the queue ([`Link::queue`],
//! [`Link::sent`]).
//!
//! Packets in propagation keep FIFO order, so only the head needs a timer.
//!
//! The transmitter has no event per packet (docs/sim-model.md, "No event
//! per transmission"):
//!
//! - A drop-tail FIFO ([`Link::drop_tail`]) sends its packets in the order
//!   it took them, each when the one ahead has gone, so the link computes a
//!   packet's departure when it takes it, as a pipe does, and keeps only
//!   the times (not the packets) to know its backlog and what it has sent.
//! - Another discipline decides what to send next when the packet ahead
//!   has left, from what had arrived by then; the link makes that decision
//!   when it is next called at or after that moment (an arrival, a wake, a
//!   reading), with the moment's time, and puts the packet into the line
//!   at once. While packets wait, a wake at the end of the current
//!   transmission plus the propagation delay makes sure each decided packet
//!   is in the line before it can reach the far end: a busy link costs a
//!   wake per delay, not an event per packet.
//!
//! At one instant the transmitter moves on (its next packet starts, or the
//! discipline finds its queue empty) before an arriving packet is judged;
//! a reading at that instant sees the queue before both.
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

/// What became of an offered packet ([`Link::offer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// Lost by the random loss model.
    Lost,
    /// Dropped by the queue discipline (or the drop-tail buffer) on arrival.
    Dropped,
    /// Taken: queued, or already on its way (its departure computed).
    Taken,
}

/// What the owner must schedule after a call: the far end's next arrival
/// (the propagation line was empty: call [`Link::arrive`] then) and the
/// transmitter's next look (call [`Link::wake`] then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Due {
    pub arrive: Option<Nanos>,
    pub wake: Option<Nanos>,
}

/// The outcome of [`Link::offer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Offered {
    pub fate: Fate,
    pub due: Due,
}

/// A queueing link's queue at one moment ([`Link::queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueReading {
    pub backlog_bytes: u64,
    pub backlog_pkts: u64,
    pub stats: QdiscStats,
}

// Hot fields first, in one 64-byte line (a pipe's offer reads and writes
// only these, and `line` and `drop_tail` on the next): with a hundred
// flows each packet meets its own access pipe cold, and Rust's own field
// order spread them over four lines.
#[repr(C, align(64))]
pub struct Link<P: Pkt> {
    pub loss: f64,
    /// None for a pipe or a drop-tail link: a FIFO whose departure times
    /// are computed on arrival.
    qdisc: Option<Box<dyn Qdisc<P>>>,
    /// When the transmitter is next free (the end of the last transmission).
    free_at: Nanos,
    /// The last packet size serialised and its time (`tx_ns`).
    memo: (u32, Nanos),
    pub rate_bps: u64,
    pub delay: Nanos,
    /// Packets and bytes that finished serialisation (a pipe counts them
    /// when it takes them, other links when a later call finds them gone:
    /// read them with [`Link::sent`]).
    tx_pkts: u64,
    tx_bytes: u64,
    /// Packets on their way (being serialised, propagating, and for a pipe
    /// or a drop-tail link also those still queued), with their arrival
    /// times at the far end.
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
    /// A discipline's transmitter: the transmission ending at `free_at`
    /// has not been followed up yet (counted, and the discipline asked for
    /// the next packet at its end); its bytes.
    owed: bool,
    wire_bytes: u32,
    /// The owner has a `wake` call scheduled.
    wake_pending: bool,
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
            memo: (0, 0),
            owed: false,
            wire_bytes: 0,
            wake_pending: false,
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

    /// How long `bytes` take to serialise: the last size's time again
    /// spares a division (most packets on a link are the size of the one
    /// before).
    #[inline]
    fn tx_ns(&mut self, bytes: u32) -> Nanos {
        if bytes != self.memo.0 {
            self.memo = (bytes, tx_time(bytes, self.rate_bps));
        }
        self.memo.1
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

    #[inline]
    pub fn offer(&mut self, p: P, now: Nanos) -> Offered {
        if self.rng.chance(self.loss) {
            self.random_losses += 1;
            return Offered { fate: Fate::Lost, due: Due::default() };
        }
        if self.qdisc.is_none() {
            return self.offer_in_line(p, now);
        }
        self.offer_to_discipline(p, now)
    }

    // Out of line: inlined, it made every pipe's and drop-tail link's offer
    // (inlined where the owner offers) dearer, about 1 % of the headline.
    #[inline(never)]
    fn offer_to_discipline(&mut self, p: P, now: Nanos) -> Offered {
        // The transmitter's events at `now` come before the arrival.
        let mut arrive = self.catch_up(now, true);
        let qdisc = self.qdisc.as_mut().expect("a discipline");
        let fate = if self.owed {
            match qdisc.enqueue(p, now) {
                Ok(()) => Fate::Taken,
                Err(_) => Fate::Dropped,
            }
        } else {
            match qdisc.enqueue_dequeue(p, now) {
                Ok(Some(p)) => {
                    arrive = arrive.or(self.start(p, now));
                    Fate::Taken
                }
                // A discipline may hold a packet back (shaping); nothing to do yet.
                Ok(None) => Fate::Taken,
                Err(_) => Fate::Dropped,
            }
        };
        Offered { fate, due: Due { arrive, wake: self.want_wake() } }
    }

    /// A pipe's or a drop-tail link's offer: the departure computed now.
    #[inline]
    fn offer_in_line(&mut self, p: P, now: Nanos) -> Offered {
        let start = self.free_at.max(now);
        let done = start + self.tx_ns(p.wire_bytes());
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
                    return Offered { fate: Fate::Dropped, due: Due::default() };
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
        Offered { fate: Fate::Taken, due: Due { arrive: was_empty.then_some(at), wake: None } }
    }

    /// Serialise `p` from `at`: it goes into the propagation line with its
    /// arrival time at once (a discipline's link, too: what it sends is
    /// fixed once it is dequeued). The arrival to schedule if the line was
    /// empty.
    #[inline]
    fn start(&mut self, p: P, at: Nanos) -> Option<Nanos> {
        let done = at + self.tx_ns(p.wire_bytes());
        self.free_at = done;
        self.owed = true;
        self.wire_bytes = p.wire_bytes();
        let was_empty = self.line.is_empty();
        let arrival = self.arrival(done);
        self.line.push_back((arrival, p));
        was_empty.then_some(arrival)
    }

    /// Follow a discipline's transmitter up to `now` (and through `now`
    /// when `inclusive`): each transmission that ended is counted, and the
    /// discipline is asked for the next packet at the moment it ended, as
    /// an event at that moment would have. The arrival to schedule if the
    /// line was empty.
    fn catch_up(&mut self, now: Nanos, inclusive: bool) -> Option<Nanos> {
        let mut arrive = None;
        while self.owed && (self.free_at < now || (inclusive && self.free_at == now)) {
            let end = self.free_at;
            self.owed = false;
            self.tx_pkts += 1;
            self.tx_bytes += self.wire_bytes as u64;
            let Some(p) = self.qdisc.as_mut().and_then(|q| q.dequeue(end)) else { break };
            arrive = arrive.or(self.start(p, end));
        }
        arrive
    }

    /// When the owner must call `wake`, if it must and has no call
    /// scheduled: packets wait behind a transmission. Not before the next
    /// departure could reach the far end (its end plus the delay): until
    /// then the next offer follows the transmitter up, so a busy link costs
    /// a wake per propagation delay rather than an event per packet.
    fn want_wake(&mut self) -> Option<Nanos> {
        if self.wake_pending || !self.owed || self.qdisc.as_ref().is_none_or(|q| q.backlog_pkts() == 0) {
            return None;
        }
        self.wake_pending = true;
        Some(self.free_at + self.delay)
    }

    /// The call `Due::wake` asked for, at that time.
    pub fn wake(&mut self, now: Nanos) -> Due {
        self.wake_pending = false;
        let arrive = self.catch_up(now, true);
        Due { arrive, wake: self.want_wake() }
    }

    /// Bring a discipline's queue up to just before `now` (before the
    /// link's own events at `now`), for a reading of it; what to schedule.
    pub fn settle(&mut self, now: Nanos) -> Due {
        let arrive = self.catch_up(now, false);
        Due { arrive, wake: self.want_wake() }
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
    /// the link's own events at `before` have not yet run); a discipline's
    /// link counts only what it has followed up, so `settle(before)` first.
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
    /// backlog in bytes and packets, and the discipline's counters (a
    /// discipline's link needs `settle(now)` first); None for a pipe.
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
    use crate::qdisc::testutil::{port, P};
    use crate::qdisc::{Fifo, FqCodel, FqCodelParams};

    fn link(rate: u64, delay: Nanos, pkts: u64) -> Link<P> {
        Link::new(rate, delay, 0.0, Rng::new(1), Box::new(Fifo::new(Limit::Packets(pkts))))
    }

    /// The event-driven transmitter the links replace, to check them
    /// against: a discipline told when each transmission ends.
    struct Reference {
        q: Box<dyn Qdisc<P>>,
        rate: u64,
        delay: Nanos,
        /// The packet on the wire and when it will have left.
        on_wire: Option<(Nanos, P)>,
        line: Vec<(Nanos, P)>,
        sent: (u64, u64),
    }

    impl Reference {
        fn new(q: Box<dyn Qdisc<P>>, rate: u64, delay: Nanos) -> Reference {
            Reference { q, rate, delay, on_wire: None, line: Vec::new(), sent: (0, 0) }
        }

        fn start(&mut self, p: P, at: Nanos) {
            self.on_wire = Some((at + tx_time(p.0, self.rate), p));
        }

        /// Run the transmitter's events before `t`, or through `t`.
        fn run_to(&mut self, t: Nanos, inclusive: bool) {
            while let Some((done, p)) = self.on_wire.filter(|(d, _)| *d < t || (inclusive && *d == t)) {
                self.on_wire = None;
                self.sent = (self.sent.0 + 1, self.sent.1 + p.0 as u64);
                self.line.push((done + self.delay, p));
                if let Some(next) = self.q.dequeue(done) {
                    self.start(next, done);
                }
            }
        }

        /// Taken (else dropped), its own events at `t` first.
        fn offer(&mut self, p: P, t: Nanos) -> bool {
            self.run_to(t, true);
            if self.on_wire.is_some() {
                return self.q.enqueue(p, t).is_ok();
            }
            match self.q.enqueue_dequeue(p, t) {
                Ok(Some(p)) => {
                    self.start(p, t);
                    true
                }
                Ok(None) => true,
                Err(_) => false,
            }
        }

        fn reading(&self) -> QueueReading {
            QueueReading { backlog_bytes: self.q.backlog_bytes(), backlog_pkts: self.q.backlog_pkts(), stats: self.q.stats() }
        }
    }

    /// Each kind of queueing link against the event-driven transmitter with
    /// the same discipline, driven as the simulator drives them (their wakes
    /// when due; at one instant the transmitter's events before the packets
    /// arriving then): the same packets dropped; at every instant a packet
    /// arrives, the same backlog, counters and bytes sent (read before the
    /// events of that instant); every packet in the line before it can
    /// reach the far end; and in the end the same packets at the far end
    /// at the same times.
    #[test]
    fn links_match_the_event_driven_transmitter() {
        let (rate, delay) = (100_000_000, 1_000_000);
        let fq = || {
            // CoDel's times cut to a tenth, so that the overloads below outlast them.
            let p = FqCodelParams {
                mtu_bytes: 1500,
                quantum_bytes: 1500,
                target_ns: 500_000,
                interval_ns: 10_000_000,
                ..FqCodelParams::default()
            };
            FqCodel::<P>::new(&p, &port(rate, Limit::Packets(60)))
        };
        let fifo = |l| Box::new(Fifo::<P>::new(l));
        type Pair = (Link<P>, Reference);
        let cases: Vec<(&str, Box<dyn Fn() -> Pair>)> = vec![
            ("drop-tail, 5 packets", Box::new(move || {
                (Link::drop_tail(rate, delay, 0.0, Rng::new(1), Limit::Packets(5)), Reference::new(fifo(Limit::Packets(5)), rate, delay))
            })),
            ("drop-tail, 6000 bytes", Box::new(move || {
                (Link::drop_tail(rate, delay, 0.0, Rng::new(1), Limit::Bytes(6_000)), Reference::new(fifo(Limit::Bytes(6_000)), rate, delay))
            })),
            ("drop-tail, no buffer", Box::new(move || {
                (Link::drop_tail(rate, delay, 0.0, Rng::new(1), Limit::Packets(0)), Reference::new(fifo(Limit::Packets(0)), rate, delay))
            })),
            ("a Fifo discipline, 5 packets", Box::new(move || {
                (link(rate, delay, 5), Reference::new(fifo(Limit::Packets(5)), rate, delay))
            })),
            ("FQ-CoDel, 60 packets", Box::new(move || {
                (Link::new(rate, delay, 0.0, Rng::new(1), Box::new(fq())), Reference::new(Box::new(fq()), rate, delay))
            })),
            ("FQ-CoDel, no delay", Box::new(move || {
                (Link::new(rate, 0, 0.0, Rng::new(1), Box::new(fq())), Reference::new(Box::new(fq()), rate, 0))
            })),
        ];
        for (name, make) in &cases {
            let (mut l, mut r) = make();
            let mut wake: Option<Nanos> = None;
            let (mut t, mut x, mut drops, mut wakes) = (0u64, 0x9E37_79B9_7F4A_7C15u64, 0, 0);
            let note = |wake: &mut Option<Nanos>, due: Due| {
                if due.wake.is_some() {
                    assert!(wake.is_none(), "{name}: one wake at a time");
                    *wake = due.wake;
                }
            };
            // With the reference run through `now`: what reached the far end
            // is in the line, and nothing went in after it should have arrived.
            let mut lined = 0;
            let mut in_line = |l: &Link<P>, r: &Reference, now: Nanos| {
                let reached = r.line.iter().filter(|(a, _)| *a <= now).count();
                assert!(l.line.len() >= reached, "{name}: at {now} ns {reached} packets reached the far end, {} in the line", l.line.len());
                for (a, _) in l.line.iter().skip(lined) {
                    assert!(*a >= now, "{name}: a packet due at {a} ns went into the line at {now} ns");
                }
                lined = l.line.len();
            };
            for i in 0..6_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Bursts at one instant, gaps shorter and longer than a
                // packet's 120 us, and now and then long enough to drain;
                // every other 400 packets an overload (about 3x the rate).
                let gap = [0, 0, 30_000, 60_000, 120_000, 119_999, 250_000, 1_000_000][(x % 8) as usize];
                let gap = if (i / 400) % 2 == 1 { gap % 50_000 } else { gap };
                let gap = if (x >> 20) % 50 == 0 { 30_000_000 } else { gap };
                let size = [64, 1500, 1500, 700][((x >> 8) % 4) as usize];
                let p = P(size, (x >> 12) % 4);
                if gap > 0 || i == 0 {
                    t += gap;
                    while let Some(w) = wake.filter(|&w| w < t) {
                        wake = None;
                        wakes += 1;
                        note(&mut wake, l.wake(w));
                        r.run_to(w, true);
                        in_line(&l, &r, w);
                    }
                    // Read once an instant, before its events (as a sample is).
                    note(&mut wake, l.settle(t));
                    r.run_to(t, false);
                    assert_eq!(l.queue(t), Some(r.reading()), "{name}: reading at {t} ns (packet {i})");
                    assert_eq!(l.sent(t), r.sent, "{name}: sent before {t} ns (packet {i})");
                }
                let taken = r.offer(p, t);
                let o = l.offer(p, t);
                assert_eq!(o.fate == Fate::Taken, taken, "{name}: packet {i} at {t} ns: {o:?}");
                drops += !taken as u32;
                note(&mut wake, o.due);
                in_line(&l, &r, t);
            }
            while let Some(w) = wake.take() {
                wakes += 1;
                note(&mut wake, l.wake(w));
                r.run_to(w, true);
                in_line(&l, &r, w);
            }
            r.run_to(Nanos::MAX, false);
            l.settle(Nanos::MAX);
            assert_eq!(l.line.iter().copied().collect::<Vec<_>>(), r.line, "{name}: the same packets reach the far end at the same times");
            assert_eq!(l.sent(Nanos::MAX), r.sent, "{name}");
            assert_eq!(l.queue(Nanos::MAX), Some(r.reading()), "{name}");
            // The mix does what it is for: drops, and (but for the zero buffer) most packets through.
            assert!(r.reading().stats.dropped > 0 && r.reading().stats.dropped >= drops as u64, "{name}");
            assert!(name.contains("no buffer") || r.line.len() > 3_000, "{name}: {} through", r.line.len());
            if l.qdisc.is_some() {
                assert!(wakes > 10, "{name}: {wakes} wakes");
            }
        }
    }

    #[test]
    fn serialisation_then_propagation() {
        // 1500 B at 100 Mbit/s = 120 us; 1 ms propagation.
        let mut l = link(100_000_000, 1_000_000, 10);
        // Idle: on its way at once, at the far end 120 us + 1 ms later.
        let o = l.offer(P(1500, 1), 0);
        assert_eq!(o, Offered { fate: Fate::Taken, due: Due { arrive: Some(1_120_000), wake: None } });
        // Behind it: a wake when its departure (at 120 us) could next reach the far end.
        let o = l.offer(P(1500, 2), 10);
        assert_eq!(o, Offered { fate: Fate::Taken, due: Due { arrive: None, wake: Some(1_120_000) } });
        assert_eq!(l.queue(10).unwrap().backlog_pkts, 1);
        assert_eq!(l.wake(1_120_000), Due::default());
        assert_eq!(l.arrive(), (P(1500, 1), Some(1_240_000)));
        assert_eq!(l.arrive(), (P(1500, 2), None));
        assert_eq!(l.sent(Nanos::MAX), (2, 3000));
    }

    #[test]
    fn pipe_matches_an_unbounded_fifo() {
        let mut fifo = Reference::new(Box::new(Fifo::new(Limit::Packets(u64::MAX))), 100_000_000, 1_000_000);
        let mut pipe: Link<P> = Link::pipe(100_000_000, 1_000_000);
        // Offers at 0, 10 and 500 us; each 1500 B takes 120 us.
        for (i, t) in [0u64, 10_000, 500_000].iter().enumerate() {
            assert!(fifo.offer(P(1500, i as u64), *t));
            assert_eq!(pipe.offer(P(1500, i as u64), *t).fate, Fate::Taken);
        }
        fifo.run_to(Nanos::MAX, false);
        assert_eq!(pipe.line.iter().copied().collect::<Vec<_>>(), fifo.line);
        assert_eq!(fifo.line.iter().map(|(a, _)| *a).collect::<Vec<_>>(), vec![1_120_000, 1_240_000, 1_620_000]);
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
            let done = t + 120_000;
            let at = l.offer(P(1500, i), t).due.arrive.expect("an empty line");
            assert_eq!(l.arrive().0, P(1500, i));
            extra.push(at - done - 1_000_000);
            let pat = pipe.offer(P(1500, i), t).due.arrive.expect("an empty line");
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
        let t0 = last + 10_000_000;
        for i in 0..200u64 {
            assert_eq!(l.offer(P(1500, i), t0).fate, Fate::Taken);
        }
        l.settle(Nanos::MAX);
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
            assert_eq!(l.offer(P(100, i), t).fate, Fate::Taken);
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
            assert_eq!(a.offer(P(1500, i), i * 200_000), b.offer(P(1500, i), i * 200_000));
            assert_eq!(a.arrive(), b.arrive());
        }
    }

    #[test]
    fn random_loss_rate() {
        let mut l: Link<P> = Link::new(1_000_000_000, 0, 0.02, Rng::derive(9, 1), Box::new(Fifo::new(Limit::Packets(1 << 30))));
        let mut lost = 0;
        for i in 0..50_000u64 {
            lost += (l.offer(P(100, i), 0).fate == Fate::Lost) as u64;
        }
        let rate = l.random_losses as f64 / 50_000.0;
        assert_eq!(lost, l.random_losses);
        assert!((0.017..0.023).contains(&rate), "loss rate {rate}");
    }
}
