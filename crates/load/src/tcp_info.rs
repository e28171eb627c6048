//! Linux's `struct tcp_info` (include/uapi/linux/tcp.h, up to
//! `tcpi_snd_wnd`: 232 bytes, the layout since Linux 5.4 to which 6.x only
//! appends) and the BBR part of `union tcp_cc_info`. The kernel copies
//! min(our size, its size), so a newer kernel fills this prefix.

use std::io;
use std::os::fd::RawFd;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    /// snd_wscale : 4, rcv_wscale : 4
    pub wscale: u8,
    /// delivery_rate_app_limited : 1, fastopen_client_fail : 2
    pub app_limited_flags: u8,

    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,

    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,

    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,

    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    /// Smoothed RTT, µs.
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    /// Segments.
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,

    pub rcv_rtt: u32,
    pub rcv_space: u32,

    pub total_retrans: u32,

    /// Bytes per second.
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,

    pub notsent_bytes: u32,
    /// µs.
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,

    /// Bytes per second.
    pub delivery_rate: u64,

    /// µs.
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,

    pub delivered: u32,
    pub delivered_ce: u32,

    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,

    pub rcv_ooopack: u32,

    pub snd_wnd: u32,
}

/// TCP_INFO of a socket.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut info = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: info is a plain struct of `len` bytes.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info as *mut TcpInfo as *mut libc::c_void, &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

const TCP_CC_INFO: libc::c_int = 26;

/// BBR's part of TCP_CC_INFO (`tcp_bbr_info`): its bandwidth estimate and
/// the gains that say which mode it is in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BbrInfo {
    pub bw_bps: f64,
    /// In units of 1/256 (BBR_UNIT), as the kernel keeps them.
    pub pacing_gain: u32,
    pub cwnd_gain: u32,
}

/// The BBR part of TCP_CC_INFO, when the socket's CCA reports one.
pub fn bbr_info(fd: RawFd) -> Option<BbrInfo> {
    // union tcp_cc_info is 20 bytes; tcp_bbr_info is bw_lo, bw_hi, min_rtt,
    // pacing_gain, cwnd_gain (u32 each).
    let mut buf = [0u32; 5];
    let mut len = std::mem::size_of_val(&buf) as libc::socklen_t;
    // SAFETY: buf is `len` bytes.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, TCP_CC_INFO, buf.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r < 0 || (len as usize) < 20 {
        return None;
    }
    let bw = (buf[1] as u64) << 32 | buf[0] as u64; // bytes per second
    Some(BbrInfo { bw_bps: bw as f64 * 8.0, pacing_gain: buf[3], cwnd_gain: buf[4] })
}

const BBR_UNIT: u32 = 256;

/// The samples' `cca_state`: the CCA's own state, with the simulator's
/// names (its `CcaReport`). BBR's mode from its gains, as tcp_bbr.c sets
/// them per mode: ProbeRTT paces and sizes cwnd at gain 1; Startup and Drain
/// keep the high cwnd gain (2.89) and pace above or below 1; ProbeBW keeps a
/// cwnd gain of 2. Any other CCA: slow start while cwnd < ssthresh.
pub fn cca_state(i: &TcpInfo, bbr: Option<&BbrInfo>) -> &'static str {
    match bbr {
        Some(b) if b.cwnd_gain <= BBR_UNIT => "probe_rtt",
        Some(b) if b.cwnd_gain > 2 * BBR_UNIT => {
            if b.pacing_gain > BBR_UNIT {
                "startup"
            } else {
                "drain"
            }
        }
        Some(_) => "probe_bw",
        None if i.snd_cwnd < i.snd_ssthresh => "slow_start",
        None => "cong_avoid",
    }
}

impl TcpInfo {
    /// Bytes in flight as the kernel counts packets in flight
    /// (`tcp_packets_in_flight`): unacked − sacked − lost + retrans.
    pub fn inflight_bytes(&self) -> u64 {
        let pkts = (self.unacked as u64 + self.retrans as u64).saturating_sub(self.sacked as u64 + self.lost as u64);
        pkts * self.snd_mss as u64
    }

    pub fn cwnd_bytes(&self) -> u64 {
        self.snd_cwnd as u64 * self.snd_mss as u64
    }

    /// The pacing rate in bits/s; None when unlimited (~0).
    pub fn pacing_rate_bps(&self) -> Option<f64> {
        (self.pacing_rate != u64::MAX && self.pacing_rate != u32::MAX as u64).then_some(self.pacing_rate as f64 * 8.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layout_matches_linux_uapi() {
        // Sizes and offsets from gcc with /usr/include/linux/tcp.h (6.1 headers).
        assert_eq!(size_of::<TcpInfo>(), 232);
        assert_eq!(offset_of!(TcpInfo, rto), 8);
        assert_eq!(offset_of!(TcpInfo, rtt), 68);
        assert_eq!(offset_of!(TcpInfo, total_retrans), 100);
        assert_eq!(offset_of!(TcpInfo, pacing_rate), 104);
        assert_eq!(offset_of!(TcpInfo, bytes_acked), 120);
        assert_eq!(offset_of!(TcpInfo, min_rtt), 148);
        assert_eq!(offset_of!(TcpInfo, data_segs_out), 156);
        assert_eq!(offset_of!(TcpInfo, delivery_rate), 160);
        assert_eq!(offset_of!(TcpInfo, busy_time), 168);
        assert_eq!(offset_of!(TcpInfo, snd_wnd), 228);
    }

    #[test]
    fn derived_values() {
        let i = TcpInfo { unacked: 10, sacked: 3, lost: 2, retrans: 1, snd_mss: 1448, snd_cwnd: 20, pacing_rate: 1000, ..Default::default() };
        assert_eq!(i.inflight_bytes(), 6 * 1448);
        assert_eq!(i.cwnd_bytes(), 20 * 1448);
        assert_eq!(i.pacing_rate_bps(), Some(8000.0));
        assert_eq!(TcpInfo { pacing_rate: u64::MAX, ..i }.pacing_rate_bps(), None);
    }

    #[test]
    fn cca_state_names_the_ccas_own_state() {
        let i = TcpInfo { snd_cwnd: 20, snd_ssthresh: 30, ..Default::default() };
        assert_eq!(cca_state(&i, None), "slow_start");
        assert_eq!(cca_state(&TcpInfo { snd_ssthresh: 20, ..i }, None), "cong_avoid");
        // tcp_bbr.c's gains per mode (BBR_UNIT = 256): high gain 739, drain 88, cwnd gain 512.
        let bbr = |pacing_gain, cwnd_gain| Some(BbrInfo { bw_bps: 1e6, pacing_gain, cwnd_gain });
        assert_eq!(cca_state(&i, bbr(739, 739).as_ref()), "startup");
        assert_eq!(cca_state(&i, bbr(88, 739).as_ref()), "drain");
        for g in [320, 192, 256] {
            assert_eq!(cca_state(&i, bbr(g, 512).as_ref()), "probe_bw");
        }
        assert_eq!(cca_state(&i, bbr(256, 256).as_ref()), "probe_rtt");
    }

    #[test]
    fn tcp_info_of_a_loopback_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        use std::os::fd::AsRawFd;
        let i = tcp_info(c.as_raw_fd()).unwrap();
        assert_eq!(i.state, 1, "ESTABLISHED");
        assert!(i.snd_mss > 0 && i.snd_cwnd > 0);
    }
}
