//! The websocket-shootout protocol on /shootout, both modes, several clients.
mod common;

use bytes::BytesMut;
use common::*;
use futures_util::SinkExt;
use herald_proto::shootout::{self, ShootoutKind};
use serde_json::json;
use tokio::io::AsyncReadExt;
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

/// Fills a member's socket buffers (it reads nothing) with binary broadcasts
/// from `sender` until a broadcast's result does not come: the result must
/// wait for the stalled member's copy. Returns how many broadcasts were sent.
async fn stall_member(sender: &mut Ws) -> usize {
    const PADDING: usize = 60_000;
    for i in 0..2_000 {
        let mut frame = BytesMut::new();
        shootout::write_binary(ShootoutKind::Broadcast, i, PADDING, &mut frame);
        sender
            .send(Message::binary(frame.freeze()))
            .await
            .expect("send");
        // The sender's own copy always comes (its connection reads).
        match next_msg(sender).await {
            Message::Binary(b) => assert_eq!(b[0], b'b', "own copy first"),
            other => panic!("unexpected {other:?}"),
        }
        match tokio::time::timeout(std::time::Duration::from_millis(500), next_msg(sender)).await {
            Ok(Message::Binary(r)) => {
                assert_eq!(r[0], b'r');
                assert_eq!(shootout::parse_binary(&r).expect("parse").send_time_ns, i);
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(_) => return i as usize + 1,
        }
    }
    panic!("broadcastResult never waited for the member that reads nothing");
}

/// The next message is the binary `broadcastResult` of the broadcast sent at
/// `send_time_ns`.
async fn expect_result(sender: &mut Ws, send_time_ns: i64) {
    match next_msg(sender).await {
        Message::Binary(r) => {
            assert_eq!(r[0], b'r');
            let t = shootout::parse_binary(&r).expect("parse").send_time_ns;
            assert_eq!(t, send_time_ns);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn broadcast_result_waits_until_every_copy_is_written() {
    let srv = start_default().await;
    let mut sender = connect(srv.addr, "/shootout", None).await;
    let mut stalled = Raw::connect(srv.addr, "/shootout", None).await;
    let sent = stall_member(&mut sender).await;

    // The stalled member now reads: it gets every broadcast, in order, and
    // only then does the last result reach the sender.
    let mut dec = herald_ws::Decoder::new(herald_ws::Role::Client, 1 << 24);
    let mut got = 0i64;
    loop {
        let mut off = 0;
        while let Some((n, msg)) = dec.decode(&mut stalled.buf[off..]).expect("frame") {
            off += n;
            if let Some(herald_ws::Message::Binary(b)) = msg {
                let m = shootout::parse_binary(b).expect("parse");
                assert_eq!(m.send_time_ns, got, "in order, exactly once");
                got += 1;
            }
        }
        stalled.buf.drain(..off);
        if got as usize == sent {
            break;
        }
        let mut chunk = vec![0u8; 1 << 16];
        let n = tokio::time::timeout(WAIT, stalled.stream.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("stalled member has {got} of {sent} broadcasts"))
            .expect("read");
        assert!(n > 0, "stalled member was closed");
        stalled.buf.extend_from_slice(&chunk[..n]);
    }
    expect_result(&mut sender, sent as i64 - 1).await;
}

#[tokio::test]
async fn broadcast_result_comes_when_a_stalled_member_goes_away() {
    let srv = start_default().await;
    let mut sender = connect(srv.addr, "/shootout", None).await;
    let stalled = Raw::connect(srv.addr, "/shootout", None).await;
    let sent = stall_member(&mut sender).await;
    // Its copy is dropped with its connection: the sender is answered.
    drop(stalled);
    expect_result(&mut sender, sent as i64 - 1).await;
    // And the group still answers broadcasts.
    let mut frame = BytesMut::new();
    shootout::write_binary(ShootoutKind::Broadcast, 7_000, 10, &mut frame);
    sender
        .send(Message::binary(frame.freeze()))
        .await
        .expect("send");
    assert!(matches!(next_msg(&mut sender).await, Message::Binary(b) if b[0] == b'b'));
    assert!(matches!(next_msg(&mut sender).await, Message::Binary(b) if b[0] == b'r'));
}
