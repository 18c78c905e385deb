//! Graceful shutdown: stop accepting, close every client with 1001, return.
mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn shutdown_closes_clients_with_going_away() {
    let srv = start_default().await;
    let mut herald = json_client(srv.addr).await;
    subscribe_json(&mut herald, 2, "news").await;
    let mut shoot = connect(srv.addr, "/shootout", None).await;
    send_json(&mut shoot, json!({"type": "echo", "payload": 1})).await;
    recv_json(&mut shoot).await;

    srv.shutdown.cancel();
    assert_eq!(close_code(&mut herald).await, 1001);
    assert_eq!(close_code(&mut shoot).await, 1001);
    drop(herald);
    drop(shoot);
    tokio::time::timeout(WAIT, srv.handle)
        .await
        .expect("server did not stop")
        .expect("server task");
    assert!(
        tokio::net::TcpStream::connect(srv.addr).await.is_err(),
        "listener must be closed after shutdown"
    );
}

/// HTTP connections are drained like WebSocket ones: the server does not
/// return (the binary does not exit) while SSE streams on an HTTP/2
/// connection still have events to write, every stream ends with its
/// `disconnect` 1001 event after all its publications, and an idle
/// keep-alive connection does not hold the drain. Before the fix `run`
/// returned at once and the process cut most streams off mid-body (h2load
/// saw 197 of 200 streams fail).
#[tokio::test]
async fn shutdown_lets_sse_streams_on_http2_say_goodbye() {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let srv = start(herald_server::ServeArgs {
        shutdown_timeout: Some(60),
        ..herald_server::ServeArgs::default()
    })
    .await;
    let get = |path: &str| {
        http::Request::builder()
            .uri(format!("http://{}{path}", srv.addr))
            .body(Empty::<Bytes>::new())
            .expect("request")
    };
    // h2c, with a stream window far smaller than what will be published:
    // the events back up in the server until the test reads them.
    let io = TokioIo::new(
        tokio::net::TcpStream::connect(srv.addr)
            .await
            .expect("connect"),
    );
    let (mut h2, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(8 * 1024)
        .handshake(io)
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    let mut bodies = Vec::new();
    for _ in 0..10 {
        let resp = h2
            .send_request(get("/sse?channel=news"))
            .await
            .expect("sse");
        assert_eq!(resp.status(), 200);
        bodies.push(resp.into_body());
    }
    // An idle HTTP/1.1 keep-alive connection, one request served.
    let io = TokioIo::new(
        tokio::net::TcpStream::connect(srv.addr)
            .await
            .expect("connect"),
    );
    let (mut idle, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("h1 handshake");
    tokio::spawn(conn);
    let resp = idle.send_request(get("/healthz")).await.expect("healthz");
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.expect("healthz body");

    let data = format!("\"{}\"", "x".repeat(1000));
    let publications = 50;
    for _ in 0..publications {
        let body = format!("{{\"channel\":\"news\",\"data\":{data}}}");
        let (status, _, _) = http(srv.addr, "POST", "/api/publish", &[], &body).await;
        assert_eq!(status, 200);
    }

    srv.shutdown.cancel();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !srv.handle.is_finished(),
        "the server returned while SSE streams still had events to write"
    );
    for (i, mut body) in bodies.into_iter().enumerate() {
        let mut text = String::new();
        while let Some(frame) = tokio::time::timeout(WAIT, body.frame())
            .await
            .expect("stream stalled")
        {
            if let Ok(d) = frame.expect("stream failed").into_data() {
                text.push_str(&String::from_utf8_lossy(&d));
            }
        }
        let events = text.matches(&format!("data: {data}\n")).count();
        assert_eq!(events, publications, "stream {i}: {} bytes", text.len());
        assert!(
            text.ends_with(
                "event: herald\ndata: {\"disconnect\":{\"code\":1001,\"reason\":\"going away\"}}\n\n"
            ),
            "stream {i} ended without its goodbye: {:?}",
            &text[text.len().saturating_sub(200)..]
        );
    }
    tokio::time::timeout(WAIT, srv.handle)
        .await
        .expect("an idle keep-alive connection held the drain")
        .expect("server task");
    drop(idle);
}
