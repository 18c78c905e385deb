//! `fanout`, `bots` and `stream` over raw TCP, SSE and long-polling against
//! the real Herald server (started in-process on port 0 through the same
//! `run` the binary uses): each produces a result file that parses and
//! verifies clean; churned subscribers recover with nothing lost or
//! duplicated; a subscriber whose first URL is down fails over to the next;
//! and without history the churn's losses are reported and fail the run.
//! `idle` holds connections on every transport.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::net::SocketAddr;

use common::{fanout_args, parse, read_json, temp_path};
use herald_bench::{fanout, BenchError, Scenario};
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use tokio_util::sync::CancellationToken;

/// A real server: HTTP/WebSocket and raw TCP listeners on port 0. Stops
/// when dropped.
/// A real server on its own runtime (two workers), shut down when dropped.
struct Server(NodeHandle);

impl Server {
    fn ws(&self) -> String {
        self.0.ws_url()
    }
    fn http(&self) -> String {
        format!("http://{}", self.0.addr)
    }
    fn tcp(&self) -> String {
        format!("tcp://{}", self.0.tcp_addr)
    }
}

fn start(args: ServeArgs) -> Server {
    Server(NodeHandle::start(ServeArgs {
        workers: args.workers.or(Some(2)),
        ..args
    }))
}

fn start_default() -> Server {
    start(ServeArgs::default())
}

/// A small fanout: 2 publishers, 6 subscribers on 3 channels, 300 msg/s for 1 s.
fn small_fanout(url: &str, extra: &[&str]) -> (fanout::FanoutSummary, serde_json::Value) {
    let out = temp_path("fanout.json");
    let mut cmd = vec![
        "fanout",
        url,
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
    ];
    let out_s = out.to_str().unwrap().to_owned();
    cmd.push(&out_s);
    cmd.extend_from_slice(extra);
    let s = fanout::run(&fanout_args(&cmd)).unwrap();
    (s, read_json(&out))
}

fn assert_clean_fanout(s: &fanout::FanoutSummary, v: &serde_json::Value, via: &str) {
    assert_eq!(s.sent, 300);
    assert_eq!((s.expected, s.delivered), (600, 600), "{s:?}");
    assert!(s.clean(), "{s:?}");
    assert!(s.latency.is_some());
    assert_eq!(v["scenario"], "fanout");
    assert_eq!(v["passed"], true);
    assert_eq!(v["params"]["publish_via"], via);
    assert_eq!(v["summary"]["lost"], 0);
    let subs = v["verification"]["subscribers"].as_array().unwrap();
    assert_eq!(subs.len(), 6);
    assert!(subs.iter().all(|s| s["lost"] == 0 && s["delivered"] == 100));
}

#[test]
fn fanout_over_tcp_sse_and_poll() {
    let server = start_default();
    let (s, v) = small_fanout(&server.tcp(), &["--transport", "tcp"]);
    assert_clean_fanout(&s, &v, "tcp");
    let (s, v) = small_fanout(&server.http(), &["--transport", "sse"]);
    assert_clean_fanout(&s, &v, "http");
    let (s, v) = small_fanout(&server.http(), &["--transport", "poll"]);
    assert_clean_fanout(&s, &v, "http");
    // Other publisher paths: WebSocket for SSE subscribers, raw TCP for
    // WebSocket-binary ones.
    let (s, v) = small_fanout(
        &server.http(),
        &["--transport", "sse", "--publish-via", "ws-json"],
    );
    assert_clean_fanout(&s, &v, "ws-json");
    let tcp = server.tcp();
    let (s, v) = small_fanout(
        &server.ws(),
        &[
            "--transport",
            "ws-binary",
            "--publish-via",
            "tcp",
            "--publish-url",
            &tcp,
        ],
    );
    assert_clean_fanout(&s, &v, "tcp");
}

#[test]
fn fanout_refuses_impossible_combinations() {
    let server = start_default();
    let bad = |cmd: &[&str]| match fanout::run(&fanout_args(cmd)) {
        Err(BenchError::Args(_) | BenchError::Url(_)) => {}
        other => panic!("{cmd:?} must be refused, got {other:?}"),
    };
    let (ws, tcp) = (server.ws(), server.tcp());
    // Binary stamps cannot go through the JSON publish API.
    bad(&[
        "fanout",
        &tcp,
        "--transport",
        "tcp",
        "--publish-via",
        "http",
    ]);
    // Raw TCP has its own port: no URL to derive.
    bad(&[
        "fanout",
        &ws,
        "--transport",
        "ws-binary",
        "--publish-via",
        "tcp",
    ]);
    bad(&["fanout", &ws, "--transport", "tcp"]);
    bad(&["fanout", &ws, "--churn", "1.5"]);
    // Bots need answers: not over SSE or long-polling.
    for transport in ["sse", "poll"] {
        let Scenario::Bots(a) = parse(&["bots", &server.http(), "--transport", transport]) else {
            panic!("not bots")
        };
        assert!(matches!(
            herald_bench::bots::run(&a),
            Err(BenchError::Args(_))
        ));
    }
    // A raw TCP stream needs a tcp:// URL.
    let Scenario::Stream(a) = parse(&["stream", &ws, "--transport", "tcp"]) else {
        panic!("not stream")
    };
    assert!(matches!(
        herald_bench::stream::run(&a),
        Err(BenchError::Url(_))
    ));
}

/// Churns half the subscribers of a 2 s run; returns the summary.
fn churn_run(
    url: &str,
    transport: &str,
    allow_loss: bool,
) -> Result<fanout::FanoutSummary, BenchError> {
    let mut cmd = vec![
        "fanout",
        url,
        "--transport",
        transport,
        "-p",
        "2",
        "-n",
        "6",
        "-C",
        "2",
        "-r",
        "200",
        "--duration",
        "2s",
        "--drain",
        "2s",
        "--churn",
        "0.5",
        "--churn-downtime",
        "200ms",
        "--verify",
    ];
    if allow_loss {
        cmd.push("--allow-loss");
    }
    fanout::run(&fanout_args(&cmd))
}

#[test]
fn churned_subscribers_recover_everything() {
    let server = start_default();
    for (url, transport) in [
        (server.ws(), "ws-json"),
        (server.ws(), "ws-binary"),
        (server.tcp(), "tcp"),
        (server.http(), "sse"),
        (server.http(), "poll"),
    ] {
        let s = churn_run(&url, transport, false).unwrap_or_else(|e| panic!("{transport}: {e}"));
        assert_eq!(
            (s.lost, s.duplicated, s.out_of_order),
            (0, 0, 0),
            "{transport}: {s:?}"
        );
        assert_eq!(s.failed_recoveries, 0, "{transport}: {s:?}");
        assert_eq!(s.reconnects.churned, 3, "{transport}: {s:?}");
        assert_eq!(s.reconnects.reconnected, 3, "{transport}: {s:?}");
        // 100 msg/s per channel and 200 ms away: each churned subscriber
        // missed some, and got them back through recovery.
        assert!(s.recovered >= 3, "{transport}: {s:?}");
        assert_eq!(s.delivered, s.expected);
    }
}

#[test]
fn churn_without_history_is_reported_as_loss() {
    let server = start(ServeArgs {
        history_size: Some(0),
        ..ServeArgs::default()
    });
    for (url, transport) in [(server.ws(), "ws-binary"), (server.http(), "poll")] {
        match churn_run(&url, transport, false) {
            Err(BenchError::Verification(_)) => {}
            other => panic!("{transport}: unrecoverable churn must fail the run, got {other:?}"),
        }
        let s = churn_run(&url, transport, true).unwrap();
        assert!(s.lost > 0, "{transport}: {s:?}");
        assert!(s.failed_recoveries >= 1, "{transport}: {s:?}");
        assert_eq!(s.duplicated, 0, "{transport}: {s:?}");
    }
}

#[test]
fn subscribers_fail_over_to_the_next_url() {
    let server = start_default();
    // A port nobody listens on: half the subscribers start there.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_url = format!("ws://{}/ws", dead.local_addr().unwrap());
    drop(dead);
    let ws = server.ws();
    let urls = format!("{dead_url},{ws}");
    let (s, v) = small_fanout(&urls, &["--publish-url", &ws]);
    assert_clean_fanout(&s, &v, "ws-json");
    assert!(s.reconnects.failovers >= 3, "{s:?}");
    assert_eq!(v["params"]["urls"].as_array().unwrap().len(), 2);
}

#[test]
fn bots_over_tcp() {
    let server = start_default();
    let out = temp_path("bots.json");
    let tcp = server.tcp();
    let Scenario::Bots(a) = parse(&[
        "bots",
        &tcp,
        "--transport",
        "tcp",
        "-n",
        "20",
        "--step-size",
        "10",
        "--step-duration",
        "1s",
        "--rate",
        "10",
        "--table-size",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]) else {
        panic!("not bots")
    };
    let steps = herald_bench::bots::run(&a).unwrap();
    assert_eq!(steps.len(), 2);
    assert!(steps[1].actual_eps > 0.0 && steps[1].pushes_per_s > steps[1].actual_eps);
    assert!(steps[1].response.is_some());
    let v = read_json(&out);
    assert_eq!(v["scenario"], "bots");
    assert_eq!(v["params"]["transport"], "tcp");
    assert!(v["steps"][1]["response"]["p95_ms"].is_number());
}

#[test]
fn stream_over_sse_tcp_and_poll() {
    let server = start_default();
    for (url, transport) in [
        (server.http(), "sse"),
        (server.tcp(), "tcp"),
        (server.http(), "poll"),
    ] {
        let out = temp_path("stream.json");
        let Scenario::Stream(a) = parse(&[
            "stream",
            &url,
            "--transport",
            transport,
            "-c",
            "2",
            "-b",
            "1,20",
            "--interval",
            "10ms",
            "--step-duration",
            "400ms",
            "--drain",
            "200ms",
            "--out",
            out.to_str().unwrap(),
        ]) else {
            panic!("not stream")
        };
        let steps = herald_bench::stream::run(&a).unwrap();
        assert_eq!(steps.len(), 2, "{transport}");
        assert!(
            steps.iter().all(|s| s.eps > 0.0 && s.lost_batches == 0),
            "{transport}: {steps:?}"
        );
        let v = read_json(&out);
        assert_eq!(v["scenario"], "stream");
        assert_eq!(v["passed"], true);
        assert_eq!(v["params"]["transport"], transport);
    }
}

#[test]
fn idle_over_tcp_sse_and_poll() {
    let server = start_default();
    let pid = std::process::id().to_string();
    for (url, transport) in [
        (server.tcp(), "tcp"),
        (server.http(), "sse"),
        (server.http(), "poll"),
    ] {
        let out = temp_path("idle.json");
        let Scenario::Idle(a) = parse(&[
            "idle",
            &url,
            "--transport",
            transport,
            "-n",
            "12",
            "--step-size",
            "6",
            "--channels",
            "2",
            "--settle",
            "50ms",
            "--server-pid",
            &pid,
            "--out",
            out.to_str().unwrap(),
        ]) else {
            panic!("not idle")
        };
        let steps = herald_bench::idle::run(&a).unwrap();
        assert_eq!(
            steps.iter().map(|s| s.clients).collect::<Vec<_>>(),
            vec![6, 12]
        );
        let v = read_json(&out);
        assert_eq!(v["scenario"], "idle", "{transport}");
        assert_eq!(v["summary"]["clients"], 12, "{transport}");
    }
    // An SSE stream needs a channel.
    let Scenario::Idle(a) = parse(&["idle", &server.http(), "--transport", "sse"]) else {
        panic!("not idle")
    };
    assert!(matches!(
        herald_bench::idle::run(&a),
        Err(BenchError::Args(_))
    ));
}

#[test]
fn silent_clients_survive_heartbeats() {
    // Heartbeats every second and 1 s to answer: a raw TCP client must
    // answer the server's zero-length frames, a WebSocket client its pings;
    // SSE streams get comments, long-polls count as activity.
    let server = start(ServeArgs {
        ping_interval: Some(1),
        pong_timeout: Some(1),
        poll_timeout: Some(1),
        ..ServeArgs::default()
    });
    for (url, transport) in [
        (server.ws(), "ws-binary"),
        (server.tcp(), "tcp"),
        (server.http(), "sse"),
        (server.http(), "poll"),
    ] {
        let Scenario::Idle(a) = parse(&[
            "idle",
            &url,
            "--transport",
            transport,
            "-n",
            "4",
            "--channels",
            "1",
            "--settle",
            "10ms",
            "--duration",
            "3500ms",
        ]) else {
            panic!("not idle")
        };
        let steps = herald_bench::idle::run(&a).unwrap_or_else(|e| panic!("{transport}: {e}"));
        assert_eq!(steps[0].clients, 4);
    }
}

/// A TCP proxy to `upstream` that can stall (stop forwarding, connections
/// held open) and then die (listener closed, every connection cut), as a
/// node that hangs and then crashes.
struct Proxy {
    addr: SocketAddr,
    stall: CancellationToken,
    kill: CancellationToken,
}

fn proxy(upstream: SocketAddr) -> Proxy {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let (stall, kill) = (CancellationToken::new(), CancellationToken::new());
    let (stalled, killed) = (stall.clone(), kill.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let (mut down, _) = tokio::select! {
                    _ = killed.cancelled() => return,
                    r = listener.accept() => match r { Ok(c) => c, Err(_) => continue },
                };
                let (stalled, killed) = (stalled.clone(), killed.clone());
                tokio::spawn(async move {
                    let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = stalled.cancelled() => {}
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => return,
                    }
                    killed.cancelled().await;
                });
            }
        });
    });
    Proxy { addr, stall, kill }
}

#[test]
fn subscribers_fail_over_mid_run_and_recover() {
    let server = start_default();
    for transport in ["ws-binary", "sse", "poll"] {
        // Half the subscribers reach the server through a "node" that
        // hangs 700 ms into the run and dies 300 ms later; they move to
        // the next URL (the server itself) and recover from its history
        // what the hung node swallowed.
        let node = proxy(server.0.addr);
        let scheme = if transport == "ws-binary" {
            "ws"
        } else {
            "http"
        };
        let path = if transport == "ws-binary" { "/ws" } else { "" };
        let urls = format!(
            "{scheme}://{}{path},{scheme}://{}{path}",
            node.addr, server.0.addr
        );
        let publish = format!("ws://{}/ws", server.0.addr);
        let via = if transport == "ws-binary" {
            "ws-binary"
        } else {
            "ws-json"
        };
        let (stall, kill) = (node.stall.clone(), node.kill.clone());
        let killer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(700));
            stall.cancel();
            std::thread::sleep(std::time::Duration::from_millis(300));
            kill.cancel();
        });
        let s = fanout::run(&fanout_args(&[
            "fanout",
            &urls,
            "--transport",
            transport,
            "--publish-via",
            via,
            "--publish-url",
            &publish,
            "-p",
            "2",
            "-n",
            "6",
            "-C",
            "2",
            "-r",
            "200",
            "--duration",
            "2s",
            "--verify",
        ]))
        .unwrap_or_else(|e| panic!("{transport}: {e}"));
        killer.join().unwrap();
        assert_eq!(
            (s.lost, s.duplicated, s.out_of_order),
            (0, 0, 0),
            "{transport}: {s:?}"
        );
        assert_eq!(s.failed_recoveries, 0, "{transport}: {s:?}");
        assert!(s.reconnects.lost >= 3, "{transport}: {s:?}");
        assert!(s.reconnects.failovers >= 3, "{transport}: {s:?}");
        assert!(s.reconnects.reconnected >= 3, "{transport}: {s:?}");
        // 100 msg/s per channel for 300 ms swallowed by the hung node.
        assert!(s.recovered >= 3, "{transport}: {s:?}");
    }
}
