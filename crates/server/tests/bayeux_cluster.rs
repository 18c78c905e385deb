//! Bayeux in a cluster: a CometD-style session on one node receives, through
//! an exact and a wildcard subscription, what a Bayeux session on another
//! node publishes (the sessions are Herald sessions, so their subscriptions
//! go through the Redis broker like any). Skipped without `redis-server`.

#![allow(missing_docs)]

mod common;

use common::{http, WAIT};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Instant;

async fn post(addr: SocketAddr, body: Value) -> Vec<Value> {
    let (status, _, text) = http(addr, "POST", "/cometd", &[], &body.to_string()).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).expect("json array")
}

async fn handshake(addr: SocketAddr) -> String {
    let r = post(
        addr,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"]}]),
    )
    .await;
    r[0]["clientId"].as_str().expect("clientId").to_string()
}

/// Subscribes, retrying while the node's broker reaches Redis.
async fn subscribe(addr: SocketAddr, id: &str, channel: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = post(
            addr,
            json!([{"channel":"/meta/subscribe","clientId":id,"subscription":channel}]),
        )
        .await;
        if r[0]["successful"] == true {
            return;
        }
        assert!(Instant::now() < deadline, "subscribe failed: {r:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_publication_on_one_node_reaches_bayeux_subscribers_on_another() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let node = || {
        NodeHandle::start(ServeArgs {
            broker: Some(redis.url()),
            ..ServeArgs::default()
        })
    };
    let (a, b) = (node(), node());
    let on_a = handshake(a.addr).await;
    subscribe(a.addr, &on_a, "/cl/room").await;
    subscribe(a.addr, &on_a, "/cl/*").await;
    let on_b = handshake(b.addr).await;
    let deadline = Instant::now() + WAIT;
    let mut got = Vec::new();
    // Publish from node B until node A's long-poll brings it (the first may
    // precede the cluster subscription's arrival at Redis).
    while got.is_empty() {
        assert!(Instant::now() < deadline, "nothing reached node A");
        let r = post(
            b.addr,
            json!([{"channel":"/cl/room","clientId":on_b,"data":{"from":"b"},"id":"1"}]),
        )
        .await;
        assert_eq!(r[0]["successful"], true, "{r:?}");
        let r = post(
            a.addr,
            json!([{"channel":"/meta/connect","clientId":on_a,"connectionType":"long-polling","advice":{"timeout":500}}]),
        )
        .await;
        got.extend(r.into_iter().filter(|m| m.get("data").is_some()));
    }
    // Once per publication, however many of its subscriptions match.
    assert_eq!(got[0], json!({"channel":"/cl/room","data":{"from":"b"}}));
    assert!(got.iter().all(|m| m["channel"] == "/cl/room"));
}
