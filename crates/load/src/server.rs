//! The load server at the receiver: accepts connections until the end of
//! the run, one thread each; bulk data is read and discarded, RPC requests
//! are answered with their response.

use crate::proto::{Header, Kind, HEADER_LEN};
use crate::sys::{self, Halt, Stop};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{SocketAddrV4, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: SocketAddrV4,
    pub stop_at_monotonic_ns: u64,
    /// Optional: also report the time of the last byte relative to it.
    #[serde(default)]
    pub t0_monotonic_ns: Option<u64>,
}

#[derive(Default, Debug)]
struct ConnResult {
    header: Option<Header>,
    bytes: u64,
    last_byte_ns: Option<u64>,
    requests: u64,
    error: Option<String>,
}

fn serve(sock: OwnedFd, end: u64, stop: &Stop) -> ConnResult {
    let fd = sock.as_raw_fd();
    let mut r = ConnResult::default();
    let mut hdr = [0u8; HEADER_LEN];
    let mut got = 0usize;
    let res = sys::read_n(fd, HEADER_LEN as u64, &mut hdr, end, stop, &mut |n| got += n);
    if let Err(e) = res {
        if got > 0 {
            r.error = Some(format!("incomplete header ({got} bytes): {e:?}"));
        }
        return r;
    }
    let h = match Header::decode(&hdr) {
        Ok(h) => h,
        Err(e) => {
            r.error = Some(e);
            return r;
        }
    };
    if let Err(e) = sys::set_cca(fd, &h.cca) {
        r.error = Some(format!("flow {}: {}", h.flow_id, sys::cca_error(&h.cca, &e)));
        r.header = Some(h);
        return r;
    }
    if h.kind == Kind::Rpc {
        let _ = sys::set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    }
    let mut buf = vec![0u8; 256 * 1024];
    let mut count = |n: usize| {
        r.bytes += n as u64;
        r.last_byte_ns = Some(sys::monotonic_ns());
    };
    let res = match h.kind {
        // A transfer is a bulk flow that ends: read until the client's FIN.
        Kind::Bulk | Kind::Transfer => sys::read_n(fd, u64::MAX, &mut buf, end, stop, &mut count),
        Kind::Rpc => {
            let zeros = vec![0u8; 64 * 1024];
            let mut served = 0u64;
            let res = loop {
                if let Err(e) = sys::read_n(fd, h.request_bytes, &mut buf, end, stop, &mut count) {
                    break Err(e);
                }
                if let Err(e) = sys::write_n(fd, h.response_bytes, &zeros, end, stop) {
                    break Err(e);
                }
                served += 1;
            };
            r.requests = served;
            res
        }
    };
    match res {
        Ok(()) | Err(Halt::Stopped) | Err(Halt::Eof) => {}
        Err(Halt::Io(e)) if e.raw_os_error() == Some(libc::ECONNRESET) => {}
        Err(Halt::Io(e)) => r.error = Some(format!("flow {}: {e}", h.flow_id)),
    }
    r.header = Some(h);
    r
}

/// Serve until `stop_at_monotonic_ns` (docs/interfaces.md §4).
pub fn run(cfg: ServerConfig) -> Result<Value, String> {
    let listener = TcpListener::bind(cfg.listen).map_err(|e| format!("cannot listen on {}: {e}", cfg.listen))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let end = cfg.stop_at_monotonic_ns;
    let stop = std::sync::Arc::new(Stop::new());
    let guard = signals::SignalGuard::install();
    let mut handles = Vec::new();
    let mut accept_error = None;
    loop {
        if sys::wait_fd(listener.as_raw_fd(), libc::POLLIN, end, &stop).is_err() {
            break;
        }
        match listener.accept() {
            Ok((s, _)) => {
                let st = stop.clone();
                let fd: OwnedFd = s.into();
                // accept() does not pass on the listener's O_NONBLOCK.
                // SAFETY: plain fcntl on our fd.
                unsafe {
                    let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
                }
                match std::thread::Builder::new().name("conn".into()).spawn(move || serve(fd, end, &st)) {
                    Ok(h) => handles.push(h),
                    Err(e) => {
                        accept_error = Some(format!("cannot start a connection thread: {e}"));
                        break;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
            Err(e) => {
                accept_error = Some(format!("accept on {}: {e}", cfg.listen));
                break;
            }
        }
    }
    if accept_error.is_some() {
        stop.abort.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let results: Vec<ConnResult> = handles.into_iter().map(|h| h.join().unwrap_or_default()).collect();
    drop(guard);
    if let Some(e) = accept_error {
        return Err(e);
    }
    // Per flow (a flow id seen twice adds up).
    let mut flows: BTreeMap<u32, (Header, u64, Option<u64>, u64, u64)> = BTreeMap::new();
    let mut errors = Vec::new();
    for r in &results {
        if let Some(e) = &r.error {
            errors.push(e.clone());
        }
        if let Some(h) = &r.header {
            let e = flows.entry(h.flow_id).or_insert((h.clone(), 0, None, 0, 0));
            e.1 += r.bytes;
            e.2 = e.2.max(r.last_byte_ns);
            e.3 += r.requests;
            e.4 += 1;
        }
    }
    let flows: Vec<Value> = flows
        .into_iter()
        .map(|(id, (h, bytes, last, requests, conns))| {
            json!({
                "flow_id": id,
                "kind": h.kind.name(),
                "cca": h.cca,
                "bytes_received": bytes,
                "last_byte_monotonic_ns": last,
                "last_byte_us": match (last, cfg.t0_monotonic_ns) {
                    (Some(l), Some(t0)) => Some(l.saturating_sub(t0) / 1000),
                    _ => None,
                },
                "requests_served": requests,
                "connections": conns,
                // A transfer: all its bytes arrived (then last_byte_* is its completion).
                "complete": (h.kind == Kind::Transfer).then_some(bytes >= h.request_bytes),
            })
        })
        .collect();
    Ok(json!({"flows": flows, "connections": results.len(), "errors": errors, "stopped_by_signal": signals::stop_requested()}))
}

pub fn run_json(input: &str) -> Result<String, String> {
    let cfg: ServerConfig = serde_json::from_str(input).map_err(|e| format!("invalid load server config: {e}"))?;
    run(cfg).map(|v| v.to_string())
}
