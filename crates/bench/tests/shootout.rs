//! `broadcast` and `echo` against an in-test shootout server: the correct
//! server passes verification, a lossy or duplicating one fails it, and the
//! JSON result parses.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use clap::Parser;
use common::{spawn_shootout, temp_path, Faults};
use herald_bench::shootout::{self, ShootoutArgs, ShootoutOutcome};
use herald_bench::{BenchError, Scenario};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

fn args(cmd: &[&str]) -> (ShootoutArgs, bool) {
    let mut argv = vec!["bench"];
    argv.extend_from_slice(cmd);
    argv.push("--quiet");
    match Cli::try_parse_from(argv).unwrap().scenario {
        Scenario::Broadcast(a) => (a, true),
        Scenario::Echo(a) => (a, false),
        _ => panic!("not a shootout scenario"),
    }
}

fn measure(cmd: &[&str]) -> ShootoutOutcome {
    let (a, broadcast) = args(cmd);
    shootout::measure(&a, broadcast).unwrap()
}

#[test]
fn broadcast_json_passes_and_writes_results() {
    let addr = spawn_shootout(Faults::default());
    let url = format!("ws://{addr}/");
    let out = temp_path("broadcast.json");
    let csv = temp_path("broadcast.csv");
    let o = measure(&[
        "broadcast",
        &url,
        "--step-size",
        "10",
        "--total-steps",
        "3",
        "--sample-size",
        "15",
        "--payload-padding",
        "100",
        "-l",
        "127.0.0.1",
        "-l",
        "127.0.0.2",
        "--out",
        out.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(o.verification.passed(), "{:?}", o.verification);
    assert_eq!(o.steps.len(), 3);
    assert_eq!(o.steps[2].clients, 30);
    // Every client joined before its step's broadcasts: 10×15×3 + 10×15×2 + 10×15.
    assert_eq!(o.verification.expected, 900);
    assert_eq!(o.verification.received, 900);
    for s in &o.steps {
        assert_eq!(s.rtt.count, 15);
        assert_eq!(s.all_received.as_ref().unwrap().count, 15);
        assert_eq!(s.incomplete_broadcasts, 0);
        assert!(s
            .line()
            .starts_with(&format!("clients: {:5}    95per-rtt: ", s.clients)));
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "herald-bench/1");
    assert_eq!(v["scenario"], "broadcast");
    assert_eq!(v["passed"], true);
    assert_eq!(v["steps"].as_array().unwrap().len(), 3);
    assert_eq!(v["steps"][0]["clients"], 10);
    assert!(v["steps"][0]["rtt"]["pct_ms"].is_number());
    assert!(v["steps"][0]["all_received"]["max_ms"].is_number());
    assert_eq!(v["params"]["sample_size"], 15);
    assert_eq!(v["verification"]["missing"], 0);
    let table = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(table.lines().count(), 4);
    assert!(table.lines().next().unwrap().contains("rtt.pct_ms"));
    let _ = std::fs::remove_file(out);
    let _ = std::fs::remove_file(csv);
}

#[test]
fn broadcast_binary_passes() {
    let addr = spawn_shootout(Faults::default());
    let o = measure(&[
        "broadcast",
        &format!("ws://{addr}/"),
        "--server-type",
        "binary",
        "--initial-clients",
        "25",
        "--step-size",
        "5",
        "--total-steps",
        "2",
        "--sample-size",
        "10",
        "--concurrent",
        "3",
    ]);
    assert!(o.verification.passed(), "{:?}", o.verification);
    assert_eq!(o.steps[0].clients, 25);
    assert_eq!(o.steps[1].clients, 30);
    assert_eq!(o.verification.received, 25 * 20 + 5 * 10);
}

#[test]
fn lossy_server_fails_verification() {
    // Delivery 100 falls in the first step's sample (the first 20 deliveries
    // are the membership probe).
    let lossy = Faults {
        drop_delivery: Some(100),
        ..Faults::default()
    };
    let cmd = |addr: std::net::SocketAddr| {
        args(&[
            "broadcast",
            &format!("ws://{addr}/"),
            "--step-size",
            "20",
            "--total-steps",
            "2",
            "--sample-size",
            "10",
            "--drain-timeout",
            "300ms",
        ])
        .0
    };
    let o = shootout::measure(&cmd(spawn_shootout(lossy)), true).unwrap();
    assert!(!o.verification.passed());
    assert_eq!(o.verification.missing, 1);
    assert_eq!(o.verification.clients_missing, 1);
    assert_eq!(o.steps[0].incomplete_broadcasts, 1);
    assert!(!o.record.passed);
    // Through the public entry point, the same run is an error.
    match shootout::run(&cmd(spawn_shootout(lossy)), true) {
        Err(BenchError::Verification(msg)) => assert!(msg.contains("missing"), "{msg}"),
        other => panic!("expected a verification failure, got {other:?}"),
    }
}

#[test]
fn duplicating_server_fails_verification() {
    let addr = spawn_shootout(Faults {
        dup_delivery: Some(150),
        ..Faults::default()
    });
    let o = measure(&[
        "broadcast",
        &format!("ws://{addr}/"),
        "--step-size",
        "20",
        "--total-steps",
        "2",
        "--sample-size",
        "10",
    ]);
    assert!(!o.verification.passed());
    assert_eq!(o.verification.extra, 1);
    assert_eq!(o.verification.missing, 0);
}

#[test]
fn duplicated_broadcast_result_fails_verification() {
    let addr = spawn_shootout(Faults {
        dup_answer: Some(5),
        ..Faults::default()
    });
    let o = measure(&[
        "broadcast",
        &format!("ws://{addr}/"),
        "--step-size",
        "10",
        "--total-steps",
        "1",
        "--sample-size",
        "10",
    ]);
    assert!(!o.verification.passed());
    assert_eq!(o.verification.unmatched_answers, 1);
}

#[test]
fn echo_passes_and_catches_duplicates() {
    let addr = spawn_shootout(Faults::default());
    let url = format!("ws://{addr}/");
    let o = measure(&[
        "echo",
        &url,
        "--step-size",
        "10",
        "--total-steps",
        "2",
        "--sample-size",
        "200",
    ]);
    assert!(o.verification.passed(), "{:?}", o.verification);
    assert_eq!(o.steps.len(), 2);
    assert_eq!(o.steps[1].rtt.count, 200);
    assert!(o.steps[0].all_received.is_none());

    let addr = spawn_shootout(Faults {
        dup_answer: Some(7),
        ..Faults::default()
    });
    let o = measure(&[
        "echo",
        &format!("ws://{addr}/"),
        "--server-type",
        "binary",
        "--step-size",
        "10",
        "--total-steps",
        "1",
        "--sample-size",
        "50",
    ]);
    assert!(!o.verification.passed());
    assert_eq!(o.verification.unmatched_answers, 1);
}

#[test]
fn refused_connection_is_an_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (a, _) = args(&[
        "broadcast",
        &format!("ws://127.0.0.1:{port}/"),
        "--step-size",
        "3",
    ]);
    match shootout::measure(&a, true) {
        Err(BenchError::Client(msg)) => assert!(msg.contains("connect"), "{msg}"),
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[test]
fn shootout_refuses_non_websocket_transports() {
    for transport in ["tcp", "sse", "poll"] {
        let (a, broadcast) = args(&["broadcast", "ws://127.0.0.1:1/", "--transport", transport]);
        match shootout::run(&a, broadcast) {
            Err(BenchError::Args(e)) => assert!(e.contains(transport), "{e}"),
            other => panic!("--transport {transport} must be refused, got {other:?}"),
        }
    }
}
