//! Node roles and edge → owner routing (decision 0009, issue 17), with real
//! nodes and a real `redis-server`: players connected to an `edge` node
//! play at a table run by a `game` node; when the game node is killed
//! mid-hand, another game node takes the table over and the players, still
//! on the edge, sit again on the same connection and find the same hand and
//! every chip; when their edge is killed, they reconnect to another edge
//! and sit back into their seats; when the owner is cut off from Redis (a
//! TCP proxy the test controls), another game node takes the table over
//! and, once the link heals, the stale owner drops it: one owner.
mod common;
#[path = "common/game.rs"]
mod game_common;

use common::*;
use game_common::{chips, cluster_args, get, owner, runs, seeded, Player};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-route-secret-cluster-route!";

fn token(user: &str) -> String {
    user_token(SECRET, user)
}

fn node(redis: &RedisServer, role: &str) -> NodeHandle {
    node_at(&redis.url(), role)
}

fn node_at(url: &str, role: &str) -> NodeHandle {
    NodeHandle::start(node_args(url, role))
}

/// A node on `url` in `role` running table 1 (three seats, seeded deck,
/// 500 ms lease), its players with tokens.
fn node_args(url: &str, role: &str) -> ServeArgs {
    ServeArgs {
        game_grace: Some(30),
        ..cluster_args(url, role, SECRET, 1, seeded(8_000))
    }
}

/// Three players connected to `edge` sit at table 1 (run elsewhere); the
/// hand starts and two actions are acknowledged. Returns the players, their
/// cards and the table's state then.
async fn play_until_mid_hand(
    edge: &NodeHandle,
    owner: &NodeHandle,
) -> (Vec<Player>, Vec<Value>, Value) {
    let mut players = Vec::new();
    for (seat, u) in ["ann", "bob", "cat"].iter().enumerate() {
        let mut p = Player::connect(edge.addr, &token(u)).await;
        let r = p.sit(5).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
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
    let before = get(owner, "/api/tables/1").await["state"].clone();
    assert_eq!(before["turn"], turn["seat"], "{before}");
    (players, cards, before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_on_an_edge_keep_their_hand_through_a_game_node_take_over() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let edge = node(&redis, "edge");
    let mut games = [node(&redis, "game"), node(&redis, "game")];
    let first = owner(&[&games[0], &games[1]]).await;
    let other = 1 - first;
    // The edge never claims the table, and says what it is.
    assert!(!runs(&edge).await);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let v = get(&edge, "/api/nodes").await;
        let roles: Vec<String> = v["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n["stats"]["role"].as_str().map(str::to_string))
            .collect();
        let mut sorted = roles.clone();
        sorted.sort();
        if sorted == ["edge", "game", "game"] {
            break;
        }
        assert!(Instant::now() < deadline, "/api/nodes roles: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (mut players, cards, before) = play_until_mid_hand(&edge, &games[first]).await;
    let total = chips(&before);

    games[first].kill();
    // A command sent at once still goes to the dead owner and gets 114
    // ("retry") after the edge's timeout; the player later retries with the
    // same id, whose answer must not be dropped as the dead one's.
    send_json(&mut players[0].ws, json!({"id": 29, "sit": {"table": 1}})).await;
    // The players, still on the edge, are told the table moved.
    for (i, p) in players.iter_mut().enumerate() {
        let (mut unseated, mut refused) = (false, i != 0);
        while !(unseated && refused) {
            let m = p
                .wait("unseat (and 114)", |m| {
                    m["unseat"].is_object() || m["id"] == 29
                })
                .await;
            if m["id"] == 29 {
                assert_eq!(m["error"]["code"], 114, "{m}");
                refused = true;
            } else {
                assert_eq!(m["unseat"]["code"], 115, "{m}");
                assert_eq!(m["unseat"]["table"], 1, "{m}");
                unseated = true;
            }
        }
    }
    assert!(runs(&games[other]).await);
    // They sit again on the same connection: same seats, cards, hand, chips.
    for (seat, p) in players.iter_mut().enumerate() {
        let r = p.sit(if seat == 0 { 29 } else { 30 }).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        let snap = &r["sit"]["data"];
        assert_eq!(snap["cards"], cards[seat], "cards of seat {seat}");
        for k in ["hand", "street", "board", "pot", "turn", "button"] {
            assert_eq!(snap[k], before[k], "{k}: {snap}");
        }
        assert_eq!(chips(snap), total, "chips conserved: {snap}");
    }
    // The hand goes on through the edge.
    let seat = before["turn"].as_u64().expect("turn") as usize;
    players[seat].act(40, json!({"a": "check"})).await;
    let ev = players[(seat + 1) % 3].game_event("action").await;
    assert_eq!(ev["seat"].as_u64(), Some(seat as u64));
    let after = get(&games[other], "/api/tables/1").await["state"].clone();
    assert_eq!(chips(&after), total, "{after}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_of_a_killed_edge_sit_back_through_another_edge() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let game = node(&redis, "game");
    let mut edges = [node(&redis, "edge"), node(&redis, "edge")];
    owner(&[&game]).await;
    let (players, cards, before) = play_until_mid_hand(&edges[0], &game).await;
    let total = chips(&before);

    edges[0].kill();
    drop(players);
    for (seat, u) in ["ann", "bob", "cat"].iter().enumerate() {
        let mut p = Player::connect(edges[1].addr, &token(u)).await;
        let r = p.sit(50).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        let snap = &r["sit"]["data"];
        assert_eq!(snap["cards"], cards[seat], "cards of seat {seat}");
        assert_eq!(snap["hand"], before["hand"], "{snap}");
        assert_eq!(chips(snap), total, "chips conserved: {snap}");
    }
}

/// Like `node`, with anonymous clients allowed.
fn anonymous_node(redis: &RedisServer, role: &str) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        allow_anonymous: Some(true),
        token_hmac_secret: None,
        ..node_args(&redis.url(), role)
    })
}

/// Anonymous players hold seats per connection (protocol §5e); an
/// anonymous player on an edge keeps its connection through a take-over
/// of the table, so `sit` on it gives the seat back at the new owner, as
/// for a player with a token. (Before, the owner named an anonymous seat
/// after its proxy, whose id differs on the new owner: the seat was
/// "taken" and the player had to find another one.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_players_on_an_edge_sit_back_into_their_seats_after_a_take_over() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let edge = anonymous_node(&redis, "edge");
    let mut games = [
        anonymous_node(&redis, "game"),
        anonymous_node(&redis, "game"),
    ];
    let first = owner(&[&games[0], &games[1]]).await;
    let other = 1 - first;
    let mut players = Vec::new();
    for seat in 0..2u64 {
        let (ws, r) = connect_with_token(edge.addr, None).await;
        assert!(r["connect"].is_object(), "{r}");
        let mut p = Player { ws };
        let r = p.sit(5).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        players.push(p);
    }
    let hand = players[0].game_event("hand").await["hand"].clone();
    games[first].kill();
    for p in &mut players {
        let m = p.wait("unseat", |m| m["unseat"].is_object()).await;
        assert_eq!(m["unseat"]["code"], 115, "{m}");
    }
    assert!(runs(&games[other]).await);
    // In the other order than they sat: the new owner makes its proxies
    // (numbered from 1 on every node) in another order than the first.
    for (seat, p) in players.iter_mut().enumerate().rev() {
        send_json(
            &mut p.ws,
            json!({"id": 6, "sit": {"table": 1, "seat": seat}}),
        )
        .await;
        let r = p.wait("sit reply", |m| m["id"] == 6).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        assert_eq!(r["sit"]["data"]["hand"], hand, "{r}");
    }
    // Both seats are theirs again, not away, and nobody else's.
    let info = get(&games[other], "/api/tables/1").await;
    let seats = info["seats"].as_array().expect("seats");
    assert_eq!(seats.len(), 2, "{info}");
    assert!(seats.iter().all(|s| s["away"] == false), "{info}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_answers_a_table_nobody_runs_with_a_retryable_error() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // Only an edge: nobody claims table 1.
    let edge = node(&redis, "edge");
    let mut p = Player::connect(edge.addr, &token("ann")).await;
    let r = p.sit(5).await;
    assert_eq!(r["error"]["code"], 114, "{r}");
    // A table that is not the cluster's is unknown, as on one node.
    send_json(&mut p.ws, json!({"id": 6, "sit": {"table": 99}})).await;
    let r = p.wait("sit reply", |m| m["id"] == 6).await;
    assert_eq!(r["error"]["code"], 115, "{r}");
}

/// A TCP proxy to Redis that the test can cut (every connection dropped,
/// new ones refused) and heal.
struct Link {
    addr: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    conns: std::sync::Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Link {
    async fn start(redis: &RedisServer) -> Link {
        use std::sync::atomic::Ordering;
        let upstream: String = redis.url().trim_start_matches("redis://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let conns = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, cs) = (cut.clone(), conns.clone());
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: refused while cut
                }
                let upstream = upstream.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
                cs.lock().expect("lock").push(task);
            }
        });
        Link { addr, cut, conns }
    }

    fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for t in self.conns.lock().expect("lock").drain(..) {
            t.abort();
        }
    }

    fn heal(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_cut_off_from_redis_loses_its_table_to_one_other_owner() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let link = Link::start(&redis).await;
    // The owner reaches Redis through the link; it starts first, so it
    // claims the table.
    let cut_off = node_at(&link.url(), "game");
    owner(&[&cut_off]).await;
    let survivor = node(&redis, "game");
    let edge = node(&redis, "edge");
    let (mut players, cards, before) = play_until_mid_hand(&edge, &cut_off).await;
    let total = chips(&before);

    link.cut();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !runs(&survivor).await {
        assert!(Instant::now() < deadline, "no take-over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The players on the edge are told and sit again: same hand, chips.
    for (seat, p) in players.iter_mut().enumerate() {
        p.wait("unseat", |m| m["unseat"]["code"] == 115).await;
        let r = p.sit(30).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        let snap = &r["sit"]["data"];
        assert_eq!(snap["cards"], cards[seat], "cards of seat {seat}");
        assert_eq!(snap["hand"], before["hand"], "{snap}");
        assert_eq!(chips(snap), total, "chips conserved: {snap}");
    }

    // The link heals: the stale owner's next write is fenced and it drops
    // the table; the survivor keeps it. Exactly one owner.
    link.heal();
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs(&cut_off).await {
        assert!(Instant::now() < deadline, "the stale owner kept the table");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(runs(&survivor).await);
    let seat = before["turn"].as_u64().expect("turn") as usize;
    players[seat].act(40, json!({"a": "check"})).await;
    let after = get(&survivor, "/api/tables/1").await["state"].clone();
    assert_eq!(chips(&after), total, "{after}");
}
