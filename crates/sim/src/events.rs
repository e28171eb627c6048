//! The event queue: a monotone radix heap. Events pop in (time, sequence)
//! order, exactly as a binary heap over that pair would pop them, because
//! no event is ever scheduled before the last one popped.
//!
//! Bucket `b > 0` holds the events whose time differs from the last popped
//! time first in bit `b - 1` (counting from 0); bucket 0 holds those at the
//! last popped time itself, in sequence order. When bucket 0 runs dry, the
//! lowest non-empty bucket is spread over the lower buckets around its
//! earliest time; each event moves down a few times at most over its life.
//! A lowest bucket holding one event (two pops in three on the bench's
//! dumbbells) gives it straight back instead.
//! Against `std::collections::BinaryHeap` this takes the per-event cost
//! from O(log n) sift steps with a cache miss each to a push onto a vector
//! (measured: bench/sim_speed.py, docs/sim-model.md §Speed).

use netcore::Nanos;

pub struct EventQueue<T> {
    /// Time of the last event popped.
    last: Nanos,
    /// Bucket 0, in sequence order, and the next index in it to pop.
    now: Vec<(Nanos, u64, T)>,
    head: usize,
    /// Buckets 1..=64 (index 0 here is bucket 1).
    buckets: Vec<Vec<(Nanos, u64, T)>>,
    /// Bit i set: bucket i + 1 is not empty.
    full: u64,
    len: usize,
    /// Sequence number of the last push: ties in time pop in push order.
    seq: u64,
}

impl<T: Copy> EventQueue<T> {
    pub fn new() -> EventQueue<T> {
        EventQueue { last: 0, now: Vec::new(), head: 0, buckets: (0..64).map(|_| Vec::new()).collect(), full: 0, len: 0, seq: 0 }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedule `ev` at `at` (not before the last event popped); events at
    /// the same time pop in the order they were pushed.
    pub fn push(&mut self, at: Nanos, ev: T) {
        assert!(at >= self.last, "event at {at} ns scheduled before the current time {} ns", self.last);
        self.len += 1;
        self.seq += 1;
        let seq = self.seq;
        if at == self.last {
            self.now.push((at, seq, ev));
        } else {
            let b = Self::bucket(self.last, at);
            self.buckets[b].push((at, seq, ev));
            self.full |= 1 << b;
        }
    }

    /// Bucket (minus one) of a time later than `last`: its highest bit that differs.
    fn bucket(last: Nanos, at: Nanos) -> usize {
        63 - (at ^ last).leading_zeros() as usize
    }

    /// The earliest event (lowest time, then lowest sequence).
    pub fn pop(&mut self) -> Option<(Nanos, u64, T)> {
        if self.head == self.now.len() {
            self.now.clear();
            self.head = 0;
            if self.full == 0 {
                return None;
            }
            let b = self.full.trailing_zeros() as usize;
            self.full &= !(1 << b);
            // A lone event in the lowest bucket is the earliest: pop it
            // without the spill (the usual case: most pops find one).
            if self.buckets[b].len() == 1 {
                let e = self.buckets[b].pop().expect("a bucket of one");
                self.last = e.0;
                self.len -= 1;
                return Some(e);
            }
            // Every spilled event goes to a lower bucket: split them off
            // rather than move the vector out and back (its allocation stays).
            let (lower, rest) = self.buckets.split_at_mut(b);
            let spill = &mut rest[0];
            let last = spill.iter().map(|e| e.0).min().expect("a non-empty bucket");
            for e in spill.drain(..) {
                if e.0 == last {
                    self.now.push(e);
                } else {
                    let c = Self::bucket(last, e.0);
                    lower[c].push(e);
                    self.full |= 1 << c;
                }
            }
            self.last = last;
            if self.now.len() > 1 {
                self.now.sort_unstable_by_key(|e| e.1);
            }
        }
        let e = self.now[self.head];
        self.head += 1;
        self.len -= 1;
        Some(e)
    }
}

impl<T: Copy> Default for EventQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Same pops as a binary heap over (time, seq) for a random monotone
    /// schedule with many ties, near and far events.
    #[test]
    fn pops_in_binary_heap_order() {
        let mut q = EventQueue::new();
        let mut h = BinaryHeap::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut seq, mut now) = (0u64, 0u64);
        for i in 0..200_000u64 {
            let pushes = rnd() % 3;
            for _ in 0..pushes {
                let r = rnd();
                let dt = match r % 4 {
                    0 => 0,
                    1 => r >> 60,
                    2 => (r >> 40) % 20_000,
                    _ => (r >> 20) % 300_000_000,
                };
                seq += 1;
                q.push(now + dt, i);
                h.push(Reverse((now + dt, seq, i)));
            }
            let a = q.pop();
            let b = h.pop().map(|Reverse(e)| e);
            assert_eq!(a, b);
            if let Some((t, ..)) = a {
                now = t;
            }
            assert_eq!(q.len(), h.len());
        }
        while let Some(Reverse(e)) = h.pop() {
            assert_eq!(q.pop(), Some(e));
        }
        assert!(q.pop().is_none() && q.is_empty());
    }
}
