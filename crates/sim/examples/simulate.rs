//! Run one resolved config (JSON file) and print the flow summaries and the
//! simulator's speed: `cargo run --release -p sim --example simulate -- run.json`.

use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: simulate RUN.json");
    let text = std::fs::read_to_string(&path).expect("read config");
    let cfg: sim::RunConfig = serde_json::from_str(&text).expect("parse config");
    let t0 = Instant::now();
    let res = sim::simulate(&cfg).expect("simulate");
    let wall = t0.elapsed().as_secs_f64();
    let sim_s = cfg.duration_ns as f64 / 1e9;
    for f in &res.flows {
        println!(
            "flow {:>3}  goodput {:>9.3} Mbit/s  sent {:>8}  retrans {:>6} ({:.2}%)  rtt min/mean/p99 {:.1}/{:.1}/{:.1} ms",
            f.flow_id,
            f.goodput_bps / 1e6,
            f.sent_segs,
            f.retrans_segs,
            100.0 * f.retrans_segs as f64 / f.sent_segs.max(1) as f64,
            f.rtt_min_us.unwrap_or(0.0) / 1e3,
            f.rtt_mean_us.unwrap_or(0.0) / 1e3,
            f.rtt_p99_us.unwrap_or(0.0) / 1e3
        );
    }
    if let Some(i) = res.queue.link.iter().rposition(|l| *l == "bottleneck") {
        println!("bottleneck drops {} random losses {}", res.queue.drops[i], res.queue.random_losses[i]);
    }
    if std::env::var("TRACE").is_ok() {
        let sm = &res.samples;
        let stride: usize = std::env::var("TRACE").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
        for i in (0..sm.time_us.len()).step_by(stride.max(1)) {
            println!(
                "t={:.6}s flow={} cwnd={} inflight={} srtt={}us retrans={} state={} bw_est={:.1}Mbit/s delivered={}",
                sm.time_us[i] as f64 / 1e6,
                sm.flow_id[i],
                sm.cwnd_bytes[i] / 1448,
                sm.inflight_bytes[i] / 1448,
                sm.srtt_us[i],
                sm.retrans_segs[i],
                sm.cca_state[i],
                sm.bw_est_bps[i].unwrap_or(0.0) / 1e6,
                sm.delivered_bytes[i]
            );
        }
    }
    let total: f64 = res.flows.iter().map(|f| f.goodput_bps).sum();
    println!(
        "total {:.3} Mbit/s  wall {:.3} s  sim-s/wall-s {:.1}  bottleneck pkts/wall-s {:.0}  events {}  bottleneck_pkts {}",
        total / 1e6,
        wall,
        sim_s / wall,
        res.stats.bottleneck_pkts as f64 / wall,
        res.stats.events,
        res.stats.bottleneck_pkts
    );
}
