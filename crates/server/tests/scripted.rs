//! Game modules in a real server (docs/games.md): `[[games]]` loaded at
//! start-up, tables of a module played over WebSocket, a failing module
//! closing its own table with `unseat` 100 (counted in `/metrics`) while
//! another table plays on, `POST /api/tables` with a module, and
//! `POST /api/games/{name}/reload` (new tables get the new code, running
//! ones keep theirs; a broken file is refused and the old code serves).
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use game_common::Player;
use herald_server::config::{GameModule, TableConfig};
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const SECRET: &str = "script-secret-script-secret-script!";
const KEY: &str = "script-api-key";

/// `version` is in every message, so a test sees which code a table runs.
fn module(version: u32) -> String {
    format!(
        r#"
export const game = {{
  created(ctx, table) {{ ctx.lobby({{ v: {version} }}); return {{ n: 0 }}; }},
  sat(state, ctx, seat, user) {{ ctx.send(seat, {{ t: "hi", v: {version}, user }}); }},
  left() {{}},
  act(state, ctx, seat, data) {{
    if (data === "boom") throw new Error("boom at " + state.n);
    if (data === "spin") for (;;) {{}}
    if (typeof data !== "number") return ctx.malformed("a number");
    state.n += data;
    ctx.broadcast({{ t: "n", n: state.n, v: {version} }});
  }},
  snapshot(state) {{ return {{ n: state.n, v: {version} }}; }},
}};
"#
    )
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("herald-scripted-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    d
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write module");
}

fn table(game: &str, count: u32) -> TableConfig {
    TableConfig {
        game: game.into(),
        count,
        seats: 2,
        timing: "normal".into(),
        path: None,
        params: Default::default(),
    }
}

fn args(path: &Path) -> ServeArgs {
    ServeArgs {
        token_hmac_secret: Some(SECRET.into()),
        api_key: Some(KEY.into()),
        games: vec![GameModule {
            name: "adder".into(),
            module: path.to_path_buf(),
            cpu_ms: Some(50),
            memory_mb: None,
            max_message: None,
            max_state: None,
            shards: Some(1),
        }],
        tables: vec![table("adder", 2)],
        ..ServeArgs::default()
    }
}

async fn api(srv: &TestServer, method: &str, path: &str, body: &str) -> (u16, Value) {
    let auth = format!("apikey {KEY}");
    let (status, _, text) = http(srv.addr, method, path, &[("authorization", &auth)], body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn sit_at(p: &mut Player, id: u32, table: u64) -> Value {
    send_json(&mut p.ws, json!({"id": id, "sit": {"table": table}})).await;
    p.wait("sit reply", |m| m["id"] == id).await
}

async fn act_at(p: &mut Player, id: u32, table: u64, data: Value) -> Value {
    send_json(
        &mut p.ws,
        json!({"id": id, "act": {"table": table, "data": data}}),
    )
    .await;
    p.wait("act reply", |m| m["id"] == id).await
}

#[tokio::test]
async fn a_module_plays_fails_alone_and_reloads() {
    let path = dir().join("adder.js");
    write(&path, &module(1));
    let srv = start(args(&path)).await;
    let mut ann = Player::connect(srv.addr, &user_token(SECRET, "ann")).await;
    let mut bob = Player::connect(srv.addr, &user_token(SECRET, "bob")).await;

    // Table 1: sit (the snapshot, taken after `sat`, comes with the reply
    // and stands for everything `sat` sent), act, the broadcast.
    let r = sit_at(&mut ann, 1, 1).await;
    assert_eq!(r["sit"]["data"], json!({"n": 0, "v": 1}), "{r}");
    let r = act_at(&mut ann, 2, 1, json!(5)).await;
    assert!(r["act"].is_object(), "{r}");
    let n = ann.wait("n", |m| m["game"]["data"]["t"] == "n").await;
    assert_eq!(n["game"]["data"]["n"], 5);
    // A refusal is 118 with the module's message; the table goes on.
    let r = act_at(&mut ann, 3, 1, json!("x")).await;
    assert_eq!(r["error"]["code"], 118, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("a number"),
        "{r}"
    );
    let r = act_at(&mut ann, 30, 1, json!({"not": "json"})).await;
    assert_eq!(r["error"]["code"], 118, "{r}");

    // Table 2: bob; then table 1's module throws: ann is unseated with 100,
    // bob's table plays on.
    sit_at(&mut bob, 4, 2).await;
    act_at(&mut ann, 5, 1, json!("boom")).await;
    let u = ann.wait("unseat", |m| m["unseat"].is_object()).await;
    assert_eq!(u["unseat"]["code"], 100, "{u}");
    let r = act_at(&mut bob, 6, 2, json!(2)).await;
    assert!(r["act"].is_object(), "{r}");
    // An endless loop is stopped by the CPU budget the same way.
    act_at(&mut bob, 7, 2, json!("spin")).await;
    let u = bob.wait("unseat", |m| m["unseat"].is_object()).await;
    assert_eq!(u["unseat"]["code"], 100, "{u}");
    let (_, _, metrics) = http(srv.addr, "GET", "/metrics", &[], "").await;
    assert!(
        metrics.contains(r#"herald_script_faults_total{game="adder",kind="exception"} 1"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"herald_script_faults_total{game="adder",kind="timeout"} 1"#));
    assert!(metrics.contains("herald_game_tables_failed_total 2"));
    assert_metrics_documented(&metrics, false);

    // Reload: version 2 for new tables; a broken file is refused.
    write(&path, &module(2));
    let (status, body) = api(&srv, "POST", "/api/games/adder/reload", "").await;
    assert_eq!((status, body["version"].clone()), (200, json!(2)), "{body}");
    let (status, body) = api(&srv, "POST", "/api/tables", r#"{"game":"adder","seats":2}"#).await;
    assert_eq!(status, 201, "{body}");
    let id = body["tables"][0].as_u64().expect("id");
    write(&path, "export const game = {\n  created() {\n");
    let (status, body) = api(&srv, "POST", "/api/games/adder/reload", "").await;
    assert_eq!(status, 400, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("SyntaxError") && msg.contains("adder.js"),
        "{msg}"
    );
    let (status, _) = api(&srv, "POST", "/api/games/nope/reload", "").await;
    assert_eq!(status, 404);
    // The new table runs version 2 although the file is broken now.
    let mut cy = Player::connect(srv.addr, &user_token(SECRET, "cy")).await;
    let r = sit_at(&mut cy, 8, id).await;
    assert_eq!(r["sit"]["data"], json!({"n": 0, "v": 2}), "{r}");
    let (_, games) = api(&srv, "GET", "/api/games", "").await;
    let adder = games["games"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "adder").cloned())
        .expect("adder listed");
    assert_eq!(
        (adder["version"].clone(), adder["faults"]["timeout"].clone()),
        (json!(2), json!(1)),
        "{games}"
    );
    srv.shutdown.cancel();
    let _ = std::fs::remove_dir_all(dir());
}

#[test]
fn a_module_that_does_not_load_stops_the_start() {
    let path = dir().join("missing-exports.js");
    write(&path, "export const game = { created() {} };");
    let config = herald_server::config::ServerConfig::resolve(args(&path)).expect("config");
    let rt = tokio::runtime::Runtime::new().expect("rt");
    let e = rt
        .block_on(async {
            herald_server::server::build(config, herald_server::testing::games()).err()
        })
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("[[games]]") && e.contains("missing-exports.js") && e.contains("game.sat"),
        "{e}"
    );
}

/// A module that shows its table's parameters and refuses `mode: "bad"`.
const MODES: &str = r#"
export const game = {
  created(ctx, table) {
    if (table.params.mode === "bad") throw new Error("no bad mode");
    return { mode: table.params.mode ?? null, keys: Object.keys(table.params).sort() };
  },
  sat() {},
  left() {},
  act() {},
  snapshot(state) { return state; },
};
"#;

/// `play` for a 2-seat table of the module with attribute `mode`.
async fn play(p: &mut Player, id: u32, mode: &str) -> Value {
    let cmd = json!({"game": "adder", "seats": 2, "attrs": {"mode": mode}});
    send_json(&mut p.ws, json!({"id": id, "play": cmd})).await;
    p.wait("play", |m| m["id"] == id).await
}

#[tokio::test]
async fn play_makes_tables_of_a_module_from_its_attributes() {
    let path = dir().join("modes.js");
    write(&path, MODES);
    let srv = start(ServeArgs {
        tables: Vec::new(),
        ..args(&path)
    })
    .await;
    let mut ann = Player::connect(srv.addr, &user_token(SECRET, "ann")).await;
    let mut bob = Player::connect(srv.addr, &user_token(SECRET, "bob")).await;
    let mut cy = Player::connect(srv.addr, &user_token(SECRET, "cy")).await;
    let a = play(&mut ann, 1, "x").await;
    // The module saw its attributes as parameters, and nothing of the
    // engine's own.
    assert_eq!(a["play"]["created"], true, "{a}");
    assert_eq!(
        a["play"]["data"],
        json!({"mode": "x", "keys": ["mode"]}),
        "{a}"
    );
    let b = play(&mut bob, 1, "x").await;
    assert_eq!(b["play"]["table"], a["play"]["table"], "{b}");
    // Full: the third player gets a new table.
    let c = play(&mut cy, 1, "x").await;
    assert_eq!(c["play"]["created"], true, "{c}");
    assert_ne!(c["play"]["table"], a["play"]["table"], "{c}");
    // Parameters the module refuses: 103 with its message, no table.
    let r = play(&mut cy, 2, "bad").await;
    assert_eq!(r["error"]["code"], 103, "{r}");
    let message = r["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("no bad mode"), "{r}");
    let (_, tables) = api(&srv, "GET", "/api/tables", "").await;
    assert_eq!(
        tables["tables"].as_array().map(Vec::len),
        Some(2),
        "{tables}"
    );
}
