//! Cluster mode: several nodes joined by a real `redis-server` (started per
//! test on a free port). Each node runs on its own runtime
//! (`herald_server::testing::NodeHandle`), so a test can kill one abruptly,
//! as a crash would.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{
    assert_metrics_documented, close_code, first_publication_arrives, http, json_client,
    publish_retrying as publish, recv_json, request, send_json, subscribe_retrying as subscribe,
    Ws, WAIT,
};
use futures_util::SinkExt;
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::{ServeArgs, ServerConfig};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

/// A cluster node on its own runtime (see `herald_server::testing`).
struct Node;

impl Node {
    fn start(redis: &RedisServer) -> NodeHandle {
        NodeHandle::start(ServeArgs {
            broker: Some(redis.url()),
            ..ServeArgs::default()
        })
    }
}

/// The next `n` publications pushed on `ws` (offset, data), skipping others.
async fn pubs(ws: &mut Ws, channel: &str, n: usize) -> Vec<(u64, Value)> {
    let mut out = Vec::new();
    while out.len() < n {
        let m = recv_json(ws).await;
        if m["pub"]["channel"] == channel {
            out.push((
                m["pub"]["offset"].as_u64().unwrap(),
                m["pub"]["data"].clone(),
            ));
        }
    }
    out
}

/// A subscribe reply's `recovered` (absent in JSON means false).
fn recovered(r: &Value) -> bool {
    r["subscribe"]["recovered"].as_bool().unwrap_or(false)
}

async fn push_of(ws: &mut Ws, kind: &str) -> Value {
    loop {
        let m = recv_json(ws).await;
        if m[kind].is_object() {
            return m[kind].clone();
        }
    }
}

#[tokio::test]
async fn publications_reach_subscribers_on_every_node_in_order() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b, c) = (
        Node::start(&redis),
        Node::start(&redis),
        Node::start(&redis),
    );
    let mut on_a = json_client(a.addr).await;
    let mut on_b = json_client(b.addr).await;
    let mut publisher = json_client(c.addr).await;
    let sa = subscribe(&mut on_a, 2, json!({"channel": "chat"})).await;
    let sb = subscribe(&mut on_b, 2, json!({"channel": "chat"})).await;
    let epoch = sa["subscribe"]["epoch"].clone();
    assert!(epoch.as_str().is_some_and(|e| !e.is_empty()), "{sa}");
    // More clients on node A: still one Redis subscription per node.
    let mut more = Vec::new();
    for _ in 0..3 {
        let mut ws = json_client(a.addr).await;
        subscribe(&mut ws, 2, json!({"channel": "chat"})).await;
        more.push(ws);
    }
    let numsub = redis
        .command(&["PUBSUB", "NUMSUB", "herald:c:chat"])
        .unwrap();
    assert_eq!(
        numsub.items().get(1).and_then(|v| v.int()),
        Some(2),
        "{numsub:?}"
    );
    assert_eq!(sb["subscribe"]["epoch"], epoch, "one stream for every node");
    for i in 1..=20u64 {
        let r = publish(&mut publisher, 10 + i as u32, "chat", json!({"n": i})).await;
        assert_eq!(r["publish"]["epoch"], epoch, "{r}");
        assert_eq!(r["publish"]["offset"], i, "{r}");
    }
    for ws in [&mut on_a, &mut on_b] {
        let got = pubs(ws, "chat", 20).await;
        let want: Vec<(u64, Value)> = (1..=20).map(|i| (i, json!({"n": i}))).collect();
        assert_eq!(got, want);
    }
    // The HTTP publish API works on any node.
    let (status, _, body) = http(
        b.addr,
        "POST",
        "/api/publish",
        &[("content-type", "application/json")],
        r#"{"channel":"chat","data":{"n":21}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        pubs(&mut on_a, "chat", 1).await,
        vec![(21, json!({"n": 21}))]
    );
}

#[tokio::test]
async fn a_client_recovers_on_another_node_what_it_missed() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    let mut publisher = json_client(a.addr).await;
    let mut sub = json_client(a.addr).await;
    let r = subscribe(&mut sub, 2, json!({"channel": "news"})).await;
    let epoch = r["subscribe"]["epoch"].clone();
    for i in 1..=2u64 {
        publish(&mut publisher, i as u32 + 10, "news", json!(i)).await;
    }
    assert_eq!(pubs(&mut sub, "news", 2).await.last().map(|p| p.0), Some(2));
    drop(sub);
    for i in 3..=5u64 {
        publish(&mut publisher, i as u32 + 10, "news", json!(i)).await;
    }
    // Back, on the other node, from offset 2.
    let mut again = json_client(b.addr).await;
    let r = subscribe(
        &mut again,
        3,
        json!({"channel": "news", "recover": {"epoch": epoch, "offset": 2}}),
    )
    .await;
    let s = &r["subscribe"];
    assert!(recovered(&r), "{r}");
    assert_eq!(s["epoch"], epoch);
    assert_eq!(s["offset"], 5);
    let offsets: Vec<u64> = s["publications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, vec![3, 4, 5]);
    // Then live, with no gap and no duplicate.
    publish(&mut publisher, 20, "news", json!(6)).await;
    assert_eq!(pubs(&mut again, "news", 1).await, vec![(6, json!(6))]);
    // A position from another epoch is not recovered.
    let mut stale = json_client(b.addr).await;
    let r = subscribe(
        &mut stale,
        2,
        json!({"channel": "news", "recover": {"epoch": "nope", "offset": 2}}),
    )
    .await;
    assert!(!recovered(&r), "{r}");
}

#[tokio::test]
async fn publishing_races_with_recovery_across_nodes() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    let mut first = json_client(b.addr).await;
    let r = subscribe(&mut first, 2, json!({"channel": "race"})).await;
    let epoch = r["subscribe"]["epoch"].clone();
    // A publisher on node A publishes without pause while clients attach on
    // node B with recovery from offset 0: each must see 1..=N exactly once.
    let addr = a.addr;
    let publisher = tokio::spawn(async move {
        let mut p = json_client(addr).await;
        for i in 1..=300u64 {
            send_json(
                &mut p,
                json!({"id": 0, "publish": {"channel": "race", "data": i}}),
            )
            .await;
        }
        // A final acknowledged publish: everything before it is in.
        publish(&mut p, 1, "race", json!(301)).await
    });
    let mut joiners = Vec::new();
    for k in 0..5 {
        tokio::time::sleep(Duration::from_millis(5 * k)).await;
        let mut ws = json_client(b.addr).await;
        let r = subscribe(
            &mut ws,
            2,
            json!({"channel": "race", "recover": {"epoch": epoch, "offset": 0}}),
        )
        .await;
        joiners.push((ws, r));
    }
    let last = publisher.await.unwrap();
    assert_eq!(last["publish"]["offset"], 301, "{last}");
    for (mut ws, r) in joiners {
        let s = &r["subscribe"];
        // (An empty list is left out of JSON replies.)
        let mut seen: Vec<u64> = s["publications"]
            .as_array()
            .map(|a| a.iter().map(|p| p["offset"].as_u64().unwrap()).collect())
            .unwrap_or_default();
        let top = s["offset"].as_u64().unwrap();
        // What the reply gives ends at its position (it may give nothing: the
        // stream keeps the newest 100, and this node may not have delivered
        // those yet), and live delivery goes on from the next offset.
        if let Some(&newest) = seen.last() {
            assert_eq!(newest, top, "{r}");
        }
        let live = pubs(&mut ws, "race", (301 - top) as usize).await;
        if top < 301 {
            assert_eq!(live.first().map(|p| p.0), Some(top + 1), "{r}");
        }
        seen.extend(live.iter().map(|p| p.0));
        // One unbroken run ending at 301, and recovered exactly when it
        // starts at 1.
        let start = seen[0];
        assert_eq!(seen, (start..=301).collect::<Vec<u64>>());
        assert_eq!(recovered(&r), start == 1, "{r}");
    }
}

#[tokio::test]
async fn presence_and_join_leave_span_the_cluster() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    let mut listener = json_client(a.addr).await;
    subscribe(
        &mut listener,
        2,
        json!({"channel": "room", "join_leave": true}),
    )
    .await;
    let mut other = json_client(b.addr).await;
    let me = request(&mut other, json!({"id": 5, "ping": {}})).await;
    assert!(me["ping"].is_object());
    subscribe(&mut other, 2, json!({"channel": "room"})).await;
    let join = push_of(&mut listener, "join").await;
    assert_eq!(join["channel"], "room");
    let joined = join["client"].clone();
    let r = request(
        &mut other,
        json!({"id": 3, "presence": {"channel": "room"}}),
    )
    .await;
    let mut clients: Vec<String> = r["presence"]["clients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["client"].as_str().unwrap().to_string())
        .collect();
    clients.sort();
    assert_eq!(clients.len(), 2, "{r}");
    assert!(clients.contains(&joined.as_str().unwrap().to_string()));
    assert_ne!(clients[0], clients[1], "client ids are unique across nodes");
    let r = request(
        &mut listener,
        json!({"id": 4, "presence_stats": {"channel": "room"}}),
    )
    .await;
    assert_eq!(
        r["presence_stats"],
        json!({"clients": 2, "users": 0}),
        "{r}"
    );
    request(
        &mut other,
        json!({"id": 6, "unsubscribe": {"channel": "room"}}),
    )
    .await;
    let leave = push_of(&mut listener, "leave").await;
    assert_eq!(leave["client"], joined);
    let r = request(
        &mut listener,
        json!({"id": 7, "presence_stats": {"channel": "room"}}),
    )
    .await;
    assert_eq!(r["presence_stats"]["clients"], 1, "{r}");
}

#[tokio::test]
async fn a_dead_nodes_members_leave_and_the_node_list_follows() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis);
    let mut b = Node::start(&redis);
    let mut listener = json_client(a.addr).await;
    subscribe(
        &mut listener,
        2,
        json!({"channel": "room", "join_leave": true}),
    )
    .await;
    let mut doomed = json_client(b.addr).await;
    subscribe(&mut doomed, 2, json!({"channel": "room"})).await;
    let join = push_of(&mut listener, "join").await;
    let nodes = wait_for_nodes(a.addr, 2).await;
    assert_eq!(nodes["broker"], "redis");
    b.kill();
    // Within the dead-after time (5 s) plus a heartbeat or two.
    let leave = tokio::time::timeout(Duration::from_secs(15), push_of(&mut listener, "leave"))
        .await
        .expect("no leave for the dead node's member");
    assert_eq!(leave["client"], join["client"]);
    let r = request(
        &mut listener,
        json!({"id": 3, "presence": {"channel": "room"}}),
    )
    .await;
    assert_eq!(r["presence"]["clients"].as_array().unwrap().len(), 1, "{r}");
    wait_for_nodes(a.addr, 1).await;
    drop(doomed);
}

/// Polls `GET /api/nodes` until it lists `n` nodes.
async fn wait_for_nodes(addr: SocketAddr, n: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (status, _, body) = http(addr, "GET", "/api/nodes", &[], "").await;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        if v["nodes"].as_array().map(Vec::len) == Some(n) {
            return v;
        }
        assert!(Instant::now() < deadline, "never {n} nodes: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn redis_down_then_back_without_its_data() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis);
    let mut sub = json_client(a.addr).await;
    let r = subscribe(&mut sub, 2, json!({"channel": "feed"})).await;
    let epoch = r["subscribe"]["epoch"].clone();
    let mut publisher = json_client(a.addr).await;
    publish(&mut publisher, 3, "feed", json!(1)).await;
    assert_eq!(pubs(&mut sub, "feed", 1).await, vec![(1, json!(1))]);

    redis.kill();
    // Publishing fails with a clear error; clients stay connected.
    let deadline = Instant::now() + WAIT;
    loop {
        let r = request(
            &mut publisher,
            json!({"id": 4, "publish": {"channel": "feed", "data": 2}}),
        )
        .await;
        if r["error"]["code"] == 114 {
            break;
        }
        assert!(Instant::now() < deadline, "publish did not fail: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _, _) = http(a.addr, "GET", "/readyz", &[], "").await;
    assert_eq!(status, 503);
    let pong = request(&mut sub, json!({"id": 5, "ping": {}})).await;
    assert!(pong["ping"].is_object(), "{pong}");

    // Back, empty: the channel's stream is gone, so its subscriber is told to
    // reconnect, and its recovery says that something may have been lost.
    redis.restart();
    assert_eq!(close_code(&mut sub).await, 3004);
    let mut again = json_client(a.addr).await;
    let r = subscribe(
        &mut again,
        2,
        json!({"channel": "feed", "recover": {"epoch": epoch, "offset": 1}}),
    )
    .await;
    assert!(!recovered(&r), "{r}");
    let r = publish(&mut publisher, 6, "feed", json!(3)).await;
    assert!(r["publish"].is_object(), "{r}");
    assert_eq!(pubs(&mut again, "feed", 1).await.len(), 1);
    let (status, _, _) = http(a.addr, "GET", "/readyz", &[], "").await;
    assert_eq!(status, 200);
    let (_, _, metrics) = http(a.addr, "GET", "/metrics", &[], "").await;
    assert!(
        metrics.contains("herald_cluster_streams_lost_total 1"),
        "{metrics}"
    );
    assert_metrics_documented(&metrics, true);
    // (The node list may still be empty here: Redis lost it and the next
    // heartbeat has not re-registered this node yet.)
    common::promtool_check(&metrics);
}

#[tokio::test]
async fn a_lost_subscriber_link_is_filled_from_the_stream() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    let mut sub = json_client(a.addr).await;
    subscribe(&mut sub, 2, json!({"channel": "gap"})).await;
    let mut publisher = json_client(b.addr).await;
    publish(&mut publisher, 3, "gap", json!(1)).await;
    assert_eq!(pubs(&mut sub, "gap", 1).await.len(), 1);
    // Cut every node's subscriber link while publishing goes on: node A
    // misses live messages, then reads them back from the stream.
    let mut killed = 0;
    for i in 2..=40u64 {
        if i == 5 {
            killed = redis
                .command(&["CLIENT", "KILL", "TYPE", "pubsub"])
                .and_then(|v| v.int())
                .unwrap_or(0);
        }
        publish(&mut publisher, i as u32 + 10, "gap", json!(i)).await;
    }
    assert!(killed >= 1, "no subscriber link was cut");
    let got = pubs(&mut sub, "gap", 39).await;
    assert_eq!(
        got.iter().map(|p| p.0).collect::<Vec<_>>(),
        (2..=40).collect::<Vec<u64>>()
    );
    let (_, _, metrics) = http(a.addr, "GET", "/metrics", &[], "").await;
    assert!(
        metrics.contains("herald_cluster_streams_lost_total 0"),
        "{metrics}"
    );
}

async fn presence_stats(ws: &mut Ws, id: u32) -> Value {
    request(ws, json!({"id": id, "presence_stats": {"channel": "room"}})).await["presence_stats"]
        .clone()
}

#[tokio::test]
async fn presence_is_registered_again_after_the_link_returns() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis);
    let mut member = json_client(a.addr).await;
    subscribe(&mut member, 2, json!({"channel": "room"})).await;
    let mut asker = json_client(a.addr).await;
    let stats = |n: u64| json!({"clients": n, "users": 0});
    assert_eq!(presence_stats(&mut asker, 3).await, stats(1));
    // Redis forgets the member (as after a restart with its data lost, or a
    // leave/join lost with the link), then the node's link drops and returns.
    let deleted = redis
        .command(&["DEL", "herald:{room}:p"])
        .and_then(|v| v.int());
    assert_eq!(deleted, Some(1));
    assert_eq!(presence_stats(&mut asker, 4).await, stats(0));
    redis.command(&["CLIENT", "KILL", "TYPE", "normal"]);
    let deadline = Instant::now() + WAIT;
    let mut id = 5;
    loop {
        let r = request(
            &mut asker,
            json!({"id": id, "presence_stats": {"channel": "room"}}),
        )
        .await;
        if r["presence_stats"] == stats(1) {
            break;
        }
        assert!(Instant::now() < deadline, "presence not repaired: {r}");
        id += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_slow_redis_delays_publishes_but_not_the_connection() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis);
    let mut sub = json_client(a.addr).await;
    subscribe(&mut sub, 2, json!({"channel": "slow"})).await;
    let mut publisher = json_client(a.addr).await;
    publish(&mut publisher, 3, "slow", json!(1)).await;
    redis.stall(1.0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A publish waits for Redis; the connection's other commands do not wait
    // for it: the ping is answered first.
    send_json(
        &mut publisher,
        json!({"id": 10, "publish": {"channel": "slow", "data": 2}}),
    )
    .await;
    send_json(&mut publisher, json!({"id": 11, "ping": {}})).await;
    let first = recv_json(&mut publisher).await;
    assert_eq!(first["id"], 11, "{first}");
    let second = recv_json(&mut publisher).await;
    assert_eq!(second["id"], 10, "{second}");
    assert_eq!(second["publish"]["offset"], 2, "{second}");
    let got = pubs(&mut sub, "slow", 2).await;
    assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2]);
}

#[tokio::test]
async fn a_persistent_redis_restarts_without_disturbing_subscribers() {
    let Some(mut redis) = RedisServer::start_persistent() else {
        return;
    };
    let a = Node::start(&redis);
    let mut sub = json_client(a.addr).await;
    let r = subscribe(&mut sub, 2, json!({"channel": "kept"})).await;
    let epoch = r["subscribe"]["epoch"].clone();
    let mut publisher = json_client(a.addr).await;
    publish(&mut publisher, 3, "kept", json!(1)).await;
    assert_eq!(pubs(&mut sub, "kept", 1).await, vec![(1, json!(1))]);
    redis.kill();
    redis.restart();
    // Publishing resumes on the same stream; the subscriber was never closed
    // and sees the next offset.
    let r = publish(&mut publisher, 4, "kept", json!(2)).await;
    assert_eq!(r["publish"]["epoch"], epoch, "{r}");
    assert_eq!(r["publish"]["offset"], 2, "{r}");
    assert_eq!(pubs(&mut sub, "kept", 1).await, vec![(2, json!(2))]);
    let (_, _, metrics) = http(a.addr, "GET", "/metrics", &[], "").await;
    assert!(
        metrics.contains("herald_cluster_streams_lost_total 0"),
        "{metrics}"
    );
}

#[tokio::test]
async fn wildcard_subscribers_receive_every_nodes_publications() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    let mut pattern = json_client(a.addr).await;
    subscribe(&mut pattern, 2, json!({"channel": "news.>"})).await;
    // An exact subscriber of one matching channel on the same node: the
    // pattern subscriber must still get that channel's publications once.
    let mut exact = json_client(a.addr).await;
    subscribe(&mut exact, 2, json!({"channel": "news.sport"})).await;
    let mut one_level = json_client(a.addr).await;
    subscribe(&mut one_level, 2, json!({"channel": "news.*"})).await;
    // Publishes on node B; Redis's subscriptions take effect asynchronously,
    // so publish until the first arrives, then the real sequence.
    let mut publisher = json_client(b.addr).await;
    let deadline = Instant::now() + WAIT;
    let mut id = 100;
    loop {
        publish(&mut publisher, id, "news.warmup", json!("w")).await;
        id += 1;
        let got = tokio::time::timeout(Duration::from_millis(200), recv_json(&mut pattern)).await;
        if got.is_ok_and(|m| m["pub"]["channel"] == "news.warmup") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no pattern delivery across nodes"
        );
    }
    for (i, ch) in ["news.sport", "news.tennis.uk", "weather.uk", "news.sport"]
        .iter()
        .enumerate()
    {
        publish(&mut publisher, i as u32 + 10, ch, json!(i)).await;
    }
    publish(&mut publisher, 20, "news.end", json!("end")).await;
    let mut got = Vec::new();
    loop {
        let m = recv_json(&mut pattern).await;
        let ch = m["pub"]["channel"].as_str().unwrap_or_default().to_string();
        if ch == "news.end" {
            break;
        }
        if ch != "news.warmup" {
            got.push((ch, m["pub"]["offset"].as_u64().unwrap()));
        }
    }
    let want = [("news.sport", 1), ("news.tennis.uk", 1), ("news.sport", 2)];
    assert_eq!(got, want.map(|(c, o)| (c.to_string(), o)).to_vec());
    // `news.*` is one level: not news.tennis.uk.
    let mut one = Vec::new();
    loop {
        let m = recv_json(&mut one_level).await;
        let ch = m["pub"]["channel"].as_str().unwrap_or_default().to_string();
        if ch == "news.end" {
            break;
        }
        if ch != "news.warmup" {
            one.push(ch);
        }
    }
    assert_eq!(one, vec!["news.sport", "news.sport"]);
    assert_eq!(pubs(&mut exact, "news.sport", 2).await.len(), 2);
}

#[tokio::test]
async fn an_sse_stream_resumes_on_another_node() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    let mut publisher = json_client(b.addr).await;
    // Make sure the broker is reachable before the stream opens.
    publish(&mut publisher, 1, "warm", json!(0)).await;
    let mut events = common::sse(a.addr, "channel=news", None).await;
    for n in 1..=3u32 {
        publish(&mut publisher, n + 1, "news", json!(n)).await;
    }
    let got = common::read_events(&mut events, 3).await;
    let last_id = got[2].1.clone();
    assert!(last_id.ends_with(":3"), "{last_id}");
    drop(events);
    for n in 4..=6u32 {
        publish(&mut publisher, n + 1, "news", json!(n)).await;
    }
    // The browser reconnects to node B with Last-Event-ID: the missed
    // publications come first, then live ones.
    let mut events = common::sse(b.addr, "channel=news", Some(&last_id)).await;
    let missed = common::read_events(&mut events, 3).await;
    publish(&mut publisher, 10, "news", json!(7)).await;
    let live = common::read_events(&mut events, 1).await;
    let data: Vec<&str> = missed.iter().chain(&live).map(|e| e.0.as_str()).collect();
    assert_eq!(data, ["4", "5", "6", "7"]);
    assert!(live[0].1.ends_with(":7"), "{live:?}");
}

/// `/readyz` answers `status` (the node has noticed Redis go or come back).
async fn wait_ready(addr: SocketAddr, status: u16) {
    let deadline = Instant::now() + WAIT;
    while http(addr, "GET", "/readyz", &[], "").await.0 != status {
        assert!(Instant::now() < deadline, "/readyz never answered {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_sse_stream_that_cannot_subscribe_ends_so_that_the_client_retries() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis);
    wait_ready(a.addr, 200).await;
    redis.kill();
    wait_ready(a.addr, 503).await;
    // The stream opens (its response waits for the subscribe's answer), shows
    // error 114 and ends: an EventSource then reconnects after `retry:`. It
    // used to stay open, subscribed to nothing, for good.
    let mut events = common::sse(a.addr, "channel=news", None).await;
    let e = events.next().await;
    assert_eq!(common::field(&e, "event"), Some("herald"), "{e:?}");
    let error: Value = serde_json::from_str(common::field(&e, "data").unwrap()).unwrap();
    assert_eq!(error["error"]["code"], 114, "{error}");
    assert_eq!(error["id"], 2, "{error}");
    events.end().await;

    // The reconnect, once Redis is back, is an ordinary live stream.
    redis.restart();
    wait_ready(a.addr, 200).await;
    let mut events = common::sse(a.addr, "channel=news", None).await;
    let mut publisher = json_client(a.addr).await;
    publish(&mut publisher, 1, "news", json!(1)).await;
    let got = common::read_events(&mut events, 1).await;
    assert_eq!(got[0].0, "1");
}

#[tokio::test]
async fn unsubscribing_before_the_subscribe_completes_cancels_it() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let a = Node::start(&redis);
    // Someone else keeps the channel followed on this node.
    let mut other = json_client(a.addr).await;
    subscribe(&mut other, 2, json!({"channel": "c"})).await;
    let mut fickle = json_client(a.addr).await;
    // Subscribe and unsubscribe in one write: the unsubscribe is handled
    // while the subscribe still waits for Redis.
    for m in [
        json!({"id": 2, "subscribe": {"channel": "c"}}),
        json!({"id": 3, "unsubscribe": {"channel": "c"}}),
    ] {
        fickle.feed(Message::text(m.to_string())).await.unwrap();
    }
    fickle.flush().await.unwrap();
    let first = recv_json(&mut fickle).await;
    let second = recv_json(&mut fickle).await;
    let (unsub, sub) = if first["id"] == 3 {
        (first, second)
    } else {
        (second, first)
    };
    assert!(unsub["unsubscribe"].is_object(), "{unsub}");
    if sub["error"].is_object() {
        assert_eq!(sub["error"]["code"], 106, "{sub}");
    } else {
        // The subscribe won the race: then it was undone by the unsubscribe.
        assert!(sub["subscribe"].is_object(), "{sub}");
    }
    let mut publisher = json_client(a.addr).await;
    publish(&mut publisher, 4, "c", json!(1)).await;
    assert_eq!(pubs(&mut other, "c", 1).await.len(), 1);
    // Nothing for the client that unsubscribed; a ping proves the queue is empty.
    send_json(&mut fickle, json!({"id": 5, "ping": {}})).await;
    let pong = recv_json(&mut fickle).await;
    assert_eq!(pong["id"], 5, "{pong}");
    let r = request(
        &mut other,
        json!({"id": 6, "presence_stats": {"channel": "c"}}),
    )
    .await;
    assert_eq!(r["presence_stats"]["clients"], 1, "{r}");
}

#[tokio::test]
async fn a_bad_broker_url_is_refused_at_start() {
    for bad in ["redis://", "redis://h:notaport", "nats://x:1"] {
        let r = ServerConfig::resolve(ServeArgs {
            broker: Some(bad.into()),
            ..ServeArgs::default()
        })
        .map(|c| herald_server::server::build(c, herald_server::testing::games()));
        assert!(!matches!(r, Ok(Ok(_))), "{bad} was accepted");
    }
}

#[tokio::test]
async fn a_wildcard_subscriber_gets_what_another_node_publishes_right_after_its_reply() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    wait_ready(a.addr, 200).await;
    let mut publisher = json_client(b.addr).await;
    publish(&mut publisher, 1, "warm", json!(0)).await;
    // Each round a glob new to node A: its `PSUBSCRIBE` must be in place
    // before the reply (the reply used to go out at once).
    const ROUNDS: usize = 20;
    let mut missed = Vec::new();
    for round in 0..ROUNDS {
        let pattern = format!("first{round}.*");
        let channel = format!("first{round}.x");
        if !first_publication_arrives(a.addr, &mut publisher, &pattern, &channel).await {
            missed.push(round);
        }
    }
    assert!(
        missed.is_empty(),
        "{} of {ROUNDS} rounds missed the first publication: {missed:?}",
        missed.len()
    );
}

/// `PUBSUB NUMPAT` of `redis`.
fn numpat(redis: &RedisServer) -> Option<i64> {
    redis.command(&["PUBSUB", "NUMPAT"]).and_then(|v| v.int())
}

#[tokio::test]
async fn a_wildcard_subscription_without_the_subscriber_link_fails_and_leaves_nothing() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (Node::start(&redis), Node::start(&redis));
    wait_ready(a.addr, 200).await;
    wait_ready(b.addr, 200).await;
    redis.kill();
    wait_ready(a.addr, 503).await;
    // Two clients of node A ask for the same glob while its link is down:
    // neither is answered before a confirmation, which does not come; both
    // get the error exact subscriptions get (114, retry).
    let (mut one, mut two) = (json_client(a.addr).await, json_client(a.addr).await);
    for ws in [&mut one, &mut two] {
        send_json(ws, json!({"id": 2, "subscribe": {"channel": "down.*"}})).await;
    }
    for ws in [&mut one, &mut two] {
        let r = recv_json(ws).await;
        assert_eq!(r["id"], 2, "{r}");
        assert_eq!(r["error"]["code"], 114, "{r}");
    }
    // An exact channel likewise.
    send_json(
        &mut one,
        json!({"id": 3, "subscribe": {"channel": "downplain"}}),
    )
    .await;
    let r = recv_json(&mut one).await;
    assert_eq!(r["error"]["code"], 114, "{r}");

    redis.restart();
    wait_ready(a.addr, 200).await;
    wait_ready(b.addr, 200).await;
    // Nothing was left half done: once node A's subscriber link has served
    // a subscription made after its return (so the globs it subscribes
    // again on return are in place), Redis has no pattern.
    let mut exact = json_client(a.addr).await;
    subscribe(&mut exact, 2, json!({"channel": "plain"})).await;
    assert_eq!(numpat(&redis), Some(0));
    // A client that had the error asks again on the same connection: the
    // failed subscriptions are no "already subscribed" (105).
    for (id, channel) in [(4, "down.*"), (5, "downplain")] {
        send_json(
            &mut one,
            json!({"id": id, "subscribe": {"channel": channel}}),
        )
        .await;
        let r = recv_json(&mut one).await;
        assert!(r["subscribe"].is_object(), "{channel}: {r}");
    }
    // And the glob works now, from the start.
    let mut publisher = json_client(b.addr).await;
    assert!(first_publication_arrives(a.addr, &mut publisher, "down.*", "down.x").await);
}
