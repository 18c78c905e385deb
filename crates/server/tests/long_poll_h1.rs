//! Long-polling on one kept-alive HTTP/1.1 connection is served off hyper
//! (`serve_polls` in `crates/server/src/http/mod.rs`): read here byte for byte
//! from a raw socket — open, send, poll on the same connection, pipelined
//! requests, a body over the limit, `connection: close`, and a request of
//! another kind handed on to hyper.
mod common;

use common::*;
use serde_json::Value;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One HTTP/1.1 connection read as whole answers (content-length bodies).
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Conn {
        Conn {
            s: TcpStream::connect(addr).await.expect("connect"),
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, method: &str, path: &str, extra: &str, body: &str) {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\n{extra}\r\n{body}",
            body.len()
        );
        self.s.write_all(req.as_bytes()).await.expect("write");
    }

    /// The next answer: its head and body.
    async fn answer(&mut self) -> (String, String) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(end) = find(&self.buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |v| v.trim().parse::<usize>().expect("length"));
                if self.buf.len() >= end + 4 + len {
                    let body =
                        String::from_utf8_lossy(&self.buf[end + 4..end + 4 + len]).into_owned();
                    self.buf.drain(..end + 4 + len);
                    return (head, body);
                }
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout_at(deadline, self.s.read(&mut chunk))
                .await
                .expect("answer in time")
                .expect("read");
            assert!(n > 0, "EOF; got {:?}", String::from_utf8_lossy(&self.buf));
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn eof(&mut self) {
        let mut chunk = [0u8; 64];
        let n = tokio::time::timeout(WAIT, self.s.read(&mut chunk))
            .await
            .expect("EOF in time")
            .expect("read");
        assert_eq!(n, 0, "expected EOF, got {:?}", &chunk[..n]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[tokio::test]
async fn a_session_lives_on_one_kept_alive_connection() {
    let srv = start_default().await;
    let mut c = Conn::open(srv.addr).await;
    c.send("POST", "/poll", "", "").await;
    let (head, body) = c.answer().await;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(!head.contains("connection: close"), "{head}");
    let opened: Value = serde_json::from_str(&body).expect("json");
    let id = opened["session"].as_str().expect("session").to_string();

    // Send and poll pipelined in one write: both answered, in order.
    let cmds = r#"[{"id":1,"connect":{}},{"id":2,"subscribe":{"channel":"lp"}}]"#;
    let send = format!(
        "POST /poll/{id} HTTP/1.1\r\nhost: l\r\ncontent-length: {}\r\n\r\n{cmds}GET /poll/{id} HTTP/1.1\r\nhost: l\r\n\r\n",
        cmds.len()
    );
    c.s.write_all(send.as_bytes()).await.expect("write");
    let (head, body) = c.answer().await;
    assert!(head.starts_with("HTTP/1.1 202 Accepted"), "{head}");
    assert_eq!(body, "{}");
    let (head, body) = c.answer().await;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    let msgs: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(msgs[0]["id"], 1, "{msgs}");

    // A pending poll answers a publication.
    c.send("GET", &format!("/poll/{id}"), "", "").await;
    let (status, _, _) = http(
        srv.addr,
        "POST",
        "/api/publish",
        &[("content-type", "application/json")],
        r#"{"channel":"lp","data":"hello"}"#,
    )
    .await;
    assert_eq!(status, 200);
    let mut seen = String::new();
    while !seen.contains("\"hello\"") {
        let (head, body) = c.answer().await;
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        seen.push_str(&body);
        if !seen.contains("\"hello\"") {
            c.send("GET", &format!("/poll/{id}"), "", "").await;
        }
    }

    // Another kind of request: hyper answers it on the same connection.
    c.send("GET", "/healthz", "", "").await;
    let (head, body) = c.answer().await;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert_eq!(body, "ok\n");

    // The client asks to close: answered with connection: close, then EOF.
    let mut d = Conn::open(srv.addr).await;
    d.send(
        "DELETE",
        &format!("/poll/{id}"),
        "connection: close\r\n",
        "",
    )
    .await;
    let (head, _) = d.answer().await;
    assert!(head.starts_with("HTTP/1.1 204 No Content"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    d.eof().await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_and_the_connection_closed() {
    let srv = start_default().await;
    let mut c = Conn::open(srv.addr).await;
    c.send("POST", "/poll", "", "").await;
    let (_, body) = c.answer().await;
    let opened: Value = serde_json::from_str(&body).expect("json");
    let id = opened["session"].as_str().expect("session");
    let req = format!("POST /poll/{id} HTTP/1.1\r\nhost: l\r\ncontent-length: 999999999\r\n\r\n");
    c.s.write_all(req.as_bytes()).await.expect("write");
    let (head, body) = c.answer().await;
    assert!(head.starts_with("HTTP/1.1 413 Payload Too Large"), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert!(body.contains("\"code\":"), "{body}");
    c.eof().await;
}

#[tokio::test]
async fn an_unknown_session_is_404_and_the_connection_stays() {
    let srv = start_default().await;
    let mut c = Conn::open(srv.addr).await;
    for _ in 0..2 {
        c.send("GET", "/poll/nope", "", "").await;
        let (head, body) = c.answer().await;
        assert!(head.starts_with("HTTP/1.1 404 Not Found"), "{head}");
        assert!(body.contains("unknown or expired poll session"), "{body}");
    }
}
