//! Cluster mode, the subscriber link's batches (decision 0003,
//! "Coalescing"): publications that reach a node in one read of its Redis
//! subscriber link are fanned out together. A batch must still be delivered
//! in order, exactly once, and a gap inside it (a live message the node
//! never received) must still be filled from the stream before anything
//! newer. Publications are sent straight to Redis, pipelined in one write,
//! so that Redis answers them with one burst of live messages.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{http, json_client, recv_json, request, Ws, WAIT};
use herald_redis::testing::RedisServer;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The next `n` publications of `channel` pushed on `ws`: (offset, data).
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

#[tokio::test]
async fn a_burst_from_redis_is_delivered_in_order_and_its_gaps_are_filled() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let node = NodeHandle::start(ServeArgs {
        broker: Some(redis.url()),
        ..ServeArgs::default()
    });
    let mut sub = json_client(node.addr).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let r = request(
            &mut sub,
            json!({"id": 1, "subscribe": {"channel": "burst"}}),
        )
        .await;
        if r["subscribe"].is_object() {
            break;
        }
        assert!(Instant::now() < deadline, "subscribe failed: {r}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Another client publishes: a push may come before a reply, and
    // `request` skips what is not its reply.
    let mut publisher = json_client(node.addr).await;
    let r = request(
        &mut publisher,
        json!({"id": 2, "publish": {"channel": "burst", "data": 1}}),
    )
    .await;
    assert!(r["publish"].is_object(), "{r}");
    assert_eq!(pubs(&mut sub, "burst", 1).await[0].0, 1);

    // Offsets 2..=61 in one pipelined write, running the node's own publish
    // script; the live messages of 10, 11 and 40 go to another topic, so the
    // node sees gaps in the middle of its burst.
    let addr = redis.url().trim_start_matches("redis://").to_string();
    let mut raw = tokio::net::TcpStream::connect(&addr).await.unwrap();
    burst(&mut raw, 2..=61, &[10, 11, 40]).await;
    let got = pubs(&mut sub, "burst", 60).await;
    assert_eq!(
        got.iter().map(|p| p.0).collect::<Vec<_>>(),
        (2..=61).collect::<Vec<u64>>(),
        "in order, once, gaps filled"
    );
    assert!(
        got.iter().all(|(o, d)| d == &json!(o)),
        "data matches its offset: {got:?}"
    );
    // No duplicate follows: the next publication is the next push.
    burst(&mut raw, 62..=62, &[]).await;
    assert_eq!(pubs(&mut sub, "burst", 1).await[0].0, 62);
    let (_, _, metrics) = http(node.addr, "GET", "/metrics", &[], "").await;
    assert!(
        metrics.contains("herald_cluster_streams_lost_total 0"),
        "{metrics}"
    );
}

/// Runs the publish script for `offsets` (each one's data is its offset) in
/// one pipelined write, the live message of those in `hidden` going to a
/// topic nobody follows; returns once Redis answered every one.
async fn burst(
    raw: &mut tokio::net::TcpStream,
    offsets: std::ops::RangeInclusive<u64>,
    hidden: &[u64],
) {
    let mut out = bytes::BytesMut::new();
    let mut n = 0;
    for offset in offsets {
        let topic = if hidden.contains(&offset) {
            "herald:c:elsewhere"
        } else {
            "herald:c:burst"
        };
        herald_redis::resp::encode(
            &[
                "EVAL",
                herald_redis::lua::PUBLISH.text,
                "3",
                "herald:{burst}:m",
                "herald:{burst}:s",
                herald_redis::sentinel::EPOCH_KEY,
                &offset.to_string(),
                "unused",
                "100",
                "300000",
                topic,
            ],
            &mut out,
        );
        n += 1;
    }
    raw.write_all(&out).await.unwrap();
    let mut replies = bytes::BytesMut::new();
    let mut answered = 0;
    while answered < n {
        match herald_redis::resp::decode(&mut replies).unwrap() {
            Some(v) => {
                assert!(!matches!(v, herald_redis::resp::Value::Error(_)), "{v:?}");
                answered += 1;
            }
            None => {
                let read = tokio::time::timeout(WAIT, raw.read_buf(&mut replies))
                    .await
                    .unwrap()
                    .unwrap();
                assert!(read > 0, "redis closed");
            }
        }
    }
}
