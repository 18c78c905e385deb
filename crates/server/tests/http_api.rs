//! The HTTP publish API over HTTP/1.1 and h2c, reaching WebSocket subscribers.
mod common;

use bytes::Bytes;
use common::*;
use herald_server::ServeArgs;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use std::net::SocketAddr;

/// One request over a fresh HTTP/1.1 connection.
async fn h1(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, Value) {
    let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    let (mut send, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .expect("request");
    let resp = send.send_request(req).await.expect("send");
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn publish_over_http1_reaches_websocket_subscribers() {
    let srv = start_default().await;
    let mut sub = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "alerts").await;
    let (status, body) = h1(
        srv.addr,
        "POST",
        "/api/publish",
        r#"{"channel":"alerts","data":{"level":"high"}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["offset"], 1);
    let m = recv_json(&mut sub).await;
    assert_eq!(m["pub"]["data"], json!({"level": "high"}));

    let (status, _) = h1(
        srv.addr,
        "POST",
        "/api/publish",
        r#"{"channel":"alerts","b64":"AAEC"}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(recv_json(&mut sub).await["pub"]["b64"], "AAEC");
}

#[tokio::test]
async fn publish_over_h2c_prior_knowledge() {
    let srv = start_default().await;
    let mut sub = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "h2").await;
    let io = TokioIo::new(
        tokio::net::TcpStream::connect(srv.addr)
            .await
            .expect("connect"),
    );
    let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    for i in 0..3 {
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("http://{}/api/publish", srv.addr))
            .body(Full::new(Bytes::from(format!(
                r#"{{"channel":"h2","data":{i}}}"#
            ))))
            .expect("request");
        let resp = send.send_request(req).await.expect("send");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), http::Version::HTTP_2);
    }
    for i in 0..3 {
        assert_eq!(recv_json(&mut sub).await["pub"]["data"], i);
    }
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let srv = start(ServeArgs {
        max_message_size: Some(100),
        ..Default::default()
    })
    .await;
    let cases = [
        ("POST", "/api/publish", "not json".to_string(), 400, 103),
        (
            "POST",
            "/api/publish",
            r#"{"data":1}"#.to_string(),
            400,
            103,
        ),
        (
            "POST",
            "/api/publish",
            r#"{"channel":"a b","data":1}"#.to_string(),
            400,
            109,
        ),
        (
            "POST",
            "/api/publish",
            r#"{"channel":"a","data":1,"b64":"AA=="}"#.to_string(),
            400,
            103,
        ),
        (
            "POST",
            "/api/publish",
            format!(r#"{{"channel":"a","data":"{}"}}"#, "x".repeat(500)),
            413,
            110,
        ),
        (
            "POST",
            "/api/publish",
            format!(r#"{{"channel":"a","data":"{}"}}"#, "x".repeat(5000)),
            413,
            110,
        ),
        ("GET", "/api/publish", String::new(), 405, 103),
    ];
    for (method, path, body, status, code) in cases {
        let (got, answer) = h1(srv.addr, method, path, &body).await;
        assert_eq!(got, status, "{method} {path} {body:.40}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
    }
    let (got, _) = h1(srv.addr, "GET", "/nowhere", "").await;
    assert_eq!(got, 404);
    assert_serving(srv.addr).await;
}
