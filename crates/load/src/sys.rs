//! Thin wrappers over the socket calls the load generator needs, all with
//! deadlines on CLOCK_MONOTONIC so nothing blocks past the end of a run.

use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The longest any wait lasts before looking at the stop flags again.
pub const CHECK_NS: u64 = 50_000_000;

/// Why a blocking helper gave up.
#[derive(Debug)]
pub enum Halt {
    /// The deadline passed or a stop was requested.
    Stopped,
    /// The peer closed the connection.
    Eof,
    Io(io::Error),
}

impl From<io::Error> for Halt {
    fn from(e: io::Error) -> Halt {
        Halt::Io(e)
    }
}

/// Stop flags shared by the threads of one client or server: a signal, or
/// another thread's fatal error.
pub struct Stop {
    pub abort: AtomicBool,
}

impl Stop {
    pub fn new() -> Stop {
        Stop { abort: AtomicBool::new(false) }
    }
    pub fn requested(&self) -> bool {
        self.abort.load(Ordering::Relaxed) || signals::stop_requested()
    }
}

impl Default for Stop {
    fn default() -> Self {
        Stop::new()
    }
}

/// Make this thread's timed sleeps end on time instead of up to 50 µs late.
pub fn tight_timer_slack() {
    // SAFETY: plain prctl call.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

fn sleep_abs(t: u64) {
    let ts = libc::timespec { tv_sec: (t / 1_000_000_000) as _, tv_nsec: (t % 1_000_000_000) as _ };
    // SAFETY: valid timespec; EINTR just returns early.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Sleep until `t` (CLOCK_MONOTONIC ns); false if a stop came first.
pub fn sleep_until(t: u64, stop: &Stop) -> bool {
    loop {
        if stop.requested() {
            return false;
        }
        let now = monotonic_ns();
        if now >= t {
            return true;
        }
        sleep_abs(t.min(now + CHECK_NS));
    }
}

/// poll() one fd for `events` until `deadline`; the returned events, 0 on
/// timeout or stop.
pub fn wait_fd(fd: RawFd, events: i16, deadline: u64, stop: &Stop) -> Result<i16, Halt> {
    loop {
        if stop.requested() {
            return Err(Halt::Stopped);
        }
        let now = monotonic_ns();
        if now >= deadline {
            return Err(Halt::Stopped);
        }
        let timeout = (deadline - now).min(CHECK_NS);
        let mut p = libc::pollfd { fd, events, revents: 0 };
        let ts = libc::timespec { tv_sec: (timeout / 1_000_000_000) as _, tv_nsec: (timeout % 1_000_000_000) as _ };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(Halt::Io(e));
        }
        if r > 0 {
            return Ok(p.revents);
        }
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: pointer to an int of the given size.
    cvt(unsafe { libc::setsockopt(fd, level, opt, &v as *const _ as *const libc::c_void, 4) }).map(|_| ())
}

/// SO_MAX_PACING_RATE in bytes/s, as a 64-bit value (the kernel takes an
/// unsigned long). Every value but ~0 also switches on TCP's internal pacing.
pub fn set_max_pacing_rate(fd: RawFd, bytes_per_s: u64) -> io::Result<()> {
    let v: u64 = bytes_per_s.min(u64::MAX - 1);
    // SAFETY: pointer to a u64 and its size.
    cvt(unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &v as *const _ as *const libc::c_void, 8) })
        .map(|_| ())
}

pub fn set_cca(fd: RawFd, name: &str) -> io::Result<()> {
    // SAFETY: the name's bytes, their length.
    cvt(unsafe { libc::setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_ptr() as *const libc::c_void, name.len() as _) })
        .map(|_| ())
}

pub fn get_cca(fd: RawFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is len bytes.
    cvt(unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr() as *mut libc::c_void, &mut len) })?;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(len as usize);
    Ok(String::from_utf8_lossy(&buf[..end]).into_owned())
}

/// What the kernel offers: /proc/sys/net/ipv4/tcp_available_congestion_control.
pub fn available_ccas() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").map(|s| s.trim().to_string()).unwrap_or_default()
}

pub fn tcp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket call; the fd is owned from here on.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) })?;
    // SAFETY: fd is a new, valid descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Check that the kernel lets a socket use `cca`; the error names it.
pub fn check_cca(cca: &str) -> Result<(), String> {
    let s = tcp_socket().map_err(|e| format!("socket: {e}"))?;
    set_cca(s.as_raw_fd(), cca).map_err(|e| cca_error(cca, &e))
}

pub fn cca_error(cca: &str, e: &io::Error) -> String {
    format!(
        "the kernel refused congestion control {cca:?} (TCP_CONGESTION: {e}); available: {} \
         (a missing algorithm may need `modprobe tcp_{cca}`)",
        available_ccas()
    )
}

fn sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*a.ip()).to_be() },
        sin_zero: [0; 8],
    }
}

/// Bind a socket to a local port (any address) before connecting, so the
/// emulator knows the flow by its port (SO_REUSEADDR: a port in TIME_WAIT
/// from an earlier connection may be taken again).
pub fn bind_port(fd: RawFd, port: u16) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    let sa = sockaddr(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, port));
    // SAFETY: valid sockaddr_in of its size.
    cvt(unsafe { libc::bind(fd, &sa as *const _ as *const libc::sockaddr, std::mem::size_of_val(&sa) as _) }).map(|_| ())
}

/// No more data from us (FIN after what is buffered); reading goes on.
pub fn shutdown_write(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain shutdown on our fd.
    cvt(unsafe { libc::shutdown(fd, libc::SHUT_WR) }).map(|_| ())
}

/// Non-blocking connect of a prepared socket, waiting until `deadline`.
pub fn connect(fd: RawFd, to: SocketAddrV4, deadline: u64, stop: &Stop) -> Result<(), Halt> {
    let sa = sockaddr(to);
    // SAFETY: valid sockaddr_in of its size.
    let r = unsafe { libc::connect(fd, &sa as *const _ as *const libc::sockaddr, std::mem::size_of_val(&sa) as _) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(Halt::Io(e));
        }
        wait_fd(fd, libc::POLLOUT, deadline, stop)?;
        let mut err: libc::c_int = 0;
        let mut len = 4 as libc::socklen_t;
        // SAFETY: pointer to an int.
        cvt(unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut err as *mut _ as *mut libc::c_void, &mut len) })?;
        if err != 0 {
            return Err(Halt::Io(io::Error::from_raw_os_error(err)));
        }
    }
    Ok(())
}

/// One non-blocking write; 0 when the socket takes nothing now.
pub fn write_some(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for its length. MSG_NOSIGNAL: a closed peer is an error, not SIGPIPE.
    let n = unsafe { libc::send(fd, buf.as_ptr() as *const libc::c_void, buf.len(), libc::MSG_NOSIGNAL) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EAGAIN) || e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(n as usize)
}

/// One non-blocking read: Ok(None) when nothing is waiting, Ok(Some(0)) at EOF.
pub fn read_some(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: buf is valid for its length.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EAGAIN) || e.raw_os_error() == Some(libc::EINTR) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(n as usize))
}

/// Write `n` bytes from `src` (repeated as needed) before `deadline`.
pub fn write_n(fd: RawFd, mut n: u64, src: &[u8], deadline: u64, stop: &Stop) -> Result<(), Halt> {
    while n > 0 {
        let chunk = &src[..(n.min(src.len() as u64) as usize)];
        let w = write_some(fd, chunk)?;
        if w == 0 {
            wait_fd(fd, libc::POLLOUT, deadline, stop)?;
        }
        n -= w as u64;
    }
    Ok(())
}

/// Read exactly `n` bytes (discarding them into `scratch`) before
/// `deadline`; `on_bytes` sees every read's size.
pub fn read_n(fd: RawFd, mut n: u64, scratch: &mut [u8], deadline: u64, stop: &Stop, on_bytes: &mut dyn FnMut(usize)) -> Result<(), Halt> {
    while n > 0 {
        let want = n.min(scratch.len() as u64) as usize;
        match read_some(fd, &mut scratch[..want])? {
            Some(0) => return Err(Halt::Eof),
            Some(r) => {
                on_bytes(r);
                n -= r as u64;
            }
            None => {
                wait_fd(fd, libc::POLLIN, deadline, stop)?;
            }
        }
    }
    Ok(())
}
