//! Wildcard subscriptions (`news.*`, `scores.>`) between real WebSocket
//! connections: what matches, delivery once per client, unsubscribe, and the
//! errors for bad patterns and for recovery on a pattern.
mod common;

use common::*;
use serde_json::{json, Value};

/// Publishes `channels` in order, then `done` as a sentinel, and checks every
/// reply. Deliveries happen in publish order, so once a subscriber sees the
/// sentinel it has seen everything it was going to get.
async fn publish_all(publisher: &mut Ws, channels: &[&str]) {
    let all = channels.iter().copied().chain(["done"]);
    for (i, channel) in all.clone().enumerate() {
        send_json(
            publisher,
            json!({"id": 100 + i, "publish": {"channel": channel, "data": {"n": i}}}),
        )
        .await;
    }
    for i in 0..all.count() {
        let r = recv_json(publisher).await;
        assert_eq!(r["id"], 100 + i, "{r}");
        assert!(r["publish"].is_object(), "publish failed: {r}");
    }
}

/// The channels of the publications received before the `done` sentinel.
async fn received_until_done(ws: &mut Ws) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let m = recv_json(ws).await;
        let channel = m["pub"]["channel"]
            .as_str()
            .unwrap_or_else(|| panic!("expected a publication, got {m}"))
            .to_string();
        if channel == "done" {
            return got;
        }
        got.push(channel);
    }
}

async fn request(ws: &mut Ws, v: Value) -> Value {
    send_json(ws, v).await;
    recv_json(ws).await
}

#[tokio::test]
async fn patterns_receive_matching_channels_with_concrete_names() {
    let srv = start_default().await;
    let mut sub = json_client(srv.addr).await;
    let mut publisher = json_client(srv.addr).await;
    let r = request(
        &mut sub,
        json!({"id": 2, "subscribe": {"channel": "news.*"}}),
    )
    .await;
    assert_eq!(r, json!({"id": 2, "subscribe": {"epoch": "", "offset": 0}}));
    subscribe_json(&mut sub, 3, "scores.>").await;
    subscribe_json(&mut sub, 4, "done").await;

    publish_all(
        &mut publisher,
        &[
            "news.sport",
            "news.sport.uk",
            "scores.a.b",
            "other",
            "news",
            "scores",
        ],
    )
    .await;
    assert_eq!(
        received_until_done(&mut sub).await,
        ["news.sport", "scores.a.b"]
    );
}

#[tokio::test]
async fn exact_and_pattern_overlap_delivers_once() {
    let srv = start_default().await;
    let mut sub = json_client(srv.addr).await;
    let mut publisher = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "news.sport").await;
    subscribe_json(&mut sub, 3, "news.*").await;
    subscribe_json(&mut sub, 4, "news.>").await;
    subscribe_json(&mut sub, 5, "*.sport").await;
    subscribe_json(&mut sub, 6, "done").await;

    publish_all(&mut publisher, &["news.sport", "news.tennis", "news.sport"]).await;
    assert_eq!(
        received_until_done(&mut sub).await,
        ["news.sport", "news.tennis", "news.sport"]
    );
}

#[tokio::test]
async fn pattern_subscribers_see_offsets_in_order() {
    let srv = start_default().await;
    let mut sub = json_client(srv.addr).await;
    let mut publisher = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "chat.>").await;
    for i in 0..20 {
        send_json(
            &mut publisher,
            json!({"id": 10 + i, "publish": {"channel": "chat.room", "data": i}}),
        )
        .await;
    }
    for i in 0..20 {
        let m = recv_json(&mut sub).await;
        assert_eq!(m["pub"]["channel"], "chat.room", "{m}");
        assert_eq!(m["pub"]["offset"], i + 1, "{m}");
        assert_eq!(m["pub"]["data"], i, "{m}");
    }
}

#[tokio::test]
async fn unsubscribe_of_a_pattern_stops_delivery() {
    let srv = start_default().await;
    let mut sub = json_client(srv.addr).await;
    let mut publisher = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "news.*").await;
    subscribe_json(&mut sub, 3, "done").await;
    publish_all(&mut publisher, &["news.a"]).await;
    assert_eq!(received_until_done(&mut sub).await, ["news.a"]);

    let r = request(
        &mut sub,
        json!({"id": 4, "unsubscribe": {"channel": "news.*"}}),
    )
    .await;
    assert_eq!(r, json!({"id": 4, "unsubscribe": {}}));
    let r = request(
        &mut sub,
        json!({"id": 5, "unsubscribe": {"channel": "news.*"}}),
    )
    .await;
    assert_eq!(r["error"]["code"], 106, "{r}");

    publish_all(&mut publisher, &["news.b"]).await;
    assert!(received_until_done(&mut sub).await.is_empty());
}

#[tokio::test]
async fn invalid_patterns_get_109() {
    let srv = start_default().await;
    let mut c = json_client(srv.addr).await;
    for (i, bad) in ["news.*x", "a.>.b", "a..>", "*..b", "news.*.", ">x"]
        .into_iter()
        .enumerate()
    {
        let r = request(&mut c, json!({"id": 10 + i, "subscribe": {"channel": bad}})).await;
        assert_eq!(r["id"], 10 + i, "{r}");
        assert_eq!(r["error"]["code"], 109, "{bad}: {r}");
    }
    // Without a wildcard, `a..b` is a concrete channel, valid as before: only
    // patterns refuse empty tokens.
    subscribe_json(&mut c, 20, "a..b").await;

    // Patterns are for subscribing only.
    for (i, cmd) in [
        json!({"publish": {"channel": "news.*", "data": 1}}),
        json!({"history": {"channel": "news.>"}}),
        json!({"presence": {"channel": "*"}}),
    ]
    .into_iter()
    .enumerate()
    {
        let mut cmd = cmd;
        cmd["id"] = json!(30 + i);
        let r = request(&mut c, cmd).await;
        assert_eq!(r["error"]["code"], 109, "{r}");
    }
}

#[tokio::test]
async fn recover_on_a_pattern_gets_111() {
    let srv = start_default().await;
    let mut c = json_client(srv.addr).await;
    let r = request(
        &mut c,
        json!({"id": 2, "subscribe": {"channel": "news.*", "recover": {"epoch": "e", "offset": 3}}}),
    )
    .await;
    assert_eq!(r["id"], 2, "{r}");
    assert_eq!(r["error"]["code"], 111, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("wildcard")),
        "{r}"
    );
    // Not left half-subscribed: the same pattern without recover works.
    subscribe_json(&mut c, 3, "news.*").await;
}
