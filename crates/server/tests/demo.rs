//! The demo page is served at `/`, and `--demo-rate` streams synthetic rows
//! to `demo.stream` in order.
mod common;

use bytes::Bytes;
use common::*;
use herald_server::ServeArgs;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;

/// GET over a fresh HTTP/1.1 connection: status, content type, body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    let (mut send, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = http::Request::builder()
        .uri(path)
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .expect("request");
    let resp = send.send_request(req).await.expect("send");
    let status = resp.status().as_u16();
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, kind, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn the_page_and_its_assets_are_served() {
    let srv = start_default().await;
    let (status, kind, body) = get(srv.addr, "/").await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/html"), "{kind}");
    assert!(body.contains("demo.js"), "{body}");
    let (status, kind, body) = get(srv.addr, "/demo.js").await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/javascript"), "{kind}");
    assert!(body.contains("demo.stream"));
    let (status, kind, _) = get(srv.addr, "/demo.css").await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/css"), "{kind}");
    let (status, _, _) = get(srv.addr, "/nothing-here").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn demo_rate_streams_ordered_rows() {
    let srv = start(ServeArgs {
        demo_rate: Some(50),
        ..Default::default()
    })
    .await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "demo.stream").await;
    let mut last_seq = 0;
    let mut last_offset = 0;
    for _ in 0..5 {
        let m = recv_json(&mut ws).await;
        let p = &m["pub"];
        assert_eq!(p["channel"], "demo.stream", "{m}");
        let offset = p["offset"].as_u64().expect("offset");
        let seq = p["data"]["seq"].as_u64().expect("seq");
        assert!(last_offset == 0 || offset == last_offset + 1, "{m}");
        assert!(last_seq == 0 || seq == last_seq + 1, "{m}");
        assert!(p["data"]["speed"].as_u64().is_some(), "{m}");
        (last_seq, last_offset) = (seq, offset);
    }
}

#[tokio::test]
async fn no_stream_without_demo_rate() {
    let srv = start_default().await;
    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "demo.stream").await;
    let quiet =
        tokio::time::timeout(std::time::Duration::from_millis(300), recv_json(&mut ws)).await;
    assert!(quiet.is_err(), "nothing is published without --demo-rate");
}

#[test]
fn demo_rate_above_the_limit_is_refused() {
    let e = herald_server::ServerConfig::resolve(ServeArgs {
        demo_rate: Some(10_001),
        ..Default::default()
    });
    assert!(e.is_err());
}
