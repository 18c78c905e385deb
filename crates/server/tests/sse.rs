//! Server-Sent Events: events carry the published data, ids carry positions,
//! several channels per stream, delivery from every transport, bad requests.
mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;
use std::net::SocketAddr;

async fn open(addr: SocketAddr, query: &str, h2: bool) -> (u16, Option<Events>, String) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    let req = http::Request::builder()
        .uri(format!("http://{addr}/sse?{query}"))
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = if h2 {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .expect("h2");
        tokio::spawn(conn);
        send.send_request(req).await.expect("send")
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.expect("h1");
        tokio::spawn(conn);
        send.send_request(req).await.expect("send")
    };
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    if status == 200 {
        (
            status,
            Some(Events {
                body: resp.into_body(),
                buf: String::new(),
            }),
            ctype,
        )
    } else {
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        (status, None, String::from_utf8_lossy(&body).into_owned())
    }
}

/// Waits until `n` clients are registered (the stream has subscribed).
async fn publish_when_ready(ws: &mut Ws, channel: &str, data: serde_json::Value) {
    send_json(
        ws,
        json!({"id": 50, "publish": {"channel": channel, "data": data}}),
    )
    .await;
    loop {
        let m = recv_json(ws).await;
        if m["id"] == 50 {
            return;
        }
    }
}

#[tokio::test]
async fn single_channel_stream_over_http1() {
    let srv = start_default().await;
    let (status, events, ctype) = open(srv.addr, "channel=ticks", false).await;
    assert_eq!(status, 200);
    assert_eq!(ctype, "text/event-stream");
    let mut events = events.expect("stream");
    let mut ws = json_client(srv.addr).await;
    for i in 0..3 {
        publish_when_ready(&mut ws, "ticks", json!({"n": i, "text": "line\nbreak"})).await;
    }
    for i in 0..3 {
        let e = events.next().await;
        let id = e.iter().find_map(|l| l.strip_prefix("id: ")).expect("id");
        assert!(id.ends_with(&format!(":{}", i + 1)), "{e:?}");
        assert!(
            !e.iter().any(|l| l.starts_with("event:")),
            "single channel: default event type"
        );
        let data: String = e
            .iter()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&data).expect("json"),
            json!({"n": i, "text": "line\nbreak"})
        );
    }
}

#[tokio::test]
async fn multi_channel_stream_over_h2c() {
    let srv = start_default().await;
    let (status, events, _) = open(srv.addr, "channel=a&channel=b%2Ec", true).await;
    assert_eq!(status, 200);
    let mut events = events.expect("stream");
    let mut ws = json_client(srv.addr).await;
    publish_when_ready(&mut ws, "b.c", json!(1)).await;
    publish_when_ready(&mut ws, "a", json!(2)).await;
    let first = events.next().await;
    assert!(first.contains(&"event: b.c".to_string()), "{first:?}");
    assert!(first.contains(&"data: 1".to_string()));
    let id = first
        .iter()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("id")
        .to_string();
    let parts: Vec<&str> = id.split(',').collect();
    assert_eq!(parts.len(), 2);
    assert!(parts[0].ends_with(":0") && parts[1].ends_with(":1"), "{id}");
    let second = events.next().await;
    assert!(second.contains(&"event: a".to_string()), "{second:?}");
    let id = second
        .iter()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("id");
    assert!(id.contains(":1,") && id.ends_with(":1"), "{id}");
}

#[tokio::test]
async fn bad_stream_requests_are_refused() {
    let srv = start_default().await;
    for (query, code) in [
        ("", "103"),
        ("channel=bad%20name", "109"),
        ("channel=a.*", "109"),
    ] {
        let (status, events, body) = open(srv.addr, query, false).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(events.is_none());
        assert!(body.contains(code), "{query}: {body}");
    }
    assert_serving(srv.addr).await;
}

#[tokio::test]
async fn silent_stream_gets_heartbeat_comments_and_stays_open() {
    let srv = start(herald_server::ServeArgs {
        ping_interval: Some(1),
        pong_timeout: Some(1),
        ..Default::default()
    })
    .await;
    let (_, events, _) = open(srv.addr, "channel=quiet", false).await;
    let mut events = events.expect("stream");
    // Longer than ping_interval + pong_timeout: a silent WebSocket client would
    // have been closed with 3000 by now; an SSE stream is kept by its heartbeats.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(3500);
    while tokio::time::Instant::now() < deadline {
        if let Ok(Some(Ok(f))) = tokio::time::timeout_at(deadline, events.body.frame()).await {
            if let Ok(d) = f.into_data() {
                events.buf.push_str(&String::from_utf8_lossy(&d));
            }
        }
    }
    assert!(events.buf.contains(": ping"), "{:?}", events.buf);
    assert!(!events.buf.contains("disconnect"), "{:?}", events.buf);
    events.buf.clear();
    let mut ws = json_client(srv.addr).await;
    publish_when_ready(&mut ws, "quiet", json!("still here")).await;
    let e = events.next().await;
    assert!(e.contains(&"data: \"still here\"".to_string()), "{e:?}");
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

/// Many streams share one HTTP/2 connection: a stream the client cancels
/// (RST_STREAM) ends its own session at once — it leaves the channel's
/// presence — while its neighbours on the same connection keep streaming.
#[tokio::test]
async fn a_cancelled_h2_stream_ends_its_session_and_spares_its_neighbours() {
    let srv = start_default().await;
    let io = TokioIo::new(
        tokio::net::TcpStream::connect(srv.addr)
            .await
            .expect("connect"),
    );
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .expect("h2");
    tokio::spawn(conn);
    let mut bodies = Vec::new();
    for _ in 0..3 {
        let req = http::Request::builder()
            .uri(format!("http://{}/sse?channel=room", srv.addr))
            .body(Empty::<Bytes>::new())
            .expect("request");
        let resp = send.send_request(req).await.expect("send");
        assert_eq!(resp.status(), 200);
        bodies.push(resp.into_body());
    }
    let mut ws = json_client(srv.addr).await;
    assert_eq!(presence_clients(&mut ws, "room").await, 3);
    drop(bodies.remove(1));
    let deadline = tokio::time::Instant::now() + WAIT;
    while presence_clients(&mut ws, "room").await != 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cancelled stream's session lives on"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    publish_when_ready(&mut ws, "room", json!("still")).await;
    for body in bodies {
        let mut events = Events {
            body,
            buf: String::new(),
        };
        let e = events.next().await;
        assert!(e.contains(&"data: \"still\"".to_string()), "{e:?}");
    }
}
