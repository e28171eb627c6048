//! The load client: every flow of one sender host, each in its own thread
//! with its own socket and congestion control, and a sampler (the calling
//! thread) that reads TCP_INFO of every socket at the sample interval. With
//! a cgroup, a sock_ops program counts each flow's RTT samples (sockops.rs).

use crate::proto::{Header, Kind, HEADER_LEN};
use crate::sys::{self, Halt, Stop};
use crate::tcp_info::{self, TcpInfo};
use serde::Deserialize;
use serde_json::{json, Value};
use std::io::Write;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    pub server: SocketAddrV4,
    pub t0_monotonic_ns: u64,
    pub stop_at_monotonic_ns: u64,
    pub sample_interval_ns: u64,
    pub flows: Vec<FlowConfig>,
    pub samples_path: String,
    /// A cgroup (v2) directory created for this client, where its sock_ops
    /// program runs (sockops.rs): the flows' RTT statistics and cwnd_clamp
    /// need it. Without one, rtt_mean_us and rtt_p99_us are null.
    #[serde(default)]
    pub cgroup: Option<String>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub id: u32,
    pub cca: String,
    pub kind: Kind,
    pub start_ns: u64,
    #[serde(default)]
    pub stop_ns: Option<u64>,
    #[serde(default)]
    pub request_bytes: Option<u64>,
    #[serde(default)]
    pub response_bytes: Option<u64>,
    #[serde(default)]
    pub think_ns: Option<u64>,
    #[serde(default)]
    pub mss: Option<u32>,
    /// DSCP for the flow's packets (IP_TOS = dscp << 2): the emulator's
    /// multi-queue disciplines take it as the traffic class.
    #[serde(default)]
    pub dscp: Option<u8>,
    /// SO_MAX_PACING_RATE in bit/s. Any value also turns on the kernel's
    /// own TCP pacing for the socket (without the fq qdisc).
    #[serde(default)]
    pub max_pacing_rate_bps: Option<u64>,
    /// Clamp the congestion window to this many segments (TCP-BPF).
    #[serde(default)]
    pub cwnd_clamp: Option<u32>,
    /// Transfer: the bytes to send, then the sending side is closed.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// Bind the socket to this local port before connecting: the emulator
    /// recognises the flow's packets by it (general networks).
    #[serde(default)]
    pub bind_port: Option<u16>,
    /// Connect to this server instead of the config's `server` (a network
    /// has a server on every host that is a flow's destination).
    #[serde(default)]
    pub server: Option<SocketAddrV4>,
}

/// `tcpi_bytes_acked` counts the SYN's sequence number and our header too;
/// the application's bytes are what is left.
const ACKED_OVERHEAD: u64 = HEADER_LEN as u64 + 1;

/// Bytes a bulk sender hands the socket per call.
const BULK_CHUNK: usize = 256 * 1024;

struct FlowOutcome {
    sock: Option<OwnedFd>,
    /// The socket's cookie in the sock_ops program's map.
    cookie: Option<u64>,
    /// (start ns since t0, latency ns) per completed request.
    rpcs: Vec<(u64, u64)>,
    error: Option<String>,
}

struct Shared {
    cfg: ClientConfig,
    stop: Stop,
    /// Each flow's socket once connected (-1 before). Sockets are closed
    /// only by the calling thread after every flow thread has ended, so the
    /// sampler never reads a reused descriptor.
    fds: Vec<AtomicI32>,
    sockops: Option<crate::sockops::SockOps>,
}

fn fail(shared: &Shared, msg: String) -> Option<String> {
    shared.stop.abort.store(true, Ordering::SeqCst);
    Some(msg)
}

fn run_flow(shared: &Shared, i: usize) -> FlowOutcome {
    let f = &shared.cfg.flows[i];
    let t0 = shared.cfg.t0_monotonic_ns;
    let end = shared.cfg.stop_at_monotonic_ns;
    let stop_at = f.stop_ns.map_or(end, |s| (t0 + s).min(end));
    let mut out = FlowOutcome { sock: None, cookie: None, rpcs: Vec::new(), error: None };
    if !sys::sleep_until(t0 + f.start_ns, &shared.stop) || t0 + f.start_ns >= stop_at {
        return out;
    }
    let sock = match sys::tcp_socket() {
        Ok(s) => s,
        Err(e) => {
            out.error = fail(shared, format!("flow {}: socket: {e}", f.id));
            return out;
        }
    };
    let fd = sock.as_raw_fd();
    out.sock = Some(sock);
    if let Err(e) = sys::set_cca(fd, &f.cca) {
        out.error = fail(shared, format!("flow {}: {}", f.id, sys::cca_error(&f.cca, &e)));
        return out;
    }
    if let Some(mss) = f.mss {
        if let Err(e) = sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_MAXSEG, mss as i32) {
            out.error = fail(shared, format!("flow {}: TCP_MAXSEG {mss}: {e}", f.id));
            return out;
        }
    }
    if let Some(ops) = shared.sockops.as_ref() {
        match ops.add(fd, f.cwnd_clamp) {
            Ok(cookie) => out.cookie = Some(cookie),
            Err(e) => {
                out.error = fail(shared, format!("flow {}: registering the socket with the sock_ops program: {e}", f.id));
                return out;
            }
        }
    }
    if let Some(dscp) = f.dscp {
        if let Err(e) = sys::set_int(fd, libc::IPPROTO_IP, libc::IP_TOS, i32::from(dscp) << 2) {
            out.error = fail(shared, format!("flow {}: IP_TOS (dscp {dscp}): {e}", f.id));
            return out;
        }
    }
    if let Some(bps) = f.max_pacing_rate_bps {
        if let Err(e) = sys::set_max_pacing_rate(fd, bps / 8) {
            out.error = fail(shared, format!("flow {}: SO_MAX_PACING_RATE {bps} bit/s: {e}", f.id));
            return out;
        }
    }
    if let Some(port) = f.bind_port {
        if let Err(e) = sys::bind_port(fd, port) {
            out.error = fail(shared, format!("flow {}: bind to port {port}: {e}", f.id));
            return out;
        }
    }
    if f.kind == Kind::Rpc {
        // Requests and responses go out whole, without waiting for ACKs of
        // their last partial segment (Nagle).
        let _ = sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    }
    let header = Header {
        flow_id: f.id,
        kind: f.kind,
        cca: f.cca.clone(),
        request_bytes: if f.kind == Kind::Transfer { f.size_bytes.unwrap_or(0) } else { f.request_bytes.unwrap_or(0) },
        response_bytes: f.response_bytes.unwrap_or(0).max(1),
    };
    let hdr = match header.encode() {
        Ok(h) => h,
        Err(e) => {
            out.error = fail(shared, e);
            return out;
        }
    };
    let server = f.server.unwrap_or(shared.cfg.server);
    match sys::connect(fd, server, end, &shared.stop) {
        Ok(()) => {}
        Err(Halt::Stopped) => return out,
        Err(e) => {
            out.error = fail(shared, format!("flow {}: connect to {server}: {e:?}", f.id));
            return out;
        }
    }
    shared.fds[i].store(fd, Ordering::SeqCst);
    let r = sys::write_n(fd, HEADER_LEN as u64, &hdr, end, &shared.stop).and_then(|_| match f.kind {
        Kind::Bulk => bulk(fd, stop_at, &shared.stop),
        Kind::Rpc => rpc(fd, &header, f.think_ns.unwrap_or(0), t0, stop_at, end, &shared.stop, &mut out.rpcs),
        Kind::Transfer => transfer(fd, header.request_bytes, stop_at, &shared.stop),
    });
    match r {
        Ok(()) | Err(Halt::Stopped) => {}
        Err(Halt::Eof) => out.error = fail(shared, format!("flow {}: the server closed the connection", f.id)),
        Err(Halt::Io(e)) => out.error = fail(shared, format!("flow {}: {e}", f.id)),
    }
    out
}

/// Write as fast as the socket takes until `stop_at`.
fn bulk(fd: RawFd, stop_at: u64, stop: &Stop) -> Result<(), Halt> {
    let buf = vec![0u8; BULK_CHUNK];
    loop {
        if sys::write_some(fd, &buf)? == 0 {
            sys::wait_fd(fd, libc::POLLOUT, stop_at, stop)?;
        } else if sys::monotonic_ns() >= stop_at || stop.requested() {
            return Ok(());
        }
    }
}

/// Write exactly `size` bytes (by `stop_at` at the latest), then close the
/// sending side; the socket stays open (for TCP_INFO) until the end.
fn transfer(fd: RawFd, size: u64, stop_at: u64, stop: &Stop) -> Result<(), Halt> {
    let buf = vec![0u8; BULK_CHUNK];
    sys::write_n(fd, size, &buf, stop_at, stop)?;
    sys::shutdown_write(fd)?;
    Ok(())
}

/// Closed loop: a request, its whole response, think, repeat. No new
/// request after `stop_at`; one under way may finish until `end`.
#[allow(clippy::too_many_arguments)]
fn rpc(fd: RawFd, h: &Header, think: u64, t0: u64, stop_at: u64, end: u64, stop: &Stop, rpcs: &mut Vec<(u64, u64)>) -> Result<(), Halt> {
    let zeros = vec![0u8; 64 * 1024];
    let mut scratch = vec![0u8; 64 * 1024];
    loop {
        let start = sys::monotonic_ns();
        if start >= stop_at || stop.requested() {
            return Ok(());
        }
        sys::write_n(fd, h.request_bytes, &zeros, end, stop)?;
        sys::read_n(fd, h.response_bytes, &mut scratch, end, stop, &mut |_| {})?;
        let done = sys::monotonic_ns();
        rpcs.push((start.saturating_sub(t0), done - start));
        if think > 0 && !sys::sleep_until(done + think, stop) {
            return Ok(());
        }
    }
}

/// The kernel's "no ssthresh yet" (TCP_INFINITE_SSTHRESH).
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// The largest congestion window and set ssthresh (segments) a flow's
/// TCP_INFO showed.
#[derive(Clone, Copy, Default)]
struct WindowPeaks {
    cwnd: Option<u32>,
    ssthresh: Option<u32>,
}

impl WindowPeaks {
    fn add(&mut self, i: &TcpInfo) {
        self.cwnd = self.cwnd.max(Some(i.snd_cwnd));
        if i.snd_ssthresh != INFINITE_SSTHRESH {
            self.ssthresh = self.ssthresh.max(Some(i.snd_ssthresh));
        }
    }
}

/// Application bytes the peer acknowledged (a transfer's FIN, acknowledged
/// after its last byte, is not one).
fn acked(i: &TcpInfo, f: &FlowConfig) -> u64 {
    let b = i.bytes_acked.saturating_sub(ACKED_OVERHEAD);
    match (f.kind, f.size_bytes) {
        (Kind::Transfer, Some(size)) => b.min(size),
        _ => b,
    }
}

/// `paced`: TCP paces the socket (a pacing CCA, or SO_MAX_PACING_RATE set).
/// Linux computes sk_pacing_rate for every socket (ss shows it) but an
/// unpaced one uses it only to size bursts and queues; the samples report
/// a pacing rate only where it paces, as the simulator's do.
fn sample_row(id: u32, time_us: u64, i: &TcpInfo, delivered: u64, paced: bool, bbr: Option<&tcp_info::BbrInfo>) -> Value {
    json!({
        "flow_id": id,
        "time_us": time_us,
        "cwnd_bytes": i.cwnd_bytes(),
        "srtt_us": i.rtt,
        "delivered_bytes": delivered,
        "retrans_segs": i.total_retrans,
        "inflight_bytes": i.inflight_bytes(),
        "pacing_rate_bps": if paced { i.pacing_rate_bps() } else { None },
        "delivery_rate_bps": i.delivery_rate as f64 * 8.0,
        "cca_state": tcp_info::cca_state(i, bbr),
        "bw_est_bps": bbr.map(|b| b.bw_bps),
    })
}

fn is_bbr(cca: &str) -> bool {
    cca.starts_with("bbr")
}

/// Whether TCP paces the flow: BBR asks for it, and any SO_MAX_PACING_RATE
/// switches it on (`max_rate`, and `pacing = "on"` on the linux backend).
fn is_paced(f: &FlowConfig) -> bool {
    is_bbr(&f.cca) || f.max_pacing_rate_bps.is_some()
}

/// Run every flow of one sender host (docs/interfaces.md §4).
pub fn run(cfg: ClientConfig) -> Result<Value, String> {
    if cfg.sample_interval_ns == 0 {
        return Err("sample_interval_ns must be positive".into());
    }
    for f in &cfg.flows {
        sys::check_cca(&f.cca).map_err(|e| format!("flow {}: {e}", f.id))?;
        if f.kind == Kind::Rpc && f.request_bytes.unwrap_or(0) == 0 {
            return Err(format!("flow {}: rpc needs request_bytes > 0", f.id));
        }
        if f.kind == Kind::Transfer && f.size_bytes.unwrap_or(0) == 0 {
            return Err(format!("flow {}: transfer needs size_bytes > 0", f.id));
        }
    }
    let mut samples =
        std::io::BufWriter::new(std::fs::File::create(&cfg.samples_path).map_err(|e| format!("cannot create {}: {e}", cfg.samples_path))?);
    let sockops = match cfg.cgroup.as_deref() {
        Some(dir) => Some(crate::sockops::SockOps::install(dir, cfg.flows.len())?),
        None if cfg.flows.iter().any(|f| f.cwnd_clamp.is_some()) => return Err("a flow has cwnd_clamp but the config gives no cgroup".into()),
        None => None,
    };
    let n = cfg.flows.len();
    let shared = Arc::new(Shared { cfg, stop: Stop::new(), fds: (0..n).map(|_| AtomicI32::new(-1)).collect(), sockops });
    let guard = signals::SignalGuard::install();
    sys::tight_timer_slack(); // inherited by the flow threads
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let s = shared.clone();
            std::thread::Builder::new().name(format!("flow-{}", s.cfg.flows[i].id)).spawn(move || run_flow(&s, i))
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot start a flow thread: {e}"))?;

    // The sampler.
    let cfg = &shared.cfg;
    let (t0, end, every) = (cfg.t0_monotonic_ns, cfg.stop_at_monotonic_ns, cfg.sample_interval_ns);
    let mut rows = 0u64;
    let mut k = 1u64;
    let mut line = Vec::with_capacity(512);
    // Each flow's largest congestion window and ssthresh in any TCP_INFO
    // taken, for the backend's check of the kernel's congestion state.
    let mut peaks = vec![WindowPeaks::default(); cfg.flows.len()];
    loop {
        let at = t0 + k * every;
        if at > end || !sys::sleep_until(at, &shared.stop) {
            break;
        }
        for (fi, f) in cfg.flows.iter().enumerate() {
            let fd = shared.fds[fi].load(Ordering::SeqCst);
            if fd < 0 {
                continue;
            }
            let Ok(info) = tcp_info::tcp_info(fd) else { continue };
            peaks[fi].add(&info);
            let bbr = if is_bbr(&f.cca) { tcp_info::bbr_info(fd) } else { None };
            line.clear();
            serde_json::to_writer(&mut line, &sample_row(f.id, k * every / 1000, &info, acked(&info, f), is_paced(f), bbr.as_ref())).expect("json");
            line.push(b'\n');
            samples.write_all(&line).map_err(|e| format!("writing {}: {e}", cfg.samples_path))?;
            rows += 1;
        }
        k += 1;
    }
    let outcomes: Vec<FlowOutcome> = handles
        .into_iter()
        .map(|h| h.join().unwrap_or_else(|_| FlowOutcome { sock: None, cookie: None, rpcs: vec![], error: Some("a flow thread panicked".into()) }))
        .collect();
    drop(guard);
    samples.flush().map_err(|e| format!("writing {}: {e}", cfg.samples_path))?;
    if let Some(e) = outcomes.iter().find_map(|o| o.error.clone()) {
        return Err(e);
    }

    let now = sys::monotonic_ns();
    let run_end_us = end.min(now).saturating_sub(t0) / 1000;
    let mut flows = Vec::with_capacity(n);
    let mut rpc_cols: [Vec<Value>; 5] = Default::default();
    for (fi, (f, o)) in cfg.flows.iter().zip(&outcomes).enumerate() {
        let info = o.sock.as_ref().and_then(|s| tcp_info::tcp_info(s.as_raw_fd()).ok()).filter(|_| shared.fds[fi].load(Ordering::SeqCst) >= 0);
        // The RTT statistic of docs/analysis.md, from the sock_ops program.
        let rtt = match (shared.sockops.as_ref(), o.cookie) {
            (Some(ops), Some(c)) => Some(ops.rtt(c).map_err(|e| format!("flow {}: reading its RTT samples: {e}", f.id))?),
            _ => None,
        };
        let mean = rtt.as_ref().and_then(|r| r.mean_us());
        let p99 = rtt.as_ref().and_then(|r| r.quantile_us(0.99));
        let min = info.filter(|i| i.min_rtt > 0 && i.min_rtt != u32::MAX).map(|i| i.min_rtt as f64);
        let stop_us = f.stop_ns.map_or(run_end_us, |s| (s / 1000).min(run_end_us));
        if let Some(i) = &info {
            peaks[fi].add(i);
        }
        let i = info.unwrap_or_default();
        flows.push(json!({
            "flow_id": f.id,
            "cca": f.cca,
            "kind": f.kind.name(),
            "connected": info.is_some(),
            "bytes_acked": acked(&i, f),
            "sent_segs": i.data_segs_out,
            "retrans_segs": i.total_retrans,
            "rtt_min_us": min,
            "rtt_mean_us": mean,
            "rtt_p99_us": p99,
            "rtt_samples": rtt.as_ref().map(|r| r.count),
            "busy_us": i.busy_time,
            "rwnd_limited_us": i.rwnd_limited,
            "sndbuf_limited_us": i.sndbuf_limited,
            "active_start_us": f.start_ns / 1000,
            "active_stop_us": stop_us,
            "max_cwnd_segs": peaks[fi].cwnd,
            "max_ssthresh_segs": peaks[fi].ssthresh,
        }));
        for &(start, lat) in &o.rpcs {
            rpc_cols[0].push(json!(f.id));
            rpc_cols[1].push(json!(f.request_bytes.unwrap_or(0)));
            rpc_cols[2].push(json!(f.response_bytes.unwrap_or(0).max(1)));
            rpc_cols[3].push(json!(start / 1000));
            rpc_cols[4].push(json!(lat as f64 / 1000.0));
        }
    }
    let [fid, req, rsp, start, lat] = rpc_cols;
    // Sockets close here, after the last TCP_INFO.
    drop(outcomes);
    Ok(json!({
        "flows": flows,
        "rpcs": {"flow_id": fid, "request_bytes": req, "response_bytes": rsp, "start_us": start, "latency_us": lat},
        "sample_rows": rows,
        "stopped_by_signal": signals::stop_requested(),
    }))
}

pub fn run_json(input: &str) -> Result<String, String> {
    let cfg: ClientConfig = serde_json::from_str(input).map_err(|e| format!("invalid load client config: {e}"))?;
    run(cfg).map(|v| v.to_string())
}
