//! ccbench's traffic generator for real kernels (docs/interfaces.md §4):
//! bulk and RPC flows over ordinary TCP sockets, each with its own
//! congestion control (TCP_CONGESTION), and TCP_INFO sampling.

pub mod client;
pub mod proto;
pub mod server;
pub mod sockops;
pub mod sys;
pub mod tcp_info;

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    /// Server and client on loopback: a bulk flow and an RPC flow.
    #[test]
    fn bulk_and_rpc_over_loopback() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let now = crate::sys::monotonic_ns();
        let t0 = now + 100_000_000;
        let end = t0 + 800_000_000;
        let server_cfg = json!({"listen": format!("127.0.0.1:{port}"), "stop_at_monotonic_ns": end + 200_000_000, "t0_monotonic_ns": t0});
        let server = std::thread::spawn(move || crate::server::run_json(&server_cfg.to_string()));
        let dir = std::env::temp_dir().join(format!("ccbench-load-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let samples = dir.join("samples.jsonl");
        let client_cfg = json!({
            "server": format!("127.0.0.1:{port}"), "t0_monotonic_ns": t0, "stop_at_monotonic_ns": end,
            "sample_interval_ns": 100_000_000, "samples_path": samples.to_str().unwrap(),
            "flows": [
                {"id": 0, "cca": "reno", "kind": "bulk", "start_ns": 0, "stop_ns": 500_000_000,
                 "request_bytes": null, "response_bytes": null, "think_ns": null, "mss": null},
                {"id": 1, "cca": "cubic", "kind": "rpc", "start_ns": 100_000_000, "stop_ns": null,
                 "request_bytes": 10000, "response_bytes": 100, "think_ns": 1_000_000, "mss": 1000},
            ]
        });
        let out: Value = serde_json::from_str(&crate::client::run_json(&client_cfg.to_string()).unwrap()).unwrap();
        let srv: Value = serde_json::from_str(&server.join().unwrap().unwrap()).unwrap();
        let flows = out["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 2);
        let bulk = &flows[0];
        assert!(bulk["bytes_acked"].as_u64().unwrap() > 10_000_000, "{bulk}");
        assert_eq!(bulk["active_stop_us"], 500_000);
        assert!(bulk["rtt_min_us"].as_f64().unwrap() > 0.0);
        let n_rpcs = out["rpcs"]["flow_id"].as_array().unwrap().len();
        assert!(n_rpcs > 50, "{n_rpcs} rpcs");
        assert!(out["rpcs"]["start_us"][0].as_u64().unwrap() >= 100_000);
        assert_eq!(out["rpcs"]["response_bytes"][0], 100);
        // The server saw both flows; bulk bytes match what the client had acknowledged.
        let sflows = srv["flows"].as_array().unwrap();
        assert_eq!(sflows.len(), 2, "{srv}");
        assert_eq!(sflows[0]["flow_id"], 0);
        assert_eq!(sflows[0]["cca"], "reno");
        assert!(sflows[0]["bytes_received"].as_u64().unwrap() == bulk["bytes_acked"].as_u64().unwrap(), "{srv} {out}");
        assert_eq!(sflows[1]["kind"], "rpc");
        assert!(sflows[1]["requests_served"].as_u64().unwrap() >= n_rpcs as u64);
        assert_eq!(srv["errors"].as_array().unwrap().len(), 0, "{srv}");
        // Samples every 100 ms up to 800 ms of each connected flow.
        let text = std::fs::read_to_string(&samples).unwrap();
        let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(rows.len() as u64, out["sample_rows"].as_u64().unwrap());
        let bulk_rows: Vec<_> = rows.iter().filter(|r| r["flow_id"] == 0).collect();
        assert_eq!(bulk_rows.len(), 8);
        assert_eq!(bulk_rows[0]["time_us"], 100_000);
        assert!(bulk_rows[0]["cwnd_bytes"].as_u64().unwrap() > 0);
        assert!(["slow_start", "cong_avoid"].contains(&bulk_rows[0]["cca_state"].as_str().unwrap()));
        assert_eq!(bulk_rows[0]["bw_est_bps"], Value::Null);
        // Reno without a pacing cap is not paced: no pacing rate.
        assert_eq!(bulk_rows[0]["pacing_rate_bps"], Value::Null);
        let rpc_rows = rows.iter().filter(|r| r["flow_id"] == 1).count();
        // From 100 ms (if it connected before that tick) or 200 ms on.
        assert!((6..=8).contains(&rpc_rows), "{rpc_rows}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn an_unknown_cca_is_named_in_the_error() {
        let cfg = json!({
            "server": "127.0.0.1:9", "t0_monotonic_ns": 0, "stop_at_monotonic_ns": 0,
            "sample_interval_ns": 100_000_000, "samples_path": "/dev/null",
            "flows": [{"id": 3, "cca": "nosuchcca", "kind": "bulk", "start_ns": 0}]
        });
        let e = crate::client::run_json(&cfg.to_string()).unwrap_err();
        assert!(e.contains("flow 3") && e.contains("nosuchcca") && e.contains("available"), "{e}");
    }

    /// A transfer sends exactly its size from the port it was given, then
    /// closes its side; the server reports it complete.
    #[test]
    fn transfer_from_a_bound_port() {
        let free_port = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let (port, cport) = (free_port(), free_port());
        let now = crate::sys::monotonic_ns();
        let t0 = now + 100_000_000;
        let end = t0 + 600_000_000;
        let server_cfg = json!({"listen": format!("127.0.0.1:{port}"), "stop_at_monotonic_ns": end + 100_000_000, "t0_monotonic_ns": t0});
        let server = std::thread::spawn(move || crate::server::run_json(&server_cfg.to_string()));
        let dir = std::env::temp_dir().join(format!("ccbench-load-transfer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let client_cfg = json!({
            "server": "127.0.0.1:9", "t0_monotonic_ns": t0, "stop_at_monotonic_ns": end,
            "sample_interval_ns": 100_000_000, "samples_path": dir.join("s.jsonl").to_str().unwrap(),
            "flows": [{"id": 5, "cca": "reno", "kind": "transfer", "start_ns": 0, "size_bytes": 3_000_000,
                       "bind_port": cport, "server": format!("127.0.0.1:{port}")}]
        });
        let out: Value = serde_json::from_str(&crate::client::run_json(&client_cfg.to_string()).unwrap()).unwrap();
        let srv: Value = serde_json::from_str(&server.join().unwrap().unwrap()).unwrap();
        assert_eq!(out["flows"][0]["bytes_acked"], 3_000_000, "{out}");
        assert_eq!(out["flows"][0]["kind"], "transfer");
        let f = &srv["flows"][0];
        assert_eq!((f["flow_id"].as_u64(), f["kind"].as_str(), f["bytes_received"].as_u64()), (Some(5), Some("transfer"), Some(3_000_000)), "{srv}");
        assert_eq!(f["complete"], true);
        assert!(f["last_byte_us"].as_u64().unwrap() < 500_000, "{srv}");
        assert_eq!(srv["errors"].as_array().unwrap().len(), 0, "{srv}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
