//! A packet trace of one flow in pcap form, as tcpdump would write it at
//! the flow's two hosts (`RunConfig::pcap`): `sender.pcap` holds the data
//! segments as they leave the sender and the ACKs as they reach it,
//! `receiver.pcap` the data segments as they reach the receiver and the
//! ACKs as they leave it. The same tools then read a simulated run and a
//! captured kernel run (`bench/pcap_bursts.py`), and Wireshark reads both.
//!
//! Each packet is its IPv4 and TCP headers only (tcpdump's `-s` of a
//! header: the captured length is the headers, the original length the
//! whole packet), with the timestamp option and the SACK blocks it
//! carries, nanosecond timestamps (pcap magic 0xa1b23c4d), link type RAW
//! (an IPv4 packet, no link header). Addresses and ports are fixed: the
//! sender is 10.0.0.1 and the receiver 10.0.1.1:5201 (iperf3's port, as
//! the linux backend's runs use). Sequence numbers: the SYN's is 0 and the
//! first data byte's 1, on both sides; windows are not modelled and read
//! 65535. Only the flow's main connection is traced (an RPC flow's ACKs
//! ride on its responses, so RPC flows are refused).

use crate::packet::Packet;
use netcore::Nanos;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const MAGIC_NS: u32 = 0xa1b2_3c4d;
const LINKTYPE_RAW: u32 = 101;
const SNAPLEN: u32 = 128;
const SENDER_ADDR: [u8; 4] = [10, 0, 0, 1];
const RECEIVER_ADDR: [u8; 4] = [10, 0, 1, 1];
const RECEIVER_PORT: u16 = 5201;

/// Where on the path a packet is seen.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Point {
    /// Leaving the host that sent it.
    Leaves,
    /// Reaching the host it is for.
    Arrives,
}

pub struct PcapTrace {
    sport: u16,
    sender: Capture,
    receiver: Capture,
}

struct Capture {
    path: PathBuf,
    out: BufWriter<File>,
    failed: Option<std::io::Error>,
}

impl Capture {
    fn create(path: PathBuf) -> Result<Capture, String> {
        let file = File::create(&path)
            .map_err(|e| format!("pcap: cannot create {}: {e}", path.display()))?;
        let mut c = Capture {
            path,
            out: BufWriter::new(file),
            failed: None,
        };
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_NS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes()); // version 2.4
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // time zone
        h.extend_from_slice(&0u32.to_le_bytes()); // accuracy
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
        c.write(&h);
        Ok(c)
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            if let Err(e) = self.out.write_all(bytes) {
                self.failed = Some(e);
            }
        }
    }

    fn record(&mut self, at: Nanos, headers: &[u8], orig_len: u32) {
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((at / 1_000_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((at % 1_000_000_000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&(headers.len() as u32).to_le_bytes());
        r[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.write(&r);
        self.write(headers);
    }

    fn finish(mut self) -> Result<(), String> {
        if self.failed.is_none() {
            if let Err(e) = self.out.flush() {
                self.failed = Some(e);
            }
        }
        match self.failed {
            Some(e) => Err(format!("pcap: writing {} failed: {e}", self.path.display())),
            None => Ok(()),
        }
    }
}

impl PcapTrace {
    /// Start `dir/sender.pcap` and `dir/receiver.pcap` for the flow of id
    /// `flow_id` (it picks the sender's port).
    pub fn create(dir: &Path, flow_id: u32) -> Result<PcapTrace, String> {
        Ok(PcapTrace {
            sport: 32768 + (flow_id % 28000) as u16,
            sender: Capture::create(dir.join("sender.pcap"))?,
            receiver: Capture::create(dir.join("receiver.pcap"))?,
        })
    }

    /// Record packet `p` of the traced connection at `point` of its path.
    pub fn record(&mut self, at: Nanos, p: &Packet, point: Point) {
        let mut buf = [0u8; 80];
        let (n, orig) = headers(p, self.sport, &mut buf);
        // Data is seen at the sender as it leaves and at the receiver as
        // it arrives; ACKs the other way round.
        let at_sender = p.to_receiver == (point == Point::Leaves);
        let c = if at_sender {
            &mut self.sender
        } else {
            &mut self.receiver
        };
        c.record(at, &buf[..n], orig);
    }

    /// Flush both files; if either cannot be written whole, remove both.
    pub fn finish(self) -> Result<(), String> {
        let paths = [self.sender.path.clone(), self.receiver.path.clone()];
        let res = self.sender.finish().and(self.receiver.finish());
        if res.is_err() {
            for p in paths {
                let _ = std::fs::remove_file(p);
            }
        }
        res
    }
}

/// Write `p`'s IPv4 and TCP headers into `buf`: their length, and the
/// whole packet's (headers and payload).
fn headers(p: &Packet, sport: u16, buf: &mut [u8; 80]) -> (usize, u32) {
    // TCP options: NOP NOP timestamps, then NOP NOP SACK.
    let mut opt = [0u8; 40];
    opt[0] = 1;
    opt[1] = 1;
    opt[2] = 8;
    opt[3] = 10;
    // Linux's TCP timestamps tick in milliseconds.
    opt[4..8].copy_from_slice(&((p.ts_val / 1_000_000) as u32).to_be_bytes());
    opt[8..12].copy_from_slice(&((p.ts_ecr / 1_000_000) as u32).to_be_bytes());
    let mut olen = 12;
    let nsack = if p.to_receiver { 0 } else { p.nsack as usize };
    if nsack > 0 {
        opt[12] = 1;
        opt[13] = 1;
        opt[14] = 5;
        opt[15] = (2 + 8 * nsack) as u8;
        olen = 16;
        for i in 0..nsack {
            let (s, e) = p.sack(i);
            opt[olen..olen + 4].copy_from_slice(&wire_seq(s).to_be_bytes());
            opt[olen + 4..olen + 8].copy_from_slice(&wire_seq(e).to_be_bytes());
            olen += 8;
        }
    }
    let tcp_len = 20 + olen;
    let payload = if p.to_receiver { p.len } else { 0 };
    let total = 20 + tcp_len as u32 + payload;
    let (src, dst, sp, dp) = if p.to_receiver {
        (SENDER_ADDR, RECEIVER_ADDR, sport, RECEIVER_PORT)
    } else {
        (RECEIVER_ADDR, SENDER_ADDR, RECEIVER_PORT, sport)
    };
    // IPv4: ECN in the low two bits of the traffic class (ECT(0) or CE).
    let ip = &mut buf[..20];
    ip[0] = 0x45;
    ip[1] = if p.ce {
        3
    } else if p.ect {
        2
    } else {
        0
    };
    ip[2..4].copy_from_slice(&(total.min(u16::MAX as u32) as u16).to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let sum = checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    // TCP: the SYN takes sequence number 0, so data byte k is k + 1.
    let (seq, ack) = if p.to_receiver {
        (if p.syn { 0 } else { wire_seq(p.seq) }, 1)
    } else {
        (
            if p.syn { 0 } else { 1 },
            if p.syn { 1 } else { wire_seq(p.ack) },
        )
    };
    // SYN, ACK: the opening SYN alone carries no ACK.
    let mut flags = (if p.syn { 0x02 } else { 0 }) | (if p.syn && p.to_receiver { 0 } else { 0x10 });
    if p.psh {
        flags |= 0x08;
    }
    if p.ece {
        flags |= 0x40;
    }
    if p.cwr {
        flags |= 0x80;
    }
    let tcp = &mut buf[20..20 + tcp_len];
    tcp[0..2].copy_from_slice(&sp.to_be_bytes());
    tcp[2..4].copy_from_slice(&dp.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&ack.to_be_bytes());
    tcp[12] = ((tcp_len / 4) as u8) << 4;
    tcp[13] = flags;
    tcp[14..16].copy_from_slice(&u16::MAX.to_be_bytes());
    tcp[20..].copy_from_slice(&opt[..olen]);
    (20 + tcp_len, total)
}

/// A byte offset of the stream as the 32-bit sequence number on the wire.
fn wire_seq(x: u64) -> u32 {
    x.wrapping_add(1) as u32
}

/// The IPv4 header checksum (RFC 791: ones' complement of the ones'
/// complement sum of its 16-bit words, with the checksum field zero).
fn checksum(h: &[u8]) -> u16 {
    let mut s: u32 = h
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn be32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    #[test]
    fn a_data_segment_reads_back() {
        let p = Packet {
            to_receiver: true,
            seq: 2896,
            len: 1448,
            ts_val: 7_500_000,
            ts_ecr: 3_000_000,
            ect: true,
            psh: true,
            ..Packet::default()
        };
        let mut buf = [0u8; 80];
        let (n, total) = headers(&p, 40000, &mut buf);
        assert_eq!(
            n,
            20 + 32,
            "IPv4, TCP and the 12 bytes of NOP NOP timestamps"
        );
        assert_eq!(total, 52 + 1448);
        assert_eq!(u16::from_be_bytes([buf[2], buf[3]]) as u32, total);
        assert_eq!(
            checksum(&buf[..20]),
            0,
            "a header with its checksum sums to zero"
        );
        assert_eq!(buf[1] & 3, 2, "ECT(0)");
        let t = &buf[20..n];
        assert_eq!(u16::from_be_bytes([t[0], t[1]]), 40000);
        assert_eq!(u16::from_be_bytes([t[2], t[3]]), RECEIVER_PORT);
        assert_eq!(be32(&t[4..]), 2897);
        assert_eq!(t[12] >> 4, 8, "data offset in words");
        assert_eq!(t[13], 0x18, "ACK and PSH");
        assert_eq!((be32(&t[24..]), be32(&t[28..])), (7, 3), "timestamps in ms");
    }

    #[test]
    fn an_ack_carries_its_sack_blocks() {
        let base = Packet {
            ack: 14_480,
            ts_val: 1_000_000,
            ce: false,
            ece: true,
            ..Packet::default()
        };
        let p = base.with_sacks(&[(17_376, 20_272), (23_168, 24_616)]);
        let mut buf = [0u8; 80];
        let (n, total) = headers(&p, 40000, &mut buf);
        assert_eq!(n, 20 + 20 + 12 + 4 + 16);
        assert_eq!(total as usize, n, "an ACK has no payload");
        let t = &buf[20..n];
        assert_eq!(u16::from_be_bytes([t[0], t[1]]), RECEIVER_PORT);
        assert_eq!(be32(&t[8..]), 14_481);
        assert_eq!(t[13], 0x50, "ACK and ECE");
        assert_eq!(&t[32..36], &[1, 1, 5, 18]);
        assert_eq!(
            [
                be32(&t[36..]),
                be32(&t[40..]),
                be32(&t[44..]),
                be32(&t[48..])
            ],
            [17_377, 20_273, 23_169, 24_617]
        );
    }

    #[test]
    fn the_handshake_is_syn_then_syn_ack() {
        let mut buf = [0u8; 80];
        let syn = Packet {
            to_receiver: true,
            syn: true,
            ..Packet::default()
        };
        headers(&syn, 40000, &mut buf);
        assert_eq!((be32(&buf[24..]), buf[33]), (0, 0x02));
        let synack = Packet {
            syn: true,
            ..Packet::default()
        };
        headers(&synack, 40000, &mut buf);
        assert_eq!((be32(&buf[24..]), be32(&buf[28..]), buf[33]), (0, 1, 0x12));
    }
}
