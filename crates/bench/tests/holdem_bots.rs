//! `bots --game holdem` against the real server (started in-process on
//! port 0) with Texas Hold'em tables: on WebSocket JSON, WebSocket binary
//! and raw TCP the bots get seated, hands are played, the lobby is counted,
//! and nothing unexpected happens; with no table to sit at, the bots wait
//! without errors.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{parse, read_json, spawn_herald, temp_path, HeraldFaults};
use herald_bench::Scenario;
use herald_server::config::TableConfig;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;

/// A server with `count` 6-seat super-express Hold'em tables, its delays
/// cut so that a 2-second step sees several hands.
fn poker_server(count: u32) -> NodeHandle {
    let mut params = serde_json::Map::new();
    params.insert("action_ms".into(), 1000.into());
    params.insert("hand_ms".into(), 100.into());
    params.insert("street_ms".into(), 50.into());
    let tables = if count == 0 {
        Vec::new()
    } else {
        vec![TableConfig {
            game: "holdem".into(),
            count,
            seats: 6,
            timing: "super-express".into(),
            path: None,
            params,
        }]
    };
    NodeHandle::start(ServeArgs {
        workers: Some(2),
        allow_anonymous: Some(true),
        lobby_interval: Some(50),
        tables,
        ..ServeArgs::default()
    })
}

fn bots(
    url: &str,
    transport: &str,
    out: &std::path::Path,
) -> Vec<herald_bench::holdem::HoldemStep> {
    let Scenario::Bots(a) = parse(&[
        "bots",
        url,
        "--game",
        "holdem",
        "--transport",
        transport,
        "-n",
        "12",
        "--step-size",
        "6",
        "--step-duration",
        "2s",
        "--think",
        "50ms",
        // Every turn answered: a turn left to the 1 s timer could take a
        // whole hand out of a 2 s window (hands/min is asserted per step).
        "--timeout-share",
        "0",
        "--chat-rate",
        "60",
        "--out",
        out.to_str().unwrap(),
    ]) else {
        panic!("not bots")
    };
    herald_bench::holdem::run(&a).unwrap()
}

#[test]
fn holdem_bots_play_on_every_transport() {
    for transport in ["ws-json", "ws-binary", "tcp"] {
        // A server each: seats of bots gone stay taken for the grace period.
        let server = poker_server(4);
        let url = match transport {
            "tcp" => format!("tcp://{}", server.tcp_addr),
            _ => server.ws_url(),
        };
        let out = temp_path("holdem.json");
        let steps = bots(&url, transport, &out);
        assert_eq!(steps.len(), 2, "{transport}");
        for (s, players) in steps.iter().zip([6, 12]) {
            // The bots fill whole tables: 6, then 12 seated, at one then
            // two tables.
            assert_eq!(s.players, players, "{transport}: {s:?}");
            assert!(s.hands_per_min > 0.0, "{transport}: {s:?}");
            assert!(s.game_events_per_s > 0.0, "{transport}: {s:?}");
            assert!(s.response.is_some(), "{transport}: {s:?}");
            assert_eq!(s.errors, 0, "{transport}: {s:?}");
            assert!(s.chat_received_per_s > 0.0, "{transport}: {s:?}");
            assert!(s.bandwidth_out_bps > s.lobby_bps, "{transport}: {s:?}");
        }
        assert_eq!(steps[1].tables_in_play, 2, "{transport}");
        // Seating brings the lobby: snapshots to the new bots, deltas as
        // tables fill (reported apart from the steady window).
        for s in &steps {
            assert!(s.seating_lobby_bytes > 0, "{transport}: {s:?}");
            assert!(
                s.seating_bytes_out >= s.seating_lobby_bytes,
                "{transport}: {s:?}"
            );
        }
        let v = read_json(&out);
        assert_eq!(v["scenario"], "bots-holdem");
        assert_eq!(v["passed"], true);
        assert_eq!(v["params"]["transport"], transport);
        assert_eq!(v["summary"]["errors"], 0);
        assert!(v["steps"][1]["response"]["p99_ms"].is_number());
        assert!(v["steps"][1]["lobby_share_pct"].is_number());
    }
}

/// Against the stub's stand-in game: every bot sits, answers its turns
/// (timed from `act` to its `action` event), hands are counted once per
/// table and hand, and game data that is not JSON is counted as an error
/// without failing the run.
#[test]
fn holdem_bots_play_the_stub_game_and_count_bad_data() {
    let addr = spawn_herald(HeraldFaults {
        bad_game_data: true,
        ..HeraldFaults::default()
    });
    for transport in ["ws-json", "ws-binary"] {
        let Scenario::Bots(a) = parse(&[
            "bots",
            &format!("ws://{addr}/ws"),
            "--game",
            "holdem",
            "--transport",
            transport,
            "-n",
            "4",
            "--step-size",
            "4",
            "--step-duration",
            "1s",
            "--think",
            "20ms",
            "--timeout-share",
            "0",
        ]) else {
            panic!("not bots")
        };
        let steps = herald_bench::holdem::run(&a).unwrap();
        let s = &steps[0];
        assert_eq!(s.players, 4, "{transport}: {s:?}");
        assert!(s.actions_per_s > 20.0, "{transport}: {s:?}");
        let r = s.response.as_ref().unwrap();
        assert!(r.count > 20 && r.p99_ms < 500.0, "{transport}: {s:?}");
        // Each bot's private game numbers its hands alike: each number is
        // counted once, not once per bot.
        let hands = s.hands_per_min * (s.ended_s - s.started_s) / 60.0;
        assert!(hands >= 1.0, "{transport}: {s:?}");
        assert!(hands < r.count as f64 / 3.0 / 2.0, "{transport}: {s:?}");
        assert!(s.game_events_per_s > s.actions_per_s, "{transport}: {s:?}");
        // One undecodable push per hand per bot: counted, not fatal.
        assert!(s.errors >= 4, "{transport}: {s:?}");
        assert_eq!((s.refused, s.timeouts), (0, 0), "{transport}: {s:?}");
        assert!(
            s.lobby_bps == 0.0,
            "snapshots come before the window: {s:?}"
        );
    }
}

#[test]
fn holdem_bots_wait_when_no_table_is_free() {
    let server = poker_server(0);
    let out = temp_path("holdem-empty.json");
    let steps = bots(&server.ws_url(), "ws-json", &out);
    assert_eq!(steps.len(), 2);
    for s in &steps {
        assert_eq!((s.players, s.hands_per_min, s.errors), (0, 0.0, 0), "{s:?}");
    }
    let v = read_json(&out);
    assert_eq!(v["scenario"], "bots-holdem");
    assert_eq!(v["summary"]["tables_seen"], 0);
}

#[test]
fn holdem_bots_refuse_transports_that_cannot_play() {
    for transport in ["sse", "poll"] {
        let Scenario::Bots(a) = parse(&[
            "bots",
            "http://127.0.0.1:9/",
            "--game",
            "holdem",
            "--transport",
            transport,
        ]) else {
            panic!("not bots")
        };
        assert!(matches!(
            herald_bench::holdem::run(&a),
            Err(herald_bench::BenchError::Args(_))
        ));
    }
    let Scenario::Bots(a) = parse(&[
        "bots",
        "ws://127.0.0.1:9/ws",
        "--game",
        "holdem",
        "--timeout-share",
        "2",
    ]) else {
        panic!("not bots")
    };
    assert!(matches!(
        herald_bench::holdem::run(&a),
        Err(herald_bench::BenchError::Args(_))
    ));
    // The publish mode's entry point does not run the poker bots.
    assert!(herald_bench::bots::run(&a).is_err());
}
