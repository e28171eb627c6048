//! A BPF struct_ops congestion control (`cca = "bpf:OBJECT"`), run by the
//! `bpf` crate's eBPF interpreter over this connection's state.
//!
//! Before every hook the adapter writes the [`Conn`] into the socket block
//! the program sees (Linux units: `srtt_us` is the smoothed RTT << 3 as in
//! `struct tcp_sock`, `lsndtime` in jiffies, `tcp_mstamp` in µs), runs the
//! program, and copies back what a struct_ops CCA may write: snd_cwnd,
//! snd_ssthresh, snd_cwnd_cnt, snd_cwnd_clamp, prior_cwnd, app_limited and
//! the pacing rate. `icsk_ca_priv` and the object's global variables live
//! in the VM between calls. See docs/bpf.md.

use super::{AckSample, CaEvent, CaState, CongestionControl, Conn, RateSample};
use bpf::sock::*;
use bpf::{Hook, Object, Vm};
use std::sync::{Arc, Mutex, OnceLock};

/// Loaded objects by path, with their leaked names (`name()` is `'static`).
type Cache = Mutex<Vec<(String, Arc<Object>, &'static str)>>;
static CACHE: OnceLock<Cache> = OnceLock::new();

/// Load (once per process) the object behind `bpf:PATH`.
pub fn load(path: &str) -> Result<(Arc<Object>, &'static str), String> {
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, o, n)) = c.iter().find(|(p, _, _)| p == path) {
        return Ok((o.clone(), n));
    }
    let obj = Arc::new(Object::load(path).map_err(|e| e.0)?);
    let name: &'static str = Box::leak(format!("bpf:{}", obj.name).into_boxed_str());
    c.push((path.to_string(), obj.clone(), name));
    Ok((obj, name))
}

pub struct BpfCc {
    vm: Vm,
    name: &'static str,
    /// app_limited as last written into the block (to detect the program's writes).
    app_limited_in: u32,
    /// The first fault of a program (out-of-bounds access, too many
    /// steps...): no program runs after it, and the world ends the run with
    /// it at its next sample (`CongestionControl::fault`).
    fault: Option<String>,
}

#[inline]
fn put32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
fn put64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
#[inline]
fn get32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
#[inline]
fn get64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn ca_state(s: CaState) -> u8 {
    s as u8
}

impl BpfCc {
    pub fn open(path: &str, seed: u64) -> Result<BpfCc, String> {
        let (obj, name) = load(path)?;
        Ok(BpfCc { vm: Vm::new(obj, seed), name, app_limited_in: 0, fault: None })
    }

    fn export(&mut self, c: &Conn) {
        let b = &mut self.vm.sock;
        put64(b, SK_PACING_RATE, c.pacing_rate);
        put64(b, SK_MAX_PACING_RATE, c.max_pacing_rate);
        b[ICSK_CA_STATE] = ca_state(c.ca_state);
        put32(b, SND_CWND, c.cwnd);
        put32(b, SND_SSTHRESH, c.ssthresh);
        put32(b, SND_CWND_CNT, c.cwnd_cnt);
        put32(b, SND_CWND_CLAMP, c.cwnd_clamp);
        put32(b, PRIOR_CWND, c.prior_cwnd);
        put32(b, SRTT_US, c.srtt_us << 3);
        put32(b, PACKETS_OUT, c.packets_out);
        put32(b, SACKED_OUT, c.sacked_out);
        put32(b, LOST_OUT, c.lost_out);
        put32(b, RETRANS_OUT, c.retrans_out);
        put32(b, DELIVERED, c.delivered as u32);
        put32(b, DELIVERED_CE, c.delivered_ce as u32);
        put32(b, LOST, c.lost as u32);
        self.app_limited_in = c.app_limited as u32;
        put32(b, APP_LIMITED, self.app_limited_in);
        put32(b, MSS_CACHE, c.mss);
        put32(b, MAX_PACKETS_OUT, c.max_packets_out);
        put32(b, SND_UNA, c.snd_una as u32);
        put32(b, SND_NXT, c.snd_nxt as u32);
        put32(b, LSNDTIME, (c.lsndtime_us.wrapping_mul(c.hz) / 1_000_000) as u32);
        put64(b, TCP_MSTAMP, c.now_us);
        b[ECN_FLAGS] = (b[ECN_FLAGS] & !1) | c.ecn as u8;
        b[IS_CWND_LIMITED] = c.is_cwnd_limited_flag as u8;
        // A paced socket is not SK_PACING_NONE, whatever the program set:
        // SO_MAX_PACING_RATE makes it SK_PACING_NEEDED (fq would make it
        // SK_PACING_FQ; programs test it against NONE, as bpf_cubic's
        // HyStart does).
        if c.paced && b[SK_PACING_STATUS] == 0 {
            b[SK_PACING_STATUS] = 1;
        }
        self.vm.now_ns = c.now_ns;
        self.vm.hz = c.hz;
    }

    fn import(&mut self, c: &mut Conn) {
        let b = &self.vm.sock;
        c.cwnd = get32(b, SND_CWND);
        c.ssthresh = get32(b, SND_SSTHRESH);
        c.cwnd_cnt = get32(b, SND_CWND_CNT);
        c.cwnd_clamp = get32(b, SND_CWND_CLAMP);
        c.prior_cwnd = get32(b, PRIOR_CWND);
        let al = get32(b, APP_LIMITED);
        if al != self.app_limited_in {
            c.app_limited = al as u64;
        }
        c.pacing_rate = get64(b, SK_PACING_RATE);
        if c.pacing_auto {
            // SK_PACING_NEEDED, set by any hook (Linux reads it per transmission)
            c.paced = b[SK_PACING_STATUS] == 1;
        }
    }

    fn call(&mut self, c: &mut Conn, hook: Hook, args: &[u64]) -> Option<u64> {
        if self.fault.is_some() || !self.vm.obj.has(hook) {
            return None;
        }
        self.export(c);
        match self.vm.call(hook, args) {
            Ok(r) => {
                self.import(c);
                r
            }
            Err(e) => {
                // The connection keeps its state from before the call until the run ends.
                let prog = self.vm.obj.hooks[hook as usize].map_or("?", |i| self.vm.obj.programs[i].name.as_str());
                let prog = prog.strip_prefix("struct_ops/").unwrap_or(prog);
                self.fault = Some(format!(
                    "program {prog} of the BPF CCA named '{}' (tcp_congestion_ops.{}) failed at {:.6} s: {e}",
                    self.name.strip_prefix("bpf:").unwrap_or(self.name),
                    hook.member(),
                    c.now_ns as f64 / 1e9
                ));
                None
            }
        }
    }

    /// Instructions the VM has executed (for the benchmark).
    pub fn steps(&self) -> u64 {
        self.vm.steps
    }
}

const SK: u64 = (bpf::R_SOCK) << 32;
const ARG: u64 = (bpf::R_ARG) << 32;

impl CongestionControl for BpfCc {
    fn name(&self) -> &'static str {
        self.name
    }

    fn fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }

    fn init(&mut self, c: &mut Conn) {
        self.vm.sock[ICSK_CA_PRIV..ICSK_CA_PRIV + ICSK_CA_PRIV_LEN].fill(0);
        self.call(c, Hook::Init, &[SK]);
    }

    fn ssthresh(&mut self, c: &mut Conn) -> u32 {
        self.call(c, Hook::Ssthresh, &[SK]).map(|v| v as u32).unwrap_or((c.cwnd >> 1).max(2))
    }

    fn cong_avoid(&mut self, c: &mut Conn, acked: u32) {
        self.call(c, Hook::CongAvoid, &[SK, c.snd_una as u32 as u64, acked as u64]);
    }

    fn set_state(&mut self, c: &mut Conn, new_state: CaState) {
        self.call(c, Hook::SetState, &[SK, ca_state(new_state) as u64]);
    }

    fn cwnd_event(&mut self, c: &mut Conn, ev: CaEvent) {
        let e = match ev {
            CaEvent::TxStart => 0,
            CaEvent::Loss => 3,
            CaEvent::CompleteCwr => 2,
            CaEvent::EcnNoCe => 4,
            CaEvent::EcnIsCe => 5,
        };
        self.call(c, Hook::CwndEvent, &[SK, e]);
    }

    fn in_ack_event(&mut self, c: &mut Conn, flags: u32) {
        self.call(c, Hook::InAckEvent, &[SK, flags as u64]);
    }

    fn pkts_acked(&mut self, c: &mut Conn, s: &AckSample) {
        if !self.vm.obj.has(Hook::PktsAcked) {
            return;
        }
        let a = &mut self.vm.arg;
        put32(a, 0, s.pkts_acked);
        put32(a, 4, s.rtt_us.clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32);
        put32(a, 8, s.in_flight);
        self.call(c, Hook::PktsAcked, &[SK, ARG]);
    }

    fn sndbuf_expand(&mut self, c: &mut Conn) -> u32 {
        self.call(c, Hook::SndbufExpand, &[SK]).map(|v| v as u32).unwrap_or(2)
    }

    fn min_tso_segs(&mut self, c: &mut Conn) -> u32 {
        self.call(c, Hook::MinTsoSegs, &[SK]).map(|v| v as u32).unwrap_or(2)
    }

    fn undo_cwnd(&mut self, c: &mut Conn) -> u32 {
        self.call(c, Hook::UndoCwnd, &[SK]).map(|v| v as u32).unwrap_or(c.cwnd.max(c.prior_cwnd))
    }

    fn cong_control(&mut self, c: &mut Conn, rs: &RateSample) -> bool {
        if !self.vm.obj.has(Hook::CongControl) {
            return false;
        }
        let a = &mut self.vm.arg;
        a.fill(0);
        put32(a, 8, rs.prior_delivered as u32);
        put32(a, 16, rs.delivered as i32 as u32);
        put32(a, 20, rs.delivered_ce as i32 as u32);
        put64(a, 24, rs.interval_us as u64);
        put64(a, 40, rs.rtt_us as u64);
        put32(a, 48, rs.losses);
        put32(a, 52, rs.acked_sacked);
        put32(a, 56, rs.prior_in_flight);
        a[64] = rs.is_app_limited as u8;
        a[65] = rs.is_retrans as u8;
        a[66] = rs.is_ack_delayed as u8;
        self.call(c, Hook::CongControl, &[SK, c.snd_una as u32 as u64, 0, ARG]);
        true
    }

    fn has_cong_control(&self) -> bool {
        self.vm.obj.has(Hook::CongControl)
    }

    fn needs_ecn(&self) -> bool {
        self.vm.obj.flags & bpf::TCP_CONG_NEEDS_ECN != 0
    }

    fn wants_pacing(&self) -> bool {
        // SK_PACING_NEEDED: before init, none (import() follows the program's hooks).
        self.vm.sock[SK_PACING_STATUS] == 1
    }
}

#[cfg(test)]
mod tests {
    //! These compile the examples in studies/bpf-cca with clang and a
    //! vmlinux.h from bpftool; without them (or without kernel BTF) they
    //! fail, saying why, unless CCBENCH_SKIP_BPF_TESTS=1.
    use super::*;
    use crate::cc::reno::Reno;
    use std::path::PathBuf;
    use std::process::Command;

    pub(super) fn compile_for_bench(name: &str) -> Option<String> {
        compile(name)
    }

    /// The example compiled, or a loud failure: these tests need clang,
    /// bpftool and the kernel's BTF (`make test` installs the tools), and
    /// skip only with CCBENCH_SKIP_BPF_TESTS=1, as tests/test_bpf.py does.
    fn compile(name: &str) -> Option<String> {
        let obj = try_compile(name);
        if obj.is_none() {
            assert!(
                std::env::var("CCBENCH_SKIP_BPF_TESTS").as_deref() == Ok("1"),
                "compiling studies/bpf-cca/{name}.bpf.c failed (above); set CCBENCH_SKIP_BPF_TESTS=1 to skip"
            );
            eprintln!("skipped: CCBENCH_SKIP_BPF_TESTS=1");
        }
        obj
    }

    fn try_compile(name: &str) -> Option<String> {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        // Beside the test binary (target/<profile>/bpf-test), not in /tmp:
        // a directory per process there was never removed (4.7 MB a run).
        // Files are written under a name of this process and renamed, so
        // tests running at once, here or in another process, never read half
        // a file.
        let exe = std::env::current_exe().ok()?;
        let out = exe.parent()?.parent()?.join("bpf-test");
        std::fs::create_dir_all(&out).ok()?;
        let part = |p: &PathBuf| p.with_extension(format!("part{}-{name}", std::process::id()));
        let hdr = out.join("vmlinux.h");
        // The kernel's header: dumped once per process, from the kernel it
        // runs on. The lock is held to the end: two tests of this process
        // compiling the same example would write the same part file.
        static HEADER: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
        let mut dumped = HEADER.lock().unwrap_or_else(|e| e.into_inner());
        if !*dumped {
            let o = Command::new("bpftool").args(["btf", "dump", "file", "/sys/kernel/btf/vmlinux", "format", "c"]).output().ok()?;
            if !o.status.success() {
                eprintln!("bpftool btf dump failed");
                return None;
            }
            std::fs::write(part(&hdr), o.stdout).ok()?;
            std::fs::rename(part(&hdr), &hdr).ok()?;
            *dumped = true;
        }
        let obj = out.join(format!("{name}.bpf.o"));
        let src = root.join(format!("studies/bpf-cca/{name}.bpf.c"));
        let st = Command::new("clang")
            .args(["-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-I"])
            .arg(&out)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(part(&obj))
            .status()
            .ok()?;
        if !st.success() {
            eprintln!("clang failed");
            return None;
        }
        std::fs::rename(part(&obj), &obj).ok()?;
        Some(obj.to_string_lossy().into_owned())
    }

    /// The same ACK sequences through native Reno and BPF Reno give the
    /// same cwnd, ssthresh and cwnd_cnt at every step.
    #[test]
    fn bpf_reno_matches_native_reno_step_by_step() {
        let Some(obj) = compile("reno") else { return };
        let mut b = BpfCc::open(&obj, 1).unwrap();
        assert_eq!(b.name(), "bpf:bpf_reno");
        let mut n = Reno::default();
        let mut cb = Conn::new(1448, 10);
        let mut cn = Conn::new(1448, 10);
        b.init(&mut cb);
        n.init(&mut cn);
        for step in 0..5000u32 {
            for c in [&mut cb, &mut cn] {
                c.max_packets_out = c.cwnd;
                c.is_cwnd_limited_flag = step % 7 != 0;
            }
            let acked = 1 + step % 3;
            if step % 997 == 500 {
                let sb = b.ssthresh(&mut cb);
                let sn = n.ssthresh(&mut cn);
                assert_eq!(sb, sn);
                cb.prior_cwnd = cb.cwnd;
                cn.prior_cwnd = cn.cwnd;
                cb.ssthresh = sb;
                cn.ssthresh = sn;
                cb.cwnd = sb;
                cn.cwnd = sn;
                assert_eq!(b.undo_cwnd(&mut cb), n.undo_cwnd(&mut cn));
            }
            b.cong_avoid(&mut cb, acked);
            n.cong_avoid(&mut cn, acked);
            assert_eq!((cb.cwnd, cb.ssthresh, cb.cwnd_cnt), (cn.cwnd, cn.ssthresh, cn.cwnd_cnt), "step {step}");
        }
        assert!(b.steps() > 0);
    }

    /// A paced sender's socket reads as paced to the program
    /// (`sk_pacing_status` not NONE, as SO_MAX_PACING_RATE leaves it),
    /// whatever the program's init wrote; an unpaced one keeps the
    /// program's value.
    #[test]
    fn a_paced_socket_is_not_pacing_none() {
        let Some(obj) = compile("reno") else { return };
        for paced in [false, true] {
            let mut b = BpfCc::open(&obj, 1).unwrap();
            let mut c = Conn::new(1448, 10);
            c.paced = paced;
            b.init(&mut c);
            b.cong_avoid(&mut c, 1);
            assert_eq!(b.vm.sock[SK_PACING_STATUS], paced as u8, "paced {paced}");
        }
    }

    #[test]
    fn examples_load() {
        for name in ["dctcp", "vegas"] {
            let Some(obj) = compile(name) else { return };
            let mut b = BpfCc::open(&obj, 1).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut c = Conn::new(1448, 10);
            b.init(&mut c);
            b.cong_avoid(&mut c, 1);
            assert!(b.ssthresh(&mut c) >= 2);
        }
        let Some(obj) = compile("dctcp") else { return };
        assert!(BpfCc::open(&obj, 1).unwrap().needs_ecn());
    }
}

#[cfg(test)]
mod speed {
    /// `cargo test --release -p sim bpf_speed -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn bpf_speed() {
        use super::*;
        let Some(obj) = super::tests::compile_for_bench("reno") else { return };
        let mut b = BpfCc::open(&obj, 1).unwrap();
        let mut n = crate::cc::reno::Reno::default();
        let mut c = Conn::new(1448, 10);
        c.ssthresh = 100;
        c.is_cwnd_limited_flag = true;
        let t = std::time::Instant::now();
        for _ in 0..1_000_000 {
            b.cong_avoid(&mut c, 1);
            if c.cwnd > 1000 {
                c.cwnd = 100;
            }
        }
        let tb = t.elapsed();
        let t = std::time::Instant::now();
        for _ in 0..1_000_000 {
            n.cong_avoid(&mut c, 1);
            if c.cwnd > 1000 {
                c.cwnd = 100;
            }
        }
        eprintln!("bpf {:?}/call ({} insns/call), native {:?}/call", tb / 1_000_000, b.steps() / 1_000_000, t.elapsed() / 1_000_000);
    }
}
