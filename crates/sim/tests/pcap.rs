//! The config's `pcap`: one flow's packets written as tcpdump would capture
//! them at its two hosts, read back here with a small pcap reader and held
//! against the run's own counts and the path's delays.

use serde_json::{json, Value};
use sim::{simulate, RunConfig};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

const MS: u64 = 1_000_000;

/// A packet as read back: time (ns), from the receiver's port 5201?, seq,
/// ack, TCP flags, payload length, SACK blocks, TS value.
#[derive(Debug, Clone)]
struct Rec {
    t: u64,
    from_receiver: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    len: u32,
    sacks: Vec<(u32, u32)>,
    tsval: u32,
}

/// An ACK as compared at both ends: ack, TS value, SACK blocks, time.
type Ack = (u32, u32, Vec<(u32, u32)>, u64);

fn read(path: &Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let le = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    let be = |x: &[u8]| u32::from_be_bytes(x[..4].try_into().unwrap());
    assert_eq!(le(0), 0xa1b2_3c4d, "nanosecond pcap magic");
    assert_eq!(le(20), 101, "link type RAW");
    let mut out = Vec::new();
    let mut i = 24;
    while i < b.len() {
        let (caplen, orig) = (le(i + 8) as usize, le(i + 12));
        let t = le(i) as u64 * 1_000_000_000 + le(i + 4) as u64;
        let ip = &b[i + 16..i + 16 + caplen];
        assert_eq!(ip[0], 0x45);
        assert_eq!(
            u16::from_be_bytes([ip[2], ip[3]]) as u32,
            orig,
            "IP total length is the original length"
        );
        let tcp = &ip[20..];
        let hl = (tcp[12] >> 4) as usize * 4;
        assert_eq!(20 + hl, caplen, "headers only");
        let mut sacks = Vec::new();
        let mut tsval = 0;
        let mut o = 20;
        while o < hl {
            match tcp[o] {
                1 => o += 1,
                8 => {
                    tsval = be(&tcp[o + 2..]);
                    o += 10;
                }
                5 => {
                    let n = (tcp[o + 1] as usize - 2) / 8;
                    for k in 0..n {
                        sacks.push((be(&tcp[o + 2 + 8 * k..]), be(&tcp[o + 6 + 8 * k..])));
                    }
                    o += tcp[o + 1] as usize;
                }
                k => panic!("unexpected TCP option {k}"),
            }
        }
        out.push(Rec {
            t,
            from_receiver: u16::from_be_bytes([tcp[0], tcp[1]]) == 5201,
            seq: be(&tcp[4..]),
            ack: be(&tcp[8..]),
            flags: tcp[13],
            len: orig - 20 - hl as u32,
            sacks,
            tsval,
        });
        i += 16 + caplen;
    }
    out
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ccbench-pcap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Two CUBIC flows through a 20 Mbit/s, 20-packet bottleneck (losses and
/// SACK recovery), 10 ms each way, for 3 s.
fn config(pcap: Value) -> Value {
    json!({
        "seed": 3, "duration_ns": 3_000 * MS, "sample_interval_ns": 100 * MS,
        "tcp": {"mss": 1448, "header_bytes": 52, "init_cwnd": 10, "min_rto_ns": 200 * MS,
                "delayed_ack": "linux", "delack_ns": 40 * MS, "sack": true, "rmem_bytes": 6 << 20,
                "wmem_bytes": 4 << 20, "ecn": false, "pacing": "auto"},
        "senders": [{"rate_bps": 1_000_000_000u64, "delay_ns": 0}],
        "bottleneck": {"rate_bps": 20_000_000u64, "delay_ns": 10 * MS, "buffer_pkts": 20, "qdisc": "fifo"},
        "flows": [{"id": 1, "cca": "cubic", "sender": 0, "kind": "bulk", "start_ns": 0},
                  {"id": 2, "cca": "cubic", "sender": 0, "kind": "bulk", "start_ns": 50 * MS}],
        "pcap": pcap,
    })
}

fn run(cfg: Value) -> Result<sim::SimResult, String> {
    let cfg: RunConfig = serde_json::from_value(cfg).map_err(|e| e.to_string())?;
    simulate(&cfg)
}

#[test]
fn a_traced_flow_reads_back_as_its_hosts_saw_it() {
    let dir = scratch("flow");
    let res = run(config(json!({"flow": 2, "dir": dir.to_str().unwrap()}))).unwrap();
    let f = res.flows.iter().find(|f| f.flow_id == 2).unwrap();
    let (tx, rx) = (
        read(&dir.join("sender.pcap")),
        read(&dir.join("receiver.pcap")),
    );
    for recs in [&tx, &rx] {
        assert!(recs.windows(2).all(|w| w[0].t <= w[1].t), "time order");
    }
    // The handshake first, starting at the flow's start.
    assert_eq!((tx[0].flags, tx[0].seq, tx[0].t), (0x02, 0, 50 * MS));
    assert!(
        tx[1].from_receiver && tx[1].flags == 0x12,
        "then the SYN-ACK: {:?}",
        tx[1]
    );

    // At the sender: every transmission, and each resend once more.
    let data: Vec<&Rec> = tx
        .iter()
        .filter(|r| !r.from_receiver && r.len > 0)
        .collect();
    assert_eq!(data.len() as u64, f.sent_segs);
    let mut seen = HashSet::new();
    let resent = data.iter().filter(|r| !seen.insert(r.seq)).count() as u64;
    assert!(
        f.retrans_segs > 0,
        "the buffer is small enough to lose packets"
    );
    assert_eq!(resent, f.retrans_segs);

    // Each segment the receiver got left the sender at least a one-way
    // delay (10 ms) and its serialisation (payload + 52 bytes at 20
    // Mbit/s: 0.6 ms for a full one) earlier; each ACK reached the sender
    // a one-way delay after it left. The first is the load generator's
    // 44-byte header, on its own.
    assert_eq!(data[0].len as u64, sim::LOAD_HEADER_BYTES);
    assert!(data[1..].iter().all(|r| r.len == 1448));
    let mut first_sent: HashMap<u32, u64> = HashMap::new();
    for r in &data {
        first_sent.entry(r.seq).or_insert(r.t);
    }
    let rx_data: Vec<&Rec> = rx
        .iter()
        .filter(|r| !r.from_receiver && r.len > 0)
        .collect();
    assert!(
        rx_data.len() < data.len(),
        "some segments were dropped at the bottleneck"
    );
    for r in &rx_data {
        assert!(
            r.t >= first_sent[&r.seq] + 10 * MS + (r.len as u64 + 52) * 8 * 1_000_000_000 / 20_000_000,
            "segment {} arrived too early",
            r.seq
        );
    }
    let acks = |recs: &[Rec]| -> Vec<Ack> {
        recs.iter()
            .filter(|r| r.from_receiver && r.flags & 0x02 == 0)
            .map(|r| (r.ack, r.tsval, r.sacks.clone(), r.t))
            .collect()
    };
    let (acks_tx, acks_rx) = (acks(&tx), acks(&rx));
    // The ACK path loses nothing: those not yet at the sender (if any)
    // left within a one-way delay of the end.
    assert!(acks_tx.len() <= acks_rx.len());
    assert!(acks_rx[acks_tx.len()..]
        .iter()
        .all(|a| a.3 > 3_000 * MS - 11 * MS));
    for (a, b) in acks_rx.iter().zip(&acks_tx) {
        assert_eq!(
            (a.0, a.1, &a.2),
            (b.0, b.1, &b.2),
            "the same ACK at both ends"
        );
        assert!(b.3 >= a.3 + 10 * MS);
    }
    assert!(
        acks_tx.iter().any(|a| !a.2.is_empty()),
        "recovery ACKs carry SACK blocks"
    );
    // The last ACK covers what the receiver delivered (byte k is k + 1,
    // after the header, which the delivered count leaves out) but the
    // segment a delayed ACK may still hold.
    let last = acks_rx.last().unwrap().0 as u64 - 1 - sim::LOAD_HEADER_BYTES;
    assert!(
        last <= f.bytes_delivered && f.bytes_delivered - last < 2 * 1448,
        "last ACK {last}, delivered {}",
        f.bytes_delivered
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_trace_changes_nothing_else() {
    let dir = scratch("same");
    let traced = run(config(json!({"flow": 1, "dir": dir.to_str().unwrap()}))).unwrap();
    let plain = run(config(Value::Null)).unwrap();
    assert_eq!(
        serde_json::to_string(&traced).unwrap(),
        serde_json::to_string(&plain).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_traces_are_refused_by_name() {
    let e = run(config(json!({"flow": 9, "dir": "/tmp"}))).unwrap_err();
    assert!(e.contains("pcap: no flow has id 9"), "{e}");
    let e = run(config(json!({"flow": 1, "dir": "/nonexistent/ccbench"}))).unwrap_err();
    assert!(
        e.contains("cannot create /nonexistent/ccbench/sender.pcap"),
        "{e}"
    );
}
