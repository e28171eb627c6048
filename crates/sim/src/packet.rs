//! The simulator's packet descriptor: headers only, no payload bytes.

use netcore::Pkt;

/// Up to this many SACK blocks fit in an ACK beside the timestamp option.
pub const MAX_SACK: usize = 3;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// Index of the TCP connection in the simulation.
    pub conn: u32,
    /// Towards the connection's receiver (data, SYN) or its sender (ACK, SYN-ACK).
    pub to_receiver: bool,
    /// The route the packet follows (`netcore::net::Routes`) and the index
    /// of the link it is on: fixed when it is sent, so a route change only
    /// affects packets sent after it.
    pub route: u32,
    pub hop: u8,
    pub syn: bool,
    pub wire: u32,
    /// Data: first byte and payload length.
    pub seq: u64,
    pub len: u32,
    /// ACK: next byte expected, and SACK blocks [start, end).
    pub ack: u64,
    pub sack: [(u64, u64); MAX_SACK],
    pub nsack: u8,
    /// Timestamp option, in nanoseconds of simulated time.
    pub ts_val: u64,
    pub ts_ecr: u64,
    /// ECN: ECT on data, CE set by a queue, ECE echoed on ACKs.
    pub ect: bool,
    pub ce: bool,
    pub ece: bool,
    /// Congestion window reduced (RFC 3168), on data.
    pub cwr: bool,
    /// PSH: the last segment of an application write (Linux `tcp_push`).
    pub psh: bool,
    /// Traffic class of the flow (see `netcore::Pkt::class`).
    pub class: u8,
}

impl Pkt for Packet {
    fn wire_bytes(&self) -> u32 {
        self.wire
    }
    fn flow_key(&self) -> u64 {
        self.conn as u64
    }
    fn class(&self) -> u8 {
        self.class
    }
    fn ect(&self) -> bool {
        self.ect
    }
    fn mark_ce(&mut self) {
        self.ce = true;
    }
}
