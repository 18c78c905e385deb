//! The Bayeux `ack` extension (deliveries only with connect replies,
//! numbered batches, unacknowledged ones sent again) and the `timestamp`
//! extension (every message sent carries `timestamp`).
mod common;

use common::*;
use herald_server::bayeux::BayeuxArgs;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

async fn post(addr: SocketAddr, body: Value) -> Vec<Value> {
    let (status, _, text) = http(addr, "POST", "/cometd", &[], &body.to_string()).await;
    assert_eq!(status, 200, "{text}");
    serde_json::from_str(&text).expect("json array")
}

async fn api_publish(addr: SocketAddr, channel: &str, data: Value) {
    let body = json!({"channel": channel, "data": data}).to_string();
    let (status, _, text) = http(addr, "POST", "/api/publish", &[], &body).await;
    assert_eq!(status, 200, "{text}");
}

fn connect(id: &str, ack: u64) -> Value {
    json!([{"channel":"/meta/connect","clientId":id,"connectionType":"long-polling","ext":{"ack":ack}}])
}

fn data_of(r: &[Value]) -> Vec<Value> {
    r.iter()
        .filter(|m| m.get("data").is_some())
        .map(|m| m["data"].clone())
        .collect()
}

fn batch_of(r: &[Value]) -> u64 {
    let c = r.last().expect("a connect reply");
    assert_eq!(c["channel"], "/meta/connect", "{r:?}");
    c["ext"]["ack"].as_u64().expect("ext.ack")
}

#[tokio::test]
async fn unacknowledged_batches_are_sent_again() {
    let args = ServeArgs {
        bayeux: Some(BayeuxArgs {
            timeout_ms: Some(500),
            ..BayeuxArgs::default()
        }),
        ..ServeArgs::default()
    };
    let srv = start(args).await;
    let r = post(
        srv.addr,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"],"ext":{"ack":true}}]),
    )
    .await;
    assert_eq!(
        r[0]["ext"]["ack"],
        json!({"enabled": true, "batch": 0}),
        "{r:?}"
    );
    let id = r[0]["clientId"].as_str().expect("clientId").to_string();
    let r = post(
        srv.addr,
        json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/acked"}]),
    )
    .await;
    assert_eq!(r[0]["successful"], true, "{r:?}");

    // Published before the connect: with acks they wait for it, and a
    // publish reply does not carry them.
    api_publish(srv.addr, "acked", json!(1)).await;
    api_publish(srv.addr, "acked", json!(2)).await;
    let r = post(
        srv.addr,
        json!([{"channel":"/acked","clientId":id,"data":3,"id":"p"}]),
    )
    .await;
    assert_eq!(r.len(), 1, "only the publish reply: {r:?}");
    let r = post(srv.addr, connect(&id, 0)).await;
    assert_eq!(data_of(&r), [json!(1), json!(2), json!(3)]);
    let first = batch_of(&r);

    // The reply is "lost": the next connect acknowledges the batch before.
    let started = Instant::now();
    let r = post(srv.addr, connect(&id, first - 1)).await;
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "answered at once"
    );
    assert_eq!(data_of(&r), [json!(1), json!(2), json!(3)], "sent again");
    let second = batch_of(&r);
    assert!(second > first);

    // Acknowledged: the next connect is held, and carries only what is new.
    let r = post(srv.addr, connect(&id, second)).await;
    assert!(data_of(&r).is_empty(), "{r:?}");
    let third = batch_of(&r);
    api_publish(srv.addr, "acked", json!(4)).await;
    let r = post(srv.addr, connect(&id, third)).await;
    assert_eq!(data_of(&r), [json!(4)]);
}

#[tokio::test]
async fn every_message_carries_a_timestamp() {
    let args = ServeArgs {
        bayeux: Some(BayeuxArgs {
            timeout_ms: Some(2_000),
            timestamp: Some(true),
            ..BayeuxArgs::default()
        }),
        ..ServeArgs::default()
    };
    let srv = start(args).await;
    let r = post(
        srv.addr,
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["long-polling"],"timestamp":"Thu, 01 Jan 1970 00:00:00 GMT"}]),
    )
    .await;
    let id = r[0]["clientId"].as_str().expect("clientId").to_string();
    post(
        srv.addr,
        json!([{"channel":"/meta/subscribe","clientId":id,"subscription":"/t/*"}]),
    )
    .await;
    api_publish(srv.addr, "t.x", json!({"k": 1})).await;
    let mut all = r;
    all.extend(post(srv.addr, connect(&id, 0)).await);
    assert!(all.len() >= 3, "{all:?}");
    assert!(all.iter().any(|m| m["data"] == json!({"k": 1})), "{all:?}");
    for m in &all {
        let t = m["timestamp"]
            .as_str()
            .unwrap_or_else(|| panic!("no timestamp: {m}"));
        assert!(t.ends_with(" GMT") && t.len() == 29, "{t}");
        assert!(
            !t.starts_with("Thu, 01 Jan 1970"),
            "the server's time, not the client's"
        );
    }
}
