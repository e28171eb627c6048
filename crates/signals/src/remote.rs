//! What the standalone binaries (`ccbench-load`, `ccbench-emu`) share when
//! the hosts backend runs them on a remote machine over SSH
//! (docs/hosts-backend.md):
//!
//! * the config arrives as one JSON line on stdin, and the end of stdin
//!   afterwards means the controller is gone (its SSH connection closed):
//!   the process then stops as on SIGTERM;
//! * a pidfile (`PID STARTTIME`, the start time in clock ticks from
//!   /proc/PID/stat) lets cleanup stop exactly this process later and
//!   never a process that reused its pid;
//! * results are written to a file atomically (a temporary file + rename);
//! * `ready` on stdout says the process started and waits for its config.

use std::io::{BufRead, Read};
use std::path::Path;

/// The process's start time (field 22 of /proc/PID/stat), in clock ticks.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Write `PID STARTTIME` of `pid` to `path`.
pub fn write_pidfile(path: &Path, pid: u32) -> std::io::Result<()> {
    let st = start_time(pid).unwrap_or(0);
    write_atomic(path, &format!("{pid} {st}\n"))
}

pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Read the config: the first line of stdin. Then, in a thread, wait for
/// the end of stdin and stop the process as SIGTERM would (a run loop with
/// a SignalGuard returns what it has; before that, the process ends).
pub fn config_from_stdin() -> Result<String, String> {
    let mut line = String::new();
    let stdin = std::io::stdin();
    stdin.lock().read_line(&mut line).map_err(|e| format!("reading the config from stdin: {e}"))?;
    if line.trim().is_empty() {
        return Err("no config on stdin (the controller went away)".into());
    }
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().lock().read_to_end(&mut sink);
        // SAFETY: raise is async-signal-safe and takes no pointers.
        unsafe { libc::raise(libc::SIGTERM) };
    });
    Ok(line)
}

/// Restrict this process to the given CPUs (a comma-separated list; empty = no change).
pub fn set_cpus(list: &str) -> Result<(), String> {
    let cpus: Vec<usize> = list
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim().parse::<usize>().map_err(|_| format!("--cpus: not a CPU number: {s:?}")))
        .collect::<Result<_, _>>()?;
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in &cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!("--cpus {list}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Options of the form `--name value` before the positional arguments.
pub struct Args {
    pub opts: Vec<(String, String)>,
    pub rest: Vec<String>,
}

impl Args {
    /// `--name value` pairs until `--` or the first argument not starting with `--`.
    pub fn parse(args: &[String]) -> Result<Args, String> {
        let mut opts = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a == "--" {
                i += 1;
                break;
            }
            if let Some(name) = a.strip_prefix("--") {
                let v = args.get(i + 1).ok_or_else(|| format!("{a} needs a value"))?;
                opts.push((name.to_string(), v.clone()));
                i += 2;
            } else {
                break;
            }
        }
        Ok(Args { opts, rest: args[i..].to_vec() })
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.opts.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// The body of a `run` command: pidfile, CPUs, config from stdin, the
/// function, its JSON (or `{"error": ...}`) to the result file. Exit status.
pub fn run_command(args: &Args, f: fn(&str) -> Result<String, String>) -> i32 {
    let (Some(pidfile), Some(result)) = (args.get("pidfile"), args.get("result")) else {
        eprintln!("usage: run --pidfile FILE --result FILE [--cpus LIST] (config on stdin)");
        return 2;
    };
    if let Err(e) = write_pidfile(Path::new(pidfile), std::process::id()) {
        eprintln!("cannot write {pidfile}: {e}");
        return 1;
    }
    let out = set_cpus(args.get("cpus").unwrap_or("")).and_then(|_| {
        // "ready": started, pidfile written; the controller now sends the config.
        use std::io::Write;
        let mut o = std::io::stdout().lock();
        writeln!(o, "ready").and_then(|_| o.flush()).map_err(|e| format!("stdout: {e}"))?;
        config_from_stdin()
    }).and_then(|c| f(&c));
    let (text, code) = match out {
        Ok(t) => (t, 0),
        Err(e) => {
            eprintln!("{e}");
            (format!("{{\"error\": {}}}", json_string(&e)), 1)
        }
    };
    if let Err(e) = write_atomic(Path::new(result), &text) {
        eprintln!("cannot write {result}: {e}");
        return 1;
    }
    code
}

/// A JSON string literal (for error messages; no serde here).
pub fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_start_time_is_known() {
        assert!(start_time(std::process::id()).is_some());
    }

    #[test]
    fn args_and_json() {
        let a: Vec<String> = ["--pidfile", "p", "--", "x", "--y"].iter().map(|s| s.to_string()).collect();
        let p = Args::parse(&a).unwrap();
        assert_eq!(p.get("pidfile"), Some("p"));
        assert_eq!(p.rest, vec!["x", "--y"]);
        assert_eq!(json_string("a\"b\n"), "\"a\\\"b\\u000a\"");
    }
}
