//! `bots --game NAME --module FILE` against the real server (in-process,
//! 127.0.0.1, port 0) running a small scripted turn game from `[[games]]`:
//! over WebSocket JSON and raw TCP the module's bots get seated at every
//! table, act on their turns (answered, timed), have their out-of-turn
//! actions refused with 118 without failing the run, and nothing
//! unexpected happens; the arguments that cannot work are refused clearly.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{parse, read_json, temp_path};
use herald_bench::bots::BotGame;
use herald_bench::{BenchError, Scenario};
use herald_server::config::{GameModule, TableConfig};
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;

/// Two players take turns adding 1 to 3 to a total; at 10 a hand ends.
/// A turn not played in 2 s passes. The bot plays its turns and, every
/// seventh message, acts out of turn (refused: 118).
const COUNT: &str = r#"
function toAct(state) {
  return state.seated.length < 2 ? null : state.seated[state.turn % state.seated.length];
}
function next(state, ctx) {
  ctx.broadcast({ t: "turn", seat: toAct(state), total: state.total });
  ctx.setTimer("turn", 2000);
}
export const game = {
  created(ctx, table) { return { seated: [], turn: 0, total: 0 }; },
  sat(state, ctx, seat) {
    state.seated.push(seat);
    if (state.seated.length >= 2) next(state, ctx);
  },
  left(state, ctx, seat) {
    state.seated = state.seated.filter((s) => s !== seat);
    if (state.seated.length < 2) ctx.cancelTimer("turn");
  },
  act(state, ctx, seat, data) {
    if (seat !== toAct(state)) return ctx.outOfTurn("not your turn");
    if (data === null || !(data.n >= 1 && data.n <= 3)) return ctx.malformed("send {n: 1..3}");
    state.total += data.n;
    if (state.total >= 10) { state.total = 0; ctx.handEnded(); }
    state.turn += 1;
    next(state, ctx);
  },
  timer(state, ctx, key) { state.turn += 1; next(state, ctx); },
  snapshot(state, seat) { return { total: state.total, to_act: toAct(state), you: seat }; },
};
export const bot = {
  init(seat) { return { seat, seen: 0 }; },
  on(m, kind, msg) {
    m.seen += 1;
    const mine = kind === "snapshot" ? msg.to_act === m.seat : msg.t === "turn" && msg.seat === m.seat;
    if (mine) return { n: 1 + (msg.total % 3) };
    if (m.seen % 7 === 0) return { n: 1 };
  },
};
"#;

fn module(text: &str) -> std::path::PathBuf {
    let path = temp_path("count.js");
    std::fs::write(&path, text).unwrap();
    path
}

/// A server with four 2-seat tables of the game `count`.
fn server(path: &std::path::Path) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        workers: Some(2),
        allow_anonymous: Some(true),
        lobby_interval: Some(50),
        games: vec![GameModule {
            name: "count".into(),
            module: path.to_path_buf(),
            cpu_ms: None,
            memory_mb: None,
            max_message: None,
            max_state: None,
            shards: Some(1),
        }],
        tables: vec![TableConfig {
            game: "count".into(),
            count: 4,
            seats: 2,
            timing: "normal".into(),
            path: None,
            params: Default::default(),
        }],
        ..ServeArgs::default()
    })
}

fn bots_args(cmd: &[&str]) -> herald_bench::bots::BotsArgs {
    let Scenario::Bots(a) = parse(cmd) else {
        panic!("not bots")
    };
    a
}

#[test]
fn a_scripted_game_is_played_by_its_module_bots() {
    let path = module(COUNT);
    for transport in ["ws-json", "tcp"] {
        // A server each: seats of bots gone stay taken for the grace period.
        let server = server(&path);
        let url = match transport {
            "tcp" => format!("tcp://{}", server.tcp_addr),
            _ => server.ws_url(),
        };
        let out = temp_path("scripted.json");
        let a = bots_args(&[
            "bots",
            &url,
            "--game",
            "count",
            "--module",
            path.to_str().unwrap(),
            "--transport",
            transport,
            "-n",
            "8",
            "--step-size",
            "8",
            "--step-duration",
            "2s",
            "--think",
            "10ms",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(a.game, BotGame::Script("count".into()));
        let steps = herald_bench::scripted::run(&a).unwrap();
        assert_eq!(steps.len(), 1, "{transport}");
        let s = &steps[0];
        assert_eq!(s.bots, 8, "{transport}: {s:?}");
        assert_eq!((s.players, s.tables_seated), (8, 4), "{transport}: {s:?}");
        assert_eq!(s.tables_playing, 4, "{transport}: {s:?}");
        let r = s.response.as_ref().unwrap();
        assert!(r.count >= 20, "{transport}: {s:?}");
        assert!(s.actions_per_s >= 10.0, "{transport}: {s:?}");
        assert!(s.game_events_per_s > s.actions_per_s, "{transport}: {s:?}");
        // Out-of-turn actions are refused, counted and not fatal; nothing
        // else goes wrong.
        assert!(s.refused > 0, "{transport}: {s:?}");
        assert_eq!(
            s.act_errors.keys().copied().collect::<Vec<_>>(),
            vec![118],
            "{transport}: {s:?}"
        );
        assert_eq!((s.errors, s.bot_faults), (0, 0), "{transport}: {s:?}");
        assert!(s.unseats.is_empty(), "{transport}: {s:?}");
        match transport {
            // Hands from the server's /metrics, over its HTTP port.
            "ws-json" => assert!(s.hands_per_min.unwrap() > 0.0, "{s:?}"),
            _ => assert_eq!(s.hands_per_min, None, "{s:?}"),
        }
        let v = read_json(&out);
        assert_eq!(v["scenario"], "bots-script");
        assert_eq!(v["passed"], true);
        assert_eq!(v["params"]["game"], "count");
        assert_eq!(v["params"]["lobby"], "count");
        assert_eq!(v["summary"]["errors"], 0);
        assert_eq!(v["summary"]["tables_seen"], 4);
        assert!(v["steps"][0]["response"]["p99_ms"].is_number());
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn scripted_bots_refuse_what_cannot_work() {
    let args = |extra: &[&str]| {
        let mut cmd = vec!["bots", "ws://127.0.0.1:9/ws"];
        cmd.extend_from_slice(extra);
        bots_args(&cmd)
    };
    let is_args =
        |r: Result<Vec<herald_bench::scripted::ScriptStep>, BenchError>, says: &str| match r {
            Err(BenchError::Args(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{other:?}"),
        };
    // A scripted game needs its module.
    is_args(
        herald_bench::scripted::run(&args(&["--game", "count"])),
        "--module",
    );
    // A module without a `bot` export cannot play.
    let path = module("export const game = { created() { return {}; }, sat() {}, left() {}, act() {}, snapshot() { return {}; } };");
    let p = path.to_str().unwrap();
    is_args(
        herald_bench::scripted::run(&args(&["--game", "count", "--module", p])),
        "bot",
    );
    let _ = std::fs::remove_file(&path);
    // --module goes with scripted games only.
    let a = args(&["--game", "holdem", "--module", "x.js"]);
    assert!(matches!(
        herald_bench::holdem::run(&a),
        Err(BenchError::Args(m)) if m.contains("--module")
    ));
    // Game names are lobby path segments.
    let mut argv = vec!["bench", "bots", "ws://127.0.0.1:9/ws", "--game", "a/b"];
    argv.push("--quiet");
    assert!(<common::Cli as clap::Parser>::try_parse_from(argv).is_err());
    assert_eq!(args(&[]).game, BotGame::Publish);
    assert_eq!(args(&["--game", "holdem"]).game, BotGame::Holdem);
}
