//! A node whose Redis link is not up yet (just started, or restarted while
//! Redis is unreachable): a `subscribe` waits for the link, bounded, and
//! is answered once the channel is live, rather than refused at once with
//! 114. Real node, real `redis-server` behind a TCP proxy the test opens.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{json_client, recv_json, send_json};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A TCP proxy to Redis that drops every connection until opened.
async fn gate(redis: &RedisServer) -> (String, Arc<AtomicBool>) {
    let upstream = redis.url().trim_start_matches("redis://").to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let open = Arc::new(AtomicBool::new(false));
    let o = open.clone();
    tokio::spawn(async move {
        while let Ok((mut down, _)) = listener.accept().await {
            if !o.load(Ordering::SeqCst) {
                continue; // dropped: Redis "unreachable"
            }
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                }
            });
        }
    });
    (format!("redis://{addr}"), open)
}

/// A node whose Redis is behind a closed [`gate`].
async fn gated_node(redis: &RedisServer) -> (NodeHandle, Arc<AtomicBool>) {
    let (url, open) = gate(redis).await;
    let node = NodeHandle::start(ServeArgs {
        broker: Some(url),
        ..ServeArgs::default()
    });
    (node, open)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscribe_sent_before_the_redis_link_is_up_waits_for_it() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (node, open) = gated_node(&redis).await;
    let mut ws = json_client(node.addr).await;
    send_json(&mut ws, json!({"id": 2, "subscribe": {"channel": "late"}})).await;
    // Redis becomes reachable a moment later (the node's link retries).
    tokio::time::sleep(Duration::from_millis(500)).await;
    open.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(30);
    let reply = loop {
        let m = recv_json(&mut ws).await;
        if m["id"] == 2 {
            break m;
        }
        assert!(Instant::now() < deadline, "no subscribe reply");
    };
    assert!(reply["subscribe"].is_object(), "{reply}");
    // And it is live: a publication reaches it.
    send_json(
        &mut ws,
        json!({"id": 3, "publish": {"channel": "late", "data": {"n": 1}}}),
    )
    .await;
    loop {
        let m = recv_json(&mut ws).await;
        if m["pub"]["channel"] == "late" {
            assert_eq!(m["pub"]["data"]["n"], 1, "{m}");
            break;
        }
        assert!(m["error"].is_null(), "{m}");
    }
}

/// A node that has just started accepts connections once its Redis links are
/// up (bounded: `READY_WAIT`, 3 s), so a client's very first commands are
/// not refused with 114: a fire-and-forget publish sent at once is taken
/// (no error comes back) and the next acknowledged publish is offset 2.
/// Without the wait the first publish is refused with an id-0 error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_node_accepts_once_its_redis_link_is_up() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let (node, open) = gated_node(&redis).await;
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        open.store(true, Ordering::SeqCst);
    });
    let mut ws = json_client(node.addr).await;
    send_json(
        &mut ws,
        json!({"publish": {"channel": "first", "data": {"n": 1}}}),
    )
    .await;
    send_json(
        &mut ws,
        json!({"id": 4, "publish": {"channel": "first", "data": {"n": 2}}}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let reply = loop {
        let m = recv_json(&mut ws).await;
        assert!(m["error"].is_null(), "refused: {m}");
        if m["id"] == 4 {
            break m;
        }
        assert!(Instant::now() < deadline, "no publish reply");
    };
    assert_eq!(reply["publish"]["offset"], 2, "{reply}");
}
