//! `cometd` (seed 001 over Bayeux) against the real Herald server, started
//! in-process on port 0 through the same `run` the binary uses: on both
//! connection types every published message reaches every subscriber of
//! its room, with latency, and the result file parses; the idle mode holds
//! its clients and reads the server's memory; bad arguments and endpoints
//! that do not speak Bayeux are errors, not panics or hangs.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{parse, read_json, temp_path};
use herald_bench::cometd::{self, CometdArgs};
use herald_bench::BenchError;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;

fn args(cmd: &[&str]) -> CometdArgs {
    match parse(cmd) {
        herald_bench::Scenario::Cometd(a) => a,
        _ => panic!("not cometd"),
    }
}

fn server() -> NodeHandle {
    NodeHandle::start(ServeArgs {
        workers: Some(2),
        ..ServeArgs::default()
    })
}

#[test]
fn rate_steps_on_both_transports() {
    let node = server();
    let url = format!("http://{}/cometd", node.addr);
    for transport in ["long-polling", "websocket"] {
        let out = temp_path("cometd.json");
        let a = args(&[
            "cometd",
            &url,
            "--transport",
            transport,
            "-n",
            "12",
            "--rooms",
            "4",
            "-p",
            "2",
            // 3 subscribers per room: 20 and 40 publishes/s.
            "--rates",
            "60,120",
            "--step",
            "1s",
            "--warmup",
            "100ms",
            "--out",
            out.to_str().unwrap(),
        ]);
        let s = cometd::run(&a).unwrap();
        assert_eq!(s.steps.len(), 2, "{transport}");
        for (st, publishes) in s.steps.iter().zip([20, 40]) {
            assert_eq!(st.published, publishes, "{transport} {st:?}");
            // Every room has 3 subscribers.
            assert_eq!(st.expected, publishes * 3, "{transport} {st:?}");
            assert_eq!(st.delivered, st.expected, "{transport} {st:?}");
            assert_eq!(st.lost, 0);
            let lat = st.latency.as_ref().unwrap();
            assert!(lat.count > 0 && lat.count <= st.delivered);
            assert!(lat.p50_ms <= lat.p99_ms && lat.p99_ms <= lat.max_ms);
        }
        let v = read_json(&out);
        assert_eq!(v["scenario"], "cometd");
        assert_eq!(v["passed"], true);
        assert_eq!(v["params"]["transport"], transport);
        assert_eq!(v["steps"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn idle_clients_hold_connect_and_memory_is_read() {
    let node = server();
    let url = format!("http://{}/cometd", node.addr);
    // The server runs in this process: its RSS is ours.
    let pid = std::process::id().to_string();
    for transport in ["long-polling", "websocket"] {
        let a = args(&[
            "cometd",
            &url,
            "--transport",
            transport,
            "-n",
            "30",
            "--rooms",
            "3",
            "--idle",
            "--settle",
            "100ms",
            "--hold",
            "500ms",
            "--server-pid",
            &pid,
        ]);
        let s = cometd::run(&a).unwrap();
        assert!(s.steps.is_empty());
        let idle = s.idle.unwrap();
        assert_eq!(idle.clients, 30);
        assert!(idle.baseline_rss_kib.is_some() && idle.end_rss_kib.is_some());
        assert!(idle.kib_per_client.is_some());
        // The held connects outlive the hold (the server's timeout is 30 s).
        assert_eq!(idle.connect_cycles, 0, "{transport}");
    }
}

#[test]
fn bad_arguments_are_refused_before_connecting() {
    for bad in [
        &["cometd", "http://127.0.0.1:9/cometd", "-n", "0"][..],
        &[
            "cometd",
            "http://127.0.0.1:9/cometd",
            "-n",
            "4",
            "--rooms",
            "5",
        ],
        &["cometd", "http://127.0.0.1:9/cometd", "--rates", "100,0"],
        &["cometd", "http://127.0.0.1:9/cometd", "-p", "0"],
        &[
            "cometd",
            "http://127.0.0.1:9/cometd",
            "-n",
            "19000",
            "-p",
            "1",
        ],
        &["cometd", "http://127.0.0.1:9/cometd", "--step", "11m"],
        &["cometd", "tcp://127.0.0.1:9"],
    ] {
        match cometd::run(&args(bad)) {
            Err(BenchError::Args(_) | BenchError::Url(_)) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn endpoints_that_do_not_speak_bayeux_fail_the_run() {
    let node = server();
    // Long-polling to a path that is not Bayeux: an HTTP error, reported.
    let a = args(&[
        "cometd",
        &format!("http://{}/nope", node.addr),
        "--transport",
        "long-polling",
        "-n",
        "2",
        "--rooms",
        "1",
        "--setup-timeout",
        "5s",
    ]);
    match cometd::run(&a) {
        Err(BenchError::Client(e)) => assert!(e.contains("HTTP 404"), "{e}"),
        other => panic!("{other:?}"),
    }
    // Websocket to Herald's own protocol endpoint: its answer to a Bayeux
    // handshake is not a Bayeux batch (or the socket is closed).
    let a = args(&[
        "cometd",
        &format!("http://{}/ws", node.addr),
        "-n",
        "2",
        "--rooms",
        "1",
        "--setup-timeout",
        "5s",
    ]);
    match cometd::run(&a) {
        Err(BenchError::Client(_) | BenchError::Stalled(_)) => {}
        other => panic!("{other:?}"),
    }
}
