//! Every limit, hit on purpose: the client that hits it gets its code, and a
//! client next to it notices nothing.
mod common;

use common::*;
use herald_server::ServeArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A raw HTTP exchange from source address `from` (any 127.x address works
/// on Linux loopback, so tests can be "different IPs").
async fn raw_http(addr: SocketAddr, from: [u8; 4], request: &str) -> String {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(SocketAddr::from((from, 0))).expect("bind source");
    let mut s = sock.connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut out = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, s.read(&mut out))
        .await
        .expect("timeout")
        .expect("read");
    String::from_utf8_lossy(&out[..n]).into_owned()
}

fn upgrade(origin: Option<&str>) -> String {
    let origin = origin.map_or(String::new(), |o| format!("origin: {o}\r\n"));
    format!(
        "GET /ws HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\
         sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n{origin}\r\n"
    )
}

async fn ask(ws: &mut Ws, body: Value) -> Value {
    send_json(ws, body).await;
    recv_json(ws).await
}

#[tokio::test]
async fn rate_limit_answers_108_and_spares_others() {
    let srv = start(ServeArgs {
        rate_limit: Some(1),
        rate_burst: Some(5),
        ..ServeArgs::default()
    })
    .await;
    // connect took one message out of the bucket.
    let mut flooder = json_client(srv.addr).await;
    let mut calm = json_client(srv.addr).await;
    for id in 2..=31 {
        send_json(&mut flooder, json!({"id": id, "ping": {}})).await;
    }
    let mut ok = 0;
    let mut limited = 0;
    for _ in 2..=31 {
        let m = recv_json(&mut flooder).await;
        if m["ping"].is_object() {
            ok += 1;
        } else {
            assert_eq!(m["error"]["code"], 108, "{m}");
            assert!(m["id"].as_u64().is_some_and(|i| i >= 2), "{m}");
            limited += 1;
        }
    }
    assert!(ok >= 4, "the burst passes: {ok}");
    assert!(limited >= 20, "the flood is cut: {limited} limited");
    // The neighbour's bucket is its own.
    let r = ask(&mut calm, json!({"id": 7, "ping": {}})).await;
    assert_eq!(r["id"], 7, "{r}");
    // The flooder is still connected and gets through once the bucket refills.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let r = ask(&mut flooder, json!({"id": 99, "ping": {}})).await;
    assert_eq!(r["id"], 99, "{r}");
}

#[tokio::test]
async fn subscriptions_per_connection_answer_107() {
    let srv = start(ServeArgs {
        max_subscriptions: Some(2),
        ..ServeArgs::default()
    })
    .await;
    let mut a = json_client(srv.addr).await;
    subscribe_json(&mut a, 2, "one").await;
    subscribe_json(&mut a, 3, "two.*").await;
    let r = ask(&mut a, json!({"id": 4, "subscribe": {"channel": "three"}})).await;
    assert_eq!(r["error"]["code"], 107, "{r}");
    let mut b = json_client(srv.addr).await;
    subscribe_json(&mut b, 2, "three").await;
    // After unsubscribing, there is room again.
    let r = ask(&mut a, json!({"id": 5, "unsubscribe": {"channel": "one"}})).await;
    assert_eq!(r["id"], 5, "{r}");
    subscribe_json(&mut a, 6, "three").await;
}

#[tokio::test]
async fn channel_names_are_checked_for_length_and_characters() {
    let srv = start_default().await;
    let mut a = json_client(srv.addr).await;
    for bad in ["", "a b", "é", "a\"b", &"x".repeat(256)] {
        let r = ask(&mut a, json!({"id": 2, "subscribe": {"channel": bad}})).await;
        assert_eq!(r["error"]["code"], 109, "{bad:?}: {r}");
        let r = ask(
            &mut a,
            json!({"id": 3, "publish": {"channel": bad, "data": 1}}),
        )
        .await;
        assert_eq!(r["error"]["code"], 109, "{bad:?}: {r}");
    }
    subscribe_json(&mut a, 4, &"x".repeat(255)).await;
}

#[tokio::test]
async fn connections_per_ip_answer_503_and_other_addresses_still_connect() {
    let srv = start_with_tcp(ServeArgs {
        max_connections_per_ip: Some(2),
        ..ServeArgs::default()
    })
    .await;
    let mut a = json_client(srv.addr).await;
    let _b = json_client(srv.addr).await;
    let r = raw_http(srv.addr, [127, 0, 0, 1], &upgrade(None)).await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(r.contains("from your address"), "{r}");
    // Raw TCP from the same address: a disconnect push with 3503.
    let mut t = TcpStream::connect(srv.tcp_addr.expect("tcp"))
        .await
        .expect("tcp");
    let mut len = [0u8; 4];
    tokio::time::timeout(WAIT, t.read_exact(&mut len))
        .await
        .expect("timeout")
        .expect("read");
    let mut msg = vec![0u8; u32::from_be_bytes(len) as usize];
    t.read_exact(&mut msg).await.expect("read");
    match herald_proto::Encoding::Binary
        .decode_server(&msg)
        .expect("decode")
    {
        herald_proto::ServerMsg::Push(herald_proto::Push::Disconnect { code, .. }) => {
            assert_eq!(code, 3503)
        }
        other => panic!("{other:?}"),
    }
    // Another address is not affected.
    let r = raw_http(srv.addr, [127, 0, 0, 2], &upgrade(None)).await;
    assert!(r.starts_with("HTTP/1.1 101"), "{r}");
    // Nor are the connections already open.
    let r = ask(&mut a, json!({"id": 5, "ping": {}})).await;
    assert_eq!(r["id"], 5);
    // A place frees up when a connection ends.
    drop(a);
    let mut freed = false;
    for _ in 0..50 {
        let r = raw_http(srv.addr, [127, 0, 0, 1], &upgrade(None)).await;
        if r.starts_with("HTTP/1.1 101") {
            freed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(freed, "the closed connection's place was not released");
}

#[tokio::test]
async fn foreign_origins_get_403_on_every_browser_transport() {
    let srv = start(ServeArgs {
        allowed_origins: Some(vec!["https://good.example".into()]),
        ..ServeArgs::default()
    })
    .await;
    let mut other = json_client(srv.addr).await;
    let r = raw_http(
        srv.addr,
        [127, 0, 0, 1],
        &upgrade(Some("https://evil.example")),
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(r.contains("\"code\":104"), "{r}");
    let r = raw_http(
        srv.addr,
        [127, 0, 0, 1],
        &upgrade(Some("https://good.example")),
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 101"), "{r}");
    let r = raw_http(srv.addr, [127, 0, 0, 1], &upgrade(None)).await;
    assert!(
        r.starts_with("HTTP/1.1 101"),
        "non-browser clients send no Origin: {r}"
    );
    for path in ["/sse?channel=a", "/poll"] {
        let method = if path == "/poll" { "POST" } else { "GET" };
        let (status, _, body) = http(
            srv.addr,
            method,
            path,
            &[("origin", "https://evil.example")],
            "",
        )
        .await;
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("104"), "{body}");
    }
    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/poll",
        &[("origin", "https://good.example")],
        "",
    )
    .await;
    assert_eq!(status, 200);
    let r = ask(&mut other, json!({"id": 3, "ping": {}})).await;
    assert_eq!(r["id"], 3);
}

#[tokio::test]
async fn a_client_that_never_connects_is_closed_with_3003() {
    let srv = start(ServeArgs {
        handshake_timeout: Some(1),
        ..ServeArgs::default()
    })
    .await;
    let mut idle = connect(srv.addr, "/ws", Some("herald.json")).await;
    let mut good = json_client(srv.addr).await;
    assert_eq!(close_code(&mut idle).await, 3003);
    let r = ask(&mut good, json!({"id": 3, "ping": {}})).await;
    assert_eq!(r["id"], 3, "a connected client is not affected: {r}");
}

#[tokio::test]
async fn oversized_messages_close_only_their_connection() {
    let srv = start(ServeArgs {
        max_message_size: Some(1024),
        ..ServeArgs::default()
    })
    .await;
    let mut big = json_client(srv.addr).await;
    let mut sub = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "c").await;
    send_json(
        &mut big,
        json!({"id": 2, "publish": {"channel": "c", "data": "x".repeat(2000)}}),
    )
    .await;
    assert_eq!(close_code(&mut big).await, 1009);
    let (status, _, body) = http(
        srv.addr,
        "POST",
        "/api/publish",
        &[],
        &json!({"channel": "c", "data": "x".repeat(2000)}).to_string(),
    )
    .await;
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("110"), "{body}");
    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/api/publish",
        &[],
        r#"{"channel":"c","data":1}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(recv_json(&mut sub).await["pub"]["data"], 1);
}

#[tokio::test]
async fn shootout_is_not_served_when_anonymous_clients_are_refused() {
    let srv = start(ServeArgs {
        token_hmac_secret: Some("0123456789abcdef0123456789abcdef".into()),
        ..ServeArgs::default()
    })
    .await;
    let req = upgrade(None).replace("GET /ws ", "GET /shootout ");
    let r = raw_http(srv.addr, [127, 0, 0, 1], &req).await;
    assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    assert!(r.contains("\"code\":104"), "{r}");
}
