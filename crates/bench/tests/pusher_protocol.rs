//! `fanout --protocol pusher` and `idle --protocol pusher` against the real
//! Herald server (in-process, port 0) with a Pusher app configured as in
//! bench/pusher.toml: Pusher subscribers receive every publication of
//! Herald publishers exactly once, in order, with their stamps read from
//! Pusher's data strings, and idle Pusher connections stay up.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{fanout_args, parse, read_json, temp_path};
use herald_bench::{fanout, Scenario};
use herald_server::config::Secret;
use herald_server::pusher::{AppArgs, PusherArgs};
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;

/// A real server with the bench's Pusher app (id `bench`, key `herald-bench`).
fn start() -> NodeHandle {
    NodeHandle::start(ServeArgs {
        workers: Some(2),
        pusher: Some(PusherArgs {
            apps: vec![AppArgs {
                id: "bench".into(),
                key: "herald-bench".into(),
                secret: Some(Secret("bench-secret-not-secret".into())),
                secret_env: None,
                secret_file: None,
                namespace: None,
                webhook_url: None,
                webhook_events: None,
                webhook_ca_file: None,
                subscription_count: None,
            }],
            ..PusherArgs::default()
        }),
        ..ServeArgs::default()
    })
}

#[test]
fn fanout_over_pusher_is_clean() {
    let server = start();
    let url = server.ws_url();
    let out = temp_path("fanout-pusher.json");
    let a = fanout_args(&[
        "fanout",
        &url,
        "--protocol",
        "pusher",
        "-p",
        "2",
        "-n",
        "6",
        "-C",
        "3",
        "-r",
        "300",
        "--duration",
        "1s",
        "--payload",
        "80",
        "--verify",
        "--out",
        out.to_str().unwrap(),
    ]);
    let s = fanout::run(&a).unwrap();
    assert_eq!(s.sent, 300);
    assert_eq!((s.expected, s.delivered), (600, 600), "{s:?}");
    assert!(s.clean(), "{s:?}");
    assert_eq!(
        (s.lost, s.duplicated, s.out_of_order, s.unreadable),
        (0, 0, 0, 0)
    );
    let lat = s.latency.unwrap();
    assert!(lat.min_ms <= lat.p50_ms && lat.p50_ms <= lat.p99_ms);
    let v = read_json(&out);
    assert_eq!(v["passed"], true);
    assert_eq!(v["params"]["protocol"], "pusher");
    assert_eq!(
        v["verification"]["subscribers"].as_array().unwrap().len(),
        6
    );
}

#[test]
fn fanout_over_pusher_refuses_what_pusher_cannot_do() {
    let server = start();
    let url = server.ws_url();
    for extra in [["--churn", "0.5"], ["--transport", "ws-binary"]] {
        let mut cmd = vec!["fanout", &url, "--protocol", "pusher"];
        cmd.extend_from_slice(&extra);
        assert!(matches!(
            fanout::run(&fanout_args(&cmd)),
            Err(herald_bench::BenchError::Args(_))
        ));
    }
}

#[test]
fn idle_pusher_connections_stay_up() {
    let server = start();
    let url = server.ws_url();
    for channels in ["0", "2"] {
        let Scenario::Idle(a) = parse(&[
            "idle",
            &url,
            "--protocol",
            "pusher",
            "-n",
            "5",
            "--channels",
            channels,
            "--settle",
            "10ms",
            "--duration",
            "500ms",
        ]) else {
            panic!("not idle")
        };
        let steps = herald_bench::idle::run(&a).unwrap();
        assert_eq!(steps[0].clients, 5);
    }
}
