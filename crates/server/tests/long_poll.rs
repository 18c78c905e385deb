//! HTTP long-polling: sessions, commands, batching, nothing lost between polls.
mod common;

use bytes::Bytes;
use common::*;
use futures_util::SinkExt;
use herald_server::ServeArgs;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use std::net::SocketAddr;
use tokio_tungstenite::tungstenite::Message;

/// A client that reuses one HTTP connection (HTTP/1.1 keep-alive or h2c).
struct Http {
    send: Sender,
    base: String,
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Http {
    async fn h1(addr: SocketAddr) -> Http {
        let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        let (send, conn) = hyper::client::conn::http1::handshake(io).await.expect("h1");
        tokio::spawn(conn);
        Http {
            send: Sender::H1(send),
            base: format!("http://{addr}"),
        }
    }

    async fn h2(addr: SocketAddr) -> Http {
        let io = TokioIo::new(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .expect("h2");
        tokio::spawn(conn);
        Http {
            send: Sender::H2(send),
            base: format!("http://{addr}"),
        }
    }

    async fn req(&mut self, method: &str, path: &str, body: &str) -> (u16, Value) {
        let req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("host", "localhost")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("request");
        let resp = match &mut self.send {
            Sender::H1(s) => s.send_request(req).await,
            Sender::H2(s) => s.send_request(req).await,
        }
        .expect("send");
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn open(&mut self) -> String {
        let (status, body) = self.req("POST", "/poll", "").await;
        assert_eq!(status, 200, "{body}");
        body["session"].as_str().expect("session id").to_string()
    }
}

#[tokio::test]
async fn messages_between_polls_are_kept_and_batched() {
    let srv = start_default().await;
    let mut http = Http::h1(srv.addr).await;
    let sid = http.open().await;
    let (status, _) = http
        .req(
            "POST",
            &format!("/poll/{sid}"),
            r#"[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"feed"}}]"#,
        )
        .await;
    assert_eq!(status, 202);
    let (_, replies) = http.req("GET", &format!("/poll/{sid}"), "").await;
    let ids: Vec<i64> = replies
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|m| m["id"].as_i64())
        .collect();
    assert_eq!(ids, vec![1, 2], "{replies}");

    // Published while no poll is outstanding: all kept, in order, in one answer.
    let mut ws = json_client(srv.addr).await;
    for i in 0..5 {
        send_json(&mut ws, json!({"publish": {"channel": "feed", "data": i}})).await;
    }
    send_json(&mut ws, json!({"id": 9, "ping": {}})).await;
    assert_eq!(recv_json(&mut ws).await["id"], 9);
    let (_, batch) = http.req("GET", &format!("/poll/{sid}"), "").await;
    let data: Vec<i64> = batch
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|m| m["pub"]["data"].as_i64())
        .collect();
    assert_eq!(data, vec![0, 1, 2, 3, 4], "{batch}");
}

#[tokio::test]
async fn a_waiting_poll_returns_when_a_message_arrives_and_poll_clients_publish() {
    let srv = start_default().await;
    let mut http = Http::h2(srv.addr).await;
    let sid = http.open().await;
    http.req(
        "POST",
        &format!("/poll/{sid}"),
        r#"[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"live"}}]"#,
    )
    .await;
    http.req("GET", &format!("/poll/{sid}"), "").await;

    let mut ws = json_client(srv.addr).await;
    subscribe_json(&mut ws, 2, "live").await;
    let mut poller = Http::h2(srv.addr).await;
    let path = format!("/poll/{sid}");
    let waiting = tokio::spawn(async move { poller.req("GET", &path, "").await });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // The poll client publishes; both it and the WebSocket client receive it.
    http.req(
        "POST",
        &format!("/poll/{sid}"),
        r#"{"id":3,"publish":{"channel":"live","data":"hello"}}"#,
    )
    .await;
    let (status, got) = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("poll never returned")
        .expect("task");
    assert_eq!(status, 200);
    assert!(
        got.as_array()
            .expect("array")
            .iter()
            .any(|m| m["pub"]["data"] == "hello"),
        "{got}"
    );
    assert_eq!(recv_json(&mut ws).await["pub"]["data"], "hello");
}

#[tokio::test]
async fn empty_poll_times_out_and_bad_requests_are_refused() {
    let srv = start(ServeArgs {
        poll_timeout: Some(1),
        ..Default::default()
    })
    .await;
    let mut http = Http::h1(srv.addr).await;
    let sid = http.open().await;
    let (status, body) = http.req("GET", &format!("/poll/{sid}"), "").await;
    assert_eq!((status, body), (200, json!([])));

    let (status, body) = http
        .req("GET", "/poll/0123456789abcdef0123456789abcdef", "")
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = http.req("PUT", &format!("/poll/{sid}"), "").await;
    assert_eq!(status, 405);
    let (status, _) = http.req("POST", &format!("/poll/{sid}"), "[not json").await;
    assert_eq!(status, 400);
    // A malformed single command is answered through the poll, like elsewhere.
    http.req("POST", &format!("/poll/{sid}"), "{oops").await;
    let (_, got) = http.req("GET", &format!("/poll/{sid}"), "").await;
    assert_eq!(got[0]["error"]["code"], 103, "{got}");

    let (status, _) = http.req("DELETE", &format!("/poll/{sid}"), "").await;
    assert_eq!(status, 204);
    let (status, _) = http.req("GET", &format!("/poll/{sid}"), "").await;
    assert_eq!(status, 404);
    assert_serving(srv.addr).await;
}

/// Publications of 2 KiB and more of JSON reach WebSocket and long-polling
/// subscribers as the same text as small ones, verbatim and in order: the
/// hub splices such data into the push instead of copying it
/// (`Frame::Spliced`), and both the socket driver and the poll answer must
/// write every piece.
#[tokio::test]
async fn large_json_publications_arrive_whole_on_websocket_and_long_polling() {
    let srv = start_default().await;
    let mut http = Http::h1(srv.addr).await;
    let sid = http.open().await;
    http.req(
        "POST",
        &format!("/poll/{sid}"),
        r#"[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"big"}}]"#,
    )
    .await;
    http.req("GET", &format!("/poll/{sid}"), "").await;
    let mut sub = json_client(srv.addr).await;
    subscribe_json(&mut sub, 2, "big").await;

    // Spaces kept: the data travels as the publisher's own text.
    let rows: Vec<String> = (0..60)
        .map(|i| format!(r#"[{i}, "2022-03-29T20:35:56.581Z", 116.9232297, "c{i:05}"]"#))
        .collect();
    let big = format!("[{}]", rows.join(", "));
    assert!(big.len() >= herald_core::hub::SPLICE_MIN);
    let mut ws = json_client(srv.addr).await;
    for data in ["1", big.as_str(), "2", big.as_str(), "3"] {
        let msg = format!(r#"{{"publish":{{"channel":"big","data":{data}}}}}"#);
        ws.send(Message::text(msg)).await.expect("send");
    }
    send_json(&mut ws, json!({"id": 9, "ping": {}})).await;
    assert_eq!(recv_json(&mut ws).await["id"], 9);

    for (offset, data) in [(1, "1"), (2, &big), (3, "2"), (4, &big), (5, "3")] {
        match next_msg(&mut sub).await {
            Message::Text(t) => assert_eq!(
                t.as_str(),
                format!(r#"{{"pub":{{"channel":"big","offset":{offset},"data":{data}}}}}"#)
            ),
            other => panic!("expected text, got {other:?}"),
        }
    }
    let (_, batch) = http.req("GET", &format!("/poll/{sid}"), "").await;
    let big_value: serde_json::Value = serde_json::from_str(&big).expect("json");
    let got: Vec<&serde_json::Value> = batch
        .as_array()
        .expect("array")
        .iter()
        .map(|m| &m["pub"]["data"])
        .collect();
    assert_eq!(
        got,
        [&json!(1), &big_value, &json!(2), &big_value, &json!(3)],
        "{batch}"
    );
}
