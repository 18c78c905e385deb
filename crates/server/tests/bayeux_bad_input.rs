//! The Bayeux endpoint (`/cometd`) refuses bad input with clear Bayeux
//! errors and nothing else disturbed: bodies that are not batches, batches
//! too large, elements that are not messages, unknown meta channels, unknown
//! `clientId`s (402 with `reconnect: handshake`), bad channels, publications
//! without data, handshakes without a common transport; bad WebSocket frames
//! leave the socket open.
mod common;

use common::*;
use futures_util::SinkExt;
use herald_server::bayeux::BayeuxArgs;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio_tungstenite::tungstenite::Message;

async fn post(addr: SocketAddr, body: &str) -> (u16, Value) {
    let (status, _, text) = http(addr, "POST", "/cometd", &[], body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn handshake(addr: SocketAddr) -> String {
    let (status, r) = post(
        addr,
        r#"[{"channel":"/meta/handshake","version":"1.0","supportedConnectionTypes":["long-polling"],"id":"1"}]"#,
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r[0]["successful"], true, "{r}");
    r[0]["clientId"].as_str().expect("clientId").to_string()
}

fn error_of(r: &Value) -> &str {
    r["error"].as_str().unwrap_or("")
}

#[tokio::test]
async fn bodies_that_are_not_batches_get_400_with_one_unsuccessful_reply() {
    let args = ServeArgs {
        bayeux: Some(BayeuxArgs {
            max_batch: Some(3),
            ..BayeuxArgs::default()
        }),
        ..ServeArgs::default()
    };
    let srv = start(args).await;
    for (body, expect) in [
        ("[{", "400::malformed JSON"),
        ("not json", "400::malformed JSON"),
        ("", "400::malformed JSON"),
        (
            r#"{"channel":"/meta/handshake"}"#,
            "400::a batch is a JSON array",
        ),
        ("42", "400::a batch is a JSON array"),
        ("[]", "400::empty batch"),
        (
            r#"[{"channel":"/a"},{"channel":"/a"},{"channel":"/a"},{"channel":"/a"}]"#,
            "400::batch of 4 messages, more than the 3 allowed",
        ),
    ] {
        let (status, r) = post(srv.addr, body).await;
        assert_eq!(status, 400, "{body}: {r}");
        assert_eq!(r[0]["channel"], "/meta/unsuccessful", "{body}: {r}");
        assert_eq!(r[0]["successful"], false, "{body}: {r}");
        assert!(error_of(&r[0]).starts_with(expect), "{body}: {r}");
    }
    // Over the byte limit (16 × 64 KiB by default): 413, read no further.
    let huge = format!(r#"[{{"channel":"/a","data":"{}"}}]"#, "x".repeat(2 << 20));
    let (status, r) = post(srv.addr, &huge).await;
    assert_eq!(status, 413, "{r}");
    assert!(error_of(&r[0]).starts_with("413::"), "{r}");
    // Only POST.
    let (status, _, _) = http(srv.addr, "GET", "/cometd", &[], "").await;
    assert_eq!(status, 405);
    assert_serving(srv.addr).await;
    handshake(srv.addr).await;
}

#[tokio::test]
async fn bad_messages_get_their_own_replies_and_the_rest_is_served() {
    let srv = start_default().await;
    let id = handshake(srv.addr).await;
    let batch = json!([
        1,
        {"id": "2"},
        {"channel": 5, "id": "3"},
        {"channel": "/meta/frob", "clientId": id, "id": "4"},
        {"channel": "/meta/connect", "clientId": "0123", "id": "5", "connectionType": "long-polling"},
        {"channel": "/a b", "clientId": id, "id": "6", "data": 1},
        {"channel": "/a/*", "clientId": id, "id": "7", "data": 1},
        {"channel": "/a", "clientId": id, "id": "8"},
        {"channel": "/meta/subscribe", "clientId": id, "id": "9", "subscription": "/a/**/b"},
        {"channel": "/meta/subscribe", "clientId": id, "id": "10"},
        {"channel": "/meta/connect", "clientId": id, "id": "11", "connectionType": "websocket"},
        {"channel": "/ok", "clientId": id, "id": "12", "data": {"fine": true}},
    ]);
    let (status, r) = post(srv.addr, &batch.to_string()).await;
    assert_eq!(status, 200, "{r}");
    let by_id = |i: &str| -> Value {
        r.as_array()
            .expect("array")
            .iter()
            .find(|m| m["id"] == i)
            .cloned()
            .unwrap_or_else(|| panic!("no reply to {i}: {r}"))
    };
    let unsuccessful: Vec<&Value> = r
        .as_array()
        .expect("array")
        .iter()
        .filter(|m| m["successful"] == false)
        .collect();
    assert_eq!(unsuccessful.len(), 11, "{r}");
    assert_eq!(unsuccessful[0]["error"], "400::a message is a JSON object");
    assert!(error_of(&by_id("2")).starts_with("400::missing field `channel`"));
    assert!(error_of(&by_id("3")).starts_with("400::"));
    assert_eq!(by_id("4")["error"], "400:/meta/frob:unknown meta channel");
    assert_eq!(by_id("5")["error"], "402::Unknown client");
    assert_eq!(by_id("5")["advice"]["reconnect"], "handshake");
    assert!(error_of(&by_id("6")).starts_with("400:/a b:invalid channel"));
    assert!(error_of(&by_id("7")).contains("wildcard"));
    assert_eq!(by_id("8")["error"], "400:data:a publication needs data");
    assert!(error_of(&by_id("9")).contains("wildcard"));
    assert_eq!(
        by_id("10")["error"],
        "400:subscription:missing subscription"
    );
    assert!(error_of(&by_id("11")).starts_with("400:websocket:"));
    assert_eq!(by_id("12")["successful"], true, "{r}");
    // A handshake offering nothing Herald speaks.
    let (_, r) = post(
        srv.addr,
        r#"[{"channel":"/meta/handshake","supportedConnectionTypes":["callback-polling"]}]"#,
    )
    .await;
    assert_eq!(r[0]["successful"], false);
    assert_eq!(r[0]["advice"]["reconnect"], "none");
    // The session still works.
    let (_, r) = post(
        srv.addr,
        &json!([{"channel":"/meta/connect","clientId":id,"connectionType":"long-polling","advice":{"timeout":0}}]).to_string(),
    )
    .await;
    assert_eq!(r[0]["successful"], true, "{r}");
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn bad_websocket_frames_are_answered_and_the_socket_stays() {
    let srv = start_default().await;
    let mut ws = connect(srv.addr, "/cometd", None).await;
    for bad in ["[{", r#"{"channel":"/meta/handshake"}"#, "[]"] {
        ws.send(Message::Text(bad.into())).await.expect("send");
        let r = recv_json(&mut ws).await;
        assert_eq!(r[0]["successful"], false, "{bad}: {r}");
        assert!(error_of(&r[0]).starts_with("400::"), "{bad}: {r}");
    }
    ws.send(Message::Binary(vec![1, 2, 3].into()))
        .await
        .expect("send");
    let r = recv_json(&mut ws).await;
    assert_eq!(r[0]["error"], "400::a batch is a text frame");
    // Still a working Bayeux socket.
    ws.send(Message::Text(
        json!([{"channel":"/meta/handshake","supportedConnectionTypes":["websocket"],"id":"1"}])
            .to_string()
            .into(),
    ))
    .await
    .expect("send");
    let r = recv_json(&mut ws).await;
    assert_eq!(r[0]["successful"], true, "{r}");
}
