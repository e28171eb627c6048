//! The eBPF interpreter: one per connection.

use crate::sock::*;
use crate::*;
use std::sync::Arc;

pub struct Vm {
    pub obj: Arc<Object>,
    pub sock: [u8; SOCK_LEN],
    pub arg: [u8; RATE_SAMPLE_LEN],
    ctx: [u8; 64],
    stack: Vec<u8>,
    data: Vec<Vec<u8>>,
    /// Clock for the time helpers, in nanoseconds.
    pub now_ns: u64,
    /// CONFIG_HZ of the modelled kernel (bpf_jiffies64).
    pub hz: u64,
    rng: u64,
    /// Instructions executed (for the benchmark and runaway detection).
    pub steps: u64,
}

const STEP_LIMIT: u64 = 1_000_000;

#[inline]
fn rd(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
#[inline]
fn wr(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}

impl Vm {
    pub fn new(obj: Arc<Object>, seed: u64) -> Vm {
        let data = obj.data.clone();
        Vm {
            obj,
            sock: [0; SOCK_LEN],
            arg: [0; RATE_SAMPLE_LEN],
            ctx: [0; 64],
            stack: vec![0; STACK_FRAME * MAX_FRAMES],
            data,
            now_ns: 0,
            hz: 1000,
            rng: seed | 1,
            steps: 0,
        }
    }

    pub fn sock_addr() -> u64 {
        R_SOCK << 32
    }
    pub fn arg_addr() -> u64 {
        R_ARG << 32
    }

    #[inline(always)]
    fn mem(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let off = (addr & 0xffff_ffff) as usize;
        if addr >> 32 == R_SOCK {
            // the common case: the socket block
            return self.sock.get_mut(off..off.checked_add(len)?);
        }
        let buf: &mut [u8] = match addr >> 32 {
            R_CTX => &mut self.ctx,
            R_STACK => &mut self.stack,
            R_SOCK => &mut self.sock,
            R_ARG => &mut self.arg,
            r if r >= R_DATA => self.data.get_mut((r - R_DATA) as usize)?,
            _ => return None,
        };
        buf.get_mut(off..off.checked_add(len)?)
    }

    #[inline(always)]
    fn load(&mut self, addr: u64, size: usize, pc: usize) -> Result<u64, Error> {
        if addr >> 32 == 0 {
            // A NULL (or small) pointer read: the kernel's BTF pointer loads
            // return 0 on a fault.
            return Ok(0);
        }
        let b = self.mem(addr, size).ok_or_else(|| fault(addr, pc))?;
        Ok(match size {
            1 => b[0] as u64,
            2 => u16::from_le_bytes([b[0], b[1]]) as u64,
            4 => u32::from_le_bytes(b.try_into().unwrap()) as u64,
            _ => u64::from_le_bytes(b.try_into().unwrap()),
        })
    }

    #[inline(always)]
    fn store(&mut self, addr: u64, size: usize, v: u64, pc: usize) -> Result<(), Error> {
        let b = self.mem(addr, size).ok_or_else(|| fault(addr, pc))?;
        b.copy_from_slice(&v.to_le_bytes()[..size]);
        Ok(())
    }

    /// Run the program of `hook` with `args` (the `u64` context array of
    /// BPF_PROG). Returns r0, or None when the object does not define the hook.
    pub fn call(&mut self, hook: Hook, args: &[u64]) -> Result<Option<u64>, Error> {
        let Some(p) = self.obj.hooks[hook as usize] else { return Ok(None) };
        for (i, a) in args.iter().enumerate() {
            self.ctx[i * 8..i * 8 + 8].copy_from_slice(&a.to_le_bytes());
        }
        let obj = self.obj.clone();
        self.run(&obj.programs[p].code).map(Some)
    }

    fn run(&mut self, code: &[Insn]) -> Result<u64, Error> {
        // 16 registers so that `dst & 15` indexes without a bounds check
        // (the loader only produces r0..r10).
        let mut r = [0u64; 16];
        r[1] = R_CTX << 32;
        let mut depth = 0usize;
        r[10] = (R_STACK << 32) | STACK_FRAME as u64;
        // Return addresses and callee-saved registers of bpf-to-bpf calls.
        let mut frames: Vec<(usize, [u64; 4])> = Vec::new();
        let mut pc = 0usize;
        let mut steps = 0u64;
        loop {
            let Some(&i) = code.get(pc) else { return Err(Error::new(format!("BPF program ran off its end at instruction {pc}"))) };
            steps += 1;
            if steps > STEP_LIMIT {
                return Err(Error::new("BPF program ran more than 1e6 instructions (a loop?)"));
            }
            pc += 1;
            let d = (i.dst & 15) as usize;
            let s = (i.src & 15) as usize;
            let imm = i.imm as i64 as u64;
            match i.op {
                // ALU64
                0x07 => r[d] = r[d].wrapping_add(imm),
                0x0f => r[d] = r[d].wrapping_add(r[s]),
                0x17 => r[d] = r[d].wrapping_sub(imm),
                0x1f => r[d] = r[d].wrapping_sub(r[s]),
                0x27 => r[d] = r[d].wrapping_mul(imm),
                0x2f => r[d] = r[d].wrapping_mul(r[s]),
                0x37 => r[d] = if imm == 0 { 0 } else { r[d] / imm },
                0x3f => r[d] = if r[s] == 0 { 0 } else { r[d] / r[s] },
                0x47 => r[d] |= imm,
                0x4f => r[d] |= r[s],
                0x57 => r[d] &= imm,
                0x5f => r[d] &= r[s],
                0x67 => r[d] <<= imm & 63,
                0x6f => r[d] <<= r[s] & 63,
                0x77 => r[d] >>= imm & 63,
                0x7f => r[d] >>= r[s] & 63,
                0x87 => r[d] = (r[d] as i64).wrapping_neg() as u64,
                0x97 => r[d] = if imm == 0 { r[d] } else { r[d] % imm },
                0x9f => r[d] = if r[s] == 0 { r[d] } else { r[d] % r[s] },
                0xa7 => r[d] ^= imm,
                0xaf => r[d] ^= r[s],
                0xb7 => r[d] = imm,
                0xbf => r[d] = r[s],
                0xc7 => r[d] = ((r[d] as i64) >> (imm & 63)) as u64,
                0xcf => r[d] = ((r[d] as i64) >> (r[s] & 63)) as u64,
                // ALU (32-bit, zero-extended)
                0x04 => r[d] = (r[d] as u32).wrapping_add(imm as u32) as u64,
                0x0c => r[d] = (r[d] as u32).wrapping_add(r[s] as u32) as u64,
                0x14 => r[d] = (r[d] as u32).wrapping_sub(imm as u32) as u64,
                0x1c => r[d] = (r[d] as u32).wrapping_sub(r[s] as u32) as u64,
                0x24 => r[d] = (r[d] as u32).wrapping_mul(imm as u32) as u64,
                0x2c => r[d] = (r[d] as u32).wrapping_mul(r[s] as u32) as u64,
                0x34 => r[d] = (r[d] as u32).checked_div(imm as u32).unwrap_or(0) as u64,
                0x3c => r[d] = (r[d] as u32).checked_div(r[s] as u32).unwrap_or(0) as u64,
                0x44 => r[d] = (r[d] as u32 | imm as u32) as u64,
                0x4c => r[d] = (r[d] as u32 | r[s] as u32) as u64,
                0x54 => r[d] = (r[d] as u32 & imm as u32) as u64,
                0x5c => r[d] = (r[d] as u32 & r[s] as u32) as u64,
                0x64 => r[d] = ((r[d] as u32) << (imm & 31)) as u64,
                0x6c => r[d] = ((r[d] as u32) << (r[s] & 31)) as u64,
                0x74 => r[d] = ((r[d] as u32) >> (imm & 31)) as u64,
                0x7c => r[d] = ((r[d] as u32) >> (r[s] & 31)) as u64,
                0x84 => r[d] = (r[d] as i32).wrapping_neg() as u32 as u64,
                0x94 => r[d] = { let a = r[d] as u32; a.checked_rem(imm as u32).unwrap_or(a) as u64 },
                0x9c => r[d] = { let a = r[d] as u32; a.checked_rem(r[s] as u32).unwrap_or(a) as u64 },
                0xa4 => r[d] = (r[d] as u32 ^ imm as u32) as u64,
                0xac => r[d] = (r[d] as u32 ^ r[s] as u32) as u64,
                0xb4 => r[d] = imm as u32 as u64,
                0xbc => r[d] = r[s] as u32 as u64,
                0xc4 => r[d] = ((r[d] as i32) >> (imm & 31)) as u32 as u64,
                0xcc => r[d] = ((r[d] as i32) >> (r[s] & 31)) as u32 as u64,
                0xd4 => {
                    // to little endian: truncate
                    r[d] = match imm {
                        16 => r[d] as u16 as u64,
                        32 => r[d] as u32 as u64,
                        _ => r[d],
                    }
                }
                0xdc => {
                    r[d] = match imm {
                        16 => (r[d] as u16).swap_bytes() as u64,
                        32 => (r[d] as u32).swap_bytes() as u64,
                        _ => r[d].swap_bytes(),
                    }
                }
                // 64-bit immediate load
                0x18 => {
                    let hi = code.get(pc).map(|n| n.imm as u32 as u64).unwrap_or(0);
                    r[d] = (i.imm as u32 as u64) | (hi << 32);
                    pc += 1;
                }
                // loads
                0x61 => r[d] = self.load(r[s].wrapping_add(i.off as i64 as u64), 4, pc)?,
                0x69 => r[d] = self.load(r[s].wrapping_add(i.off as i64 as u64), 2, pc)?,
                0x71 => r[d] = self.load(r[s].wrapping_add(i.off as i64 as u64), 1, pc)?,
                0x79 => r[d] = self.load(r[s].wrapping_add(i.off as i64 as u64), 8, pc)?,
                // stores
                0x62 => self.store(r[d].wrapping_add(i.off as i64 as u64), 4, imm, pc)?,
                0x6a => self.store(r[d].wrapping_add(i.off as i64 as u64), 2, imm, pc)?,
                0x72 => self.store(r[d].wrapping_add(i.off as i64 as u64), 1, imm, pc)?,
                0x7a => self.store(r[d].wrapping_add(i.off as i64 as u64), 8, imm, pc)?,
                0x63 => self.store(r[d].wrapping_add(i.off as i64 as u64), 4, r[s], pc)?,
                0x6b => self.store(r[d].wrapping_add(i.off as i64 as u64), 2, r[s], pc)?,
                0x73 => self.store(r[d].wrapping_add(i.off as i64 as u64), 1, r[s], pc)?,
                0x7b => self.store(r[d].wrapping_add(i.off as i64 as u64), 8, r[s], pc)?,
                // atomic add (no fetch): the VM is single-threaded
                0xc3 | 0xdb if i.imm == 0 => {
                    let size = if i.op == 0xc3 { 4 } else { 8 };
                    let a = r[d].wrapping_add(i.off as i64 as u64);
                    let v = self.load(a, size, pc)?.wrapping_add(r[s]);
                    self.store(a, size, v, pc)?;
                }
                // jumps
                0x05 => pc = jump(pc, i.off),
                0x85 => match i.src {
                    CALL_LOCAL => {
                        if frames.len() + 1 >= MAX_FRAMES {
                            return Err(Error::new("BPF call depth over 8"));
                        }
                        frames.push((pc, [r[6], r[7], r[8], r[9]]));
                        depth += 1;
                        r[10] = (R_STACK << 32) | ((depth + 1) * STACK_FRAME) as u64;
                        pc = (pc as i64 + i.imm as i64) as usize;
                    }
                    CALL_KFUNC => r[0] = self.kfunc(i.imm, r[1], r[2], r[3])?,
                    _ => r[0] = self.helper(i.imm, r[1], r[2], r[3])?,
                },
                0x95 => match frames.pop() {
                    None => {
                        self.steps += steps;
                        return Ok(r[0]);
                    }
                    Some((ret, saved)) => {
                        pc = ret;
                        r[6..10].copy_from_slice(&saved);
                        depth -= 1;
                        r[10] = (R_STACK << 32) | ((depth + 1) * STACK_FRAME) as u64;
                    }
                },
                op if op & 7 == 5 || op & 7 == 6 => {
                    let wide = op & 7 == 5;
                    let b = if op & 8 != 0 { r[s] } else { imm };
                    let (a, b) = if wide { (r[d], b) } else { (r[d] as u32 as u64, b as u32 as u64) };
                    let (sa, sb) = if wide { (a as i64, b as i64) } else { (a as u32 as i32 as i64, b as u32 as i32 as i64) };
                    let taken = match op & 0xf0 {
                        0x00 if !wide => true,
                        0x10 => a == b,
                        0x20 => a > b,
                        0x30 => a >= b,
                        0x40 => a & b != 0,
                        0x50 => a != b,
                        0x60 => sa > sb,
                        0x70 => sa >= sb,
                        0xa0 => a < b,
                        0xb0 => a <= b,
                        0xc0 => sa < sb,
                        0xd0 => sa <= sb,
                        _ => return Err(Error::new(format!("unsupported BPF instruction 0x{op:02x} at {}", pc - 1))),
                    };
                    if taken {
                        pc = if op & 0xf0 == 0 { (pc as i64 + i.imm as i64) as usize } else { jump(pc, i.off) };
                    }
                }
                op => return Err(Error::new(format!("unsupported BPF instruction 0x{op:02x} at {}", pc - 1))),
            }
        }
    }

    fn helper(&mut self, id: i32, a1: u64, a2: u64, a3: u64) -> Result<u64, Error> {
        Ok(match id {
            5 | 125 | 160 | 208 => self.now_ns,
            118 => (self.now_ns as u128 * self.hz as u128 / 1_000_000_000) as u64,
            7 => {
                // xorshift64*: deterministic per connection
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u64
            }
            4 | 113 => {
                let n = a2 as usize;
                let src = self.mem(a3, n).map(|b| b.to_vec());
                match src {
                    Some(v) => {
                        let dst = self.mem(a1, n).ok_or_else(|| fault(a1, 0))?;
                        dst.copy_from_slice(&v);
                        0
                    }
                    None => {
                        if let Some(dst) = self.mem(a1, n) {
                            dst.fill(0);
                        }
                        (-14i64) as u64 // -EFAULT
                    }
                }
            }
            // bpf_trace_printk: no trace pipe in the simulator.
            6 => 0,
            // bpf_tcp_send_ack: the simulator's receiver echoes ECN itself
            // (see docs/bpf.md); a sender-side call has nothing to do.
            116 => 0,
            _ => return Err(Error::new(format!("unsupported BPF helper #{id}"))),
        })
    }

    /// The kernel functions, over the socket block (net/ipv4/tcp_cong.c).
    fn kfunc(&mut self, id: i32, _a1: u64, a2: u64, a3: u64) -> Result<u64, Error> {
        // Ids are indices into KFUNCS.
        Ok(match id {
            0 => self.slow_start(a2 as u32) as u64,
            1 => {
                self.cong_avoid_ai(a2 as u32, a3 as u32);
                0
            }
            2 => {
                let acked = a3 as u32;
                if self.is_cwnd_limited() {
                    let mut acked = acked;
                    let ss = rd(&self.sock, SND_CWND) < rd(&self.sock, SND_SSTHRESH);
                    if ss {
                        acked = self.slow_start(acked);
                    }
                    if !ss || acked != 0 {
                        let w = rd(&self.sock, SND_CWND);
                        self.cong_avoid_ai(w, acked);
                    }
                }
                0
            }
            3 => (rd(&self.sock, SND_CWND) >> 1).max(2) as u64,
            4 => rd(&self.sock, SND_CWND).max(rd(&self.sock, PRIOR_CWND)) as u64,
            _ => return Err(Error::new(format!("unsupported kernel function #{id}"))),
        })
    }

    /// `tcp_is_cwnd_limited()`.
    fn is_cwnd_limited(&self) -> bool {
        if self.sock[IS_CWND_LIMITED] & 1 != 0 {
            return true;
        }
        let cwnd = rd(&self.sock, SND_CWND);
        if cwnd < rd(&self.sock, SND_SSTHRESH) {
            return cwnd < 2 * rd(&self.sock, MAX_PACKETS_OUT);
        }
        false
    }

    /// `tcp_slow_start()`.
    fn slow_start(&mut self, acked: u32) -> u32 {
        let c = rd(&self.sock, SND_CWND);
        let cwnd = c.wrapping_add(acked).min(rd(&self.sock, SND_SSTHRESH));
        let left = acked.wrapping_sub(cwnd.wrapping_sub(c));
        let clamp = rd(&self.sock, SND_CWND_CLAMP);
        wr(&mut self.sock, SND_CWND, cwnd.min(clamp));
        left
    }

    /// `tcp_cong_avoid_ai()`.
    fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        let mut cwnd = rd(&self.sock, SND_CWND);
        let mut cnt = rd(&self.sock, SND_CWND_CNT);
        if cnt >= w {
            cnt = 0;
            cwnd += 1;
        }
        cnt = cnt.wrapping_add(acked);
        if cnt >= w {
            let delta = cnt / w;
            cnt -= delta * w;
            cwnd += delta;
        }
        let clamp = rd(&self.sock, SND_CWND_CLAMP);
        wr(&mut self.sock, SND_CWND_CNT, cnt);
        wr(&mut self.sock, SND_CWND, cwnd.min(clamp));
    }
}

#[inline]
fn jump(pc: usize, off: i16) -> usize {
    (pc as i64 + off as i64) as usize
}

fn fault(addr: u64, pc: usize) -> Error {
    Error::new(format!("BPF program accessed invalid memory 0x{addr:x} (instruction {})", pc.saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn { op, dst, src, off, imm }
    }

    /// A VM whose ssthresh hook is `code`.
    fn vm(code: Vec<Insn>) -> Vm {
        let mut hooks = [None; N_HOOKS];
        hooks[Hook::Ssthresh as usize] = Some(0);
        let obj = Object { name: "t".into(), flags: 0, programs: vec![Program { name: "p".into(), code }], hooks, data: vec![] };
        Vm::new(Arc::new(obj), 1)
    }

    fn run(code: Vec<Insn>) -> Result<u64, Error> {
        vm(code).call(Hook::Ssthresh, &[Vm::sock_addr()]).map(|r| r.unwrap())
    }

    #[test]
    fn alu_semantics_follow_ebpf() {
        // r0 = 7; r0 /= 0 -> 0 (BPF: division by zero gives 0)
        assert_eq!(run(vec![insn(0xb7, 0, 0, 0, 7), insn(0x37, 0, 0, 0, 0), insn(0x95, 0, 0, 0, 0)]).unwrap(), 0);
        // r0 = 7; r0 %= 0 -> 7
        assert_eq!(run(vec![insn(0xb7, 0, 0, 0, 7), insn(0x97, 0, 0, 0, 0), insn(0x95, 0, 0, 0, 0)]).unwrap(), 7);
        // w0 = -1 (32-bit mov zero-extends); w0 += 2 wraps to 1
        assert_eq!(run(vec![insn(0xb4, 0, 0, 0, -1), insn(0x04, 0, 0, 0, 2), insn(0x95, 0, 0, 0, 0)]).unwrap(), 1);
        // r0 = -8 (64-bit sign-extended imm); r0 s>>= 1 -> -4
        assert_eq!(run(vec![insn(0xb7, 0, 0, 0, -8), insn(0xc7, 0, 0, 0, 1), insn(0x95, 0, 0, 0, 0)]).unwrap() as i64, -4);
    }

    #[test]
    fn socket_memory_and_branches() {
        // r1 = ctx[0] (sk); r0 = snd_cwnd; if r0 > 10 goto +1; r0 = 99; exit
        let mut v = vm(vec![
            insn(0x79, 1, 1, 0, 0),
            insn(0x61, 0, 1, SND_CWND as i16, 0),
            insn(0x25, 0, 0, 1, 10),
            insn(0xb7, 0, 0, 0, 99),
            insn(0x95, 0, 0, 0, 0),
        ]);
        v.sock[SND_CWND..SND_CWND + 4].copy_from_slice(&20u32.to_le_bytes());
        assert_eq!(v.call(Hook::Ssthresh, &[Vm::sock_addr()]).unwrap(), Some(20));
        v.sock[SND_CWND..SND_CWND + 4].copy_from_slice(&5u32.to_le_bytes());
        assert_eq!(v.call(Hook::Ssthresh, &[Vm::sock_addr()]).unwrap(), Some(99));
    }

    #[test]
    fn out_of_bounds_and_runaway_programs_stop_with_an_error() {
        // r1 = sk; r0 = *(u64 *)(r1 + 4096)
        let e = run(vec![insn(0x79, 1, 1, 0, 0), insn(0x79, 0, 1, 4096, 0), insn(0x95, 0, 0, 0, 0)]).unwrap_err();
        assert!(e.0.contains("invalid memory"), "{e}");
        // goto -1 forever
        let e = run(vec![insn(0x05, 0, 0, -1, 0)]).unwrap_err();
        assert!(e.0.contains("more than 1e6 instructions"), "{e}");
    }
}
