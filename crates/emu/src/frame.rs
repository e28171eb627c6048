//! Real packets inside the emulator: a buffer from a pool plus what the
//! links need to know. A frame gives its buffer back to the pool when it is
//! dropped, wherever that happens (a queue discipline may drop a packet deep
//! inside its dequeue), so the hot path allocates nothing once the pool has
//! grown to the number of packets in flight.

use crate::ipv4::{self, Header};
use netcore::Pkt;
use std::cell::RefCell;
use std::rc::Rc;

/// Free buffers, all of the same size.
pub struct Pool {
    free: RefCell<Vec<Box<[u8]>>>,
    buf_size: usize,
    allocated: std::cell::Cell<usize>,
}

impl Pool {
    pub fn new(buf_size: usize, prealloc: usize) -> Rc<Pool> {
        let free = (0..prealloc).map(|_| vec![0u8; buf_size].into_boxed_slice()).collect();
        Rc::new(Pool { free: RefCell::new(free), buf_size, allocated: std::cell::Cell::new(prealloc) })
    }

    /// A buffer of `buf_size` bytes (allocated only when the pool is empty).
    pub fn take(&self) -> Box<[u8]> {
        match self.free.borrow_mut().pop() {
            Some(b) => b,
            None => {
                self.allocated.set(self.allocated.get() + 1);
                vec![0u8; self.buf_size].into_boxed_slice()
            }
        }
    }

    pub fn give(&self, b: Box<[u8]>) {
        self.free.borrow_mut().push(b);
    }

    pub fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Buffers ever allocated (preallocated ones included).
    pub fn allocated(&self) -> usize {
        self.allocated.get()
    }

    pub fn free_count(&self) -> usize {
        self.free.borrow().len()
    }
}

/// Where a frame goes (set by the router when it is read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Index into the emulator's path table: the links it crosses, in order.
    pub path: u16,
    /// The flow it belongs to (index into the routing's flows), or [`NO_FLOW`].
    pub flow: u16,
    /// Data direction of that flow (client → server), else its return path.
    pub data: bool,
}

pub const NO_FLOW: u16 = u16::MAX;

pub struct Frame {
    buf: Option<Box<[u8]>>,
    pool: Rc<Pool>,
    pub len: u32,
    key: u64,
    ect: bool,
    /// Traffic class for multi-queue disciplines: the packet's DSCP.
    class: u8,
    /// A queue asked for CE; applied to the bytes when the frame is written.
    pub ce: bool,
    pub route: Route,
    /// Links of its path crossed so far.
    pub hop: u8,
    /// TCP sequence number, its length in sequence space and SYN (for the
    /// flow's delivered bytes).
    pub seq: u32,
    pub seq_len: u32,
    pub syn: bool,
}

impl Frame {
    pub fn new(buf: Box<[u8]>, pool: Rc<Pool>, len: usize, h: &Header, route: Route) -> Frame {
        Frame {
            buf: Some(buf),
            pool,
            len: len as u32,
            key: h.flow_key(),
            ect: h.ect(),
            class: h.dscp,
            ce: false,
            route,
            hop: 0,
            seq: h.seq,
            seq_len: h.seq_len,
            syn: h.syn,
        }
    }

    /// The packet's bytes, with the CE mark applied if a queue set it.
    pub fn bytes_for_write(&mut self) -> &[u8] {
        let len = self.len as usize;
        let buf = self.buf.as_mut().expect("frame has its buffer");
        if self.ce {
            ipv4::set_ce(&mut buf[..len]);
            self.ce = false;
        }
        &buf[..len]
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.give(b);
        }
    }
}

impl Pkt for Frame {
    fn wire_bytes(&self) -> u32 {
        self.len
    }
    fn flow_key(&self) -> u64 {
        self.key
    }
    fn ect(&self) -> bool {
        self.ect
    }
    fn class(&self) -> u8 {
        self.class
    }
    fn mark_ce(&mut self) {
        if self.ect {
            self.ce = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::tests::packet;

    #[test]
    fn frames_return_their_buffers() {
        let pool = Pool::new(2048, 2);
        let pkt = packet([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 100, 2);
        let h = ipv4::parse(&pkt).unwrap();
        let mut frames = vec![];
        for _ in 0..3 {
            let mut b = pool.take();
            b[..100].copy_from_slice(&pkt);
            frames.push(Frame::new(b, pool.clone(), 100, &h, Route { path: 0, flow: NO_FLOW, data: true }));
        }
        assert_eq!(pool.allocated(), 3);
        assert_eq!(pool.free_count(), 0);
        frames[0].mark_ce();
        let out = frames[0].bytes_for_write().to_vec();
        assert_eq!(out[1] & 3, 3);
        assert_eq!(u16::from_be_bytes([out[10], out[11]]), ipv4::header_checksum(&out));
        // The test packet carries DSCP 0x2e: its class for a multi-queue discipline.
        assert_eq!(frames[1].class(), 0x2e);
        drop(frames);
        assert_eq!(pool.free_count(), 3);
        assert_eq!(pool.allocated(), 3);
    }
}
