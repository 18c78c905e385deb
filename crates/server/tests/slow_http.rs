//! A slow or oversized HTTP client is cut off at a documented deadline, and
//! nobody else notices. Regression tests for what `tests/outside/http_abuse`
//! found on the hyper path (hyper enforces no timeout without a timer): a
//! trickled request body, a slow second head on a kept-alive connection, an
//! idle keep-alive connection and a silent h2c peer were each held forever.
//! An event stream request carrying a body is refused instead of streamed
//! with the body left unread. (The first head's deadline, 408, is in
//! `handshake.rs`.)
mod common;

use common::*;
use herald_server::ServeArgs;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every deadline in these tests is 1 s; the server's sweeps and our own
/// polling add at most a little.
fn quick() -> ServeArgs {
    ServeArgs {
        handshake_timeout: Some(1),
        request_body_timeout: Some(1),
        ping_interval: Some(1),
        pong_timeout: Some(1),
        ..Default::default()
    }
}

/// Sends `first`, then `drip` once every 200 ms while the connection is open;
/// returns what the server sent and how long it kept the connection (at most
/// `WAIT`).
async fn trickle(addr: SocketAddr, first: &[u8], drip: &[u8]) -> (String, Duration) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(first).await.expect("write");
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < WAIT {
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => {
                if !drip.is_empty() && s.write_all(drip).await.is_err() {
                    break;
                }
            }
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), start.elapsed())
}

/// Closed after the 1 s deadline, well before the test's own bound.
fn promptly(held: Duration) {
    assert!(
        held < Duration::from_secs(4),
        "connection held {held:?} past a 1 s deadline"
    );
}

#[tokio::test]
async fn a_trickled_publish_body_gets_408_and_is_closed() {
    let srv = start(quick()).await;
    let head = b"POST /api/publish HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{";
    let (answer, held) = trickle(srv.addr, head, b" ").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    promptly(held);
    let (status, _, body) = http(
        srv.addr,
        "POST",
        "/api/publish",
        &[("content-type", "application/json")],
        r#"{"channel": "still", "data": 1}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn a_body_shorter_than_its_content_length_gets_408_on_poll_and_tables() {
    let srv = start(quick()).await;
    for path in ["/poll/0123", "/api/tables"] {
        let head = format!("POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 50\r\n\r\n[]");
        let (answer, held) = trickle(srv.addr, head.as_bytes(), b"").await;
        // An unknown poll session is answered before its body is read.
        assert!(
            answer.starts_with("HTTP/1.1 408") || answer.starts_with("HTTP/1.1 404"),
            "{path}: {answer}"
        );
        promptly(held);
    }
    let (status, _, body) = http(srv.addr, "POST", "/poll", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let session: serde_json::Value = serde_json::from_str(&body).expect("json");
    let id = session["session"].as_str().expect("session id");
    let head = format!("POST /poll/{id} HTTP/1.1\r\nhost: x\r\ncontent-length: 50\r\n\r\n[");
    let (answer, held) = trickle(srv.addr, head.as_bytes(), b"").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    promptly(held);
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn a_slow_second_head_on_a_kept_alive_connection_is_closed() {
    let srv = start(quick()).await;
    let first = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\nGET /healthz HTTP/1.1\r\n";
    let (answer, held) = trickle(srv.addr, first, b"x-slow: 1\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "{answer}");
    promptly(held);
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let srv = start(quick()).await;
    let (answer, held) = trickle(srv.addr, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n", b"").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    promptly(held);
}

#[tokio::test]
async fn an_h2c_peer_that_goes_silent_after_the_preface_is_closed() {
    let srv = start(quick()).await;
    let (_, held) = trickle(srv.addr, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", b"").await;
    // ping_interval + pong_timeout = 2 s.
    assert!(held < Duration::from_secs(5), "held {held:?}");
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn an_oversized_first_head_gets_431() {
    let srv = start_default().await;
    let many: String = (0..100).map(|i| format!("x-h{i}: v\r\n")).collect();
    let long = format!("x-long: {}\r\n", "a".repeat(16 * 1024));
    for extra in [many, long] {
        let req = format!("GET /sse?channel=a HTTP/1.1\r\nhost: x\r\n{extra}\r\n");
        let (answer, held) = trickle(srv.addr, req.as_bytes(), b"").await;
        assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
        promptly(held);
    }
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn an_event_stream_request_with_a_body_gets_400() {
    let srv = start(quick()).await;
    for framing in ["content-length: 100", "transfer-encoding: chunked"] {
        let req = format!("GET /sse?channel=a HTTP/1.1\r\nhost: x\r\n{framing}\r\n\r\n1");
        let (answer, held) = trickle(srv.addr, req.as_bytes(), b"2").await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{framing}: {answer}");
        promptly(held);
    }
    let (status, _, _) = http(srv.addr, "GET", "/sse?channel=a", &[], "").await;
    assert_eq!(status, 200, "a stream without a body still opens");
}
