//! One lobby across the cluster (decision 0009, issue 17), with real nodes
//! and a real `redis-server`: an edge node that runs no table and the game
//! nodes that run them show the same lobby, snapshot and updates, built
//! from what the owners publish; a take-over keeps the table in every
//! lobby and the subscribers' updates go on.
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use game_common::cluster_args;
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-lobby-secret-cluster-lobby!";

fn token(user: &str) -> String {
    user_token(SECRET, user)
}

fn node(redis: &RedisServer, role: &str) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        lobby_interval: Some(20),
        ..cluster_args(&redis.url(), role, SECRET, 2, serde_json::Map::new())
    })
}

/// A lobby subscriber: the map of entries it keeps as protocol.md says.
struct Watcher {
    ws: Ws,
    seq: u64,
    map: BTreeMap<u64, Value>,
    /// Each table's `players` values in the order updates brought them
    /// (repeats left out).
    history: BTreeMap<u64, Vec<u64>>,
}

impl Watcher {
    async fn start(n: &NodeHandle, user: &str) -> Watcher {
        let (mut ws, r) = connect_with_token(n.addr, Some(&token(user))).await;
        assert!(r["connect"].is_object(), "{r}");
        send_json(&mut ws, json!({"id": 1, "lobby": {"path": ""}})).await;
        let r = recv_json(&mut ws).await;
        let seq = r["lobby"]["seq"].as_u64().expect("seq");
        let mut w = Watcher {
            ws,
            seq,
            map: BTreeMap::new(),
            history: BTreeMap::new(),
        };
        for t in r["lobby"]["tables"].as_array().expect("tables") {
            w.put(t);
        }
        w
    }

    fn put(&mut self, t: &Value) {
        let id = t["table"].as_u64().expect("id");
        let players = t["players"].as_u64().expect("players");
        let h = self.history.entry(id).or_default();
        if h.last() != Some(&players) {
            h.push(players);
        }
        self.map.insert(id, t.clone());
    }

    /// Applies updates until `done` holds for the map.
    async fn until(&mut self, what: &str, done: impl Fn(&BTreeMap<u64, Value>) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&self.map) {
            assert!(Instant::now() < deadline, "never {what}: {:?}", self.map);
            let m = recv_json(&mut self.ws).await;
            let Some(u) = m.get("lobby_update") else {
                continue;
            };
            let seq = u["seq"].as_u64().expect("seq");
            if seq <= self.seq {
                continue;
            }
            assert!(seq > self.seq);
            self.seq = seq;
            for t in u["tables"].as_array().expect("tables") {
                self.put(t);
            }
        }
    }
}

fn players(map: &BTreeMap<u64, Value>, table: u64) -> u64 {
    map.get(&table)
        .and_then(|t| t["players"].as_u64())
        .unwrap_or(99)
}

async fn snapshot(n: &NodeHandle) -> Value {
    let (mut ws, r) = connect_with_token(n.addr, Some(&token("snap"))).await;
    assert!(r["connect"].is_object(), "{r}");
    send_json(&mut ws, json!({"id": 1, "lobby": {"path": ""}})).await;
    recv_json(&mut ws).await["lobby"]["tables"].clone()
}

async fn runs(n: &NodeHandle, table: u64) -> bool {
    let (_, _, body) = http(n.addr, "GET", "/api/tables", &[], "").await;
    let v: Value = serde_json::from_str(&body).expect("JSON");
    v["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["table"] == table && t["owner"].is_object())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_shows_the_same_lobby_through_a_take_over() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut games = [node(&redis, "game"), node(&redis, "game")];
    let edge = node(&redis, "edge");
    // Both tables claimed (by either game node).
    let deadline = Instant::now() + Duration::from_secs(15);
    for t in [1, 2] {
        while !(runs(&games[0], t).await || runs(&games[1], t).await) {
            assert!(Instant::now() < deadline, "table {t} never claimed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let empty = |m: &BTreeMap<u64, Value>| players(m, 1) == 0 && players(m, 2) == 0;
    let mut on_edge = Watcher::start(&edge, "w1").await;
    let mut on_game = Watcher::start(&games[0], "w2").await;
    on_edge.until("both tables on the edge", empty).await;
    on_game.until("both tables on a game node", empty).await;

    // Players sit through the edge (tables on the game nodes).
    let mut seated = Vec::new();
    for (user, table) in [("ann", 1), ("bob", 1), ("cat", 2)] {
        let (mut ws, r) = connect_with_token(edge.addr, Some(&token(user))).await;
        assert!(r["connect"].is_object(), "{r}");
        send_json(&mut ws, json!({"id": 2, "sit": {"table": table}})).await;
        let r = loop {
            let m = recv_json(&mut ws).await;
            if m["id"] == 2 {
                break m;
            }
        };
        assert!(r["sit"].is_object(), "{r}");
        seated.push(ws);
    }
    let full = |m: &BTreeMap<u64, Value>| players(m, 1) == 2 && players(m, 2) == 1;
    on_edge.until("the players in the edge's lobby", full).await;
    on_game
        .until("the players in the game node's lobby", full)
        .await;
    assert_eq!(on_edge.map, on_game.map);
    // Each table's changes came in the cluster's order on both nodes: only
    // sits happened, so every value seen is above the one before (updates
    // are coalesced per lobby interval on each node, so either may skip
    // one; neither may go back).
    for w in [&on_edge, &on_game] {
        for (t, h) in &w.history {
            assert!(h.windows(2).all(|p| p[0] < p[1]), "table {t}: {h:?}");
        }
    }
    // A fresh snapshot is the same on every node.
    let snap = snapshot(&edge).await;
    assert_eq!(snap.as_array().map(Vec::len), Some(2), "{snap}");
    assert_eq!(snapshot(&games[0]).await, snap);
    assert_eq!(snapshot(&games[1]).await, snap);

    // The owner of table 1 dies; the other game node takes it over and
    // publishes its entry (seats kept, players away) with a newer number:
    // the edge's subscription goes on.
    let first = if runs(&games[0], 1).await { 0 } else { 1 };
    let other = 1 - first;
    let mut on_edge = on_edge;
    let seq_before = on_edge.seq;
    games[first].kill();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !runs(&games[other], 1).await {
        assert!(Instant::now() < deadline, "no take-over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The players sit again through the edge; one stands up: the update
    // reaches the edge's old subscription.
    let mut ann = seated.remove(0);
    send_json(&mut ann, json!({"id": 3, "sit": {"table": 1}})).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut last = Value::Null;
    loop {
        assert!(Instant::now() < deadline, "ann never sat again: {last}");
        let m = recv_json(&mut ann).await;
        last = m.clone();
        if m["id"] == 3 {
            if m["sit"].is_object() {
                break;
            }
            // The edge had not seen the owner change yet: retry.
            tokio::time::sleep(Duration::from_millis(100)).await;
            send_json(&mut ann, json!({"id": 3, "sit": {"table": 1}})).await;
        }
    }
    send_json(&mut ann, json!({"id": 4, "stand": {"table": 1}})).await;
    on_edge
        .until("the stand after the take-over", |m| players(m, 1) == 1)
        .await;
    assert!(on_edge.seq > seq_before);
    let snap = snapshot(&edge).await;
    assert_eq!(snapshot(&games[other]).await, snap);
    assert_eq!(snap[0]["players"], 1, "{snap}");
}
