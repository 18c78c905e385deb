//! The `ack` extension across the loss of a node: a long-polling CometD
//! client keeps cookies, each connect reply of its `ack` session sets
//! `BAYEUX_ACKED` to what it acknowledged, and when its node dies it
//! handshakes on another node, subscribes again and is sent everything
//! after its last acknowledged delivery (some twice, never one lost), on a
//! real Redis. Skipped without `redis-server`.

#![allow(missing_docs)]

mod common;

use common::{http, WAIT};
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
