//! Test harness: a real server on 127.0.0.1:0 through the same `run` the binary
//! uses, real WebSocket clients (tokio-tungstenite, an implementation independent
//! of ours), and raw sockets for frames no well-behaved client would send.
#![allow(dead_code, missing_docs)]

use futures_util::{SinkExt, StreamExt};
use herald_server::{ServeArgs, ServerConfig};
use serde_json::Value;
use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Upper bound for any single wait in a test: generous, only to turn a hang
/// into a failure.
pub const WAIT: Duration = Duration::from_secs(10);

pub struct TestServer {
    pub addr: SocketAddr,
    /// The raw TCP transport's address, when started with `start_with_tcp`.
    pub tcp_addr: Option<SocketAddr>,
    pub shutdown: CancellationToken,
    pub handle: JoinHandle<()>,
}

pub async fn start(args: ServeArgs) -> TestServer {
    start_listeners(args, false).await
}

/// Also serves the raw TCP transport on its own ephemeral port.
pub async fn start_with_tcp(args: ServeArgs) -> TestServer {
    start_listeners(args, true).await
}

async fn start_listeners(args: ServeArgs, with_tcp: bool) -> TestServer {
    start_config(ServerConfig::resolve(args).expect("config"), with_tcp).await
}

/// Runs a server with a configuration made by hand (fields no flag sets).
pub async fn start_config(config: ServerConfig, with_tcp: bool) -> TestServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let tcp = if with_tcp {
        Some(TcpListener::bind("127.0.0.1:0").await.expect("bind tcp"))
    } else {
        None
    };
    let tcp_addr = tcp.as_ref().map(|l| l.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let handle = tokio::spawn(async move {
        let listeners = herald_server::Listeners {
            http: listener,
            tcp,
        };
        herald_server::run(listeners, config, herald_server::testing::games(), token)
            .await
            .expect("server run");
    });
    TestServer {
        addr,
        tcp_addr,
        shutdown,
        handle,
    }
}

pub async fn start_default() -> TestServer {
    start(ServeArgs::default()).await
}

pub async fn connect(addr: SocketAddr, path: &str, protocol: Option<&str>) -> Ws {
    let mut req = format!("ws://{addr}{path}")
        .into_client_request()
        .expect("request");
    if let Some(p) = protocol {
        req.headers_mut()
            .insert("sec-websocket-protocol", p.parse().expect("header"));
    }
    let (ws, resp) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(req))
        .await
        .expect("connect timeout")
        .expect("connect");
    if let Some(p) = protocol {
        assert_eq!(
            resp.headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok()),
            Some(p)
        );
    }
    ws
}

/// Next data message (pings/pongs skipped), or panics after WAIT.
pub async fn next_msg(ws: &mut Ws) -> Message {
    loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("timed out waiting for a message")
            .expect("stream ended")
            .expect("websocket error");
        match m {
            Message::Ping(_) | Message::Pong(_) => continue,
            m => return m,
        }
    }
}

pub async fn send_json(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.expect("send");
}

/// Sends `v` (a command with an `id`) and returns the reply with that id,
/// skipping pushes and other replies that come first.
pub async fn request(ws: &mut Ws, v: Value) -> Value {
    let id = v["id"].clone();
    send_json(ws, v).await;
    loop {
        let m = recv_json(ws).await;
        if m["id"] == id {
            return m;
        }
    }
}

pub async fn recv_json(ws: &mut Ws) -> Value {
    match next_msg(ws).await {
        Message::Text(t) => serde_json::from_str(t.as_str()).expect("server sent invalid JSON"),
        other => panic!("expected a text message, got {other:?}"),
    }
}

/// Connects on /ws with JSON and completes `connect`.
pub async fn json_client(addr: SocketAddr) -> Ws {
    let mut ws = connect(addr, "/ws", Some("herald.json")).await;
    send_json(&mut ws, serde_json::json!({"id": 1, "connect": {}})).await;
    let r = recv_json(&mut ws).await;
    assert_eq!(r["id"], 1, "{r}");
    assert!(r["connect"]["client"].is_string(), "{r}");
    ws
}

pub async fn subscribe_json(ws: &mut Ws, id: u32, channel: &str) {
    send_json(
        ws,
        serde_json::json!({"id": id, "subscribe": {"channel": channel}}),
    )
    .await;
    let r = recv_json(ws).await;
    assert_eq!(r["id"], id, "{r}");
    assert!(r["subscribe"].is_object(), "subscribe failed: {r}");
}

/// Waits for the close frame and returns its code.
pub async fn close_code(ws: &mut Ws) -> u16 {
    loop {
        let m = tokio::time::timeout(WAIT, ws.next())
            .await
            .expect("timed out waiting for close");
        match m {
            Some(Ok(Message::Close(Some(CloseFrame { code, .. })))) => return code.into(),
            Some(Ok(Message::Close(None))) => panic!("close without code"),
            Some(Ok(_)) => continue,
            Some(Err(e)) => panic!("error instead of close frame: {e}"),
            None => panic!("stream ended without close frame"),
        }
    }
}

/// A raw client: our own handshake, then hand-crafted frames.
pub struct Raw {
    pub stream: TcpStream,
    pub buf: Vec<u8>,
}

impl Raw {
    pub async fn connect(addr: SocketAddr, path: &str, protocol: Option<&str>) -> Raw {
        let mut stream = TcpStream::connect(addr).await.expect("tcp connect");
        let key = herald_ws::generate_key();
        let mut req = Vec::new();
        let protos: Vec<&str> = protocol.into_iter().collect();
        herald_ws::write_client_request(&mut req, &addr.to_string(), path, &key, &protos);
        stream.write_all(&req).await.expect("write handshake");
        let mut buf = Vec::new();
        loop {
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, stream.read(&mut chunk))
                .await
                .expect("handshake timeout")
                .expect("read");
            assert!(n > 0, "server closed during handshake");
            buf.extend_from_slice(&chunk[..n]);
            if let Some((_, head)) =
                herald_ws::parse_client_response(&buf, &key).expect("bad handshake response")
            {
                buf.drain(..head);
                return Raw { stream, buf };
            }
        }
    }

    pub async fn send_frame(&mut self, opcode: herald_ws::OpCode, payload: &[u8]) {
        let mut out = bytes::BytesMut::new();
        herald_ws::encode_frame(&mut out, opcode, payload, Some(herald_ws::random_mask()));
        self.stream.write_all(&out).await.expect("write frame");
    }

    pub async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("write raw");
    }

    /// Reads until the next text message and returns it as JSON.
    pub async fn next_json(&mut self) -> Value {
        let mut dec = herald_ws::Decoder::new(herald_ws::Role::Client, 1 << 24);
        loop {
            let mut found = None;
            let mut used = 0;
            match dec.decode(&mut self.buf) {
                Ok(Some((n, msg))) => {
                    used = n;
                    if let Some(herald_ws::Message::Text(t)) = msg {
                        found = Some(serde_json::from_slice(t).expect("json"));
                    }
                }
                Ok(None) => {}
                Err(e) => panic!("server sent a bad frame: {e}"),
            }
            if used > 0 {
                self.buf.drain(..used);
                if let Some(v) = found {
                    return v;
                }
                continue;
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
                .await
                .expect("timed out waiting for a message")
                .expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads frames until a close frame arrives; returns its code (None on EOF
    /// without a close frame).
    pub async fn close_code(&mut self) -> Option<u16> {
        let mut dec = herald_ws::Decoder::new(herald_ws::Role::Client, 1 << 24);
        loop {
            let mut off = 0;
            loop {
                match dec.decode(&mut self.buf[off..]) {
                    Ok(Some((n, msg))) => {
                        off += n;
                        if let Some(herald_ws::Message::Close(code, _)) = msg {
                            return code;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => panic!("server sent a bad frame: {e}"),
                }
            }
            self.buf.drain(..off);
            let mut chunk = [0u8; 65536];
            let n = tokio::time::timeout(WAIT, self.stream.read(&mut chunk))
                .await
                .expect("timed out waiting for close")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Proves a server is still serving others: a fresh client subscribes,
/// publishes and receives its own publication.
pub async fn assert_serving(addr: SocketAddr) {
    let mut ws = json_client(addr).await;
    subscribe_json(&mut ws, 2, "still-alive").await;
    send_json(
        &mut ws,
        serde_json::json!({"id": 3, "publish": {"channel": "still-alive", "data": {"ok": true}}}),
    )
    .await;
    let mut got_pub = false;
    let mut got_reply = false;
    while !(got_pub && got_reply) {
        let m = recv_json(&mut ws).await;
        if m["pub"]["data"]["ok"] == true {
            got_pub = true;
        } else if m["id"] == 3 {
            got_reply = true;
        } else {
            panic!("unexpected {m}");
        }
    }
}

/// One HTTP/1.1 request on a fresh connection: status, headers and body text.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, http::HeaderMap, String) {
    use http_body_util::BodyExt;
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(addr).await.expect("connect"));
    let (mut send, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .expect("request");
    let resp = tokio::time::timeout(WAIT, send.send_request(req))
        .await
        .expect("response timeout")
        .expect("send");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = if status == 200
        && headers
            .get("content-type")
            .is_some_and(|v| v == "text/event-stream")
    {
        // A stream never ends: the caller only wanted to know it opened.
        String::new()
    } else {
        let bytes = tokio::time::timeout(WAIT, resp.into_body().collect())
            .await
            .expect("body timeout")
            .expect("body")
            .to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (status, headers, body)
}

/// A JSON client that sends `connect` with `token` and returns the answer
/// (a connect reply or an error).
pub async fn connect_with_token(addr: SocketAddr, token: Option<&str>) -> (Ws, Value) {
    let mut ws = connect(addr, "/ws", Some("herald.json")).await;
    let body = match token {
        Some(t) => serde_json::json!({"id": 1, "connect": {"token": t}}),
        None => serde_json::json!({"id": 1, "connect": {}}),
    };
    send_json(&mut ws, body).await;
    let r = recv_json(&mut ws).await;
    (ws, r)
}

/// A temporary file with `contents`, unique to this process and `name`.
pub fn temp_file(name: &str, contents: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("herald-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("write temp file");
    path
}

/// Runs `promtool check metrics` on `text`. Without promtool the check is
/// skipped loudly, except under CI, where scripts/test.sh installs it.
pub fn promtool_check(text: &str) {
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "promtool is required under CI (apt-get install prometheus): {e}"
            );
            eprintln!("\n!!!!! promtool not found ({e}): SKIPPING `promtool check metrics`; install Debian's `prometheus` package !!!!!\n");
            return;
        }
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool: {report}\n{text}");
    assert!(
        report.trim().is_empty(),
        "promtool lint findings: {report}\n{text}"
    );
}

// ---------------------------------------------------------------- SSE

/// Reads an event stream, splitting it into events (lists of field lines);
/// the retry hint and comments are skipped, id-only events are not.
pub struct Events {
    pub body: hyper::body::Incoming,
    pub buf: String,
}

impl Events {
    /// The next event, skipping comments, `retry:` and ids without data
    /// (which fire no event in an `EventSource`).
    pub async fn next(&mut self) -> Vec<String> {
        loop {
            let block = self.next_block().await;
            if block.iter().any(|l| !l.starts_with("id:")) {
                return block;
            }
        }
    }

    /// The next block up to a blank line, skipping comments and `retry:`.
    pub async fn next_block(&mut self) -> Vec<String> {
        use http_body_util::BodyExt;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let event: Vec<String> = self.buf[..end].lines().map(str::to_string).collect();
                self.buf.drain(..end + 2);
                if event
                    .iter()
                    .all(|l| l.starts_with(':') || l.starts_with("retry:"))
                {
                    continue;
                }
                return event;
            }
            let frame = tokio::time::timeout(WAIT, self.body.frame())
                .await
                .expect("timed out waiting for an event")
                .expect("stream ended")
                .expect("body error");
            if let Ok(data) = frame.into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
    }
}

impl Events {
    /// Waits for the server to end the stream; fails on any further event.
    pub async fn end(&mut self) {
        use http_body_util::BodyExt;
        while let Some(frame) = tokio::time::timeout(WAIT, self.body.frame())
            .await
            .expect("timed out waiting for the stream to end")
        {
            if let Ok(data) = frame.expect("body error").into_data() {
                self.buf.push_str(&String::from_utf8_lossy(&data));
            }
        }
        assert!(self.buf.trim().is_empty(), "more after: {:?}", self.buf);
    }
}

/// The value of `field` in an event.
pub fn field<'a>(event: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("{name}: ");
    event.iter().find_map(|l| l.strip_prefix(prefix.as_str()))
}

pub async fn sse(addr: SocketAddr, query: &str, last_event_id: Option<&str>) -> Events {
    use http_body_util::Empty;
    use hyper_util::rt::TokioIo;
    let io = TokioIo::new(TcpStream::connect(addr).await.expect("connect"));
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.expect("h1");
    tokio::spawn(conn);
    let mut req = http::Request::builder()
        .uri(format!("http://{addr}/sse?{query}"))
        .header("host", "localhost");
    if let Some(id) = last_event_id {
        req = req.header("last-event-id", id);
    }
    let resp = send
        .send_request(req.body(Empty::<bytes::Bytes>::new()).expect("request"))
        .await
        .expect("send");
    assert_eq!(resp.status(), 200);
    Events {
        body: resp.into_body(),
        buf: String::new(),
    }
}

/// Reads `n` publication events; returns (data, id) pairs.
pub async fn read_events(events: &mut Events, n: usize) -> Vec<(String, String)> {
    let mut got = Vec::new();
    for _ in 0..n {
        let e = events.next().await;
        assert!(field(&e, "event") != Some("herald"), "{e:?}");
        got.push((
            field(&e, "data").expect("data").to_string(),
            field(&e, "id").expect("id").to_string(),
        ));
    }
    got
}

/// An HS256 token for `user`, valid for an hour, signed with `secret` (the
/// server's `token_hmac_secret`).
pub fn user_token(secret: &str, user: &str) -> String {
    use herald_server::auth::jwt::{sign, Claims};
    use herald_server::auth::keys::SigningKey;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let claims = Claims {
        sub: user.into(),
        exp: Some(now + 3600),
        ..Claims::default()
    };
    sign(&claims, &SigningKey::hmac(secret.as_bytes()), None).expect("sign")
}

/// The metrics the table in `src/metrics.rs`'s module docs lists, with
/// their type: every `herald_…` name in its first column.
pub fn documented_metrics() -> Vec<(String, String)> {
    let src = include_str!("../../src/metrics.rs");
    let mut out = Vec::new();
    for row in src.lines().filter_map(|l| l.strip_prefix("//! | `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (Some(names), Some(kind)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        for name in names.split(", ") {
            let name = name.trim_matches('`');
            out.push((name.to_string(), kind.trim().to_string()));
        }
    }
    assert!(out.len() > 20, "no metrics table in src/metrics.rs");
    out
}

/// Checks that `/metrics` (its `# TYPE` lines) registers exactly the
/// documented metrics, each of its documented type; the `herald_cluster_*`
/// rows only when `cluster`.
pub fn assert_metrics_documented(text: &str, cluster: bool) {
    let mut rendered: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    let mut documented: Vec<(String, String)> = documented_metrics()
        .into_iter()
        // Cluster rows only in a cluster; the in-memory broker's only
        // outside one.
        .filter(|(n, _)| {
            if cluster {
                n != "herald_broker_channels"
            } else {
                !n.starts_with("herald_cluster_")
            }
        })
        .collect();
    rendered.sort();
    documented.sort();
    assert_eq!(
        rendered, documented,
        "/metrics and the table in src/metrics.rs disagree"
    );
}

/// How long [`subscribe_retrying`] retries: a node may still be learning
/// where Redis is (a new master after a fail-over, the slot map).
pub const SUBSCRIBE_WAIT: Duration = Duration::from_secs(30);

/// Subscribes with `sub`, again every 50 ms while the node refuses it;
/// fails the test after [`SUBSCRIBE_WAIT`]. The reply.
pub async fn subscribe_retrying(ws: &mut Ws, id: u32, sub: Value) -> Value {
    let deadline = std::time::Instant::now() + SUBSCRIBE_WAIT;
    loop {
        let r = request(ws, serde_json::json!({"id": id, "subscribe": sub.clone()})).await;
        if r["subscribe"].is_object() || std::time::Instant::now() > deadline {
            assert!(r["subscribe"].is_object(), "subscribe failed: {r}");
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Publishes `data` on `channel`, again every 50 ms while the node refuses
/// it (it may still be learning the cluster's map), for at most [`WAIT`];
/// the last answer.
pub async fn publish_retrying(ws: &mut Ws, id: u32, channel: &str, data: Value) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let r = request(
            ws,
            serde_json::json!({"id": id, "publish": {"channel": channel, "data": data.clone()}}),
        )
        .await;
        if r["publish"].is_object() || std::time::Instant::now() > deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Subscribes a fresh client on `sub_at` to `pattern` and, as soon as the
/// reply is in, publishes on `channel` (a fresh channel it matches) through
/// `publisher`, on another node. Then publishes on `channel` again until
/// something arrives through the pattern: true when the first publication
/// (offset 1) was what arrived first, false when it was missed. A channel's
/// publications arrive in offset order through a pattern, so this needs no
/// timing (the deadline only stops a hang).
pub async fn first_publication_arrives(
    sub_at: SocketAddr,
    publisher: &mut Ws,
    pattern: &str,
    channel: &str,
) -> bool {
    let mut sub = json_client(sub_at).await;
    let r = request(
        &mut sub,
        serde_json::json!({"id": 2, "subscribe": {"channel": pattern}}),
    )
    .await;
    assert!(r["subscribe"].is_object(), "{r}");
    let p = publish_retrying(publisher, 3, channel, Value::from("first")).await;
    assert_eq!(p["publish"]["offset"], 1, "{p}");
    let deadline = std::time::Instant::now() + WAIT;
    let mut id = 4;
    loop {
        match tokio::time::timeout(Duration::from_millis(300), recv_json(&mut sub)).await {
            Ok(m) if m["pub"]["channel"] == channel => return m["pub"]["offset"] == 1,
            Ok(_) => {}
            Err(_) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "nothing through {pattern}"
                );
                id += 1;
                publish_retrying(publisher, id, channel, Value::from("later")).await;
            }
        }
    }
}
