//! An event stream that opens an HTTP/1.1 connection is served off hyper, by
//! Herald's own driver (`crates/server/src/transport/sse/conn.rs`): read here byte for byte
//! from a raw socket — the head, the chunked events, the end on shutdown, a
//! client that goes away, and an error answer after which the connection
//! goes on serving requests.
mod common;

use common::*;
use serde_json::json;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads from `s` into `buf` until `pred` holds for what was read.
async fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, pred: impl Fn(&str) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !pred(&String::from_utf8_lossy(buf)) {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout_at(deadline, s.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("timed out; got {:?}", String::from_utf8_lossy(buf)))
            .expect("read");
        assert!(n > 0, "EOF; got {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    }
}

async fn open_raw(addr: SocketAddr, request: &str) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(request.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    read_until(&mut s, &mut buf, |t| t.contains("\r\n\r\n")).await;
    (s, buf)
}

/// The number of connections subscribed to `channel` (`presence_stats`).
async fn presence_clients(ws: &mut Ws, channel: &str) -> u64 {
    send_json(ws, json!({"id": 9, "presence_stats": {"channel": channel}})).await;
    loop {
        let m = recv_json(ws).await;
        if m["id"] == 9 {
            return m["presence_stats"]["clients"].as_u64().expect("clients");
        }
    }
}

async fn wait_presence(ws: &mut Ws, channel: &str, n: u64) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while presence_clients(ws, channel).await != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{channel}: never {n} subscribers"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_stream_is_chunked_events_that_end_with_the_server() {
    let srv = start_default().await;
    let (mut s, mut buf) = open_raw(
        srv.addr,
        "GET /sse?channel=h1 HTTP/1.1\r\nhost: localhost\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let head = &text[..text.find("\r\n\r\n").expect("head")];
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    for line in [
        "content-type: text/event-stream",
        "cache-control: no-cache",
        "transfer-encoding: chunked",
        // Only Herald's own path says so: hyper kept the connection.
        "connection: close",
        "date: ",
    ] {
        assert!(head.contains(line), "{line:?} missing from {head}");
    }
    // The first chunk: retry, the comment and the starting id.
    read_until(&mut s, &mut buf, |t| t.contains("id: ")).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let body = &text[text.find("\r\n\r\n").expect("head") + 4..];
    let size_line = body.split("\r\n").next().expect("chunk size");
    let size = usize::from_str_radix(size_line, 16).expect("hex chunk size");
    assert!(body[size_line.len() + 2..].starts_with("retry: 2000\n: herald\n\n"));
    assert!(size > 0);

    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/api/publish",
        &[("content-type", "application/json")],
        r#"{"channel":"h1","data":{"n":1}}"#,
    )
    .await;
    assert_eq!(status, 200);
    read_until(&mut s, &mut buf, |t| t.contains("data: {\"n\":1}\n\n\r\n")).await;

    // Shutdown: the stream says why, then the last chunk, then EOF.
    srv.shutdown.cancel();
    read_until(&mut s, &mut buf, |t| t.ends_with("\r\n0\r\n\r\n")).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(
        text.contains("event: herald\ndata: {\"disconnect\":{\"code\":1001"),
        "{text}"
    );
    let mut rest = [0u8; 16];
    let n = tokio::time::timeout(WAIT, s.read(&mut rest))
        .await
        .expect("EOF in time")
        .expect("read");
    assert_eq!(n, 0, "after the last chunk the stream closes");
}

#[tokio::test]
async fn a_stream_whose_client_goes_away_ends_its_session() {
    let srv = start_default().await;
    let mut ws = json_client(srv.addr).await;
    let (a, _) = open_raw(
        srv.addr,
        "GET /sse?channel=gone HTTP/1.1\r\nhost: localhost\r\n\r\n",
    )
    .await;
    let (_b, _) = open_raw(
        srv.addr,
        "GET /sse?channel=gone HTTP/1.1\r\nhost: localhost\r\n\r\n",
    )
    .await;
    wait_presence(&mut ws, "gone", 2).await;
    drop(a);
    wait_presence(&mut ws, "gone", 1).await;
}

#[tokio::test]
async fn an_error_answer_keeps_the_connection_serving() {
    let srv = start_default().await;
    // No channel: 400; the next request on the same connection is served.
    let (mut s, mut buf) = open_raw(
        srv.addr,
        "GET /sse HTTP/1.1\r\nhost: localhost\r\n\r\nGET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n",
    )
    .await;
    read_until(&mut s, &mut buf, |t| t.ends_with("ok\n")).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("\"code\":"), "{text}");
    let second = &text[text.find("HTTP/1.1 200").expect("second answer")..];
    assert!(second.contains("\r\n\r\nok\n"), "{second}");
}

#[tokio::test]
async fn a_stream_with_a_bearer_token_is_authenticated() {
    let args = herald_server::ServeArgs {
        token_hmac_secret: Some("0123456789abcdef0123456789abcdef".into()),
        allow_anonymous: Some(false),
        ..Default::default()
    };
    let srv = start(args).await;
    let (_, buf) = open_raw(
        srv.addr,
        "GET /sse?channel=x HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer nope\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    assert!(text.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{text}");
}
