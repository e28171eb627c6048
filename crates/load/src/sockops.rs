//! The load client's TCP-BPF (sock_ops) program, one per client, attached
//! to a cgroup (v2) that the backend created for the run; the client moves
//! itself into it, so the program sees exactly this process's sockets.
//! Before connecting a flow the client puts the socket's cookie (SO_COOKIE)
//! in a hash map with a zeroed value; the program acts only on sockets it
//! finds there:
//!
//! * BPF_SOCK_OPS_TCP_CONNECT_CB (before the SYN): turns on the RTT
//!   callback (bpf_sock_ops_cb_flags_set(BPF_SOCK_OPS_RTT_CB_FLAG)), so the
//!   SYN's RTT is seen too.
//! * BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB: a per-flow congestion-window clamp,
//!   the way the netdev 2.2 experiments did it (TCP_BPF_SNDCWND_CLAMP,
//!   which in Linux also sets ssthresh; no socket option offers it).
//! * BPF_SOCK_OPS_RTT_CB: Linux's tcp_rtt_estimator calls it with the raw
//!   measurement (args[0], µs; args[1] is the new srtt << 3) on the first
//!   measurement and then once per round: when the cumulative ACK has passed
//!   the snd_nxt of the previous call (tp->rtt_seq). The program adds it to
//!   the flow's count, sum and histogram (`bucket`), read once at the end
//!   (`rtt`). The simulator counts the same samples (docs/analysis.md).
//!
//! Removing the cgroup (the backend does, at the end of the run) detaches
//! the program. It is written out instruction by instruction (no compiler
//! is needed at run time); `program` says what each does.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// bpf(2) commands, map and program types, attach type.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_SOCK_OPS: u32 = 13;
const BPF_CGROUP_SOCK_OPS: u32 = 3;

// Helpers the program calls, and the constants it uses (uapi/linux/bpf.h).
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_GET_SOCKET_COOKIE: i32 = 46;
const HELPER_SETSOCKOPT: i32 = 49;
const HELPER_SOCK_OPS_CB_FLAGS_SET: i32 = 59;
const SOCK_OPS_TCP_CONNECT_CB: i32 = 3;
const SOCK_OPS_ACTIVE_ESTABLISHED_CB: i32 = 4;
const SOCK_OPS_RTT_CB: i32 = 12;
const SOCK_OPS_RTT_CB_FLAG: i32 = 8;
const SOL_TCP: i32 = 6;
const TCP_BPF_SNDCWND_CLAMP: i32 = 1002;
const SO_COOKIE: libc::c_int = 57;

/// Histogram of RTTs in µs: exact below 128, then 128 buckets per power of
/// two (each under 0.8 % wide) up to 2^32 µs.
pub const SUB: u32 = 128;
pub const BUCKETS: usize = (SUB as usize) * 26;
/// Map value: clamp (u32), padding, count (u64), sum of µs (u64), histogram (u32 each).
const OFF_CLAMP: i16 = 0;
const OFF_COUNT: i16 = 8;
const OFF_SUM: i16 = 16;
const OFF_HIST: i16 = 24;
const VALUE_SIZE: usize = OFF_HIST as usize + 4 * BUCKETS;

/// The bucket of `v` µs, as the program computes it.
pub fn bucket(v: u32) -> usize {
    if v < SUB {
        return v as usize;
    }
    let shift = 31 - v.leading_zeros() - 7;
    (SUB * shift + (v >> shift)) as usize
}

/// The smallest and largest µs value of bucket `b`.
pub fn bucket_range(b: usize) -> (u64, u64) {
    let b = b as u64;
    let sub = SUB as u64;
    if b < sub {
        return (b, b);
    }
    let shift = b / sub - 1;
    let mant = b % sub + sub;
    (mant << shift, ((mant + 1) << shift) - 1)
}

/// One flow's RTT samples as the program counted them.
#[derive(Debug, Clone, PartialEq)]
pub struct RttSamples {
    pub count: u64,
    pub sum_us: u64,
    pub hist: Vec<u32>,
}

impl RttSamples {
    pub fn mean_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_us as f64 / self.count as f64)
    }

    /// Nearest-rank quantile (rank ⌈q·count⌉), as the middle of its bucket.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let total: u64 = self.hist.iter().map(|&n| n as u64).sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.hist.iter().enumerate() {
            seen += n as u64;
            if seen >= rank {
                let (lo, hi) = bucket_range(b);
                return Some((lo + hi) as f64 / 2.0);
            }
        }
        None
    }
}

/// One eBPF instruction: opcode, dst/src registers, offset, immediate.
#[derive(Clone, Copy)]
#[repr(C)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (src << 4) | dst, off, imm }
}

// Opcodes used below.
const MOV64_X: u8 = 0xbf; // dst = src
const MOV64_K: u8 = 0xb7; // dst = imm
const ADD64_K: u8 = 0x07; // dst += imm
const ADD64_X: u8 = 0x0f; // dst += src
const RSH64_K: u8 = 0x77; // dst >>= imm
const RSH64_X: u8 = 0x7f; // dst >>= src
const LSH64_K: u8 = 0x67; // dst <<= imm
const LDX_W: u8 = 0x61; // dst = *(u32 *)(src + off)
const LDX_DW: u8 = 0x79; // dst = *(u64 *)(src + off)
const STX_W: u8 = 0x63; // *(u32 *)(dst + off) = src
const STX_DW: u8 = 0x7b; // *(u64 *)(dst + off) = src
const LD_IMM64: u8 = 0x18; // dst = imm64 (two slots); src 1 = a map fd
const JA: u8 = 0x05; // goto +off
const JEQ_K: u8 = 0x15; // if dst == imm goto +off
const JNE_K: u8 = 0x55; // if dst != imm goto +off
const JGT_K: u8 = 0x25; // if dst > imm (unsigned) goto +off
const JLT_K: u8 = 0xa5; // if dst < imm (unsigned) goto +off
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const PSEUDO_MAP_FD: u8 = 1;

/// A jump to a label, resolved by `assemble`.
enum Item {
    I(Insn),
    Jump(u8, u8, i32, &'static str),
    Label(&'static str),
}

fn assemble(items: Vec<Item>) -> Vec<Insn> {
    let mut at = HashMap::new();
    let mut n = 0usize;
    for it in &items {
        match it {
            Item::Label(l) => {
                at.insert(*l, n);
            }
            _ => n += 1,
        }
    }
    let mut out = Vec::with_capacity(n);
    for it in items {
        match it {
            Item::I(x) => out.push(x),
            Item::Jump(code, dst, imm, l) => {
                let off = at[l] as i64 - out.len() as i64 - 1;
                out.push(insn(code, dst, 0, off as i16, imm));
            }
            Item::Label(_) => {}
        }
    }
    out
}

/// The program, with the map's fd in its LD_IMM64. r6 = ctx, r7 = the
/// flow's map value, r8 = op.
fn program(map_fd: RawFd) -> Vec<Insn> {
    use Item::{Jump as J, Label as L, I};
    assemble(vec![
        I(insn(MOV64_X, 6, 1, 0, 0)),                                // r6 = ctx (struct bpf_sock_ops *)
        I(insn(LDX_W, 8, 6, 0, 0)),                                  // r8 = ctx->op
        J(JEQ_K, 8, SOCK_OPS_TCP_CONNECT_CB, "lookup"),
        J(JEQ_K, 8, SOCK_OPS_ACTIVE_ESTABLISHED_CB, "lookup"),
        J(JEQ_K, 8, SOCK_OPS_RTT_CB, "lookup"),
        J(JA, 0, 0, "ret"),
        L("lookup"),
        I(insn(MOV64_X, 1, 6, 0, 0)),                                // r1 = ctx
        I(insn(CALL, 0, 0, 0, HELPER_GET_SOCKET_COOKIE)),            // r0 = cookie
        I(insn(STX_DW, 10, 0, -8, 0)),                               // stack[-8] = cookie
        I(insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd)),              // r1 = map
        I(insn(0, 0, 0, 0, 0)),                                      //   (second half)
        I(insn(MOV64_X, 2, 10, 0, 0)),                               // r2 = fp
        I(insn(ADD64_K, 2, 0, 0, -8)),                               // r2 = &stack[-8]
        I(insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM)),              // r0 = &value or NULL
        J(JEQ_K, 0, 0, "ret"),                                       // not ours
        I(insn(MOV64_X, 7, 0, 0, 0)),                                // r7 = value
        J(JNE_K, 8, SOCK_OPS_TCP_CONNECT_CB, "established"),
        I(insn(MOV64_X, 1, 6, 0, 0)),                                // r1 = ctx
        I(insn(MOV64_K, 2, 0, 0, SOCK_OPS_RTT_CB_FLAG)),             // r2 = BPF_SOCK_OPS_RTT_CB_FLAG
        I(insn(CALL, 0, 0, 0, HELPER_SOCK_OPS_CB_FLAGS_SET)),        // bpf_sock_ops_cb_flags_set(ctx, r2)
        J(JA, 0, 0, "ret"),
        L("established"),
        J(JNE_K, 8, SOCK_OPS_ACTIVE_ESTABLISHED_CB, "rtt"),
        I(insn(LDX_W, 1, 7, OFF_CLAMP, 0)),                          // r1 = clamp
        J(JEQ_K, 1, 0, "ret"),                                       // none
        I(insn(STX_W, 10, 1, -12, 0)),                               // stack[-12] = clamp
        I(insn(MOV64_X, 1, 6, 0, 0)),                                // r1 = ctx
        I(insn(MOV64_K, 2, 0, 0, SOL_TCP)),                          // r2 = SOL_TCP
        I(insn(MOV64_K, 3, 0, 0, TCP_BPF_SNDCWND_CLAMP)),            // r3 = TCP_BPF_SNDCWND_CLAMP
        I(insn(MOV64_X, 4, 10, 0, 0)),                               // r4 = fp
        I(insn(ADD64_K, 4, 0, 0, -12)),                              // r4 = &stack[-12]
        I(insn(MOV64_K, 5, 0, 0, 4)),                                // r5 = sizeof(int)
        I(insn(CALL, 0, 0, 0, HELPER_SETSOCKOPT)),                   // bpf_setsockopt(...)
        J(JA, 0, 0, "ret"),
        L("rtt"),                                                    // op == RTT_CB
        I(insn(LDX_W, 1, 6, 4, 0)),                                  // r1 = ctx->args[0] (µs)
        I(insn(LDX_DW, 2, 7, OFF_COUNT, 0)),                         // count += 1
        I(insn(ADD64_K, 2, 0, 0, 1)),
        I(insn(STX_DW, 7, 2, OFF_COUNT, 0)),
        I(insn(LDX_DW, 2, 7, OFF_SUM, 0)),                           // sum += r1
        I(insn(ADD64_X, 2, 1, 0, 0)),
        I(insn(STX_DW, 7, 2, OFF_SUM, 0)),
        // r3 = index of r1's highest set bit, by halving.
        I(insn(MOV64_K, 3, 0, 0, 0)),
        I(insn(MOV64_X, 2, 1, 0, 0)),
        J(JLT_K, 2, 1 << 16, "b8"),
        I(insn(RSH64_K, 2, 0, 0, 16)),
        I(insn(ADD64_K, 3, 0, 0, 16)),
        L("b8"),
        J(JLT_K, 2, 1 << 8, "b4"),
        I(insn(RSH64_K, 2, 0, 0, 8)),
        I(insn(ADD64_K, 3, 0, 0, 8)),
        L("b4"),
        J(JLT_K, 2, 1 << 4, "b2"),
        I(insn(RSH64_K, 2, 0, 0, 4)),
        I(insn(ADD64_K, 3, 0, 0, 4)),
        L("b2"),
        J(JLT_K, 2, 1 << 2, "b1"),
        I(insn(RSH64_K, 2, 0, 0, 2)),
        I(insn(ADD64_K, 3, 0, 0, 2)),
        L("b1"),
        J(JLT_K, 2, 2, "msb"),
        I(insn(ADD64_K, 3, 0, 0, 1)),
        L("msb"),
        J(JLT_K, 3, 7, "index"),                                     // below 128: bucket = value
        I(insn(ADD64_K, 3, 0, 0, -7)),                               // r3 = shift
        I(insn(RSH64_X, 1, 3, 0, 0)),                                // r1 = value >> shift (128..255)
        I(insn(LSH64_K, 3, 0, 0, 7)),                                // r3 = 128 * shift
        I(insn(ADD64_X, 1, 3, 0, 0)),                                // r1 = bucket
        L("index"),
        J(JGT_K, 1, BUCKETS as i32 - 1, "ret"),                      // (bounds the index for the verifier)
        I(insn(LSH64_K, 1, 0, 0, 2)),                                // r1 = 4 * bucket
        I(insn(ADD64_X, 7, 1, 0, 0)),                                // r7 = &hist[bucket] - OFF_HIST
        I(insn(LDX_W, 2, 7, OFF_HIST, 0)),                           // hist[bucket] += 1
        I(insn(ADD64_K, 2, 0, 0, 1)),
        I(insn(STX_W, 7, 2, OFF_HIST, 0)),
        L("ret"),
        I(insn(MOV64_K, 0, 0, 0, 1)),                                // return 1
        I(insn(EXIT, 0, 0, 0, 0)),
    ])
}

fn bpf(cmd: libc::c_long, attr: &mut [u64; 16]) -> io::Result<libc::c_long> {
    // SAFETY: attr is a zero-padded bpf_attr of 128 bytes, as the command expects.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(attr) as u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Two u32 fields packed into one u64 slot of a bpf_attr (little/big endian alike).
fn pair(a: u32, b: u32) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&a.to_ne_bytes());
    bytes[4..].copy_from_slice(&b.to_ne_bytes());
    u64::from_ne_bytes(bytes)
}

pub struct SockOps {
    map: OwnedFd,
    _prog: OwnedFd,
}

impl SockOps {
    /// Load the program for up to `flows` sockets, attach it to the cgroup
    /// at `cgroup_dir` and move this process into that cgroup. The error
    /// says which step failed.
    pub fn install(cgroup_dir: &str, flows: usize) -> Result<SockOps, String> {
        let mut a = [0u64; 16];
        a[0] = pair(BPF_MAP_TYPE_HASH, 8); // map_type, key_size (the cookie)
        a[1] = pair(VALUE_SIZE as u32, flows.max(1) as u32); // value_size, max_entries
        let map = bpf(BPF_MAP_CREATE, &mut a).map_err(|e| format!("creating the sock_ops BPF map: {e}"))?;
        // SAFETY: a new fd owned from here on.
        let map = unsafe { OwnedFd::from_raw_fd(map as RawFd) };

        let insns = program(map.as_raw_fd());
        let license = b"Dual MIT/GPL\0";
        let mut log = vec![0u8; 64 * 1024];
        let mut a = [0u64; 16];
        a[0] = pair(BPF_PROG_TYPE_SOCK_OPS, insns.len() as u32);
        a[1] = insns.as_ptr() as u64;
        a[2] = license.as_ptr() as u64;
        a[3] = pair(1, log.len() as u32); // log_level, log_size
        a[4] = log.as_mut_ptr() as u64;
        let prog = bpf(BPF_PROG_LOAD, &mut a).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]);
            format!("loading the sock_ops program (RTT samples, cwnd clamp): {e}; verifier: {}", text.trim())
        })?;
        // SAFETY: as above.
        let prog = unsafe { OwnedFd::from_raw_fd(prog as RawFd) };

        let path = std::ffi::CString::new(cgroup_dir).map_err(|_| format!("bad cgroup path {cgroup_dir:?}"))?;
        // SAFETY: a NUL-terminated path; the fd is closed below.
        let cg = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if cg < 0 {
            return Err(format!("opening cgroup {cgroup_dir}: {}", io::Error::last_os_error()));
        }
        // SAFETY: as above.
        let cg = unsafe { OwnedFd::from_raw_fd(cg) };
        let mut a = [0u64; 16];
        a[0] = pair(cg.as_raw_fd() as u32, prog.as_raw_fd() as u32); // target_fd, attach_bpf_fd
        a[1] = pair(BPF_CGROUP_SOCK_OPS, 0); // attach_type, attach_flags
        bpf(BPF_PROG_ATTACH, &mut a).map_err(|e| format!("attaching the sock_ops program to {cgroup_dir}: {e}"))?;
        let procs = format!("{cgroup_dir}/cgroup.procs");
        std::fs::write(&procs, std::process::id().to_string())
            .map_err(|e| format!("moving the load client into {cgroup_dir}: {e}"))?;
        Ok(SockOps { map, _prog: prog })
    }

    /// Register the socket `fd` (not yet connected): count its RTT samples
    /// and, with `clamp`, clamp its window to that many segments. Returns
    /// its cookie, the key for `rtt`.
    pub fn add(&self, fd: RawFd, clamp: Option<u32>) -> io::Result<u64> {
        let mut cookie: u64 = 0;
        let mut len = 8 as libc::socklen_t;
        // SAFETY: cookie is 8 bytes, len says so.
        if unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_COOKIE, &mut cookie as *mut u64 as *mut libc::c_void, &mut len) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut value = vec![0u8; VALUE_SIZE];
        value[..4].copy_from_slice(&clamp.unwrap_or(0).to_ne_bytes());
        let mut a = [0u64; 16];
        a[0] = pair(self.map.as_raw_fd() as u32, 0);
        a[1] = &cookie as *const u64 as u64;
        a[2] = value.as_ptr() as u64;
        a[3] = 0; // BPF_ANY
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| cookie)
    }

    /// The RTT samples counted for the socket with `cookie`.
    pub fn rtt(&self, cookie: u64) -> io::Result<RttSamples> {
        let mut value = vec![0u8; VALUE_SIZE];
        let mut a = [0u64; 16];
        a[0] = pair(self.map.as_raw_fd() as u32, 0);
        a[1] = &cookie as *const u64 as u64;
        a[2] = value.as_mut_ptr() as u64;
        bpf(BPF_MAP_LOOKUP_ELEM, &mut a)?;
        let u64_at = |o: i16| u64::from_ne_bytes(value[o as usize..o as usize + 8].try_into().unwrap());
        let hist = value[OFF_HIST as usize..].chunks_exact(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect();
        Ok(RttSamples { count: u64_at(OFF_COUNT), sum_us: u64_at(OFF_SUM), hist })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_stay_inside_and_end_on_the_return() {
        let p = program(3);
        let ret = p.len() - 2;
        for (i, x) in p.iter().enumerate() {
            if matches!(x.code, JA | JEQ_K | JNE_K | JGT_K | JLT_K) {
                let to = i as i64 + 1 + x.off as i64;
                assert!(to > i as i64 && to <= ret as i64, "jump at {i} to {to}");
            }
        }
        assert_eq!((p[ret].code, p[ret].imm), (MOV64_K, 1));
        assert_eq!(p[ret + 1].code, EXIT);
        // The map fd sits in the LD_IMM64's first slot, marked as a map fd.
        let ld = p.iter().position(|x| x.code == LD_IMM64).unwrap();
        assert_eq!((p[ld].imm, p[ld].regs >> 4), (3, PSEUDO_MAP_FD));
    }

    #[test]
    fn instructions_are_eight_bytes() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }

    #[test]
    fn buckets_are_contiguous_and_narrow() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(127), 127);
        assert_eq!(bucket(128), 128);
        assert_eq!(bucket(u32::MAX), BUCKETS - 1);
        for b in 0..BUCKETS {
            let (lo, hi) = bucket_range(b);
            assert_eq!(bucket(lo as u32), b);
            assert_eq!(bucket(hi.min(u32::MAX as u64) as u32), b);
            if b + 1 < BUCKETS {
                assert_eq!(bucket_range(b + 1).0, hi + 1);
            }
            assert!((hi - lo) as f64 <= 0.008 * lo as f64, "bucket {b}: {lo}..{hi}");
        }
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut s = RttSamples { count: 0, sum_us: 0, hist: vec![0; BUCKETS] };
        for v in 1..=1000u32 {
            s.count += 1;
            s.sum_us += v as u64;
            s.hist[bucket(v)] += 1;
        }
        assert_eq!(s.quantile_us(0.5), Some(500.0 + 0.5)); // bucket 500..501
        let p99 = s.quantile_us(0.99).unwrap();
        assert!((p99 - 990.0).abs() <= 990.0 * 0.004, "{p99}");
        assert_eq!(s.mean_us(), Some(500.5));
    }
}
