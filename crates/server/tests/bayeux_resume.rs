//! The `ack` extension across the loss of a node: a long-polling CometD
//! client keeps cookies, each connect reply of its `ack` session sets
//! `BAYEUX_ACKED` to what it acknowledged, and when its node dies it
//! handshakes on another node, subscribes again and is sent everything
//! after its last acknowledged delivery (some twice, never one lost), on a
//! real Redis. Skipped without `redis-server`.
//!
//! On websocket no cookie can be set: the node writes an `ack` session's
//! positions to Redis, and a socket on which the client's next connect
//! brings its lost `clientId` (402) resumes it at the `ack` handshake that
//! follows on that socket (decision 0016, "Resuming on WebSocket").

#![allow(missing_docs)]

mod common;

use common::{http, recv_json, send_json, Ws, WAIT};
use herald_redis::testing::RedisServer;
use herald_server::bayeux::BayeuxArgs;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Instant;

/// A client's cookies, as a browser or `cometd-nodejs-client` keeps them.
#[derive(Default)]
struct Jar(BTreeMap<String, String>);

impl Jar {
    fn header(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&mut self, headers: &http::HeaderMap) {
        for v in headers.get_all(http::header::SET_COOKIE) {
            let v = v.to_str().expect("ascii cookie");
            let pair = v.split(';').next().expect("a pair");
            let (k, val) = pair.split_once('=').expect("name=value");
            self.0.insert(k.to_string(), val.to_string());
        }
    }
}

async fn post(addr: SocketAddr, jar: &mut Jar, body: Value) -> Vec<Value> {
    let cookie = jar.header();
    let headers: Vec<(&str, &str)> = if cookie.is_empty() {
        vec![]
    } else {
        vec![("cookie", cookie.as_str())]
    };
    let (status, h, text) = http(addr, "POST", "/cometd", &headers, &body.to_string()).await;
    assert_eq!(status, 200, "{text}");
    jar.keep(&h);
    serde_json::from_str(&text).expect("json array")
}

async fn api_publish(addr: SocketAddr, data: Value) {
    let body = json!({"channel": "resume.room", "data": data}).to_string();
    let (status, _, text) = http(addr, "POST", "/api/publish", &[], &body).await;
    assert_eq!(status, 200, "{text}");
}

async fn handshake(addr: SocketAddr, jar: &mut Jar) -> String {
    let r = post(
        addr,
        jar,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"],"ext":{"ack":true}}]),
    )
    .await;
    assert_eq!(r[0]["successful"], true, "{r:?}");
    r[0]["clientId"].as_str().expect("clientId").to_string()
}

/// Subscribes, retrying while the node's broker reaches Redis; the reply.
async fn subscribe(addr: SocketAddr, jar: &mut Jar, id: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = post(
            addr,
            jar,
            json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/resume/room"}]),
        )
        .await;
        if r[0]["successful"] == true {
            return r[0].clone();
        }
        assert!(Instant::now() < deadline, "subscribe failed: {r:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A connect acknowledging `ack`: the data it carried and its batch.
async fn connect(addr: SocketAddr, jar: &mut Jar, id: &str, ack: u64) -> (Vec<i64>, u64) {
    let r = post(
        addr,
        jar,
        json!([{"channel":"/meta/connect","clientId":id,"connectionType":"long-polling","ext":{"ack":ack}}]),
    )
    .await;
    let c = r.last().expect("a connect reply");
    assert_eq!(c["channel"], "/meta/connect", "{r:?}");
    assert_eq!(c["successful"], true, "{r:?}");
    let data = r
        .iter()
        .filter_map(|m| m.get("data").and_then(Value::as_i64))
        .collect();
    (data, c["ext"]["ack"].as_u64().expect("ext.ack"))
}

fn node(redis: &RedisServer) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        bayeux: Some(BayeuxArgs {
            timeout_ms: Some(300),
            ..BayeuxArgs::default()
        }),
        ..ServeArgs::default()
    })
}

#[tokio::test]
async fn an_ack_session_lost_with_its_node_resumes_on_another_and_loses_nothing() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (mut a, b) = (node(&redis), node(&redis));
    let mut jar = Jar::default();
    let id = handshake(a.addr, &mut jar).await;
    assert!(jar.0.contains_key("BAYEUX_BROWSER"));
    subscribe(a.addr, &mut jar, &id).await;

    // 1..=3 published on node B reach the session on node A in a batch.
    let mut seen = Vec::new();
    for i in 1..=3 {
        api_publish(b.addr, json!(i)).await;
    }
    let mut ack = 0;
    let deadline = Instant::now() + WAIT;
    while seen.len() < 3 {
        assert!(Instant::now() < deadline, "only {seen:?} reached node A");
        let (d, batch) = connect(a.addr, &mut jar, &id, ack).await;
        seen.extend(d);
        ack = batch;
    }
    assert_eq!(seen, [1, 2, 3]);
    // The next connect acknowledges them: its reply's cookie says so.
    let (d, batch) = connect(a.addr, &mut jar, &id, ack).await;
    assert!(d.is_empty(), "{d:?}");
    let cookie = jar.0.get("BAYEUX_ACKED").expect("the acked cookie").clone();
    assert!(cookie.contains("~resume.room~"), "{cookie}");

    // 4 and 5 arrive, but the connect that would acknowledge them never
    // reaches node A: it dies.
    api_publish(b.addr, json!(4)).await;
    api_publish(b.addr, json!(5)).await;
    let (d, _) = connect(a.addr, &mut jar, &id, batch).await;
    assert_eq!(d, [4, 5]);
    seen.extend(d);
    a.kill();
    // Published while the client has no session anywhere.
    api_publish(b.addr, json!(6)).await;
    api_publish(b.addr, json!(7)).await;

    // The client handshakes on node B (its load balancer's choice) with its
    // cookies and subscribes again, as CometD's handshake listener does.
    let again = handshake(b.addr, &mut jar).await;
    assert_ne!(again, id);
    let sub = subscribe(b.addr, &mut jar, &again).await;
    assert!(sub.get("ext").is_none(), "recovered: {sub}");
    api_publish(b.addr, json!(8)).await;
    let mut after = Vec::new();
    let mut ack = 0;
    let deadline = Instant::now() + WAIT;
    while !after.contains(&8) {
        assert!(Instant::now() < deadline, "only {after:?} after the loss");
        let (d, batch) = connect(b.addr, &mut jar, &again, ack).await;
        after.extend(d);
        ack = batch;
    }
    // Everything after the last acknowledged delivery, in order: 4 and 5
    // again (at least once), 6 and 7 missed while away, then 8.
    assert_eq!(after, [4, 5, 6, 7, 8]);
}

#[tokio::test]
async fn a_position_whose_history_is_gone_is_reported_not_skipped() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let n = node(&redis);
    let mut jar = Jar::default();
    // A cookie naming an epoch the channel never had: Herald cannot
    // recover from it, and the subscribe reply says so.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    jar.0.insert(
        "BAYEUX_ACKED".into(),
        format!("gone0000~resume.room~no-such-epoch~3~{now}!junk~~"),
    );
    let id = handshake(n.addr, &mut jar).await;
    let sub = subscribe(n.addr, &mut jar, &id).await;
    assert_eq!(sub["ext"]["herald"]["recovered"], false, "{sub}");
    // The session goes on from now, and its next cookie replaces nothing
    // but keeps the other entry live.
    api_publish(n.addr, json!(1)).await;
    let (d, _) = connect(n.addr, &mut jar, &id, 0).await;
    let d = if d.is_empty() {
        connect(n.addr, &mut jar, &id, 0).await.0
    } else {
        d
    };
    assert_eq!(d, [1]);
    let cookie = &jar.0["BAYEUX_ACKED"];
    assert!(
        cookie.contains("gone0000~resume.room~no-such-epoch~3~"),
        "{cookie}"
    );
}

#[tokio::test]
async fn without_the_ack_extension_nothing_is_resumed_or_set() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let n = node(&redis);
    let mut jar = Jar::default();
    let r = post(
        n.addr,
        &mut jar,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"]}]),
    )
    .await;
    let id = r[0]["clientId"].as_str().expect("clientId").to_string();
    subscribe(n.addr, &mut jar, &id).await;
    api_publish(n.addr, json!(1)).await;
    let r = post(
        n.addr,
        &mut jar,
        json!([{"channel":"/meta/connect","clientId":id,"connectionType":"long-polling"}]),
    )
    .await;
    let delivery = r
        .iter()
        .find(|m| m.get("data").is_some())
        .expect("delivered");
    assert!(delivery.get("ext").is_none(), "no offsets: {delivery}");
    assert!(!jar.0.contains_key("BAYEUX_ACKED"));
}

/// A CometD client's websocket: each frame a batch.
async fn ws(addr: SocketAddr) -> Ws {
    common::connect(addr, "/cometd", None).await
}

/// The next batch the server sends on `ws`.
async fn batch(ws: &mut Ws) -> Vec<Value> {
    match recv_json(ws).await {
        Value::Array(v) => v,
        other => panic!("a batch is an array: {other}"),
    }
}

/// Sends `body` and returns the reply on `channel` (deliveries and other
/// replies before it are dropped).
async fn ws_call(ws: &mut Ws, body: Value, channel: &str) -> Value {
    send_json(ws, body).await;
    loop {
        for m in batch(ws).await {
            if m["channel"] == channel && m.get("data").is_none() {
                return m;
            }
        }
    }
}

async fn ws_handshake(ws: &mut Ws) -> String {
    let r = ws_call(
        ws,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["websocket"],"ext":{"ack":true}}]),
        "/meta/handshake",
    )
    .await;
    assert_eq!(r["successful"], true, "{r}");
    r["clientId"].as_str().expect("clientId").to_string()
}

async fn ws_subscribe(ws: &mut Ws, id: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = ws_call(
            ws,
            json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/resume/room"}]),
            "/meta/subscribe",
        )
        .await;
        if r["successful"] == true {
            return r;
        }
        assert!(Instant::now() < deadline, "subscribe failed: {r}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A connect acknowledging `ack` on `ws`: the data its reply carried and
/// its batch (with the `ack` extension deliveries go out with connects).
async fn ws_connect(ws: &mut Ws, id: &str, ack: u64) -> (Vec<i64>, u64) {
    send_json(
        ws,
        json!([{"channel":"/meta/connect","clientId":id,"connectionType":"websocket","ext":{"ack":ack}}]),
    )
    .await;
    let mut data = Vec::new();
    loop {
        for m in batch(ws).await {
            if let Some(d) = m.get("data").and_then(Value::as_i64) {
                data.push(d);
            } else if m["channel"] == "/meta/connect" {
                assert_eq!(m["successful"], true, "{m}");
                return (data, m["ext"]["ack"].as_u64().expect("ext.ack"));
            }
        }
    }
}

/// Connects until `want` has arrived; everything received, in order.
async fn ws_until(ws: &mut Ws, id: &str, want: i64) -> Vec<i64> {
    let mut seen = Vec::new();
    let mut ack = 0;
    let deadline = Instant::now() + WAIT;
    while !seen.contains(&want) {
        assert!(Instant::now() < deadline, "only {seen:?}");
        let (d, batch) = ws_connect(ws, id, ack).await;
        seen.extend(d);
        ack = batch;
    }
    seen
}

/// A websocket `ack` session on node `a` that acknowledged 1..=3 (and the
/// store has it), then was sent 4 and 5 without acknowledging them, and
/// `a` dies; 6 and 7 are published while the client has no node. Its
/// `clientId`.
async fn lost_websocket_session(redis: &RedisServer, a: &mut NodeHandle, b: &NodeHandle) -> String {
    let mut sock = ws(a.addr).await;
    let id = ws_handshake(&mut sock).await;
    ws_subscribe(&mut sock, &id).await;
    for i in 1..=3 {
        api_publish(b.addr, json!(i)).await;
    }
    let mut seen = Vec::new();
    let mut ack = 0;
    let deadline = Instant::now() + WAIT;
    while seen.len() < 3 {
        assert!(Instant::now() < deadline, "only {seen:?} reached node A");
        let (d, batch) = ws_connect(&mut sock, &id, ack).await;
        seen.extend(d);
        ack = batch;
    }
    assert_eq!(seen, [1, 2, 3]);
    // The next connect acknowledges them; within a second node A writes
    // where the session got to.
    let (d, batch) = ws_connect(&mut sock, &id, ack).await;
    assert!(d.is_empty(), "{d:?}");
    let key = format!("herald:bayeux:acked:{id}");
    let deadline = Instant::now() + WAIT;
    loop {
        let stored = match redis.command(&["GET", &key]) {
            Some(herald_redis::resp::Value::Bulk(Some(v))) => {
                String::from_utf8_lossy(&v).into_owned()
            }
            _ => String::new(),
        };
        if stored.contains("~resume.room~") && stored.contains("~3~") {
            break;
        }
        assert!(Instant::now() < deadline, "not stored: {stored:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    api_publish(b.addr, json!(4)).await;
    api_publish(b.addr, json!(5)).await;
    // Never acknowledged: a connect that came back with only 4 is answered
    // with 4 again and 5.
    let mut d = Vec::new();
    while !d.contains(&5) {
        d.extend(ws_connect(&mut sock, &id, batch).await.0);
    }
    d.dedup();
    assert_eq!(d, [4, 5]);
    a.kill();
    api_publish(b.addr, json!(6)).await;
    api_publish(b.addr, json!(7)).await;
    id
}

/// The client's next connect, on a new socket to node `b`: 402 with
/// `reconnect: handshake`.
async fn unknown_on_new_socket(b: &NodeHandle, id: &str) -> Ws {
    let mut sock = ws(b.addr).await;
    let r = ws_call(
        &mut sock,
        json!([{"channel":"/meta/connect","clientId":id,"connectionType":"websocket","ext":{"ack":0}}]),
        "/meta/connect",
    )
    .await;
    assert_eq!(r["successful"], false, "{r}");
    assert_eq!(r["advice"]["reconnect"], "handshake", "{r}");
    sock
}

#[tokio::test]
async fn a_websocket_ack_session_lost_with_its_node_resumes_on_the_socket_that_reports_it() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (mut a, b) = (node(&redis), node(&redis));
    let id = lost_websocket_session(&redis, &mut a, &b).await;
    let mut sock = unknown_on_new_socket(&b, &id).await;
    // As CometD's client does: handshake on the same socket, subscribe again.
    let again = ws_handshake(&mut sock).await;
    assert_ne!(again, id);
    let sub = ws_subscribe(&mut sock, &again).await;
    assert!(sub.get("ext").is_none(), "recovered: {sub}");
    api_publish(b.addr, json!(8)).await;
    // 4 and 5 again (delivered, never acknowledged), 6 and 7, then 8.
    assert_eq!(ws_until(&mut sock, &again, 8).await, [4, 5, 6, 7, 8]);

    // A handshake on a socket that reported no lost session starts afresh.
    let mut other = ws(b.addr).await;
    let fresh = ws_handshake(&mut other).await;
    ws_subscribe(&mut other, &fresh).await;
    api_publish(b.addr, json!(9)).await;
    assert_eq!(ws_until(&mut other, &fresh, 9).await, [9]);
}

#[tokio::test]
async fn a_handshake_waits_for_the_lost_sessions_positions_and_what_follows_it_keeps_its_order() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (mut a, b) = (node(&redis), node(&redis));
    let id = lost_websocket_session(&redis, &mut a, &b).await;
    // Redis answers nothing for a moment: the positions' read waits.
    redis.stall(0.8);
    let mut sock = unknown_on_new_socket(&b, &id).await;
    send_json(
        &mut sock,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["websocket"],"ext":{"ack":true}}]),
    )
    .await;
    // Sent before the handshake is answered: served after it, in order.
    send_json(
        &mut sock,
        json!([{"channel":"/meta/connect","clientId":"not-a-session","connectionType":"websocket"}]),
    )
    .await;
    let first = batch(&mut sock).await;
    assert_eq!(first[0]["channel"], "/meta/handshake", "{first:?}");
    assert_eq!(first[0]["successful"], true, "{first:?}");
    let again = first[0]["clientId"].as_str().expect("clientId").to_string();
    let second = batch(&mut sock).await;
    assert_eq!(second[0]["channel"], "/meta/connect", "{second:?}");
    assert_eq!(second[0]["advice"]["reconnect"], "handshake", "{second:?}");
    ws_subscribe(&mut sock, &again).await;
    api_publish(b.addr, json!(8)).await;
    assert_eq!(ws_until(&mut sock, &again, 8).await, [4, 5, 6, 7, 8]);
}

#[tokio::test]
async fn a_disconnected_websocket_session_leaves_nothing_to_resume() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let n = node(&redis);
    let mut sock = ws(n.addr).await;
    let id = ws_handshake(&mut sock).await;
    ws_subscribe(&mut sock, &id).await;
    api_publish(n.addr, json!(1)).await;
    let got = ws_until(&mut sock, &id, 1).await;
    assert_eq!(got, [1]);
    let key = format!("herald:bayeux:acked:{id}");
    let stored = || {
        matches!(
            redis.command(&["EXISTS", &key]),
            Some(herald_redis::resp::Value::Int(1))
        )
    };
    let deadline = Instant::now() + WAIT;
    while !stored() {
        assert!(Instant::now() < deadline, "never stored");
        ws_connect(&mut sock, &id, 1).await;
    }
    let r = ws_call(
        &mut sock,
        json!([{"channel":"/meta/disconnect","clientId":id}]),
        "/meta/disconnect",
    )
    .await;
    assert_eq!(r["successful"], true, "{r}");
    let deadline = Instant::now() + WAIT;
    while stored() {
        assert!(Instant::now() < deadline, "still stored after disconnect");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_socket_that_floods_while_its_handshake_waits_is_closed() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let n = node(&redis);
    // Once the node reaches Redis (a subscribe succeeds), any unknown
    // clientId starts a read of its positions; a stalled Redis keeps the
    // handshake after it waiting.
    let mut first = ws(n.addr).await;
    let id = ws_handshake(&mut first).await;
    ws_subscribe(&mut first, &id).await;
    redis.stall(1.5);
    let mut sock = unknown_on_new_socket(&n, "no-such-session").await;
    send_json(
        &mut sock,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["websocket"],"ext":{"ack":true}}]),
    )
    .await;
    for _ in 0..100 {
        send_json(
            &mut sock,
            json!([{"channel":"/meta/connect","clientId":"x","connectionType":"websocket"}]),
        )
        .await;
    }
    let r = batch(&mut sock).await;
    assert_eq!(r[0]["successful"], false, "{r:?}");
    assert!(
        r[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("too many batches")),
        "{r:?}"
    );
    assert_eq!(common::close_code(&mut sock).await, 1008);
    // The node serves others as before.
    let mut other = ws(n.addr).await;
    assert!(!ws_handshake(&mut other).await.is_empty());
}
