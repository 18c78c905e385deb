//! `/api/tables` in a cluster (decision 0009, "Which tables exist"): tables
//! created over HTTP on any node go into Redis's registry, get an owner
//! among the game nodes, enter every node's lobby, are playable from any
//! edge and are taken over from the registry when their owner dies;
//! `DELETE` on any node (an edge, or the owner itself) closes a table
//! everywhere (its players told as on a single node, subscribers' lobbies
//! updated) and no node ever claims it again, configured tables included,
//! nor a node started later; with its owner dead it answers 202. Real nodes, real `redis-server`, 500 ms leases.
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use game_common::{cluster_args, get, Player};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-http-secret-cluster-http-secret";

/// A node in `role` with one configured table (id 1).
fn node(redis: &RedisServer, role: &str) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        game_grace: Some(30),
        ..cluster_args(&redis.url(), role, SECRET, 1, serde_json::Map::new())
    })
}

/// The `POST` body of a created table: three seats, slow turns.
fn spec() -> String {
    json!({"game": "holdem", "seats": 3, "timing": "super-express", "path": "created/3",
           "seed": 5, "action_ms": 8000, "hand_ms": 1000})
    .to_string()
}

/// The table ids in `n`'s lobby, and those `n` owns.
async fn tables(n: &NodeHandle) -> (Vec<u64>, Vec<u64>) {
    let v = get(n, "/api/tables").await;
    let all: Vec<&Value> = v["tables"].as_array().into_iter().flatten().collect();
    let ids = all.iter().filter_map(|t| t["table"].as_u64()).collect();
    let owned = all
        .iter()
        .filter(|t| t["owner"].is_object())
        .filter_map(|t| t["table"].as_u64())
        .collect();
    (ids, owned)
}

async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Which of `games` owns `table`, waiting until one does.
async fn owner_of(games: &[&NodeHandle], table: u64) -> usize {
    let mut found = None;
    until("an owner", async || {
        for (i, g) in games.iter().enumerate() {
            if tables(g).await.1.contains(&table) {
                found = Some(i);
                return true;
            }
        }
        false
    })
    .await;
    found.expect("owner")
}

async fn sit(p: &mut Player, id: u32, table: u64) -> Value {
    send_json(&mut p.ws, json!({"id": id, "sit": {"table": table}})).await;
    p.wait("sit reply", |m| m["id"] == id).await
}

async fn post(n: &NodeHandle, body: &str) -> (u16, Value) {
    let (status, _, reply) = http(n.addr, "POST", "/api/tables", &[], body).await;
    (status, serde_json::from_str(&reply).expect("JSON"))
}

async fn delete(n: &NodeHandle, table: u64) -> (u16, Value) {
    let path = format!("/api/tables/{table}");
    let (status, _, reply) = http(n.addr, "DELETE", &path, &[], "").await;
    (status, serde_json::from_str(&reply).expect("JSON"))
}

/// No node owns `table` for a while (several leases and keeper scans), and
/// no lobby lists it.
async fn never_claimed(nodes: &[&NodeHandle], table: u64) {
    let end = Instant::now() + Duration::from_millis(2_500);
    while Instant::now() < end {
        for n in nodes {
            let (ids, _) = tables(n).await;
            assert!(!ids.contains(&table), "table {table} is back: {ids:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A player told its table was closed, as on a single node.
async fn told_closed(p: &mut Player, table: u64) {
    let m = p.wait("unseat", |m| m["unseat"].is_object()).await;
    assert_eq!(m["unseat"]["table"], table, "{m}");
    assert_eq!(m["unseat"]["code"], 115, "{m}");
    assert_eq!(m["unseat"]["reason"], "the table was closed", "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_created_on_an_edge_is_played_anywhere_and_survives_its_owner() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let edges = [node(&redis, "edge"), node(&redis, "edge")];
    let mut games = [node(&redis, "game"), node(&redis, "game")];
    let (status, v) = post(&edges[0], &spec()).await;
    assert_eq!(status, 201, "{v}");
    // Above the configured table 1.
    assert_eq!(v, json!({"tables": [2]}));
    let first = owner_of(&[&games[0], &games[1]], 2).await;
    // In every node's lobby.
    for n in edges.iter().chain(games.iter()) {
        until("table 2 in the lobby", async || {
            tables(n).await.0.contains(&2)
        })
        .await;
    }
    let entry = get(&edges[1], "/api/tables").await;
    assert!(
        entry["tables"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["table"] == 2 && t["path"] == "created/3" && t["seats"] == 3),
        "{entry}"
    );
    // Played from the other edge.
    let mut players = Vec::new();
    for (seat, u) in ["ann", "bob"].iter().enumerate() {
        let mut p = Player::connect(edges[1].addr, &user_token(SECRET, u)).await;
        let r = sit(&mut p, 5, 2).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        players.push(p);
    }
    for p in &mut players {
        p.game_event("cards").await;
    }
    // The owner dies: the other game node takes the table over.
    games[first].kill();
    let other = 1 - first;
    until("take-over", async || {
        tables(&games[other]).await.1.contains(&2)
    })
    .await;
    let m = players[0].wait("moved", |m| m["unseat"].is_object()).await;
    assert_eq!(m["unseat"]["table"], 2, "{m}");
    let r = sit(&mut players[0], 6, 2).await;
    assert_eq!(r["sit"]["seat"], 0, "{r}");
    // Deleted on its owner itself: closed there, its players told.
    let (status, v) = delete(&games[other], 2).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["seats"][0]["user"], "ann", "{v}");
    told_closed(&mut players[0], 2).await;
    never_claimed(&[&edges[0], &edges[1], &games[other]], 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_on_an_edge_closes_a_created_table_everywhere_for_good() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let edge = node(&redis, "edge");
    let game = node(&redis, "game");
    let (status, v) = post(&game, &spec()).await;
    assert_eq!(status, 201, "{v}");
    let id = v["tables"][0].as_u64().expect("id");
    owner_of(&[&game], id).await;
    until("in the edge's lobby", async || {
        tables(&edge).await.0.contains(&id)
    })
    .await;
    // One player through the edge, one on the owner itself.
    let mut far = Player::connect(edge.addr, &user_token(SECRET, "ann")).await;
    assert_eq!(sit(&mut far, 5, id).await["sit"]["seat"], 0);
    let mut near = Player::connect(game.addr, &user_token(SECRET, "bob")).await;
    assert_eq!(sit(&mut near, 5, id).await["sit"]["seat"], 1);
    // A lobby subscriber on each node.
    let mut lobbies = Vec::new();
    for n in [&edge, &game] {
        let mut w = Player::connect(n.addr, &user_token(SECRET, "lobby")).await;
        send_json(&mut w.ws, json!({"id": 1, "lobby": {"path": ""}})).await;
        let r = w.wait("lobby snapshot", |m| m["id"] == 1).await;
        assert!(r["lobby"]["tables"].is_array(), "{r}");
        lobbies.push(w);
    }

    let (status, v) = delete(&edge, id).await;
    // The owner's last state, as a single node answers.
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["table"]["table"], id, "{v}");
    let users: Vec<&str> = v["seats"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["user"].as_str())
        .collect();
    assert_eq!(users, ["ann", "bob"], "{v}");
    assert!(v["state"]["seats"].is_array(), "{v}");
    told_closed(&mut far, id).await;
    told_closed(&mut near, id).await;
    for w in &mut lobbies {
        let removed = |m: &Value| {
            m["lobby_update"]["removed"]
                .as_array()
                .is_some_and(|r| r.contains(&json!(id)))
        };
        w.wait("lobby removal", removed).await;
    }
    for n in [&edge, &game] {
        until("lobby removal", async || !tables(n).await.0.contains(&id)).await;
    }
    never_claimed(&[&edge, &game], id).await;
    // A node started afterwards does not claim it either.
    let late = node(&redis, "game");
    never_claimed(&[&edge, &game, &late], id).await;
    let (status, v) = delete(&edge, id).await;
    assert_eq!(status, 404, "{v}");
    assert_eq!(v["error"]["code"], 115, "{v}");
    let r = sit(&mut far, 7, id).await;
    assert_eq!(r["error"]["code"], 115, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_of_a_configured_table_and_of_one_whose_owner_died() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let edge = node(&redis, "edge");
    let mut game = node(&redis, "game");
    owner_of(&[&game], 1).await;
    let mut p = Player::connect(edge.addr, &user_token(SECRET, "ann")).await;
    assert_eq!(sit(&mut p, 5, 1).await["sit"]["seat"], 0);
    let (status, v) = delete(&edge, 1).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["seats"][0]["user"], "ann", "{v}");
    told_closed(&mut p, 1).await;
    until("lobby removal", async || {
        !tables(&edge).await.0.contains(&1)
    })
    .await;
    never_claimed(&[&edge, &game], 1).await;

    // A created table whose owner is dead: deleted all the same (202), and
    // a game node started later never claims it.
    let (status, v) = post(&edge, &spec()).await;
    assert_eq!(status, 201, "{v}");
    let id = v["tables"][0].as_u64().expect("id");
    owner_of(&[&game], id).await;
    let addr = game.addr;
    game.kill();
    // Dead once its listener is gone (the kill stops its runtime).
    until("the game node dead", async || {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    let (status, v) = delete(&edge, id).await;
    assert_eq!(status, 202, "{v}");
    assert_eq!(v["deleted"], true, "{v}");
    assert_eq!(v["closed"], false, "{v}");
    let late = node(&redis, "game");
    // The configured table 1 stays deleted too, across restarts.
    never_claimed(&[&edge, &late], id).await;
    never_claimed(&[&late], 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_and_redis_down_in_a_cluster() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let edge = node(&redis, "edge");
    // The single node's 400s.
    for body in [
        json!({"game": "holdem", "seats": 0}).to_string(),
        json!({"game": "chess", "seats": 2}).to_string(),
        json!({"game": "holdem", "seats": 3, "count": 0}).to_string(),
        json!({"game": "holdem", "seats": 3, "path": ""}).to_string(),
        "{".to_string(),
    ] {
        let (status, _, reply) = http(edge.addr, "POST", "/api/tables", &[], &body).await;
        assert_eq!(status, 400, "{body}: {reply}");
        let v: Value = serde_json::from_str(&reply).expect("JSON");
        assert_eq!(v["error"]["code"], 103, "{v}");
    }
    for id in [2, 99, 0] {
        let (status, v) = delete(&edge, id).await;
        assert_eq!(status, 404, "{v}");
        assert_eq!(v["error"]["code"], 115, "{v}");
    }
    // No game node: the table is created and waits for an owner; its
    // commands get 114 as a configured table nobody runs.
    let (status, v) = post(&edge, &spec()).await;
    assert_eq!(status, 201, "{v}");
    let mut p = Player::connect(edge.addr, &user_token(SECRET, "ann")).await;
    let r = sit(&mut p, 5, 2).await;
    assert_eq!(r["error"]["code"], 114, "{r}");
    let r = sit(&mut p, 6, 77).await;
    assert_eq!(r["error"]["code"], 115, "{r}");

    redis.kill();
    let (status, v) = post(&edge, &spec()).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], 114, "{v}");
    let (status, v) = delete(&edge, 2).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["error"]["code"], 114, "{v}");
}
