//! `ccbench-emu`: the link emulator as a standalone program, for the hosts
//! backend (docs/hosts-backend.md), which copies it to a forwarding host
//! and starts it there over SSH:
//!
//!     ccbench-emu --version
//!     ccbench-emu run --pidfile FILE --result FILE [--cpus LIST]
//!
//! `run` reads the emulator config (docs/interfaces.md §4) as one JSON
//! line on stdin, runs `emu::run_json` and writes its summary to the
//! result file; the end of stdin stops it early (the controller is gone).

use signals::remote::{run_command, Args};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("--version") => {
            println!("ccbench-emu {}", env!("CARGO_PKG_VERSION"));
            0
        }
        Some("run") => match Args::parse(&args[1..]) {
            Ok(a) => run_command(&a, emu::run_json),
            Err(e) => {
                eprintln!("{e}");
                2
            }
        },
        _ => {
            eprintln!("usage: ccbench-emu --version | run --pidfile FILE --result FILE [--cpus LIST]");
            2
        }
    };
    std::process::exit(code);
}
