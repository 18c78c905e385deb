//! The Pusher protocol in a cluster: two nodes joined by a real
//! `redis-server`, Pusher clients on each (tokio-tungstenite speaking
//! protocol 7), the signed HTTP API asked of either node, and a webhook
//! receiver shared by both. What one Pusher server would show must hold for
//! the cluster (docs/decisions/0012-pusher-cluster.md): presence member
//! lists and member events per user across nodes, the channels API for the
//! whole cluster, webhooks once per cluster on cluster-wide transitions
//! only, a dead node's members removed, cache channels fed from any node.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;
#[path = "common/pusher.rs"]
mod pusher_common;

use common::{http, recv_json, Ws, WAIT};
use herald_redis::testing::RedisServer;
use herald_server::pusher::PusherArgs;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use pusher_common::*;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A node serving app 1 on `redis`, its webhooks (if any) to `hooks`,
/// `channel_vacated` at once.
fn node(redis: &RedisServer, hooks: Option<&str>) -> NodeHandle {
    node_with_delay(redis, hooks, 0)
}

/// A node whose `channel_vacated` waits `delay_ms`.
fn node_with_delay(redis: &RedisServer, hooks: Option<&str>, delay_ms: u64) -> NodeHandle {
    let mut a = app("1", KEY, SECRET);
    a.webhook_url = hooks.map(str::to_string);
    NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        pusher: Some(PusherArgs {
            apps: vec![a],
            vacated_delay_ms: Some(delay_ms),
            ..Default::default()
        }),
        ..ServeArgs::default()
    })
}

/// A node serving app 1 with `subscription_count` events on.
fn counting_node(redis: &RedisServer) -> NodeHandle {
    let mut a = app("1", KEY, SECRET);
    a.subscription_count = Some(true);
    NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        pusher: Some(PusherArgs {
            apps: vec![a],
            ..Default::default()
        }),
        ..ServeArgs::default()
    })
}

/// Waits until both nodes see each other (so both reach Redis).
async fn cluster_up(nodes: &[&NodeHandle]) {
    for n in nodes {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (status, _, body) = http(n.addr, "GET", "/api/nodes", &[], "").await;
            let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            if status == 200 && v["nodes"].as_array().map(Vec::len) == Some(nodes.len()) {
                break;
            }
            assert!(Instant::now() < deadline, "nodes never met: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A Pusher client on `addr` subscribed to `channel` (as `user` on a
/// presence channel); returns it and its `subscription_succeeded` data.
async fn member(addr: SocketAddr, channel: &str, user: Option<&str>) -> (Ws, Value) {
    let (mut ws, socket) = pusher_client(addr, KEY).await;
    let data = user.map(|u| json!({"user_id": u, "user_info": {"name": u}}).to_string());
    let m = subscribed(&mut ws, channel, &socket, data.as_deref()).await;
    (ws, m["data"].clone())
}

/// `GET /apps/1/{path}` (signed) on `addr`, as JSON.
async fn get(addr: SocketAddr, path: &str, query: &[(&str, &str)]) -> Value {
    let (status, body) = api(addr, "GET", &format!("/apps/1/{path}"), "", query).await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Polls `channels/{channel}?info=subscription_count` on `addr` until it
/// counts `n` subscriptions: joins and leaves reach Redis in the
/// background.
async fn wait_count(addr: SocketAddr, channel: &str, n: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let v = get(
            addr,
            &format!("channels/{channel}"),
            &[("info", "subscription_count")],
        )
        .await;
        if v["subscription_count"].as_u64().unwrap_or(0) == n {
            return;
        }
        assert!(Instant::now() < deadline, "{channel}: {v}, want {n}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next message on `ws` is the event `name` (nothing came before it).
async fn next_is(ws: &mut Ws, name: &str) -> Value {
    let m = tokio::time::timeout(WAIT, recv(ws)).await.expect("in time");
    assert_eq!(m["event"], name, "{m}");
    m
}

/// `presence.ids` of a `subscription_succeeded`'s data, sorted.
fn ids(data: &Value) -> Vec<String> {
    let mut ids: Vec<String> = data["presence"]["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn presence_is_the_clusters_one_member_per_user() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (node(&redis, None), node(&redis, None));
    cluster_up(&[&a, &b]).await;
    let room = "presence-room";

    let (mut ann, data) = member(a.addr, room, Some("ann")).await;
    assert_eq!(ids(&data), ["ann"]);
    // Bob joins on the other node: he sees Ann, she sees him come.
    let (mut bob, data) = member(b.addr, room, Some("bob")).await;
    assert_eq!(ids(&data), ["ann", "bob"], "{data}");
    assert_eq!(data["presence"]["count"], 2);
    assert_eq!(data["presence"]["hash"]["ann"], json!({"name": "ann"}));
    let added = next_is(&mut ann, "pusher_internal:member_added").await;
    assert_eq!(
        added["data"],
        json!({"user_id": "bob", "user_info": {"name": "bob"}})
    );

    // Ann's second connection, on Bob's node: not a new member for anyone.
    let (ann2, data) = member(b.addr, room, Some("ann")).await;
    assert_eq!(ids(&data), ["ann", "bob"]);
    wait_count(a.addr, room, 3).await;
    // ... and its leaving does not remove her (she is still on node A).
    drop(ann2);
    wait_count(a.addr, room, 2).await;
    // The next thing either sees is this event, not a member_added/removed.
    trigger(a.addr, room, "tick", "1").await;
    next_is(&mut ann, "tick").await;
    next_is(&mut bob, "tick").await;

    // Bob leaves for good: Ann hears it from the other node.
    drop(bob);
    let removed = next_is(&mut ann, "pusher_internal:member_removed").await;
    assert_eq!(removed["data"], json!({"user_id": "bob"}));
}

#[tokio::test]
async fn the_channels_api_answers_for_the_cluster_on_any_node() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (node(&redis, None), node(&redis, None));
    cluster_up(&[&a, &b]).await;
    let (_ann, _) = member(a.addr, "presence-room", Some("ann")).await;
    let (_bob, _) = member(b.addr, "presence-room", Some("bob")).await;
    let (_n1, _) = member(a.addr, "news", None).await;
    let (_n2, _) = member(b.addr, "news", None).await;
    let (_only_b, _) = member(b.addr, "sports", None).await;
    wait_count(a.addr, "presence-room", 2).await;
    wait_count(a.addr, "news", 2).await;
    wait_count(a.addr, "sports", 1).await;

    for n in [&a, &b] {
        let v = get(n.addr, "channels", &[]).await;
        assert_eq!(
            v,
            json!({"channels": {"presence-room": {}, "news": {}, "sports": {}}}),
            "{}",
            n.addr
        );
        let v = get(
            n.addr,
            "channels",
            &[("filter_by_prefix", "presence-"), ("info", "user_count")],
        )
        .await;
        assert_eq!(v, json!({"channels": {"presence-room": {"user_count": 2}}}));
        let v = get(
            n.addr,
            "channels/presence-room",
            &[("info", "subscription_count,user_count")],
        )
        .await;
        assert_eq!(
            v,
            json!({"occupied": true, "subscription_count": 2, "user_count": 2})
        );
        let v = get(n.addr, "channels/presence-room/users", &[]).await;
        assert_eq!(v, json!({"users": [{"id": "ann"}, {"id": "bob"}]}));
        let v = get(n.addr, "channels/sports", &[]).await;
        assert_eq!(v, json!({"occupied": true}));
    }
    // The `info` of an event published on A counts B's subscribers too.
    let body =
        json!({"name": "e", "channels": ["news"], "data": "x", "info": "subscription_count"})
            .to_string();
    let (status, text) = api(a.addr, "POST", "/apps/1/events", &body, &[]).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v, json!({"channels": {"news": {"subscription_count": 2}}}));
    drop(_only_b);
    wait_count(a.addr, "sports", 0).await;
    let v = get(a.addr, "channels", &[]).await;
    assert!(v["channels"].get("sports").is_none(), "{v}");
}

#[tokio::test]
async fn webhooks_are_sent_once_per_cluster_on_cluster_wide_transitions() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (url, mut rx) = webhook_receiver().await;
    let (a, b) = (node(&redis, Some(&url)), node(&redis, Some(&url)));
    cluster_up(&[&a, &b]).await;
    let room = "presence-room";

    let (ann_a, _) = member(a.addr, room, Some("ann")).await;
    wait_count(a.addr, room, 1).await;
    let (ann_b, _) = member(b.addr, room, Some("ann")).await;
    wait_count(a.addr, room, 2).await;
    // Vacated on A but occupied on B: still occupied, Ann still there.
    drop(ann_a);
    wait_count(a.addr, room, 1).await;
    drop(ann_b);
    wait_count(a.addr, room, 0).await;
    // A last channel on each node, so that everything before it has been
    // sent when its vacated arrives (each node's webhooks are in order).
    for n in [&a, &b] {
        let (w, _) = member(n.addr, "end", None).await;
        wait_count(a.addr, "end", 1).await;
        drop(w);
        wait_count(a.addr, "end", 0).await;
    }
    let mut got = hook_events(&mut rx, 8).await;
    // Anything more would be a duplicate: give it a moment to show up.
    got.extend(later_hook_events(&mut rx, Duration::from_millis(500)).await);
    let room_events: Vec<&Value> = got.iter().filter(|e| e["channel"] == room).collect();
    assert_eq!(
        room_events,
        [
            &json!({"name": "channel_occupied", "channel": room}),
            &json!({"name": "member_added", "channel": room, "user_id": "ann"}),
            &json!({"name": "member_removed", "channel": room, "user_id": "ann"}),
            &json!({"name": "channel_vacated", "channel": room}),
        ],
        "{got:?}"
    );
    let end = json!({"name": "channel_occupied", "channel": "end"});
    let vacated = json!({"name": "channel_vacated", "channel": "end"});
    assert_eq!(got.iter().filter(|e| **e == end).count(), 2, "{got:?}");
    assert_eq!(got.iter().filter(|e| **e == vacated).count(), 2, "{got:?}");
    assert_eq!(got.len(), 8, "{got:?}");
}

#[tokio::test]
async fn a_channel_left_on_one_node_and_joined_on_another_within_the_delay_is_never_vacated() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (url, mut rx) = webhook_receiver().await;
    // Long enough for the test's few Redis round trips, short for a test.
    let delay = 1500;
    let a = node_with_delay(&redis, Some(&url), delay);
    let b = node_with_delay(&redis, Some(&url), delay);
    cluster_up(&[&a, &b]).await;
    let (on_a, _) = member(a.addr, "flap", None).await;
    wait_count(a.addr, "flap", 1).await;
    drop(on_a);
    wait_count(a.addr, "flap", 0).await;
    // Back, on the other node, before A's vacate is due.
    let (on_b, _) = member(b.addr, "flap", None).await;
    wait_count(a.addr, "flap", 1).await;
    drop(on_b);
    let got = hook_events(&mut rx, 2).await;
    assert_eq!(
        got,
        [
            json!({"name": "channel_occupied", "channel": "flap"}),
            json!({"name": "channel_vacated", "channel": "flap"}),
        ]
    );
    // B's own pending vacate (due later) finds it reported already.
    tokio::time::sleep(Duration::from_millis(delay + 500)).await;
    assert!(rx.try_recv().is_err(), "a second vacate");
}

#[tokio::test]
async fn a_dead_nodes_members_are_removed_once_with_their_webhooks() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (url, mut rx) = webhook_receiver().await;
    let a = node(&redis, Some(&url));
    let mut b = node(&redis, Some(&url));
    cluster_up(&[&a, &b]).await;
    let room = "presence-room";
    let (mut ann, _) = member(a.addr, room, Some("ann")).await;
    let (_bob, _) = member(b.addr, room, Some("bob")).await;
    let (_lone, _) = member(b.addr, "only-on-b", None).await;
    next_is(&mut ann, "pusher_internal:member_added").await;
    wait_count(a.addr, "only-on-b", 1).await;
    let before = hook_events(&mut rx, 4).await;
    assert_eq!(before.len(), 4, "{before:?}");

    b.kill();
    // Within the dead-after time (5 s) plus a heartbeat or two.
    let removed = tokio::time::timeout(
        Duration::from_secs(15),
        next_is(&mut ann, "pusher_internal:member_removed"),
    )
    .await
    .expect("member_removed for the dead node's member");
    assert_eq!(removed["data"], json!({"user_id": "bob"}));
    let v = get(
        a.addr,
        &format!("channels/{room}"),
        &[("info", "user_count")],
    )
    .await;
    assert_eq!(v, json!({"occupied": true, "user_count": 1}));
    let v = get(a.addr, "channels", &[]).await;
    assert_eq!(v, json!({"channels": {room: {}}}));
    let mut after = hook_events(&mut rx, 2).await;
    after.sort_by_key(|e| e.to_string());
    assert_eq!(
        after,
        [
            json!({"name": "channel_vacated", "channel": "only-on-b"}),
            json!({"name": "member_removed", "channel": room, "user_id": "bob"}),
        ]
    );
}

#[tokio::test]
async fn cache_channels_replay_an_event_published_through_another_node() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (node(&redis, None), node(&redis, None));
    cluster_up(&[&a, &b]).await;
    trigger(a.addr, "cache-price", "price", "{\"eur\":3}").await;
    let (mut ws, socket) = pusher_client(b.addr, KEY).await;
    subscribed(&mut ws, "cache-price", &socket, None).await;
    let m = recv_json(&mut ws).await;
    assert_eq!(
        m,
        json!({"event": "price", "channel": "cache-price", "data": "{\"eur\":3}"})
    );
}

/// `subscription_count` is the cluster's: a join or leave on either node,
/// and a dead node's subscriptions going, reach the subscribers of both.
#[tokio::test]
async fn subscription_counts_are_the_clusters() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, mut b) = (counting_node(&redis), counting_node(&redis));
    cluster_up(&[&a, &b]).await;
    let (mut p1, _) = member(a.addr, "news", None).await;
    count_reaches(&mut p1, "news", 1).await;
    let (mut p2, _) = member(b.addr, "news", None).await;
    count_reaches(&mut p2, "news", 2).await;
    count_reaches(&mut p1, "news", 2).await;
    let (p3, _) = member(b.addr, "news", None).await;
    count_reaches(&mut p1, "news", 3).await;
    count_reaches(&mut p2, "news", 3).await;
    drop(p3);
    count_reaches(&mut p1, "news", 2).await;
    count_reaches(&mut p2, "news", 2).await;
    // Node B dies with p2: found dead within 5 s and a heartbeat or two.
    b.kill();
    tokio::time::timeout(Duration::from_secs(15), count_reaches(&mut p1, "news", 1))
        .await
        .expect("the dead node's subscription is counted out");
}

/// A Pusher client on `addr` signed in as `user` and subscribed to its user
/// channel.
async fn signed_in(addr: SocketAddr, user: &str) -> Ws {
    let (mut ws, socket) = pusher_client(addr, KEY).await;
    let data = json!({"id": user}).to_string();
    let auth = herald_pusher::sign::user_auth(KEY, SECRET.as_bytes(), &socket, &data);
    common::send_json(
        &mut ws,
        json!({"event": "pusher:signin", "data": {"auth": auth, "user_data": data}}),
    )
    .await;
    assert_eq!(recv(&mut ws).await["event"], "pusher:signin_success");
    let channel = format!("#server-to-user-{user}");
    let m = subscribe(&mut ws, &channel, None, None).await;
    assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
    ws
}

/// `users/{id}/terminate_connections` asked of one node closes the user's
/// connections on every node (4009), and no one else's.
#[tokio::test]
async fn terminate_connections_reaches_every_node() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (a, b) = (node(&redis, None), node(&redis, None));
    cluster_up(&[&a, &b]).await;
    let mut ann_a = signed_in(a.addr, "ann").await;
    let mut ann_b = signed_in(b.addr, "ann").await;
    let mut bob_b = signed_in(b.addr, "bob").await;
    let (status, body) = api(
        a.addr,
        "POST",
        "/apps/1/users/ann/terminate_connections",
        "{}",
        &[],
    )
    .await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    assert_eq!(common::close_code(&mut ann_a).await, 4009);
    assert_eq!(
        common::close_code(&mut ann_b).await,
        4009,
        "on the other node"
    );
    trigger(a.addr, "#server-to-user-bob", "still", "here").await;
    assert_eq!(recv(&mut bob_b).await["event"], "still");
}
