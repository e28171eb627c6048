//! SIGINT/SIGTERM as a stop flag, for as long as a guard lives. The previous
//! handlers (e.g. Python's) are put back when the last guard is dropped, so
//! the host process neither dies nor sees the signal: the loop ends cleanly
//! and returns its results. Guards nest (a count), so several loops may run
//! in threads of one process.
//!
//! One crate for the emulator and the load generator, so that when both run
//! in one process they share a single flag and a single saved handler.

pub mod remote;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static STOP: AtomicBool = AtomicBool::new(false);

struct Saved {
    count: usize,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

// SAFETY: sigaction is plain data.
unsafe impl Send for Saved {}

static SAVED: Mutex<Saved> = Mutex::new(Saved { count: 0, old: Vec::new() });

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

pub struct SignalGuard(());

impl SignalGuard {
    pub fn install() -> SignalGuard {
        let mut s = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        if s.count == 0 {
            STOP.store(false, Ordering::SeqCst);
            for sig in [libc::SIGINT, libc::SIGTERM] {
                // SAFETY: a zeroed sigaction is valid; the handler only stores to an atomic.
                unsafe {
                    let mut sa: libc::sigaction = std::mem::zeroed();
                    sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                    libc::sigemptyset(&mut sa.sa_mask);
                    sa.sa_flags = 0; // no SA_RESTART: a blocking wait returns EINTR
                    let mut prev: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, &sa, &mut prev) == 0 {
                        s.old.push((sig, prev));
                    }
                }
            }
        }
        s.count += 1;
        SignalGuard(())
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        let mut s = SAVED.lock().unwrap_or_else(|e| e.into_inner());
        s.count -= 1;
        if s.count == 0 {
            for (sig, prev) in s.old.drain(..) {
                // SAFETY: restoring what sigaction gave us.
                unsafe { libc::sigaction(sig, &prev, std::ptr::null_mut()) };
            }
        }
    }
}
