//! A scripted table fails over like Hold'em (decision 0009, docs/games.md):
//! two real nodes on a real `redis-server`, a game module with hidden
//! information, random draws and a turn timer; the owner is killed
//! mid-game and the survivor restores the table from its last save: the
//! players find the same seats, the same secrets, the same state and the
//! same pending turn, and the game goes on.
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use game_common::{owner, Player};
use herald_redis::testing::RedisServer;
use herald_server::config::{GameModule, TableConfig};
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

const SECRET: &str = "scripted-cluster-secret-scripted!!";

/// Each seat draws a secret (sent to it alone); players add to a total in
/// turn; each act draws a random number into a public log; a 30 s turn
/// timer stays pending across the take-over.
const MODULE: &str = r#"
export const game = {
  created(ctx) { return { total: 0, turn: 0, secrets: {}, log: [], seated: [] }; },
  sat(state, ctx, seat) {
    state.secrets[seat] = ctx.randomInt(1000000);
    state.seated.push(seat);
    ctx.send(seat, { t: "secret", secret: state.secrets[seat] });
    if (state.seated.length === 2) ctx.setTimer("turn", 30000);
  },
  left(state, ctx, seat) {},
  act(state, ctx, seat, data) {
    if (data === "boom") throw new Error("boom");
    if (seat !== state.turn) return ctx.outOfTurn("seat " + state.turn + " plays");
    state.total += data;
    state.log.push(ctx.randomInt(1000));
    state.turn = 1 - state.turn;
    ctx.broadcast({ t: "total", total: state.total, seat });
    ctx.setTimer("turn", 30000);
  },
  timer(state, ctx) { state.turn = 1 - state.turn; },
  snapshot(state, seat) {
    const pub = { total: state.total, turn: state.turn, log: state.log };
    return seat === null ? pub : { ...pub, secret: state.secrets[seat] };
  },
};
"#;

fn module_path() -> PathBuf {
    let d = std::env::temp_dir().join(format!("herald-scripted-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    let p = d.join("secrets.js");
    std::fs::write(&p, MODULE).expect("write");
    p
}

fn node(redis: &RedisServer, module: &std::path::Path) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        role: Some("all".into()),
        token_hmac_secret: Some(SECRET.into()),
        table_lease: Some(500),
        games: vec![GameModule {
            name: "secrets".into(),
            module: module.to_path_buf(),
            cpu_ms: None,
            memory_mb: None,
            max_message: None,
            max_state: None,
            shards: None,
        }],
        tables: vec![TableConfig {
            game: "secrets".into(),
            count: 1,
            seats: 2,
            timing: "normal".into(),
            path: None,
            params: Default::default(),
        }],
        ..ServeArgs::default()
    })
}

async fn state(n: &NodeHandle) -> Value {
    let (status, _, body) = http(n.addr, "GET", "/api/tables/1", &[], "").await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str::<Value>(&body).expect("JSON")["state"].clone()
}

async fn act(p: &mut Player, id: u32, n: u64) -> Value {
    send_json(&mut p.ws, json!({"id": id, "act": {"table": 1, "data": n}})).await;
    p.wait("act reply", |m| m["id"] == id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_table_fails_over_mid_game_with_its_state() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let path = module_path();
    let mut nodes = [node(&redis, &path), node(&redis, &path)];
    let first = owner(&[&nodes[0], &nodes[1]]).await;
    let other = 1 - first;

    let users = ["ann", "bob"];
    let mut players = Vec::new();
    let mut secrets = Vec::new();
    for u in users {
        let mut p = Player::connect(nodes[first].addr, &user_token(SECRET, u)).await;
        let r = p.sit(1).await;
        assert!(r["sit"].is_object(), "{r}");
        secrets.push(r["sit"]["data"]["secret"].clone());
        players.push(p);
    }
    assert!(secrets.iter().all(Value::is_u64), "{secrets:?}");
    for (i, n) in [3u64, 4, 5].iter().enumerate() {
        let r = act(&mut players[i % 2], 10 + i as u32, *n).await;
        assert!(r["act"].is_object(), "{r}");
    }
    let before = state(&nodes[first]).await;
    assert_eq!(
        (before["total"].clone(), before["turn"].clone()),
        (json!(12), json!(1)),
        "{before}"
    );

    nodes[first].kill();
    drop(players);
    let taken = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, _, _) = http(nodes[other].addr, "GET", "/api/tables/1", &[], "").await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "no take-over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("scripted table taken over after {:?}", taken.elapsed());
    assert_eq!(state(&nodes[other]).await, before, "the same public state");

    // Back on the survivor: same seats, same secrets; the game goes on from
    // the same turn, drawing on.
    let mut players = Vec::new();
    for (seat, u) in users.iter().enumerate() {
        let mut p = Player::connect(nodes[other].addr, &user_token(SECRET, u)).await;
        let r = p.sit(20).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        assert_eq!(r["sit"]["data"]["secret"], secrets[seat], "{u}'s secret");
        players.push(p);
    }
    let r = act(&mut players[0], 30, 1).await;
    assert_eq!(r["error"]["code"], 118, "still seat 1's turn: {r}");
    let r = act(&mut players[1], 31, 1).await;
    assert!(r["act"].is_object(), "{r}");
    let after = state(&nodes[other]).await;
    assert_eq!(after["total"], 13, "{after}");
    assert_eq!(after["log"].as_array().map(Vec::len), Some(4), "{after}");
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}

/// A table whose module fails is closed for the whole cluster: no other
/// node restores it from its last save when its lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_scripted_table_is_not_taken_over() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let path = module_path();
    let nodes = [node(&redis, &path), node(&redis, &path)];
    let first = owner(&[&nodes[0], &nodes[1]]).await;
    let mut p = Player::connect(nodes[first].addr, &user_token(SECRET, "ann")).await;
    let r = p.sit(1).await;
    assert!(r["sit"].is_object(), "{r}");
    send_json(
        &mut p.ws,
        json!({"id": 2, "act": {"table": 1, "data": "boom"}}),
    )
    .await;
    let u = p.wait("unseat", |m| m["unseat"].is_object()).await;
    assert_eq!(u["unseat"]["code"], 100, "{u}");
    // Four leases later, no node runs it, and the lobby has forgotten it.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    for n in &nodes {
        let (status, _, body) = http(n.addr, "GET", "/api/tables/1", &[], "").await;
        assert_eq!(status, 404, "{body}");
        let (_, _, list) = http(n.addr, "GET", "/api/tables", &[], "").await;
        let v: Value = serde_json::from_str(&list).expect("JSON");
        assert_eq!(v["tables"].as_array().map(Vec::len), Some(0), "{v}");
    }
    let _ = std::fs::remove_dir_all(path.parent().expect("dir"));
}
