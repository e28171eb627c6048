//! Per-flow congestion-window clamp, the way the netdev 2.2 experiments did
//! it: a TCP-BPF (sock_ops) program that sets `TCP_BPF_SNDCWND_CLAMP` when a
//! connection is established. Linux offers no socket option for it.
//!
//! The load client creates a hash map (socket cookie → clamp in segments)
//! and loads a small sock_ops program, attaches it to a cgroup (v2) that the
//! backend created for the run, and moves itself into that cgroup, so the
//! program sees exactly this process's sockets. Before connecting a clamped
//! flow it puts the socket's cookie (SO_COOKIE) and its clamp in the map; the
//! program looks the cookie up at BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB and sets
//! the clamp, which in Linux also sets ssthresh to it. Removing the cgroup
//! (the backend does, at the end of the run) detaches the program.
//!
//! The program is written out instruction by instruction (no compiler is
//! needed at run time); `PROGRAM` below says what each does.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// bpf(2) commands, map and program types, attach type.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_TYPE_SOCK_OPS: u32 = 13;
const BPF_CGROUP_SOCK_OPS: u32 = 3;

// Helpers the program calls, and the constants it uses.
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const HELPER_GET_SOCKET_COOKIE: i32 = 46;
const HELPER_SETSOCKOPT: i32 = 49;
const SOCK_OPS_ACTIVE_ESTABLISHED_CB: i32 = 4;
const SOL_TCP: i32 = 6;
const TCP_BPF_SNDCWND_CLAMP: i32 = 1002;
const SO_COOKIE: libc::c_int = 57;

/// Flows one client may clamp.
const MAP_ENTRIES: u32 = 4096;

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
const LDX_W: u8 = 0x61; // dst = *(u32 *)(src + off)
const STX_W: u8 = 0x63; // *(u32 *)(dst + off) = src
const STX_DW: u8 = 0x7b; // *(u64 *)(dst + off) = src
const LD_IMM64: u8 = 0x18; // dst = imm64 (two slots); src 1 = a map fd
const JNE_K: u8 = 0x55; // if dst != imm goto +off
const JEQ_K: u8 = 0x15; // if dst == imm goto +off
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;
const PSEUDO_MAP_FD: u8 = 1;

/// The program, with the map's fd in its LD_IMM64.
fn program(map_fd: RawFd) -> Vec<Insn> {
    vec![
        insn(MOV64_X, 6, 1, 0, 0),                                   // 0: r6 = ctx (struct bpf_sock_ops *)
        insn(LDX_W, 2, 6, 0, 0),                                     // 1: r2 = ctx->op
        insn(JNE_K, 2, 0, 18, SOCK_OPS_ACTIVE_ESTABLISHED_CB),      // 2: not established → 21
        insn(MOV64_X, 1, 6, 0, 0),                                   // 3: r1 = ctx
        insn(CALL, 0, 0, 0, HELPER_GET_SOCKET_COOKIE),               // 4: r0 = cookie
        insn(STX_DW, 10, 0, -8, 0),                                  // 5: stack[-8] = cookie
        insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd),                 // 6: r1 = map
        insn(0, 0, 0, 0, 0),                                         // 7:   (second half)
        insn(MOV64_X, 2, 10, 0, 0),                                  // 8: r2 = fp
        insn(ADD64_K, 2, 0, 0, -8),                                  // 9: r2 = &stack[-8]
        insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM),                 // 10: r0 = &clamp or NULL
        insn(JEQ_K, 0, 0, 9, 0),                                     // 11: not ours → 21
        insn(LDX_W, 1, 0, 0, 0),                                     // 12: r1 = clamp
        insn(STX_W, 10, 1, -12, 0),                                  // 13: stack[-12] = clamp
        insn(MOV64_X, 1, 6, 0, 0),                                   // 14: r1 = ctx
        insn(MOV64_K, 2, 0, 0, SOL_TCP),                             // 15: r2 = SOL_TCP
        insn(MOV64_K, 3, 0, 0, TCP_BPF_SNDCWND_CLAMP),               // 16: r3 = TCP_BPF_SNDCWND_CLAMP
        insn(MOV64_X, 4, 10, 0, 0),                                  // 17: r4 = fp
        insn(ADD64_K, 4, 0, 0, -12),                                 // 18: r4 = &stack[-12]
        insn(MOV64_K, 5, 0, 0, 4),                                   // 19: r5 = sizeof(int)
        insn(CALL, 0, 0, 0, HELPER_SETSOCKOPT),                      // 20: bpf_setsockopt(...)
        insn(MOV64_K, 0, 0, 0, 1),                                   // 21: return 1
        insn(EXIT, 0, 0, 0, 0),                                      // 22
    ]
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

pub struct Clamp {
    map: OwnedFd,
    _prog: OwnedFd,
}

impl Clamp {
    /// Load the program, attach it to the cgroup at `cgroup_dir` and move
    /// this process into that cgroup. The error says which step failed.
    pub fn install(cgroup_dir: &str) -> Result<Clamp, String> {
        let mut a = [0u64; 16];
        a[0] = pair(BPF_MAP_TYPE_HASH, 8); // map_type, key_size (the cookie)
        a[1] = pair(4, MAP_ENTRIES); // value_size (the clamp), max_entries
        let map = bpf(BPF_MAP_CREATE, &mut a).map_err(|e| format!("creating the cwnd-clamp BPF map: {e}"))?;
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
            format!("loading the cwnd-clamp sock_ops program: {e}; verifier: {}", text.trim())
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
        bpf(BPF_PROG_ATTACH, &mut a).map_err(|e| format!("attaching the cwnd-clamp program to {cgroup_dir}: {e}"))?;
        let procs = format!("{cgroup_dir}/cgroup.procs");
        std::fs::write(&procs, std::process::id().to_string())
            .map_err(|e| format!("moving the load client into {cgroup_dir}: {e}"))?;
        Ok(Clamp { map, _prog: prog })
    }

    /// Clamp the socket `fd` (not yet connected) to `segments`.
    pub fn add(&self, fd: RawFd, segments: u32) -> io::Result<()> {
        let mut cookie: u64 = 0;
        let mut len = 8 as libc::socklen_t;
        // SAFETY: cookie is 8 bytes, len says so.
        if unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, SO_COOKIE, &mut cookie as *mut u64 as *mut libc::c_void, &mut len) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let value: u32 = segments;
        let mut a = [0u64; 16];
        a[0] = pair(self.map.as_raw_fd() as u32, 0);
        a[1] = &cookie as *const u64 as u64;
        a[2] = &value as *const u32 as u64;
        a[3] = 0; // BPF_ANY
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_on_the_return() {
        let p = program(3);
        assert_eq!(p.len(), 23);
        let ret = p.len() - 2;
        for (i, x) in p.iter().enumerate() {
            if x.code == JNE_K || x.code == JEQ_K {
                assert_eq!(i + 1 + x.off as usize, ret, "jump at {i}");
            }
        }
        assert_eq!((p[ret].code, p[ret].imm), (MOV64_K, 1));
        assert_eq!(p[ret + 1].code, EXIT);
        // The map fd sits in the LD_IMM64's first slot, marked as a map fd.
        assert_eq!((p[6].code, p[6].imm, p[6].regs >> 4), (LD_IMM64, 3, PSEUDO_MAP_FD));
    }

    #[test]
    fn instructions_are_eight_bytes() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
    }
}
