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
    /// ACK: next byte expected, and SACK blocks [start, end) as offsets
    /// from `ack` (see `sack`).
    pub ack: u64,
    pub(crate) sack_off: [(i32, i32); MAX_SACK],
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
    /// A data segment of an RPC that also carries the ACK of the flow's
    /// other connection (the opposite direction of the same exchange) in
    /// `ack`, the SACK blocks, `ts_ecr` and `ece`, which a data segment
    /// does not otherwise use: one TCP connection in Linux, two here.
    pub piggyback: bool,
}

impl Packet {
    /// SACK block `i` (of `nsack`).
    #[inline]
    pub fn sack(&self, i: usize) -> (u64, u64) {
        let (s, e) = self.sack_off[i];
        (self.ack.wrapping_add_signed(s as i64), self.ack.wrapping_add_signed(e as i64))
    }

    /// Set SACK block `i`; `ack` must be set first. Blocks are kept as
    /// 32-bit offsets from the ACK: every block lies within the data in
    /// flight of it (a D-SACK block below it), which is at most
    /// `tcp.rmem_bytes`, below 2 GiB (config check), so the packet
    /// descriptor is 24 bytes smaller: it is copied through several queues
    /// and lines, and with 100 flows on FQ-CoDel 24 bytes more per packet
    /// took 9 % more time (docs/sim-model.md §Speed).
    #[inline]
    pub fn set_sack(&mut self, i: usize, (start, end): (u64, u64)) {
        let off = |x: u64| {
            i32::try_from(x as i64 - self.ack as i64).expect("a SACK block lies within 2 GiB of its ACK")
        };
        self.sack_off[i] = (off(start), off(end));
    }

    /// This ACK with `blocks` as its SACK blocks (tests).
    pub fn with_sacks(mut self, blocks: &[(u64, u64)]) -> Packet {
        for (i, b) in blocks.iter().enumerate() {
            self.set_sack(i, *b);
        }
        self.nsack = blocks.len() as u8;
        self
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks below the ACK (D-SACK) and up to 2 GiB above it come back as set.
    #[test]
    fn sack_blocks_round_trip_around_the_ack() {
        let ack = 5 << 30;
        let blocks = [(ack - 2896, ack - 1448), (ack + 1448, ack + i32::MAX as u64), (ack - (1 << 31), ack)];
        let p = Packet { ack, ..Packet::default() }.with_sacks(&blocks);
        assert_eq!(p.nsack, 3);
        assert_eq!([p.sack(0), p.sack(1), p.sack(2)], blocks);
    }
}
