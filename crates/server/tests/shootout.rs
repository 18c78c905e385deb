//! The websocket-shootout protocol on /shootout, both modes, several clients.
mod common;

use bytes::BytesMut;
use common::*;
use futures_util::SinkExt;
use herald_proto::shootout::{self, ShootoutKind};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn json_echo_and_broadcast() {
    let srv = start_default().await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(connect(srv.addr, "/shootout", None).await);
    }
    let payload = json!({"sendTime": "2024-01-01T00:00:00.000000001Z", "padding": "x".repeat(200)});
    send_json(&mut clients[0], json!({"type": "echo", "payload": payload})).await;
    let echo = recv_json(&mut clients[0]).await;
    assert_eq!(echo, json!({"type": "echo", "payload": payload}));

    send_json(
        &mut clients[1],
        json!({"type": "broadcast", "payload": payload}),
    )
    .await;
    for (i, c) in clients.iter_mut().enumerate() {
        let m = recv_json(c).await;
        assert_eq!(
            m,
            json!({"type": "broadcast", "payload": payload}),
            "client {i}"
        );
    }
    let result = recv_json(&mut clients[1]).await;
    assert_eq!(result["type"], "broadcastResult");
    assert_eq!(result["payload"], payload);
    assert_eq!(result["listenerCount"], 4);
}

#[tokio::test]
async fn binary_echo_and_broadcast() {
    let srv = start_default().await;
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(connect(srv.addr, "/shootout", None).await);
    }
    let mut frame = BytesMut::new();
    shootout::write_binary(ShootoutKind::Echo, 123_456_789, 200, &mut frame);
    let echo = frame.clone().freeze();
    clients[2]
        .send(Message::binary(echo.clone()))
        .await
        .expect("send");
    assert_eq!(next_msg(&mut clients[2]).await, Message::binary(echo));

    let mut frame = BytesMut::new();
    shootout::write_binary(ShootoutKind::Broadcast, 42, 200, &mut frame);
    let b = frame.freeze();
    clients[0]
        .send(Message::binary(b.clone()))
        .await
        .expect("send");
    for c in clients.iter_mut() {
        assert_eq!(next_msg(c).await, Message::binary(b.clone()));
    }
    match next_msg(&mut clients[0]).await {
        Message::Binary(r) => {
            assert_eq!(r[0], b'r');
            assert_eq!(&r[1..], &b[1..]);
            let parsed = shootout::parse_binary(&r).expect("parse");
            assert_eq!(parsed.send_time_ns, 42);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn malformed_shootout_message_gets_error_and_others_continue() {
    let srv = start_default().await;
    let mut bad = connect(srv.addr, "/shootout", None).await;
    let mut good = connect(srv.addr, "/shootout", None).await;
    bad.send(Message::text("{\"type\":\"dance\"}"))
        .await
        .expect("send");
    let e = recv_json(&mut bad).await;
    assert_eq!(e["type"], "error", "{e}");
    send_json(&mut good, json!({"type": "echo", "payload": {"a": 1}})).await;
    assert_eq!(recv_json(&mut good).await["payload"]["a"], 1);
    // The erring connection stays usable.
    send_json(&mut bad, json!({"type": "echo", "payload": 2})).await;
    assert_eq!(recv_json(&mut bad).await["payload"], 2);
}
