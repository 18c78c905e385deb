//! A cluster on Redis Sentinel (decision 0020), with real processes: a
//! master, a replica and three sentinels (`herald_redis::testing::
//! Sentinels`), two Herald nodes given `redis-sentinel://…`. The master is
//! SIGKILLed while a publisher publishes; every subscriber must either get
//! every publication or be told to resynchronise (close 3004, then a
//! recovery that says `recovered: false`), and no two subscribers may see
//! two different messages under one (epoch, offset). `/readyz`,
//! `/api/nodes` and `/metrics` then name the new master and one fail-over.
//! And a game table mid-hand through a promotion: exactly one owner after
//! it, every chip conserved, play resumes.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;
#[path = "common/failover.rs"]
mod failover;
#[path = "common/game.rs"]
mod game_common;

use common::{assert_metrics_documented, json_client, request, user_token};
use failover::{check, get, member_of, node, owned, presence_of, publish_through, subscriber};
use game_common::{chips, cluster_args, owner, seeded, Player};
use herald_redis::testing::Sentinels;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_subscriber_gets_everything_or_is_told_through_a_failover() {
    let Some(mut s) = tokio::task::block_in_place(Sentinels::start) else {
        return;
    };
    let url = s.url();
    let (a, b) = (node(&url), node(&url));
    let (done_tx, done_rx) = watch::channel(None);
    let mut subs = Vec::new();
    for i in 0..6 {
        let addr = if i % 2 == 0 { a.addr } else { b.addr };
        subs.push(tokio::spawn(subscriber(addr, done_rx.clone())));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Publish through node B; SIGKILL the master after 30 acknowledged
    // publications; go on until 40 more were acknowledged after it.
    let (acked, refused) = publish_through(b.addr, 40, || {
        let old = tokio::task::block_in_place(|| s.kill_master()).unwrap();
        eprintln!("killed the master on port {old}");
    })
    .await;
    assert!(refused > 0, "no publish failed while there was no master");
    let last = acked.last().unwrap().clone();
    let _ = done_tx.send(Some((last.0.clone(), last.1)));
    let mut all = Vec::new();
    for t in subs {
        all.push(
            tokio::time::timeout(Duration::from_secs(40), t)
                .await
                .unwrap()
                .unwrap(),
        );
    }

    // One message per (epoch, offset) across every subscriber and the
    // publisher's acknowledgements; no untold gap.
    let told = check(&all, &acked);
    eprintln!("{told} resynchronisations told, {refused} publishes refused");

    // The nodes say where the master is now, and that one fail-over happened.
    let new = tokio::task::block_in_place(|| s.master_port_direct());
    let master = format!("127.0.0.1:{new}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = get(a.addr, "/readyz").await;
        if status == 200 && body.contains(&master) {
            assert!(body.contains("sentinel"), "{body}");
            assert!(body.contains("1 fail-overs seen"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "/readyz: {status} {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, nodes) = get(b.addr, "/api/nodes").await;
    let nodes: Value = serde_json::from_str(&nodes).unwrap();
    assert_eq!(nodes["redis"]["mode"], "sentinel", "{nodes}");
    assert_eq!(nodes["redis"]["master"], master.as_str(), "{nodes}");
    assert_eq!(nodes["redis"]["failovers"], 1, "{nodes}");
    let (_, metrics) = get(a.addr, "/metrics").await;
    assert!(
        metrics.contains("herald_cluster_redis_failovers_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "herald_cluster_redis_master{{mode=\"sentinel\",addr=\"{master}\"}} 1"
        )),
        "{metrics}"
    );
    assert_metrics_documented(&metrics, true);
    common::promtool_check(&metrics);
    drop((a, b));
}

const SECRET: &str = "sentinel-game-secret-sentinel-game!";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_mid_hand_keeps_one_owner_and_every_chip_through_a_failover() {
    let Some(mut s) = tokio::task::block_in_place(Sentinels::start) else {
        return;
    };
    let url = s.url();
    let game_node = || {
        NodeHandle::start(ServeArgs {
            table_lease: Some(500),
            // Saves acknowledged by the replica (decision 0021).
            table_save_replicas: Some(1),
            table_save_wait: Some(200),
            ..cluster_args(&url, "all", SECRET, 1, seeded(15_000))
        })
    };
    let nodes = [game_node(), game_node()];
    let first = owner(&[&nodes[0], &nodes[1]]).await;
    let before_token = owned(nodes[first].addr).await[0]["owner"]["token"]
        .as_u64()
        .unwrap();
    assert_eq!(before_token, 1, "a fresh Redis issues token 1 first");
    // Three players; a hand starts; two actions acknowledged.
    let users = ["ann", "bob", "cat"];
    let mut players = Vec::new();
    for u in users {
        let mut p = Player::connect(nodes[first].addr, &user_token(SECRET, u)).await;
        let r = p.sit(5).await;
        assert!(r["sit"].is_object(), "{r}");
        players.push(p);
    }
    let mut turn = players[0].game_event("turn").await;
    for id in 10..12 {
        let seat = turn["seat"].as_u64().unwrap() as usize;
        players[seat].act(id, json!({"a": "call"})).await;
        turn = players[0].game_event("turn").await;
    }
    let (_, body) = get(nodes[first].addr, "/api/tables/1").await;
    let before: Value = serde_json::from_str::<Value>(&body).unwrap()["state"].clone();
    let total = chips(&before);

    let old = tokio::task::block_in_place(|| s.kill_master()).unwrap();
    tokio::task::block_in_place(|| s.wait_failover(old, Duration::from_secs(30))).unwrap();
    drop(players);

    // Exactly one owner once things settle (the lease is 500 ms: either the
    // owner renewed it on the new master, or it lapsed and one node claimed
    // the table again, with a token above every earlier one).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (at, listed) = loop {
        let a = owned(nodes[0].addr).await;
        let b = owned(nodes[1].addr).await;
        assert!(a.is_empty() || b.is_empty(), "two owners: {a:?} {b:?}");
        if !a.is_empty() || !b.is_empty() {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let (a2, b2) = (owned(nodes[0].addr).await, owned(nodes[1].addr).await);
            assert!(a2.is_empty() || b2.is_empty(), "two owners: {a2:?} {b2:?}");
            if a2.len() + b2.len() == 1 {
                break if a2.is_empty() { (1, b2) } else { (0, a2) };
            }
        }
        assert!(Instant::now() < deadline, "no owner after the fail-over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let token = listed[0]["owner"]["token"].as_u64().unwrap();
    assert!(
        token == before_token || token > u64::from(u32::MAX),
        "token {token} after a fail-over (was {before_token})"
    );
    eprintln!("owner after the fail-over: node {at} (was {first}), token {token}");

    // The players come back to the owner: their seats, every chip.
    let mut players = Vec::new();
    let mut snap = Value::Null;
    for (seat, u) in users.iter().enumerate() {
        let mut p = Player::connect(nodes[at].addr, &user_token(SECRET, u)).await;
        let deadline = Instant::now() + Duration::from_secs(15);
        let r = loop {
            let r = p.sit(5).await;
            if r["sit"].is_object() || Instant::now() > deadline {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        snap = r["sit"]["data"].clone();
        assert_eq!(chips(&snap), total, "chips conserved: {snap}");
        players.push(p);
    }
    // Play resumes: the player to act acts.
    let seat = snap["turn"].as_u64().expect("a turn") as usize;
    players[seat].act(20, json!({"a": "call"})).await;
    let ev = players[(seat + 1) % 3].game_event("action").await;
    assert_eq!(ev["seat"].as_u64(), Some(seat as u64));
    let (_, body) = get(nodes[at].addr, "/api/tables/1").await;
    let after: Value = serde_json::from_str::<Value>(&body).unwrap()["state"].clone();
    assert_eq!(chips(&after), total, "{after}");
}

/// A node that dies with the master leaves no phantom member on the new
/// master beyond the usual dead-node timeout; a member on a surviving node
/// is closed with 3004 (the channel's epoch ended), comes back, and is
/// listed alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_is_rebuilt_on_the_new_master_without_phantoms() {
    let Some(mut s) = tokio::task::block_in_place(Sentinels::start) else {
        return;
    };
    let url = s.url();
    let (a, b, mut c) = (node(&url), node(&url), node(&url));
    let (mut on_a, a1) = member_of(a.addr, "room").await;
    let (on_c, c1) = member_of(c.addr, "room").await;
    let mut asker = json_client(b.addr).await;
    let mut want = vec![a1, c1.clone()];
    want.sort();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = 3;
    while presence_of(&mut asker, id, "room").await.as_ref() != Some(&want) {
        assert!(Instant::now() < deadline, "never both members");
        id += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The master and node C die together.
    let old = tokio::task::block_in_place(|| s.kill_master()).unwrap();
    c.kill();
    tokio::task::block_in_place(|| s.wait_failover(old, Duration::from_secs(30))).unwrap();
    assert_eq!(common::close_code(&mut on_a).await, 3004);
    // As a real client does: the connection ends with the close.
    drop(on_a);
    let (_on_a, a2) = member_of(a.addr, "room").await;
    // Within the dead-node time (5 s) and a few heartbeats: A's member only.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        id += 1;
        let got = presence_of(&mut asker, id, "room").await;
        if got.as_ref() == Some(&vec![a2.clone()]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "presence after the fail-over: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // And it stays so.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    id += 1;
    assert_eq!(presence_of(&mut asker, id, "room").await, Some(vec![a2]));
    drop(on_c);
}

/// Sentinels that do not answer (a wrong address): the node serves, every
/// publish answers 114, `/readyz` says 503 and that no master is known.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_sentinel_address_is_error_114_and_not_ready() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let n = node(&format!("redis-sentinel://127.0.0.1:{port}/herald"));
    let mut ws = json_client(n.addr).await;
    let r = request(
        &mut ws,
        json!({"id": 2, "publish": {"channel": "feed", "data": 1}}),
    )
    .await;
    assert_eq!(r["error"]["code"], 114, "{r}");
    let (status, body) = get(n.addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("redis sentinel master unknown (0 fail-overs seen)"),
        "{body}"
    );
    let (_, nodes) = get(n.addr, "/api/nodes").await;
    let nodes: Value = serde_json::from_str(&nodes).unwrap();
    assert_eq!(nodes["redis"]["master"], Value::Null, "{nodes}");
}

/// Sentinels with a password of their own (`requirepass`): a node given
/// it (`?sentinel_password=`) publishes; a node given a wrong one answers
/// 114 and `/readyz` is 503 and says the sentinels refused the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_with_a_password_right_and_wrong() {
    let Some(s) = tokio::task::block_in_place(|| Sentinels::start_with_password("sentinel-pw"))
    else {
        return;
    };
    let good = node(&s.url());
    let mut ws = json_client(good.addr).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = request(
            &mut ws,
            json!({"id": 1, "publish": {"channel": "feed", "data": 1}}),
        )
        .await;
        if r["publish"].is_object() {
            break;
        }
        assert!(Instant::now() < deadline, "{r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = get(good.addr, "/readyz").await;
    assert_eq!(status, 200, "{body}");

    let bad = node(&s.url_with_password("wrong"));
    let mut ws = json_client(bad.addr).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = request(
            &mut ws,
            json!({"id": 2, "publish": {"channel": "feed", "data": 1}}),
        )
        .await;
        assert_eq!(r["error"]["code"], 114, "{r}");
        let (status, body) = get(bad.addr, "/readyz").await;
        assert_eq!(status, 503, "{body}");
        if body.contains("redis sentinel: the sentinels refused the password") {
            break;
        }
        assert!(Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
