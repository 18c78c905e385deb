//! Bad input gets a clear answer and harms nobody else.
mod common;

use common::*;
use futures_util::SinkExt;
use herald_server::ServeArgs;
use herald_ws::OpCode;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

#[tokio::test]
async fn oversized_message_closes_with_1009() {
    let srv = start(ServeArgs {
        max_message_size: Some(1024),
        ..Default::default()
    })
    .await;
    let mut witness = json_client(srv.addr).await;
    let mut raw = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    raw.send_frame(OpCode::Text, &vec![b' '; 2048]).await;
    assert_eq!(raw.close_code().await, Some(1009));
    send_json(&mut witness, json!({"id": 7, "ping": {}})).await;
    assert_eq!(recv_json(&mut witness).await["id"], 7);
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn invalid_utf8_text_closes_with_1007() {
    let srv = start_default().await;
    let mut raw = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    raw.send_frame(OpCode::Text, &[b'{', 0xff, 0xfe, b'}'])
        .await;
    assert_eq!(raw.close_code().await, Some(1007));
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn broken_framing_closes_with_1002() {
    let srv = start_default().await;
    // An unmasked client frame.
    let mut raw = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    raw.send_raw(&[0x81, 0x02, b'{', b'}']).await;
    assert_eq!(raw.close_code().await, Some(1002));
    // Reserved bits set.
    let mut raw = Raw::connect(srv.addr, "/shootout", None).await;
    raw.send_raw(&[0xC1, 0x80, 1, 2, 3, 4]).await;
    assert_eq!(raw.close_code().await, Some(1002));
    // A continuation with nothing to continue.
    let mut raw = Raw::connect(srv.addr, "/ws", None).await;
    raw.send_frame(OpCode::Continuation, b"x").await;
    assert_eq!(raw.close_code().await, Some(1002));
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn malformed_and_unknown_commands_get_error_replies() {
    let srv = start_default().await;
    let mut c = json_client(srv.addr).await;
    c.send(Message::text("this is not json"))
        .await
        .expect("send");
    let r = recv_json(&mut c).await;
    assert_eq!(r["error"]["code"], 103, "{r}");
    assert!(
        r.get("id").is_none(),
        "id 0 is omitted in canonical JSON: {r}"
    );

    send_json(&mut c, json!({"id": 4, "teleport": {}})).await;
    let r = recv_json(&mut c).await;
    assert_eq!(r["error"]["code"], 102, "{r}");

    send_json(&mut c, json!({"id": 5, "subscribe": {"chanel": "typo"}})).await;
    let r = recv_json(&mut c).await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(5), json!(103)),
        "{r}"
    );

    send_json(
        &mut c,
        json!({"id": 6, "subscribe": {"channel": "no spaces"}}),
    )
    .await;
    assert_eq!(recv_json(&mut c).await["error"]["code"], 109);

    // A binary frame on a JSON connection.
    c.send(Message::binary(vec![5u8, 1])).await.expect("send");
    assert_eq!(recv_json(&mut c).await["error"]["code"], 103);

    // The connection still works after all of that.
    send_json(&mut c, json!({"id": 8, "ping": {}})).await;
    assert_eq!(recv_json(&mut c).await["id"], 8);
}

#[tokio::test]
async fn malformed_binary_commands_get_error_replies() {
    let srv = start_default().await;
    let mut c = connect(srv.addr, "/ws", Some("herald.binary")).await;
    // Truncated connect: type byte only.
    c.send(Message::binary(vec![0x01])).await.expect("send");
    match next_msg(&mut c).await {
        Message::Binary(b) => {
            let m = herald_proto::Encoding::Binary
                .decode_server(&b)
                .expect("decode");
            assert!(
                matches!(m, herald_proto::ServerMsg::Error { code: 103, .. }),
                "{m:?}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    // Unknown type byte.
    c.send(Message::binary(vec![0x7e, 0x01]))
        .await
        .expect("send");
    match next_msg(&mut c).await {
        Message::Binary(b) => {
            let m = herald_proto::Encoding::Binary
                .decode_server(&b)
                .expect("decode");
            assert!(
                matches!(m, herald_proto::ServerMsg::Error { code: 102, .. }),
                "{m:?}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Regression (Autobahn 3.2, 4.1.3, 5.15): a message that arrived before a
/// protocol error, in the same read, is still answered before the close; the
/// driver used to discard the queued answer with the connection.
#[tokio::test]
async fn answers_before_a_protocol_error_still_go_out() {
    let srv = start_default().await;
    let mut raw = Raw::connect(srv.addr, "/ws", Some("herald.json")).await;
    let mut both = bytes::BytesMut::new();
    herald_ws::encode_frame(
        &mut both,
        OpCode::Text,
        br#"{"id":1,"connect":{}}"#,
        Some(herald_ws::random_mask()),
    );
    // Reserved bits set: a protocol error right behind the command.
    both.extend_from_slice(&[0xC1, 0x80, 1, 2, 3, 4]);
    raw.send_raw(&both).await;
    assert_eq!(raw.next_json().await["id"], 1);
    assert_eq!(raw.close_code().await, Some(1002));
    assert_serving(srv.addr).await;
}
