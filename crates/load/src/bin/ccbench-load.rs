//! `ccbench-load`: the load generator as a standalone program, for the hosts
//! backend (docs/hosts-backend.md), which copies it into a run directory on
//! each host and starts it there over SSH (argument lists only):
//!
//!     ccbench-load --version
//!     ccbench-load server|client --pidfile FILE --result FILE [--cpus LIST]
//!         config (docs/interfaces.md §4) as one JSON line on stdin; the
//!         returned JSON to the result file; the end of stdin stops it early
//!     ccbench-load clock
//!         for every line on stdin, one line "MONOTONIC_NS REALTIME_NS"
//!         (the controller measures this host's clock offsets from them)
//!     ccbench-load spawn --pidfile FILE [--at MONOTONIC_NS] [--cpus LIST] [--stdout FILE] -- PROGRAM ARGS...
//!         start PROGRAM (e.g. iperf3) at a time of this host's monotonic
//!         clock, record its pid, stop it when stdin ends; prints
//!         {"launch_monotonic_ns": ..., "exit": ...} when it exited
//!     ccbench-load kill RUN_DIR
//!         stop every process of RUN_DIR: those of its *.pid files whose
//!         start time still matches, and any running a program inside
//!         RUN_DIR (SIGTERM, then SIGKILL after 2 s); prints {"killed": N}

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use signals::remote::{run_command, set_cpus, start_time, write_atomic, Args};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = if args.is_empty() { &args[..] } else { &args[1..] };
    let parsed = || Args::parse(rest);
    let code = match args.first().map(String::as_str) {
        Some("--version") => {
            println!("ccbench-load {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("server") => parsed().map(|a| run_command(&a, load::server::run_json)).unwrap_or_else(usage),
        Some("client") => parsed().map(|a| run_command(&a, load::client::run_json)).unwrap_or_else(usage),
        Some("clock") => clock(),
        Some("spawn") => parsed().map(|a| spawn(&a)).unwrap_or_else(usage),
        Some("kill") if rest.len() == 1 => kill(Path::new(&rest[0])),
        _ => usage("unknown command".into()),
    };
    std::process::exit(code);
}

fn usage(e: String) -> i32 {
    eprintln!("ccbench-load: {e}; usage: --version | server|client --pidfile F --result F [--cpus L] | clock | \
               spawn --pidfile F [--at NS] [--cpus L] [--stdout F] -- ARGV | kill RUN_DIR");
    2
}

fn realtime_ns() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn clock() -> i32 {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        if line.is_err() {
            break;
        }
        let (m, r) = (load::sys::monotonic_ns(), realtime_ns());
        if writeln!(out, "{m} {r}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    0
}

fn spawn(a: &Args) -> i32 {
    let Some(pidfile) = a.get("pidfile") else { return usage("spawn needs --pidfile".into()) };
    if a.rest.is_empty() {
        return usage("spawn needs a program after --".into());
    }
    if let Err(e) = set_cpus(a.get("cpus").unwrap_or("")) {
        eprintln!("{e}");
        return 1;
    }
    // The end of stdin (the controller went away) stops the wait and the program.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut sink);
        let _ = tx.send(());
    });
    if let Some(at) = a.get("at") {
        let Ok(at) = at.parse::<u64>() else { return usage("--at: not a number".into()) };
        loop {
            let now = load::sys::monotonic_ns();
            if now >= at {
                break;
            }
            if rx.recv_timeout(Duration::from_nanos((at - now).min(50_000_000))).is_ok() {
                return 3; // the controller is gone before the start
            }
        }
    }
    let mut cmd = Command::new(&a.rest[0]);
    cmd.args(&a.rest[1..]).stdin(Stdio::null());
    if let Some(f) = a.get("stdout") {
        match std::fs::File::create(f) {
            Ok(file) => {
                cmd.stdout(file);
            }
            Err(e) => {
                eprintln!("cannot create {f}: {e}");
                return 1;
            }
        }
    }
    let launch = load::sys::monotonic_ns();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot start {}: {e}", a.rest[0]);
            return 127;
        }
    };
    let me = std::process::id();
    let line = |pid: u32| format!("{pid} {}\n", start_time(pid).unwrap_or(0));
    if let Err(e) = write_atomic(Path::new(pidfile), &(line(me) + &line(child.id()))) {
        eprintln!("cannot write {pidfile}: {e}");
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s.code().unwrap_or(128),
            Ok(None) => {}
            Err(_) => break 1,
        }
        if rx.recv_timeout(Duration::from_millis(20)).is_ok() {
            // SAFETY: the child is ours and not reaped yet.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = load::sys::monotonic_ns() + 2_000_000_000;
            while matches!(child.try_wait(), Ok(None)) && load::sys::monotonic_ns() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            break child.wait().ok().and_then(|s| s.code()).unwrap_or(128);
        }
    };
    println!("{{\"launch_monotonic_ns\": {launch}, \"exit\": {status}}}");
    0
}

/// Processes of a run directory: its pidfiles' (start time checked) and
/// those whose executable lies inside it. Never this process.
fn run_processes(dir: &Path) -> Vec<u32> {
    let me = std::process::id();
    let mut pids = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) != Some("pid") {
                continue;
            }
            for line in std::fs::read_to_string(&p).unwrap_or_default().lines() {
                let mut it = line.split_whitespace();
                let (Some(Ok(pid)), Some(Ok(st))) = (it.next().map(str::parse::<u32>), it.next().map(str::parse::<u64>))
                else {
                    continue;
                };
                if pid != me && start_time(pid) == Some(st) {
                    pids.push(pid);
                }
            }
        }
    }
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for e in procs.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
            if pid == me || pids.contains(&pid) {
                continue;
            }
            if let Ok(exe) = std::fs::read_link(e.path().join("exe")) {
                if exe.starts_with(dir) {
                    pids.push(pid);
                }
            }
        }
    }
    pids
}

fn kill(dir: &Path) -> i32 {
    let Ok(dir) = dir.canonicalize() else {
        println!("{{\"killed\": 0}}");
        return 0;
    };
    let pids = run_processes(&dir);
    for &p in &pids {
        // SAFETY: plain syscall on a pid we just verified.
        unsafe { libc::kill(p as libc::pid_t, libc::SIGTERM) };
    }
    let deadline = load::sys::monotonic_ns() + 2_000_000_000;
    loop {
        let left = run_processes(&dir);
        if left.is_empty() {
            break;
        }
        if load::sys::monotonic_ns() >= deadline {
            for p in left {
                // SAFETY: as above.
                unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("{{\"killed\": {}}}", pids.len());
    0
}
