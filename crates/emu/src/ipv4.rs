//! Just enough IPv4 to classify a packet read from the TUN device, key its
//! flow and mark it with ECN Congestion Experienced.

use netcore::rng::Rng;

/// Protocol numbers whose ports enter the flow key.
const TCP: u8 = 6;
const UDP: u8 = 17;

/// The fields of an IPv4 header the emulator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    /// IPv4 total length: the packet's size on the wire for queues and
    /// serialisation.
    pub total_len: u16,
    /// The ECN field (0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// The DSCP field (the TOS byte's upper six bits): the load generator
    /// puts a flow's `queue_class` there.
    pub dscp: u8,
    /// Source and destination port for TCP/UDP (first fragment only), else 0.
    pub sport: u16,
    pub dport: u16,
    /// TCP (first fragment with a whole TCP header): the sequence number,
    /// the payload length (the SYN and FIN flags count one each, as in the
    /// sequence space) and whether SYN is set; else 0, 0, false.
    pub seq: u32,
    pub seq_len: u32,
    pub syn: bool,
}

impl Header {
    /// ECN-capable transport: ECT(0), ECT(1) (CE packets are already marked).
    pub fn ect(&self) -> bool {
        self.ecn == 1 || self.ecn == 2
    }

    /// A hash of the 5-tuple.
    pub fn flow_key(&self) -> u64 {
        let a = ((self.src as u64) << 32) | self.dst as u64;
        let b = ((self.proto as u64) << 32) | ((self.sport as u64) << 16) | self.dport as u64;
        mix(a ^ mix(b))
    }
}

/// SplitMix64 as a hash: its first output from seed `z` (cheap, well spread).
fn mix(z: u64) -> u64 {
    Rng::new(z).next_u64()
}

/// Parse the IPv4 header at the start of `b` (a whole packet as read from a
/// TUN device without packet information). None for anything that is not a
/// well-formed IPv4 packet of exactly `b.len()` bytes or more.
pub fn parse(b: &[u8]) -> Option<Header> {
    if b.len() < 20 || b[0] >> 4 != 4 {
        return None;
    }
    let ihl = (b[0] & 0x0f) as usize * 4;
    let total_len = u16::from_be_bytes([b[2], b[3]]);
    if ihl < 20 || (total_len as usize) < ihl || b.len() < total_len as usize {
        return None;
    }
    let proto = b[9];
    let frag_offset = u16::from_be_bytes([b[6], b[7]]) & 0x1fff;
    let (mut sport, mut dport) = (0, 0);
    if (proto == TCP || proto == UDP) && frag_offset == 0 && total_len as usize >= ihl + 4 {
        sport = u16::from_be_bytes([b[ihl], b[ihl + 1]]);
        dport = u16::from_be_bytes([b[ihl + 2], b[ihl + 3]]);
    }
    let (mut seq, mut seq_len, mut syn) = (0, 0, false);
    if proto == TCP && frag_offset == 0 && total_len as usize >= ihl + 20 {
        let t = &b[ihl..];
        let doff = (t[12] >> 4) as usize * 4;
        if doff >= 20 && total_len as usize >= ihl + doff {
            seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
            syn = t[13] & 0x02 != 0;
            let fin = t[13] & 0x01 != 0;
            seq_len = (total_len as usize - ihl - doff) as u32 + syn as u32 + fin as u32;
        }
    }
    Some(Header {
        src: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        dst: u32::from_be_bytes([b[16], b[17], b[18], b[19]]),
        proto,
        total_len,
        ecn: b[1] & 0x03,
        dscp: b[1] >> 2,
        sport,
        dport,
        seq,
        seq_len,
        syn,
    })
}

/// Set the CE codepoint of an ECN-capable IPv4 packet and update the header
/// checksum incrementally (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m')).
/// Not-ECT packets are left alone (a queue must drop them instead).
pub fn set_ce(b: &mut [u8]) {
    let ecn = b[1] & 0x03;
    if ecn == 0 || ecn == 3 {
        return;
    }
    let old = u16::from_be_bytes([b[0], b[1]]);
    b[1] |= 0x03;
    let new = u16::from_be_bytes([b[0], b[1]]);
    let hc = u16::from_be_bytes([b[10], b[11]]);
    let mut sum = (!hc as u32) + (!old as u32) + new as u32;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let hc = !(sum as u16);
    b[10..12].copy_from_slice(&hc.to_be_bytes());
}

/// The Internet checksum of an IPv4 header computed from scratch (with its
/// checksum field taken as zero).
pub fn header_checksum(b: &[u8]) -> u16 {
    let ihl = (b[0] & 0x0f) as usize * 4;
    let mut sum: u32 = 0;
    for i in (0..ihl).step_by(2) {
        if i == 10 {
            continue;
        }
        sum += u16::from_be_bytes([b[i], b[i + 1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A TCP/IPv4 packet of `len` bytes with a valid header checksum.
    pub fn packet(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, len: u16, ecn: u8) -> Vec<u8> {
        let mut b = vec![0u8; len as usize];
        b[0] = 0x45;
        b[1] = (0x2e << 2) | ecn; // some DSCP, to check it survives marking
        b[2..4].copy_from_slice(&len.to_be_bytes());
        b[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        b[6] = 0x40; // DF
        b[8] = 63;
        b[9] = TCP;
        b[12..16].copy_from_slice(&src);
        b[16..20].copy_from_slice(&dst);
        b[20..22].copy_from_slice(&sport.to_be_bytes());
        b[22..24].copy_from_slice(&dport.to_be_bytes());
        if len >= 40 {
            b[32] = 5 << 4; // TCP data offset: a bare 20-byte header
        }
        let c = header_checksum(&b);
        b[10..12].copy_from_slice(&c.to_be_bytes());
        b
    }

    #[test]
    fn parses_addresses_ports_and_length() {
        let b = packet([10, 0, 0, 1], [10, 0, 1, 2], 40000, 5201, 1500, 2);
        let h = parse(&b).unwrap();
        assert_eq!(h.src, u32::from_be_bytes([10, 0, 0, 1]));
        assert_eq!(h.dst, u32::from_be_bytes([10, 0, 1, 2]));
        assert_eq!((h.sport, h.dport, h.proto, h.total_len), (40000, 5201, TCP, 1500));
        assert!(h.ect());
        // The key depends on every part of the 5-tuple.
        let other = parse(&packet([10, 0, 0, 1], [10, 0, 1, 2], 40001, 5201, 1500, 2)).unwrap();
        assert_ne!(h.flow_key(), other.flow_key());
        assert_eq!(h.flow_key(), parse(&packet([10, 0, 0, 1], [10, 0, 1, 2], 40000, 5201, 60, 0)).unwrap().flow_key());
    }

    #[test]
    fn rejects_what_is_not_ipv4() {
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        assert_eq!(parse(&v6), None);
        assert_eq!(parse(&[0x45, 0, 0]), None);
        // Total length beyond what was read.
        let b = packet([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 100, 0);
        assert_eq!(parse(&b[..80]), None);
        // Bad header length.
        let mut b = packet([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 100, 0);
        b[0] = 0x44;
        assert_eq!(parse(&b), None);
    }

    #[test]
    fn tcp_sequence_numbers_and_payload() {
        let mut b = packet([10, 0, 0, 1], [10, 0, 1, 2], 40000, 5201, 1500, 0);
        b[24..28].copy_from_slice(&0xfffffff0u32.to_be_bytes());
        let h = parse(&b).unwrap();
        assert_eq!((h.seq, h.seq_len, h.syn), (0xfffffff0, 1460, false));
        let mut syn = packet([10, 0, 0, 1], [10, 0, 1, 2], 40000, 5201, 40, 0);
        syn[33] = 0x02;
        let h = parse(&syn).unwrap();
        assert_eq!((h.seq_len, h.syn), (1, true));
    }

    #[test]
    fn later_fragments_have_no_ports() {
        let mut b = packet([1, 1, 1, 1], [2, 2, 2, 2], 7, 8, 100, 0);
        b[6] = 0x00;
        b[7] = 0x10; // offset 16 * 8 bytes
        let h = parse(&b).unwrap();
        assert_eq!((h.sport, h.dport), (0, 0));
    }

    #[test]
    fn ce_marking_keeps_the_checksum_valid() {
        for ecn in [1u8, 2] {
            for id in [0u16, 0x1234, 0xffff, 0xfffe] {
                for ttl in [0u8, 1, 64, 255] {
                    let mut b = packet([192, 168, 255, 1], [10, 0, 0, 255], 1, 2, 1500, ecn);
                    b[4..6].copy_from_slice(&id.to_be_bytes());
                    b[8] = ttl;
                    let c = header_checksum(&b);
                    b[10..12].copy_from_slice(&c.to_be_bytes());
                    set_ce(&mut b);
                    assert_eq!(b[1] & 3, 3);
                    assert_eq!(b[1] >> 2, 0x2e, "DSCP kept");
                    assert_eq!(u16::from_be_bytes([b[10], b[11]]), header_checksum(&b), "ecn {ecn} id {id:#x} ttl {ttl}");
                }
            }
        }
    }

    #[test]
    fn ce_marking_on_random_headers() {
        let mut r = netcore::rng::Rng::new(5);
        for _ in 0..100_000 {
            let mut b = vec![0u8; 40];
            for x in b.iter_mut() {
                *x = r.next_u64() as u8;
            }
            b[0] = 0x45;
            b[1] = (b[1] & !3) | (1 + (r.next_u64() % 2) as u8);
            let c = header_checksum(&b);
            b[10..12].copy_from_slice(&c.to_be_bytes());
            set_ce(&mut b);
            assert_eq!(u16::from_be_bytes([b[10], b[11]]), header_checksum(&b));
        }
    }

    #[test]
    fn ce_marking_leaves_not_ect_and_ce_alone() {
        for ecn in [0u8, 3] {
            let b0 = packet([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 100, ecn);
            let mut b = b0.clone();
            set_ce(&mut b);
            assert_eq!(b, b0);
        }
    }
}
