//! Game tables across a cluster (decision 0009), with two real nodes and a
//! real `redis-server`: the configured table is owned by one node (shown in
//! `/api/tables` and `/api/nodes`); when that node is killed mid-hand, the
//! other takes the table over once the lease expires, and the players, back
//! on the surviving node, find their seats, their cards and every chip of
//! the same hand. And keepers started together split the tables, and read
//! the leases before they claim: no claim script per table another node
//! holds, every scan. With `--table-save-replicas`, saves wait for the
//! replica, and a replica that stops answering slows saves without holding
//! up the lease's renewals.
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use game_common::{chips, cluster_args, owner, seeded, Player};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-game-secret-cluster-game!";

fn token(user: &str) -> String {
    user_token(SECRET, user)
}

fn node(redis: &RedisServer) -> NodeHandle {
    node_with(redis, 1, 500)
}

fn node_with(redis: &RedisServer, count: u32, lease_ms: u64) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        table_lease: Some(lease_ms),
        // A turn lasts 15 s: long enough that no turn timer fires between
        // the snapshot taken before the kill and the players' return on a
        // loaded machine (a fired timer changes the hand under the test).
        ..cluster_args(&redis.url(), "all", SECRET, count, seeded(15_000))
    })
}

/// The tables `n` runs (every node's lobby lists every table of the
/// cluster; only the owner's entries have an `owner`).
async fn tables(n: &NodeHandle) -> Vec<Value> {
    let (status, _, body) = http(n.addr, "GET", "/api/tables", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("JSON");
    let all = v["tables"].as_array().cloned().unwrap_or_default();
    all.into_iter().filter(|t| t["owner"].is_object()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_hand_its_table_resumes_on_the_other_with_every_chip() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut nodes = [node(&redis), node(&redis)];
    let first = owner(&[&nodes[0], &nodes[1]]).await;
    let other = 1 - first;
    let listed = tables(&nodes[first]).await;
    assert_eq!(listed[0]["owner"]["token"], 1, "{listed:?}");
    let owner_node = listed[0]["owner"]["node"]
        .as_str()
        .expect("node")
        .to_string();
    // The owner says so in /api/nodes, seen from either node.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, _, body) = http(nodes[other].addr, "GET", "/api/nodes", &[], "").await;
        let v: Value = serde_json::from_str(&body).expect("JSON");
        let owns = v["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|n| n["id"] == owner_node.as_str() && n["stats"]["tables"] == 1);
        if owns {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/api/nodes never showed the owner: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(tables(&nodes[other]).await.is_empty());

    // Three players on the owner; a hand starts; two actions acknowledged.
    let users = ["ann", "bob", "cat"];
    let mut players = Vec::new();
    for u in users {
        let mut p = Player::connect(nodes[first].addr, &token(u)).await;
        let r = p.sit(5).await;
        assert!(r["sit"].is_object(), "{r}");
        players.push(p);
    }
    let mut cards = Vec::new();
    for p in &mut players {
        cards.push(p.game_event("cards").await["cards"].clone());
    }
    let mut turn = players[0].game_event("turn").await;
    for id in 10..12 {
        let seat = turn["seat"].as_u64().expect("seat") as usize;
        players[seat].act(id, json!({"a": "call"})).await;
        turn = players[0].game_event("turn").await;
    }
    let (_, _, body) = http(nodes[first].addr, "GET", "/api/tables/1", &[], "").await;
    let before: Value = serde_json::from_str::<Value>(&body).expect("JSON")["state"].clone();
    assert_eq!(before["turn"], turn["seat"], "{before}");
    let total = chips(&before);

    nodes[first].kill();
    drop(players);
    // The survivor takes the table over after the lease.
    let taken = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(15);
    let listed = loop {
        let t = tables(&nodes[other]).await;
        if !t.is_empty() {
            break t;
        }
        assert!(Instant::now() < deadline, "no take-over");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(listed[0]["owner"]["token"], 2, "{listed:?}");
    eprintln!("take-over seen after {:?}", taken.elapsed());

    // The players reconnect to the survivor and sit again: same seats, same
    // cards, same hand, same chips.
    let mut players = Vec::new();
    for (seat, u) in users.iter().enumerate() {
        let mut p = Player::connect(nodes[other].addr, &token(u)).await;
        let r = p.sit(5).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        let snap = &r["sit"]["data"];
        assert_eq!(snap["cards"], cards[seat], "{u}'s cards");
        for k in ["hand", "street", "board", "pot", "turn", "button"] {
            assert_eq!(snap[k], before[k], "{k}: {snap}");
        }
        assert_eq!(chips(snap), total, "chips conserved: {snap}");
        players.push(p);
    }
    // The hand goes on: the player to act acts on the new owner.
    let seat = before["turn"].as_u64().expect("turn") as usize;
    players[seat].act(20, json!({"a": "check"})).await;
    let ev = players[0].game_event("action").await;
    assert_eq!(ev["seat"].as_u64(), Some(seat as u64));
    let (_, _, body) = http(nodes[other].addr, "GET", "/api/tables/1", &[], "").await;
    let after: Value = serde_json::from_str::<Value>(&body).expect("JSON")["state"].clone();
    assert_eq!(chips(&after), total, "{after}");
}

/// `cmdstat_evalsha`'s call count in Redis's `INFO commandstats`.
fn script_calls(redis: &RedisServer) -> u64 {
    let Some(herald_redis::resp::Value::Bulk(Some(info))) =
        redis.command(&["INFO", "commandstats"])
    else {
        panic!("INFO commandstats");
    };
    let info = String::from_utf8_lossy(&info);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepers_started_together_split_the_tables_and_run_no_claim_per_held_table() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // 40 tables, a 300 ms lease: each keeper scans every 100 ms.
    let nodes = [node_with(&redis, 40, 300), node_with(&redis, 40, 300)];
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let owned = tables(&nodes[0]).await.len() + tables(&nodes[1]).await.len();
        if owned == 40 {
            break;
        }
        assert!(Instant::now() < deadline, "40 tables owned, got {owned}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Started together, they split the tables by rendezvous hashing (the
    // first one started used to take all 40).
    let (a, b) = (tables(&nodes[0]).await.len(), tables(&nodes[1]).await.len());
    assert!(a >= 8 && b >= 8, "tables split {a} / {b}");
    // Up to twenty scans per node with every table held: a claim per table
    // not run here would be 40 script calls per pair of scans (up to 800);
    // what is left is each node's batched renewal every 100 ms (up to 40)
    // and the odd lobby entry. A slow machine scans less, which only
    // lowers both counts.
    let before = script_calls(&redis);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = script_calls(&redis) - before;
    assert!(
        calls < 150,
        "{calls} script calls in 2 s with every table held"
    );
    // Still one owner per table, nothing moved.
    let owned = tables(&nodes[0]).await.len() + tables(&nodes[1]).await.len();
    assert_eq!(owned, 40);
}

/// `name`'s value in `n`'s `/metrics`.
async fn metric(n: &NodeHandle, name: &str) -> f64 {
    let (_, _, body) = http(n.addr, "GET", "/metrics", &[], "").await;
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

/// `--table-save-replicas 1`: an acknowledged action's save, and a table
/// created over HTTP, are on the replica when their replies come. A stopped replica makes each save wait
/// out `--table-save-wait` (counted), but the waits are on the saves' own
/// link: renewals go on, and the table keeps its owner and token for
/// longer than several leases (on the shared link a 2 s wait held the
/// renewals behind it, and the 500 ms lease expired under its owner).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saves_wait_for_the_replica_and_a_stopped_replica_holds_up_no_renewal() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let Some(replica) = RedisServer::start_replica_of(redis.port) else {
        return;
    };
    let n = NodeHandle::start(ServeArgs {
        table_lease: Some(500),
        table_save_replicas: Some(1),
        table_save_wait: Some(2_000),
        ..cluster_args(&redis.url(), "all", SECRET, 1, seeded(15_000))
    });
    owner(&[&n]).await;
    let token_before = tables(&n).await[0]["owner"]["token"].clone();
    let users = ["ann", "bob"];
    let mut players = Vec::new();
    for u in users {
        let mut p = Player::connect(n.addr, &token(u)).await;
        let r = p.sit(5).await;
        assert!(r["sit"].is_object(), "{r}");
        players.push(p);
    }
    let state = |port: u16| {
        herald_redis::testing::command(port, &["HGET", "herald:t:{1}:state", "v"])
            .and_then(|v| v.bytes().cloned())
    };
    // The replica may still be in its first sync for the first saves;
    // once it is up, every acknowledged save is on it when answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while state(replica.port).is_none() || state(replica.port) != state(redis.port) {
        assert!(Instant::now() < deadline, "the replica never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let short_before = metric(&n, "herald_cluster_table_saves_unreplicated_total").await;
    let turn = players[0].game_event("turn").await;
    let seat = turn["seat"].as_u64().expect("seat") as usize;
    players[seat].act(10, json!({"a": "call"})).await;
    assert_eq!(
        state(replica.port),
        state(redis.port),
        "the acknowledged save is on the replica"
    );
    assert_eq!(
        metric(&n, "herald_cluster_table_saves_unreplicated_total").await,
        short_before
    );

    // A table created over HTTP: in the replica's registry when answered
    // (a promoted replica never hands its id out again).
    let spec = json!({"game": "holdem", "seats": 3, "timing": "super-express",
                      "path": "created/3", "seed": 5});
    let (status, _, reply) = http(n.addr, "POST", "/api/tables", &[], &spec.to_string()).await;
    assert_eq!(status, 201, "{reply}");
    let created: Value = serde_json::from_str(&reply).expect("JSON");
    let id = created["tables"][0].as_u64().expect("an id").to_string();
    let listed = herald_redis::testing::command(replica.port, &["HEXISTS", "herald:tables", &id])
        .and_then(|v| v.int());
    assert_eq!(
        listed,
        Some(1),
        "created table {id} on the replica: {created}"
    );
    assert_eq!(
        metric(&n, "herald_cluster_table_saves_unreplicated_total").await,
        short_before
    );

    // The replica stops: the next action waits out its 2 s, 4 leases.
    replica.freeze(true);
    let turn = players[0].game_event("turn").await;
    let seat = turn["seat"].as_u64().expect("seat") as usize;
    let sent = Instant::now();
    players[seat].act(11, json!({"a": "call"})).await;
    let waited = sent.elapsed();
    replica.freeze(false);
    assert!(waited >= Duration::from_millis(1_900), "{waited:?}");
    assert!(metric(&n, "herald_cluster_table_saves_unreplicated_total").await > short_before);
    let listed = tables(&n).await;
    let one = listed.iter().find(|t| t["table"] == 1);
    assert!(one.is_some(), "table 1 still runs here: {listed:?}");
    assert_eq!(
        one.map(|t| t["owner"]["token"].clone()),
        Some(token_before),
        "never lost its lease: {listed:?}"
    );
}
