//! Tables on demand in a cluster (protocol §5f): two nodes on a real
//! `redis-server` share one count of seats, so 200 players asking at once,
//! half on each node, fill exactly ⌈200/6⌉ tables with nobody seated
//! twice; and a private table made by `play` fails over like any table of
//! the cluster (its players sit again on the survivor, its code and seat
//! count survive in Redis).
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use futures_util::future::join_all;
use game_common::{get, Player};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const SECRET: &str = "play-cluster-secret-play-cluster-secret";

fn node(redis: &RedisServer) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        role: Some("all".into()),
        token_hmac_secret: Some(SECRET.into()),
        table_lease: Some(500),
        game_grace: Some(30),
        ..ServeArgs::default()
    })
}

async fn player(n: &NodeHandle, user: &str) -> Player {
    Player::connect(n.addr, &user_token(SECRET, user)).await
}

async fn ask(p: &mut Player, id: u32, cmd: Value) -> Value {
    let mut msg = cmd;
    msg["id"] = json!(id);
    send_json(&mut p.ws, msg).await;
    p.wait("an answer", |m| m["id"] == id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_players_on_two_nodes_fill_exactly_34_tables() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let nodes = [node(&redis), node(&redis)];
    let mut players = Vec::new();
    for i in 0..200 {
        players.push(player(&nodes[i % 2], &format!("racer{i}")).await);
    }
    let cmd = json!({"play": {"game": "holdem", "seats": 6, "attrs": {"timing": "super-express"}}});
    let replies = join_all(players.iter_mut().map(|p| ask(p, 7, cmd.clone()))).await;
    let mut seats: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for r in &replies {
        let p = &r["play"];
        assert!(p.is_object(), "{r}");
        let (table, seat) = (p["table"].as_u64().unwrap(), p["seat"].as_u64().unwrap());
        assert!(
            seats.entry(table).or_default().insert(seat),
            "seat {seat} of table {table} given twice"
        );
    }
    assert_eq!(seats.len(), 34, "⌈200/6⌉ tables: {seats:?}");
    assert!(seats.values().all(|s| s.len() <= 6));
    // Both nodes' lobbies list the 34 tables with 200 players.
    for n in &nodes {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let v = get(n, "/api/tables").await;
            let listed = v["tables"].as_array().cloned().unwrap_or_default();
            let players: u64 = listed.iter().filter_map(|t| t["players"].as_u64()).sum();
            if listed.len() == 34 && players == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "lobby: {} tables, {players} players",
                listed.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Sits at `table` until the seat comes back (114 while it changes owner).
async fn sit_again(p: &mut Player, table: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    for id in 100.. {
        let r = ask(p, id, json!({"sit": {"table": table}})).await;
        if r["sit"].is_object() {
            return r;
        }
        assert!(Instant::now() < deadline, "never seated again: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_table_made_by_play_fails_over_with_its_code() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let mut nodes = [node(&redis), node(&redis)];
    let mut host = player(&nodes[0], "host").await;
    let r = ask(
        &mut host,
        2,
        json!({"play": {"game": "holdem", "seats": 2, "private": true}}),
    )
    .await;
    let table = r["play"]["table"].as_u64().expect("table");
    let code = r["play"]["code"].as_str().expect("code").to_string();
    let host_seat = r["play"]["seat"].clone();
    let mut friend = player(&nodes[1], "friend").await;
    let r = ask(&mut friend, 2, json!({"play": {"code": code}})).await;
    assert_eq!(r["play"]["table"], table, "{r}");
    let friend_seat = r["play"]["seat"].clone();

    // Kill the node that runs it; the survivor takes it over.
    let owner = {
        let mut found = None;
        let deadline = Instant::now() + Duration::from_secs(10);
        while found.is_none() {
            for (i, n) in nodes.iter().enumerate() {
                let v = get(n, "/api/tables").await;
                let owned = v["tables"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|t| t["table"] == table && t["owner"].is_object());
                if owned {
                    found = Some(i);
                }
            }
            assert!(Instant::now() < deadline, "nobody runs {table}");
        }
        found.unwrap()
    };
    nodes[owner].kill();
    let survivor = &nodes[1 - owner];
    let (mut host, mut friend) = if owner == 0 {
        (player(survivor, "host").await, friend)
    } else {
        (host, player(survivor, "friend").await)
    };
    assert_eq!(sit_again(&mut host, table).await["sit"]["seat"], host_seat);
    assert_eq!(
        sit_again(&mut friend, table).await["sit"]["seat"],
        friend_seat
    );
    // Its code still finds it, and its count says it is full.
    let mut third = player(survivor, "third").await;
    let r = ask(&mut third, 2, json!({"play": {"code": code}})).await;
    assert_eq!(r["error"]["code"], 116, "{r}");
    let v = get(survivor, &format!("/api/tables/{table}")).await;
    assert_eq!(v["table"]["attrs"]["private"], true, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_table_closes_in_the_whole_cluster() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let quick = |redis: &RedisServer| {
        NodeHandle::start(ServeArgs {
            broker: Some(redis.url()),
            role: Some("all".into()),
            token_hmac_secret: Some(SECRET.into()),
            table_lease: Some(500),
            play_empty_close: Some(1),
            ..ServeArgs::default()
        })
    };
    let nodes = [quick(&redis), quick(&redis)];
    let mut p = player(&nodes[0], "lonely").await;
    let cmd = json!({"play": {"game": "holdem", "seats": 4}});
    let r = ask(&mut p, 2, cmd.clone()).await;
    let table = r["play"]["table"].as_u64().expect("table");
    let r = ask(&mut p, 3, json!({"stand": {"table": table}})).await;
    assert!(r["stand"].is_object(), "{r}");
    // Gone from both lobbies, and it stays gone (deleted: no take-over).
    for n in &nodes {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let v = get(n, "/api/tables").await;
            if !v["tables"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["table"] == table)
            {
                break;
            }
            assert!(Instant::now() < deadline, "{table} still listed: {v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for n in &nodes {
        let v = get(n, "/api/tables").await;
        assert!(
            !v["tables"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["table"] == table),
            "{table} came back: {v}"
        );
    }
    // The next `play` makes a new table.
    let r = ask(&mut p, 4, cmd).await;
    assert_eq!(r["play"]["created"], true, "{r}");
    assert_ne!(r["play"]["table"], table, "{r}");
}
