//! The simulator's socket as a BPF congestion control sees it: a flat block
//! of memory standing in for Linux's `struct tcp_sock` (which begins with an
//! `inet_connection_sock`, which begins with an `inet_sock`, which begins
//! with a `sock`: all share address 0), plus `struct ack_sample` and
//! `struct rate_sample`. CO-RE relocations are resolved against this table
//! by (struct name, member name); a member not listed is refused at load.
//!
//! Writable members are those the kernel lets a struct_ops CCA write
//! (`bpf_tcp_ca_btf_struct_access`: the cwnd fields, ssthresh, prior_cwnd,
//! app_limited, ecn_flags, the pacing rate and status, icsk_ca_priv).

#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub strukt: &'static str,
    pub member: &'static str,
    /// Byte offset in the block.
    pub off: u32,
    /// Size in bytes (of the containing byte for a bitfield).
    pub size: u32,
    /// Bitfield width (stored at bit 0 of its byte), 0 for a plain member.
    pub bits: u32,
    pub signed: bool,
    pub writable: bool,
}

const fn f(strukt: &'static str, member: &'static str, off: u32, size: u32, writable: bool) -> Field {
    Field { strukt, member, off, size, bits: 0, signed: false, writable }
}
const fn bits(strukt: &'static str, member: &'static str, off: u32, bits: u32) -> Field {
    Field { strukt, member, off, size: 1, bits, signed: false, writable: false }
}
const fn s(strukt: &'static str, member: &'static str, off: u32, size: u32) -> Field {
    Field { strukt, member, off, size, bits: 0, signed: true, writable: false }
}

// Offsets in the socket block.
pub const SK_PACING_RATE: usize = 0;
pub const SK_MAX_PACING_RATE: usize = 8;
pub const SK_PACING_STATUS: usize = 16;
pub const ICSK_CA_STATE: usize = 24;
pub const ICSK_CA_PRIV: usize = 32;
pub const ICSK_CA_PRIV_LEN: usize = 104;
pub const SND_CWND: usize = 136;
pub const SND_SSTHRESH: usize = 140;
pub const SND_CWND_CNT: usize = 144;
pub const SND_CWND_CLAMP: usize = 148;
pub const SND_CWND_STAMP: usize = 152;
pub const PRIOR_CWND: usize = 156;
pub const SRTT_US: usize = 160;
pub const PACKETS_OUT: usize = 164;
pub const SACKED_OUT: usize = 168;
pub const LOST_OUT: usize = 172;
pub const RETRANS_OUT: usize = 176;
pub const DELIVERED: usize = 180;
pub const DELIVERED_CE: usize = 184;
pub const LOST: usize = 188;
pub const APP_LIMITED: usize = 192;
pub const MSS_CACHE: usize = 196;
pub const MAX_PACKETS_OUT: usize = 200;
pub const SND_UNA: usize = 204;
pub const SND_NXT: usize = 208;
pub const LSNDTIME: usize = 212;
pub const TCP_MSTAMP: usize = 216;
pub const ECN_FLAGS: usize = 224;
pub const IS_CWND_LIMITED: usize = 225;
pub const MDEV_US: usize = 228;
pub const RCV_NXT: usize = 232;
pub const SOCK_LEN: usize = 240;

pub const ACK_SAMPLE_LEN: usize = 16;
pub const RATE_SAMPLE_LEN: usize = 72;

pub static FIELDS: &[Field] = &[
    // The embedded base structs: tcp_sock.inet_conn.icsk_inet.sk all at 0.
    f("tcp_sock", "inet_conn", 0, SOCK_LEN as u32, false),
    f("inet_connection_sock", "icsk_inet", 0, SOCK_LEN as u32, false),
    f("inet_sock", "sk", 0, SOCK_LEN as u32, false),
    f("sock", "sk_pacing_rate", SK_PACING_RATE as u32, 8, true),
    f("sock", "sk_max_pacing_rate", SK_MAX_PACING_RATE as u32, 8, false),
    f("sock", "sk_pacing_status", SK_PACING_STATUS as u32, 1, true),
    bits("inet_connection_sock", "icsk_ca_state", ICSK_CA_STATE as u32, 5),
    f("inet_connection_sock", "icsk_ca_priv", ICSK_CA_PRIV as u32, ICSK_CA_PRIV_LEN as u32, true),
    f("tcp_sock", "snd_cwnd", SND_CWND as u32, 4, true),
    f("tcp_sock", "snd_ssthresh", SND_SSTHRESH as u32, 4, true),
    f("tcp_sock", "snd_cwnd_cnt", SND_CWND_CNT as u32, 4, true),
    f("tcp_sock", "snd_cwnd_clamp", SND_CWND_CLAMP as u32, 4, true),
    f("tcp_sock", "snd_cwnd_stamp", SND_CWND_STAMP as u32, 4, true),
    f("tcp_sock", "prior_cwnd", PRIOR_CWND as u32, 4, true),
    f("tcp_sock", "srtt_us", SRTT_US as u32, 4, false),
    f("tcp_sock", "mdev_us", MDEV_US as u32, 4, false),
    f("tcp_sock", "packets_out", PACKETS_OUT as u32, 4, false),
    f("tcp_sock", "sacked_out", SACKED_OUT as u32, 4, false),
    f("tcp_sock", "lost_out", LOST_OUT as u32, 4, false),
    f("tcp_sock", "retrans_out", RETRANS_OUT as u32, 4, false),
    f("tcp_sock", "delivered", DELIVERED as u32, 4, false),
    f("tcp_sock", "delivered_ce", DELIVERED_CE as u32, 4, false),
    f("tcp_sock", "lost", LOST as u32, 4, false),
    f("tcp_sock", "app_limited", APP_LIMITED as u32, 4, true),
    f("tcp_sock", "mss_cache", MSS_CACHE as u32, 4, false),
    f("tcp_sock", "max_packets_out", MAX_PACKETS_OUT as u32, 4, false),
    f("tcp_sock", "snd_una", SND_UNA as u32, 4, false),
    f("tcp_sock", "snd_nxt", SND_NXT as u32, 4, false),
    f("tcp_sock", "rcv_nxt", RCV_NXT as u32, 4, false),
    f("tcp_sock", "lsndtime", LSNDTIME as u32, 4, false),
    f("tcp_sock", "tcp_mstamp", TCP_MSTAMP as u32, 8, false),
    f("tcp_sock", "ecn_flags", ECN_FLAGS as u32, 1, true),
    bits("tcp_sock", "is_cwnd_limited", IS_CWND_LIMITED as u32, 1),
    // struct ack_sample (pkts_acked's argument).
    f("ack_sample", "pkts_acked", 0, 4, false),
    s("ack_sample", "rtt_us", 4, 4),
    f("ack_sample", "in_flight", 8, 4, false),
    // struct rate_sample (cong_control's argument).
    f("rate_sample", "prior_mstamp", 0, 8, false),
    f("rate_sample", "prior_delivered", 8, 4, false),
    f("rate_sample", "prior_delivered_ce", 12, 4, false),
    s("rate_sample", "delivered", 16, 4),
    s("rate_sample", "delivered_ce", 20, 4),
    s("rate_sample", "interval_us", 24, 8),
    f("rate_sample", "snd_interval_us", 32, 4, false),
    f("rate_sample", "rcv_interval_us", 36, 4, false),
    s("rate_sample", "rtt_us", 40, 8),
    s("rate_sample", "losses", 48, 4),
    f("rate_sample", "acked_sacked", 52, 4, false),
    f("rate_sample", "prior_in_flight", 56, 4, false),
    f("rate_sample", "last_end_seq", 60, 4, false),
    f("rate_sample", "is_app_limited", 64, 1, false),
    f("rate_sample", "is_retrans", 65, 1, false),
    f("rate_sample", "is_ack_delayed", 66, 1, false),
];

/// Size of the structs the simulator describes (for TYPE_SIZE relocations).
pub fn struct_size(name: &str) -> Option<u32> {
    match name {
        "sock" | "inet_sock" | "inet_connection_sock" | "tcp_sock" => Some(SOCK_LEN as u32),
        "ack_sample" => Some(ACK_SAMPLE_LEN as u32),
        "rate_sample" => Some(RATE_SAMPLE_LEN as u32),
        _ => None,
    }
}

pub fn lookup(strukt: &str, member: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.strukt == strukt && f.member == member)
}

/// The kernel functions (kfuncs) the simulator implements, by name; a
/// call's id is the index here (the VM matches on it: keep the order).
pub static KFUNCS: &[&str] =
    &["tcp_slow_start", "tcp_cong_avoid_ai", "tcp_reno_cong_avoid", "tcp_reno_ssthresh", "tcp_reno_undo_cwnd"];

/// BPF helpers the simulator implements, by number.
pub static HELPERS: &[(i32, &str)] = &[
    (4, "bpf_probe_read"),
    (5, "bpf_ktime_get_ns"),
    (6, "bpf_trace_printk"),
    (7, "bpf_get_prandom_u32"),
    (113, "bpf_probe_read_kernel"),
    (116, "bpf_tcp_send_ack"),
    (118, "bpf_jiffies64"),
    (125, "bpf_ktime_get_boot_ns"),
    (160, "bpf_ktime_get_coarse_ns"),
    (208, "bpf_ktime_get_tai_ns"),
];
