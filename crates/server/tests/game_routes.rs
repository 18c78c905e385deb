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

/// What one connection saw of table 1 until the hand's `result`: every
/// game event but its private `cards`, and (for a player) whether each of
/// its `act` replies came before the table's `action` for its seat.
async fn see_a_hand(mut p: Player, seat: Option<u64>) -> Vec<Value> {
    let mut seen = Vec::new();
    let mut acted: Option<u32> = None;
    let mut next_id = 100;
    loop {
        let m = p.wait("a game message", |_| true).await;
        if let Some(id) = acted {
            if m["id"] == id {
                assert!(m["act"].is_object(), "{m}");
                acted = None;
                continue;
            }
        }
        let ev = &m["game"]["data"];
        match ev["t"].as_str() {
            None | Some("cards") => continue,
            Some("action") if ev["seat"].as_u64() == seat => {
                // The reply to a command comes before its broadcast.
                assert!(
                    acted.is_none(),
                    "action of seat {seat:?} before its reply: {ev}"
                );
            }
            Some("turn") if seat.is_some() && ev["seat"].as_u64() == seat => {
                let a = if ev["to_call"].as_u64() == Some(0) {
                    "check"
                } else {
                    "call"
                };
                next_id += 1;
                send_json(
                    &mut p.ws,
                    json!({"id": next_id, "act": {"table": 1, "data": {"a": a}}}),
                )
                .await;
                acted = Some(next_id);
            }
            _ => {}
        }
        seen.push(ev.clone());
        if ev["t"] == "result" {
            return seen;
        }
    }
}

/// Several players and watchers of one table on one edge: the owner sends
/// each table event to the edge once for all of them (one message, the
/// event's bytes once), and every one of them still gets every event, in
/// order, and each player the reply to its `act` before the `action` it
/// caused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn players_and_watchers_on_one_edge_all_see_every_event_in_order() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let game = node(&redis, "game");
    let edge = node(&redis, "edge");
    owner(&[&game]).await;
    // Watchers first: they see everything the table sends from then on.
    let mut watchers = Vec::new();
    for u in ["wes", "wyn"] {
        let mut w = Player::connect(edge.addr, &token(u)).await;
        send_json(&mut w.ws, json!({"id": 3, "watch": {"table": 1}})).await;
        let r = w.wait("watch reply", |m| m["id"] == 3).await;
        assert!(r["watch"].is_object(), "{r}");
        watchers.push(w);
    }
    let mut players = Vec::new();
    for (seat, u) in ["ann", "bob", "cat"].iter().enumerate() {
        let mut p = Player::connect(edge.addr, &token(u)).await;
        let r = p.sit(5).await;
        assert_eq!(r["sit"]["seat"], seat, "{r}");
        players.push((p, seat as u64));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for w in watchers {
        tasks.spawn(async move { (None, see_a_hand(w, None).await) });
    }
    for (p, seat) in players {
        tasks.spawn(async move { (Some(seat), see_a_hand(p, Some(seat)).await) });
    }
    let mut logs = Vec::new();
    while let Some(r) = tasks.join_next().await {
        logs.push(r.expect("a connection's task"));
    }
    let watched: Vec<&Vec<Value>> = logs
        .iter()
        .filter(|(s, _)| s.is_none())
        .map(|(_, l)| l)
        .collect();
    assert_eq!(watched.len(), 2);
    assert_eq!(watched[0], watched[1], "both watchers saw the same events");
    let all = watched[0];
    for t in ["hand", "turn", "action", "result"] {
        assert!(all.iter().any(|e| e["t"] == t), "no {t} in {all:?}");
    }
    // A player who sat after the hand began sees it from there on: what
    // each saw is the watchers' events from some point, none missing.
    for (seat, log) in &logs {
        assert!(
            all.ends_with(log),
            "seat {seat:?} saw {log:?}, the watchers {all:?}"
        );
        assert!(log.len() > 1, "seat {seat:?} saw {log:?}");
    }
}

/// Publishes `payload` (binary) on `topic` of the Redis at `port`.
fn publish_raw(port: u16, topic: &str, payload: &[u8]) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("redis");
    let mut cmd = Vec::new();
    cmd.extend_from_slice(b"*3\r\n$7\r\nPUBLISH\r\n");
    for arg in [topic.as_bytes(), payload] {
        cmd.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        cmd.extend_from_slice(arg);
        cmd.extend_from_slice(b"\r\n");
    }
    s.write_all(&cmd).expect("publish");
    let mut reply = [0u8; 16];
    let n = s.read(&mut reply).expect("publish reply");
    assert!(reply[..n].starts_with(b":1"), "{:?}", &reply[..n]);
}

/// A `DELIVER_MANY` message (kind 7) from `owner`: one frame, for `client`
/// with sequence number `seq`, at frame index `index`.
fn deliver_many(owner: &str, client: u64, seq: u64, index: u32, frame: &[u8]) -> Vec<u8> {
    let mut m = vec![7u8];
    m.extend_from_slice(&(owner.len() as u16).to_be_bytes());
    m.extend_from_slice(owner.as_bytes());
    m.extend_from_slice(&1u32.to_be_bytes());
    m.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    m.extend_from_slice(frame);
    m.extend_from_slice(&1u32.to_be_bytes());
    m.extend_from_slice(&client.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(&1u32.to_be_bytes());
    m.extend_from_slice(&index.to_be_bytes());
    m
}

/// The edge refuses a malformed owner message (truncated, an index past
/// its frame table) and delivers nothing of it; a gap in a proxy's
/// numbers takes the player off the table (`unseat` 115), and `sit` on
/// the same connection gives the seat back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edge_refuses_bad_owner_messages_and_unseats_on_a_gap() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let game = node(&redis, "game");
    let edge = node(&redis, "edge");
    owner(&[&game]).await;
    let owner_id = get(&game, "/api/nodes").await["node"]
        .as_str()
        .expect("owner id")
        .to_string();
    let edge_id = get(&edge, "/api/nodes").await["node"]
        .as_str()
        .expect("edge id")
        .to_string();
    let (ws, r) = connect_with_token(edge.addr, Some(&token("ann"))).await;
    let client = u64::from_str_radix(r["connect"]["client"].as_str().expect("client"), 16)
        .expect("hex client id");
    let mut ann = Player { ws };
    let r = ann.sit(5).await;
    assert_eq!(r["sit"]["seat"], 0, "{r}");
    let topic = format!("herald:node:{edge_id}:cmd");
    let junk = br#"{"game":{"table":1,"data":{"t":"junk"}}}"#;
    let good = deliver_many(&owner_id, client, 1_000, 0, junk);
    // Truncated, and an index past the frame table: refused.
    publish_raw(redis.port, &topic, &good[..good.len() - 1]);
    publish_raw(
        redis.port,
        &topic,
        &deliver_many(&owner_id, client, 1_000, 1, junk),
    );
    // Had either been taken, its number (not the next) would unseat her.
    let quiet = tokio::time::timeout(Duration::from_millis(500), recv_json(&mut ann.ws)).await;
    assert!(quiet.is_err(), "{quiet:?}");
    // A well-formed one whose number is not the next: the player is told
    // to sit again, and gets no frame of it.
    publish_raw(redis.port, &topic, &good);
    let m = ann
        .wait("unseat", |m| {
            assert_ne!(m["game"]["data"]["t"], "junk", "{m}");
            m["unseat"].is_object()
        })
        .await;
    assert_eq!(m["unseat"]["code"], 115, "{m}");
    assert_eq!(m["unseat"]["table"], 1, "{m}");
    let r = ann.sit(6).await;
    assert_eq!(r["sit"]["seat"], 0, "{r}");
}
