//! The packets of many FIFO queues in one slab: each queue is a linked list
//! of slots, and a freed slot is reused first (last freed, first reused).
//!
//! Why not a ring buffer per queue: a round robin over a hundred queues
//! reads each packet from a different buffer, and every buffer cycles
//! through all the capacity it ever grew to, so the packets touched are
//! spread over megabytes (a cache miss per enqueue and per dequeue; FQ-CoDel
//! with 100 flows spent about a fifth of the simulator's time there). In
//! one slab the slots in use stay about as many as the packets queued.
//!
//! The links live apart from the packets, four bytes a slot: appending to a
//! queue writes its tail's link, and that tail's packet (queued a round of
//! the other queues ago) is no longer read into the cache for it.

use crate::Nanos;

const NIL: u32 = u32::MAX;

/// A hint to the processor to load `x`'s first cache line (no effect on
/// other architectures).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and cannot fault;
    // the address comes from a reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((x as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// One queue of the pool: its first and last slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    head: u32,
    tail: u32,
}

impl Default for List {
    fn default() -> Self {
        List { head: NIL, tail: NIL }
    }
}

pub(crate) struct Pool<P> {
    /// Per slot: its packet and when it was queued.
    slots: Vec<(Nanos, Option<P>)>,
    /// Per slot: the next slot of its list (or of the free list).
    next: Vec<u32>,
    /// First free slot.
    free: u32,
}

impl<P> Pool<P> {
    pub(crate) fn new() -> Pool<P> {
        Pool { slots: Vec::new(), next: Vec::new(), free: NIL }
    }

    /// Append `p`, stamped `at`, to the tail of `l`.
    #[inline]
    pub(crate) fn push(&mut self, l: &mut List, at: Nanos, p: P) {
        let i = if self.free != NIL {
            let i = self.free;
            self.free = self.next[i as usize];
            self.next[i as usize] = NIL;
            self.slots[i as usize] = (at, Some(p));
            i
        } else {
            self.slots.push((at, Some(p)));
            self.next.push(NIL);
            (self.slots.len() - 1) as u32
        };
        if l.tail == NIL {
            l.head = i;
        } else {
            self.next[l.tail as usize] = i;
        }
        l.tail = i;
    }

    /// Start loading the head packet of `l` into the cache; nothing else.
    #[inline]
    pub(crate) fn prefetch_head(&self, l: &List) {
        if let Some(s) = self.slots.get(l.head as usize) {
            prefetch(s);
        }
    }

    /// Take the head of `l`.
    #[inline]
    pub(crate) fn pop(&mut self, l: &mut List) -> Option<(Nanos, P)> {
        if l.head == NIL {
            return None;
        }
        let i = l.head;
        let s = &mut self.slots[i as usize];
        let p = s.1.take().expect("a listed slot holds a packet");
        let at = s.0;
        let n = &mut self.next[i as usize];
        l.head = *n;
        *n = self.free;
        self.free = i;
        if l.head == NIL {
            l.tail = NIL;
        }
        Some((at, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Interleaved pushes and pops on several lists behave like one
    /// VecDeque per list, and slots are reused.
    #[test]
    fn lists_behave_like_deques() {
        let mut pool = Pool::new();
        let mut lists = [List::default(); 4];
        let mut refs: Vec<VecDeque<(Nanos, u64)>> = vec![VecDeque::new(); 4];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut most = 0;
        for n in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let q = (x % 4) as usize;
            if x % 7 < 4 {
                pool.push(&mut lists[q], n, n * 3);
                refs[q].push_back((n, n * 3));
            } else {
                assert_eq!(pool.pop(&mut lists[q]), refs[q].pop_front());
            }
            most = most.max(refs.iter().map(|r| r.len()).sum::<usize>());
        }
        // Slots are reused: never more than were queued at once.
        assert_eq!(pool.slots.len(), most);
        for q in 0..4 {
            while let Some(e) = refs[q].pop_front() {
                assert_eq!(pool.pop(&mut lists[q]), Some(e));
            }
            assert_eq!(pool.pop(&mut lists[q]), None);
        }
    }
}
