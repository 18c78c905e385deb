//! Pusher test helpers shared by `pusher.rs` and `pusher_cluster.rs`: apps,
//! a Pusher client over tokio-tungstenite, the signed HTTP API as the server
//! SDKs call it, and a webhook receiver.
#![allow(dead_code)]

use crate::common::*;
use herald_pusher::sign;
use herald_server::config::Secret;
use herald_server::pusher::AppArgs;
use serde_json::{json, Value};
use std::net::SocketAddr;

pub const KEY: &str = "app-key";
pub const SECRET: &str = "app-secret";

pub fn app(id: &str, key: &str, secret: &str) -> AppArgs {
    AppArgs {
        id: id.into(),
        key: key.into(),
        secret: Some(Secret(secret.into())),
        secret_env: None,
        secret_file: None,
        namespace: None,
        webhook_url: None,
        webhook_events: None,
        webhook_ca_file: None,
        subscription_count: None,
    }
}

/// A Pusher message with its `data` string parsed (when it is JSON).
pub fn decode(v: Value) -> Value {
    let mut v = v;
    if let Some(s) = v["data"].as_str() {
        if let Ok(d) = serde_json::from_str::<Value>(s) {
            v["data"] = d;
        }
    }
    v
}

pub async fn recv(ws: &mut Ws) -> Value {
    decode(recv_json(ws).await)
}

/// Connects to app `key` and returns the socket and its socket id.
pub async fn pusher_client(addr: SocketAddr, key: &str) -> (Ws, String) {
    let mut ws = connect(addr, &format!("/app/{key}?protocol=7&client=test"), None).await;
    let m = recv(&mut ws).await;
    assert_eq!(m["event"], "pusher:connection_established", "{m}");
    assert_eq!(m["data"]["activity_timeout"], 120);
    let socket = m["data"]["socket_id"]
        .as_str()
        .expect("socket_id")
        .to_string();
    (ws, socket)
}

pub async fn subscribe(
    ws: &mut Ws,
    channel: &str,
    auth: Option<&str>,
    channel_data: Option<&str>,
) -> Value {
    let mut data = json!({"channel": channel});
    if let Some(a) = auth {
        data["auth"] = json!(a);
    }
    if let Some(d) = channel_data {
        data["channel_data"] = json!(d);
    }
    send_json(ws, json!({"event": "pusher:subscribe", "data": data})).await;
    recv(ws).await
}

pub async fn subscribed(
    ws: &mut Ws,
    channel: &str,
    socket: &str,
    channel_data: Option<&str>,
) -> Value {
    let auth = (channel.starts_with("private-") || channel.starts_with("presence-"))
        .then(|| sign::channel_auth(KEY, SECRET.as_bytes(), socket, channel, channel_data));
    let m = subscribe(ws, channel, auth.as_deref(), channel_data).await;
    assert_eq!(m["event"], "pusher_internal:subscription_succeeded", "{m}");
    assert_eq!(m["channel"], channel);
    m
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A signed HTTP API request, as the server SDKs make it.
pub async fn api(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
) -> (u16, String) {
    api_signed(addr, method, path, body, extra, KEY, SECRET, now()).await
}

#[allow(clippy::too_many_arguments)]
pub async fn api_signed(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
    extra: &[(&str, &str)],
    key: &str,
    secret: &str,
    ts: u64,
) -> (u16, String) {
    let q = sign::sign_query(
        key,
        secret.as_bytes(),
        method,
        path,
        body.as_bytes(),
        ts,
        extra,
    );
    let (status, _, text) = http(
        addr,
        method,
        &format!("{path}?{q}"),
        &[("content-type", "application/json")],
        body,
    )
    .await;
    (status, text)
}

pub async fn trigger(addr: SocketAddr, channel: &str, event: &str, data: &str) {
    let body = json!({"name": event, "channels": [channel], "data": data}).to_string();
    let (status, text) = api(addr, "POST", "/apps/1/events", &body, &[]).await;
    assert_eq!((status, text.as_str()), (200, "{}"));
}

/// What a webhook receiver hands on, per POST: its `x-pusher-key`,
/// `x-pusher-signature` and body.
pub type Hooks = tokio::sync::mpsc::UnboundedReceiver<(String, String, String)>;

/// The `events` of one webhook body.
fn events_of(body: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(body).expect("webhook body is json");
    v["events"].as_array().expect("events").clone()
}

/// Webhook events (the `events` of each POST) until at least `n` arrived.
pub async fn hook_events(rx: &mut Hooks, n: usize) -> Vec<Value> {
    let mut got = Vec::new();
    while got.len() < n {
        let (_, _, body) = tokio::time::timeout(std::time::Duration::from_secs(20), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("webhooks in time; so far {got:?}"))
            .expect("receiver running");
        got.extend(events_of(&body));
    }
    got
}

/// The webhook events that arrive within `wait`: what would be one too many.
pub async fn later_hook_events(rx: &mut Hooks, wait: std::time::Duration) -> Vec<Value> {
    tokio::time::sleep(wait).await;
    let mut got = Vec::new();
    while let Ok((_, _, body)) = rx.try_recv() {
        got.extend(events_of(&body));
    }
    got
}

/// A webhook receiver: answers 200 to every POST and hands on its
/// `x-pusher-key`, `x-pusher-signature` and body.
pub async fn webhook_receiver() -> (String, Hooks) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/hooks", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            serve_hook(s, &tx).await;
        }
    });
    (url, rx)
}

/// The same over TLS, as `https://localhost:PORT/hooks` with a fresh
/// self-signed certificate; also returns the certificate's PEM file.
pub async fn tls_webhook_receiver() -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(String, String, String)>,
    std::path::PathBuf,
) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let cert = temp_file("hook-cert.pem", &certified.cert.pem());
    let key = temp_file("hook-key.pem", &certified.key_pair.serialize_pem());
    let acceptor = herald_server::tls::acceptor(&cert, &key).expect("acceptor");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let url = format!("https://localhost:{port}/hooks");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            if let Ok(s) = acceptor.accept(s).await {
                serve_hook(s, &tx).await;
            }
        }
    });
    (url, rx, cert)
}

/// Reads one POST from `s`, hands it on, answers 200.
async fn serve_hook<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    tx: &tokio::sync::mpsc::UnboundedSender<(String, String, String)>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, body) = loop {
        let n = s.read(&mut chunk).await.expect("read");
        assert!(n > 0, "request cut short");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("content-length");
        if buf.len() >= end + 4 + len {
            break (
                head,
                String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned(),
            );
        }
    };
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")).map(str::to_string))
            .unwrap_or_default()
    };
    let _ = tx.send((header("x-pusher-key"), header("x-pusher-signature"), body));
    let _ = s
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
        .await;
    let _ = s.shutdown().await;
}

/// Reads `pusher_internal:subscription_count` events of `channel` until one
/// counts `n` (throttling may merge several changes into one event); any
/// other message fails the test.
pub async fn count_reaches(ws: &mut Ws, channel: &str, n: u64) {
    loop {
        let m = recv(ws).await;
        assert_eq!(m["event"], "pusher_internal:subscription_count", "{m}");
        assert_eq!(m["channel"], channel, "{m}");
        if m["data"]["subscription_count"].as_u64() == Some(n) {
            return;
        }
    }
}
