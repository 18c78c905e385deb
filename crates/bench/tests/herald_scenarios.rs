//! `fanout`, `bots`, `stream` and `idle` against an in-test Herald-protocol
//! stub: each runs briefly, its JSON output parses, and fanout's loss,
//! duplicate and reordering counters catch a deliberately faulty stub.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use clap::Parser;
use common::{
    fanout_args, parse, read_json, spawn_herald, spawn_shootout, temp_path, Cli, Faults,
    HeraldFaults,
};
use herald_bench::{fanout, BenchError, Scenario};

#[test]
fn fanout_clean_in_both_encodings() {
    let addr = spawn_herald(HeraldFaults::default());
    let url = format!("ws://{addr}/ws");
    for transport in ["ws-json", "ws-binary"] {
        let out = temp_path("fanout.json");
        let a = fanout_args(&[
            "fanout",
            &url,
            "--transport",
            transport,
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
            "--out",
            out.to_str().unwrap(),
        ]);
        let s = fanout::run(&a).unwrap();
        assert_eq!(s.sent, 300);
        // 3 channels × 2 subscribers each: every message reaches 2.
        assert_eq!(s.expected, 600);
        assert_eq!(s.delivered, 600);
        assert!(s.clean(), "{s:?}");
        let lat = s.latency.unwrap();
        assert!(lat.min_ms <= lat.p50_ms && lat.p50_ms <= lat.p99_ms && lat.p99_ms <= lat.max_ms);
        let v = read_json(&out);
        assert_eq!(v["scenario"], "fanout");
        assert_eq!(v["passed"], true);
        assert_eq!(v["summary"]["lost"], 0);
        assert!(!v["steps"].as_array().unwrap().is_empty());
    }
}

fn faulty_fanout(faults: HeraldFaults) -> fanout::FanoutSummary {
    let addr = spawn_herald(faults);
    let a = fanout_args(&[
        "fanout",
        &format!("ws://{addr}/ws"),
        "-p",
        "1",
        "-n",
        "4",
        "-r",
        "200",
        "--duration",
        "500ms",
        "--drain",
        "300ms",
    ]);
    match fanout::run(&a) {
        Err(BenchError::Verification(_)) => {}
        other => panic!("a faulty server must fail the run, got {other:?}"),
    }
    let (s, record) = fanout::measure(&fanout_args(&[
        "fanout",
        &format!("ws://{}/ws", spawn_herald(faults)),
        "-p",
        "1",
        "-n",
        "4",
        "-r",
        "200",
        "--duration",
        "500ms",
        "--drain",
        "300ms",
        "--allow-loss",
    ]))
    .unwrap();
    assert!(record.passed, "--allow-loss reports without failing");
    s
}

#[test]
fn fanout_counts_a_lost_delivery() {
    let s = faulty_fanout(HeraldFaults {
        drop_delivery: Some(50),
        ..HeraldFaults::default()
    });
    assert_eq!((s.lost, s.duplicated, s.out_of_order), (1, 0, 0), "{s:?}");
}

#[test]
fn fanout_counts_a_duplicate() {
    let s = faulty_fanout(HeraldFaults {
        dup_delivery: Some(50),
        ..HeraldFaults::default()
    });
    assert_eq!((s.lost, s.duplicated, s.out_of_order), (0, 1, 0), "{s:?}");
}

#[test]
fn fanout_counts_reordering() {
    let s = faulty_fanout(HeraldFaults {
        swap_delivery: Some(50),
        ..HeraldFaults::default()
    });
    assert_eq!((s.lost, s.duplicated, s.out_of_order), (0, 0, 1), "{s:?}");
}

/// Churns half of 6 subscribers against a stub whose recovery lies.
fn churn_against(faults: HeraldFaults) -> fanout::FanoutSummary {
    let url = format!("ws://{}/ws", spawn_herald(faults));
    let cmd = |allow: bool| {
        let mut c = vec![
            "fanout",
            &url,
            "-n",
            "6",
            "-C",
            "2",
            "-r",
            "200",
            "--duration",
            "1500ms",
            "--drain",
            "1s",
            "--churn",
            "0.5",
            "--churn-downtime",
            "150ms",
            "--verify",
        ];
        if allow {
            c.push("--allow-loss");
        }
        fanout_args(&c)
    };
    match fanout::run(&cmd(false)) {
        Err(BenchError::Verification(_)) => {}
        other => panic!("a lying recovery must fail the run, got {other:?}"),
    }
    let (s, record) = fanout::measure(&cmd(true)).unwrap();
    assert_eq!(s.reconnects.churned, 3, "{s:?}");
    let subs = record.verification.unwrap()["subscribers"].clone();
    assert_eq!(subs.as_array().unwrap().len(), 6);
    s
}

#[test]
fn churn_recovery_is_clean_on_an_honest_stub() {
    let url = format!("ws://{}/ws", spawn_herald(HeraldFaults::default()));
    let s = fanout::run(&fanout_args(&[
        "fanout",
        &url,
        "-n",
        "6",
        "-C",
        "2",
        "-r",
        "200",
        "--duration",
        "1500ms",
        "--churn",
        "0.5",
        "--churn-downtime",
        "150ms",
    ]))
    .unwrap();
    assert_eq!(
        (s.lost, s.duplicated, s.failed_recoveries),
        (0, 0, 0),
        "{s:?}"
    );
    assert!(s.recovered >= 3, "{s:?}");
}

#[test]
fn churn_counts_a_publication_lost_in_recovery() {
    let s = churn_against(HeraldFaults {
        recover_drop_first: true,
        ..HeraldFaults::default()
    });
    // Each of the 3 recoveries leaves one out.
    assert_eq!((s.lost, s.duplicated), (3, 0), "{s:?}");
}

#[test]
fn churn_counts_a_publication_duplicated_in_recovery() {
    let s = churn_against(HeraldFaults {
        recover_dup_last: true,
        ..HeraldFaults::default()
    });
    assert_eq!((s.lost, s.duplicated), (0, 3), "{s:?}");
}

#[test]
fn bots_runs_in_steps() {
    let addr = spawn_herald(HeraldFaults::default());
    let out = temp_path("bots.json");
    let Scenario::Bots(a) = parse(&[
        "bots",
        &format!("ws://{addr}/ws"),
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
    assert_eq!(steps[1].bots, 20);
    assert_eq!(steps[1].theoretical_eps, 200.0);
    assert!(steps[1].actual_eps > 0.0);
    assert!(steps[1].response.is_some());
    // Tables of 5: each action reaches the 5 bots of its table.
    assert!(steps[1].pushes_per_s > steps[1].actual_eps);
    let v = read_json(&out);
    assert_eq!(v["scenario"], "bots");
    assert_eq!(v["steps"].as_array().unwrap().len(), 2);
    assert!(v["steps"][0]["response"]["p95_ms"].is_number());
}

#[test]
fn stream_sweeps_batch_sizes() {
    let addr = spawn_herald(HeraldFaults::default());
    for transport in ["ws-json", "ws-binary"] {
        let out = temp_path("stream.json");
        let Scenario::Stream(a) = parse(&[
            "stream",
            &format!("ws://{addr}/ws"),
            "--transport",
            transport,
            "-c",
            "2,3",
            "-b",
            "1,20",
            "--interval",
            "10ms",
            "--step-duration",
            "400ms",
            "--drain",
            "100ms",
            "--out",
            out.to_str().unwrap(),
        ]) else {
            panic!("not stream")
        };
        let steps = herald_bench::stream::run(&a).unwrap();
        assert_eq!(steps.len(), 4);
        assert_eq!((steps[3].consumers, steps[3].batch_size), (3, 20));
        assert_eq!(steps[3].target_eps, 6000.0);
        assert!(
            steps.iter().all(|s| s.eps > 0.0 && s.lost_batches == 0),
            "{steps:?}"
        );
        let v = read_json(&out);
        assert_eq!(v["scenario"], "stream");
        assert_eq!(v["passed"], true);
    }
}

#[test]
fn idle_opens_connections() {
    let addr = spawn_herald(HeraldFaults::default());
    let out = temp_path("idle.json");
    let pid = std::process::id().to_string();
    let Scenario::Idle(a) = parse(&[
        "idle",
        &format!("ws://{addr}/ws"),
        "-n",
        "30",
        "--step-size",
        "10",
        "--channels",
        "3",
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
        vec![10, 20, 30]
    );
    assert!(steps[2].rss_kib.is_some());
    let v = read_json(&out);
    assert_eq!(v["scenario"], "idle");
    assert_eq!(v["summary"]["clients"], 30);

    // A non-Herald endpoint: only the WebSocket upgrade.
    let addr = spawn_shootout(Faults::default());
    let Scenario::Idle(a) = parse(&[
        "idle",
        &format!("ws://{addr}/"),
        "-n",
        "5",
        "--settle",
        "10ms",
    ]) else {
        panic!("not idle")
    };
    assert_eq!(herald_bench::idle::run(&a).unwrap()[0].clients, 5);
}

#[test]
fn report_draws_result_files() {
    let addr = spawn_herald(HeraldFaults::default());
    let out = temp_path("fanout-for-report.json");
    let a = fanout_args(&[
        "fanout",
        &format!("ws://{addr}/ws"),
        "-n",
        "2",
        "-r",
        "100",
        "--duration",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    fanout::run(&a).unwrap();
    let html = temp_path("report.html");
    let Scenario::Report(r) = Cli::try_parse_from([
        "bench",
        "report",
        out.to_str().unwrap(),
        "--out",
        html.to_str().unwrap(),
    ])
    .unwrap()
    .scenario
    else {
        panic!("not report")
    };
    herald_bench::report::run(&r).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("Deliveries per second"));
    let _ = std::fs::remove_file(out);
    let _ = std::fs::remove_file(html);
}
