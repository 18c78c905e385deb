//! A Herald cluster on Redis Cluster (decision 0021), with real processes:
//! three masters with one replica each (`herald_redis::testing::
//! RedisCluster`), two Herald nodes given `redis-cluster://…`. Channels
//! whose keys live on different masters: publications made on one node
//! reach subscribers on the other in offset order, and a client recovers
//! on the other node what it missed, from the stream on the channel's
//! master.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{json_client, recv_json, request, Ws, WAIT};
use herald_redis::slot;
use herald_redis::testing::RedisCluster;
use herald_server::testing::NodeHandle;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn node(url: &str) -> NodeHandle {
    NodeHandle::start(ServeArgs {
        broker: Some(url.to_string()),
        ..ServeArgs::default()
    })
}

/// Retries until the node serves the subscribe (it may still be learning
/// the slot map).
async fn subscribe(ws: &mut Ws, id: u32, sub: Value) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = request(ws, json!({"id": id, "subscribe": sub.clone()})).await;
        if r["subscribe"].is_object() || Instant::now() > deadline {
            assert!(r["subscribe"].is_object(), "subscribe failed: {r}");
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn publish(ws: &mut Ws, id: u32, channel: &str, data: Value) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = request(
            ws,
            json!({"id": id, "publish": {"channel": channel, "data": data.clone()}}),
        )
        .await;
        if r["publish"].is_object() || Instant::now() > deadline {
            assert!(r["publish"].is_object(), "publish failed: {r}");
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_on_every_master_publish_subscribe_and_recover() {
    let Some(redis) = tokio::task::block_in_place(|| RedisCluster::start(3)) else {
        return;
    };
    let (a, b) = (node(&redis.url()), node(&redis.url()));
    let channels: Vec<String> = (0..6).map(|i| format!("room{i}")).collect();
    let owners: HashSet<u16> = channels
        .iter()
        .map(|c| {
            let s = slot::slot(format!("herald:{{{c}}}:m").as_bytes());
            tokio::task::block_in_place(|| redis.owner_of(s)).unwrap()
        })
        .collect();
    assert!(owners.len() >= 2, "the channels span masters: {owners:?}");

    let mut sub = json_client(b.addr).await;
    let mut epochs = Vec::new();
    for (i, c) in channels.iter().enumerate() {
        let r = subscribe(&mut sub, 100 + i as u32, json!({"channel": c})).await;
        epochs.push(r["subscribe"]["epoch"].as_str().unwrap().to_string());
    }
    let mut publisher = json_client(a.addr).await;
    let mut id = 1000;
    for n in 1..=10u64 {
        for (i, c) in channels.iter().enumerate() {
            id += 1;
            let r = publish(&mut publisher, id, c, json!({"n": n})).await;
            assert_eq!(r["publish"]["offset"], n, "{r}");
            assert_eq!(r["publish"]["epoch"], epochs[i].as_str(), "{r}");
        }
    }
    // Each channel's publications arrive in offset order, none missing.
    let mut next: Vec<u64> = vec![1; channels.len()];
    while next.iter().any(|n| *n <= 10) {
        let m = recv_json(&mut sub).await;
        let Some(ch) = m["pub"]["channel"].as_str() else {
            continue;
        };
        let i = channels.iter().position(|c| c == ch).unwrap();
        assert_eq!(m["pub"]["offset"], next[i], "{m}");
        assert_eq!(m["pub"]["data"]["n"], next[i], "{m}");
        next[i] += 1;
    }
    // A client that saw up to 5 recovers 6..10 on the other node.
    for (i, c) in channels.iter().enumerate() {
        let mut ws = json_client(a.addr).await;
        let r = subscribe(
            &mut ws,
            7,
            json!({"channel": c, "recover": {"epoch": epochs[i], "offset": 5}}),
        )
        .await;
        assert_eq!(r["subscribe"]["recovered"], true, "{r}");
        let got: Vec<u64> = r["subscribe"]["publications"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["offset"].as_u64().unwrap())
            .collect();
        assert_eq!(got, vec![6, 7, 8, 9, 10], "{c}: {r}");
    }
}
