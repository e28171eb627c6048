//! Linux's send buffer: what the data a socket holds is charged
//! (`sk_wmem_queued`, by skb truesize), how large the buffer may grow
//! (`sk_sndbuf`, autotuned by `tcp_sndbuf_expand`), and when a writer that
//! found it full may write again (`sk_stream_write_space`).
//!
//! Data is charged from the application's write until the cumulative ACK
//! frees it, so segments held SACKed behind a hole keep their charge; in a
//! long recovery the buffer fills and the application stops writing, which
//! can leave a sender with nothing new to send whatever cwnd allows.
//!
//! Figures are Linux 6.18's on x86-64, read off a running kernel (a probe
//! on `sock_send_length`, docs/sim-model.md): a 44-byte write is charged
//! 876 bytes, and a new connection's buffer is 46,080 bytes
//! (2 × 10 segments × 2,304).

use crate::config::TcpConfig;

/// Charge of one skb beyond its payload: the small head
/// `tcp_stream_alloc_skb` allocates (MAX_TCP_HEADER, 256 bytes), the
/// `sk_buff` (256) and the `skb_shared_info` (320), each cache-aligned.
pub const SKB_OVERHEAD: u64 = 832;
const MAX_TCP_HEADER: u64 = 256;
const SHARED_INFO: u64 = 320;
const SK_BUFF: u64 = 256;
/// `tcp_init_cwnd`'s 10 segments: the buffer is sized for at least these.
const INIT_SEGS: u64 = 10;
/// `tcp_wmem[1]`: a socket's buffer before the connection is set up.
const WMEM_DEFAULT: u64 = 16_384;
/// The legacy GSO limit (`sk_gso_max_size`): `tcp_sendmsg` builds skbs of
/// at most this much payload.
const GSO_MAX_SIZE: u64 = 65_536;
/// `TCP_MSS_DEFAULT`: below this a peer's window is not halved.
const MSS_DEFAULT: u64 = 536;
/// The largest window a SYN or SYN-ACK can carry: its window field is
/// never scaled (RFC 7323).
pub const SYN_WINDOW_MAX: u64 = 65_535;

#[derive(Clone, Debug)]
pub struct SendBuffer {
    /// `sk_sndbuf`.
    limit: u64,
    /// `tcp_wmem[2]`: autotuning grows the buffer up to this.
    max: u64,
    /// `tcp_sndbuf_expand`'s allowance per segment: the worst case, one
    /// skb per segment with a power-of-two head.
    per_mss: u64,
    /// Payload of the skbs a write fills (`tcp_xmit_size_goal`).
    size_goal: u64,
    mss: u64,
    /// The largest window the peer has advertised (`tp->max_window`).
    max_window: u64,
    /// Sent skbs not yet freed by the cumulative ACK.
    sent_skbs: u64,
    /// SOCK_NOSPACE: the writer found the buffer full and waits.
    nospace: bool,
}

impl SendBuffer {
    pub fn new(cfg: &TcpConfig) -> SendBuffer {
        let mss = cfg.mss as u64;
        // The peer's advertised MSS (`mss_clamp`): the payload without the
        // 12 bytes of the timestamp option that `header_bytes` counts.
        let mss_clamp = mss + (cfg.header_bytes as u64).saturating_sub(40);
        SendBuffer {
            limit: WMEM_DEFAULT.min(cfg.wmem_bytes),
            max: cfg.wmem_bytes,
            per_mss: (mss_clamp + MAX_TCP_HEADER + SHARED_INFO).next_power_of_two() + SK_BUFF,
            size_goal: (GSO_MAX_SIZE / mss).max(1) * mss,
            mss,
            max_window: 0,
            sent_skbs: 0,
            nospace: false,
        }
    }

    /// `sk_sndbuf`, bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Payload bytes of the skbs a write fills.
    pub fn size_goal(&self) -> u64 {
        self.size_goal
    }

    /// The peer advertised a window of `bytes`. Skbs are at most half the
    /// largest it ever advertised (`tcp_bound_to_half_wnd`), so the first
    /// write after a SYN-ACK, whose window field holds at most 65,535, fills
    /// skbs of 22 segments of 1,448 bytes, and later ones, once an ACK has
    /// carried the scaled window, 45.
    pub fn see_window(&mut self, bytes: u64) {
        if bytes <= self.max_window {
            return;
        }
        self.max_window = bytes;
        let cutoff = if bytes > MSS_DEFAULT { bytes / 2 } else { bytes };
        self.size_goal = (cutoff.min(GSO_MAX_SIZE) / self.mss).max(1) * self.mss;
    }

    /// `tcp_sndbuf_expand` (called when the connection is set up, and by
    /// `tcp_new_space` when the buffer held the sender back): room for
    /// `factor` (the CCA's `sndbuf_expand`, else 2) times the larger of
    /// cwnd, the initial window and reordering + 1 worst-case segments.
    pub fn expand(&mut self, cwnd: u32, reordering: u32, factor: u32) {
        let segs = (cwnd as u64).max(INIT_SEGS).max(reordering as u64 + 1);
        let want = factor as u64 * segs * self.per_mss;
        if self.limit < want {
            self.limit = want.min(self.max);
        }
    }

    /// `sk_wmem_queued`: `payload` bytes held (written and not cumulatively
    /// acknowledged) in the sent skbs and `unsent_skbs` unsent ones (the
    /// write queue's).
    pub fn queued(&self, payload: u64, unsent_skbs: u64) -> u64 {
        payload + SKB_OVERHEAD * (self.sent_skbs + unsent_skbs)
    }

    /// What one `tcp_sendmsg` takes now: `tail_room`, what the unsent tail
    /// skb still takes up to `size_goal` (copied without a memory check),
    /// then a new skb of `size_goal` while the charge, the tail's top-up
    /// included, is below the limit (the check comes before each new skb,
    /// so a write may overshoot; a writer that waited for memory was
    /// stopped at such a check, with its tail full).
    pub fn room(&self, payload: u64, unsent_skbs: u64, tail_room: u64) -> u64 {
        let below = self.limit.saturating_sub(self.queued(payload + tail_room, unsent_skbs));
        tail_room + below.div_ceil(self.size_goal + SKB_OVERHEAD) * self.size_goal
    }

    /// The writer runs (in `tcp_sendmsg`): whatever waited, it no longer
    /// does, so a `tcp_check_space` in its own transmissions wakes nothing.
    pub fn writer_runs(&mut self) {
        self.nospace = false;
    }

    /// The writer wanted more than the buffer took: it waits (SOCK_NOSPACE).
    pub fn set_nospace(&mut self) {
        self.nospace = true;
    }

    /// One more sent skb: a transmission, or a sent skb cut in two
    /// (`tcp_fragment`).
    pub fn add_skb(&mut self) {
        self.sent_skbs += 1;
    }

    pub fn on_skb_freed(&mut self) {
        self.sent_skbs -= 1;
    }

    /// SOCK_NOSPACE: the writer waits, so `tcp_check_space` looks at the
    /// buffer (after every ACK and every new skb sent, whether or not an
    /// skb was freed: Linux 5.10 dropped SOCK_QUEUE_SHRUNK).
    #[inline]
    pub fn writer_waits(&self) -> bool {
        self.nospace
    }

    /// Whether a writer could wake with `payload` bytes held: what is
    /// queued is at least that, so not while it exceeds two thirds of the
    /// buffer (a cheap test before `queued`).
    #[inline]
    pub fn could_wake(&self, payload: u64) -> bool {
        3 * payload <= 2 * self.limit
    }

    /// `sk_stream_write_space`: the waiting writer wakes once a third of
    /// the buffer is free (free space at least half of what is queued).
    pub fn wake_writer(&mut self, queued: u64) -> bool {
        let woken = self.limit.saturating_sub(queued) >= queued / 2 && self.limit > queued;
        if woken {
            self.nospace = false;
        }
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> TcpConfig {
        crate::tcp::test_cfg()
    }

    #[test]
    fn a_new_connection_gets_linuxs_buffer() {
        // As read off Linux 6.18: 16 KB before, 46,080 bytes after the handshake.
        let mut b = SendBuffer::new(&cfg());
        assert_eq!(b.limit(), 16_384);
        b.expand(10, 3, 2);
        assert_eq!(b.limit(), 46_080);
        b.expand(10, 3, 2);
        assert_eq!(b.limit(), 46_080, "never shrinks or grows without cause");
        b.expand(22, 3, 2);
        assert_eq!(b.limit(), 101_376, "Linux's value after one expansion at cwnd 22");
        b.expand(10_000, 3, 3);
        assert_eq!(b.limit(), 4 << 20, "capped at tcp_wmem[2]");
    }

    /// `tcp_bound_to_half_wnd`: skbs of half the largest window seen.
    #[test]
    fn skbs_are_at_most_half_the_peers_largest_window() {
        let mut b = SendBuffer::new(&cfg());
        assert_eq!(b.size_goal(), 45 * 1448, "the GSO limit");
        b.see_window(SYN_WINDOW_MAX);
        assert_eq!(b.size_goal(), 22 * 1448, "a SYN-ACK's window: 31,856 bytes, as Linux's first skbs");
        b.see_window(40_000);
        assert_eq!(b.size_goal(), 22 * 1448, "the largest window counts");
        b.see_window(3 << 20);
        assert_eq!(b.size_goal(), 45 * 1448);
        let mut small = SendBuffer::new(&cfg());
        small.see_window(2_000);
        assert_eq!(small.size_goal(), 1448, "at least one segment");
    }

    #[test]
    fn writes_fill_whole_skbs_past_the_limit_and_wake_at_a_third_free() {
        let mut b = SendBuffer::new(&cfg());
        b.expand(10, 3, 2);
        // Empty: skbs of 45 segments until the charge reaches 46,080.
        assert_eq!(b.room(0, 0, 0), 65_160);
        assert_eq!(b.queued(65_160, 1), 65_160 + SKB_OVERHEAD);
        // Half an skb unsent: its rest first; a new skb only while the
        // charge, that rest included, is below the limit.
        assert_eq!(b.room(46_000, 1, 32_580), 32_580);
        assert_eq!(b.room(32_580, 1, 32_580), 32_580, "the top-up reaches the limit");
        assert_eq!(b.room(10_000, 1, 10_000), 10_000 + 65_160);
        // Ten segments sent as five skbs and acknowledged one by one.
        for _ in 0..5 {
            b.add_skb();
        }
        b.set_nospace();
        assert!(b.writer_waits());
        b.on_skb_freed();
        let (payload, unsent_skbs) = (40_000, 1);
        let q = b.queued(payload, unsent_skbs);
        assert_eq!(q, 40_000 + 832 * (4 + 1));
        assert!(!b.wake_writer(q), "44 KB of 46 KB queued");
        assert!(b.wake_writer(30_000), "two thirds or less queued");
        assert!(!b.writer_waits(), "woken: no longer waiting");
    }
}
