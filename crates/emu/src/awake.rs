//! Keeping the emulator's CPU awake between packets.
//!
//! In a virtual machine an idle virtual CPU halts, and the hypervisor must
//! schedule it again when the emulator's timer fires; on a busy host that
//! wake-up can take milliseconds (measured on a 2-CPU VM at 100 Mbit/s:
//! 208 to 6,132 of about 120,000 packets delivered more than 1 ms late, the
//! worst 3.7 to 10.6 ms, with the guest's steal time at 25-37 % during
//! runs; 27 to 1,030 with this thread). A thread at the
//! lowest priority there is (SCHED_IDLE), pinned to the emulator's CPU,
//! keeps that CPU from ever going idle: the emulator preempts it at once
//! inside the guest, and it never delays anything else (any other thread
//! runs before it). It only runs where the emulator has a CPU of its own,
//! and it stops with the emulator (the process's threads end with it).
//!
//! It rests while the emulator keeps its CPU busy anyway (more than
//! [`BUSY_LOAD`] of the last 10 ms window): there the CPU seldom idles, and
//! spinning cost the hosts' side throughput (one CUBIC flow at 1 Gbit/s:
//! 0.85-0.87 of the ceiling in the steady state with it always on,
//! 0.97-0.98 without, on the same VM; the other virtual CPU is likely its
//! SMT sibling on the host). The level is 0.7, above the emulator's load
//! at 100 Mbit/s (0.42-0.47 averaged over a run): with 0.5 the spinner
//! rested in any 10 ms window busier than that, and the CPU could halt. One
//! CUBIC flow at 100 Mbit/s, 10 s runs alternating 0.5 and 0.7 on a busy
//! host (session 54, six pairs): steal on the emulator's CPU 0.37-0.63 of
//! the hosts' CPU's with 0.5, 0.11-0.39 with 0.7; late packets 957-3,773
//! against 56-2,181. At 300 Mbit/s, four pairs: goodput 283-286 Mbit/s in
//! every run with 0.5 and in the two with 0.7 where the host was quiet, 277
//! and 230 in two with 0.7 during busy spells (10 and 21 % steal on the
//! hosts' CPU): no cost seen, but not ruled out there. At 1 Gbit/s
//! (0.88-0.93) it rests as before.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The emulator's load above which the spinner rests.
pub const BUSY_LOAD: f64 = 0.7;

/// The emulator thread's CPU load over its last window, as f64 bits.
static LOAD: AtomicU64 = AtomicU64::new(0);

/// Called by the emulator's loop each window with the fraction of it the
/// emulator's thread was on the CPU.
pub fn set_load(fraction: f64) {
    LOAD.store(fraction.to_bits(), Ordering::Relaxed);
}

fn resting() -> bool {
    f64::from_bits(LOAD.load(Ordering::Relaxed)) > BUSY_LOAD
}

pub struct KeepAwake {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl KeepAwake {
    /// Start the spinner on `cpu`; an error if it cannot be pinned there or
    /// put at idle priority (then nothing is left running).
    pub fn start(cpu: usize) -> io::Result<KeepAwake> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("emu-keep-awake".into()).spawn(move || {
            let setup = pin_idle(cpu);
            let ok = setup.is_ok();
            let _ = ready_tx.send(setup);
            while ok && !flag.load(Ordering::Relaxed) {
                if resting() {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                } else {
                    std::hint::spin_loop();
                }
            }
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(KeepAwake { stop, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(io::Error::other("the keep-awake thread ended before it started")),
        }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Pin the calling thread to `cpu` and give it SCHED_IDLE.
fn pin_idle(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET within its size; the
    // calls take the calling thread (0) and valid pointers.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(io::Error::other(format!("CPU {cpu} out of range")));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
        let param = libc::sched_param { sched_priority: 0 };
        if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spinner runs at idle priority on the CPU it was given, burns that
    /// CPU while it lives, rests while the emulator is busy, and is gone
    /// when dropped. (One test: the load it reads is the process's.)
    #[test]
    fn spins_at_idle_priority_on_its_cpu_rests_when_busy_and_stops() {
        set_load(0.0);
        assert!(!resting());
        // SAFETY: sched_getcpu has no arguments.
        let cpu = unsafe { libc::sched_getcpu() } as usize;
        // Other tests run on threads of this process too: count the spinners by name.
        let spinners = || -> Vec<std::path::PathBuf> {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|t| std::fs::read_to_string(t.join("comm")).map_or(false, |c| c.trim() == "emu-keep-awake"))
                .collect()
        };
        assert!(spinners().is_empty());
        let k = KeepAwake::start(cpu).expect("SCHED_IDLE needs no privilege");
        let found = spinners();
        assert_eq!(found.len(), 1);
        let spinner = &found[0];
        let stat = |field: usize| -> String {
            // stat(5), fields counted from 1; field 3 is the first after the name.
            let s = std::fs::read_to_string(spinner.join("stat")).unwrap();
            s.rsplit_once(") ").unwrap().1.split(' ').nth(field - 3).unwrap().to_string()
        };
        assert_eq!(stat(41), libc::SCHED_IDLE.to_string(), "policy");
        let status = std::fs::read_to_string(spinner.join("status")).unwrap();
        assert!(status.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Cpus_allowed_list:", &cpu.to_string()]),
                "pinned to CPU {cpu}:\n{status}");
        // It gets that CPU whenever nothing else wants it (other tests may, for a while).
        let ticks = || stat(14).parse::<u64>().unwrap() + stat(15).parse::<u64>().unwrap();
        let t0 = ticks();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ticks() <= t0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(ticks() > t0, "the spinner ran");
        set_load(0.9);
        assert!(resting());
        set_load(0.1);
        assert!(!resting());
        set_load(0.0);
        drop(k);
        // join returns when the kernel clears the thread's tid, a moment before
        // it leaves /proc/self/task: allow it that moment.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !spinners().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(spinners().is_empty(), "the spinner ended");
    }
}
