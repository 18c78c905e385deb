//! The HTTP side: routes, upgrade validation, limits and timeouts.
mod common;

use common::*;
use herald_server::ServeArgs;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn http(addr: SocketAddr, request: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("timeout")
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

const UPGRADE: &str =
    "upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

#[tokio::test]
async fn routes_and_upgrade_errors() {
    let srv = start_default().await;
    let r = http(
        srv.addr,
        "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let r = http(
        srv.addr,
        "GET /nope HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    let r = http(
        srv.addr,
        &format!("GET /ws HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{UPGRADE}sec-websocket-version: 8\r\n\r\n"),
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 426"), "{r}");
    assert!(
        r.to_ascii_lowercase().contains("sec-websocket-version: 13"),
        "{r}"
    );
    let r = http(
        srv.addr,
        &format!("POST /ws HTTP/1.1\r\nhost: x\r\nconnection: close\r\n{UPGRADE}sec-websocket-version: 13\r\n\r\n"),
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 405"), "{r}");
    let r = http(
        srv.addr,
        "GET /ws HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(
        r.starts_with("HTTP/1.1 4"),
        "plain GET on /ws is refused: {r}"
    );
    let r = http(srv.addr, "\x00\x01garbage\r\n\r\n").await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn subprotocol_selects_encoding() {
    let srv = start_default().await;
    // No subprotocol offered: JSON, and no protocol header in the answer.
    let mut ws = connect(srv.addr, "/ws", None).await;
    send_json(&mut ws, serde_json::json!({"id": 1, "connect": {}})).await;
    assert_eq!(recv_json(&mut ws).await["id"], 1);
    // Binary when offered (connect() asserts the echoed header).
    let _ = connect(srv.addr, "/ws", Some("herald.binary")).await;
}

#[tokio::test]
async fn connection_cap_answers_503() {
    let srv = start(ServeArgs {
        max_connections: Some(2),
        ..Default::default()
    })
    .await;
    let _a = json_client(srv.addr).await;
    let _b = json_client(srv.addr).await;
    let r = http(
        srv.addr,
        "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
}

#[tokio::test]
async fn silent_connection_times_out_with_408() {
    let srv = start(ServeArgs {
        handshake_timeout: Some(1),
        ..Default::default()
    })
    .await;
    let r = http(srv.addr, "GET /healthz HTTP/1.1\r\n").await;
    assert!(r.starts_with("HTTP/1.1 408"), "{r}");
    assert_serving(srv.addr).await;
}
