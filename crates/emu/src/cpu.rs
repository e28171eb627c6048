//! Where the emulator and the hosts' kernel work run.
//!
//! A write to the TUN device normally carries the packet through the whole
//! receiving stack inside the write call: the router's forwarding, the veth,
//! and the destination host's TCP (for an ACK: the sender's ACK processing
//! and the new data it sends). On one thread that caps the emulator at a
//! few hundred Mbit/s. So the emulator pins itself to one CPU and sets
//! receive packet steering (RPS) on the TUN device's queue to the other
//! CPUs: each write then only queues the packet for a softirq on another CPU,
//! and the hosts' kernel work runs there, in parallel with the emulator.

use serde::Deserialize;
use std::io;

/// The `cpu` field of the emulator config: `"auto"` (the default), `"off"`
/// or a CPU number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Placement {
    /// The last CPU this process may use; RPS to the others. Nothing is
    /// changed when only one CPU is allowed.
    #[default]
    Auto,
    /// No pinning, no RPS (every write does the hosts' work inline).
    Off,
    /// Pin to this CPU; RPS to the other allowed CPUs.
    Cpu(usize),
}

impl<'de> Deserialize<'de> for Placement {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Word(String),
            Number(usize),
        }
        match Raw::deserialize(d)? {
            Raw::Word(w) if w == "auto" => Ok(Placement::Auto),
            Raw::Word(w) if w == "off" => Ok(Placement::Off),
            Raw::Number(n) => Ok(Placement::Cpu(n)),
            Raw::Word(w) => Err(serde::de::Error::custom(format!(
                "cpu: {w:?} is not \"auto\", \"off\" or a CPU number"
            ))),
        }
    }
}

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set within its size.
    Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect())
}

/// Run the calling thread on `cpu` only.
pub fn pin_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no CPU {cpu}")));
    }
    // SAFETY: a zeroed cpu_set_t with one bit set, passed with its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Restore the thread's CPU set.
pub fn set_allowed(cpus: &[usize]) {
    // SAFETY: as in pin_thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// A CPU set in the kernel's bitmap format for sysfs masks: hex words of 32
/// bits, most significant first, separated by commas ("0" for none).
pub fn mask_string(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |&m| m / 32 + 1);
    let mut w = vec![0u32; words];
    for &c in cpus {
        w[c / 32] |= 1 << (c % 32);
    }
    let mut parts: Vec<String> = w.iter().rev().map(|x| format!("{x:08x}")).collect();
    // The kernel prints the first word without leading zeros.
    parts[0] = format!("{:x}", w[words - 1]);
    parts.join(",")
}

fn rps_path(dev: &str) -> String {
    format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus")
}

/// Steer what is written to `dev` to `cpus`; returns the previous mask.
/// /sys must be the device's network namespace's (as under `ip netns exec`).
pub fn set_rps(dev: &str, cpus: &[usize]) -> io::Result<String> {
    let path = rps_path(dev);
    let old = std::fs::read_to_string(&path)?.trim().to_string();
    std::fs::write(&path, mask_string(cpus))?;
    Ok(old)
}

pub fn restore_rps(dev: &str, mask: &str) {
    let _ = std::fs::write(rps_path(dev), mask);
}

/// What placement did: the CPU the emulator runs on and the RPS CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    pub cpu: usize,
    pub rps: Vec<usize>,
    /// To undo at the end: the thread's CPU set and the old RPS mask.
    pub allowed_before: Vec<usize>,
    pub rps_before: String,
}

/// Choose the emulator's CPU and the RPS set from the allowed CPUs; None
/// when there is nothing to split (off, or a single CPU).
pub fn plan(placement: Placement, allowed: &[usize]) -> Result<Option<(usize, Vec<usize>)>, String> {
    let cpu = match placement {
        Placement::Off => return Ok(None),
        Placement::Auto => match allowed.last() {
            Some(&c) if allowed.len() >= 2 => c,
            _ => return Ok(None),
        },
        Placement::Cpu(c) => {
            if !allowed.contains(&c) {
                return Err(format!("cpu {c} is not one this process may use (allowed: {allowed:?})"));
            }
            c
        }
    };
    let rps: Vec<usize> = allowed.iter().copied().filter(|&c| c != cpu).collect();
    Ok(Some((cpu, rps)))
}

/// Pin the calling thread and set RPS on `dev` per `placement`.
pub fn apply(placement: Placement, dev: &str) -> Result<Option<Applied>, String> {
    let allowed = allowed_cpus().map_err(|e| format!("cannot read the CPU affinity: {e}"))?;
    let Some((cpu, rps)) = plan(placement, &allowed)? else { return Ok(None) };
    // RPS with an empty set (one CPU allowed, pinned there) means "off".
    let rps_before = set_rps(dev, &rps).map_err(|e| format!("cannot set RPS on {dev}: {e}"))?;
    if let Err(e) = pin_thread(cpu) {
        restore_rps(dev, &rps_before);
        return Err(format!("cannot pin the emulator to CPU {cpu}: {e}"));
    }
    Ok(Some(Applied { cpu, rps, allowed_before: allowed, rps_before }))
}

pub fn undo(a: &Applied, dev: &str) {
    restore_rps(dev, &a.rps_before);
    set_allowed(&a.allowed_before);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_in_the_kernel_format() {
        assert_eq!(mask_string(&[]), "0");
        assert_eq!(mask_string(&[0]), "1");
        assert_eq!(mask_string(&[0, 1]), "3");
        assert_eq!(mask_string(&[1, 3]), "a");
        assert_eq!(mask_string(&[31]), "80000000");
        assert_eq!(mask_string(&[0, 32]), "1,00000001");
        assert_eq!(mask_string(&[33, 64]), "1,00000002,00000000");
    }

    #[test]
    fn plan_takes_the_last_cpu_and_steers_to_the_rest() {
        assert_eq!(plan(Placement::Auto, &[0, 1]).unwrap(), Some((1, vec![0])));
        assert_eq!(plan(Placement::Auto, &[0, 2, 5]).unwrap(), Some((5, vec![0, 2])));
        assert_eq!(plan(Placement::Auto, &[3]).unwrap(), None);
        assert_eq!(plan(Placement::Off, &[0, 1]).unwrap(), None);
        assert_eq!(plan(Placement::Cpu(0), &[0, 1]).unwrap(), Some((0, vec![1])));
        let e = plan(Placement::Cpu(4), &[0, 1]).unwrap_err();
        assert!(e.contains("cpu 4") && e.contains("[0, 1]"), "{e}");
    }

    #[test]
    fn placement_parses_auto_off_and_numbers() {
        let p = |s: &str| serde_json::from_str::<Placement>(s);
        assert_eq!(p("\"auto\"").unwrap(), Placement::Auto);
        assert_eq!(p("\"off\"").unwrap(), Placement::Off);
        assert_eq!(p("3").unwrap(), Placement::Cpu(3));
        assert!(p("\"fast\"").is_err());
        assert!(p("-1").is_err());
    }

    #[test]
    fn allowed_cpus_includes_the_current_one() {
        let cpus = allowed_cpus().unwrap();
        // SAFETY: plain call.
        let cur = unsafe { libc::sched_getcpu() };
        assert!(cur >= 0 && cpus.contains(&(cur as usize)), "{cur} not in {cpus:?}");
    }
}
