//! The real [`Io`]: a TUN device (IFF_TUN | IFF_NO_PI) and CLOCK_MONOTONIC.

use crate::engine::Io;
use netcore::Nanos;
use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

/// _IOW('T', 202, int)
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// struct ifreq: the name, then a union (flags: short, mtu: int, ...).
#[repr(C, align(8))]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: [u8; 24],
}

impl IfReq {
    fn new(name: &str) -> IfReq {
        let mut r = IfReq { name: [0; libc::IFNAMSIZ], data: [0; 24] };
        for (d, c) in r.name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
            *d = c as libc::c_char;
        }
        r
    }
}

pub fn monotonic_ns() -> Nanos {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User + system CPU time of the calling thread (the emulator's loop), ns:
/// not the process's, whose keep-awake thread ([`crate::awake`]) burns
/// the rest of the CPU on purpose.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Make this thread's timed sleeps end on time instead of up to 50 µs late
/// (the default timer slack).
pub fn tight_timer_slack() {
    // SAFETY: plain prctl call.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// The calling thread's scheduling policy and priority, to restore.
pub struct Sched {
    policy: libc::c_int,
    param: libc::sched_param,
}

/// Put the calling thread under SCHED_FIFO at `priority`; the old policy.
pub fn set_realtime(priority: u32) -> io::Result<Sched> {
    // SAFETY: querying and setting the calling thread's (tid 0) policy.
    unsafe {
        let policy = libc::sched_getscheduler(0);
        let mut param: libc::sched_param = std::mem::zeroed();
        libc::sched_getparam(0, &mut param);
        let new = libc::sched_param { sched_priority: priority as libc::c_int };
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &new) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Sched { policy, param })
    }
}

pub fn restore_scheduling(s: &Sched) {
    // SAFETY: restoring what sched_getscheduler/sched_getparam returned.
    unsafe { libc::sched_setscheduler(0, s.policy, &s.param) };
}

/// Received and transmitted packets dropped by the kernel on device `dev`,
/// from /proc/net/dev (which shows the caller's network namespace, unlike
/// /sys, which shows the namespace /sys was mounted in).
pub fn dev_drops(dev: &str) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/net/dev").ok()?;
    parse_dev_drops(&text, dev)
}

fn parse_dev_drops(text: &str, dev: &str) -> Option<(u64, u64)> {
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else { continue };
        if name.trim() != dev {
            continue;
        }
        let v: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        // rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets errs drop ...
        return (v.len() >= 12).then(|| (v[3], v[11]));
    }
    None
}

/// The MTU of device `dev` in the caller's network namespace.
pub fn dev_mtu(dev: &str) -> Option<usize> {
    // SAFETY: a plain datagram socket, closed below.
    let s = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return None;
    }
    let mut req = IfReq::new(dev);
    // SAFETY: SIOCGIFMTU fills ifr_mtu (an int at the union's start) of our ifreq.
    let r = unsafe { libc::ioctl(s, libc::SIOCGIFMTU as _, &mut req as *mut IfReq) };
    // SAFETY: s is ours.
    unsafe { libc::close(s) };
    if r < 0 {
        return None;
    }
    let mtu = i32::from_ne_bytes(req.data[..4].try_into().unwrap());
    (mtu > 0).then_some(mtu as usize)
}

pub struct TunIo {
    fd: RawFd,
    /// Busy-wait (polling the device without sleeping) for the last this
    /// many ns before a deadline.
    pub spin_ns: u64,
    /// Time spent busy-waiting, ns.
    spun: u64,
    /// CPU budget: spinning is off for the next window when the emulator's thread
    /// used more than SPIN_CPU_CAP of the last one, so spinning alone never
    /// pushes a real-time emulator into the kernel's RT throttling (which
    /// would stop it for tens of ms).
    window: (Nanos, u64),
    spin_ok: bool,
}

const SPIN_WINDOW_NS: Nanos = 10_000_000;
const SPIN_CPU_CAP: f64 = 0.8;

impl TunIo {
    /// Attach to the existing TUN device `name` (no packet information).
    pub fn open(name: &str, spin_ns: u64) -> io::Result<TunIo> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad TUN device name {name:?}")));
        }
        let path = CString::new("/dev/net/tun").unwrap();
        // SAFETY: valid C string.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req = IfReq::new(name);
        req.data[..2].copy_from_slice(&(IFF_TUN | IFF_NO_PI).to_ne_bytes());
        // SAFETY: TUNSETIFF takes a pointer to an ifreq.
        if unsafe { libc::ioctl(fd, TUNSETIFF as _, &mut req as *mut IfReq) } < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}")));
        }
        tight_timer_slack();
        Ok(TunIo { fd, spin_ns, spun: 0, window: (monotonic_ns(), thread_cpu_ns()), spin_ok: true })
    }

    fn poll(&self, timeout_ns: u64) -> (i32, i16) {
        let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
        let ts = libc::timespec { tv_sec: (timeout_ns / 1_000_000_000) as _, tv_nsec: (timeout_ns % 1_000_000_000) as _ };
        // SAFETY: one valid pollfd, valid timespec, no signal mask.
        let r = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
        (r, p.revents)
    }
}

impl Drop for TunIo {
    fn drop(&mut self) {
        // SAFETY: fd is ours.
        unsafe { libc::close(self.fd) };
    }
}

impl Io for TunIo {
    fn now(&mut self) -> Nanos {
        monotonic_ns()
    }

    fn wait(&mut self, deadline: Nanos) {
        let mut spin_from = None;
        loop {
            let now = monotonic_ns();
            if now >= self.window.0 + SPIN_WINDOW_NS {
                let cpu = thread_cpu_ns();
                let used = cpu.saturating_sub(self.window.1) as f64 / (now - self.window.0) as f64;
                self.spin_ok = used < SPIN_CPU_CAP;
                crate::awake::set_load(used);
                self.window = (now, cpu);
            }
            if now >= deadline {
                break;
            }
            let rem = deadline - now;
            let timeout = if self.spin_ok { rem.saturating_sub(self.spin_ns) } else { rem };
            if timeout == 0 && spin_from.is_none() {
                spin_from = Some(now);
            }
            let (r, revents) = self.poll(timeout);
            if r < 0 {
                break; // EINTR: let the loop look at the stop flag
            }
            if r > 0 {
                if revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                    // A broken device: don't spin on it.
                    std::thread::sleep(std::time::Duration::from_nanos(rem.min(10_000_000)));
                }
                break;
            }
        }
        if let Some(t) = spin_from {
            self.spun += monotonic_ns() - t;
        }
    }

    fn spin_ns(&mut self) -> u64 {
        self.spun
    }

    fn recv(&mut self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(n as usize))
    }

    fn send(&mut self, pkt: &[u8]) -> io::Result<()> {
        // SAFETY: pkt is valid for pkt.len() bytes.
        let n = unsafe { libc::write(self.fd, pkt.as_ptr() as *const libc::c_void, pkt.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn cpu_ns(&mut self) -> u64 {
        thread_cpu_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_dev_drops() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0
ccbt1-tun: 5000 10 0 7 0 0 0 0 6000 12 0 9 0 0 0 0
";
        assert_eq!(parse_dev_drops(text, "ccbt1-tun"), Some((7, 9)));
        assert_eq!(parse_dev_drops(text, "eth9"), None);
    }

    #[test]
    fn loopback_mtu() {
        assert_eq!(dev_mtu("lo"), Some(65536));
    }
}
